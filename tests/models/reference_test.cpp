#include "models/reference.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "models/dtype.hpp"
#include "models/kernels.hpp"
#include "support/double_model.hpp"

namespace wafersim::models {
namespace {

using Vec = std::vector<double>;

ModelConfig micro_config() {
  ModelConfig c;
  c.name = "micro";
  c.hidden_size = 4;
  c.intermediate_size = 6;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;  // both query heads read kv head 0
  c.head_dim = 4;      // q_dim 8 != hidden 4
  c.vocab_size = 7;
  c.max_position = 8;
  c.rope_theta = 10000.0;
  c.rms_norm_eps = 1e-5;
  return c;
}

ModelConfig tiny_llama() {
  ModelConfig c;
  c.name = "tiny-llama";
  c.hidden_size = 64;
  c.intermediate_size = 192;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 256;
  c.max_position = 128;
  return c;
}

void expect_matches_double(const Weights& w, const std::vector<std::int32_t>& tokens) {
  ReferenceModel model(w);
  testing::DoubleModel expect(w);
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const std::vector<float> got = model.forward(tokens[p], static_cast<int>(p));
    const Vec want = expect.step(tokens[p], static_cast<int>(p));
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-4) << "position " << p << " logit " << i;
  }
}

TEST(ReferenceModel, MatchesAnIndependentDoublePrecisionForwardPass) {
  const Weights w = Weights::synthetic(micro_config(), DType::fp32, 7);
  expect_matches_double(w, {3, 1, 4, 1, 5});
}

TEST(ReferenceModel, MatchesDoubleWithGroupedKvHeadsAndTiedBf16Weights) {
  ModelConfig c = micro_config();
  c.num_heads = 4;
  c.num_kv_heads = 2;  // heads 0,1 -> kv 0; heads 2,3 -> kv 1
  c.head_dim = 2;
  c.tie_embeddings = true;
  c.rope_theta = 500000.0;
  const Weights w = Weights::synthetic(c, DType::bf16, 8);
  expect_matches_double(w, {6, 0, 2, 2, 5, 3, 1});
}

TEST(ReferenceModel, MatchesDoubleOnTinyLlama) {
  const Weights w = Weights::synthetic(tiny_llama(), DType::bf16, 1);
  expect_matches_double(w, {10, 200, 3, 77, 128, 255, 0, 42});
}

TEST(ReferenceModel, RejectsBadTokensAndPositions) {
  const Weights w = Weights::synthetic(micro_config(), DType::fp32, 7);
  ReferenceModel m(w);
  EXPECT_THROW(m.forward(7, 0), std::invalid_argument);
  EXPECT_THROW(m.forward(-1, 0), std::invalid_argument);
  EXPECT_THROW(m.forward(0, 1), std::invalid_argument);  // must start at 0
  m.forward(0, 0);
  EXPECT_THROW(m.forward(0, 0), std::invalid_argument);  // no going back
  EXPECT_EQ(m.positions(), 1);
  for (int p = 1; p < 8; ++p) m.forward(1, p);
  EXPECT_THROW(m.forward(1, 8), std::invalid_argument);  // beyond max_position
  m.reset();
  EXPECT_EQ(m.positions(), 0);
  EXPECT_NO_THROW(m.forward(1, 0));
}

TEST(ReferenceModel, ResetGivesTheSameLogits) {
  const Weights w = Weights::synthetic(micro_config(), DType::bf16, 3);
  ReferenceModel m(w);
  const auto a0 = m.forward(2, 0);
  const auto a1 = m.forward(5, 1);
  m.reset();
  EXPECT_EQ(m.forward(2, 0), a0);
  EXPECT_EQ(m.forward(5, 1), a1);
}

