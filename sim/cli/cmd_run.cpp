// wafersim run: simulate a scenario and report (terminal, JSON, HDF5).
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "analysis/hdf5_output.hpp"
#include "analysis/json_output.hpp"
#include "analysis/metrics.hpp"
#include "analysis/output_file.hpp"
#include "analysis/report.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/engine.hpp"
#include "sim/studies/baselines.hpp"
#include "sim/studies/subprocess.hpp"

namespace wafersim::sim {

namespace {

struct RunArgs {
  std::string scenario, out;
  bool json = false, functional = false, timing_only = false;
  ScenarioOverrides overrides;
  std::vector<std::string> set;  // KEY=VALUE
  int threads = 0;
  bool keep_link_records = false;
};

void show_progress(int done, int total) {
  show_progress_bar("simulating tokens", done, total);
}
void show_weights_progress(int done, int total) {
  show_progress_bar("making synthetic weights", done, total);
}
void show_checkpoint_progress(int done, int total) {
  show_progress_bar("reading checkpoint weights", done, total);
}

int run(const RunArgs& a, const std::filesystem::path& presets) {
  ScenarioOverrides overrides = a.overrides;
  overrides.set = parse_set_options(a.set);
  const Scenario sc = load_scenario(a.scenario, presets, overrides);
  check_single_batch(sc, "run");
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
  options.threads = a.threads;
  options.recycle_link_records = !a.keep_link_records;
  analysis::RunResult result = run_scenario(sc, options);
  const analysis::Metrics metrics = analysis::compute_metrics(result);
  result.baselines = compare_with_gpus(sc, result, metrics);  // wafer beside GPU clusters
  if (!results.empty()) {
    analysis::write_hdf5(results, result, metrics);
    // The resolved scenario next to the results reproduces the run.
    write_text_atomically(results + ".scenario.yaml", sc.resolved_yaml);
  }
  if (a.json) {
    std::cout << analysis::to_json_text(result, metrics);
  } else {
    analysis::write_report(std::cout, result, metrics);
    if (!results.empty())
      std::cout << "results: " << results << " (scenario: " << results << ".scenario.yaml)\n";
  }
  if (options.functional && result.tokens != result.reference_tokens)
    throw CommandError(kExitInternal, "simulated tokens differ from the reference forward pass");
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
  auto* f_opt = run_cmd->add_flag("--functional", a->functional,
                                  "Compute real numbers and compare with the reference");
  auto* t_opt =
      run_cmd->add_flag("--timing-only", a->timing_only, "Timing only: skip the arithmetic");
  f_opt->excludes(t_opt);
  run_cmd->add_option("--hardware", a->overrides.hardware,
                      "Override the scenario's hardware preset");
  run_cmd->add_option("--model", a->overrides.model, "Override the scenario's model preset");
  run_cmd->add_option("--precision", a->overrides.precision,
                      "Override the precision (fp32, fp16, bf16, ...)");
  run_cmd->add_option("--wafers", a->overrides.wafers,
                      "Wafers in the pipeline: N or auto (the fewest that fit)");
  run_cmd->add_option("--users", a->overrides.users, "Sequences decoded at once (workload.users)");
  run_cmd->add_option("--layer-groups", a->overrides.layer_groups,
                      "whole-region: groups of layers, each sharing one region "
                      "(placement.layer_groups)");
  run_cmd->add_option(
      "--placement", a->overrides.placement_file,
      "Use this placement file (wafersim place --write-placement) instead of the strategy");
  run_cmd
      ->add_option("--set", a->set,
                   "KEY=VALUE: set any scenario key by its dotted path, the value as YAML "
                   "(e.g. workload.cached_tokens=2048; KEY=null removes the key); repeatable")
      ->type_name("KEY=VALUE");
  run_cmd
      ->add_option("--threads", a->threads,
                   "Host threads (0: all the host has): from 2 on, functional runs compute "
                   "their numbers on a second thread behind the timing (GEMV helpers from 3 on) "
                   "and the link records are faulted in ahead; results do not depend on it")
      ->check(CLI::NonNegativeNumber);
  run_cmd->add_flag("--keep-link-records", a->keep_link_records,
                    "Keep every wafer's link records for the whole run instead of reusing those of "
                    "wafers a token has left (more memory; the same results)");
  const CLI::App* root = &app;
  return {run_cmd, [a, root] { return run(*a, preset_dir(*root)); }, [a] { return a->scenario; }};
}

}  // namespace wafersim::sim
