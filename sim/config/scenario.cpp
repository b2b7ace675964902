// Scenario loading: YAML -> validated, resolved sim::Scenario. The file's
// top level is read by its schema table (scenario_schema.cpp), each section by
// its own (sections.hpp), presets resolved by preset_resolver.hpp.
//
// Strict in both directions (STYLE.md, "Configuration and errors"): every key
// is checked against the schema (unknown keys are errors with a did-you-mean),
// required keys must be present, quantities need explicit units, and
// impossible hardware or models are reported at the line that set the value,
// whether that line is in the scenario or in the preset file it refers to.
#include "sim/config/scenario.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "models/safetensors.hpp"
#include "sim/config/preset_resolver.hpp"
#include "sim/config/schema.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;

namespace {

std::string format_error(const std::string& file, int line, int column, const std::string& key_path,
                         const std::string& what) {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) {
      out += fmt::format(":{}", line);
      if (column > 0) out += fmt::format(":{}", column);
    }
    out += ": ";
  }
  out += "error: ";
  if (!key_path.empty()) out += key_path + ": ";
  out += what;
  return out;
}

}  // namespace

ScenarioError::ScenarioError(std::string file, int line, int column, std::string key_path,
                             const std::string& what)
    : std::runtime_error(format_error(file, line, column, key_path, what)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_path_(std::move(key_path)) {}

const std::vector<std::string>& reduction_names() {
  static const std::vector<std::string> names = {"chain", "tree", "two-level", "k-tree", "ring"};
  return names;
}

std::optional<ReductionScheme> parse_reduction(std::string_view name) {
  for (const auto s : {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level,
                       ReductionScheme::k_tree, ReductionScheme::ring})
    if (name == reduction_name(s)) return s;
  return std::nullopt;
}

std::filesystem::path default_preset_dir() {
  if (const char* env = std::getenv("WAFERSIM_PRESETS"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef WAFERSIM_SCENARIO_DIR
  return WAFERSIM_SCENARIO_DIR;
#else
  return "scenarios";
#endif
}

namespace {

using namespace schema;
using namespace yaml;

// Each override is read as YAML text, exactly as if it stood in the file.
void apply_overrides(YAML::Node& root, const ScenarioOverrides& overrides) {
  auto as_yaml = [](const std::string& text) {
    try {
      return YAML::Load(text);
    } catch (const YAML::Exception&) {
      return YAML::Node(text);
    }
  };
  if (overrides.hardware) root["hardware"] = as_yaml(*overrides.hardware);
  if (overrides.model) root["model"] = as_yaml(*overrides.model);
  if (overrides.precision) root["precision"] = as_yaml(*overrides.precision);
  if (overrides.wafers) root["wafers"] = as_yaml(*overrides.wafers);
  if (overrides.users && root["workload"].IsMap())
    root["workload"]["users"] = as_yaml(std::to_string(*overrides.users));
  if (overrides.layer_groups) {
    if (!root["placement"].IsMap()) root["placement"] = YAML::Node(YAML::NodeType::Map);
    root["placement"]["layer_groups"] = as_yaml(*overrides.layer_groups);
  }
  if (overrides.placement_file) {
    // Given relative to the current directory: made absolute here, as the
    // scenario's own `file:` is resolved against the scenario's folder.
    const std::string abs =
        std::filesystem::absolute(*overrides.placement_file).lexically_normal().string();
    if (!root["placement"].IsMap()) root["placement"] = YAML::Node(YAML::NodeType::Map);
    root["placement"]["file"] = as_yaml(abs);
  }
  for (const auto& [path, text] : overrides.set) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = path.find('.', start);
      parts.push_back(path.substr(start, dot - start));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    YAML::Node at = root;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      // A key inside a preset given by name (hardware: wse3) sets it over
      // the preset, as {preset: wse3, ...} in the file would.
      if (at[parts[i]].IsScalar()) {
        YAML::Node over(YAML::NodeType::Map);
        over["preset"] = at[parts[i]].Scalar();
        at[parts[i]] = over;
      }
      if (!at[parts[i]].IsMap()) at[parts[i]] = YAML::Node(YAML::NodeType::Map);
      YAML::Node next = at[parts[i]];
      at.reset(next);
    }
    const YAML::Node value = as_yaml(text);
    if (value.IsNull())
      at.remove(parts.back());
    else
      at[parts.back()] = value;
  }
}

}  // namespace

bool names_checkpoint(const std::string& model) {
  return model.find('/') != std::string::npos ||
         (model.size() > 5 && model.compare(model.size() - 5, 5, ".json") == 0);
}

fs::path checkpoint_folder(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) ? path : path.parent_path();
}

std::string suggest_name(const std::string& word, const std::vector<std::string>& candidates) {
  return yaml::did_you_mean(word, candidates);
}

std::vector<KeyDoc> scenario_schema() {
  std::vector<KeyDoc> out;
  document_keys(out, "scenario", scenario_keys());
  document_keys(out, "hardware", hardware_keys());
  document_keys(out, "model", model_keys());
  document_keys(out, "gpu", gpu_keys());
  document_keys(out, "placement", placement_keys());
  document_keys(out, "workload", workload_keys());
  document_keys(out, "outputs", outputs_keys());
  document_keys(out, "weights", weights_keys());
  document_keys(out, "gpu_parallelism", gpu_parallelism_keys());
  document_keys(out, "speculative_decoding", speculative_keys());
  document_keys(out, "serving", serving_keys());
  document_keys(out, "traffic", traffic_keys());
  document_keys(out, "deployment", deployment_keys());
  document_keys(out, "slo", slo_keys());
  return out;
}

