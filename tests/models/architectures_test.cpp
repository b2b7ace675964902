// The reference forward pass of every architecture against an independent
// double-precision implementation written here from the published model
// equations (Hugging Face modeling_{llama,mistral,qwen2,qwen3,mixtral,qwen3_moe,
// gpt2}).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "models/kernels.hpp"
#include "models/reference.hpp"
#include "support/double_model.hpp"

namespace wafersim::models {
namespace {

using Vec = std::vector<double>;
using testing::DoubleModel;

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

// Qwen3-MoE: qk-norm and many small experts, softmax over all of them, top k
// renormalised (Hugging Face Qwen3MoeSparseMoeBlock with norm_topk_prob).
TEST(Architectures, Qwen3MoeQkNormAndTopThreeOfEightExpertsMatchesDouble) {
  ModelConfig c = micro(Architecture::qwen3_moe);
  c.intermediate_size = 6;  // each expert's (moe_intermediate_size)
  c.num_experts = 8;
  c.experts_per_token = 3;
  const Weights w = Weights::synthetic(c, DType::bf16, 16);
  ASSERT_EQ(w.layers[0].experts.size(), 8u);
  EXPECT_EQ(w.layers[0].router.rows(), 8);
  EXPECT_EQ(w.layers[0].q_norm.size(), 8u);
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
  for (Architecture a :
       {Architecture::llama, Architecture::mistral, Architecture::qwen2, Architecture::qwen3,
        Architecture::mixtral, Architecture::qwen3_moe, Architecture::gpt2}) {
    ModelConfig c = micro(a);
    if (a == Architecture::mixtral || a == Architecture::qwen3_moe) {
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
  dense.architecture = Architecture::qwen3;  // experts need qwen3_moe, not qwen3
  EXPECT_THROW(dense.validate(), ConfigError);
  ModelConfig qwen_moe = micro(Architecture::qwen3_moe);
  EXPECT_THROW(qwen_moe.validate(), ConfigError);  // no experts
  qwen_moe.num_experts = 4;
  qwen_moe.experts_per_token = 5;
  EXPECT_THROW(qwen_moe.validate(), ConfigError);
  qwen_moe.experts_per_token = 4;
  EXPECT_NO_THROW(qwen_moe.validate());
  EXPECT_TRUE(qwen_moe.has_qk_norm());
  EXPECT_TRUE(qwen_moe.is_moe());
  EXPECT_FALSE(qwen_moe.has_qkv_bias());
  ModelConfig gpt = micro(Architecture::gpt2);
  gpt.num_kv_heads = 1;
  EXPECT_THROW(gpt.validate(), ConfigError);
  EXPECT_EQ(parse_architecture("qwen3"), Architecture::qwen3);
  EXPECT_EQ(parse_architecture("qwen3_moe"), Architecture::qwen3_moe);
  EXPECT_STREQ(architecture_name(Architecture::qwen3_moe), "qwen3_moe");
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
