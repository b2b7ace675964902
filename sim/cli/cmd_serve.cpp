// wafersim serve: a serving study (traffic through the wafer deployment and
// the GPU systems). wafersim capacity: the request rate one replica of each
// sustains within the SLO, and the replicas a target rate needs.
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "analysis/html_report.hpp"
#include "analysis/output_file.hpp"
#include "analysis/serving_output.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/serving_study.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace {

struct ServeArgs {
  std::string scenario, out, csv, cache, report;
  ScenarioOverrideOptions overrides;
  bool json = false, no_cache = false;
  int jobs = 0;
  double target_rate = 0.0;  // capacity
};

Scenario load(const ServeArgs& a, const std::filesystem::path& presets) {
  Scenario sc = load_scenario_with(a.scenario, presets, a.overrides);
  if (!sc.traffic)
    throw ScenarioError(a.scenario, 0, 0, "traffic",
                        "this scenario has no traffic: section; a serving study needs one (open-"
                        "loop arrivals, a trace or closed-loop sessions; docs/scenario-schema.md, "
                        "\"Traffic\"); `wafersim run` simulates its workload: as one batch");
  // Where the results go is checked now, not after the study.
  if (const std::string out = a.out.empty() ? sc.outputs.results.value_or("") : a.out;
      !out.empty()) {
    analysis::check_writable(out);
    analysis::check_writable(out + ".scenario.yaml");
  }
  if (!a.csv.empty()) analysis::check_writable(a.csv);
  return sc;
}

CalibrationOptions calibration_options(const ServeArgs& a, const std::filesystem::path& presets) {
  CalibrationOptions c = self_calibration(a.scenario, presets, a.jobs,
                                          a.no_cache        ? std::filesystem::path()
                                          : a.cache.empty() ? default_cache_dir()
                                                            : std::filesystem::path(a.cache));
  // The calibration runs see the keys this study's overrides changed.
  c.extra_sets = a.overrides.as_sets();
  return c;
}

void progress(const std::string& what, long long done, long long total) {
  show_progress_bar(what, done, total);
}

// The runs done of all, with the share done and the time left from their
// estimated work (the grid's runs differ in cost by 100x and more).
void calibration_progress(const CalibrationProgress& p) {
  show_progress_bar("calibrating wafer step times", p.work_done, p.work_total, "",
                    fmt::format("{}/{} runs", p.runs_done, p.runs_total));
}

std::string traffic_line(const Scenario& sc, const TrafficSummary& t) {
  const serving::TrafficSpec& s = *sc.traffic;
  std::string kind;
  switch (s.kind) {
    case serving::TrafficSpec::Kind::open:
      kind = fmt::format("{} requests arriving at {:.3g}/s ({})", t.requests,
                         1.0 / s.interarrival.mean_s,
                         s.interarrival.kind == serving::IntervalDistribution::Kind::gamma
                             ? fmt::format("gamma, cv {}", s.interarrival.cv)
                         : s.interarrival.kind == serving::IntervalDistribution::Kind::fixed
                             ? std::string("evenly spaced")
                             : std::string("Poisson"));
      break;
    case serving::TrafficSpec::Kind::trace:
      kind = fmt::format("trace {} ({} requests in {} sessions over {:.1f} s)", s.trace_file,
                         t.requests, t.sessions, t.duration_s);
      break;
    case serving::TrafficSpec::Kind::sessions:
      kind = fmt::format("{} closed-loop sessions, {} turns in all", t.sessions, t.requests);
      break;
  }
  return fmt::format(
      "{}; prompt {:.0f} tokens mean ({:.0f} new), output {:.0f} mean, longest "
      "context {}",
      kind, t.mean_prompt_tokens, t.mean_new_prompt_tokens, t.mean_output_tokens, t.max_context);
}

std::string slo_line(const serving::Slo& s) {
  if (!s.any()) return "";
  std::string o;
  if (s.ttft_s > 0.0) o += fmt::format("TTFT p{:g} <= {:g} ms", s.ttft_percentile, s.ttft_s * 1e3);
  if (s.tokens_per_s > 0.0)
    o += fmt::format("{}{:g}% of requests >= {:g} tokens/s per user", o.empty() ? "" : ", ",
                     s.tokens_per_s_percentile, s.tokens_per_s);
  return o;
}

std::string calibration_line(const Calibration& c) {
  return fmt::format(
      "step grid of {} decode + {} prefill engine runs ({} batch sizes x {} contexts; prompts "
      "of {}..{} tokens, up to {} at once), batch {}, {} positions per sequence, {} wafer{} "
      "per pipeline; {}",
      c.decode.size(), c.prefill.size(), c.plan.users.size(), c.plan.contexts.size(),
      c.plan.prefill_tokens.front(), measured_prompt_lengths(c.plan).back(),
      c.plan.stream_users.empty() ? 1 : c.plan.stream_users.back(), c.plan.max_batch,
      c.plan.slot_tokens, c.plan.wafers, c.plan.wafers == 1 ? "" : "s",
      c.cache_file.empty()
          ? std::string("not cached")
          : fmt::format("{} {}", c.from_cache ? "read from" : "cached in", c.cache_file.string()));
}

// What a serving study or a capacity search was run on, as their outputs say it.
analysis::ServingHeader serving_header(const Scenario& sc, const TrafficSummary& traffic,
                                       const std::optional<Calibration>& calibration) {
  analysis::ServingHeader h;
  h.scenario = sc.name;
  h.model = fmt::format("{} at {}", sc.model.name, models::dtype_name(sc.precision));
  h.traffic = traffic_line(sc, traffic);
  h.slo = slo_line(sc.slo);
  if (calibration) h.calibration = calibration_line(*calibration);
  return h;
}

