// Storage precisions of weights: conversions between fp32 and the 16-bit
// formats, bit-exact, so every consumer sees the values the hardware holds.
#pragma once

#include <bit>
#include <cstdint>
#include <span>

#include "models/model_config.hpp"

namespace wafersim::models {

// bfloat16: the upper 16 bits of an fp32, rounded to nearest, ties to even.
// Overflow rounds to infinity; NaN stays NaN (made quiet).
// Widening is exact; inline because the GEMV kernels widen every weight they
// read from 16-bit storage (models/weights.hpp).
std::uint16_t float_to_bf16_bits(float f);
inline float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// IEEE 754 binary16, rounded to nearest, ties to even, with subnormals.
// Values at or above 65520 in magnitude round to infinity; NaN stays NaN (quiet).
std::uint16_t float_to_fp16_bits(float f);
inline float fp16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fu;
  const std::uint32_t mant = bits & 0x03ffu;
  if (exp == 0x1fu) {  // infinity or NaN
    return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  }
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exp + 127u - 15u) << 23) | (mant << 13));
}

// OCP 8-bit floating point E4M3 (OCP FP8 specification v1.0, 2023): sign,
// 4 exponent bits with bias 7, 3 mantissa bits; subnormals m * 2^-9; no
// infinities; S.1111.111 is NaN, so the largest finite value is
// S.1111.110 = 448. Rounded to nearest, ties to even; finite values beyond
// 448 and infinities saturate to +-448 (the "satfinite" conversion NVIDIA's
// cvt and most quantizers use); NaN gives S.1111.111.
std::uint8_t float_to_fp8_e4m3_bits(float f);
float fp8_e4m3_bits_to_float(std::uint8_t bits);

// Round to the nearest integer (ties to even), clamped to [-127, 127] (the
// symmetric int8 range; -128 is never produced). NaN gives 0.
std::int8_t float_to_int8(float f);

// The fp32 value that storing `f` as `t` and widening it back yields.
// fp32 is returned unchanged; fp8_e4m3 is the unscaled E4M3 round trip.
// int8 has no meaning without a scale: std::invalid_argument (use
// quantize_row).
float round_to_dtype(float f, DType t);

// Replaces one matrix row by the values the hardware holds after storing it
// as `t` and dequantizing, and returns the row's scale:
//   fp32, fp16, bf16: each value rounded with round_to_dtype; scale 1.
//   int8:     amax = max |x|; scale = amax / 127 (fp32); x = float(q) * scale
//             with q = float_to_int8(x / scale).
//   fp8_e4m3: scale = amax / 448; x = fp8(x / scale) * scale, the fp8 value
//             widened to fp32 and multiplied in fp32.
// A row of zeros keeps scale 1 and stays zero.
float quantize_row(std::span<float> row, DType t);

}  // namespace wafersim::models
