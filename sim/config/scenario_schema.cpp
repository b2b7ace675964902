// The top level of a scenario as a schema table: name, hardware, model,
// precision, wafers and the sections, each read and written by its own table
// (sections.hpp). load_scenario() reads the table; emit_resolved() writes it.
#include "sim/config/preset_resolver.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using namespace yaml;

constexpr Need R = Need::required;
constexpr Need O = Need::optional;

void read_wafers(const Value& w, Scenario& s, const ReadContext&) {
  if (w.node.IsScalar() && w.node.Scalar() == "auto") {
    s.wafers_auto = true;
    return;
  }
  s.wafers = read_count(w, "4");
  if (s.wafers < 1 || s.wafers > 1024)
    fail(w.loc(), w.path, "must be between 1 and 1024, or auto (the fewest that fit)");
}

// A fixed split every GPU system can run: tp must divide the model's
// attention heads and fit one node of each system; pp at most one stage per
// layer. Otherwise every GPU row would be empty (0 GPUs, 0 tokens/s).
void check_gpu_parallelism(const Value& v, const Scenario& s) {
  const Mapping m(v, top_keys(gpu_parallelism_keys()));
  const models::ModelConfig& model = s.model;
  if (const Value* tp = m.find("tp"); tp != nullptr && s.gpu.tp != 0) {
    if (model.num_heads % s.gpu.tp != 0) {
      std::vector<std::string> valid;
      for (int d = 1; d <= model.num_heads && d <= 4096; ++d)
        if (model.num_heads % d == 0) valid.push_back(std::to_string(d));
      fail(tp->loc(), tp->path,
           fmt::format("tp {} does not divide the model's {} attention heads; valid: {} or auto",
                       s.gpu.tp, model.num_heads, join_list(valid)));
    }
    for (const models::gpu::ClusterSpec& c : s.gpu.systems) {
      if (s.gpu.tp > c.gpus_per_node)
        fail(tp->loc(), tp->path,
             fmt::format("tp {} is more than the {} GPUs of one {} node (scale_up.gpus); valid: "
                         "1 to {} or auto",
                         s.gpu.tp, c.gpus_per_node, c.name, c.gpus_per_node));
    }
  }
  if (const Value* pp = m.find("pp"); pp != nullptr && s.gpu.pp > model.num_layers) {
    fail(pp->loc(), pp->path,
         fmt::format("pp {} is more than the model's {} layers; valid: 1 to {} or auto", s.gpu.pp,
                     model.num_layers, model.num_layers));
  }
}

