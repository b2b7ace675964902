// wafersim run: simulate a scenario and report (terminal, JSON, HDF5).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "analysis/hdf5_output.hpp"
#include "analysis/html_report.hpp"
#include "analysis/json_output.hpp"
#include "analysis/metrics.hpp"
#include "analysis/output_file.hpp"
#include "analysis/report.hpp"
#include "analysis/trace_output.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/engine.hpp"
#include "sim/studies/baselines.hpp"
#include "sim/studies/placement_report.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace {

struct RunArgs {
  std::string scenario, out, report;
  bool json = false, functional = false, timing_only = false;
  ScenarioOverrideOptions overrides;
  int threads = 0;
  bool keep_link_records = false;
  std::string layer_replay = "auto";
  std::string trace;  // --trace FILE: Chrome trace-event JSON of the run
};

// The tokens back, with the fraction and the time left from the stage
// passes (a token can take seconds on the wafer: 1 group, several in flight).
void show_progress(const RunProgress& p) {
  show_progress_bar("simulating tokens", p.passes_done, p.passes_total, "",
                    fmt::format("{}/{} tokens", p.tokens_done, p.tokens_total));
}
void show_weights_progress(int done, int total) {
  show_progress_bar("making synthetic weights", done, total);
}
void show_checkpoint_progress(int done, int total) {
  show_progress_bar("reading checkpoint weights", done, total);
}

int run(const RunArgs& a, const std::filesystem::path& presets) {
  const Scenario sc = load_scenario_with(a.scenario, presets, a.overrides);
  check_single_batch(sc, "run");
  if (!a.report.empty()) analysis::check_writable(a.report);  // before minutes of simulating
  // Where the results go is checked now, not after the simulation.
  const std::string results = a.out.empty() ? sc.outputs.results.value_or("") : a.out;
  if (!results.empty()) {
    analysis::check_writable(results);
    analysis::check_writable(results + ".scenario.yaml");
  }
  std::optional<bool> functional_flag;
  if (a.functional) functional_flag = true;
  if (a.timing_only) functional_flag = false;
  RunOptions options;
  options.functional = functional_flag.value_or(sc.outputs.functional);
  options.progress = show_progress;
  options.weights_progress = sc.weights.source == WeightsOptions::Source::checkpoint
                                 ? show_checkpoint_progress
                                 : show_weights_progress;
  options.placement_progress = show_placement_progress;
  options.search_progress = show_search_progress;
  options.threads = a.threads;
  options.recycle_link_records = !a.keep_link_records;
  options.layer_replay = layer_replay_mode(a.layer_replay);
  HostTimes host;
  options.host_times = &host;
  analysis::RunTrace trace;
  if (!a.trace.empty()) {
    analysis::check_trace_path(a.trace);  // before simulating, not after
    options.trace = &trace;
  }
  analysis::RunResult result = run_scenario(sc, options);
  if (host.replayed_layer_passes > 0)
    std::cerr << "replayed " << host.replayed_layer_passes
              << " layer passes as shifted copies of the layer simulated before them "
                 "(exact; --layer-replay off simulates each)\n";
  if (host.pipeline_replayed_layer_passes > 0)
    std::cerr << "replayed " << host.pipeline_replayed_layer_passes
              << " layer passes of messages in flight together, where the whole pipeline "
                 "repeated the layer before (exact; --layer-replay off simulates each)\n";
  if (host.crowded_layer_passes > host.pipeline_replayed_layer_passes)
    std::cerr << "layer replay passed over "
              << host.crowded_layer_passes - host.pipeline_replayed_layer_passes
              << " layer passes, each simulated, because other messages were on the wafer at "
                 "the same time (users pipelined, or a prompt in several blocks); a decode batch "
                 "of every user (workload.decode_batch, and batch_prompts: true for the "
                 "prompts) goes through alone\n";
  if (const std::uint64_t works = host.works_on_two_threads + host.works_on_one_thread; works > 0)
    std::cerr << "host threads: " << host.works_on_two_threads << " of " << works
              << " GEMVs and attention blocks timed on two threads, the rest on one (whichever "
                 "the host times measured faster; the results are the same)\n";
  const analysis::Metrics metrics = analysis::compute_metrics(result);
  result.baselines = compare_with_gpus(sc, result, metrics);  // wafer beside GPU clusters
  if (!results.empty()) {
    analysis::write_hdf5(results, result, metrics);
    // The resolved scenario next to the results reproduces the run.
    write_text_atomically(results + ".scenario.yaml", sc.resolved_yaml);
    report_written(results, "results");
    report_written(results + ".scenario.yaml", "the resolved scenario, which reproduces the run");
  }
  if (!a.report.empty()) {
    const analysis::PlacementPicture picture = run_placement_picture(sc, result);
    analysis::write_text_atomically(a.report, analysis::run_report_html(result, metrics, &picture));
    report_written(a.report, "the HTML report");
  }
  if (!a.trace.empty()) {
    analysis::write_trace(a.trace, trace, result);
    report_written(a.trace,
                   trace.truncated() ? "the trace, truncated: see its otherData" : "the trace");
  }
  if (a.json) {
    std::cout << analysis::to_json_text(result, metrics);
  } else {
    analysis::write_report(std::cout, result, metrics);
  }
  if (options.functional && sc.placement.fabric_bits != 32) {
    // The wafer's activations are 16-bit, the reference's fp32: a
    // difference is a result, not a fault.
    std::cerr << "16-bit values on the fabric: the reference forward pass is fp32, so its tokens "
                 "may differ (tokens match reference: "
              << (metrics.tokens_match_reference ? "yes" : "no")
              << fmt::format("; max logit error {:.3g})\n", result.max_logit_abs_error);
  } else if (options.functional && result.tokens != result.reference_tokens) {
    throw CommandError(kExitInternal, "simulated tokens differ from the reference forward pass");
  }
  return kExitSuccess;
}

}  // namespace

