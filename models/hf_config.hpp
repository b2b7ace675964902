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
// `architectures[0]` (LlamaForCausalLM, ...). Keys mapped:
//   llama family  hidden_size, intermediate_size, num_hidden_layers,
//                 num_attention_heads, vocab_size, max_position_embeddings
//                 (required); num_key_value_heads (default num_attention_heads),
//                 head_dim (default hidden_size / num_attention_heads),
//                 rope_theta (default 10000), rms_norm_eps (default 1e-6),
//                 tie_word_embeddings (default false), attention_bias (false);
//   mistral/mixtral/qwen2/qwen3/qwen3_moe sliding_window (null = none;
//                 qwen2/qwen3/qwen3_moe only when use_sliding_window is true);
//   mixtral       num_local_experts, num_experts_per_tok (required);
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
// architecture, a missing required key or a value of the wrong type.
ModelConfig load_hf_config(const std::filesystem::path& path);

}  // namespace wafersim::models
