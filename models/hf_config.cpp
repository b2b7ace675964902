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
  ConfigReader(const json& j, std::string file) : j_(j), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw HfConfigError(file_, key, what);
  }

  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  int count(const std::string& key) const {
    if (!has(key)) fail(key, "missing required key '" + key + "'");
    return to_count(key);
  }
  int count_or(const std::string& key, int fallback) const {
    return has(key) ? to_count(key) : fallback;
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
  if (c == "GPT2LMHeadModel") return Architecture::gpt2;
  return std::nullopt;
}

Architecture read_architecture(const json& j, const ConfigReader& r) {
  if (r.has("model_type")) {
    const json& t = j.at("model_type");
    if (!t.is_string()) r.fail("model_type", "expected a string, got " + described(t));
    if (auto a = from_model_type(t.get<std::string>())) return *a;
    r.fail("model_type", "unsupported model_type '" + t.get<std::string>() +
                             "'; supported: llama, mistral, qwen2, qwen3, mixtral, gpt2");
  }
  if (r.has("architectures")) {
    const json& list = j.at("architectures");
    if (list.is_array() && !list.empty() && list.front().is_string()) {
      const std::string name = list.front().get<std::string>();
      if (auto a = from_class_name(name)) return *a;
      r.fail("architectures", "unsupported architecture '" + name +
                                  "'; supported: LlamaForCausalLM, MistralForCausalLM, "
                                  "Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, "
                                  "GPT2LMHeadModel");
    }
    r.fail("architectures", "expected a list of class names, got " + described(list));
  }
  r.fail("model_type", "missing required key 'model_type' (nor is there 'architectures')");
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
    c.rope_theta = r.real_or("rope_theta", 10000.0);
    c.rms_norm_eps = r.real_or("rms_norm_eps", 1e-6);
    c.tie_embeddings = r.flag_or("tie_word_embeddings", false);
    c.attention_bias = r.flag_or("attention_bias", false);
    const bool window_applies = c.architecture == Architecture::mistral ||
                                c.architecture == Architecture::mixtral ||
                                r.flag_or("use_sliding_window", false);
    if (window_applies) c.sliding_window = r.count_or("sliding_window", 0);
    if (c.architecture == Architecture::mixtral) {
      c.num_experts = r.count("num_local_experts");
      c.experts_per_token = r.count("num_experts_per_tok");
    }
  }
  try {
    c.validate();
  } catch (const ConfigError& e) {
    throw HfConfigError(shown, e.field(), e.what());
  }
  return c;
}

}  // namespace wafersim::models
