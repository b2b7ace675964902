#include "models/model_config.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

namespace wafersim::models {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.name = "small";
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 2;
  c.vocab_size = 10;
  c.max_position = 16;
  return c;
}

TEST(DType, BitsNamesAndParsing) {
  EXPECT_EQ(dtype_bits(DType::fp32), 32);
  EXPECT_EQ(dtype_bits(DType::fp16), 16);
  EXPECT_EQ(dtype_bits(DType::bf16), 16);
  EXPECT_STREQ(dtype_name(DType::fp32), "fp32");
  EXPECT_STREQ(dtype_name(DType::fp16), "fp16");
  EXPECT_STREQ(dtype_name(DType::bf16), "bf16");
  for (DType t : {DType::fp32, DType::fp16, DType::bf16}) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
}

TEST(DType, ParseRejectsUnknownNamesListingTheAllowedOnes) {
  try {
    parse_dtype("float32");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;
  }
  EXPECT_THROW(parse_dtype("BF16"), std::invalid_argument);
  EXPECT_THROW(parse_dtype(""), std::invalid_argument);
}

TEST(ModelConfig, ParameterCountOfASmallConfigByHand) {
  ModelConfig c = small_config();
  // q_dim = 4*2 = 8, kv_dim = 2*2 = 4.
  // wq 8*8 + wk 8*4 + wv 8*4 + wo 8*8 + MLP 3*8*12 + norms 2*8
  //   = 64 + 32 + 32 + 64 + 288 + 16 = 496.
  EXPECT_EQ(c.layer_parameters(), 496u);
  // embedding 10*8 + 2 layers + final norm 8 + lm_head 10*8.
  EXPECT_EQ(c.parameter_count(), 80u + 2u * 496u + 8u + 80u);
  c.tie_embeddings = true;
  EXPECT_EQ(c.parameter_count(), 80u + 2u * 496u + 8u);
}

TEST(ModelConfig, ParameterCountMatchesPublishedLlama31_8B) {
  // Llama-3.1-8B config.json; Meta's model card and the safetensors index
  // give 8,030,261,248 parameters.
  ModelConfig c;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.vocab_size = 128256;
  c.max_position = 131072;
  c.rope_theta = 500000.0;
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(c.parameter_count(), 8'030'261'248ull);
}

void expect_field_error(const std::function<void(ModelConfig&)>& breakit,
                        const std::string& field) {
  ModelConfig c = small_config();
  breakit(c);
  try {
    c.validate();
    FAIL() << "expected ConfigError on " << field;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), field);
    const std::string msg = e.what();
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_FALSE(msg.empty());
  }
}

TEST(ModelConfig, ValidAcceptsTheSmallConfig) {
  EXPECT_NO_THROW(small_config().validate());
}

TEST(ModelConfig, ValidateNamesTheOffendingField) {
  expect_field_error([](ModelConfig& c) { c.hidden_size = 0; }, "hidden_size");
  expect_field_error([](ModelConfig& c) { c.intermediate_size = -3; }, "intermediate_size");
  expect_field_error([](ModelConfig& c) { c.num_layers = 0; }, "num_layers");
  expect_field_error([](ModelConfig& c) { c.num_heads = 0; }, "num_heads");
  expect_field_error([](ModelConfig& c) { c.num_kv_heads = 0; }, "num_kv_heads");
  expect_field_error([](ModelConfig& c) { c.num_kv_heads = 3; }, "num_kv_heads");
  expect_field_error([](ModelConfig& c) { c.head_dim = 0; }, "head_dim");
  expect_field_error([](ModelConfig& c) { c.head_dim = 3; }, "head_dim");
  expect_field_error([](ModelConfig& c) { c.vocab_size = 0; }, "vocab_size");
  expect_field_error([](ModelConfig& c) { c.max_position = 0; }, "max_position");
  expect_field_error([](ModelConfig& c) { c.rope_theta = 0.0; }, "rope_theta");
  expect_field_error(
      [](ModelConfig& c) { c.rope_theta = std::numeric_limits<double>::quiet_NaN(); },
      "rope_theta");
  expect_field_error([](ModelConfig& c) { c.rms_norm_eps = -1e-6; }, "rms_norm_eps");
  expect_field_error([](ModelConfig& c) { c.rms_norm_eps = 0.0; }, "rms_norm_eps");
  // RoPE scaling: llama3 needs its four values; none takes none of them.
  const RopeScaling llama31{RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192};
  expect_field_error([](ModelConfig& c) { c.rope_scaling.factor = 8.0; }, "rope_scaling");
  expect_field_error(
      [&](ModelConfig& c) {
        c.rope_scaling = llama31;
        c.rope_scaling.factor = 0.5;
      },
      "rope_scaling_factor");
  expect_field_error(
      [&](ModelConfig& c) {
        c.rope_scaling = llama31;
        c.rope_scaling.low_freq_factor = 0.0;
      },
      "rope_low_freq_factor");
  expect_field_error(
      [&](ModelConfig& c) {
        c.rope_scaling = llama31;
        c.rope_scaling.high_freq_factor = 1.0;
      },
      "rope_high_freq_factor");
  expect_field_error(
      [&](ModelConfig& c) {
        c.rope_scaling = llama31;
        c.rope_scaling.original_max_position = 0;
      },
      "rope_original_max_position");
}

TEST(ModelConfig, MessagesSayWhatIsAllowed) {
  ModelConfig c = small_config();
  c.num_kv_heads = 3;
  try {
    c.validate();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("divide"), std::string::npos) << e.what();
  }
  c = small_config();
  c.head_dim = 5;
  try {
    c.validate();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("even"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wafersim::models
