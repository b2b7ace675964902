// fp8 (E4M3) and int8 weight storage: bit-exact conversions, per-row
// quantization, and synthetic weights in those formats.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "models/dtype.hpp"
#include "models/weights.hpp"

namespace wafersim::models {
namespace {

TEST(Fp8E4m3, EncodesKnownValues) {
  EXPECT_EQ(float_to_fp8_e4m3_bits(0.0f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.0f), 0x38);  // 0.0111.000: exponent 7 = bias
  EXPECT_EQ(float_to_fp8_e4m3_bits(-1.0f), 0xb8);
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.125f), 0x39);
  EXPECT_EQ(float_to_fp8_e4m3_bits(416.0f), 0x7d);
  EXPECT_EQ(float_to_fp8_e4m3_bits(448.0f), 0x7e);       // the largest finite value
  EXPECT_EQ(float_to_fp8_e4m3_bits(0x1p-6f), 0x08);      // smallest normal
  EXPECT_EQ(float_to_fp8_e4m3_bits(0x1p-9f), 0x01);      // smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3_bits(7 * 0x1p-9f), 0x07);  // largest subnormal
}

TEST(Fp8E4m3, RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.0625f), 0x38);           // tie between m=0 and m=1: even, down
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.1875f), 0x3a);           // tie between m=1 and m=2: even, up
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.07f), 0x39);             // above the tie: up
  EXPECT_EQ(float_to_fp8_e4m3_bits(1.875f + 0.0625f), 0x40);  // carry into the exponent: 2.0
  EXPECT_EQ(float_to_fp8_e4m3_bits(432.0f), 0x7e);            // tie 416/448: even (m=6)
  EXPECT_EQ(float_to_fp8_e4m3_bits(0x1p-10f), 0x00);        // half the smallest subnormal: even, 0
  EXPECT_EQ(float_to_fp8_e4m3_bits(3 * 0x1p-10f), 0x02);    // 1.5 units: even, 2
  EXPECT_EQ(float_to_fp8_e4m3_bits(7.5f * 0x1p-9f), 0x08);  // into the smallest normal
  EXPECT_EQ(float_to_fp8_e4m3_bits(1e-30f), 0x00);
}

TEST(Fp8E4m3, SaturatesAndKeepsNaN) {
  EXPECT_EQ(float_to_fp8_e4m3_bits(449.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3_bits(1e30f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-1e30f), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3_bits(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3_bits(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3_bits(-std::numeric_limits<float>::quiet_NaN()), 0xff);
}

TEST(Fp8E4m3, DecodesEveryPatternAndRoundTrips) {
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x08), 0x1p-6f);
  EXPECT_EQ(fp8_e4m3_bits_to_float(0x78), 256.0f);  // 0.1111.000: exponent 15 is finite
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_bits_to_float(0xff)));
  for (int bits = 0; bits < 256; ++bits) {
    if ((bits & 0x7f) == 0x7f) continue;  // NaN
    const float v = fp8_e4m3_bits_to_float(static_cast<std::uint8_t>(bits));
    EXPECT_EQ(float_to_fp8_e4m3_bits(v), bits) << bits;
    EXPECT_EQ(round_to_dtype(v, DType::fp8_e4m3), v);
  }
}

