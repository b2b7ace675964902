// What the wafer is compared with and how users see it: compare_with (GPU
// systems), gpu_parallelism, speculative_decoding and serving.
// docs/scenario-schema.md, "GPU baselines".
#include <system_error>

#include "sim/config/preset_resolver.hpp"
#include "sim/config/quantity.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace fs = std::filesystem;

namespace {

using models::gpu::ServingOverhead;
using namespace yaml;

constexpr Need R = Need::required;
constexpr Need O = Need::optional;

// A tensor- or pipeline-parallel size: a count >= 1, or auto (0).
int read_split(const Value& v) {
  if (v.node.IsScalar() && v.node.Scalar() == "auto" && is_plain(v)) return 0;
  const int n = read_count(v, "8");
  if (n < 1 || n > 4096) fail(v.loc(), v.path, "must be between 1 and 4096, or auto");
  return n;
}

std::string write_split(int n) {
  return n == 0 ? std::string("auto") : std::to_string(n);
}

constexpr Key<GpuComparison> kGpuParallelism[] = {
    {"tp", O, "count 1..4096 or auto (default auto)", "tensor-parallel size of every GPU system",
     [](auto& v, auto& g, auto&) { g.tp = read_split(v); },
     [](auto& g) { return write_split(g.tp); }},
    {"pp", O, "count 1..4096 or auto (default auto)", "pipeline-parallel size of every GPU system",
     [](auto& v, auto& g, auto&) { g.pp = read_split(v); },
     [](auto& g) { return write_split(g.pp); }},
};

constexpr Key<SpeculativeOptions> kSpeculative[] = {
    {"draft_model", R, "a model preset, {preset: ...} or inline", "the draft model",
     [](auto& v, auto& o, auto& ctx) {
       o.decoding.draft = resolve(model_kind(), v, ctx.preset_dir, o.draft_preset);
       o.draft_checkpoint = model_checkpoint_folder(o.draft_preset, v);
     },
     [](auto& o) { return block(write_keys(model_keys(), o.decoding.draft, "    ")); }},
    {"draft_weights", O, "{source, path, sha256} as weights: (default: as for the target)",
     "the draft's checkpoint weights or synthetic ones (functional runs)",
     [](auto& v, auto& o, auto&) { o.draft_weights = read_weights(v, o.draft_checkpoint); },
     [](auto& o) { return block(write_keys(weights_keys(), o.draft_weights, "    ")); },
     [](auto& o) {
       return o.draft_weights.source == WeightsOptions::Source::checkpoint ||
              !o.draft_checkpoint.empty();
     },
     0, false, [](auto& o, auto&) { o.draft_weights = default_weights(o.draft_checkpoint); }},
    {"draft_tokens", R, "count 1..64", "gamma: tokens the draft proposes per step",
     [](auto& v, auto& o, auto&) {
       o.decoding.draft_tokens = read_count(v, "4");
       if (o.decoding.draft_tokens < 1 || o.decoding.draft_tokens > 64)
         fail(v.loc(), v.path, "must be between 1 and 64 (tokens the draft proposes per step)");
     },
     [](auto& o) { return fmt::format("{}", o.decoding.draft_tokens); }},
    {"acceptance_rate", R, "number in [0, 1]", "alpha: probability a draft token is accepted",
     [](auto& v, auto& o, auto&) {
       o.decoding.acceptance_rate = read_real(v, "0.7");
       if (!(o.decoding.acceptance_rate >= 0.0 && o.decoding.acceptance_rate <= 1.0))
         fail(v.loc(), v.path, "must be between 0 and 1 (probability a draft token is accepted)");
     },
     [](auto& o) { return yaml_real(o.decoding.acceptance_rate); }},
};

constexpr Key<ServingOverhead> kServing[] = {
    {"round_trip", O, "time, default 0 s", "client <-> API, once per request",
     [](auto& v, auto& o, auto&) {
       o.round_trip_s = read_quantity_in(v, parse_duration, "50 ms", 0.0, 3600.0, format_duration);
     },
     [](auto& o) { return format_duration(o.round_trip_s); }},
    {"per_token_overhead", O, "time, default 0 s", "added to every streamed token",
     [](auto& v, auto& o, auto&) {
       o.per_token_overhead_s =
           read_quantity_in(v, parse_duration, "1 ms", 0.0, 3600.0, format_duration);
     },
     [](auto& o) { return format_duration(o.per_token_overhead_s); }},
    {"connection_setup", O, "time, default 0 s", "per request (persistent path: halved)",
     [](auto& v, auto& o, auto&) {
       o.connection_setup_s =
           read_quantity_in(v, parse_duration, "200 ms", 0.0, 3600.0, format_duration);
     },
     [](auto& o) { return format_duration(o.connection_setup_s); }},
};

}  // namespace

