#include "models/hf_config.hpp"

#include <nlohmann/json.hpp>

#include <climits>
#include <fstream>
#include <optional>
#include <string>

namespace wafersim::models {

namespace fs = std::filesystem;
using nlohmann::json;

HfConfigError::HfConfigError(std::string file, std::string key, const std::string& what)
    : std::runtime_error(file + ": error: " + (key.empty() ? std::string() : key + ": ") + what),
      file_(std::move(file)),
      key_(std::move(key)) {}

namespace {

// A value for a message: scalars as JSON, lists and objects by their type
// only (dump() of a deeply nested value would recurse as deep as it goes).
std::string described(const json& v) {
  return v.is_structured() ? std::string("a JSON ") + v.type_name() : v.dump();
}

class ConfigReader {
 public:
  // `prefix` names the dict being read in messages ("rope_scaling.").
  ConfigReader(const json& j, std::string file, std::string prefix = "")
      : j_(j), file_(std::move(file)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw HfConfigError(file_, prefix_ + key, what);
  }
  // A reader of the dict under `key` (which must be one).
  ConfigReader dict(const std::string& key) const {
    const json& v = j_.at(key);
    if (!v.is_object()) fail(key, "expected a JSON object, got " + v.dump());
    return ConfigReader(v, file_, prefix_ + key + ".");
  }
  std::string text_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_string()) fail(key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }
  double real(const std::string& key) const {
    if (!has(key)) fail(key, "missing required key '" + key + "'");
    return real_or(key, 0.0);
  }
  const json& at(const std::string& key) const { return j_.at(key); }

  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  // Written at all, null included (Hugging Face reads null as None).
  bool written(const std::string& key) const { return j_.contains(key); }

  int count(const std::string& key) const {
    if (!has(key)) fail(key, "missing required key '" + key + "'");
    return to_count(key);
  }
  int count_or(const std::string& key, int fallback) const {
    return has(key) ? to_count(key) : fallback;
  }
  // A whole number that may be written as one (8192.0).
  int whole(const std::string& key) const {
    if (!has(key)) fail(key, "missing required key '" + key + "'");
    const json& v = j_.at(key);
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (d >= 0 && d <= INT_MAX && d == static_cast<double>(static_cast<int>(d))) {
        return static_cast<int>(d);
      }
    }
    return to_count(key);
  }
  double real_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number()) fail(key, "expected a number, got " + described(v));
    return v.get<double>();
  }
  bool flag_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, "expected true or false, got " + described(v));
    return v.get<bool>();
  }

 private:
  int to_count(const std::string& key) const {
    const json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > INT_MAX) {
      fail(key,
           "expected a whole number in [0, " + std::to_string(INT_MAX) + "], got " + described(v));
    }
    return static_cast<int>(v.get<long long>());
  }
  const json& j_;
  std::string file_;
  std::string prefix_;
};

