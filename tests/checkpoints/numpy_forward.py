#!/usr/bin/env python3
"""An independent forward pass of a Hugging Face checkpoint, in float64 NumPy:
the expectation wafersim's C++ loader and reference model are checked against.
It reads the folder itself (config.json, model.safetensors or the shards of
model.safetensors.index.json, FP8 weights with their weight_scale,
tokenizer.json) and follows the Hugging Face `transformers` modeling code of
each family, not wafersim's code.

    numpy_forward.py DIR --prompt-ids 1,2,3 --generate N
    numpy_forward.py DIR --tokenizer-text "some text" [--generate N]
    numpy_forward.py DIR --decode-ids 1,2,3

prints one JSON object on a line of stdout for each --prompt-ids,
--tokenizer-text and --decode-ids, in the order given (they may be repeated
and mixed; the checkpoint is read once). Its keys:
    "prompt_ids"  the ids of --tokenizer-text (byte-level BPE, byte_bpe.py);
    "generated"   N greedy tokens after the prompt (--prompt-ids or the
                  encoded text); the first from the logits at the last prompt
                  position, each next one after feeding the previous back;
    "min_margin"  the smallest gap between the largest and the second largest
                  logit over those N choices (how safely a float32
                  implementation should agree);
    "text", "hex" the decoded --decode-ids, as text (invalid UTF-8 replaced)
                  and as the exact bytes in hex.

Families (config.json model_type, else architectures[0]): llama, mistral,
qwen2, qwen3, qwen3_moe, mixtral, gpt2. Semantics:
  llama family  x = embed[ids]; per layer
                  h = x + o_proj(attn(RoPE(q), RoPE(k), v)) of RMSNorm(x)
                  x = h + mlp(RMSNorm(h))
                RMSNorm(x) = w * x / sqrt(mean(x^2) + rms_norm_eps);
                RoPE with rotate_half and inv_freq = rope_theta^(-2i/head_dim)
                (rope_scaling linear or llama3 applied to inv_freq);
                grouped-query attention, scale head_dim^-0.5, causal, and a
                sliding window of `sliding_window` positions (the query's own
                included) for mistral/mixtral, for qwen2/qwen3 only with
                use_sliding_window on layers >= max_window_layers (or the
                layers `layer_types` names "sliding_attention");
                transformers 5's `rope_parameters` dict is read for
                rope_theta and the scaling;
                biases: llama/qwen3 attention_bias on q, k, v and o; qwen2 on
                q, k, v always; llama mlp_bias on gate, up, down;
                qwen3: RMSNorm over each head of q and k (q_norm, k_norm)
                before RoPE;
                mlp = down(silu(gate(x)) * up(x)); MoE (mixtral, qwen3_moe):
                softmax over all experts' router logits, the top k, weights
                renormalised over the k (mixtral always, qwen3_moe when
                norm_topk_prob), output = sum of weight * expert(x);
                logits = lm_head(RMSNorm(x)), lm_head = embed when tied.
  gpt2          x = wte[ids] + wpe[positions]; LayerNorm (biased variance,
                layer_norm_epsilon) before attention and MLP and at the end;
                Conv1D layers y = x @ W + b with W [in][out]; c_attn split into
                q, k, v; scale head_dim^-0.5 (and / (layer + 1) with
                scale_attn_by_inverse_layer_idx); GELU of activation_function
                (gelu_new / gelu_pytorch_tanh: tanh form; gelu: erf);
                logits = wte(LayerNorm(x)).
Hugging Face's per-family defaults apply to keys a config.json leaves out.
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree when tests run this
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import byte_bpe  # noqa: E402


class CheckpointError(Exception):
    pass


# --- safetensors -----------------------------------------------------------

def _e4m3_table():
    """float64 value of every OCP FP8 E4M3 code (bias 7; 0x7f/0xff NaN)."""
    t = np.empty(256)
    for code in range(256):
        s, e, m = code >> 7, (code >> 3) & 15, code & 7
        if e == 15 and m == 7:
            v = math.nan
        elif e == 0:
            v = m / 8 * 2.0 ** -6
        else:
            v = (1 + m / 8) * 2.0 ** (e - 7)
        t[code] = -v if s else v
    return t


E4M3 = _e4m3_table()


def _decode(dtype, raw, shape):
    if dtype == "F64":
        v = np.frombuffer(raw, "<f8")
    elif dtype == "F32":
        v = np.frombuffer(raw, "<f4").astype(np.float64)
    elif dtype == "F16":
        v = np.frombuffer(raw, "<f2").astype(np.float64)
    elif dtype == "BF16":
        bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        v = bits.view(np.float32).astype(np.float64)
    elif dtype == "F8_E4M3":
        v = E4M3[np.frombuffer(raw, np.uint8)]
    else:
        raise CheckpointError("dtype %s is not supported here" % dtype)
    return v.reshape(shape)


def read_safetensors(path):
    """name -> (dtype, float64 array) of one file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        out[name] = (e["dtype"], _decode(e["dtype"], data[begin:end], e["shape"]))
    return out


