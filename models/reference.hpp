// A plain reference forward pass of a Llama-style decoder, written without
// any notion of distribution: whole-matrix GEMVs, a standard softmax over all
// positions. The simulator's functional mode must produce the same tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/weights.hpp"

namespace wafersim::models {

// One sequence's decoder state (its KV cache). Holds a reference to the
// weights, which must outlive it.
class ReferenceModel {
 public:
  explicit ReferenceModel(const Weights& weights);

  // Feeds `token` at `position` and returns the logits [vocab] for the next
  // token. Positions must be fed 0, 1, 2, ... (position == positions()), each
  // below max_position; the token's keys and values are appended to the
  // cache. Throws std::invalid_argument for a token outside [0, vocab_size)
  // or a position out of order or beyond the context. Per layer:
  //   n1 = RMSNorm(x; attn_norm)
  //   h  = x + Wo Attn(RoPE(Wq n1), RoPE(Wk n1), Wv n1)
  //   n2 = RMSNorm(h; ffn_norm)
  //   x  = h + Wdown (silu(Wgate n2) * (Wup n2))
  // then logits = lm_head RMSNorm(x; final_norm). Attention scale is
  // 1/sqrt(head_dim); query head h reads kv head h / (num_heads / num_kv_heads).
  // Other architectures (ModelConfig::architecture):
  //   qkv bias (qwen2, gpt2, attention_bias): q += bq, k += bk, v += bv right
  //     after the GEMVs; o bias (gpt2, attention_bias): h = x + (Wo attn + bo);
  //   RoPE's frequencies rescaled as rope_scaling says (rope_inverse_frequency);
  //   qk-norm (qwen3, qwen3_moe): each head of q and k RMSNorm'd with q_norm / k_norm
  //     (eps rms_norm_eps) after the biases, before RoPE;
  //   sliding window: only positions > position - sliding_window are attended;
  //   MoE (mixtral, qwen3_moe): r = route_top_k(router n2,
  //     experts_per_token); the MLP output starts at 0 and gets
  //     weight_j * expert_j(n2) added in chosen order (axpy_inplace), each
  //     expert a SwiGLU as above;
  //   gpt2: x = embedding[token] + position_embedding[position]; LayerNorm
  //     (with bias) in place of RMSNorm; no RoPE; h = x + (Wo attn + bo);
  //     x = h + (Wdown gelu_tanh(Wup n2 + b_up) + b_down); final LayerNorm.
  // Biases are added to the GEMV result (add_inplace), then the result to x.
  std::vector<float> forward(std::int32_t token, int position);

  // Empties the KV cache: the next position is 0 again.
  void reset() { positions_ = 0; }
  // Number of positions in the cache (the next position to feed).
  int positions() const { return positions_; }

 private:
  const Weights* weights_;
  int positions_ = 0;
  // KV cache per layer, [kv_head][max_position][head_dim].
  std::vector<std::vector<float>>
      k_cache_;  // [layer * num_kv_heads + kv_head] -> [position][head_dim]
  std::vector<std::vector<float>> v_cache_;
  // Scratch buffers, sized once.
  std::vector<float> x_, norm_, q_, k_, v_, attn_, proj_, gate_, up_, scores_;
  std::vector<float> router_logits_, moe_out_;  // mixture of experts
};

struct Generation {
  std::vector<std::int32_t> tokens;        // the generated tokens only (not the prompt)
  std::vector<std::vector<float>> logits;  // logits[i] are the logits tokens[i] was chosen from
};

// Runs the prompt from position 0, then greedily generates `new_tokens`
// tokens: the first from the logits at the last prompt position, each next one
// after feeding the previous back. Throws std::invalid_argument for an empty
// prompt, a negative new_tokens, a token id outside [0, vocab_size), or
// prompt.size() + new_tokens > max_position.
Generation greedy_generate(const Weights& weights, std::span<const std::int32_t> prompt,
                           int new_tokens);

}  // namespace wafersim::models
