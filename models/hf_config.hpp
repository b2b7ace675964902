// ModelConfig from a Hugging Face checkpoint's config.json (Llama, Mistral,
// Qwen2, Qwen3, Mixtral, Qwen3-MoE, GPT-2).
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>

#include "models/model_config.hpp"

namespace wafersim::models {

// A config.json that cannot be read or mapped. The message names the file and
// the key; `key()` is empty when the problem is the file as a whole.
class HfConfigError : public std::runtime_error {
 public:
  HfConfigError(std::string file, std::string key, const std::string& what);
  const std::string& file() const { return file_; }
  const std::string& key() const { return key_; }

 private:
  std::string file_;
  std::string key_;
};

// Reads `path`: a config.json, or a folder holding one. The architecture comes
// from `model_type` (llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, gpt2), else from
// `architectures[0]` (LlamaForCausalLM, ...). Absent optional keys take
// Hugging Face's default for the family. Keys mapped:
//   llama family  hidden_size, intermediate_size, num_hidden_layers,
//                 num_attention_heads, vocab_size, max_position_embeddings
//                 (required); num_key_value_heads (default
//                 num_attention_heads; mistral and mixtral 8), head_dim
//                 (default hidden_size / num_attention_heads), rope_theta
//                 (default 10000; mixtral 1e6), rms_norm_eps (default 1e-6;
//                 mixtral 1e-5), tie_word_embeddings (default false);
//                 rope_scaling, or transformers 5's rope_parameters (which
//                 also holds rope_theta): rope_type default or llama3 (factor,
//                 low_freq_factor, high_freq_factor,
//                 original_max_position_embeddings), any other refused;
//                 hidden_act must be silu;
//   llama/qwen3/qwen3_moe attention_bias (default false; biases q, k, v and
//                 o_proj); llama mlp_bias must be false;
//   windows       layer_types when present (every layer sliding_attention or
//                 none), else: mistral/mixtral sliding_window (null = none;
//                 absent: mistral 4096, mixtral none); qwen2/qwen3/qwen3_moe
//                 sliding_window only when use_sliding_window is true, and
//                 then max_window_layers (default 28) must be 0 (every layer
//                 windowed) or >= num_hidden_layers (none) — per-layer
//                 windows are refused;
//   mixtral       num_local_experts (default 8), num_experts_per_tok (2);
//   qwen3_moe     num_experts, num_experts_per_tok, moe_intermediate_size
//                 (each expert's width; required, and intermediate_size is
//                 not read); norm_topk_prob must be true, decoder_sparse_step
//                 1 (its default) and mlp_only_layers empty (its default):
//                 every layer a mixture of experts whose top-k weights are
//                 renormalised, else HfConfigError naming the key;
//   gpt2          n_embd, n_layer, n_head, vocab_size, n_positions (required),
//                 n_inner (default 4 * n_embd), layer_norm_epsilon (1e-5),
//                 tie_word_embeddings (default true).
// The name is the folder's name. The result is validated (ConfigError).
// Throws HfConfigError for an unreadable file, invalid JSON, an unknown
// architecture, a missing required key, a value of the wrong type, or a
// feature wafersim does not model (the key named, e.g.
// rope_scaling.rope_type, max_window_layers, mlp_bias).
ModelConfig load_hf_config(const std::filesystem::path& path);

}  // namespace wafersim::models