def read_weights(folder):
    """All tensors of the checkpoint as float64; F8_E4M3 weights multiplied by
    their `weight_scale` (per row [rows, 1], or per tensor) and the scales
    dropped."""
    index = os.path.join(folder, "model.safetensors.index.json")
    raw = {}
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        for shard in sorted(set(weight_map.values())):
            for name, t in read_safetensors(os.path.join(folder, shard)).items():
                if weight_map.get(name) != shard:
                    raise CheckpointError("%s: %s is not where the index says" % (shard, name))
                raw[name] = t
        missing = set(weight_map) - set(raw)
        if missing:
            raise CheckpointError("index lists tensors no shard holds: %s" % sorted(missing))
    else:
        raw = read_safetensors(os.path.join(folder, "model.safetensors"))
    weights = {}
    for name, (dtype, v) in raw.items():
        if name.endswith(".weight_scale"):
            continue
        if dtype.startswith("F8_"):
            scale_name = name[:-len("weight")] + "weight_scale"
            if not name.endswith(".weight") or scale_name not in raw:
                raise CheckpointError("%s: FP8 tensor without a weight_scale" % name)
            v = v * raw[scale_name][1]  # [rows, 1] or [] / [1] broadcast
        weights[name] = v
    return weights


# --- config ----------------------------------------------------------------

CLASS_TO_TYPE = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                 "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
                 "Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral",
                 "GPT2LMHeadModel": "gpt2"}

# Hugging Face's defaults for keys a config.json may leave out (the
# configuration_<family>.py constructors).
DEFAULTS = {
    "llama": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                  attention_bias=False, mlp_bias=False),
    "mistral": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                    sliding_window=4096, num_key_value_heads=8),
    "qwen2": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                  use_sliding_window=False, sliding_window=4096, max_window_layers=28),
    "qwen3": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                  attention_bias=False, use_sliding_window=False, sliding_window=4096,
                  max_window_layers=28),
    "qwen3_moe": dict(rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                      attention_bias=False, use_sliding_window=False, sliding_window=4096,
                      max_window_layers=28, decoder_sparse_step=1, norm_topk_prob=False,
                      mlp_only_layers=[]),
    "mixtral": dict(rms_norm_eps=1e-5, rope_theta=1e6, tie_word_embeddings=False,
                    sliding_window=None, num_key_value_heads=8),
    "gpt2": dict(layer_norm_epsilon=1e-5, tie_word_embeddings=True, n_inner=None,
                 activation_function="gelu_new", scale_attn_weights=True,
                 scale_attn_by_inverse_layer_idx=False),
}


def read_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        raw = json.load(f)
    mt = raw.get("model_type") or CLASS_TO_TYPE.get((raw.get("architectures") or [None])[0])
    if mt not in DEFAULTS:
        raise CheckpointError("unsupported model_type %r" % mt)
    c = dict(DEFAULTS[mt])
    c.update(raw)  # a key given as null is None, as in transformers
    c["model_type"] = mt
    rp = c.get("rope_parameters")
    if isinstance(rp, dict) and ("rope_type" in rp or "rope_theta" in rp):
        # transformers 5 moves rope_theta and rope_scaling into one dict.
        c["rope_theta"] = rp.get("rope_theta", c.get("rope_theta"))
        c["rope_scaling"] = rp if rp.get("rope_type", rp.get("type")) != "default" else None
    if mt != "gpt2":
        c.setdefault("num_key_value_heads", c["num_attention_heads"])
        if c.get("head_dim") is None:
            c["head_dim"] = c["hidden_size"] // c["num_attention_heads"]
    return c


