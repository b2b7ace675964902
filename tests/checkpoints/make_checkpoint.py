#!/usr/bin/env python3
"""Writes a tiny Hugging Face model folder for tests: config.json,
model.safetensors (or shards and model.safetensors.index.json) and a
byte-level BPE tokenizer.json, with seeded random weights.

    make_checkpoint.py OUT_DIR --model-type TYPE [--dtype bf16|f16|f32]
                       [--seed N] [--shards N] [--fp8]
                       [--rope-scaling llama3] [--attention-bias]

TYPE is llama, mistral, qwen2, qwen3, qwen3_moe, mixtral or gpt2. Tensor
names and layouts are Hugging Face's (gpt2's Conv1D weights [in][out] under
"transformer."; mixtral's block_sparse_moe.gate / experts.E.w1,w2,w3;
qwen3_moe's mlp.gate / mlp.experts.E.{gate,up,down}_proj). --fp8 stores the
linear layers' weights as F8_E4M3 with a per-row F32 `weight_scale` [rows, 1]
beside each, as compressed-tensors "float-quantized" checkpoints do (channel
strategy; the router and lm_head stay unquantized, as llm-compressor leaves
them). Everything is seeded: the same arguments give the same bytes.

Scales are chosen so that greedy decoding is decided by wide margins and
generations vary: linear weights of std 1/sqrt(fan_in) (output projections
2/sqrt(fan_in)), norm gains near 1, unit embeddings with an lm_head of std
4/sqrt(hidden), or embeddings of std 0.25 where they are tied to the lm_head.
Logits then spread over several units, and a float32 implementation picks the
same argmax as a float64 one. Needs NumPy.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree when tests run this
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import byte_bpe  # noqa: E402

MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "gpt2")

VOCAB_SIZE = 512  # config vocab_size: the tokenizer's ids plus unused padding rows
MERGES = 240  # 256 bytes + 240 merges + <|endoftext|> = 497 ids
MAX_POSITION = 128

# The text the tokenizer's merges are learned on: English with contractions,
# digits and punctuation, and a little of other scripts.
CORPUS = """\
The wafer is one large chip. Its cores sit in a grid, and each core talks to
its four neighbours over short links. A model's weights are cut into tiles and
spread over the cores, so that every core holds a small piece of every matrix.
When a token arrives, the cores multiply their tiles by the token's vector and
pass the partial sums along the rows; the last core in a row adds them up.
Attention needs the keys and values of all earlier tokens. They're kept in the
cores' memory as a cache that grows by one row for every new token. We'd like
the cache to stay small, so it's spread over many cores, too.
The simulator counts cycles: 1 cycle per hop, 16 lanes per core, 48 KiB of
memory per core, 900000 cores on the wafer. It doesn't model heat or power yet,
and it won't until the timing model is right. Numbers like 3.14, 2048 and
1e-6 should split into digits and punctuation.
Tokens are pieces of words: the tokenizer learns which pairs of bytes appear
together most often, and merges them into longer pieces, again and again.
It isn't clever, but it's fast, and it never fails: every byte is a token.
Other scripts work too: café, naïve, Straße, Ελληνικά, Привет мир, 日本語の
テキスト, 中文, 한국어, and symbols such as €, — and 🙂 are bytes like any other.
"""

EOT = "<|endoftext|>"
# Output projections (o_proj, down_proj, experts' w2 / down_proj, gpt2's
# c_proj) at twice the usual std, so that the layers move the residual stream
# well away from the token's own embedding (less repetitive generations).
OUT = 2.0


def sizes(model_type):
    """The tiny shapes of each family (HF config keys of the llama family)."""
    base = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                vocab_size=VOCAB_SIZE, max_position_embeddings=MAX_POSITION)
    if model_type in ("qwen3", "qwen3_moe"):
        # head_dim * heads (128) != hidden_size (64), as in real Qwen3 models.
        base.update(head_dim=32, intermediate_size=128)
    if model_type in ("mixtral", "qwen3_moe"):
        base.update(num_hidden_layers=3)
    return base


def hf_config(model_type, dtype, fp8, eot_id, rope_scaling=None, attention_bias=False):
    torch_dtype = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}[dtype]
    common = dict(bos_token_id=eot_id, eos_token_id=eot_id, torch_dtype=torch_dtype,
                  use_cache=True, transformers_version="4.51.0")
    if model_type == "gpt2":
        c = dict(architectures=["GPT2LMHeadModel"], model_type="gpt2", n_embd=64, n_layer=2,
                 n_head=4, n_inner=None, n_positions=MAX_POSITION, n_ctx=MAX_POSITION,
                 vocab_size=VOCAB_SIZE, layer_norm_epsilon=1e-5, activation_function="gelu_new",
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.02,
                 scale_attn_weights=True, tie_word_embeddings=True, **common)
        return c
    c = dict(sizes(model_type))
    c.update(model_type=model_type, hidden_act="silu", attention_dropout=0.0,
             initializer_range=0.02, rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=None,
             tie_word_embeddings=False, **common)
    if model_type == "llama":
        c.update(architectures=["LlamaForCausalLM"], attention_bias=False, mlp_bias=False,
                 rms_norm_eps=1e-5)
    elif model_type == "mistral":
        # A window shorter than a test's prompt plus generation.
        c.update(architectures=["MistralForCausalLM"], sliding_window=5)
    elif model_type == "qwen2":
        c.update(architectures=["Qwen2ForCausalLM"], tie_word_embeddings=True,
                 use_sliding_window=False, sliding_window=None, max_window_layers=2,
                 rope_theta=1000000.0)
    elif model_type == "qwen3":
        c.update(architectures=["Qwen3ForCausalLM"], tie_word_embeddings=True,
                 attention_bias=False, use_sliding_window=False, sliding_window=None,
                 max_window_layers=2, rope_theta=1000000.0)
    elif model_type == "qwen3_moe":
        c.update(architectures=["Qwen3MoeForCausalLM"], attention_bias=False,
                 use_sliding_window=False, sliding_window=None, max_window_layers=3,
                 rope_theta=1000000.0, num_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=48, norm_topk_prob=True, decoder_sparse_step=1,
                 mlp_only_layers=[], router_aux_loss_coef=0.001, output_router_logits=False)
    elif model_type == "mixtral":
        c.update(architectures=["MixtralForCausalLM"], num_local_experts=4,
                 num_experts_per_tok=2, intermediate_size=96, sliding_window=6,
                 rms_norm_eps=1e-5, router_aux_loss_coef=0.02, output_router_logits=False)
    if rope_scaling == "llama3":
        # Llama 3.1's scheme, shrunk so that it bites within 128 positions: of
        # head_dim 16's wavelengths (6.3 ... 19869 at theta 10000), those
        # above 32 are slowed by 8, those between 8 and 32 interpolated.
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    if attention_bias:
        c["attention_bias"] = True
    if fp8:
        router = "re:.*block_sparse_moe.gate$" if model_type == "mixtral" else "re:.*mlp.gate$"
        c["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "type": "float", "strategy": "channel",
                            "symmetric": True, "dynamic": False, "group_size": None,
                            "block_structure": None, "actorder": None, "observer": "minmax",
                            "observer_kwargs": {}},
                "input_activations": None,
                "output_activations": None}},
            "ignore": ["lm_head", router],
            "kv_cache_scheme": None,
            "sparsity_config": {},
        }
    return c


class TensorSource:
    """Seeded tensors in a fixed order: name -> float32 array, plus whether the
    tensor is a linear layer's weight (what --fp8 quantizes)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors = []  # (name, float32 array, is_linear)

    def normal(self, name, shape, std, mean=0.0, linear=False):
        v = mean + std * self.rng.standard_normal(shape)
        self.tensors.append((name, v.astype(np.float32), linear))

    def linear(self, name, out_features, in_features, gain=1.0):
        self.normal(name, (out_features, in_features), gain / np.sqrt(in_features), linear=True)

    def gain(self, name, n):
        self.normal(name, (n,), 0.1, mean=1.0)


