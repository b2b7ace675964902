// wafersim sweep: a scenario at every point of a grid of overrides.

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/subprocess.hpp"
#include "sim/studies/sweep.hpp"

namespace wafersim::sim {

namespace {

struct SweepArgs {
  std::string scenario, presets, csv, shard = "0/1";
  SweepAxes axes;
  int jobs = 1;
  bool json = false, functional = false, timing_only = false;
};

void show_sweep_progress(int done, int total) {
  show_progress_bar("sweeping", done, total, "points");
}

int run(const SweepArgs& a) {
  SweepShard shard;
  try {
    shard = parse_shard(a.shard);
  } catch (const std::invalid_argument& e) {
    throw CommandError(kExitUsage, e.what());
  }
  const std::vector<SweepPoint> points = sweep_points(a.axes, shard);
  // Every point's scenario is loaded here first, so a broken file or an
  // unknown preset is one clear error before anything runs; what remains to
  // a point's run is whether the model fits, and its figures.
  const std::filesystem::path presets =
      a.presets.empty() ? default_preset_dir() : std::filesystem::path(a.presets);
  for (const SweepPoint& p : points) {
    ScenarioOverrides o;
    o.model = p.model;
    o.hardware = p.hardware;
    o.precision = p.precision;
    o.wafers = p.wafers;
    o.users = p.users;
    o.layer_groups = p.layer_groups;
    (void)load_scenario(a.scenario, presets, o);
  }
  SweepOptions o;
  o.binary = std::filesystem::read_symlink("/proc/self/exe");
  o.scenario = a.scenario;
  o.presets = a.presets;
  if (a.functional) o.functional = true;
  if (a.timing_only) o.functional = false;
  o.jobs = a.jobs;
  o.progress = show_sweep_progress;
  const std::vector<SweepOutcome> outcomes = run_sweep(points, o);
  if (!a.csv.empty()) write_text_atomically(a.csv, sweep_csv(outcomes));
  if (a.json)
    std::cout << sweep_json(a.scenario, shard, outcomes).dump(2) << "\n";
  else
    std::cout << sweep_table(outcomes);
  // A point that does not fit (exit 1) is an answer; a crashed or
  // internally failing point fails the sweep.
  for (const SweepOutcome& s : outcomes)
    if (s.exit_code > kExitBadInput) return kExitInternal;
  return kExitSuccess;
}

}  // namespace

RegisteredCommand add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* c = app.add_subcommand(
      "sweep", "Run a scenario at every point of a grid of overrides (capacity planning)");
  c->add_option("scenario", args->scenario, "Scenario YAML file")->required();
  c->add_option("--model", args->axes.models, "Model presets (comma-separated)")->delimiter(',');
  c->add_option("--hardware", args->axes.hardware, "Hardware presets")->delimiter(',');
  c->add_option("--precision", args->axes.precisions, "Precisions")->delimiter(',');
  c->add_option("--wafers", args->axes.wafers, "Wafer counts: N or auto")->delimiter(',');
  c->add_option("--layer-groups", args->axes.layer_groups,
                "whole-region: groups of layers, each sharing one region")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  c->add_option("--users", args->axes.users, "Concurrent users")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000000));
  c->add_option("-j,--jobs", args->jobs, "Points run at once (default 1)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--shard", args->shard,
                "Run shard K/N of the points (index % N == K), or 'mpi' for the MPI rank/size");
  c->add_flag("--json", args->json, "Print one JSON object");
  c->add_option("--csv", args->csv, "Also write the points as CSV to this file");
  auto* f = c->add_flag("--functional", args->functional, "Every point computes real numbers");
  auto* t = c->add_flag("--timing-only", args->timing_only, "Every point is timing only");
  f->excludes(t);
  const CLI::App* root = &app;
  return {c, [args, root] {
            // --presets is the app's option; the children need it too, as given.
            args->presets = presets_flag(*root);
            return run(*args);
          }};
}

}  // namespace wafersim::sim
