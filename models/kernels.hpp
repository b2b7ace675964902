// Functional kernels: small pure functions used by both the reference forward
// pass and the simulated cores. All arithmetic is fp32 (except where noted).
//
// Summation order is part of the contract. The simulator adds partial sums in
// the order its simulated reduction adds them, so each kernel below states
// the exact order of its floating-point operations, and the library is built
// with -ffp-contract=off so that a*b + c is never fused into one rounding.
// Same inputs give bit-identical outputs on every IEEE-754 platform, given
// the same libm for expf/sqrtf/cos/sin/pow (glibc on Debian 12 here).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/weights.hpp"

namespace wafersim::models {

// y[i] = the dot product of row i of w with x, in this order (a core's
// sixteen-lane SIMD unit, every lane adding its own share of the columns):
//   acc[l] = 0.0f for l in [0, 16);
//   for j = 0, 1, ..., cols-1: acc[j % 16] += w(i, j) * x[j]
//     (each product rounded to fp32, then added; lane by lane, increasing j);
//   u[l] = acc[2l] + acc[2l+1] for l in [0, 8);
//   v[l] = u[l] + u[l+4] for l in [0, 4);  t[l] = v[l] + v[l+2] for l in [0, 2);
//   y[i] = t[0] + t[1].
// Column j means column j of the tile (the view): a core's lanes start at its
// own tile. Weights stored in 16 bits (Matrix::store_as) or as 8-bit codes
// with row scales (Matrix::store_quantized: decode_8bit(code) * scale, one
// fp32 multiply) are widened to fp32 exactly as they are read, so the result
// depends on the values only, not on the storage. Overwrites y. Requires
// x.size() == w.cols() and y.size() == w.rows() (std::invalid_argument
// otherwise). On x86-64 with AVX2 (chosen at run time; the build stays
// x86-64 baseline, and no FMA is used) the sixteen lanes are two 8-lane
// registers per row, four rows at a time; elsewhere the scalar statement
// above runs. Both give the same bits (tests check it for every storage and
// shape; NaN inputs give NaN in both, the payload not guaranteed to be the
// same).
void gemv_tile(const MatrixView& w, std::span<const float> x, std::span<float> y);

// The implementations of gemv_tile, all bit-identical.
enum class GemvKernel { scalar, avx2 };
// Whether this build and this CPU can run `k`.
bool gemv_kernel_available(GemvKernel k);
// The best this host has: avx2, else scalar (what gemv_tile uses).
GemvKernel best_gemv_kernel();
const char* gemv_kernel_name(GemvKernel k);
// gemv_tile with implementation `k` (std::invalid_argument when it is not
// available).
void gemv_tile_with(GemvKernel k, const MatrixView& w, std::span<const float> x,
                    std::span<float> y);

// gemv_tile without SIMD: the plain statement of the order above, used where
// AVX2 is missing and as the yardstick in tests.
void gemv_tile_scalar(const MatrixView& w, std::span<const float> x, std::span<float> y);

// A row of tiles, as a row band of cores holds a matrix: the view's columns
// cut at col_begin (col_begin[0] = 0 < col_begin[1] < ... < col_begin[T] =
// w.cols()); tile t's products, gemv_tile of w's columns [col_begin[t],
// col_begin[t + 1]) with x's, go to y[t * y_stride, t * y_stride + w.rows()).
// The same bits as gemv_tile tile by tile (std::invalid_argument on sizes
// that do not fit). With AVX2, 16-bit tiles of at most 16 columns (the
// lm_head of Llama-3.2-1B on a WSE-3: ~109 x 11) run eight rows at a time
// along the whole row: tile by tile, a narrow tile's rows are a few bytes of
// as many cache lines 4 KiB apart, and the row-by-row kernel shuffles for
// every row's lane tree where eight rows share vertical adds.
void gemv_tiles(const MatrixView& w, std::span<const int> col_begin, std::span<const float> x,
                std::span<float> y, std::size_t y_stride);

// Sum of x[i]^2 in increasing i, fp32, starting at 0.0f.
float sum_of_squares(std::span<const float> x);

// RMSNorm given the (possibly reduced) sum of squares of the full vector of
// length n, applied to a slice x with its gains gamma:
//   inv = 1.0f / sqrtf(sum_sq / float(n) + eps);  out[i] = (x[i] * inv) * gamma[i].
// out may alias x. Requires x, gamma, out of equal size.
void rmsnorm_apply(std::span<const float> x, float sum_sq, int n, std::span<const float> gamma,
                   float eps, std::span<float> out);

// rmsnorm_apply(x, sum_of_squares(x), x.size(), gamma, eps, out).
void rmsnorm(std::span<const float> x, std::span<const float> gamma, float eps,
             std::span<float> out);

// RoPE's inverse frequency of pair i (0 <= i < head_dim / 2) of a head of
// head_dim: theta^(-2i/head_dim), rescaled as `scaling` says
// (models/model_config.hpp, RopeScaling), in double. The reference and the
// simulated cores both take their frequencies from here.
double rope_inverse_frequency(int i, int head_dim, double theta, const RopeScaling& scaling);

// Rotary position embedding of one head in place, Llama / Hugging Face
// "rotate_half" convention: with d = head.size() (even) and half = d / 2, for
// i in [0, half) the pair (head[i], head[i + half]) is rotated by
//   angle = position * rope_inverse_frequency(i, d, theta, scaling)  (double)
//   c = float(cos(angle)), s = float(sin(angle))
//   head[i]        = x0 * c - x1 * s
//   head[i + half] = x1 * c + x0 * s          (fp32, x0/x1 the old values).
// Hugging Face computes the angle in fp32; double keeps long positions exact
// enough and the simulator uses this same function.
void rope_apply(std::span<float> head, int position, double theta, const RopeScaling& scaling = {});

// Flash-decoding partial attention state over a set of positions:
//   max = the largest score, sum = sum of exp(score - max),
//   acc = sum of exp(score - max) * v.
// An empty partial (no positions) has max = -inf, sum = 0, acc all zero.
struct AttentionPartial {
  float max;
  float sum;
  std::vector<float> acc;  // [head_dim]
};

// Attention of one query head over n_positions keys/values, each a row of
// head_dim contiguous floats (row p at k_rows + p * head_dim).
//   score_p = scale * dot(q, k_p), dot summed in increasing index from 0.0f
//   max     = max over p of score_p
//   w_p     = expf(score_p - max)
//   sum     = sum of w_p in increasing p from 0.0f
//   acc[d]  = sum of w_p * v_p[d] in increasing p from 0.0f
AttentionPartial attention_partial(std::span<const float> q, const float* k_rows,
                                   const float* v_rows, int n_positions, int head_dim, float scale);
// The same from scores already computed (score_p, scaled), one per value
// row: max, w_p, sum and acc exactly as attention_partial computes them.
AttentionPartial attention_partial_from_scores(std::span<const float> scores, const float* v_rows,
                                               int head_dim);

// Merges two partials over disjoint position sets (not commutative in the
// last bit: a's terms come first):
//   m = max(a.max, b.max), fa = expf(a.max - m), fb = expf(b.max - m)
//   sum = a.sum * fa + b.sum * fb, acc[d] = a.acc[d] * fa + b.acc[d] * fb.
// If one side is empty (max = -inf) the other is returned unchanged.
AttentionPartial combine(const AttentionPartial& a, const AttentionPartial& b);

// out[d] = p.acc[d] / p.sum. Requires out.size() == p.acc.size() and a
// non-empty partial.
void attention_finalize(const AttentionPartial& p, std::span<float> out);

// SwiGLU activation: out[i] = (gate[i] * sig) * up[i], sig = 1.0f / (1.0f + expf(-gate[i])).
// out may alias gate or up.
void silu_mul(std::span<const float> gate, std::span<const float> up, std::span<float> out);

// acc[i] += x[i].
void add_inplace(std::span<float> acc, std::span<const float> x);

// acc[i] += w * x[i] (the product rounded to fp32, then added).
void axpy_inplace(float w, std::span<const float> x, std::span<float> acc);

// LayerNorm (GPT-2), split so that a slice can be normalised once the two
// statistics of the whole vector of length n have been reduced:
//   sum_of(x)               = sum of x[i] in increasing i, fp32, from 0.0f
//   sum_of_squared_deviations(x, mean) = sum of (x[i] - mean)^2 likewise
//   mean = sum / float(n);  var = sum_sq_dev / float(n)   (biased, as PyTorch)
//   inv = 1.0f / sqrtf(var + eps)
//   out[i] = ((x[i] - mean) * inv) * gamma[i] + beta[i]
// Two passes (mean first), not E[x^2] - mean^2, which cancels badly.
float sum_of(std::span<const float> x);
float sum_of_squared_deviations(std::span<const float> x, float mean);
void layernorm_apply(std::span<const float> x, float mean, float var, std::span<const float> gamma,
                     std::span<const float> beta, float eps, std::span<float> out);
// The whole vector: mean = sum_of(x) / n, var = sum_of_squared_deviations / n,
// then layernorm_apply. out may alias x.
void layernorm(std::span<const float> x, std::span<const float> gamma, std::span<const float> beta,
               float eps, std::span<float> out);

// GELU, tanh approximation (GPT-2's "gelu_new"), elementwise in fp32:
//   inner = 0.7978845608f * (x + 0.044715f * (x * x * x))   [sqrt(2/pi)]
//   out   = (0.5f * x) * (1.0f + tanhf(inner))
// with x*x*x evaluated left to right. out may alias x.
void gelu_tanh(std::span<const float> x, std::span<float> out);

// Mixture-of-experts routing (Mixtral; Qwen3-MoE with norm_topk_prob true):
// the k experts with the largest router logits (a larger logit first; the
// lower index first on ties), and their weights, a softmax over those k
// logits only:
//   m = the largest chosen logit; e_j = expf(logit_j - m) in chosen order;
//   total = sum of e_j in chosen order from 0.0f; weight_j = e_j / total.
// Hugging Face's softmax over all experts followed by renormalising the
// top k is the same function (the other experts cancel). Throws for k
// outside [1, logits.size()].
struct ExpertChoice {
  int expert;
  float weight;
};
std::vector<ExpertChoice> route_top_k(std::span<const float> router_logits, int k);

// Index of the largest value; the lowest index wins ties; NaNs are never
// chosen unless all values are NaN (then 0). Throws for an empty span.
std::int32_t argmax(std::span<const float> x);

}  // namespace wafersim::models
