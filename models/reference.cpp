#include "models/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "models/kernels.hpp"

namespace wafersim::models {

namespace {

std::size_t sz(int n) {
  return static_cast<std::size_t>(n);
}

void check_token(std::int32_t token, int vocab) {
  if (token < 0 || token >= vocab) {
    throw std::invalid_argument("token id " + std::to_string(token) +
                                " out of range: allowed are 0.." + std::to_string(vocab - 1));
  }
}

}  // namespace

ReferenceModel::ReferenceModel(const Weights& weights) : weights_(&weights) {
  const ModelConfig& c = weights.config;
  c.validate();
  // One growing cache per (layer, kv head): [position][head_dim]. Sized by
  // the positions actually fed, not max_position (which can be 128K).
  k_cache_.assign(sz(c.num_layers) * sz(c.num_kv_heads), {});
  v_cache_.assign(sz(c.num_layers) * sz(c.num_kv_heads), {});
  x_.resize(sz(c.hidden_size));
  norm_.resize(sz(c.hidden_size));
  proj_.resize(sz(c.hidden_size));
  q_.resize(sz(c.q_dim()));
  attn_.resize(sz(c.q_dim()));
  k_.resize(sz(c.kv_dim()));
  v_.resize(sz(c.kv_dim()));
  gate_.resize(sz(c.intermediate_size));
  up_.resize(sz(c.intermediate_size));
  scores_.resize(sz(c.max_position));
  router_logits_.resize(sz(c.num_experts));
  moe_out_.resize(c.is_moe() ? sz(c.hidden_size) : 0);
}

std::vector<float> ReferenceModel::forward(std::int32_t token, int position) {
  const Weights& w = *weights_;
  const ModelConfig& c = w.config;
  check_token(token, c.vocab_size);
  if (position != positions_) {
    throw std::invalid_argument("position " + std::to_string(position) +
                                " out of order: the next allowed position is " +
                                std::to_string(positions_));
  }
  if (position >= c.max_position) {
    throw std::invalid_argument("position " + std::to_string(position) +
                                " beyond the context: allowed are 0.." +
                                std::to_string(c.max_position - 1));
  }

  const std::size_t hd = sz(c.head_dim);
  const float eps = static_cast<float>(c.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const int group = c.num_heads / c.num_kv_heads;
  const int n_pos = position + 1;

  w.embedding.row_values(token, x_);
  if (c.is_gpt2()) {
    w.position_embedding.row_values(position, proj_);
    add_inplace(x_, proj_);
  }
  // Sliding-window attention sees positions [first_visible, position].
  const int first_visible =
      c.sliding_window > 0 && position >= c.sliding_window ? position - c.sliding_window + 1 : 0;

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& layer = w.layers[sz(l)];

    // Attention block.
    if (c.is_gpt2()) {
      layernorm(x_, layer.attn_norm, layer.attn_norm_bias, eps, norm_);
    } else {
      rmsnorm(x_, layer.attn_norm, eps, norm_);
    }
    gemv_tile(layer.wq.view(), norm_, q_);
    gemv_tile(layer.wk.view(), norm_, k_);
    gemv_tile(layer.wv.view(), norm_, v_);
    if (c.has_qkv_bias()) {
      add_inplace(q_, layer.bq);
      add_inplace(k_, layer.bk);
      add_inplace(v_, layer.bv);
    }
    if (c.has_qk_norm()) {
      for (int h = 0; h < c.num_heads; ++h) {
        std::span<float> q_head = std::span<float>(q_).subspan(sz(h) * hd, hd);
        rmsnorm(q_head, layer.q_norm, eps, q_head);
      }
      for (int kh = 0; kh < c.num_kv_heads; ++kh) {
        std::span<float> k_head = std::span<float>(k_).subspan(sz(kh) * hd, hd);
        rmsnorm(k_head, layer.k_norm, eps, k_head);
      }
    }
    if (!c.is_gpt2()) {
      for (int h = 0; h < c.num_heads; ++h) {
        rope_apply(std::span<float>(q_).subspan(sz(h) * hd, hd), position, c.rope_theta,
                   c.rope_scaling);
      }
    }
    const std::size_t first = sz(l) * sz(c.num_kv_heads);
    for (int kh = 0; kh < c.num_kv_heads; ++kh) {
      std::span<float> k_head = std::span<float>(k_).subspan(sz(kh) * hd, hd);
      if (!c.is_gpt2()) rope_apply(k_head, position, c.rope_theta, c.rope_scaling);
      std::vector<float>& kc = k_cache_[first + sz(kh)];
      std::vector<float>& vc = v_cache_[first + sz(kh)];
      kc.resize((sz(position) + 1) * hd);
      vc.resize((sz(position) + 1) * hd);
      const std::size_t at = sz(position) * hd;
      for (std::size_t d = 0; d < hd; ++d) {
        kc[at + d] = k_head[d];
        vc[at + d] = v_[sz(kh) * hd + d];
      }
    }
    for (int h = 0; h < c.num_heads; ++h) {
      const int kh = h / group;
      const float* q = q_.data() + sz(h) * hd;
      const float* keys = k_cache_[first + sz(kh)].data();
      const float* values = v_cache_[first + sz(kh)].data();
      // Standard softmax: scores, their max, exponentials, normalise, weigh.
      float max_score = -std::numeric_limits<float>::infinity();
      for (int t = first_visible; t < n_pos; ++t) {
        float dot = 0.0f;
        for (std::size_t d = 0; d < hd; ++d) dot += q[d] * keys[sz(t) * hd + d];
        scores_[sz(t)] = dot * scale;
        if (scores_[sz(t)] > max_score) max_score = scores_[sz(t)];
      }
      float total = 0.0f;
      for (int t = first_visible; t < n_pos; ++t) {
        scores_[sz(t)] = std::exp(scores_[sz(t)] - max_score);
        total += scores_[sz(t)];
      }
      float* out = attn_.data() + sz(h) * hd;
      for (std::size_t d = 0; d < hd; ++d) out[d] = 0.0f;
      for (int t = first_visible; t < n_pos; ++t) {
        const float p = scores_[sz(t)] / total;
        for (std::size_t d = 0; d < hd; ++d) out[d] += p * values[sz(t) * hd + d];
      }
    }
    gemv_tile(layer.wo.view(), attn_, proj_);
    if (c.has_o_bias()) add_inplace(proj_, layer.bo);
    add_inplace(x_, proj_);

    // MLP block.
    if (c.is_gpt2()) {
      layernorm(x_, layer.ffn_norm, layer.ffn_norm_bias, eps, norm_);
      gemv_tile(layer.w_up.view(), norm_, up_);
      add_inplace(up_, layer.b_up);
      gelu_tanh(up_, up_);
      gemv_tile(layer.w_down.view(), up_, proj_);
      add_inplace(proj_, layer.b_down);
      add_inplace(x_, proj_);
      continue;
    }
    rmsnorm(x_, layer.ffn_norm, eps, norm_);
    if (c.is_moe()) {
      gemv_tile(layer.router.view(), norm_, router_logits_);
      std::fill(moe_out_.begin(), moe_out_.end(), 0.0f);
      for (const ExpertChoice& choice : route_top_k(router_logits_, c.experts_per_token)) {
        const ExpertWeights& expert = layer.experts[sz(choice.expert)];
        gemv_tile(expert.w_gate.view(), norm_, gate_);
        gemv_tile(expert.w_up.view(), norm_, up_);
        silu_mul(gate_, up_, gate_);
        gemv_tile(expert.w_down.view(), gate_, proj_);
        axpy_inplace(choice.weight, proj_, moe_out_);
      }
      add_inplace(x_, moe_out_);
      continue;
    }
    gemv_tile(layer.w_gate.view(), norm_, gate_);
    gemv_tile(layer.w_up.view(), norm_, up_);
    silu_mul(gate_, up_, gate_);
    gemv_tile(layer.w_down.view(), gate_, proj_);
    add_inplace(x_, proj_);
  }

  if (c.is_gpt2()) {
    layernorm(x_, w.final_norm, w.final_norm_bias, eps, norm_);
  } else {
    rmsnorm(x_, w.final_norm, eps, norm_);
  }
  std::vector<float> logits(sz(c.vocab_size));
  gemv_tile(w.lm_head_matrix().view(), norm_, logits);
  ++positions_;
  return logits;
}

Generation greedy_generate(const Weights& weights, std::span<const std::int32_t> prompt,
                           int new_tokens) {
  const ModelConfig& c = weights.config;
  if (prompt.empty()) throw std::invalid_argument("greedy_generate: the prompt must not be empty");
  if (new_tokens < 0) {
    throw std::invalid_argument("greedy_generate: new_tokens must be >= 0, got " +
                                std::to_string(new_tokens));
  }
  for (std::int32_t t : prompt) check_token(t, c.vocab_size);
  const std::size_t context = prompt.size() + sz(new_tokens);
  if (context > sz(c.max_position)) {
    throw std::invalid_argument("greedy_generate: prompt (" + std::to_string(prompt.size()) +
                                ") + new_tokens (" + std::to_string(new_tokens) +
                                ") must be at most max_position (" +
                                std::to_string(c.max_position) + ")");
  }

  ReferenceModel model(weights);
  Generation g;
  g.tokens.reserve(sz(new_tokens));
  g.logits.reserve(sz(new_tokens));
  if (new_tokens == 0) return g;

  int position = 0;
  std::vector<float> logits;
  for (std::int32_t t : prompt) logits = model.forward(t, position++);
  for (int i = 0; i < new_tokens; ++i) {
    const std::int32_t next = argmax(logits);
    g.tokens.push_back(next);
    g.logits.push_back(std::move(logits));
    if (i + 1 < new_tokens) logits = model.forward(next, position++);
  }
  return g;
}

}  // namespace wafersim::models
