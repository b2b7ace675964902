// weights: where a functional run's weights come from (WeightsOptions).
// docs/scenario-schema.md, "Weights".
#include <fmt/format.h>

#include <cctype>

#include "models/safetensors.hpp"
#include "sim/config/preset_resolver.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

namespace fs = std::filesystem;
using namespace yaml;

constexpr Need O = Need::optional;

const char* source_name(WeightsOptions::Source s) {
  return s == WeightsOptions::Source::checkpoint ? "checkpoint" : "synthetic";
}

constexpr Key<WeightsOptions> kWeights[] = {
    {"source", O, "checkpoint | synthetic (default checkpoint when model: names a checkpoint)",
     "the checkpoint's own weights, or synthetic weights drawn from workload.seed",
     [](auto& v, auto& w, auto&) {
       w.source = read_choice(v, "source", {"checkpoint", "synthetic"}) == "checkpoint"
                      ? WeightsOptions::Source::checkpoint
                      : WeightsOptions::Source::synthetic;
     },
     [](auto& w) { return std::string(source_name(w.source)); }},
    {"path", O, "path (default: the model's checkpoint folder)",
     "a checkpoint folder, .safetensors file or model.safetensors.index.json (relative to the "
     "current directory, else to the scenario)",
     [](auto& v, auto& w, auto&) {
       const std::string given = read_string(v, "a checkpoint folder such as ./my-model");
       const fs::path p = checkpoint_path(given, v);
       std::error_code ec;
       if (!fs::exists(p, ec))
         fail(v.loc(), v.path,
              fmt::format("'{}' does not exist (looked for {}, relative to the current directory "
                          "and to the scenario's folder)",
                          given, p.string()));
       w.path = p.string();
     },
     [](auto& w) { return yaml_string(w.path); }, [](auto& w) { return !w.path.empty(); }},
    {"sha256", O, "64 hex digits", "the checkpoint's content hash, checked when it is loaded",
     [](auto& v, auto& w, auto&) {
       std::string h = read_string(v, "the content hash a run reports (64 hex digits)");
       bool hex = h.size() == 64;
       for (char& c : h) {
         c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
         hex = hex && std::isxdigit(static_cast<unsigned char>(c));
       }
       if (!hex)
         fail(v.loc(), v.path,
              "must be 64 hex digits: the content hash a run with these weights reports "
              "(weights.sha256 in its JSON, the report's weights line)");
       w.sha256 = h;
     },
     [](auto& w) { return yaml_string(w.sha256); }, [](auto& w) { return !w.sha256.empty(); }},
};

}  // namespace

std::span<const Key<WeightsOptions>> weights_keys() {
  return kWeights;
}

WeightsOptions default_weights(const std::string& model_checkpoint) {
  WeightsOptions w;
  if (!model_checkpoint.empty()) {
    w.source = WeightsOptions::Source::checkpoint;
    w.path = model_checkpoint;
  }
  return w;
}

WeightsOptions read_weights(const Value& v, const std::string& model_checkpoint) {
  const Mapping m(v, top_keys(weights_keys()));
  WeightsOptions w = default_weights(model_checkpoint);
  Provenance unused;
  read_keys(m, /*complete=*/true, weights_keys(), w, unused, ReadContext{});
  if (w.source == WeightsOptions::Source::synthetic) {
    if (m.has("path") || m.has("sha256")) {
      const Value& extra = m.get(m.has("path") ? "path" : "sha256");
      fail(extra.key_loc(), extra.path,
           "is for source: checkpoint; synthetic weights are drawn from workload.seed");
    }
    w.path.clear();
  } else if (w.path.empty()) {
    fail(v.key_loc(), join_path(v.path, "path"),
         "source: checkpoint needs the checkpoint: give weights.path (a folder with "
         "model.safetensors or model.safetensors.index.json), or name the checkpoint folder "
         "in model:");
  }
  return w;
}

std::string checkpoint_files_folder(const WeightsOptions& w, const std::string& model_checkpoint) {
  if (w.source == WeightsOptions::Source::checkpoint && !w.path.empty())
    return checkpoint_folder(w.path).string();
  return model_checkpoint;
}

}  // namespace wafersim::sim::schema
