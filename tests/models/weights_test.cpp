#include "models/weights.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "models/dtype.hpp"
#include "models/rng.hpp"

namespace wafersim::models {
namespace {

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

TEST(Rng, SplitMix64MatchesTheReferenceOutputs) {
  // Vigna's splitmix64.c seeded with 0.
  SplitMix64 sm(0);
  EXPECT_EQ(sm.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(sm.next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(sm.next(), 0x06c45d188009454full);
}

TEST(Rng, Xoshiro256StarStarMatchesTheReferenceOutputs) {
  // xoshiro256starstar.c with state {1, 2, 3, 4}.
  Xoshiro256StarStar x(1, 2, 3, 4);
  EXPECT_EQ(x.next(), 11520ull);
  EXPECT_EQ(x.next(), 0ull);
  EXPECT_EQ(x.next(), 1509978240ull);
  EXPECT_EQ(x.next(), 1215971899390074240ull);
}

TEST(Rng, UniformStaysInRange) {
  Xoshiro256StarStar x(5);
  double sum = 0.0;
  for (int i = 0; i < 10000; ++i) {
    const float u = x.uniform_pm1();
    ASSERT_GE(u, -1.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000.0, 0.0, 0.03);
}

TEST(Matrix, ViewIsANonOwningRectangle) {
  Matrix m(4, 5);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) m(i, j) = static_cast<float>(10 * i + j);
  const MatrixView v = m.view(1, 2, 2, 3);
  EXPECT_EQ(v.rows(), 2);
  EXPECT_EQ(v.cols(), 3);
  EXPECT_EQ(v.leading_dim(), 5u);
  EXPECT_EQ(v.data(), m.data() + 1 * 5 + 2);  // points into the matrix: no copy
  EXPECT_EQ(v(0, 0), 12.0f);
  EXPECT_EQ(v(1, 2), 24.0f);
  EXPECT_EQ(v.row(1)[1], 23.0f);
  EXPECT_EQ(v.row(1).size(), 3u);
  m(2, 4) = -1.0f;  // writes through to the view
  EXPECT_EQ(v(1, 2), -1.0f);
  EXPECT_EQ(m.row(3)[4], 34.0f);
  EXPECT_EQ(m.view().rows(), 4);
  EXPECT_EQ(m.view().cols(), 5);
}

TEST(Matrix, ViewOutsideThrows) {
  Matrix m(4, 5);
  EXPECT_THROW(m.view(3, 2, 0, 1), std::out_of_range);
  EXPECT_THROW(m.view(0, 1, 4, 2), std::out_of_range);
  EXPECT_THROW(m.view(-1, 1, 0, 1), std::out_of_range);
  EXPECT_NO_THROW(m.view(4, 0, 5, 0));
  EXPECT_THROW(Matrix(-1, 2), std::invalid_argument);
}

// Every element of `m`, read with operator() const and with row_values,
// has the bits of the same element of the fp32 matrix `want`.
void expect_same_values(const Matrix& m, const Matrix& want) {
  ASSERT_EQ(m.rows(), want.rows());
  ASSERT_EQ(m.cols(), want.cols());
  std::vector<float> row(static_cast<std::size_t>(m.cols()));
  for (int i = 0; i < m.rows(); ++i) {
    m.row_values(i, row);
    for (int j = 0; j < m.cols(); ++j) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(m(i, j)), std::bit_cast<std::uint32_t>(want(i, j)))
          << "(" << i << ", " << j << ")";
      EXPECT_EQ(std::bit_cast<std::uint32_t>(row[static_cast<std::size_t>(j)]),
                std::bit_cast<std::uint32_t>(want(i, j)))
          << "row_values (" << i << ", " << j << ")";
    }
  }
}

TEST(Matrix, StoreAsSixteenBitsKeepsEveryValueAndHalvesTheMemory) {
  for (DType t : {DType::bf16, DType::fp16}) {
    Matrix m(3, 5);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) m(i, j) = round_to_dtype(0.37f * static_cast<float>(i - j), t);
    m(2, 4) = -0.0f;
    const Matrix fp32 = m;
    EXPECT_EQ(m.storage(), DType::fp32);
    EXPECT_EQ(m.storage_bytes(), 15u * 4u);
    m.store_as(t);
    EXPECT_EQ(m.storage(), t);
    EXPECT_EQ(m.storage_bytes(), 15u * 2u);
    EXPECT_EQ(m.size(), 15u);
    const Matrix& c = m;
    expect_same_values(c, fp32);
    std::vector<float> row(5);
    const MatrixView v = c.view(1, 2, 1, 3);
    EXPECT_EQ(v.storage(), t);
    EXPECT_EQ(v(1, 2), fp32(2, 3));
    EXPECT_THROW(v.data(), std::logic_error);
    EXPECT_THROW(c.data(), std::logic_error);  // no float pointer into 16-bit storage
    EXPECT_THROW(c.row(0), std::logic_error);
    EXPECT_THROW(m.mutable_row(0), std::logic_error);
    EXPECT_THROW(m(0, 0) = 1.0f, std::logic_error);
    EXPECT_FALSE(m == fp32);  // same values, other storage
    m.store_as(t);            // already so: nothing to do
    EXPECT_THROW(m.store_as(t == DType::bf16 ? DType::fp16 : DType::bf16), std::logic_error);
    EXPECT_THROW(c.row_values(0, std::span<float>(row).first(4)), std::invalid_argument);
  }
}

TEST(Matrix, StoreAsRejectsValuesTheDtypeCannotHoldAndChangesNothing) {
  Matrix m(2, 3);
  m(1, 2) = 0.1f;  // not a bf16 value, nor an fp16 one
  for (DType t : {DType::bf16, DType::fp16}) {
    try {
      m.store_as(t);
      FAIL() << "no error for " << dtype_name(t);
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("(1, 2)"), std::string::npos) << e.what();
    }
    EXPECT_EQ(m.storage(), DType::fp32);
    EXPECT_EQ(m(1, 2), 0.1f);
  }
}