# --- the llama family ------------------------------------------------------

def rms_norm(x, w, eps):
    return w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def inv_freq(c):
    """RoPE inverse frequencies (modeling_rope_utils: default, linear,
    llama3)."""
    d = c["head_dim"]
    f = 1.0 / (c["rope_theta"] ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rs = c.get("rope_scaling")
    if not rs:
        return f
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return f
    if kind == "linear":
        return f / rs["factor"]
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        wavelen = 2 * math.pi / f
        scaled = np.where(wavelen > old / low, f / factor, f)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) & ~(wavelen > old / low)
        return np.where(medium, smoothed, scaled)
    raise CheckpointError("rope_scaling type %r is not implemented here" % kind)


def rope(x, positions, freqs):
    """x [T, heads, d]: x * cos + rotate_half(x) * sin, rotate_half(x) =
    concat(-x[d/2:], x[:d/2]), angles concat(freqs, freqs) * position."""
    ang = np.outer(positions, freqs)  # [T, d/2]
    cos = np.cos(np.concatenate([ang, ang], axis=-1))[:, None, :]
    sin = np.sin(np.concatenate([ang, ang], axis=-1))[:, None, :]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def attention(q, k, v, scale, window):
    """q [T, H, d], k/v [T, KV, d]: causal softmax attention, query head h on
    kv head h // (H / KV); with `window`, query i sees keys j with
    i - window < j <= i."""
    t, heads, d = q.shape
    group = heads // k.shape[1]
    i = np.arange(t)[:, None]
    j = np.arange(t)[None, :]
    allowed = j <= i
    if window:
        allowed &= j > i - window
    out = np.empty_like(q)
    for h in range(heads):
        kh = h // group
        scores = (q[:, h, :] @ k[:, kh, :].T) * scale
        scores = np.where(allowed, scores, -np.inf)
        out[:, h, :] = softmax(scores) @ v[:, kh, :]
    return out


def linear(w, x, name, bias=None):
    y = x @ w[name + ".weight"].T
    if bias:
        y = y + w[name + ".bias"]
    return y


def moe(w, c, prefix, x):
    """Router softmax over all experts, top k, renormalised (see the module
    doc), summed expert outputs. Expert names by family."""
    mixtral = c["model_type"] == "mixtral"
    k = c["num_experts_per_tok"]
    router = x @ w[prefix + "gate.weight"].T  # [T, E]
    probs = softmax(router)
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        top = np.argsort(-probs[t], kind="stable")[:k]
        weights = probs[t, top]
        if mixtral or c.get("norm_topk_prob"):
            weights = weights / weights.sum()
        for e, g in zip(top, weights):
            p = prefix + "experts.%d." % e
            if mixtral:
                h = silu(linear(w, x[t], p + "w1")) * linear(w, x[t], p + "w3")
                out[t] += g * linear(w, h, p + "w2")
            else:
                h = silu(linear(w, x[t], p + "gate_proj")) * linear(w, x[t], p + "up_proj")
                out[t] += g * linear(w, h, p + "down_proj")
    return out