std::span<const Key<GpuComparison>> gpu_parallelism_keys() {
  return kGpuParallelism;
}
std::span<const Key<SpeculativeOptions>> speculative_keys() {
  return kSpeculative;
}
std::span<const Key<ServingOverhead>> serving_keys() {
  return kServing;
}

// compare_with: a list of GPU systems, each a preset name, a preset with
// overrides or a complete inline description.
std::vector<models::gpu::ClusterSpec> read_compare_with(const Value& list,
                                                        const fs::path& preset_dir) {
  if (!list.node.IsSequence()) {
    fail(list.loc(), list.path,
         fmt::format("expected a list of GPU systems such as [dgx-h100, dgx-b200] (or [] for "
                     "none), got {}",
                     describe(list.node)));
  }
  std::vector<models::gpu::ClusterSpec> out;
  for (std::size_t i = 0; i < list.node.size(); ++i) {
    const Value item = list.item(i);
    std::string preset_name;
    out.push_back(resolve(gpu_kind(), item, preset_dir, preset_name));
    for (std::size_t j = 0; j + 1 < out.size(); ++j) {
      if (out[j].name == out.back().name)
        fail(item.loc(), item.path, fmt::format("'{}' is listed twice", out.back().name));
    }
  }
  return out;
}

// compare_with absent: the default systems whose presets exist in the preset
// dir (none when it has no gpus/ folder).
std::vector<models::gpu::ClusterSpec> default_gpu_systems(const fs::path& preset_dir) {
  std::vector<models::gpu::ClusterSpec> out;
  std::error_code ec;
  for (const std::string& name : sim::default_compare_with()) {
    if (fs::is_regular_file(preset_dir / "gpus" / (name + ".yaml"), ec))
      out.push_back(load_preset(gpu_kind(), name, preset_dir));
  }
  return out;
}

void read_gpu_parallelism(const Value& v, GpuComparison& gpu) {
  const Mapping m(v, top_keys(gpu_parallelism_keys()));
  Provenance unused;
  read_keys(m, /*complete=*/true, gpu_parallelism_keys(), gpu, unused, ReadContext{});
}

SpeculativeOptions read_speculative(const Value& v, const fs::path& preset_dir,
                                    const models::ModelConfig& target) {
  const Mapping m(v, top_keys(speculative_keys()));
  SpeculativeOptions o;
  Provenance unused;
  ReadContext ctx;
  ctx.preset_dir = preset_dir;
  read_keys(m, /*complete=*/true, speculative_keys(), o, unused, ctx);
  if (o.decoding.draft.vocab_size != target.vocab_size) {
    const Value& d = m.get("draft_model");
    fail(d.loc(), d.path,
         fmt::format("the draft's vocab_size {} differs from the target's {}; a draft must share "
                     "the target's tokenizer",
                     o.decoding.draft.vocab_size, target.vocab_size));
  }
  return o;
}

ServingOverhead read_serving(const Value& v) {
  const Mapping m(v, top_keys(serving_keys()));
  ServingOverhead o;
  Provenance unused;
  read_keys(m, /*complete=*/true, serving_keys(), o, unused, ReadContext{});
  return o;
}

std::string write_compare_with(const std::vector<models::gpu::ClusterSpec>& systems) {
  if (systems.empty()) return "[]";
  std::string o;
  for (const models::gpu::ClusterSpec& c : systems) {
    // An entry of the list: its first key after "- ".
    std::string entry = write_keys(gpu_keys(), c, "    ");
    o += "  - " + entry.substr(4);
  }
  return block(o);
}

}  // namespace wafersim::sim::schema
