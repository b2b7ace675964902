#!/usr/bin/env python3
"""A full-size Llama-shaped checkpoint for benchmarks (wafersim bench weights).

Writes config.json and bf16 safetensors shards of the shape of a published
Llama (the tensors' names, shapes and dtypes as Hugging Face ships them),
streamed tensor by tensor so that an 8B model needs little memory. The values
are random normal bf16 bits drawn once into a pool and reused at shifting
offsets: realistic for a loader's speed and memory, meaningless as a model.

    make_sized_checkpoint.py OUT_DIR --like llama-3.1-8b [--shards 4]
"""
import argparse
import json
import os
import struct

import numpy as np

SHAPES = {  # config.json of each (huggingface.co/meta-llama/<name>), the keys a loader needs
    "llama-3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                         vocab_size=128256, max_position_embeddings=131072,
                         tie_word_embeddings=True),
    "llama-3.1-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                         vocab_size=128256, max_position_embeddings=131072,
                         tie_word_embeddings=False),
}


def tensors(c):
    h, inter = c["hidden_size"], c["intermediate_size"]
    q, kv = c["num_attention_heads"] * c["head_dim"], c["num_key_value_heads"] * c["head_dim"]
    yield "model.embed_tokens.weight", (c["vocab_size"], h)
    for l in range(c["num_hidden_layers"]):
        b = "model.layers.%d." % l
        yield b + "input_layernorm.weight", (h,)
        yield b + "self_attn.q_proj.weight", (q, h)
        yield b + "self_attn.k_proj.weight", (kv, h)
        yield b + "self_attn.v_proj.weight", (kv, h)
        yield b + "self_attn.o_proj.weight", (h, q)
        yield b + "post_attention_layernorm.weight", (h,)
        yield b + "mlp.gate_proj.weight", (inter, h)
        yield b + "mlp.up_proj.weight", (inter, h)
        yield b + "mlp.down_proj.weight", (h, inter)
    yield "model.norm.weight", (h,)
    if not c["tie_word_embeddings"]:
        yield "lm_head.weight", (c["vocab_size"], h)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--like", required=True, choices=sorted(SHAPES))
    ap.add_argument("--shards", type=int, default=1)
    args = ap.parse_args()
    c = dict(SHAPES[args.like], model_type="llama", architectures=["LlamaForCausalLM"],
             rms_norm_eps=1e-5, rope_theta=500000.0, torch_dtype="bfloat16")
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    pool = (rng.standard_normal(1 << 25).astype(np.float32) * 0.02).view(np.uint32)
    pool = ((pool + 0x7FFF + ((pool >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
    items = list(tensors(c))
    total = sum(2 * int(np.prod(s)) for _, s in items)
    groups, acc = [[] for _ in range(args.shards)], 0
    for name, shape in items:
        groups[min(acc * args.shards // total, args.shards - 1)].append((name, shape))
        acc += 2 * int(np.prod(shape))
    weight_map, start = {}, 0
    for k, group in enumerate(groups):
        fname = ("model.safetensors" if args.shards == 1
                 else "model-%05d-of-%05d.safetensors" % (k + 1, args.shards))
        header, off = {}, 0
        for name, shape in group:
            n = 2 * int(np.prod(shape))
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
            off += n
            weight_map[name] = fname
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(os.path.join(args.out_dir, fname), "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for name, shape in group:
                n = 2 * int(np.prod(shape))
                while n > 0:
                    start = (start + 7919 * 2) % (len(pool) // 2)
                    chunk = pool[start:start + min(n, len(pool) - start)]
                    f.write(chunk)
                    n -= len(chunk)
    if args.shards > 1:
        with open(os.path.join(args.out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)


if __name__ == "__main__":
    main()