TEST(Matrix, StoreAsFp32AndTheEightBitFormatsKeepsFp32) {
  // int8 and fp8 values are held dequantized (value x fp32 row scale).
  for (DType t : {DType::fp32, DType::int8, DType::fp8_e4m3}) {
    Matrix m(2, 2);
    m(0, 1) = 0.1f;
    m.store_as(t);
    EXPECT_EQ(m.storage(), DType::fp32);
    EXPECT_EQ(m(0, 1), 0.1f);
  }
}

TEST(Matrix, StoreQuantizedKeepsEveryValueInAQuarterOfTheBytes) {
  for (DType t : {DType::int8, DType::fp8_e4m3}) {
    Matrix m(3, 5);
    std::vector<float> scales(3);
    Xoshiro256StarStar rng(9);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) m(i, j) = rng.uniform_pm1() * (i == 1 ? 1e-3f : 2.0f);
      if (i == 2)
        for (int j = 0; j < 5; ++j) m(i, j) = 0.0f;  // all zero: scale 1
      scales[static_cast<std::size_t>(i)] = quantize_row(m.mutable_row(i), t);
    }
    const Matrix wide = m;
    m.store_quantized(t, scales);
    EXPECT_EQ(m.storage(), t);
    EXPECT_EQ(m.storage_bytes(), 15u + 3u * 4u);
    expect_same_values(m, wide);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(m.view(1, 2, 1, 4)(0, 0)),
              std::bit_cast<std::uint32_t>(wide(1, 1)));
    EXPECT_THROW(m.data(), std::logic_error);
    EXPECT_THROW(m.store_quantized(t, scales), std::logic_error);  // already 8-bit
  }
}