def embedding_std(c):
    """Unit embeddings, but smaller when they are also the lm_head: logits
    are then embedding . hidden, and a large embedding of the current token
    in the residual stream makes every model repeat its last token."""
    return 0.25 if c["tie_word_embeddings"] else 1.0


def llama_family_tensors(src, c):
    mt = c["model_type"]
    h, q, kv = c["hidden_size"], c["num_attention_heads"] * c["head_dim"], \
        c["num_key_value_heads"] * c["head_dim"]
    src.normal("model.embed_tokens.weight", (c["vocab_size"], h), embedding_std(c))
    for l in range(c["num_hidden_layers"]):
        b = "model.layers.%d." % l
        src.gain(b + "input_layernorm.weight", h)
        src.linear(b + "self_attn.q_proj.weight", q, h)
        src.linear(b + "self_attn.k_proj.weight", kv, h)
        src.linear(b + "self_attn.v_proj.weight", kv, h)
        src.linear(b + "self_attn.o_proj.weight", h, q, OUT)
        if mt == "qwen2" or c.get("attention_bias"):
            for p, n in (("q", q), ("k", kv), ("v", kv)):
                src.normal(b + "self_attn.%s_proj.bias" % p, (n,), 0.1)
        if mt != "qwen2" and c.get("attention_bias"):  # llama, qwen3: o_proj too
            src.normal(b + "self_attn.o_proj.bias", (h,), 0.1)
        if mt in ("qwen3", "qwen3_moe"):
            src.gain(b + "self_attn.q_norm.weight", c["head_dim"])
            src.gain(b + "self_attn.k_norm.weight", c["head_dim"])
        src.gain(b + "post_attention_layernorm.weight", h)
        if mt == "mixtral":
            m = b + "block_sparse_moe."
            e_count, inter = c["num_local_experts"], c["intermediate_size"]
            src.normal(m + "gate.weight", (e_count, h), 2.0 / np.sqrt(h))
            for e in range(e_count):
                x = m + "experts.%d." % e
                src.linear(x + "w1.weight", inter, h)
                src.linear(x + "w2.weight", h, inter, OUT)
                src.linear(x + "w3.weight", inter, h)
        elif mt == "qwen3_moe" and l not in c["mlp_only_layers"] and \
                (l + 1) % c["decoder_sparse_step"] == 0:
            e_count, inter = c["num_experts"], c["moe_intermediate_size"]
            src.normal(b + "mlp.gate.weight", (e_count, h), 2.0 / np.sqrt(h))
            for e in range(e_count):
                x = b + "mlp.experts.%d." % e
                src.linear(x + "gate_proj.weight", inter, h)
                src.linear(x + "up_proj.weight", inter, h)
                src.linear(x + "down_proj.weight", h, inter, OUT)
        else:
            inter = c["intermediate_size"]
            src.linear(b + "mlp.gate_proj.weight", inter, h)
            src.linear(b + "mlp.up_proj.weight", inter, h)
            src.linear(b + "mlp.down_proj.weight", h, inter, OUT)
    src.gain("model.norm.weight", h)
    if not c["tie_word_embeddings"]:
        src.normal("lm_head.weight", (c["vocab_size"], h), 4.0 / np.sqrt(h))


