#include "models/dtype.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>

namespace wafersim::models {
namespace {

float f(std::uint32_t bits) {
  return std::bit_cast<float>(bits);
}
std::uint32_t b(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(f(0x3f807fff)), 0x3f80);  // below half: down
  EXPECT_EQ(float_to_bf16_bits(f(0x3f808000)), 0x3f80);  // tie, kept bit even: down
  EXPECT_EQ(float_to_bf16_bits(f(0x3f818000)), 0x3f82);  // tie, kept bit odd: up
  EXPECT_EQ(float_to_bf16_bits(f(0x3f808001)), 0x3f81);  // above half: up
  EXPECT_EQ(float_to_bf16_bits(f(0xbf818000)), 0xbf82);  // sign-symmetric
  EXPECT_EQ(float_to_bf16_bits(f(0x3fffffff)), 0x4000);  // mantissa carry into the exponent
  EXPECT_EQ(float_to_bf16_bits(f(0x00018000)), 0x0002);  // fp32 subnormal tie
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
}

TEST(Bf16, OverflowInfinityAndNaN) {
  EXPECT_EQ(float_to_bf16_bits(f(0x7f7f7fff)), 0x7f7f);  // stays the largest finite bf16
  EXPECT_EQ(float_to_bf16_bits(f(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to +inf
  EXPECT_EQ(float_to_bf16_bits(f(0xff7fffff)), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(INFINITY), 0x7f80);
  // A NaN whose payload lies only in the dropped bits must not become inf.
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(f(0x7f800001)))));
  EXPECT_TRUE(std::isnan(round_to_dtype(NAN, DType::bf16)));
}

TEST(Bf16, Widening) {
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xc040), -3.0f);
  EXPECT_EQ(b(bf16_bits_to_float(0x3dcd)), 0x3dcd0000u);
  // 0.1f = 0x3dcccccd rounds up to 0x3dcd = 0.10009765625.
  EXPECT_EQ(round_to_dtype(0.1f, DType::bf16), 0.10009765625f);
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16_bits(f(0x3f801000)), 0x3c00);  // 1 + 2^-11: tie to even (down)
  EXPECT_EQ(float_to_fp16_bits(f(0x3f803000)), 0x3c02);  // 1 + 3*2^-11: tie to even (up)
  EXPECT_EQ(float_to_fp16_bits(f(0x3f801001)), 0x3c01);  // just above the tie
  EXPECT_EQ(float_to_fp16_bits(0.1f), 0x2e66);
  EXPECT_EQ(float_to_fp16_bits(-0.0f), 0x8000);
  EXPECT_EQ(round_to_dtype(0.1f, DType::fp16), 0.0999755859375f);
}

TEST(Fp16, OverflowToInfinity) {
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7bff);       // largest finite half
  EXPECT_EQ(float_to_fp16_bits(f(0x477fefff)), 0x7bff);  // just below 65520
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7c00);       // the tie goes to inf (even)
  EXPECT_EQ(float_to_fp16_bits(1.0e6f), 0x7c00);
  EXPECT_EQ(float_to_fp16_bits(-1.0e6f), 0xfc00);
  EXPECT_EQ(float_to_fp16_bits(-INFINITY), 0xfc00);
  const std::uint16_t nan = float_to_fp16_bits(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(round_to_dtype(f(0x7f800001), DType::fp16)));
}

TEST(Fp16, Subnormals) {
  EXPECT_EQ(float_to_fp16_bits(0x1p-24f), 0x0001);            // smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(0x1p-25f), 0x0000);            // tie with zero: even (zero)
  EXPECT_EQ(float_to_fp16_bits(f(0x33000001)), 0x0001);       // just above 2^-25
  EXPECT_EQ(float_to_fp16_bits(0x1.8p-25f), 0x0001);          // 0.75 units
  EXPECT_EQ(float_to_fp16_bits(0x1.8p-24f), 0x0002);          // 1.5 units: tie to even
  EXPECT_EQ(float_to_fp16_bits(0x1.4p-23f), 0x0002);          // 2.5 units: tie to even
  EXPECT_EQ(float_to_fp16_bits(1023.0f * 0x1p-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(float_to_fp16_bits(f(0x387fe000)), 0x0400);  // 2^-14 - 2^-25: tie carries to normal
  EXPECT_EQ(float_to_fp16_bits(0x1p-14f), 0x0400);       // smallest normal
  EXPECT_EQ(float_to_fp16_bits(1.0e-10f), 0x0000);
  EXPECT_EQ(float_to_fp16_bits(-0x1p-24f), 0x8001);
}

TEST(Fp16, Widening) {
  EXPECT_EQ(fp16_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_bits_to_float(0x03ff), 1023.0f * 0x1p-24f);
  EXPECT_EQ(fp16_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_bits_to_float(0x7c00), INFINITY);
  EXPECT_TRUE(std::isnan(fp16_bits_to_float(0x7e00)));
  EXPECT_EQ(b(fp16_bits_to_float(0x8000)), 0x80000000u);
}

TEST(Fp16, EveryFiniteHalfRoundTrips) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / NaN
    const auto bits = static_cast<std::uint16_t>(h);
    ASSERT_EQ(float_to_fp16_bits(fp16_bits_to_float(bits)), bits) << std::hex << h;
  }
}

TEST(RoundToDtype, Fp32IsIdentityAndRoundingIsIdempotent) {
  const float x = f(0x3f8ccccd);
  EXPECT_EQ(b(round_to_dtype(x, DType::fp32)), 0x3f8ccccdu);
  for (DType t : {DType::bf16, DType::fp16}) {
    const float once = round_to_dtype(x, t);
    EXPECT_NE(once, x);
    EXPECT_EQ(round_to_dtype(once, t), once);
  }
}

}  // namespace
}  // namespace wafersim::models
