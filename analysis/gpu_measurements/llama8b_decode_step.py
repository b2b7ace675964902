#!/usr/bin/env python3
"""Times Llama-3.1-8B decode steps and one prefill on the GPU it runs on.

A measurement for calibrating the analytical GPU model (models/gpu/;
docs/validation.md, "Measured on lent GPUs"), not part of wafersim's build: it
needs PyTorch and a CUDA GPU, which wafersim never does. Run it as
`python3 llama8b_decode_step.py OUTDIR` on such a machine (QUICK=1: two sizes);
h200-2026-11-27.json and h100-2026-11-27.json beside it are its output on one
H200 and one H100, h200-fused-2026-11-27.json and h100-fused-2026-11-27.json its
FUSED=1 output there; tests/gpu/validation_test.cpp reads them.

The model is Llama-3.1-8B's shapes (32 layers, hidden 4096, 32 query and 8 kv
heads of 128, FFN 14336, vocabulary 128256) with random bf16 weights: a decode
step's time does not depend on the weights' values. One decode step is written
out in PyTorch (RMSNorm, fused qkv, RoPE, the new key and value written to a
static KV cache, attention over the whole cache, o, SwiGLU, residuals, the final
norm, lm_head and argmax) and captured in a CUDA graph, so the timing is the
GPU's work without Python's per-kernel launch cost, its ~25 small kernels a
layer unfused (FUSED=1 fuses them, as serving stacks do). The same step run
eagerly is timed too at batch 1 (the launch overhead a framework without graphs
pays). Attention over the cache uses PyTorch's scaled_dot_product_attention with
a kv head's 4 query heads as 4 query rows (grouped-query attention without
copying the cache).

Prints a table and writes every figure to $OUT/llama8b_decode_step.json (or the
folder given as the first argument). With FUSED=1 it times instead the step with
each layer's small kernels fused by torch.compile (FusedLayers), into
llama8b_decode_step_fused.json.
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

H, I, NL, NH, NKV, HD, V = 4096, 14336, 32, 32, 8, 128, 128256
G = NH // NKV
DT = torch.bfloat16
DEV = "cuda"


def rnd(*shape):
    return torch.randn(*shape, device=DEV, dtype=DT) * 0.02


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def ceilings():
    """A device-to-device copy (bytes read + written) and a bf16 GEMM."""
    n = 2 * 1024**3  # bytes per buffer
    a = torch.empty(n, dtype=torch.uint8, device=DEV)
    b = torch.empty_like(a)
    a.random_(0, 255)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    copy_bw = 2 * n / median(ts)
    del a, b
    m = 8192
    x, y = rnd(m, m), rnd(m, m)
    for _ in range(3):
        z = x @ y
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        z = x @ y
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    gemm = 2 * m**3 / median(ts)
    del x, y, z
    torch.cuda.empty_cache()
    return copy_bw, gemm


class Model:
    def __init__(self):
        self.layers = []
        for _ in range(NL):
            self.layers.append(
                dict(
                    wqkv=rnd((NH + 2 * NKV) * HD, H),
                    wo=rnd(H, NH * HD),
                    wgu=rnd(2 * I, H),
                    wd=rnd(H, I),
                    n1=torch.ones(H, device=DEV, dtype=DT),
                    n2=torch.ones(H, device=DEV, dtype=DT),
                )
            )
        self.emb = rnd(V, H)
        self.lm = rnd(V, H)
        self.nf = torch.ones(H, device=DEV, dtype=DT)
        inv = 1.0 / (500000.0 ** (torch.arange(0, HD, 2, device=DEV, dtype=torch.float32) / HD))
        self.inv_freq = inv

    def weight_bytes(self):
        per_layer = sum(t.numel() for t in self.layers[0].values()) * 2
        return NL * per_layer + self.emb[0].numel() * 2 + (self.lm.numel() + self.nf.numel()) * 2

    @staticmethod
    def rms(x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(DT) * w

    def rope(self, x, pos):
        # x [..., T, HD]; pos [T] (float32 positions)
        f = torch.outer(pos, self.inv_freq)  # [T, HD/2]
        cos, sin = f.cos().to(DT), f.sin().to(DT)
        x1, x2 = x[..., : HD // 2], x[..., HD // 2 :]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def decode(self, tok, pos, kc, vc, L):
        """tok [B] int64, pos [1] int64 (< L); kc, vc [NL, B, NKV, L, HD]."""
        B = tok.shape[0]
        x = self.emb[tok]
        posf = pos.float()
        for li, w in enumerate(self.layers):
            h = self.rms(x, w["n1"])
            qkv = h @ w["wqkv"].t()
            q = qkv[:, : NH * HD].view(B, NKV, G, HD)
            k = qkv[:, NH * HD : (NH + NKV) * HD].view(B, NKV, 1, HD)
            v = qkv[:, (NH + NKV) * HD :].view(B, NKV, 1, HD)
            q, k = self.rope(q, posf), self.rope(k, posf)
            kc[li].index_copy_(2, pos, k)
            vc[li].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, kc[li], vc[li])  # [B, NKV, G, HD]
            x = x + a.reshape(B, NH * HD) @ w["wo"].t()
            h = self.rms(x, w["n2"])
            gu = h @ w["wgu"].t()
            x = x + (F.silu(gu[:, :I]) * gu[:, I:]) @ w["wd"].t()
        return (self.rms(x, self.nf) @ self.lm.t()).argmax(-1)

    def prefill(self, toks):
        """One prompt, toks [T]: causal attention over it (no cache kept)."""
        T = toks.shape[0]
        x = self.emb[toks]
        posf = torch.arange(T, device=DEV, dtype=torch.float32)
        for w in self.layers:
            h = self.rms(x, w["n1"])
            qkv = h @ w["wqkv"].t()
            q = qkv[:, : NH * HD].view(T, NH, HD).transpose(0, 1)
            k = qkv[:, NH * HD : (NH + NKV) * HD].view(T, NKV, HD).transpose(0, 1)
            v = qkv[:, (NH + NKV) * HD :].view(T, NKV, HD).transpose(0, 1)
            q, k = self.rope(q, posf), self.rope(k, posf)
            k = k.repeat_interleave(G, dim=0)
            v = v.repeat_interleave(G, dim=0)
            a = F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
            x = x + a.transpose(0, 1).reshape(T, NH * HD) @ w["wo"].t()
            h = self.rms(x, w["n2"])
            gu = h @ w["wgu"].t()
            x = x + (F.silu(gu[:, :I]) * gu[:, I:]) @ w["wd"].t()
        return (self.rms(x[-1:], self.nf) @ self.lm.t()).argmax(-1)


class FusedLayers:
    """The decode step with torch.compile fusing the small kernels of a layer
    (its norms, RoPE, SiLU and residuals) around the GEMMs, as serving stacks'
    fused kernels do: a layer in two compiled halves (one compilation each per
    batch, every layer alike), the cache writes and attention between them."""

    def __init__(self, m):
        self.m = m
        self.pre = torch.compile(self._pre, dynamic=False)
        self.post = torch.compile(self._post, dynamic=False)

    def _pre(self, x, n1, wqkv, posf, inv_freq):
        B = x.shape[0]
        x32 = x.float()
        h = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(DT) * n1
        qkv = h @ wqkv.t()
        q = qkv[:, : NH * HD].view(B, NKV, G, HD)
        k = qkv[:, NH * HD : (NH + NKV) * HD].view(B, NKV, 1, HD)
        v = qkv[:, (NH + NKV) * HD :].view(B, NKV, 1, HD)
        f = torch.outer(posf, inv_freq)
        cos, sin = f.cos().to(DT), f.sin().to(DT)

        def rope(t):
            t1, t2 = t[..., : HD // 2], t[..., HD // 2 :]
            return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], dim=-1)

        return rope(q), rope(k), v.contiguous()

    def _post(self, x, a, wo, n2, wgu, wd):
        B = x.shape[0]
        x = x + a.reshape(B, NH * HD) @ wo.t()
        x32 = x.float()
        h = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(DT) * n2
        gu = h @ wgu.t()
        return x + (F.silu(gu[:, :I]) * gu[:, I:]) @ wd.t()

    def decode(self, tok, pos, kc, vc):
        m = self.m
        x = m.emb[tok]
        posf = pos.float()
        for li, w in enumerate(m.layers):
            q, k, v = self.pre(x, w["n1"], w["wqkv"], posf, m.inv_freq)
            kc[li].index_copy_(2, pos, k)
            vc[li].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, kc[li], vc[li])
            x = self.post(x, a, w["wo"], w["n2"], w["wgu"], w["wd"])
        return (m.rms(x, m.nf) @ m.lm.t()).argmax(-1)


def time_graph(fn, reps=5, inner=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record()
        for _ in range(inner):
            g.replay()
        en.record()
        torch.cuda.synchronize()
        ts.append(st.elapsed_time(en) / 1e3 / inner)
    del g
    return median(ts), min(ts), max(ts)


def time_eager(fn, reps=5, inner=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / inner)
    return median(ts), min(ts), max(ts)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", ".")
    quick = os.environ.get("QUICK") == "1"
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    res = dict(gpu=props.name, sms=props.multi_processor_count, torch=torch.__version__,
               memory_bytes=props.total_memory)
    copy_bw, gemm = ceilings()
    res.update(copy_bytes_per_s=copy_bw, bf16_gemm_flops=gemm)
    print(f"{props.name}: copy {copy_bw / 1e12:.2f} TB/s (read + write), bf16 GEMM "
          f"{gemm / 1e12:.0f} TFLOP/s", flush=True)
    m = Model()
    wbytes = m.weight_bytes()
    res["weight_bytes_read_per_step"] = wbytes
    if os.environ.get("FUSED") == "1":
        # Only the fused step (docs/validation.md: its time against the model's).
        fused = FusedLayers(m)
        rows = []
        for B, L in [(1, 128), (1, 1024), (16, 4096), (64, 4096)]:
            kc = rnd(NL, B, NKV, L, HD)
            vc = rnd(NL, B, NKV, L, HD)
            tok = torch.randint(0, V, (B,), device=DEV)
            pos = torch.tensor([L - 1], device=DEV)
            t0 = time.perf_counter()
            fused.decode(tok, pos, kc, vc)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            # The same numbers as the unfused step (to bf16 rounding).
            ref = m.decode(tok, pos, kc, vc, L)
            got = fused.decode(tok, pos, kc, vc)
            agree = float((ref == got).float().mean())
            med, lo, hi = time_graph(lambda: fused.decode(tok, pos, kc, vc))
            rows.append(dict(batch=B, context=L, step_s=med, step_min_s=lo, step_max_s=hi,
                             compile_s=compile_s, argmax_agreement=agree))
            print(f"fused decode B={B:4d} L={L:5d}: {med * 1e3:7.3f} ms (min {lo * 1e3:.3f}, "
                  f"max {hi * 1e3:.3f}); compiled in {compile_s:.0f} s; argmax agreement "
                  f"{agree:.2f}", flush=True)
            del kc, vc
            torch.cuda.empty_cache()
        res["fused_decode"] = rows
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, "llama8b_decode_step_fused.json"), "w") as f:
            json.dump(res, f, indent=1)
        return
    configs = [(1, 128), (1, 1024), (1, 4096), (4, 1024), (16, 1024), (64, 1024), (16, 4096),
               (64, 4096), (128, 1024)]
    if quick:
        configs = [(1, 128), (4, 1024)]
    rows = []
    for B, L in configs:
        kc = rnd(NL, B, NKV, L, HD)
        vc = rnd(NL, B, NKV, L, HD)
        tok = torch.randint(0, V, (B,), device=DEV)
        pos = torch.tensor([L - 1], device=DEV)
        med, lo, hi = time_graph(lambda: m.decode(tok, pos, kc, vc, L))
        kv_bytes = 2 * NL * B * NKV * L * HD * 2  # keys and values read
        row = dict(batch=B, context=L, step_s=med, step_min_s=lo, step_max_s=hi,
                   kv_bytes=kv_bytes,
                   hbm_bytes_per_s=(wbytes + kv_bytes) / med)
        if B == 1 and L == 1024:
            e_med, _, _ = time_eager(lambda: m.decode(tok, pos, kc, vc, L))
            row["eager_step_s"] = e_med
        rows.append(row)
        print(f"decode B={B:4d} L={L:5d}: {med * 1e3:7.3f} ms (min {lo * 1e3:.3f}, max "
              f"{hi * 1e3:.3f}); {row['hbm_bytes_per_s'] / 1e12:.2f} TB/s of weights + KV"
              + (f"; eager {row['eager_step_s'] * 1e3:.2f} ms" if "eager_step_s" in row else ""),
              flush=True)
        del kc, vc
        torch.cuda.empty_cache()
    res["decode"] = rows
    # The step's parts, each alone in a graph: the weight matrices (every
    # layer's qkv, o, gate_up and down, then lm_head: the bytes a decode step
    # must stream whatever its batch) and attention over the cache.
    parts = []
    for B in [1, 4, 16, 64]:
        x = rnd(B, H)
        xi = rnd(B, I)
        def weights_only():
            for w in m.layers:
                x @ w["wqkv"].t()
                x @ w["wo"].t()
                x @ w["wgu"].t()
                xi @ w["wd"].t()
            x @ m.lm.t()
        med, lo, hi = time_graph(weights_only)
        mat_bytes = NL * ((NH + 2 * NKV) * HD * H + H * NH * HD + 3 * H * I) * 2 + V * H * 2
        parts.append(dict(part="weights", batch=B, time_s=med, bytes=mat_bytes,
                          bytes_per_s=mat_bytes / med))
        print(f"weights only B={B:4d}: {med * 1e3:7.3f} ms; {mat_bytes / med / 1e12:.2f} TB/s",
              flush=True)
    for B, L in ([(1, 4096), (16, 4096)] if quick else [(1, 4096), (16, 1024), (16, 4096),
                                                       (64, 4096)]):
        kc = rnd(B, NKV, L, HD)
        vc = rnd(B, NKV, L, HD)
        q = rnd(B, NKV, G, HD)
        def attention_only():
            for _ in range(NL):
                F.scaled_dot_product_attention(q, kc, vc)
        med, lo, hi = time_graph(attention_only)
        kv = 2 * NL * B * NKV * L * HD * 2
        parts.append(dict(part="attention", batch=B, context=L, time_s=med, bytes=kv,
                          bytes_per_s=kv / med))
        print(f"attention only B={B:4d} L={L:5d} (x{NL} layers): {med * 1e3:7.3f} ms; "
              f"{kv / med / 1e12:.2f} TB/s", flush=True)
        del kc, vc
        torch.cuda.empty_cache()
    res["parts"] = parts
    pre = []
    for T in ([128] if quick else [128, 1024, 4096]):
        toks = torch.randint(0, V, (T,), device=DEV)
        med, lo, hi = time_eager(lambda: m.prefill(toks), reps=5, inner=3)
        params = NL * ((NH + 2 * NKV) * HD * H + H * NH * HD + 3 * H * I)
        flops = 2 * params * T + NL * NH * 2 * 2 * HD * T * T / 2 + 2 * H * V
        pre.append(dict(prompt=T, time_s=med, min_s=lo, max_s=hi, flops=flops,
                        flops_per_s=flops / med))
        print(f"prefill T={T:5d}: {med * 1e3:8.2f} ms; {flops / med / 1e12:.0f} TFLOP/s",
              flush=True)
    res["prefill"] = pre
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "llama8b_decode_step.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