def gpt2_tensors(src, c):
    h, inter = c["n_embd"], c["n_inner"] or 4 * c["n_embd"]
    p = "transformer."
    src.normal(p + "wte.weight", (c["vocab_size"], h), embedding_std(c))
    src.normal(p + "wpe.weight", (c["n_positions"], h), 0.3)
    for l in range(c["n_layer"]):
        b = p + "h.%d." % l
        # Conv1D weights are [in][out]: fan_in is the first dimension.
        src.gain(b + "ln_1.weight", h)
        src.normal(b + "ln_1.bias", (h,), 0.1)
        src.normal(b + "attn.c_attn.weight", (h, 3 * h), 1.0 / np.sqrt(h))
        src.normal(b + "attn.c_attn.bias", (3 * h,), 0.1)
        src.normal(b + "attn.c_proj.weight", (h, h), OUT / np.sqrt(h))
        src.normal(b + "attn.c_proj.bias", (h,), 0.1)
        src.gain(b + "ln_2.weight", h)
        src.normal(b + "ln_2.bias", (h,), 0.1)
        src.normal(b + "mlp.c_fc.weight", (h, inter), 1.0 / np.sqrt(h))
        src.normal(b + "mlp.c_fc.bias", (inter,), 0.1)
        src.normal(b + "mlp.c_proj.weight", (inter, h), OUT / np.sqrt(inter))
        src.normal(b + "mlp.c_proj.bias", (h,), 0.1)
    src.gain(p + "ln_f.weight", h)
    src.normal(p + "ln_f.bias", (h,), 0.1)


# --- storage formats -------------------------------------------------------