TEST(Matrix, StoreQuantizedRejectsValuesItCannotRebuildAndLeavesTheMatrix) {
  Matrix m(2, 2);
  m(0, 0) = 0.1f;  // not a code times the scale 1
  EXPECT_THROW(m.store_quantized(DType::int8, std::vector<float>{1.0f, 1.0f}),
               std::invalid_argument);
  EXPECT_EQ(m.storage(), DType::fp32);
  EXPECT_EQ(m(0, 0), 0.1f);
  EXPECT_THROW(m.store_quantized(DType::int8, std::vector<float>{1.0f}), std::invalid_argument);
  EXPECT_THROW(m.store_quantized(DType::bf16, std::vector<float>{1.0f, 1.0f}),
               std::invalid_argument);
}

TEST(Matrix, CompactRowByRowEqualsStoringTheWholeMatrix) {
  // The same rounded rows, stored by set_row into a compact matrix and by
  // store_as / store_quantized from fp32: the same storage, the same bits.
  for (DType t : {DType::bf16, DType::fp16, DType::int8, DType::fp8_e4m3}) {
    Matrix wide(5, 9);
    std::vector<float> scales(5);
    Xoshiro256StarStar rng(4);
    Matrix rows = Matrix::compact(5, 9, t);
    EXPECT_EQ(rows.storage(), t);
    for (int i = 0; i < 5; ++i) {
      for (int j = 0; j < 9; ++j) wide(i, j) = rng.uniform_pm1() * 3.0f;
      wide(i, 0) = -0.0f;
      scales[static_cast<std::size_t>(i)] = quantize_row(wide.mutable_row(i), t);
      rows.set_row(i, wide.row(i), scales[static_cast<std::size_t>(i)]);
    }
    Matrix whole = wide;
    if (is_8bit(t)) {
      whole.store_quantized(t, scales);
    } else {
      whole.store_as(t);
    }
    EXPECT_EQ(rows.storage_bytes(), whole.storage_bytes()) << dtype_name(t);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 9; ++j)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(std::as_const(rows)(i, j)),
                  std::bit_cast<std::uint32_t>(std::as_const(whole)(i, j)))
            << dtype_name(t) << " (" << i << ", " << j << ")";
  }
}

