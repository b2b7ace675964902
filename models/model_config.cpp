#include "models/model_config.hpp"

#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

namespace wafersim::models {

int dtype_bits(DType t) {
  switch (t) {
    case DType::fp32:
      return 32;
    case DType::fp16:
    case DType::bf16:
      return 16;
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
  }
  throw std::invalid_argument("dtype_name: unknown DType value");
}

DType parse_dtype(const std::string& name) {
  if (name == "fp32") return DType::fp32;
  if (name == "fp16") return DType::fp16;
  if (name == "bf16") return DType::bf16;
  throw std::invalid_argument("unknown dtype '" + name + "': allowed are fp32, fp16, bf16");
}

std::uint64_t ModelConfig::layer_parameters() const {
  const std::uint64_t hidden = static_cast<std::uint64_t>(hidden_size);
  const std::uint64_t inter = static_cast<std::uint64_t>(intermediate_size);
  const std::uint64_t q = static_cast<std::uint64_t>(num_heads) * head_dim;
  const std::uint64_t kv = static_cast<std::uint64_t>(num_kv_heads) * head_dim;
  const std::uint64_t attention = hidden * q + 2 * hidden * kv + q * hidden;  // wq, wk, wv, wo
  const std::uint64_t mlp = 3 * hidden * inter;                               // gate, up, down
  const std::uint64_t norms = 2 * hidden;                                     // attn_norm, ffn_norm
  return attention + mlp + norms;
}

std::uint64_t ModelConfig::parameter_count() const {
  const std::uint64_t hidden = static_cast<std::uint64_t>(hidden_size);
  const std::uint64_t vocab = static_cast<std::uint64_t>(vocab_size);
  const std::uint64_t embedding = vocab * hidden;
  const std::uint64_t lm_head = tie_embeddings ? 0 : vocab * hidden;
  return embedding + static_cast<std::uint64_t>(num_layers) * layer_parameters() + hidden + lm_head;
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
  require_positive_finite(rms_norm_eps, "rms_norm_eps");
}

}  // namespace wafersim::models
