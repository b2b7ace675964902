// Storage precisions of weights: conversions between fp32 and the 16-bit
// formats, bit-exact, so every consumer sees the values the hardware holds.
#pragma once

#include <cstdint>

#include "models/model_config.hpp"

namespace wafersim::models {

// bfloat16: the upper 16 bits of an fp32, rounded to nearest, ties to even.
// Overflow rounds to infinity; NaN stays NaN (made quiet).
std::uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(std::uint16_t bits);

// IEEE 754 binary16, rounded to nearest, ties to even, with subnormals.
// Values at or above 65520 in magnitude round to infinity; NaN stays NaN (quiet).
std::uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(std::uint16_t bits);

// The fp32 value that storing `f` as `t` and widening it back yields.
// fp32 is returned unchanged.
float round_to_dtype(float f, DType t);

}  // namespace wafersim::models
