#include "analysis/json_output.hpp"

#include <span>

#include "analysis/figures.hpp"
#include "analysis/system_figures.hpp"

namespace wafersim::analysis {

namespace {

using Json = nlohmann::ordered_json;

// Each figure under its name: a count as an unsigned integer, a real number
// as a double, a flag as true/false.
void add_figures(Json& j, std::span<const Figure* const> figures, const RunResult& r,
                 const Metrics& m) {
  for (const Figure* f : figures)
    std::visit([&](auto v) { j[std::string(f->name)] = v; }, f->value(r, m));
}

Json breakdown_json(const CycleBreakdown& b) {
  Json j = Json::object();
  for (Resource c : kPathCategories) j[std::string(category_key(c))] = cycles_in(b, c).value;
  return j;
}

Json token_record_json(const TokenRecord& t) {
  Json j = Json::object();
  j["user"] = t.user;
  j["position"] = t.position;
  j["prefill"] = t.prefill;
  j["start_cycle"] = t.start_cycle.value;
  j["end_cycle"] = t.end_cycle.value;
  j["token_in"] = t.token_in;
  j["critical_path_cycles"] = breakdown_json(t.critical_path);
  return j;
}

Json end_to_end_json(const std::optional<EndToEndFigures>& e) {
  if (!e) return nullptr;
  return Json{{"decode_tokens_per_s_per_user", e->decode_tokens_per_s_per_user},
              {"ttft_s", e->ttft_s}};
}

// One row of the wafer-vs-GPU comparison: its figures
// (analysis/system_figures.hpp), then the end-to-end objects.
Json system_json(const SystemFigures& f, std::span<const SystemFigure* const> figures) {
  Json j = Json::object();
  for (const SystemFigure* s : figures) {
    if (s->unknown_without_power && !(f.power_kw > 0.0)) {
      j[std::string(s->name)] = nullptr;
      continue;
    }
    std::visit([&](auto v) { j[std::string(s->name)] = std::move(v); }, s->value(f));
  }
  if (f.end_to_end) j["end_to_end"] = end_to_end_json(f.end_to_end);
  if (f.end_to_end_persistent)
    j["end_to_end_persistent"] = end_to_end_json(f.end_to_end_persistent);
  return j;
}

void add_baselines(Json& j, const Baselines& b) {
  j["wafer_system"] = system_json(b.wafer, kJsonWaferSystem);
  Json rows = Json::array();
  for (const SystemFigures& g : b.gpus) rows.push_back(system_json(g, kJsonGpuSystem));
  j["gpu_baselines"] = std::move(rows);
  if (b.speculative) {
    const SpeculativeSummary& s = *b.speculative;
    j["speculative_decoding"] =
        Json{{"draft_model", s.draft_model},
             {"draft_tokens", s.draft_tokens},
             {"acceptance_rate", s.acceptance_rate},
             {"expected_tokens_per_step", s.expected_tokens_per_step},
             {"wafer_draft_wafers", s.wafer_draft_wafers},
             {"wafer_acceptance", s.wafer_accepted_by_comparison ? "compared" : "drawn"},
             {"wafer_acceptance_rate", s.wafer_acceptance},
             {"wafer_tokens_per_round", s.wafer_tokens_per_round},
             {"wafer_draft_step_s", s.wafer_draft_step_s},
             {"wafer_verify_s", s.wafer_verify_s}};
  }
  if (b.serving) {
    j["serving"] = Json{{"round_trip_s", b.serving->round_trip_s},
                        {"per_token_overhead_s", b.serving->per_token_overhead_s},
                        {"connection_setup_s", b.serving->connection_setup_s}};
  }
}

// Where a run's weights came from (RunResult::weights).
Json weights_json(const WeightsProvenance& w) {
  Json weights = {{"source", w.source}};
  if (w.source == "checkpoint") {
    weights["path"] = w.path;
    weights["sha256"] = w.sha256;
    Json files = Json::array();
    for (const auto& f : w.files)
      files.push_back({{"name", f.name}, {"sha256", f.sha256}, {"bytes", f.bytes}});
    weights["files"] = std::move(files);
  } else if (w.source == "synthetic") {
    weights["seed"] = w.seed;
  }
  return weights;
}

}  // namespace

nlohmann::ordered_json to_json(const RunResult& r, const Metrics& m) {
  Json j = Json::object();
  j["format"] = "wafersim-result";
  j["format_version"] = kJsonFormatVersion;

  // Identification.
  j["scenario"] = r.scenario_name;
  j["scenario_file"] = r.scenario_file;
  j["hardware"] = r.hardware_name;
  j["model"] = r.model_name;
  j["precision"] = r.precision;
  j["placement_strategy"] = r.placement_strategy;
  if (r.layer_group_choice) j["layer_groups_auto"] = layer_group_choice_json(*r.layer_group_choice);
  if (!r.reduction_choices.empty())
    j["reduction_auto"] = reduction_choices_json(r.reduction_choices);
  j["seed"] = r.seed;
  j["functional"] = r.functional;
  j["weights"] = weights_json(r.weights);
  if (r.draft_weights) j["draft_weights"] = weights_json(*r.draft_weights);

  // The mesh, then the figures (analysis/figures.hpp): hardware, fit,
  // performance, timeline, utilisation.
  j["mesh_width"] = r.mesh_width;
  j["mesh_height"] = r.mesh_height;
  j["wafers_used"] = r.wafers;
  add_figures(j, kJsonFigures, r, m);
  if (m.busiest_link) {
    const BusiestLink& l = *m.busiest_link;
    j["busiest_link"] = Json{{"wafer", l.wafer},
                             {"x", l.x},
                             {"y", l.y},
                             {"dir", std::string(direction_name(l.dir))},
                             {"bytes", l.bytes.value},
                             {"load", l.load}};
  } else {
    j["busiest_link"] = nullptr;
  }
  add_figures(j, kJsonLinkFigures, r, m);

  // What limits it.
  j["bottleneck"] = m.bottleneck;
  j["critical_path_basis"] = m.critical_path_basis;
  j["critical_path_tokens"] = m.critical_path_tokens;
  j["critical_path_cycles"] = breakdown_json(m.critical_path);
  Json share = Json::object();
  for (std::size_t i = 0; i < kPathCategoryCount; ++i) {
    share[std::string(category_key(kPathCategories[i]))] = m.critical_path_share[i];
  }
  j["critical_path_share"] = share;

  // Tokens.
  j["prompt_ids"] = r.prompt_ids;
  if (!r.prompt_text.empty()) j["prompt_text"] = r.prompt_text;
  if (r.functional) {
    j["tokens"] = r.tokens;
    if (!r.generated_text.empty()) j["generated_text"] = r.generated_text;
    j["reference_tokens"] = r.reference_tokens;
    add_figures(j, kJsonFunctionalFigures, r, m);
  }
  Json records = Json::array();
  for (const TokenRecord& t : r.token_records) records.push_back(token_record_json(t));
  j["token_records"] = std::move(records);
  if (r.baselines) add_baselines(j, *r.baselines);
  return j;
}

std::string to_json_text(const RunResult& result, const Metrics& metrics) {
  // Replace invalid UTF-8 (a mangled scenario name) rather than fail the run's output.
  return to_json(result, metrics).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

}  // namespace wafersim::analysis