def llama_family_logits(w, c, ids):
    mt = c["model_type"]
    t = len(ids)
    heads, kv_heads, d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps = c["rms_norm_eps"]
    freqs = inv_freq(c)
    positions = np.arange(t, dtype=np.float64)
    qkv_bias = mt == "qwen2" or (mt in ("llama", "qwen3", "qwen3_moe") and c.get("attention_bias"))
    o_bias = mt in ("llama", "qwen3", "qwen3_moe") and c.get("attention_bias")
    mlp_bias = mt == "llama" and c.get("mlp_bias")
    hidden_act = c.get("hidden_act", "silu")
    if hidden_act != "silu":
        raise CheckpointError("hidden_act %r is not implemented here" % hidden_act)

    x = w["model.embed_tokens.weight"][ids]
    for layer in range(c["num_hidden_layers"]):
        b = "model.layers.%d." % layer
        window = None
        if c.get("layer_types"):
            if c["layer_types"][layer] == "sliding_attention":
                window = c.get("sliding_window")
        elif mt in ("mistral", "mixtral"):
            window = c.get("sliding_window")
        elif mt in ("qwen2", "qwen3", "qwen3_moe") and c.get("use_sliding_window") and \
                layer >= c["max_window_layers"]:
            window = c.get("sliding_window")

        h = rms_norm(x, w[b + "input_layernorm.weight"], eps)
        q = linear(w, h, b + "self_attn.q_proj", qkv_bias).reshape(t, heads, d)
        k = linear(w, h, b + "self_attn.k_proj", qkv_bias).reshape(t, kv_heads, d)
        v = linear(w, h, b + "self_attn.v_proj", qkv_bias).reshape(t, kv_heads, d)
        if mt in ("qwen3", "qwen3_moe"):
            q = rms_norm(q, w[b + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[b + "self_attn.k_norm.weight"], eps)
        q, k = rope(q, positions, freqs), rope(k, positions, freqs)
        a = attention(q, k, v, d ** -0.5, window).reshape(t, heads * d)
        x = x + linear(w, a, b + "self_attn.o_proj", o_bias)

        h = rms_norm(x, w[b + "post_attention_layernorm.weight"], eps)
        if mt == "mixtral":
            x = x + moe(w, c, b + "block_sparse_moe.", h)
        elif mt == "qwen3_moe" and layer not in c["mlp_only_layers"] and \
                c["num_experts"] > 0 and (layer + 1) % c["decoder_sparse_step"] == 0:
            x = x + moe(w, c, b + "mlp.", h)
        else:
            m = b + "mlp."
            g = silu(linear(w, h, m + "gate_proj", mlp_bias)) * linear(w, h, m + "up_proj", mlp_bias)
            x = x + linear(w, g, m + "down_proj", mlp_bias)

    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


# --- gpt2 ------------------------------------------------------------------

def layer_norm(x, w, b, eps):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def gelu(x, kind):
    if kind in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if kind == "gelu":
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    raise CheckpointError("activation_function %r is not implemented here" % kind)


def gpt2_logits(w, c, ids):
    p = "transformer." if "transformer.wte.weight" in w else ""
    t, hsz, heads = len(ids), c["n_embd"], c["n_head"]
    d = hsz // heads
    eps = c["layer_norm_epsilon"]
    x = w[p + "wte.weight"][ids] + w[p + "wpe.weight"][np.arange(t)]

    def conv1d(name, v):  # Conv1D: x @ W + b, W [in][out]
        return v @ w[name + ".weight"] + w[name + ".bias"]

    for layer in range(c["n_layer"]):
        b = p + "h.%d." % layer
        h = layer_norm(x, w[b + "ln_1.weight"], w[b + "ln_1.bias"], eps)
        qkv = conv1d(b + "attn.c_attn", h)
        q, k, v = (qkv[:, i * hsz:(i + 1) * hsz].reshape(t, heads, d) for i in range(3))
        scale = d ** -0.5 if c["scale_attn_weights"] else 1.0
        if c["scale_attn_by_inverse_layer_idx"]:
            scale /= layer + 1
        a = attention(q, k, v, scale, None).reshape(t, hsz)
        x = x + conv1d(b + "attn.c_proj", a)
        h = layer_norm(x, w[b + "ln_2.weight"], w[b + "ln_2.bias"], eps)
        x = x + conv1d(b + "mlp.c_proj", gelu(conv1d(b + "mlp.c_fc", h), c["activation_function"]))
    x = layer_norm(x, w[p + "ln_f.weight"], w[p + "ln_f.bias"], eps)
    head = w[p + "wte.weight"] if c["tie_word_embeddings"] or "lm_head.weight" not in w \
        else w["lm_head.weight"]
    return x @ head.T


# --- generation ------------------------------------------------------------

def logits_of(w, c, ids):
    ids = np.asarray(ids, dtype=np.int64)
    if c["model_type"] == "gpt2":
        return gpt2_logits(w, c, ids)
    return llama_family_logits(w, c, ids)


def greedy(w, c, prompt, n):
    """n tokens, each the argmax (lowest id on ties) of the last position's
    logits over the whole sequence so far; also the smallest top-2 gap."""
    vocab = c["vocab_size"]
    limit = c["n_positions"] if c["model_type"] == "gpt2" else c["max_position_embeddings"]
    if not prompt:
        raise CheckpointError("the prompt must not be empty")
    if any(not 0 <= i < vocab for i in prompt):
        raise CheckpointError("prompt ids must be in [0, %d)" % vocab)
    if len(prompt) + n > limit:
        raise CheckpointError("prompt + generated tokens exceed %d positions" % limit)
    seq, out, margin = list(prompt), [], math.inf
    for _ in range(n):
        last = logits_of(w, c, seq)[-1]
        nxt = int(np.argmax(last))
        top2 = np.sort(last)[-2:]
        margin = min(margin, float(top2[1] - top2[0]))
        out.append(nxt)
        seq.append(nxt)
    return out, margin


def ids_arg(text):
    try:
        return [int(s) for s in text.split(",") if s.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated token ids, got %r" % text)


class Request(argparse.Action):
    """Keeps --prompt-ids, --tokenizer-text and --decode-ids in command-line
    order: one output line each."""

    def __call__(self, parser, namespace, values, option_string=None):
        requests = getattr(namespace, self.dest) or []
        requests.append((option_string, values))
        setattr(namespace, self.dest, requests)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="--prompt-ids, --tokenizer-text and --decode-ids may be repeated and mixed: "
               "one JSON line each, in the order given (the weights are read once).")
    ap.add_argument("dir", help="Hugging Face model folder")
    ap.add_argument("--prompt-ids", dest="requests", action=Request, type=ids_arg,
                    metavar="IDS", help="a prompt as ids, e.g. 1,2,3 (needs --generate)")
    ap.add_argument("--tokenizer-text", dest="requests", action=Request, metavar="TEXT",
                    help="encode TEXT with tokenizer.json (the prompt when --generate is given)")
    ap.add_argument("--decode-ids", dest="requests", action=Request, type=ids_arg, metavar="IDS",
                    help="decode ids with tokenizer.json")
    ap.add_argument("--generate", type=int, default=None, metavar="N",
                    help="greedy tokens to generate after each prompt")
    args = ap.parse_args(argv)
    requests = args.requests or []
    if not requests:
        ap.error("nothing to do: give --prompt-ids, --tokenizer-text or --decode-ids")
    if args.generate is not None and args.generate < 0:
        ap.error("--generate must be >= 0")
    if args.generate is None and any(kind == "--prompt-ids" for kind, _ in requests):
        ap.error("--prompt-ids needs --generate N")

    try:
        tok = weights = config = None
        if any(kind != "--prompt-ids" for kind, _ in requests):
            with open(os.path.join(args.dir, "tokenizer.json"), encoding="utf-8") as f:
                tok = byte_bpe.ByteLevelBpe(json.load(f))
        if args.generate is not None:
            config = read_config(args.dir)
            weights = read_weights(args.dir)
        lines = []
        for kind, value in requests:
            result = {}
            if kind == "--decode-ids":
                raw = tok.decode_bytes(value)
                result["text"] = raw.decode("utf-8", errors="replace")
                result["hex"] = raw.hex()
                lines.append(result)
                continue
            prompt = value
            if kind == "--tokenizer-text":
                prompt = result["prompt_ids"] = tok.encode(value)
            if args.generate is not None:
                result["generated"], margin = greedy(weights, config, prompt, args.generate)
                result["min_margin"] = margin if math.isfinite(margin) else None
            lines.append(result)
    except (CheckpointError, KeyError, OSError, ValueError) as e:
        kind = "missing tensor or key " if isinstance(e, KeyError) else ""
        print("numpy_forward.py: error: %s%s" % (kind, e), file=sys.stderr)
        return 1
    for result in lines:
        print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
