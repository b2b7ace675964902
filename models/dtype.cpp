#include "models/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace wafersim::models {

std::uint16_t float_to_bf16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // NaN: keep sign and top payload bits, force the quiet bit so the
    // truncation cannot turn it into infinity.
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest with ties to
  // even; a carry out of the mantissa bumps the exponent (up to infinity).
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

std::uint16_t float_to_fp16_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t a = x & 0x7fffffffu;

  if (a >= 0x7f800000u) {  // infinity or NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
  }
  // 65520 = halfway between 65504 (largest half) and 65536: ties go to the
  // even neighbour, which is the one past the largest, i.e. infinity.
  if (a >= 0x477ff000u) return sign | 0x7c00u;

  if (a >= 0x38800000u) {  // >= 2^-14: a normal half
    // Round the 23-bit mantissa to 10 bits (ties to even), then rebias the
    // exponent from 127 to 15; a mantissa carry bumps the exponent.
    std::uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
    r -= (127u - 15u) << 23;
    return static_cast<std::uint16_t>(sign | (r >> 13));
  }

  // Subnormal half (or zero): the result counts units of 2^-24. The fp32
  // value is m * 2^(e - 150) with m the 24-bit significand.
  const int e = static_cast<int>(a >> 23);
  const int shift = 126 - e;    // >= 14 here
  if (shift > 24) return sign;  // below 2^-25: rounds to (signed) zero
  const std::uint32_t m = (a & 0x007fffffu) | 0x00800000u;
  std::uint32_t q = m >> shift;
  const std::uint32_t rem = m & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal
  return static_cast<std::uint16_t>(sign | q);
}

std::uint8_t float_to_fp8_e4m3_bits(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint8_t sign = static_cast<std::uint8_t>((x >> 24) & 0x80u);
  const std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448 or infinity: saturate
  if (a >= 0x3c800000u) {                     // >= 2^-6: a normal E4M3
    // Round the 23-bit mantissa to 3 bits (ties to even), rebias the
    // exponent from 127 to 7; a mantissa carry bumps the exponent. Below 448
    // the result is at most 448 = S.1111.110.
    std::uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
    r -= (127u - 7u) << 23;
    return static_cast<std::uint8_t>(sign | (r >> 20));
  }
  // Subnormal (or zero): units of 2^-9. a * 512 is exact; rounding it to an
  // integer (ties to even) gives 0..8, and 8 is the smallest normal 2^-6,
  // whose encoding is 8 as well.
  const float units = std::bit_cast<float>(a) * 512.0f;
  const float q = std::nearbyint(units);  // default mode: ties to even
  return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(q));
}

float fp8_e4m3_bits_to_float(std::uint8_t bits) {
  const bool negative = (bits & 0x80u) != 0;
  const int exp = (bits >> 3) & 0xf;
  const int mant = bits & 0x7;
  float magnitude;
  if (exp == 0xf && mant == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    magnitude = static_cast<float>(mant) * 0x1p-9f;
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return negative ? -magnitude : magnitude;
}

std::int8_t float_to_int8(float f) {
  if (std::isnan(f)) return 0;
  const float r = std::nearbyint(f);  // default mode: ties to even
  if (r >= 127.0f) return 127;
  if (r <= -127.0f) return -127;
  return static_cast<std::int8_t>(r);
}

float round_to_dtype(float f, DType t) {
  switch (t) {
    case DType::fp32:
      return f;
    case DType::bf16:
      return bf16_bits_to_float(float_to_bf16_bits(f));
    case DType::fp16:
      return fp16_bits_to_float(float_to_fp16_bits(f));
    case DType::fp8_e4m3:
      return fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(f));
    case DType::int8:
      throw std::invalid_argument(
          "round_to_dtype: int8 values need a per-row scale; use quantize_row");
  }
  throw std::invalid_argument("round_to_dtype: unknown DType value");
}

float quantize_row(std::span<float> row, DType t) {
  if (t != DType::int8 && t != DType::fp8_e4m3) {
    // round_to_dtype, its switch taken once per row.
    switch (t) {
      case DType::fp32:
        break;
      case DType::bf16:
        for (float& v : row) v = bf16_bits_to_float(float_to_bf16_bits(v));
        break;
      case DType::fp16:
        for (float& v : row) v = fp16_bits_to_float(float_to_fp16_bits(v));
        break;
      default:
        for (float& v : row) v = round_to_dtype(v, t);
    }
    return 1.0f;
  }
  float amax = 0.0f;
  for (float v : row) amax = std::max(amax, std::fabs(v));
  if (!(amax > 0.0f)) return 1.0f;
  if (t == DType::int8) {
    const float scale = amax / 127.0f;
    for (float& v : row) v = static_cast<float>(float_to_int8(v / scale)) * scale;
    return scale;
  }
  const float scale = amax / 448.0f;
  for (float& v : row) v = fp8_e4m3_bits_to_float(float_to_fp8_e4m3_bits(v / scale)) * scale;
  return scale;
}

}  // namespace wafersim::models