TEST(Matrix, SetRowRejectsWhatTheStorageCannotHoldAndCompactOnlyCompactTypes) {
  Matrix m = Matrix::compact(2, 3, DType::bf16);
  const std::vector<float> ok = {1.0f, -2.0f, 0.5f}, bad = {1.0f, 1.0f + 0x1p-20f, 0.0f};
  m.set_row(1, ok);
  EXPECT_EQ(std::as_const(m)(1, 1), -2.0f);
  EXPECT_EQ(std::as_const(m)(0, 2), 0.0f);
  try {
    m.set_row(0, bad);
    FAIL() << "not representable in bf16";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("element (0, 1)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.set_row(2, ok), std::invalid_argument);  // no row 2
  EXPECT_THROW(m.set_row(0, std::vector<float>(2)), std::invalid_argument);
  EXPECT_THROW(Matrix::compact(2, 2, DType::fp32), std::invalid_argument);
  EXPECT_THROW(Matrix::compact(-1, 2, DType::bf16), std::invalid_argument);
}

TEST(Weights, CompactHostStorageHoldsTheSameValues) {
  ModelConfig c = tiny_llama();
  for (DType t : {DType::bf16, DType::fp16, DType::int8, DType::fp8_e4m3}) {
    const Weights wide = Weights::synthetic(c, t, 5);
    const Weights compact = Weights::synthetic(c, t, 5, HostStorage::compact);
    const DType want = t;
    auto same = [&](const Matrix& a, const Matrix& b) {
      ASSERT_EQ(a.storage(), DType::fp32);
      ASSERT_EQ(b.storage(), want);
      ASSERT_EQ(a.rows(), b.rows());
      ASSERT_EQ(a.cols(), b.cols());
      for (int i = 0; i < a.rows(); ++i)
        for (int j = 0; j < a.cols(); ++j)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(a(i, j)), std::bit_cast<std::uint32_t>(b(i, j)))
              << dtype_name(t) << " (" << i << ", " << j << ")";
    };
    same(wide.embedding, compact.embedding);
    same(wide.lm_head, compact.lm_head);
    for (std::size_t l = 0; l < wide.layers.size(); ++l) {
      const LayerWeights& a = wide.layers[l];
      const LayerWeights& b = compact.layers[l];
      same(a.wq, b.wq);
      same(a.wk, b.wk);
      same(a.wv, b.wv);
      same(a.wo, b.wo);
      same(a.w_gate, b.w_gate);
      same(a.w_up, b.w_up);
      same(a.w_down, b.w_down);
      EXPECT_EQ(a.attn_norm, b.attn_norm);  // vectors stay fp32
    }
    EXPECT_EQ(wide.final_norm, compact.final_norm);
  }
}

TEST(Weights, HostThreadCountDoesNotChangeABit) {
  // Dense and mixture-of-experts layers, made by one thread or by four
  // (more threads than some layers have matrices).
  ModelConfig moe = tiny_llama();
  moe.name = "tiny-moe";
  moe.architecture = Architecture::mixtral;
  moe.num_experts = 4;
  moe.experts_per_token = 2;
  for (const ModelConfig& c : {tiny_llama(), moe}) {
    const Weights one = Weights::synthetic(c, DType::bf16, 9, HostStorage::compact, 1);
    const Weights four = Weights::synthetic(c, DType::bf16, 9, HostStorage::compact, 4);
    auto same = [&](const Matrix& a, const Matrix& b, const std::string& what) {
      ASSERT_EQ(a.rows(), b.rows()) << what;
      ASSERT_EQ(a.cols(), b.cols()) << what;
      ASSERT_EQ(a.storage(), b.storage()) << what;
      for (int i = 0; i < a.rows(); ++i)
        for (int j = 0; j < a.cols(); ++j)
          ASSERT_EQ(std::bit_cast<std::uint32_t>(a(i, j)), std::bit_cast<std::uint32_t>(b(i, j)))
              << c.name << " " << what << " (" << i << ", " << j << ")";
    };
    same(one.embedding, four.embedding, "embedding");
    if (!c.tie_embeddings) same(one.lm_head, four.lm_head, "lm_head");
    for (std::size_t l = 0; l < one.layers.size(); ++l) {
      const LayerWeights& a = one.layers[l];
      const LayerWeights& b = four.layers[l];
      const std::string at = " of layer " + std::to_string(l);
      same(a.wq, b.wq, "wq" + at);
      same(a.wk, b.wk, "wk" + at);
      same(a.wv, b.wv, "wv" + at);
      same(a.wo, b.wo, "wo" + at);
      if (c.is_moe()) {
        same(a.router, b.router, "router" + at);
        ASSERT_EQ(a.experts.size(), b.experts.size());
        for (std::size_t e = 0; e < a.experts.size(); ++e) {
          same(a.experts[e].w_gate, b.experts[e].w_gate, "expert gate" + at);
          same(a.experts[e].w_up, b.experts[e].w_up, "expert up" + at);
          same(a.experts[e].w_down, b.experts[e].w_down, "expert down" + at);
        }
      } else {
        same(a.w_gate, b.w_gate, "w_gate" + at);
        same(a.w_up, b.w_up, "w_up" + at);
        same(a.w_down, b.w_down, "w_down" + at);
      }
    }
  }
}

TEST(Weights, ShapesFollowTheConfig) {
  const ModelConfig c = tiny_llama();
  const Weights w = Weights::synthetic(c, DType::bf16, 1);
  EXPECT_EQ(w.dtype, DType::bf16);
  EXPECT_EQ(w.embedding.rows(), 256);
  EXPECT_EQ(w.embedding.cols(), 64);
  ASSERT_EQ(w.layers.size(), 4u);
  const LayerWeights& l = w.layers[3];
  EXPECT_EQ(l.wq.rows(), 64);
  EXPECT_EQ(l.wq.cols(), 64);
  EXPECT_EQ(l.wk.rows(), 32);
  EXPECT_EQ(l.wk.cols(), 64);
  EXPECT_EQ(l.wv.rows(), 32);
  EXPECT_EQ(l.wv.cols(), 64);
  EXPECT_EQ(l.wo.rows(), 64);
  EXPECT_EQ(l.wo.cols(), 64);
  EXPECT_EQ(l.w_gate.rows(), 192);
  EXPECT_EQ(l.w_gate.cols(), 64);
  EXPECT_EQ(l.w_up.rows(), 192);
  EXPECT_EQ(l.w_up.cols(), 64);
  EXPECT_EQ(l.w_down.rows(), 64);
  EXPECT_EQ(l.w_down.cols(), 192);
  EXPECT_EQ(l.attn_norm.size(), 64u);
  EXPECT_EQ(l.ffn_norm.size(), 64u);
  EXPECT_EQ(w.final_norm.size(), 64u);
  EXPECT_EQ(w.lm_head.rows(), 256);
  EXPECT_EQ(w.lm_head.cols(), 64);
}

TEST(Weights, SameSeedSameBitsDifferentSeedDifferentBits) {
  const ModelConfig c = tiny_llama();
  const Weights a = Weights::synthetic(c, DType::bf16, 42);
  const Weights b = Weights::synthetic(c, DType::bf16, 42);
  const Weights d = Weights::synthetic(c, DType::bf16, 43);
  EXPECT_TRUE(a.embedding == b.embedding);
  EXPECT_TRUE(a.layers == b.layers);
  EXPECT_EQ(a.final_norm, b.final_norm);
  EXPECT_TRUE(a.lm_head == b.lm_head);
  EXPECT_FALSE(a.embedding == d.embedding);
  EXPECT_FALSE(a.lm_head == d.lm_head);
  EXPECT_NE(a.final_norm, d.final_norm);
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_FALSE(a.layers[l].wq == d.layers[l].wq);
    EXPECT_FALSE(a.layers[l].w_down == d.layers[l].w_down);
    EXPECT_NE(a.layers[l].attn_norm, d.layers[l].attn_norm);
  }
  // Different tensors of one model are not copies of each other.
  EXPECT_FALSE(a.layers[0].wq == a.layers[1].wq);
  EXPECT_FALSE(a.layers[0].wq == a.layers[0].wo);
  EXPECT_FALSE(a.embedding == a.lm_head);
}