RegisteredCommand add_run_command(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* run_cmd = app.add_subcommand("run", "Simulate a scenario and report");
  run_cmd->add_option("scenario", a->scenario, "Scenario YAML file")->required();
  run_cmd->add_flag("--json", a->json, "Print one JSON object to stdout instead of the report");
  run_cmd->add_option("--out", a->out,
                      "Write results to this HDF5 file (and the resolved scenario beside it)");
  run_cmd->add_option("--report", a->report,
                      "Write a self-contained HTML report (figures, critical path, per-token "
                      "latency, GPU comparison, placement pictures)");
  auto* f_opt = run_cmd->add_flag("--functional", a->functional,
                                  "Compute real numbers and compare with the reference");
  auto* t_opt =
      run_cmd->add_flag("--timing-only", a->timing_only, "Timing only: skip the arithmetic");
  f_opt->excludes(t_opt);
  add_scenario_override_options(run_cmd, a->overrides);
  run_cmd
      ->add_option("--threads", a->threads,
                   "Host threads (0: all the host has): from 2 on, functional runs compute "
                   "their numbers on a second thread behind the timing (GEMV helpers from 3 on), "
                   "timing-only runs time each GEMV on two, and the link records are faulted in "
                   "ahead; results do not depend on it")
      ->check(CLI::NonNegativeNumber);
  run_cmd->add_flag("--keep-link-records", a->keep_link_records,
                    "Keep every wafer's link records for the whole run instead of reusing those of "
                    "wafers a token has left (more memory; the same results)");
  add_layer_replay_option(run_cmd, a->layer_replay);
  run_cmd
      ->add_option("--trace", a->trace,
                   "Write a Chrome trace-event JSON of the run to this file (open it in "
                   "Perfetto or chrome://tracing): a track per pipeline stage, its phases, "
                   "messages between stages, link and SRAM counters")
      ->type_name("FILE");
  const CLI::App* root = &app;
  return {run_cmd, [a, root] { return run(*a, preset_dir(*root)); }, [a] { return a->scenario; }};
}

}  // namespace wafersim::sim
