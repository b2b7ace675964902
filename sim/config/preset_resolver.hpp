// Presets: finding <preset dir>/<folder>/<name>.yaml, reading it as a complete
// description, and resolving a scenario's `hardware:`, `model:`, a draft
// model or a GPU system: a preset name, a preset with overrides, a complete
// inline description (or, for models, a Hugging Face checkpoint). Each result
// is validated, its errors at the line that set the value. Private to sim/config.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "fabric/wafer_spec.hpp"
#include "models/gpu/gpu_spec.hpp"
#include "models/model_config.hpp"
#include "sim/config/schema_table.hpp"

namespace wafersim::sim::schema {

// What one kind of preset needs to be resolved from a scenario.
template <class Config>
struct PresetKind {
  std::string kind;    // "hardware" / "model" / "GPU system", for messages
  std::string folder;  // "hardware" / "models" / "gpus"
  std::string example;
  std::span<const Key<Config>> keys;
  // Config::validate(), its errors at the line that set the field.
  void (*validate)(const Config&, const std::string& root_path, const Provenance&,
                   const Loc& fallback);
};

// Names of the presets of one kind: the *.yaml files of `folder`, sorted.
std::vector<std::string> preset_names(const std::filesystem::path& folder);

const PresetKind<fabric::WaferSpec>& hardware_kind();
const PresetKind<models::ModelConfig>& model_kind();
const PresetKind<models::gpu::ClusterSpec>& gpu_kind();

// A checkpoint path (names_checkpoint, scenario.hpp), absolute: relative to
// the current directory if it exists there, else to the folder of the file `v`
// is in.
std::filesystem::path checkpoint_path(const std::string& name, const Value& v);
// The folder (absolute) a model value read its config.json from, given the
// name resolve() set: "" for a preset or an inline model.
std::string model_checkpoint_folder(const std::string& preset_name, const Value& v);

// A preset by name, alone (wafersim list, load_*_preset): errors name the
// preset file with key paths from its top.
template <class Config>
Config load_preset(const PresetKind<Config>& kind, const std::string& name,
                   const std::filesystem::path& preset_dir);

// A scenario's `hardware:` or `model:` value (or a draft model, a GPU
// system): a preset name, a preset with overrides ({preset: NAME, ...}), or a
// complete inline description. `preset_name` is set to the preset's name, the
// checkpoint's path or "inline".
template <class Config>
Config resolve(const PresetKind<Config>& kind, const Value& v,
               const std::filesystem::path& preset_dir, std::string& preset_name);

}  // namespace wafersim::sim::schema