// ---------------------------------------------------------------------------

fabric::WaferSpec load_hardware_preset(const std::string& name, const fs::path& preset_dir) {
  return load_preset(hardware_kind(), name, preset_dir);
}

models::ModelConfig load_model_preset(const std::string& name, const fs::path& preset_dir) {
  return load_preset(model_kind(), name, preset_dir);
}

models::gpu::ClusterSpec load_gpu_preset(const std::string& name, const fs::path& preset_dir) {
  return load_preset(gpu_kind(), name, preset_dir);
}

Scenario load_scenario(const fs::path& file, const fs::path& preset_dir) {
  return load_scenario(file, preset_dir, ScenarioOverrides{});
}

Scenario load_scenario(const fs::path& file, const fs::path& preset_dir,
                       const ScenarioOverrides& overrides) {
  const std::string shown = file.string();
  YAML::Node root = parse_file(file);
  if (root.IsMap()) apply_overrides(root, overrides);
  if (root.IsNull()) {
    fail({shown, 0, 0}, "",
         "the file is empty; a scenario needs at least name, hardware, model and workload");
  }
  const Mapping top(document(root, shown, ""), top_keys(scenario_keys()));

  Scenario s;
  s.source_file = shown;
  Provenance unused;  // the top-level keys need none (hardware and model keep their own)
  ReadContext ctx;
  ctx.preset_dir = preset_dir;
  read_keys(top, /*complete=*/true, scenario_keys(), s, unused, ctx);
  // A serving study (traffic:) needs no workload, and no wafer when it
  // compares GPU systems alone; any other scenario needs both.
  if (!s.traffic) {
    if (top.find("hardware") == nullptr) top.require("hardware");
    if (top.find("workload") == nullptr) top.require("workload");
  }
  s.resolved_yaml = emit_resolved(s);
  return s;
}

namespace {

// A functional run reads the checkpoint's weights: they must be there.
void check_weights_present(const Scenario& sc, const WeightsOptions& w, const std::string& key) {
  if (w.source != WeightsOptions::Source::checkpoint) return;
  if (models::checkpoint_weights_file(w.path)) return;
  throw ScenarioError(
      sc.source_file, 0, 0, key + ".path",
      fmt::format("{} holds no weights (no model.safetensors or model.safetensors.index.json): "
                  "a functional run decodes with the checkpoint's own weights. Add the weights "
                  "files; or set {}: {{source: synthetic}} to decode with synthetic weights "
                  "drawn from workload.seed (the tokens are then not the checkpoint's); or run "
                  "timing only (outputs: {{functional: false}}, or run --timing-only)",
                  w.path, key));
}

}  // namespace

void check_run_mode(const Scenario& sc, bool functional) {
  if (functional) {
    check_weights_present(sc, sc.weights, "weights");
    if (sc.speculative)
      check_weights_present(sc, sc.speculative->draft_weights,
                            "speculative_decoding.draft_weights");
  }
  if (functional && sc.workload.cached_tokens > 0)
    throw ScenarioError(
        sc.source_file, 0, 0, "workload.cached_tokens",
        fmt::format("{}, which needs a timing-only run (outputs: {{functional: false}}, or "
                    "run --timing-only): a functional run has no keys and values for positions "
                    "it did not compute",
                    sc.workload.cached_tokens_by_user.empty()
                        ? fmt::format("is {}", sc.workload.cached_tokens)
                        : fmt::format("gives a user {} cached positions",
                                      sc.workload.cached_tokens)));
}

void check_single_batch(const Scenario& sc, const std::string& what) {
  if (sc.traffic)
    throw ScenarioError(
        sc.source_file, 0, 0, "traffic",
        fmt::format("this scenario is a serving study (traffic:): run it with "
                    "`wafersim serve`; `wafersim {}` simulates one batch (workload:)",
                    what));
}

std::vector<std::int32_t> user_prompt(const Workload& w, int u, int vocab_size) {
  std::vector<std::int32_t> ids = w.prompt_ids;
  ids.resize(static_cast<std::size_t>(user_prompt_tokens(w, u)));
  const auto shift = static_cast<std::int64_t>(u) * 7919;
  for (std::int32_t& id : ids) id = static_cast<std::int32_t>((id + shift) % vocab_size);
  return ids;
}

namespace {

int per_user(const std::vector<int>& by_user, int u, int single) {
  return by_user.empty() ? single : by_user.at(static_cast<std::size_t>(u));
}

}  // namespace

int user_prompt_tokens(const Workload& w, int u) {
  return per_user(w.prompt_tokens_by_user, u, static_cast<int>(w.prompt_ids.size()));
}
int user_generate_tokens(const Workload& w, int u) {
  return per_user(w.generate_tokens_by_user, u, w.generate_tokens);
}
int user_cached_tokens(const Workload& w, int u) {
  return per_user(w.cached_tokens_by_user, u, w.cached_tokens);
}
int user_context_tokens(const Workload& w, int u) {
  return user_cached_tokens(w, u) + user_prompt_tokens(w, u) + user_generate_tokens(w, u);
}

long long workload_token_passes(const Workload& w) {
  long long passes = 0;
  for (int u = 0; u < w.users; ++u)
    passes += user_prompt_tokens(w, u) + user_generate_tokens(w, u) - 1;
  return passes;
}

}  // namespace wafersim::sim