TEST(Weights, GoldenValuesCatchPlatformDrift) {
  // Computed by an independent Python re-implementation of the documented
  // scheme (SplitMix64 / xoshiro256**, streams, bounds, bf16 RNE).
  const Weights w = Weights::synthetic(tiny_llama(), DType::bf16, 42);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(w.embedding(3, 5)), 0x3e930000u);          // 0.287109375
  EXPECT_EQ(std::bit_cast<std::uint32_t>(w.layers[0].wq(1, 2)), 0x3e540000u);       // 0.20703125
  EXPECT_EQ(std::bit_cast<std::uint32_t>(w.layers[1].w_down(7, 11)), 0xbd2f0000u);  // -0.0427246
  EXPECT_EQ(std::bit_cast<std::uint32_t>(w.final_norm[4]), 0x3f8c0000u);            // 1.09375
  EXPECT_EQ(std::bit_cast<std::uint32_t>(w.lm_head(10, 20)), 0x3e0a0000u);          // 0.134765625
}

TEST(Weights, TensorsDoNotDependOnOtherTensorsSizes) {
  ModelConfig c = tiny_llama();
  const Weights a = Weights::synthetic(c, DType::fp32, 9);
  c.num_layers = 2;
  c.vocab_size = 100;
  c.intermediate_size = 128;
  const Weights b = Weights::synthetic(c, DType::fp32, 9);
  EXPECT_TRUE(a.layers[1].wq == b.layers[1].wq);
  EXPECT_TRUE(a.layers[1].wo == b.layers[1].wo);
  EXPECT_EQ(a.layers[0].ffn_norm, b.layers[0].ffn_norm);
  EXPECT_EQ(a.final_norm, b.final_norm);
  // The embedding's first rows are the same stream prefix.
  for (int j = 0; j < 64; ++j) EXPECT_EQ(a.embedding(99, j), b.embedding(99, j));
}

