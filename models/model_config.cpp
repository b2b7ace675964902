#include "models/model_config.hpp"

#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

namespace wafersim::models {

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::llama:
      return "llama";
    case Architecture::mistral:
      return "mistral";
    case Architecture::qwen2:
      return "qwen2";
    case Architecture::qwen3:
      return "qwen3";
    case Architecture::mixtral:
      return "mixtral";
    case Architecture::qwen3_moe:
      return "qwen3_moe";
    case Architecture::gpt2:
      return "gpt2";
  }
  throw std::invalid_argument("architecture_name: unknown Architecture value");
}

Architecture parse_architecture(const std::string& name) {
  for (Architecture a :
       {Architecture::llama, Architecture::mistral, Architecture::qwen2, Architecture::qwen3,
        Architecture::mixtral, Architecture::qwen3_moe, Architecture::gpt2}) {
    if (name == architecture_name(a)) return a;
  }
  throw std::invalid_argument(
      "unknown architecture '" + name +
      "': allowed are llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, gpt2");
}

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::none:
      return "none";
    case RopeScalingType::llama3:
      return "llama3";
  }
  throw std::invalid_argument("rope_scaling_name: unknown RopeScalingType value");
}

RopeScalingType parse_rope_scaling(const std::string& name) {
  for (RopeScalingType t : {RopeScalingType::none, RopeScalingType::llama3}) {
    if (name == rope_scaling_name(t)) return t;
  }
  throw std::invalid_argument("unknown rope scaling '" + name + "': allowed are none, llama3");
}

int dtype_bits(DType t) {
  switch (t) {
    case DType::fp32:
      return 32;
    case DType::fp16:
    case DType::bf16:
      return 16;
    case DType::fp8_e4m3:
    case DType::int8:
      return 8;
  }
  throw std::invalid_argument("dtype_bits: unknown DType value");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::fp32:
      return "fp32";
    case DType::fp16:
      return "fp16";
    case DType::bf16:
      return "bf16";
    case DType::fp8_e4m3:
      return "fp8_e4m3";
    case DType::int8:
      return "int8";
  }
  throw std::invalid_argument("dtype_name: unknown DType value");
}

DType parse_dtype(const std::string& name) {
  if (name == "fp32") return DType::fp32;
  if (name == "fp16") return DType::fp16;
  if (name == "bf16") return DType::bf16;
  if (name == "fp8" || name == "fp8_e4m3") return DType::fp8_e4m3;
  if (name == "int8") return DType::int8;
  throw std::invalid_argument("unknown dtype '" + name +
                              "': allowed are fp32, fp16, bf16, fp8 (= fp8_e4m3), int8");
}

DType vector_dtype(DType t) {
  return (t == DType::fp8_e4m3 || t == DType::int8) ? DType::bf16 : t;
}

std::uint64_t ModelConfig::layer_parameters() const {
  const std::uint64_t hidden = static_cast<std::uint64_t>(hidden_size);
  const std::uint64_t inter = static_cast<std::uint64_t>(intermediate_size);
  const std::uint64_t q = static_cast<std::uint64_t>(num_heads) * head_dim;
  const std::uint64_t kv = static_cast<std::uint64_t>(num_kv_heads) * head_dim;
  const std::uint64_t attention = hidden * q + 2 * hidden * kv + q * hidden;  // wq, wk, wv, wo
  if (is_gpt2()) {
    // Biases on q, k, v, o, up and down; LayerNorms have gain and bias.
    const std::uint64_t biases = q + 2 * kv + hidden + inter + hidden;
    return attention + 2 * hidden * inter + biases + 4 * hidden;
  }
  const std::uint64_t experts = static_cast<std::uint64_t>(num_experts);
  const std::uint64_t mlp = is_moe() ? experts * 3 * hidden * inter + experts * hidden  // + router
                                     : 3 * hidden * inter;  // gate, up, down
  const std::uint64_t norms = 2 * hidden;                   // attn_norm, ffn_norm
  const std::uint64_t qkv_bias = has_qkv_bias() ? q + 2 * kv : 0;
  const std::uint64_t o_bias = has_o_bias() ? hidden : 0;
  const std::uint64_t qk_norm = has_qk_norm() ? 2 * static_cast<std::uint64_t>(head_dim) : 0;
  return attention + mlp + norms + qkv_bias + o_bias + qk_norm;
}

std::uint64_t ModelConfig::parameter_count() const {
  const std::uint64_t hidden = static_cast<std::uint64_t>(hidden_size);
  const std::uint64_t vocab = static_cast<std::uint64_t>(vocab_size);
  const std::uint64_t embedding = vocab * hidden;
  const std::uint64_t lm_head = tie_embeddings ? 0 : vocab * hidden;
  const std::uint64_t positions = is_gpt2() ? static_cast<std::uint64_t>(max_position) * hidden : 0;
  const std::uint64_t final_norm = is_gpt2() ? 2 * hidden : hidden;
  return embedding + positions + static_cast<std::uint64_t>(num_layers) * layer_parameters() +
         final_norm + lm_head;
}

