// wafersim: the command-line front end. Library code throws typed errors;
// only this file turns them into messages and exit codes:
//   0 success, 1 bad input (scenario, fit, output), 2 usage, 3 internal error.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "analysis/compare.hpp"
#include "analysis/hdf5_output.hpp"
#include "analysis/json_output.hpp"
#include "analysis/metrics.hpp"
#include "analysis/report.hpp"
#include "fabric/sram.hpp"
#include "sim/studies/baselines.hpp"
#include "sim/cli/commands.hpp"
#include "sim/engine/engine.hpp"
#include "sim/placement/placement.hpp"
#include "sim/studies/placement_report.hpp"
#include "sim/config/presets.hpp"
#include "sim/program/program.hpp"
#include "sim/studies/regression.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/subprocess.hpp"

namespace {

using namespace wafersim;

std::filesystem::path preset_dir(const std::string& flag) {
  return flag.empty() ? sim::default_preset_dir() : std::filesystem::path(flag);
}

void show_progress(int done, int total) {
  sim::show_progress_bar("simulating tokens", done, total);
}
void show_placement_progress(int wafers, int wafer) {
  sim::show_progress_bar(fmt::format("placing on {} wafer{}", wafers, wafers == 1 ? "" : "s"),
                         wafer, wafers);
}
void show_weights_progress(int done, int total) {
  sim::show_progress_bar("making synthetic weights", done, total);
}

int cmd_run(const std::string& file, const std::string& presets, bool json, const std::string& out,
            std::optional<bool> functional_flag, const sim::ScenarioOverrides& overrides,
            int threads, bool keep_link_records) {
  const sim::Scenario sc = sim::load_scenario(file, preset_dir(presets), overrides);
  sim::RunOptions options;
  options.functional = functional_flag.value_or(sc.outputs.functional);
  options.progress = show_progress;
  options.weights_progress = show_weights_progress;
  options.placement_progress = show_placement_progress;
  options.threads = threads;
  options.recycle_link_records = !keep_link_records;
  analysis::RunResult result = sim::run_scenario(sc, options);
  const analysis::Metrics metrics = analysis::compute_metrics(result);
  result.baselines = sim::compare_with_gpus(sc, result, metrics);  // wafer beside GPU clusters
  const std::string results = out.empty() ? sc.outputs.results.value_or("") : out;
  if (!results.empty()) {
    analysis::write_hdf5(results, result, metrics);
    // The resolved scenario next to the results reproduces the run.
    sim::write_text_atomically(results + ".scenario.yaml", sc.resolved_yaml);
  }
  if (json) {
    std::cout << analysis::to_json_text(result, metrics);
  } else {
    analysis::write_report(std::cout, result, metrics);
    if (!results.empty())
      std::cout << "results: " << results << " (scenario: " << results << ".scenario.yaml)\n";
  }
  if (options.functional && result.tokens != result.reference_tokens) {
    std::cerr << "wafersim: error: simulated tokens differ from the reference forward pass\n";
    return 3;
  }
  return 0;
}

int cmd_validate(const std::string& file, const std::string& presets) {
  const sim::Scenario sc = sim::load_scenario(file, preset_dir(presets));
  sim::check_wafer_supports(sc.model);
  fmt::print("{}: ok: {} on {} ({}x{} cores), {}, {} prompt + {} generated tokens, seed {}\n", file,
             sc.model.name, sc.hardware.name, sc.hardware.mesh_width, sc.hardware.mesh_height,
             models::dtype_name(sc.precision), sc.workload.prompt_ids.size(),
             sc.workload.generate_tokens, sc.workload.seed);
  return 0;
}

// Exit code when a compared figure got worse by more than the threshold.
constexpr int kExitRegression = 4;

int cmd_compare(const std::string& a, const std::string& b, bool json, double fail_percent) {
  const analysis::Comparison c =
      analysis::compare(analysis::read_hdf5(a), analysis::read_hdf5(b), a, b);
  if (json)
    std::cout << analysis::comparison_json(c, fail_percent).dump(2) << "\n";
  else
    analysis::write_comparison(std::cout, c, fail_percent);
  return fail_percent >= 0 && !c.regressions(fail_percent).empty() ? kExitRegression : 0;
}

int cmd_regress(const std::string& folder, bool accept, double tolerance) {
  sim::RegressionOptions opt;
  opt.binary = std::filesystem::read_symlink("/proc/self/exe");
  opt.accept = accept;
  opt.relative_tolerance = tolerance;
  const auto cases = sim::run_regression(folder, opt, [](const std::string& name) {
    if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\r  running %-40s", name.c_str());
  });
  if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%60s\r", "");
  int failed = 0;
  for (const auto& c : cases) {
    fmt::print("{:<40} {}\n", c.scenario, c.recorded ? "recorded" : c.passed ? "ok" : "CHANGED");
    for (const auto& d : c.diffs) fmt::print("    {}\n", d);
    failed += c.passed ? 0 : 1;
  }
  fmt::print("{} passed, {} failed\n", static_cast<int>(cases.size()) - failed, failed);
  if (failed > 0)
    fmt::print(
        "To accept the new results as the baseline, on purpose: wafersim regress {} --accept "
        "(and say why in the commit)\n",
        folder);
  return failed > 0 ? kExitRegression : 0;
}

int cmd_place(const std::string& file, const std::string& presets, bool json,
              const std::string& svg, const sim::ScenarioOverrides& overrides,
              const std::string& strategy, int block_rows, const std::string& write_placement) {
  sim::Scenario sc = sim::load_scenario(file, preset_dir(presets), overrides);
  if (!strategy.empty()) {
    const std::optional<sim::StrategyKind> kind = sim::parse_strategy(strategy);
    if (!kind) {
      std::cerr << "wafersim: error: --strategy " << strategy << ": unknown; valid: "
                << fmt::format("{}", fmt::join(sim::placement_strategies(), ", ")) << "\n";
      return 1;
    }
    sc.placement.strategy = *kind;
  }
  if (block_rows > 0) sc.placement.block_rows = block_rows;
  const sim::PlacementReport report = sim::evaluate_placement(sc, show_placement_progress);
  if (!svg.empty()) sim::write_text_atomically(svg, sim::placement_svg(report));
  if (!write_placement.empty()) sim::write_text_atomically(write_placement, report.placement_file);
  if (json)
    std::cout << sim::placement_json(report).dump(2) << "\n";
  else
    sim::write_placement_summary(std::cout, report);
  return 0;
}

int cmd_list(const std::string& presets) {
  std::string kind;
  for (const sim::PresetInfo& p : sim::list_presets(preset_dir(presets))) {
    if (p.kind != kind) fmt::print("{}{}:\n", kind.empty() ? "" : "\n", kind = p.kind);
    fmt::print("  {:<16} {}\n", p.name, p.summary);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wafersim: a wafer-scale hardware simulator for LLM decoding"};
  app.require_subcommand(1);
  std::string presets;
  app.add_option(
      "--presets", presets,
      "Folder of hardware/ and models/ presets (default: $WAFERSIM_PRESETS or the source tree)");

  std::string file, out;
  bool json = false, functional = false, timing_only = false;
  auto* run = app.add_subcommand("run", "Simulate a scenario and report");
  run->add_option("scenario", file, "Scenario YAML file")->required();
  run->add_flag("--json", json, "Print one JSON object to stdout instead of the report");
  run->add_option("--out", out,
                  "Write results to this HDF5 file (and the resolved scenario beside it)");
  auto* f_opt = run->add_flag("--functional", functional,
                              "Compute real numbers and compare with the reference");
  auto* t_opt = run->add_flag("--timing-only", timing_only, "Timing only: skip the arithmetic");
  f_opt->excludes(t_opt);
  sim::ScenarioOverrides overrides;
  run->add_option("--hardware", overrides.hardware, "Override the scenario's hardware preset");
  run->add_option("--model", overrides.model, "Override the scenario's model preset");
  run->add_option("--precision", overrides.precision,
                  "Override the precision (fp32, fp16, bf16, ...)");
  run->add_option("--wafers", overrides.wafers,
                  "Wafers in the pipeline: N or auto (the fewest that fit)");
  run->add_option("--users", overrides.users, "Sequences decoded at once (workload.users)");
  run->add_option(
      "--placement", overrides.placement_file,
      "Use this placement file (wafersim place --write-placement) instead of the strategy");
  int threads = 0;
  run->add_option("--threads", threads,
                  "Host threads (0: all the host has): from 2 on, functional runs compute "
                  "their numbers on a second thread behind the timing (GEMV helpers from 3 on) "
                  "and the link records are faulted in ahead; results do not depend on it")
      ->check(CLI::NonNegativeNumber);
  bool keep_link_records = false;
  run->add_flag("--keep-link-records", keep_link_records,
                "Keep every wafer's link records for the whole run instead of reusing those of "
                "wafers a token has left (more memory; the same results)");

  std::string svg, strategy, write_placement;
  int block_rows = 0;
  auto* place = app.add_subcommand(
      "place", "Place a scenario's model and evaluate the placement (no simulation)");
  place->add_option("scenario", file, "Scenario YAML file")->required();
  place->add_flag("--json", json, "Print one JSON object");
  place->add_option("--svg", svg, "Write a picture: regions, SRAM and link-load heatmaps");
  place->add_option("--strategy", strategy, "Override the placement strategy");
  place->add_option("--block-rows", block_rows, "serpentine, sram-balanced: rows of layer blocks")
      ->check(CLI::Range(1, 64));
  place->add_option("--wafers", overrides.wafers, "Wafers: N or auto");
  place->add_option("--hardware", overrides.hardware, "Override the hardware preset");
  place->add_option("--model", overrides.model, "Override the model preset");
  place->add_option("--placement", overrides.placement_file,
                    "Read this placement file instead of running the strategy");
  place->add_option("--write-placement", write_placement,
                    "Write the placement (regions, every matrix's rectangle and reduction) as an "
                    "editable YAML file");

  auto* validate = app.add_subcommand("validate", "Check a scenario without running it");
  validate->add_option("scenario", file, "Scenario YAML file")->required();
  auto* list = app.add_subcommand("list", "List hardware and model presets");
  const sim::RegisteredCommand noc = sim::add_noc_command(app);
  const sim::RegisteredCommand bench = sim::add_bench_command(app);
  const sim::RegisteredCommand sweep = sim::add_sweep_command(app);
  std::string result_a, result_b;
  double fail_percent = -1.0;
  std::string regress_dir = "scenarios/regression";
  bool accept = false;
  double tolerance = 0.0;
  auto* regress = app.add_subcommand(
      "regress", "Rerun the golden regression scenarios and compare with their recorded results");
  regress->add_option("folder", regress_dir,
                      "Folder of scenarios with expected/ results (default scenarios/regression)");
  regress->add_flag("--accept", accept, "Record the new results as the expected ones");
  regress
      ->add_option("--tolerance", tolerance,
                   "Relative tolerance for non-integer figures (default 0: exact)")
      ->check(CLI::NonNegativeNumber);
  auto* compare =
      app.add_subcommand("compare", "Compare two results files (A = baseline, B = new)");
  compare->add_option("a", result_a, "Baseline results (.h5)")->required();
  compare->add_option("b", result_b, "New results (.h5)")->required();
  compare->add_flag("--json", json, "Print one JSON object");
  compare
      ->add_option("--fail-on-regression", fail_percent,
                   "Exit with code 4 when any figure got worse by more than PCT percent")
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*run) {
      std::optional<bool> fn;
      if (functional) fn = true;
      if (timing_only) fn = false;
      return cmd_run(file, presets, json, out, fn, overrides, threads, keep_link_records);
    }
    if (*validate) return cmd_validate(file, presets);
    if (*place)
      return cmd_place(file, presets, json, svg, overrides, strategy, block_rows, write_placement);
    if (*list) return cmd_list(presets);
    if (*noc.command) return noc.run();
    if (*bench.command) return bench.run();
    if (*sweep.command) return sweep.run();
    if (*compare) return cmd_compare(result_a, result_b, json, fail_percent);
    if (*regress) return cmd_regress(regress_dir, accept, tolerance);
  } catch (const sim::ScenarioError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const fabric::FitError& e) {
    std::cerr << "wafersim: error: " << file << ": the model does not fit: " << e.what() << "\n";
    return 1;
  } catch (const sim::UnsupportedModelError& e) {
    std::cerr << "wafersim: error: " << file << ": " << e.what() << "\n";
    return 1;
  } catch (const analysis::ResultReadError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return 1;
  } catch (const analysis::OutputError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "wafersim: internal error: " << e.what() << "\n";
    return 3;
  }
  return 2;
}
