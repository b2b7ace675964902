// A decoder-only transformer's shape. Nothing here knows about meshes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace wafersim::models {

// Thrown for a model config that cannot exist (zero layers, heads that do not
// divide, ...). `field` is the key below `model:` in a scenario.
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

enum class Architecture { llama };

// Storage precision of the weights. Arithmetic is always fp32 (weights are
// widened on the core), activations travel as fp32 wavelets.
enum class DType { fp32, fp16, bf16 };

int dtype_bits(DType t);
const char* dtype_name(DType t);
// Throws std::invalid_argument for an unknown name; accepts "fp32", "fp16", "bf16".
DType parse_dtype(const std::string& name);

struct ModelConfig {
  std::string name;
  Architecture architecture = Architecture::llama;
  int hidden_size = 0;        // d_model
  int intermediate_size = 0;  // SwiGLU hidden width
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // grouped-query attention: num_heads % num_kv_heads == 0
  int head_dim = 0;      // usually hidden_size / num_heads
  int vocab_size = 0;
  int max_position = 0;  // longest context the model supports
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = false;  // lm_head shares the embedding matrix

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  // Parameters per decoder layer (attention + MLP + two norm vectors).
  std::uint64_t layer_parameters() const;
  // All parameters (embedding, layers, final norm, lm_head unless tied).
  std::uint64_t parameter_count() const;
  // Throws ConfigError naming the offending field.
  void validate() const;
};

}  // namespace wafersim::models