int serve(const ServeArgs& a, const std::filesystem::path& presets) {
  const Scenario sc = load(a, presets);
  if (!a.report.empty()) analysis::check_writable(a.report);  // before the study
  ServingStudyOptions o;
  o.calibration = calibration_options(a, presets);
  o.calibration.progress = calibration_progress;
  o.progress = progress;
  const ServingStudy study = run_serving_study(sc, o);
  const analysis::ServingHeader h = serving_header(sc, study.traffic, study.calibration);
  const std::string results = a.out.empty() ? sc.outputs.results.value_or("") : a.out;
  if (!results.empty()) {
    analysis::write_serving_hdf5(results, h, study.results, sc.resolved_yaml);
    write_text_atomically(results + ".scenario.yaml", sc.resolved_yaml);
  }
  if (!results.empty()) {
    report_written(results, "results");
    report_written(results + ".scenario.yaml", "the resolved scenario");
  }
  if (!a.csv.empty()) {
    analysis::write_requests_csv(a.csv, study.results);
    report_written(a.csv, "every request of every system");
  }
  if (!a.report.empty()) {
    analysis::write_text_atomically(a.report, analysis::serving_report_html(h, study.results));
    report_written(a.report, "the HTML report");
  }
  if (a.json) {
    std::cout << analysis::serving_json(h, study.results).dump(1) << "\n";
  } else {
    analysis::write_serving_report(std::cout, h, study.results);
  }
  return kExitSuccess;
}

int capacity(const ServeArgs& a, const std::filesystem::path& presets) {
  Scenario sc = load(a, presets);
  if (!sc.slo.any())
    throw ScenarioError(a.scenario, 0, 0, "slo",
                        "capacity needs service-level objectives: give slo: {ttft: 2 s, "
                        "tokens_per_s: 100} in the scenario (or --set slo=...)");
  if (!a.report.empty()) analysis::check_writable(a.report);  // before the search
  const TrafficSummary traffic = summarise_traffic(serving::generate_sessions(*sc.traffic));
  std::optional<Calibration> cal;
  if (sc.has_wafer()) {
    const CalibrationPlan plan = plan_calibration(sc, traffic.max_context, traffic.max_prompt);
    CalibrationOptions co = calibration_options(a, presets);
    co.progress = calibration_progress;
    cal = calibrate(sc, plan, co);
  }
  CapacityOptions o;
  o.target_rate = a.target_rate;
  o.progress = progress;
  const std::vector<CapacityRow> rows = capacity_search(sc, cal, o);
  analysis::CapacityHeader h;
  h.serving = serving_header(sc, traffic, cal);
  h.closed_loop = sc.traffic->kind == serving::TrafficSpec::Kind::sessions;
  h.target_rate = a.target_rate;
  h.slo_ttft_s = sc.slo.ttft_s;
  h.slo_ttft_percentile = sc.slo.ttft_percentile;
  h.slo_tokens_per_s = sc.slo.tokens_per_s;
  h.slo_tokens_per_s_percentile = sc.slo.tokens_per_s_percentile;
  if (!a.report.empty()) {
    analysis::write_text_atomically(a.report, analysis::capacity_report_html(h, rows));
    report_written(a.report, "the HTML report");
  }
  if (a.json) {
    std::cout << analysis::capacity_json(h, rows).dump(1) << "\n";
  } else {
    analysis::write_capacity_report(std::cout, h, rows);
  }
  return kExitSuccess;
}

void add_common(CLI::App* c, ServeArgs& a) {
  c->add_option("scenario", a.scenario, "Scenario YAML file with traffic:")->required();
  add_scenario_override_options(c, a.overrides);
  c->add_option("-j,--jobs", a.jobs, "Calibration runs at once (default: the host's cores)");
  c->add_option("--cache", a.cache,
                "Folder of cached step grids (default $WAFERSIM_CACHE or ~/.cache/wafersim)");
  c->add_flag("--no-cache", a.no_cache, "Measure the wafer's step grid again, cache nothing");
}

}  // namespace

RegisteredCommand add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand(
      "serve", "Serve a scenario's traffic on the wafer deployment and the GPU systems");
  add_common(c, *a);
  c->add_flag("--json", a->json, "Print one JSON object instead of the report");
  c->add_option("--out", a->out, "Write results to this HDF5 file (and the resolved scenario)");
  c->add_option("--csv", a->csv, "Write every request of every system to this CSV file");
  c->add_option("--report", a->report,
                "Write a self-contained HTML report (TTFT/TPOT CDFs, SLO attainment, queue)");
  const CLI::App* root = &app;
  return {c, [a, root] { return serve(*a, preset_dir(*root)); }, [a] { return a->scenario; }};
}

RegisteredCommand add_capacity_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand(
      "capacity",
      "Highest request rate one replica sustains within the SLO, and replicas for a target rate");
  add_common(c, *a);
  c->add_option("--target-rate", a->target_rate,
                "Requests/s the deployment must serve (closed-loop traffic: sessions at once)")
      ->check(CLI::PositiveNumber);
  c->add_flag("--json", a->json, "Print one JSON object instead of the table");
  c->add_option("--report", a->report,
                "Write a self-contained HTML report (capacity per system, every load simulated "
                "against the SLO, the serving plots at the highest load sustained)");
  const CLI::App* root = &app;
  return {c, [a, root] { return capacity(*a, preset_dir(*root)); }, [a] { return a->scenario; }};
}

}  // namespace wafersim::sim