std::optional<Architecture> from_model_type(const std::string& t) {
  try {
    return parse_architecture(t);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

std::optional<Architecture> from_class_name(const std::string& c) {
  if (c == "LlamaForCausalLM") return Architecture::llama;
  if (c == "MistralForCausalLM") return Architecture::mistral;
  if (c == "Qwen2ForCausalLM") return Architecture::qwen2;
  if (c == "Qwen3ForCausalLM") return Architecture::qwen3;
  if (c == "MixtralForCausalLM") return Architecture::mixtral;
  if (c == "Qwen3MoeForCausalLM") return Architecture::qwen3_moe;
  if (c == "GPT2LMHeadModel") return Architecture::gpt2;
  return std::nullopt;
}

Architecture read_architecture(const json& j, const ConfigReader& r) {
  if (r.has("model_type")) {
    const json& t = j.at("model_type");
    if (!t.is_string()) r.fail("model_type", "expected a string, got " + described(t));
    if (auto a = from_model_type(t.get<std::string>())) return *a;
    r.fail("model_type",
           "unsupported model_type '" + t.get<std::string>() +
               "'; supported: llama, mistral, qwen2, qwen3, mixtral, qwen3_moe, gpt2");
  }
  if (r.has("architectures")) {
    const json& list = j.at("architectures");
    if (list.is_array() && !list.empty() && list.front().is_string()) {
      const std::string name = list.front().get<std::string>();
      if (auto a = from_class_name(name)) return *a;
      r.fail("architectures", "unsupported architecture '" + name +
                                  "'; supported: LlamaForCausalLM, MistralForCausalLM, "
                                  "Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, "
                                  "Qwen3MoeForCausalLM, GPT2LMHeadModel");
    }
    r.fail("architectures", "expected a list of class names, got " + described(list));
  }
  r.fail("model_type", "missing required key 'model_type' (nor is there 'architectures')");
}

// Qwen3-MoE's mixture of experts (Hugging Face Qwen3MoeSparseMoeBlock), as
// far as wafersim models it: every layer sparse, the top-k weights
// renormalised. Anything else is refused, naming the key.
void read_qwen3_moe_experts(const json& j, const ConfigReader& r, ModelConfig& c) {
  c.num_experts = r.count("num_experts");
  if (c.num_experts < 1)
    r.fail("num_experts", "a qwen3_moe model needs at least one expert, got 0");
  c.experts_per_token = r.count("num_experts_per_tok");
  if (c.experts_per_token < 1 || c.experts_per_token > c.num_experts) {
    r.fail("num_experts_per_tok", "must be in [1, num_experts (" + std::to_string(c.num_experts) +
                                      ")], got " + std::to_string(c.experts_per_token));
  }
  // The released checkpoints set it true; Hugging Face's default is false.
  if (!r.flag_or("norm_topk_prob", false)) {
    r.fail("norm_topk_prob",
           "must be true: wafersim's router renormalises the chosen experts' weights to sum "
           "to 1 (as Qwen3-235B-A22B and Qwen3-30B-A3B do); unnormalised top-k weights "
           "(false, the default when the key is absent) are not modelled");
  }
  const int step = r.count_or("decoder_sparse_step", 1);
  if (step != 1) {
    r.fail("decoder_sparse_step",
           "must be 1 (every layer a mixture of experts), got " + std::to_string(step) +
               ": a model whose layers alternate dense and sparse MLPs is not modelled");
  }
  if (r.has("mlp_only_layers")) {
    const json& dense = j.at("mlp_only_layers");
    if (!dense.is_array()) r.fail("mlp_only_layers", "expected a list, got " + dense.dump());
    if (!dense.empty()) {
      r.fail("mlp_only_layers",
             "must be empty (every layer a mixture of experts), got " + dense.dump() +
                 ": a model with dense-MLP layers among its sparse ones is not modelled");
    }
  }
  // intermediate_size is the width of mlp_only_layers' dense MLPs, which must
  // not exist; each expert's width is moe_intermediate_size.
  c.intermediate_size = r.count("moe_intermediate_size");
}

// RoPE's base and rescaling: transformers 5's `rope_parameters` dict (which
// holds rope_theta and the scaling) when present, else `rope_theta` and
// `rope_scaling` (rope_type, or the older `type`). Hugging Face's default
// and llama3 schemes are modelled (models/model_config.hpp, RopeScaling);
// any other (linear, dynamic, yarn, longrope, ...) is refused.
void read_rope(const ConfigReader& r, double default_theta, ModelConfig& c) {
  c.rope_theta = r.real_or("rope_theta", default_theta);
  std::optional<ConfigReader> scaling;
  if (r.has("rope_parameters")) {
    const ConfigReader p = r.dict("rope_parameters");
    c.rope_theta = p.real_or("rope_theta", c.rope_theta);
    scaling.emplace(p);
  } else if (r.has("rope_scaling")) {
    scaling.emplace(r.dict("rope_scaling"));
  }
  if (!scaling) return;
  const ConfigReader& s = *scaling;
  const std::string type =
      s.has("rope_type") ? s.text_or("rope_type", "default") : s.text_or("type", "default");
  if (type == "default") return;
  if (type != "llama3") {
    s.fail("rope_type", "unsupported RoPE scaling '" + type +
                            "'; supported: default (none) and llama3 (Llama 3.1 / 3.2 / 3.3)");
  }
  c.rope_scaling.type = RopeScalingType::llama3;
  c.rope_scaling.factor = s.real("factor");
  c.rope_scaling.low_freq_factor = s.real("low_freq_factor");
  c.rope_scaling.high_freq_factor = s.real("high_freq_factor");
  c.rope_scaling.original_max_position = s.whole("original_max_position_embeddings");
}

// Which layers attend through a window. wafersim windows every layer or
// none, so a config.json whose window covers only some layers is refused.
//   layer_types (when present): "sliding_attention" / "full_attention" per
//     layer, as transformers 4.53+ writes it;
//   mistral, mixtral: every layer, when sliding_window is not null;
//   qwen2, qwen3, qwen3_moe: with use_sliding_window true, the layers
//     >= max_window_layers (Qwen2Attention; default 28 in Qwen2Config,
//     Qwen3Config and Qwen3MoeConfig).
void read_sliding_window(const ConfigReader& r, int default_window, ModelConfig& c) {
  // null is no window (Mistral v0.2 onwards write it so); absent the default.
  const int window = r.written("sliding_window") ? r.count_or("sliding_window", 0) : default_window;
  if (r.has("layer_types")) {
    const json& types = r.at("layer_types");
    if (!types.is_array()) r.fail("layer_types", "expected a list, got " + types.dump());
    int sliding = 0;
    for (const json& t : types) {
      if (t == "sliding_attention") {
        ++sliding;
      } else if (t != "full_attention") {
        r.fail("layer_types", "unsupported layer type " + t.dump() +
                                  "; supported: full_attention, sliding_attention");
      }
    }
    if (sliding != 0 && sliding != static_cast<int>(types.size())) {
      r.fail("layer_types",
             "windows " + std::to_string(sliding) + " of " + std::to_string(types.size()) +
                 " layers: wafersim windows every layer or none (per-layer windows are not "
                 "modelled)");
    }
    c.sliding_window = sliding != 0 ? window : 0;
    return;
  }
  switch (c.architecture) {
    case Architecture::mistral:
    case Architecture::mixtral:
      c.sliding_window = window;
      return;
    case Architecture::qwen2:
    case Architecture::qwen3:
    case Architecture::qwen3_moe: {
      if (!r.flag_or("use_sliding_window", false) || window == 0) return;
      const int first = r.count_or("max_window_layers", 28);
      if (first >= c.num_layers) return;  // no layer is windowed
      if (first != 0) {
        r.fail("max_window_layers",
               "with use_sliding_window true, Hugging Face windows only layers >= "
               "max_window_layers (" +
                   std::to_string(first) + " of " + std::to_string(c.num_layers) +
                   "): wafersim windows every layer or none (per-layer windows are not "
                   "modelled; max_window_layers 0 windows every layer)");
      }
      c.sliding_window = window;
      return;
    }
    default:
      return;
  }
}

}  // namespace

ModelConfig load_hf_config(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "config.json" : path;
  const std::string shown = file.string();
  std::ifstream in(file, std::ios::binary);
  if (!in) throw HfConfigError(shown, "", "cannot open file");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e400
    throw HfConfigError(shown, "", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) throw HfConfigError(shown, "", "expected a JSON object at the top level");
  const ConfigReader r(j, shown);

  ModelConfig c;
  c.architecture = read_architecture(j, r);
  fs::path folder = fs::absolute(file, ec).parent_path();
  c.name = folder.filename().string();
  if (c.name.empty()) c.name = "hf-model";

  if (c.architecture == Architecture::gpt2) {
    c.hidden_size = r.count("n_embd");
    c.num_layers = r.count("n_layer");
    c.num_heads = r.count("n_head");
    c.num_kv_heads = c.num_heads;
    c.vocab_size = r.count("vocab_size");
    c.max_position = r.count("n_positions");
    c.intermediate_size = r.count_or("n_inner", 4 * c.hidden_size);
    c.rms_norm_eps = r.real_or("layer_norm_epsilon", 1e-5);
    c.tie_embeddings = r.flag_or("tie_word_embeddings", true);
    if (c.num_heads == 0 || c.hidden_size % c.num_heads != 0) {
      r.fail("n_head", "n_head must divide n_embd (" + std::to_string(c.hidden_size) + ")");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  } else {
    c.hidden_size = r.count("hidden_size");
    if (c.architecture != Architecture::qwen3_moe)
      c.intermediate_size = r.count("intermediate_size");
    c.num_layers = r.count("num_hidden_layers");
    c.num_heads = r.count("num_attention_heads");
    c.num_kv_heads = r.count_or("num_key_value_heads", c.num_heads);
    if (r.has("head_dim")) {
      c.head_dim = r.count("head_dim");
    } else {
      if (c.num_heads == 0 || c.hidden_size % c.num_heads != 0) {
        r.fail("num_attention_heads", "num_attention_heads must divide hidden_size (" +
                                          std::to_string(c.hidden_size) +
                                          ") when there is no head_dim");
      }
      c.head_dim = c.hidden_size / c.num_heads;
    }
    c.vocab_size = r.count("vocab_size");
    c.max_position = r.count("max_position_embeddings");
    // Hugging Face's defaults for absent keys, per family (transformers'
    // configuration_<family>.py constructors): LlamaConfig, Qwen2Config,
    // Qwen3Config, Qwen3MoeConfig and MistralConfig rope_theta 10000.0 and
    // rms_norm_eps 1e-6; MixtralConfig rope_theta 1e6 and rms_norm_eps 1e-5;
    // MistralConfig and MixtralConfig num_key_value_heads 8 (the others:
    // num_attention_heads); MistralConfig sliding_window 4096, MixtralConfig
    // None; MixtralConfig num_local_experts 8, num_experts_per_tok 2.
    const bool mixtral = c.architecture == Architecture::mixtral;
    const bool mistral_like = mixtral || c.architecture == Architecture::mistral;
    if (mistral_like) c.num_kv_heads = r.count_or("num_key_value_heads", 8);
    read_rope(r, mixtral ? 1e6 : 10000.0, c);
    c.rms_norm_eps = r.real_or("rms_norm_eps", mixtral ? 1e-5 : 1e-6);
    c.tie_embeddings = r.flag_or("tie_word_embeddings", false);
    // attention_bias biases q, k, v and o_proj in LlamaAttention,
    // Qwen3Attention and Qwen3MoeAttention; Mistral and Mixtral have no
    // biases, Qwen2 its q/k/v ones whatever the key says.
    if (c.architecture == Architecture::llama || c.has_qk_norm())
      c.attention_bias = r.flag_or("attention_bias", false);
    if (c.architecture == Architecture::llama && r.flag_or("mlp_bias", false)) {
      r.fail("mlp_bias", "biases on gate_proj, up_proj and down_proj are not modelled");
    }
    const std::string act = r.text_or("hidden_act", "silu");
    if (act != "silu") {
      r.fail("hidden_act", "unsupported activation '" + act + "'; supported: silu (SwiGLU)");
    }
    read_sliding_window(r, c.architecture == Architecture::mistral ? 4096 : 0, c);
    if (mixtral) {
      c.num_experts = r.count_or("num_local_experts", 8);
      c.experts_per_token = r.count_or("num_experts_per_tok", 2);
    }
    if (c.architecture == Architecture::qwen3_moe) read_qwen3_moe_experts(j, r, c);
  }
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw HfConfigError(shown, e.field(), e.what());
  }
  return c;
}

}  // namespace wafersim::models