TEST(GreedyGenerate, CompactHostStorageGivesBitIdenticalLogits) {
  // 16-bit storage widens exactly in the GEMV kernels, and the embedding rows
  // are widened the same way, so every logit keeps its bits.
  for (DType t : {DType::bf16, DType::fp16}) {
    for (bool tied : {false, true}) {
      ModelConfig c = tiny_llama();
      c.tie_embeddings = tied;
      const Weights wide = Weights::synthetic(c, t, 6);
      const Weights compact = Weights::synthetic(c, t, 6, HostStorage::compact);
      ASSERT_EQ(compact.layers[0].wq.storage(), t);
      const std::vector<std::int32_t> prompt = {4, 40, 140};
      const Generation a = greedy_generate(wide, prompt, 5);
      const Generation b = greedy_generate(compact, prompt, 5);
      EXPECT_EQ(a.tokens, b.tokens);
      ASSERT_EQ(a.logits.size(), b.logits.size());
      for (std::size_t i = 0; i < a.logits.size(); ++i) {
        ASSERT_EQ(a.logits[i].size(), b.logits[i].size());
        for (std::size_t k = 0; k < a.logits[i].size(); ++k)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(a.logits[i][k]),
                    std::bit_cast<std::uint32_t>(b.logits[i][k]))
              << dtype_name(t) << (tied ? " tied" : "") << " token " << i << " logit " << k;
      }
    }
  }
}

TEST(GreedyGenerate, TokensAreTheArgmaxOfTheirLogits) {
  const Weights w = Weights::synthetic(tiny_llama(), DType::bf16, 1);
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  const Generation g = greedy_generate(w, prompt, 6);
  ASSERT_EQ(g.tokens.size(), 6u);
  ASSERT_EQ(g.logits.size(), 6u);
  for (std::size_t i = 0; i < g.tokens.size(); ++i) {
    ASSERT_EQ(g.logits[i].size(), 256u);
    EXPECT_EQ(g.tokens[i], argmax(g.logits[i]));
  }
  // The first token comes from the last prompt position's logits.
  ReferenceModel m(w);
  std::vector<float> last;
  for (std::size_t p = 0; p < prompt.size(); ++p) last = m.forward(prompt[p], static_cast<int>(p));
  EXPECT_EQ(g.logits[0], last);
}

TEST(GreedyGenerate, IsDeterministic) {
  const Weights w = Weights::synthetic(tiny_llama(), DType::bf16, 1);
  const std::vector<std::int32_t> prompt = {9, 8, 7};
  const Generation a = greedy_generate(w, prompt, 10);
  const Generation b = greedy_generate(w, prompt, 10);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logits, b.logits);
  // Other weights, other tokens (a sanity check that the output is not constant).
  const Weights w2 = Weights::synthetic(tiny_llama(), DType::bf16, 2);
  EXPECT_NE(greedy_generate(w2, prompt, 10).logits, a.logits);
}

TEST(GreedyGenerate, KvCacheStepByStepEqualsRerunningThePrefix) {
  const Weights w = Weights::synthetic(tiny_llama(), DType::bf16, 4);
  const std::vector<std::int32_t> prompt = {11, 22, 33};
  const Generation g = greedy_generate(w, prompt, 5);
  for (std::size_t k = 0; k < g.tokens.size(); ++k) {
    // Fresh model over prompt + the first k generated tokens.
    std::vector<std::int32_t> seq = prompt;
    seq.insert(seq.end(), g.tokens.begin(), g.tokens.begin() + static_cast<long>(k));
    ReferenceModel m(w);
    std::vector<float> logits;
    for (std::size_t p = 0; p < seq.size(); ++p) logits = m.forward(seq[p], static_cast<int>(p));
    EXPECT_EQ(logits, g.logits[k]) << "step " << k;
  }
}

TEST(GreedyGenerate, RejectsBadInputsSayingWhatIsAllowed) {
  const Weights w = Weights::synthetic(micro_config(), DType::fp32, 7);  // vocab 7, context 8
  const std::vector<std::int32_t> bad_token = {1, 7};
  try {
    greedy_generate(w, bad_token, 1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("0..6"), std::string::npos) << e.what();
  }
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  EXPECT_NO_THROW(greedy_generate(w, prompt, 5));  // 3 + 5 = 8 positions: fits
  try {
    greedy_generate(w, prompt, 6);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("max_position (8)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(greedy_generate(w, std::vector<std::int32_t>{}, 1), std::invalid_argument);
  EXPECT_THROW(greedy_generate(w, prompt, -1), std::invalid_argument);
  EXPECT_TRUE(greedy_generate(w, prompt, 0).tokens.empty());
}

}  // namespace
}  // namespace wafersim::models