def to_bf16_bits(v):
    """float32 -> bfloat16 bits, rounding to nearest, ties to even."""
    bits = v.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def e4m3_values():
    """The values of the 127 non-negative finite OCP FP8 E4M3 codes 0x00-0x7e
    (bias 7, subnormals m/8 * 2^-6; 0x7f is NaN; no infinities; max 448)."""
    out = []
    for code in range(0x7F):
        e, m = code >> 3, code & 7
        out.append(m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(out)


E4M3 = e4m3_values()  # increasing with the code


def to_e4m3(x):
    """float64 -> E4M3 codes, rounding to nearest, ties to the even code (the
    even mantissa), saturating at +-448."""
    mag = np.minimum(np.abs(x), E4M3[-1])
    hi = np.clip(np.searchsorted(E4M3, mag), 1, len(E4M3) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - E4M3[lo], E4M3[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    return code | np.where(np.signbit(x) & (code != 0), 0x80, 0).astype(np.uint8)


def encode(values, dtype):
    """(safetensors dtype name, little-endian bytes) of float32 `values`."""
    if dtype == "f32":
        return "F32", values.astype("<f4").tobytes()
    if dtype == "f16":
        return "F16", values.astype("<f2").tobytes()
    if dtype == "bf16":
        return "BF16", to_bf16_bits(values).astype("<u2").tobytes()
    raise ValueError(dtype)


def stored_tensors(src, dtype, fp8):
    """(name, safetensors dtype, shape, bytes) in order."""
    out = []
    for name, v, linear in src.tensors:
        if fp8 and linear:
            # Per output row: scale = max|row| / 448, code = E4M3(w / scale).
            w = v.astype(np.float64)
            scale = (np.abs(w).max(axis=1, keepdims=True) / 448.0).astype(np.float32)
            codes = to_e4m3(w / scale.astype(np.float64))
            out.append((name, "F8_E4M3", list(v.shape), codes.tobytes()))
            out.append((name[:-len("weight")] + "weight_scale", "F32", [v.shape[0], 1],
                        scale.astype("<f4").tobytes()))
        else:
            st, data = encode(v, dtype)
            out.append((name, st, list(v.shape), data))
    return out


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, st, shape, data in tensors:
        header[name] = {"dtype": st, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # 8-byte aligned data, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, data in tensors:
            f.write(data)


def write_weights(out_dir, tensors, shards):
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
        return
    if shards > len(tensors):
        raise SystemExit("--shards %d: only %d tensors" % (shards, len(tensors)))
    # Consecutive runs of roughly equal bytes, none empty: a tensor goes to
    # the shard its starting byte falls in, moving on by at most one shard per
    # tensor and leaving a tensor for every later shard.
    total = sum(len(t[3]) for t in tensors)
    groups, acc, k = [[] for _ in range(shards)], 0, 0
    for i, t in enumerate(tensors):
        k = min(max(acc * shards // total, k), k + 1, shards - 1)
        k = max(k, shards - (len(tensors) - i))
        groups[k].append(t)
        acc += len(t[3])
    weight_map = {}
    for k, group in enumerate(groups):
        if not group:
            raise SystemExit("--shards %d: shard %d would be empty" % (shards, k + 1))
        fname = "model-%05d-of-%05d.safetensors" % (k + 1, shards)
        write_safetensors(os.path.join(out_dir, fname), group)
        for t in group:
            weight_map[t[0]] = fname
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def tokenizer_json():
    merges = byte_bpe.train(CORPUS, MERGES)
    vocab = {}
    for b in byte_bpe.BYTE_ORDER:
        vocab[byte_bpe.BYTE_TO_CHAR[b]] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    eot_id = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": eot_id, "content": EOT, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }
    return tok, eot_id


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", help="folder to write (created if missing)")
    ap.add_argument("--model-type", required=True, choices=MODEL_TYPES)
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f16", "f32"),
                    help="storage of the weights (default bf16)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1,
                    help="N > 1 writes model-0000k-of-0000N.safetensors and an index")
    ap.add_argument("--fp8", action="store_true",
                    help="linear weights as F8_E4M3 with a per-row F32 weight_scale")
    ap.add_argument("--rope-scaling", choices=("llama3",),
                    help="llama/mistral: Llama 3.1 rope_scaling (scaled to the tiny context)")
    ap.add_argument("--attention-bias", action="store_true",
                    help="llama/qwen3/qwen3_moe: attention_bias, biases on q, k, v and o_proj")
    args = ap.parse_args(argv)
    if args.fp8 and args.model_type == "gpt2":
        ap.error("--fp8: gpt2's Conv1D layers are not Linear layers; FP8 is for the llama family")
    if args.shards < 1:
        ap.error("--shards must be >= 1")
    if args.rope_scaling and args.model_type not in ("llama", "mistral"):
        ap.error("--rope-scaling: only for llama and mistral")
    if args.attention_bias and args.model_type not in ("llama", "qwen3", "qwen3_moe"):
        ap.error("--attention-bias: only for llama, qwen3 and qwen3_moe (qwen2 always has "
                 "q, k, v biases)")

    os.makedirs(args.out_dir, exist_ok=True)
    tok, eot_id = tokenizer_json()
    if eot_id + 1 > VOCAB_SIZE:
        raise AssertionError("tokenizer has more ids than vocab_size")
    config = hf_config(args.model_type, args.dtype, args.fp8, eot_id, args.rope_scaling,
                       args.attention_bias)
    src = TensorSource(args.seed)
    if args.model_type == "gpt2":
        gpt2_tensors(src, config)
    else:
        llama_family_tensors(src, config)
    write_weights(args.out_dir, stored_tensors(src, args.dtype, args.fp8), args.shards)
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
