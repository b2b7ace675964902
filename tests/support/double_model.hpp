// An independent double-precision forward pass of every architecture the
// models know (llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, gpt2),
// written from the published model equations (Hugging Face modeling_*.py); it
// shares nothing with the library but the weights. The oracle the reference pass
// (and through it the wafer's functional decode) is checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "models/weights.hpp"

namespace wafersim::testing {

using models::ExpertWeights;
using models::LayerWeights;
using models::Matrix;
using models::ModelConfig;
using models::Weights;

class DoubleModel {
 public:
  using Vec = std::vector<double>;

  explicit DoubleModel(const Weights& w)
      : w_(w), c_(w.config), k_(c_.num_layers), v_(c_.num_layers) {}

  Vec step(int token, int pos) {
    const int hd = c_.head_dim;
    Vec x(c_.hidden_size);
    for (int j = 0; j < c_.hidden_size; ++j) {
      x[j] = w_.embedding(token, j);
      if (c_.is_gpt2()) x[j] += w_.position_embedding(pos, j);
    }
    for (int l = 0; l < c_.num_layers; ++l) {
      const LayerWeights& lw = w_.layers[l];
      Vec n1 =
          c_.is_gpt2() ? layer_norm(x, lw.attn_norm, lw.attn_norm_bias) : rms_norm(x, lw.attn_norm);
      Vec q = mul(lw.wq, n1), k = mul(lw.wk, n1), v = mul(lw.wv, n1);
      if (c_.has_qkv_bias()) {
        add(q, lw.bq);
        add(k, lw.bk);
        add(v, lw.bv);
      }
      if (c_.has_qk_norm()) {
        for (int h = 0; h < c_.num_heads; ++h) head_rms(q, h * hd, lw.q_norm);
        for (int h = 0; h < c_.num_kv_heads; ++h) head_rms(k, h * hd, lw.k_norm);
      }
      if (!c_.is_gpt2()) {
        for (int h = 0; h < c_.num_heads; ++h) rope(q, h * hd, pos);
        for (int h = 0; h < c_.num_kv_heads; ++h) rope(k, h * hd, pos);
      }
      k_[l].push_back(k);
      v_[l].push_back(v);
      const int n = static_cast<int>(k_[l].size());
      const int t0 = c_.sliding_window > 0 ? std::max(0, n - c_.sliding_window) : 0;
      Vec attn(c_.q_dim(), 0.0);
      const int per_kv = c_.num_heads / c_.num_kv_heads;
      for (int h = 0; h < c_.num_heads; ++h) {
        const int kvh = h / per_kv;
        Vec s(n, 0.0);
        double m = -1e300, z = 0;
        for (int t = t0; t < n; ++t) {
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += q[h * hd + d] * k_[l][t][kvh * hd + d];
          s[t] = dot / std::sqrt(static_cast<double>(hd));
          m = std::max(m, s[t]);
        }
        for (int t = t0; t < n; ++t) z += std::exp(s[t] - m);
        for (int t = t0; t < n; ++t)
          for (int d = 0; d < hd; ++d)
            attn[h * hd + d] += std::exp(s[t] - m) / z * v_[l][t][kvh * hd + d];
      }
      Vec o = mul(lw.wo, attn);
      if (c_.is_gpt2()) add(o, lw.bo);
      add(x, o);

      if (c_.is_gpt2()) {
        Vec n2 = layer_norm(x, lw.ffn_norm, lw.ffn_norm_bias);
        Vec u = mul(lw.w_up, n2);
        add(u, lw.b_up);
        for (double& a : u) {
          a = 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)));
        }
        Vec dn = mul(lw.w_down, u);
        add(dn, lw.b_down);
        add(x, dn);
      } else if (c_.is_moe()) {
        Vec n2 = rms_norm(x, lw.ffn_norm);
        // Hugging Face Mixtral (and Qwen3-MoE with norm_topk_prob): softmax over
        // all experts, top k, renormalise.
        Vec logits = mul(lw.router, n2);
        const double mx = *std::max_element(logits.begin(), logits.end());
        Vec p(logits.size());
        for (std::size_t e = 0; e < p.size(); ++e) p[e] = std::exp(logits[e] - mx);
        std::vector<int> order(p.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
        double top = 0;
        for (int j = 0; j < c_.experts_per_token; ++j) top += p[order[j]];
        Vec out(c_.hidden_size, 0.0);
        for (int j = 0; j < c_.experts_per_token; ++j) {
          const ExpertWeights& ex = lw.experts[order[j]];
          Vec y = swiglu(ex.w_gate, ex.w_up, ex.w_down, n2);
          for (int i = 0; i < c_.hidden_size; ++i) out[i] += p[order[j]] / top * y[i];
        }
        add(x, out);
      } else {
        add(x, swiglu(lw.w_gate, lw.w_up, lw.w_down, rms_norm(x, lw.ffn_norm)));
      }
    }
    Vec fin = c_.is_gpt2() ? layer_norm(x, w_.final_norm, w_.final_norm_bias)
                           : rms_norm(x, w_.final_norm);
    return mul(w_.lm_head_matrix(), fin);
  }

 private:
  static void add(Vec& a, const std::vector<float>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
  static void add(Vec& a, const Vec& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
  static Vec mul(const Matrix& m, const Vec& x) {
    Vec y(m.rows(), 0.0);
    for (int i = 0; i < m.rows(); ++i)
      for (int j = 0; j < m.cols(); ++j) y[i] += m(i, j) * x[j];
    return y;
  }
  Vec swiglu(const Matrix& gate, const Matrix& up, const Matrix& down, const Vec& x) const {
    Vec g = mul(gate, x), u = mul(up, x);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    return mul(down, g);
  }
  Vec rms_norm(const Vec& x, const std::vector<float>& g) const {
    double ss = 0;
    for (double a : x) ss += a * a;
    const double r = 1.0 / std::sqrt(ss / x.size() + c_.rms_norm_eps);
    Vec out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * r * g[i];
    return out;
  }
  void head_rms(Vec& a, int off, const std::vector<float>& g) const {
    Vec h(a.begin() + off, a.begin() + off + c_.head_dim);
    h = rms_norm(h, g);
    std::copy(h.begin(), h.end(), a.begin() + off);
  }
  Vec layer_norm(const Vec& x, const std::vector<float>& g, const std::vector<float>& b) const {
    double mean = 0, var = 0;
    for (double a : x) mean += a;
    mean /= x.size();
    for (double a : x) var += (a - mean) * (a - mean);
    var /= x.size();
    const double r = 1.0 / std::sqrt(var + c_.rms_norm_eps);
    Vec out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = (x[i] - mean) * r * g[i] + b[i];
    return out;
  }
  void rope(Vec& a, int off, int pos) const {
    const int half = c_.head_dim / 2;
    for (int i = 0; i < half; ++i) {
      const double ang = pos / std::pow(c_.rope_theta, 2.0 * i / c_.head_dim);
      const double x0 = a[off + i], x1 = a[off + i + half];
      a[off + i] = x0 * std::cos(ang) - x1 * std::sin(ang);
      a[off + i + half] = x1 * std::cos(ang) + x0 * std::sin(ang);
    }
  }
  const Weights& w_;
  const ModelConfig& c_;
  std::vector<std::vector<Vec>> k_, v_;
};

}  // namespace wafersim::testing
