#include "models/dtype.hpp"

#include <bit>
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

float bf16_bits_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
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

float fp16_bits_to_float(std::uint16_t bits) {
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

float round_to_dtype(float f, DType t) {
  switch (t) {
    case DType::fp32:
      return f;
    case DType::bf16:
      return bf16_bits_to_float(float_to_bf16_bits(f));
    case DType::fp16:
      return fp16_bits_to_float(float_to_fp16_bits(f));
  }
  throw std::invalid_argument("round_to_dtype: unknown DType value");
}

}  // namespace wafersim::models
