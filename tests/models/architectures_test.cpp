// The reference forward pass of every architecture against an independent
// double-precision implementation written here from the published model
// equations (Hugging Face modeling_{llama,mistral,qwen2,qwen3,mixtral,gpt2}).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "models/kernels.hpp"
#include "models/reference.hpp"

namespace wafersim::models {
namespace {

using Vec = std::vector<double>;

class DoubleModel {
 public:
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
        // Hugging Face Mixtral: softmax over all experts, top k, renormalise.
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

// One layer, tiny dims; q_dim (2 x 8) differs from hidden (12).
ModelConfig micro(Architecture a) {
  ModelConfig c;
  c.name = "micro";
  c.architecture = a;
  c.hidden_size = 12;
  c.intermediate_size = 20;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = a == Architecture::gpt2 ? 2 : 1;
  c.head_dim = 8;
  c.vocab_size = 9;
  c.max_position = 12;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  return c;
}

void expect_matches_double(const Weights& w, const std::vector<std::int32_t>& tokens) {
  ReferenceModel model(w);
  DoubleModel expect(w);
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const std::vector<float> got = model.forward(tokens[p], static_cast<int>(p));
    const Vec want = expect.step(tokens[p], static_cast<int>(p));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-4) << "position " << p << " logit " << i;
  }
}

const std::vector<std::int32_t> kTokens = {3, 1, 4, 1, 5, 8, 2, 6};

TEST(Architectures, Qwen2WithQkvBiasesMatchesDouble) {
  const ModelConfig c = micro(Architecture::qwen2);
  const Weights w = Weights::synthetic(c, DType::fp32, 11);
  ASSERT_EQ(w.layers[0].bq.size(), 16u);
  ASSERT_EQ(w.layers[0].bk.size(), 8u);
  expect_matches_double(w, kTokens);
}

TEST(Architectures, Qwen3WithQkNormMatchesDouble) {
  ModelConfig c = micro(Architecture::qwen3);
  c.tie_embeddings = true;
  const Weights w = Weights::synthetic(c, DType::bf16, 12);
  ASSERT_EQ(w.layers[0].q_norm.size(), 8u);
  EXPECT_TRUE(w.layers[0].bq.empty());
  expect_matches_double(w, kTokens);
}

TEST(Architectures, MistralSlidingWindowMatchesDouble) {
  ModelConfig c = micro(Architecture::mistral);
  c.sliding_window = 3;  // 8 positions: the window slides 5 times
  const Weights w = Weights::synthetic(c, DType::fp32, 13);
  expect_matches_double(w, kTokens);
  // The window matters: without it the last logits differ.
  ModelConfig full = c;
  full.sliding_window = 0;
  const Weights wf = Weights::synthetic(full, DType::fp32, 13);
  ASSERT_EQ(wf.layers, w.layers);
  const Generation a = greedy_generate(w, kTokens, 1);
  const Generation b = greedy_generate(wf, kTokens, 1);
  EXPECT_NE(a.logits[0], b.logits[0]);
}

TEST(Architectures, MixtralTopTwoOfFourExpertsMatchesDouble) {
  ModelConfig c = micro(Architecture::mixtral);
  c.num_experts = 4;
  c.experts_per_token = 2;
  const Weights w = Weights::synthetic(c, DType::fp32, 14);
  ASSERT_EQ(w.layers[0].experts.size(), 4u);
  EXPECT_EQ(w.layers[0].w_gate.size(), 0u);
  expect_matches_double(w, kTokens);
}

TEST(Architectures, Gpt2MatchesDouble) {
  ModelConfig c = micro(Architecture::gpt2);
  c.tie_embeddings = true;
  const Weights w = Weights::synthetic(c, DType::fp32, 15);
  EXPECT_EQ(w.position_embedding.rows(), c.max_position);
  EXPECT_EQ(w.layers[0].w_gate.size(), 0u);
  EXPECT_EQ(w.lm_head.size(), 0u);  // tied: the embedding table is the lm_head
  EXPECT_EQ(&w.lm_head_matrix(), &w.embedding);
  expect_matches_double(w, kTokens);
}

TEST(Architectures, ParameterCountsMatchTheSyntheticTensors) {
  for (Architecture a : {Architecture::llama, Architecture::mistral, Architecture::qwen2,
                         Architecture::qwen3, Architecture::mixtral, Architecture::gpt2}) {
    ModelConfig c = micro(a);
    if (a == Architecture::mixtral) {
      c.num_experts = 3;
      c.experts_per_token = 1;
    }
    c.tie_embeddings = a == Architecture::gpt2;
    const Weights w = Weights::synthetic(c, DType::fp32, 1);
    std::uint64_t n = w.embedding.size() + w.final_norm.size() + w.final_norm_bias.size() +
                      w.position_embedding.size() + w.lm_head.size();
    for (const LayerWeights& l : w.layers) {
      n += l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() + l.w_gate.size() + l.w_up.size() +
           l.w_down.size() + l.attn_norm.size() + l.ffn_norm.size() + l.bq.size() + l.bk.size() +
           l.bv.size() + l.bo.size() + l.b_up.size() + l.b_down.size() + l.attn_norm_bias.size() +
           l.ffn_norm_bias.size() + l.q_norm.size() + l.k_norm.size() + l.router.size();
      for (const ExpertWeights& e : l.experts)
        n += e.w_gate.size() + e.w_up.size() + e.w_down.size();
    }
    EXPECT_EQ(c.parameter_count(), n) << architecture_name(a);
  }
}

TEST(Architectures, ConfigValidationCatchesImpossibleCombinations) {
  ModelConfig moe = micro(Architecture::mixtral);
  EXPECT_THROW(moe.validate(), ConfigError);  // no experts
  moe.num_experts = 2;
  moe.experts_per_token = 3;
  EXPECT_THROW(moe.validate(), ConfigError);
  ModelConfig dense = micro(Architecture::llama);
  dense.num_experts = 2;
  EXPECT_THROW(dense.validate(), ConfigError);
  ModelConfig gpt = micro(Architecture::gpt2);
  gpt.num_kv_heads = 1;
  EXPECT_THROW(gpt.validate(), ConfigError);
  EXPECT_EQ(parse_architecture("qwen3"), Architecture::qwen3);
  EXPECT_THROW(parse_architecture("bert"), std::invalid_argument);
}

TEST(Kernels, RouteTopKPicksLargestLogitsAndSoftmaxesThem) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  const std::vector<ExpertChoice> r = route_top_k(logits, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].expert, 1);  // tie: the lower index first
  EXPECT_EQ(r[1].expert, 3);
  EXPECT_EQ(r[0].weight, 0.5f);
  EXPECT_EQ(r[1].weight, 0.5f);
  const std::vector<ExpertChoice> one = route_top_k(logits, 1);
  EXPECT_EQ(one[0].weight, 1.0f);
  EXPECT_THROW(route_top_k(logits, 5), std::invalid_argument);
}

TEST(Kernels, LayerNormAndGeluFollowTheirFormulas) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 6.0f};  // mean 3, var 3.5
  const std::vector<float> g = {1.0f, 2.0f, 1.0f, 1.0f}, b = {0.0f, 0.0f, 0.5f, 0.0f};
  std::vector<float> out(4);
  layernorm(x, g, b, 0.0f, out);
  const double inv = 1.0 / std::sqrt(3.5);
  EXPECT_NEAR(out[0], -2.0 * inv, 1e-6);
  EXPECT_NEAR(out[1], -2.0 * inv, 1e-6);
  EXPECT_NEAR(out[2], 0.5, 1e-6);
  EXPECT_NEAR(out[3], 3.0 * inv, 1e-6);
  std::vector<float> y = {0.0f, 1.0f, -3.0f};
  gelu_tanh(y, y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_NEAR(y[1], 0.8411920, 1e-6);   // gelu_new(1)
  EXPECT_NEAR(y[2], -0.0036374, 1e-6);  // gelu_new(-3)
}

}  // namespace
}  // namespace wafersim::models