TEST(Int8, RoundsToNearestEvenAndClampsSymmetrically) {
  EXPECT_EQ(float_to_int8(2.5f), 2);
  EXPECT_EQ(float_to_int8(3.5f), 4);
  EXPECT_EQ(float_to_int8(-2.5f), -2);
  EXPECT_EQ(float_to_int8(-2.6f), -3);
  EXPECT_EQ(float_to_int8(126.6f), 127);
  EXPECT_EQ(float_to_int8(300.0f), 127);
  EXPECT_EQ(float_to_int8(-300.0f), -127);  // never -128
  EXPECT_EQ(float_to_int8(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_THROW(round_to_dtype(1.0f, DType::int8), std::invalid_argument);
}

TEST(QuantizeRow, Int8UsesOneSymmetricScalePerRow) {
  std::vector<float> row = {127.0f, -2.5f, 3.5f, 0.4f};  // amax 127: scale exactly 1
  EXPECT_EQ(quantize_row(row, DType::int8), 1.0f);
  EXPECT_EQ(row, (std::vector<float>{127.0f, -2.0f, 4.0f, 0.0f}));
  std::vector<float> wide = {-254.0f, 5.0f, -7.0f, 1.0f};  // scale 2
  EXPECT_EQ(quantize_row(wide, DType::int8), 2.0f);
  EXPECT_EQ(wide, (std::vector<float>{-254.0f, 4.0f, -8.0f, 0.0f}));
  std::vector<float> zeros(3, 0.0f);
  EXPECT_EQ(quantize_row(zeros, DType::int8), 1.0f);
  EXPECT_EQ(zeros, std::vector<float>(3, 0.0f));
}

TEST(QuantizeRow, Fp8ScalesTheRowMaximumTo448) {
  std::vector<float> row = {448.0f, 1.0625f, -3.0f, 0.001f};  // scale 1
  EXPECT_EQ(quantize_row(row, DType::fp8_e4m3), 1.0f);
  EXPECT_EQ(row, (std::vector<float>{448.0f, 1.0f, -3.0f, 0x1p-9f}));
  std::vector<float> wide = {896.0f, -2.125f};  // scale 2: -1.0625 rounds to -1
  EXPECT_EQ(quantize_row(wide, DType::fp8_e4m3), 2.0f);
  EXPECT_EQ(wide, (std::vector<float>{896.0f, -2.0f}));
}

TEST(QuantizeRow, FloatFormatsRoundEachValue) {
  std::vector<float> row = {1.0f + 0x1p-10f, 3.0f};
  EXPECT_EQ(quantize_row(row, DType::bf16), 1.0f);
  EXPECT_EQ(row, (std::vector<float>{1.0f, 3.0f}));
}

TEST(DTypeNames, ParseAndBits) {
  EXPECT_EQ(parse_dtype("fp8"), DType::fp8_e4m3);
  EXPECT_EQ(parse_dtype("fp8_e4m3"), DType::fp8_e4m3);
  EXPECT_EQ(parse_dtype("int8"), DType::int8);
  EXPECT_STREQ(dtype_name(DType::fp8_e4m3), "fp8_e4m3");
  EXPECT_EQ(dtype_bits(DType::fp8_e4m3), 8);
  EXPECT_EQ(dtype_bits(DType::int8), 8);
  EXPECT_EQ(vector_dtype(DType::int8), DType::bf16);
  EXPECT_EQ(vector_dtype(DType::fp16), DType::fp16);
  EXPECT_THROW(parse_dtype("fp4"), std::invalid_argument);
}

ModelConfig micro() {
  ModelConfig c;
  c.name = "micro";
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.vocab_size = 11;
  c.max_position = 8;
  return c;
}

// Each matrix row holds integer multiples of its scale amax / 127.
void expect_int8_rows(const Matrix& m) {
  for (int i = 0; i < m.rows(); ++i) {
    float amax = 0.0f;
    for (float v : m.row(i)) amax = std::max(amax, std::fabs(v));
    ASSERT_GT(amax, 0.0f);
    const float scale = amax / 127.0f;  // amax is 127 * scale, up to an ulp
    for (float v : m.row(i)) {
      const float q = v / scale;
      EXPECT_NEAR(q, std::nearbyint(q), 1e-3f);
      EXPECT_LE(std::fabs(q), 127.0f + 1e-3f);
    }
  }
}

TEST(SyntheticWeights, Int8AndFp8AreStoredAsTheirDequantizedValues) {
  const Weights w8 = Weights::synthetic(micro(), DType::int8, 5);
  expect_int8_rows(w8.layers[0].wq);
  expect_int8_rows(w8.layers[0].w_down);
  expect_int8_rows(w8.embedding);
  // Vectors stay bf16.
  for (float g : w8.layers[0].attn_norm) EXPECT_EQ(round_to_dtype(g, DType::bf16), g);

  const Weights f8 = Weights::synthetic(micro(), DType::fp8_e4m3, 5);
  const Matrix& m = f8.layers[0].w_up;
  for (int i = 0; i < m.rows(); ++i) {
    // Each value is an E4M3 value times the row's scale amax / 448.
    float amax = 0.0f;
    for (float v : m.row(i)) amax = std::max(amax, std::fabs(v));
    const float scale = amax / 448.0f;
    for (float v : m.row(i)) {
      const float q = v / scale;
      EXPECT_NEAR(q, round_to_dtype(q, DType::fp8_e4m3), 1e-4f * std::fabs(q)) << "row " << i;
    }
  }
  // Same seed, same bits; the fp32 draws underneath are shared with bf16.
  EXPECT_EQ(Weights::synthetic(micro(), DType::fp8_e4m3, 5).layers, f8.layers);
  EXPECT_NE(f8.layers[0].wq, Weights::synthetic(micro(), DType::bf16, 5).layers[0].wq);
}

}  // namespace
}  // namespace wafersim::models
