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

// The decoder families wafersim knows. What each one changes (the reference
// forward pass in models/reference.hpp follows these):
//   llama    RMSNorm, RoPE, grouped-query attention, SwiGLU MLP, no biases.
//   mistral  llama + optional sliding-window attention (sliding_window).
//   qwen2    llama + biases on the q, k and v projections (attention_bias).
//   qwen3    llama + RMSNorm over each head of q and k before RoPE (qk-norm,
//            gains [head_dim] shared by all heads).
//   mixtral  mistral with a mixture-of-experts MLP: a router picks
//            experts_per_token of num_experts SwiGLU experts per token.
//   qwen3_moe  qwen3 (qk-norm) with mixtral's mixture-of-experts MLP in
//              every layer: softmax over all experts, the top
//              experts_per_token, renormalised over those (Hugging Face
//              norm_topk_prob: true), many small experts (Qwen3-235B-A22B:
//              8 of 128, each 1536 wide).
//   gpt2     LayerNorm with bias, learned position embeddings (no RoPE),
//            biases on every projection, GELU (tanh) MLP of w_up/w_down,
//            multi-head attention (num_kv_heads == num_heads), tied lm_head.
enum class Architecture { llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, gpt2 };

const char* architecture_name(Architecture a);
// Throws std::invalid_argument for an unknown name (the names above).
Architecture parse_architecture(const std::string& name);

// Storage precision of the weights. Arithmetic is always fp32 (weights are
// widened on the core), activations travel as fp32 wavelets.
//   fp8_e4m3  OCP FP8 E4M3 (bias 7, max 448, no infinities) with one fp32
//             scale per matrix row (row-wise scaling, as Meta's FP8 release of
//             Llama 3.1 405B uses); dequantized on the core.
//   int8      weight-only int8, symmetric, one fp32 scale per output row.
// For both, vectors (norm gains, biases) stay bf16 (vector_dtype()).
enum class DType { fp32, fp16, bf16, fp8_e4m3, int8 };

// Bits per stored weight value (the per-row scales of fp8/int8 are not
// counted: one fp32 per row of thousands of values).
int dtype_bits(DType t);
const char* dtype_name(DType t);
// Throws std::invalid_argument for an unknown name; accepts "fp32", "fp16",
// "bf16", "fp8" or "fp8_e4m3", and "int8".
DType parse_dtype(const std::string& name);
// The precision vectors (norm gains, biases) are stored in: bf16 for the
// quantized formats, else the format itself.
DType vector_dtype(DType t);

// How RoPE's inverse frequencies are rescaled for a context longer than the
// one the model was trained on (Hugging Face `rope_scaling`, or transformers
// 5's `rope_parameters`). With d = head_dim and f_i = theta^(-2i/d):
//   none    f_i unchanged.
//   llama3  Llama 3.1 / 3.2 / 3.3 (transformers modeling_rope_utils.py,
//           _compute_llama3_parameters): with wavelength w_i = 2 pi / f_i,
//           L = original_max_position,
//             w_i > L / low_freq_factor   f_i / factor          (low freq.)
//             w_i < L / high_freq_factor  f_i                   (high freq.)
//             otherwise, s = (L / w_i - low_freq_factor) /
//                            (high_freq_factor - low_freq_factor),
//                       (1 - s) f_i / factor + s f_i            (between).
//           The attention scale is unchanged (attention_factor 1).
enum class RopeScalingType { none, llama3 };

const char* rope_scaling_name(RopeScalingType t);
// Throws std::invalid_argument for an unknown name ("none", "llama3").
RopeScalingType parse_rope_scaling(const std::string& name);

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  // llama3 only; 0 with type none.
  double factor = 0.0;
  double low_freq_factor = 0.0;
  double high_freq_factor = 0.0;
  int original_max_position = 0;
  bool operator==(const RopeScaling&) const = default;
};

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
  RopeScaling rope_scaling;  // none unless the model rescales RoPE (Llama 3.1)
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = false;  // lm_head shares the embedding matrix
  // Mixture of experts (mixtral, qwen3_moe): experts per layer, and how many
  // each token uses. 0 and 0 for a dense MLP; intermediate_size is then each
  // expert's (Hugging Face moe_intermediate_size for qwen3_moe).
  int num_experts = 0;
  int experts_per_token = 0;
  // Biases on the q, k, v and o projections for the llama family (Hugging
  // Face `attention_bias`, which biases o_proj too in LlamaAttention and
  // Qwen3Attention). qwen2 has q/k/v biases and gpt2 all four whatever this
  // says.
  bool attention_bias = false;
  // Each query attends to at most the last `sliding_window` positions
  // (itself included); 0 = the whole context (mistral v0.1 uses 4096).
  int sliding_window = 0;
  // For gpt2, rms_norm_eps above is the LayerNorm epsilon.

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }
  bool is_moe() const { return num_experts > 0; }
  bool has_qk_norm() const {
    return architecture == Architecture::qwen3 || architecture == Architecture::qwen3_moe;
  }
  bool has_qkv_bias() const {
    return attention_bias || architecture == Architecture::qwen2 ||
           architecture == Architecture::gpt2;
  }
  // A bias on the o projection: gpt2, or attention_bias.
  bool has_o_bias() const { return attention_bias || architecture == Architecture::gpt2; }
  bool is_gpt2() const { return architecture == Architecture::gpt2; }
  // Parameters per decoder layer (attention, MLP or experts plus router,
  // norms, biases).
  std::uint64_t layer_parameters() const;
  // All parameters (embedding, position embedding for gpt2, layers, final
  // norm, lm_head unless tied): the published counts, e.g. Llama-3.1-8B
  // 8,030,261,248; GPT-2 124,439,808; Mixtral-8x7B 46,702,792,704.
  std::uint64_t parameter_count() const;
  bool operator==(const ModelConfig&) const = default;
  // Throws ConfigError naming the offending field.
  void validate() const;
};

}  // namespace wafersim::models