namespace {

void require_positive(int value, const char* field) {
  if (value <= 0) {
    throw ConfigError(
        field, std::string(field) + " must be a positive integer, got " + std::to_string(value));
  }
}

void require_positive_finite(double value, const char* field) {
  if (!(value > 0.0) || !std::isfinite(value)) {
    throw ConfigError(
        field, std::string(field) + " must be a finite number > 0, got " + std::to_string(value));
  }
}

// Hugging Face's checks of a llama3 rope_scaling (modeling_rope_utils.py,
// _validate_llama3_parameters) plus positivity: factor >= 1 is only warned
// about there; a factor below 1 would shorten wavelengths, which no released
// model does, so it is refused here.
void validate_rope_scaling(const RopeScaling& s) {
  if (s.type == RopeScalingType::none) {
    if (s.factor != 0.0 || s.low_freq_factor != 0.0 || s.high_freq_factor != 0.0 ||
        s.original_max_position != 0) {
      throw ConfigError("rope_scaling",
                        "rope_scaling_factor, rope_low_freq_factor, rope_high_freq_factor and "
                        "rope_original_max_position need rope_scaling: llama3");
    }
    return;
  }
  if (!(s.factor >= 1.0) || !std::isfinite(s.factor)) {
    throw ConfigError(
        "rope_scaling_factor",
        "rope_scaling_factor must be a finite number >= 1, got " + std::to_string(s.factor));
  }
  require_positive_finite(s.low_freq_factor, "rope_low_freq_factor");
  require_positive_finite(s.high_freq_factor, "rope_high_freq_factor");
  if (!(s.high_freq_factor > s.low_freq_factor)) {
    throw ConfigError("rope_high_freq_factor",
                      "rope_high_freq_factor must be greater than rope_low_freq_factor (" +
                          std::to_string(s.low_freq_factor) + "), got " +
                          std::to_string(s.high_freq_factor));
  }
  require_positive(s.original_max_position, "rope_original_max_position");
}

}  // namespace

void ModelConfig::validate() const {
  require_positive(hidden_size, "hidden_size");
  require_positive(intermediate_size, "intermediate_size");
  require_positive(num_layers, "num_layers");
  require_positive(num_heads, "num_heads");
  require_positive(num_kv_heads, "num_kv_heads");
  if (num_heads % num_kv_heads != 0) {
    throw ConfigError("num_kv_heads", "num_kv_heads must divide num_heads (" +
                                          std::to_string(num_heads) + "), got " +
                                          std::to_string(num_kv_heads));
  }
  require_positive(head_dim, "head_dim");
  if (head_dim % 2 != 0) {
    throw ConfigError(
        "head_dim", "head_dim must be even (RoPE rotates pairs), got " + std::to_string(head_dim));
  }
  // q_dim() and kv_dim() are computed in int; keep them representable.
  if (static_cast<long long>(num_heads) * head_dim > INT_MAX) {
    throw ConfigError("head_dim", "num_heads * head_dim must be at most " +
                                      std::to_string(INT_MAX) + ", got " +
                                      std::to_string(static_cast<long long>(num_heads) * head_dim));
  }
  require_positive(vocab_size, "vocab_size");
  require_positive(max_position, "max_position");
  require_positive_finite(rope_theta, "rope_theta");
  validate_rope_scaling(rope_scaling);
  require_positive_finite(rms_norm_eps, "rms_norm_eps");
  if (num_experts < 0 || experts_per_token < 0) {
    throw ConfigError(num_experts < 0 ? "num_experts" : "experts_per_token",
                      "num_experts and experts_per_token must be >= 0");
  }
  // The mixture-of-experts architectures need experts; the others are dense.
  if (architecture == Architecture::mixtral || architecture == Architecture::qwen3_moe) {
    require_positive(num_experts, "num_experts");
    if (experts_per_token < 1 || experts_per_token > num_experts) {
      throw ConfigError("experts_per_token", "experts_per_token must be in [1, num_experts (" +
                                                 std::to_string(num_experts) + ")], got " +
                                                 std::to_string(experts_per_token));
    }
  } else if (num_experts != 0 || experts_per_token != 0) {
    throw ConfigError(
        num_experts != 0 ? "num_experts" : "experts_per_token",
        std::string("a mixture of experts needs architecture mixtral or qwen3_moe; ") +
            architecture_name(architecture) + " is dense (set num_experts and " +
            "experts_per_token to 0)");
  }
  if (sliding_window < 0) {
    throw ConfigError("sliding_window", "sliding_window must be >= 0 (0 = whole context), got " +
                                            std::to_string(sliding_window));
  }
  if (is_gpt2()) {
    if (num_kv_heads != num_heads) {
      throw ConfigError("num_kv_heads",
                        "gpt2 has multi-head attention: num_kv_heads must equal "
                        "num_heads (" +
                            std::to_string(num_heads) + "), got " + std::to_string(num_kv_heads));
    }
    if (sliding_window != 0) {
      throw ConfigError("sliding_window",
                        "gpt2 attends to the whole context: sliding_window "
                        "must be 0");
    }
  }
}

}  // namespace wafersim::models
