#include "sim/config/preset_resolver.hpp"

#include <algorithm>
#include <cctype>
#include <system_error>
#include <type_traits>
#include <vector>

#include "models/hf_config.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace fs = std::filesystem;
using namespace yaml;

std::optional<Loc> Provenance::find(std::string path) const {
  while (!path.empty()) {
    if (auto it = where_.find(path); it != where_.end()) return it->second;
    const auto dot = path.rfind('.');
    if (dot == std::string::npos) break;
    path.resize(dot);
  }
  return std::nullopt;
}

std::vector<std::string> preset_names(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".yaml" && it->is_regular_file(ec)) {
      names.push_back(it->path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

bool is_preset_name(const std::string& s) {
  if (s.empty() || s.front() == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// <preset_dir>/<folder>/<name>.yaml, or an error at `where` listing the presets there.
fs::path find_preset(const std::string& kind, const std::string& folder, const std::string& name,
                     const fs::path& preset_dir, const Loc& where, const std::string& key_path) {
  const fs::path dir = preset_dir / folder;
  const fs::path file = dir / (name + ".yaml");
  std::error_code ec;
  if (is_preset_name(name) && fs::is_regular_file(file, ec)) return file;
  const std::vector<std::string> names = preset_names(dir);
  if (names.empty()) {
    fail(where, key_path,
         fmt::format("unknown {} preset '{}'; no presets found in {}", kind, name, dir.string()));
  }
  fail(where, key_path,
       fmt::format("unknown {} preset '{}'; available presets: {}{}", kind, name, join_list(names),
                   did_you_mean(name, names)));
}

template <class Config>
void apply(const PresetKind<Config>& kind, const Mapping& m, bool complete, Config& config,
           Provenance& prov) {
  read_keys(m, complete, kind.keys, config, prov, ReadContext{});
}

// Reads a preset file as a complete description. `root_path` is the key path
// its contents get in error messages ("hardware" inside a scenario, "" alone).
template <class Config>
Config read_preset_file(const PresetKind<Config>& kind, const fs::path& file,
                        const std::string& expected_name, const std::string& root_path,
                        Provenance& prov) {
  const std::string shown = file.string();
  const YAML::Node root = parse_file(file);
  const std::vector<std::string> keys = top_keys(kind.keys);
  if (root.IsNull()) {
    fail({shown, 0, 0}, root_path,
         fmt::format("the preset file is empty; expected a mapping with keys {}", join_list(keys)));
  }
  const Mapping m(document(root, shown, root_path), keys);
  Config config;
  apply(kind, m, /*complete=*/true, config, prov);
  const Value& name = m.get("name");
  if (read_string(name) != expected_name) {
    fail(name.loc(), name.path,
         fmt::format("preset name '{}' does not match its file name '{}.yaml'; presets are looked "
                     "up by file name, so the two must agree",
                     name.node.Scalar(), expected_name));
  }
  return config;
}

// validate(), its error at the line that last set the field (or its parent).
template <class Config, class Error>
void validate_at(const Config& config, const std::string& root_path, const Provenance& prov,
                 const Loc& fallback) {
  try {
    config.validate();
  } catch (const Error& e) {
    const std::string path = join_path(root_path, e.field());
    fail(prov.find(path).value_or(fallback), path, e.what());
  }
}

// Relative to the current directory, else to the scenario file's folder.
models::ModelConfig read_checkpoint_config(const std::string& name, const Value& v) {
  const fs::path path = checkpoint_path(name, v);
  std::error_code ec;
  const fs::path file =
      fs::is_directory(path, ec) && path.extension() != ".json" ? path / "config.json" : path;
  const fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st))
    fail(v.loc(), v.path,
         fmt::format("{} does not exist; expected a checkpoint folder with a config.json, or "
                     "the config.json itself",
                     file.string()));
  if (st.type() != fs::file_type::regular)
    fail(v.loc(), v.path,
         fmt::format("{} is {}; expected a config.json file", file.string(),
                     st.type() == fs::file_type::directory ? "a folder" : "not a regular file"));
  try {
    return models::load_hf_config(checkpoint_path(name, v));
  } catch (const models::HfConfigError& e) {
    fail(v.loc(), v.path, e.what());
  }
}

}  // namespace

std::string model_checkpoint_folder(const std::string& preset_name, const Value& v) {
  if (!names_checkpoint(preset_name)) return "";
  return checkpoint_folder(checkpoint_path(preset_name, v)).string();
}

fs::path checkpoint_path(const std::string& name, const Value& v) {
  fs::path path = name;
  std::error_code ec;
  if (path.is_relative() && !fs::exists(path, ec)) {
    const fs::path beside = fs::path(v.loc().file).parent_path() / path;
    if (fs::exists(beside, ec)) path = beside;
  }
  return fs::absolute(path, ec).lexically_normal();
}

const PresetKind<fabric::WaferSpec>& hardware_kind() {
  static const PresetKind<fabric::WaferSpec> k{"hardware", "hardware", "wse3", hardware_keys(),
                                               validate_at<fabric::WaferSpec, fabric::SpecError>};
  return k;
}

namespace {

// The most parameters a model may have: a thousand times Llama 3.1 405B, far
// below where parameter and byte counts (64-bit) could overflow.
constexpr long double kMaxParameters = 1e15L;

// validate(), then the model's size, estimated without overflow (each count is
// bounded by its range, their product is not).
void validate_model(const models::ModelConfig& m, const std::string& root_path,
                    const Provenance& prov, const Loc& fallback) {
  validate_at<models::ModelConfig, models::ConfigError>(m, root_path, prov, fallback);
  const long double hidden = m.hidden_size;
  const long double attention =
      hidden * static_cast<long double>(m.head_dim) * 2.0L * (m.num_heads + m.num_kv_heads);
  const long double mlp = 3.0L * hidden * m.intermediate_size * std::max(1, m.num_experts);
  const long double total = static_cast<long double>(m.num_layers) * (attention + mlp) +
                            2.0L * hidden * m.vocab_size + hidden * m.max_position;
  if (total > kMaxParameters) {
    const std::string path = join_path(root_path, "num_layers");
    fail(prov.find(path).value_or(fallback), root_path,
         fmt::format("the model would have about {:.3g} parameters; at most {:.0e} are supported "
                     "(check num_layers, hidden_size, intermediate_size, num_experts, vocab_size)",
                     static_cast<double>(total), static_cast<double>(kMaxParameters)));
  }
}

}  // namespace

const PresetKind<models::ModelConfig>& model_kind() {
  static const PresetKind<models::ModelConfig> k{"model", "models", "tiny-llama", model_keys(),
                                                 validate_model};
  return k;
}

const PresetKind<models::gpu::ClusterSpec>& gpu_kind() {
  static const PresetKind<models::gpu::ClusterSpec> k{
      "GPU system", "gpus", "dgx-h100", gpu_keys(),
      validate_at<models::gpu::ClusterSpec, models::gpu::GpuSpecError>};
  return k;
}

template <class Config>
Config load_preset(const PresetKind<Config>& kind, const std::string& name,
                   const fs::path& preset_dir) {
  const fs::path file = find_preset(kind.kind, kind.folder, name, preset_dir,
                                    Loc{(preset_dir / kind.folder).string(), 0, 0}, "");
  Provenance prov;
  Config config = read_preset_file(kind, file, name, "", prov);
  kind.validate(config, "", prov, Loc{file.string(), 1, 1});
  return config;
}

template <class Config>
Config resolve(const PresetKind<Config>& kind, const Value& v, const fs::path& preset_dir,
               std::string& preset_name) {
  Provenance prov;
  Config config;
  auto from_preset = [&](const Value& name_value) {
    const std::string name = read_string(
        name_value, fmt::format("a {} preset name such as {}", kind.kind, kind.example));
    if constexpr (std::is_same_v<Config, models::ModelConfig>) {
      if (names_checkpoint(name)) {  // a Hugging Face checkpoint, not a preset
        config = read_checkpoint_config(name, name_value);
        preset_name = name;
        return;
      }
    }
    const fs::path file =
        find_preset(kind.kind, kind.folder, name, preset_dir, name_value.loc(), name_value.path);
    config = read_preset_file(kind, file, name, v.path, prov);
    preset_name = name;
  };
  if (v.node.IsScalar()) {
    from_preset(v);
  } else if (v.node.IsMap()) {
    std::vector<std::string> keys = top_keys(kind.keys);
    keys.insert(keys.begin(), "preset");
    const Mapping m(v, keys);
    if (m.has("preset")) {
      from_preset(m.get("preset"));
      apply(kind, m, /*complete=*/false, config, prov);
    } else {
      apply(kind, m, /*complete=*/true, config, prov);
      preset_name = "inline";
    }
  } else {
    fail(v.loc(), v.path,
         fmt::format("expected a {} preset name (e.g. {}) or a mapping, got {}", kind.kind,
                     kind.example, describe(v.node)));
  }
  kind.validate(config, v.path, prov, v.key_loc());
  return config;
}

template fabric::WaferSpec load_preset(const PresetKind<fabric::WaferSpec>&, const std::string&,
                                       const fs::path&);
template models::ModelConfig load_preset(const PresetKind<models::ModelConfig>&, const std::string&,
                                         const fs::path&);
template models::gpu::ClusterSpec load_preset(const PresetKind<models::gpu::ClusterSpec>&,
                                              const std::string&, const fs::path&);
template fabric::WaferSpec resolve(const PresetKind<fabric::WaferSpec>&, const Value&,
                                   const fs::path&, std::string&);
template models::ModelConfig resolve(const PresetKind<models::ModelConfig>&, const Value&,
                                     const fs::path&, std::string&);
template models::gpu::ClusterSpec resolve(const PresetKind<models::gpu::ClusterSpec>&, const Value&,
                                          const fs::path&, std::string&);

}  // namespace wafersim::sim::schema