// Read by rank: name, hardware, model, precision and wafers, then the rest.
// The resolved scenario is written in that order too (emit_resolved); the
// table's order is that of the key list in messages and of the docs.
constexpr Key<Scenario> kScenario[] = {
    {"name", R, "non-empty string", "the scenario's name",
     [](auto& v, auto& s, auto&) { s.name = read_string(v, "a scenario name"); },
     [](auto& s) { return yaml_string(s.name); }, nullptr, -1},
    {"hardware", O, "preset, preset with overrides, or inline",
     "the wafer (required, but a serving study of GPU systems alone may leave it out)",
     [](auto& v, auto& s, auto& ctx) {
       s.hardware = resolve(hardware_kind(), v, ctx.preset_dir, s.hardware_preset);
     },
     [](auto& s) { return block(write_keys(hardware_keys(), s.hardware, "  ")); },
     [](auto& s) { return s.has_wafer(); }, -1},
    {"model", R, "preset, preset with overrides, inline, or a checkpoint", "the model",
     [](auto& v, auto& s, auto& ctx) {
       s.model = resolve(model_kind(), v, ctx.preset_dir, s.model_preset);
       s.model_checkpoint = model_checkpoint_folder(s.model_preset, v);
     },
     [](auto& s) { return block(write_keys(model_keys(), s.model, "  ")); }, nullptr, -1},
    {"weights", O, "{source, path, sha256}",
     "the checkpoint's weights or synthetic ones (functional runs)",
     [](auto& v, auto& s, auto&) { s.weights = read_weights(v, s.model_checkpoint); },
     [](auto& s) { return block(write_keys(weights_keys(), s.weights, "  ")); },
     [](auto& s) {
       return s.weights.source == WeightsOptions::Source::checkpoint || !s.model_checkpoint.empty();
     },
     -1, false, [](auto& s, auto&) { s.weights = default_weights(s.model_checkpoint); }},
    {"precision", O, "fp32 | fp16 | bf16 | fp8 | int8 (default bf16)",
     "storage precision of the weights",
     [](auto& v, auto& s, auto&) {
       s.precision = models::parse_dtype(
           read_choice(v, "precision", {"fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "int8"}));
     },
     [](auto& s) { return std::string(models::dtype_name(s.precision)); }, nullptr, -1},
    {"placement", O, "mapping", "the placement strategy and its parameters, or a file",
     [](auto& v, auto& s, auto&) { read_placement(v, s.placement); },
     [](auto& s) { return block(write_keys(placement_keys(), s.placement, "  ")); }},
    {"workload", O, "mapping",
     "what is decoded (required, but a serving study has traffic: instead)",
     [](auto& v, auto& s, auto&) {
       read_workload(v, s.model, checkpoint_files_folder(s.weights, s.model_checkpoint),
                     s.workload);
     },
     [](auto& s) { return block(write_keys(workload_keys(), s.workload, "  ")); },
     [](auto& s) { return !s.workload.prompt_ids.empty(); }},
    {"outputs", O, "mapping", "results file and functional or timing-only",
     [](auto& v, auto& s, auto&) { read_outputs(v, s.outputs); },
     [](auto& s) { return block(write_keys(outputs_keys(), s.outputs, "  ")); }},
    {"wafers", O, "count 1..1024 or auto (default 1)", "wafers in the pipeline", read_wafers,
     [](auto& s) { return s.wafers_auto ? std::string("auto") : fmt::format("{}", s.wafers); },
     nullptr, -1},
    {"compare_with", O, "list of GPU systems (default [dgx-h100, dgx-b200])",
     "GPU systems the report puts beside the wafer",
     [](auto& v, auto& s, auto& ctx) { s.gpu.systems = read_compare_with(v, ctx.preset_dir); },
     [](auto& s) { return write_compare_with(s.gpu.systems); }, nullptr, 0, false,
     [](auto& s, auto& ctx) { s.gpu.systems = default_gpu_systems(ctx.preset_dir); }},
    {"gpu_parallelism", O, "{tp, pp}", "fixes the tensor/pipeline split of every GPU system",
     [](auto& v, auto& s, auto&) {
       read_gpu_parallelism(v, s.gpu);
       check_gpu_parallelism(v, s);
     },
     [](auto& s) { return block(write_keys(gpu_parallelism_keys(), s.gpu, "  ")); }},
    {"speculative_decoding", O, "{draft_model, draft_tokens, acceptance_rate}",
     "speculative decoding on the wafer and the GPUs",
     [](auto& v, auto& s, auto& ctx) {
       if (s.workload.decode_batch > 1)
         fail(v.key_loc(), v.path,
              "cannot run with workload.decode_batch > 1 (a speculative round verifies one "
              "user's tokens); remove one of them");
       s.speculative = read_speculative(v, ctx.preset_dir, s.model);
     },
     [](auto& s) { return block(write_keys(speculative_keys(), *s.speculative, "  ")); },
     [](auto& s) { return s.speculative.has_value(); }},
    {"serving", O, "{round_trip, per_token_overhead, connection_setup}",
     "user-seen figures through a serving stack",
     [](auto& v, auto& s, auto&) { s.serving = read_serving(v); },
     [](auto& s) { return block(write_keys(serving_keys(), *s.serving, "  ")); },
     [](auto& s) { return s.serving.has_value(); }},
    {"traffic", O, "{arrivals, requests, ...}, {trace} or {sessions, turns, ...}",
     "the requests of a serving study: open-loop arrivals, a trace file or closed-loop sessions",
     [](auto& v, auto& s, auto&) { s.traffic = read_traffic(v); },
     [](auto& s) { return block(write_keys(traffic_keys(), *s.traffic, "  ")); },
     [](auto& s) { return s.traffic.has_value(); }},
    {"deployment", O, "mapping", "serving: replicas, batching, prefill policy, routing",
     [](auto& v, auto& s, auto&) {
       if (!s.traffic) fail(v.key_loc(), v.path, "is for serving studies: give traffic: too");
       s.deployment = read_deployment(v);
     },
     [](auto& s) { return block(write_keys(deployment_keys(), s.deployment, "  ")); },
     [](auto& s) { return s.traffic.has_value(); }, 1},
    {"slo", O, "{ttft, ttft_percentile, tokens_per_s, tokens_per_s_percentile}",
     "serving: the service-level objectives",
     [](auto& v, auto& s, auto&) {
       if (!s.traffic) fail(v.key_loc(), v.path, "is for serving studies: give traffic: too");
       s.slo = read_slo(v);
     },
     [](auto& s) { return block(write_keys(slo_keys(), s.slo, "  ")); },
     [](auto& s) { return s.slo.any(); }, 1},
};

}  // namespace

std::span<const Key<Scenario>> scenario_keys() {
  return kScenario;
}

// The resolved scenario: presets expanded, defaults filled, every key written
// by its row, in reading order, as YAML that load_scenario() reads back to an
// equal Scenario.
std::string emit_resolved(const Scenario& s) {
  std::string o;
  o += "# Fully resolved scenario written by wafersim: presets expanded, defaults filled.\n";
  o += "# Loading this file reproduces the run.\n";
  o += fmt::format("# Source: {} (hardware preset: {}, model preset: {})\n",
                   one_line(s.source_file), s.hardware_preset, s.model_preset);
  const std::span<const Key<Scenario>> keys = scenario_keys();
  for (const std::size_t i : reading_order(keys)) o += write_keys(keys.subspan(i, 1), s, "");
  return o;
}

}  // namespace wafersim::sim::schema