TEST(Weights, ValuesAreExactlyRepresentableInTheStorageDtype) {
  for (DType t : {DType::bf16, DType::fp16}) {
    const Weights w = Weights::synthetic(tiny_llama(), t, 3);
    for (std::size_t i = 0; i < w.layers[2].w_up.size(); ++i) {
      const float v = w.layers[2].w_up.data()[i];
      ASSERT_EQ(round_to_dtype(v, t), v) << dtype_name(t) << " element " << i;
    }
    for (float g : w.layers[0].attn_norm) ASSERT_EQ(round_to_dtype(g, t), g);
    for (std::size_t i = 0; i < w.embedding.size(); ++i)
      ASSERT_EQ(round_to_dtype(w.embedding.data()[i], t), w.embedding.data()[i]);
  }
  // bf16 values have 16 zero low bits.
  const Weights w = Weights::synthetic(tiny_llama(), DType::bf16, 3);
  for (std::size_t i = 0; i < w.lm_head.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(w.lm_head.data()[i]) & 0xffffu, 0u);
}

TEST(Weights, DistributionsHaveTheDocumentedScale) {
  const Weights w = Weights::synthetic(tiny_llama(), DType::fp32, 11);
  auto moments = [](const float* p, std::size_t n, double& mean, double& var, double& maxabs) {
    double s = 0.0, s2 = 0.0;
    maxabs = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      s += p[i];
      s2 += static_cast<double>(p[i]) * p[i];
      maxabs = std::max(maxabs, std::abs(static_cast<double>(p[i])));
    }
    mean = s / n;
    var = s2 / n - mean * mean;
  };
  double mean, var, maxabs;
  const Matrix& down = w.layers[0].w_down;  // fan_in 192
  moments(down.data(), down.size(), mean, var, maxabs);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var * 192.0, 1.0, 0.05);
  EXPECT_LE(maxabs, std::sqrt(3.0 / 192.0));
  moments(w.embedding.data(), w.embedding.size(), mean, var, maxabs);
  EXPECT_NEAR(var, 1.0, 0.05);
  EXPECT_LE(maxabs, std::sqrt(3.0) * (1 + 1e-7));
  moments(w.final_norm.data(), w.final_norm.size(), mean, var, maxabs);
  EXPECT_NEAR(mean, 1.0, 0.03);
  for (float g : w.final_norm) {
    EXPECT_GE(g, 0.9f);
    EXPECT_LE(g, 1.1f);
  }
}

TEST(Weights, TiedEmbeddingsShareValues) {
  ModelConfig c = tiny_llama();
  c.tie_embeddings = true;
  const Weights w = Weights::synthetic(c, DType::bf16, 5);
  // One matrix on the host, not a copy.
  EXPECT_EQ(w.lm_head.size(), 0u);
  EXPECT_EQ(&w.lm_head_matrix(), &w.embedding);
  c.tie_embeddings = false;
  const Weights u = Weights::synthetic(c, DType::bf16, 5);
  EXPECT_TRUE(u.embedding == w.embedding);
  EXPECT_FALSE(u.lm_head == u.embedding);
  EXPECT_EQ(&u.lm_head_matrix(), &u.lm_head);
}

TEST(Weights, SyntheticValidatesTheConfig) {
  ModelConfig c = tiny_llama();
  c.num_kv_heads = 3;
  EXPECT_THROW(Weights::synthetic(c, DType::bf16, 1), ConfigError);
}

}  // namespace
}  // namespace wafersim::models
