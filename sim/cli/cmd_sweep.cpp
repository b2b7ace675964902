// wafersim sweep: a scenario at every point of a grid of overrides, on one
// machine (-j), over MPI ranks (mpirun/srun) or in shards (--shard K/N), each
// finished point journaled (--out) so an interrupted sweep resumes.
// wafersim merge: the journals of a sweep's shards as one sweep.

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "analysis/html_report.hpp"
#include "analysis/output_file.hpp"
#include "analysis/sweep_output.hpp"
#include "models/sha256.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/studies/subprocess.hpp"
#include "sim/studies/sweep.hpp"
#include "sim/studies/sweep_journal.hpp"
#include "sim/studies/sweep_mpi.hpp"

namespace wafersim::sim {

namespace {

namespace fs = std::filesystem;

struct SweepArgs {
  std::string scenario, presets, csv, h5, report, out, shard;
  SweepAxes axes;
  ScenarioOverrideOptions base;  // --placement, --set: every point
  int jobs = 1;
  bool json = false, functional = false, timing_only = false;
};

// Raised by SIGINT/SIGTERM/SIGHUP: the sweep stops starting points, stops
// those running, and writes what is done. Lock-free, so safe in a handler.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}

// Installs the handlers for the life of the sweep and puts the old ones back.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~StopSignals() {
    for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

// An output must be writable before hours of points run (analysis::check_writable).
void check_output_path(const std::string& path) {
  if (!path.empty()) analysis::check_writable(path);
}

// The point's axes, then the sweep's own overrides: what its run is given
// (sweep_run_arguments: the axes as --set KEY=VALUE before the sweep's).
ScenarioOverrideOptions point_overrides(const ScenarioOverrideOptions& base, const SweepPoint& p) {
  ScenarioOverrideOptions o;
  o.named.placement_file = base.named.placement_file;
  o.set = point_sets(p);
  o.set.insert(o.set.end(), base.set.begin(), base.set.end());
  return o;
}

// "--users 4 --reduction tree": the axes a point sets, as they were given.
std::string describe(const SweepPoint& p) {
  std::string d;
  for (std::size_t i = 0; i < kSweepAxisCount; ++i)
    if (p.values[i])
      d += fmt::format("{}{} {}", d.empty() ? "" : " ", kSweepAxes[i].option, *p.values[i]);
  return d.empty() ? "the scenario as it is" : d;
}

// Loads every point's scenario, so a broken file or an unknown preset is one
// clear error before anything runs (what remains to a point's run is whether
// the model fits, and its figures); returns the digest of all the points'
// resolved scenarios, which names the sweep in its journal.
std::string check_points(const SweepArgs& a, const std::vector<SweepPoint>& grid) {
  const fs::path presets = a.presets.empty() ? default_preset_dir() : fs::path(a.presets);
  std::string all;
  for (const SweepPoint& p : grid) {
    Scenario sc;
    try {
      sc = load_scenario_with(a.scenario, presets, point_overrides(a.base, p));
    } catch (const std::exception& e) {
      throw CommandError(kExitBadInput,
                         fmt::format("sweep point {} ({}): {}", p.index, describe(p), e.what()));
    }
    all += sc.resolved_yaml;
    all += "\n---\n";
  }
  return models::sha256_hex(all.data(), all.size());
}

std::optional<bool> mode_of(const SweepArgs& a) {
  if (a.functional) return true;
  if (a.timing_only) return false;
  return std::nullopt;
}

// The sweep's files (CSV, HDF5, HTML report), each written whole.
void write_files(const std::string& csv, const std::string& h5, const std::string& report,
                 const SweepSummary& summary, const std::vector<SweepRecord>& records) {
  if (!csv.empty()) {
    write_text_atomically(csv, sweep_csv(records));
    report_written(csv, "one row per point and system");
  }
  if (!h5.empty()) {
    analysis::write_sweep_hdf5(h5, sweep_json(summary, records));
    report_written(h5, "the points as HDF5");
  }
  if (!report.empty()) {
    write_text_atomically(report, analysis::sweep_report_html(sweep_json(summary, records)));
    report_written(report, "the HTML report");
  }
}

// What rank 0 (or the one process) writes once the points are done.
int write_outputs(const SweepArgs& a, const SweepSummary& summary,
                  const std::vector<SweepRecord>& records) {
  write_files(a.csv, a.h5, a.report, summary, records);
  if (a.json)
    std::cout << sweep_json(summary, records).dump(2) << "\n";
  else
    std::cout << sweep_table(records);
  std::cout.flush();
  if (summary.interrupted) {
    const std::size_t want = static_cast<std::size_t>(summary.points_in_shard);
    std::cerr << fmt::format(
        "wafersim: interrupted: {} of {} points done{}\n", records.size(), want,
        a.out.empty() ? " (give --out FILE to keep finished points and resume)"
                      : fmt::format("; they are in {}: the same command resumes", a.out));
    return 128 + (g_signal.load() ? g_signal.load() : SIGINT);
  }
  return sweep_has_internal_failures(records) ? kExitInternal : kExitSuccess;
}

int run(const SweepArgs& a) {
  SweepShard shard;
  if (!a.shard.empty()) {
    try {
      shard = parse_shard(a.shard);
    } catch (const std::invalid_argument& e) {
      throw CommandError(kExitUsage, e.what());
    }
  }
  std::unique_ptr<MpiWorld> world;
  if (launched_by_mpi()) {
    if (!a.shard.empty())
      throw CommandError(kExitUsage,
                         "--shard with mpirun/srun: under an MPI launcher the ranks share the "
                         "points already; drop --shard (it is for separate batch jobs)");
    if (!built_with_mpi())
      throw CommandError(kExitUsage,
                         "this wafersim was built without MPI, so under mpirun every rank would "
                         "run the whole sweep; rebuild with libopenmpi-dev installed, or split "
                         "the sweep with --shard K/N and merge the journals");
    world = std::make_unique<MpiWorld>();
  }
  const bool coordinator = !world || world->rank() == 0;
  const StopSignals signals;

  std::vector<SweepPoint> grid;
  try {
    grid = sweep_points(a.axes);
  } catch (const std::invalid_argument& e) {
    if (world) (void)world->agree(false);
    if (!coordinator) return kExitUsage;
    throw CommandError(kExitUsage, e.what());
  }
  const std::vector<SweepPoint> mine = sweep_points(a.axes, shard);
  SweepSummary summary;
  summary.scenario = a.scenario;
  summary.shard = shard;
  summary.points_total = static_cast<int>(grid.size());
  summary.points_in_shard = static_cast<int>(mine.size());

  // Rank 0 checks the scenarios, the outputs and the journal; the other ranks
  // wait for its word.
  std::unique_ptr<SweepJournal> journal;
  std::vector<SweepRecord> records;
  std::vector<int> todo;
  if (coordinator) {
    try {
      check_output_path(a.csv);
      check_output_path(a.h5);
      check_output_path(a.report);
      check_output_path(a.out);
      const std::string digest = check_points(a, grid);  // the whole grid: shards share it
      if (!a.out.empty()) {
        journal = std::make_unique<SweepJournal>(
            a.out, sweep_identity(a.scenario, a.axes, mode_of(a), digest, summary.points_total),
            shard);
        records = journal->resumed();
      }
    } catch (...) {
      if (world) (void)world->agree(false);
      throw;
    }
    std::set<int> done;
    for (const SweepRecord& r : records) done.insert(r.at("index").get<int>());
    for (const SweepPoint& p : mine)
      if (!done.count(p.index)) todo.push_back(p.index);
    if (!records.empty())
      std::cerr << fmt::format("resuming: {} of {} points already in {}, {} to run\n",
                               records.size(), mine.size(), a.out, todo.size());
  }
  if (world && !world->agree(true)) return kExitBadInput;  // rank 0 said why

  SweepOptions o;
  o.binary = fs::read_symlink("/proc/self/exe");
  o.scenario = a.scenario;
  o.presets = a.presets;
  o.functional = mode_of(a);
  o.sets = a.base.as_sets();
  o.jobs = a.jobs;
  o.cancel = &g_stop;
  const int total = summary.points_in_shard;
  auto finished = [&](const SweepRecord& r) {
    if (journal) journal->append(r);
    records.push_back(r);
    show_progress_bar("sweeping", static_cast<int>(records.size()), total, "points");
  };
  if (world) {
    run_sweep_mpi(*world, grid, todo, o, finished);
    if (!coordinator) return kExitSuccess;
  } else {
    std::vector<SweepPoint> points;
    for (int i : todo) points.push_back(grid.at(static_cast<std::size_t>(i)));
    run_sweep(points, o, finished);
  }
  summary.interrupted = g_stop.load();
  return write_outputs(a, summary, records);
}

struct MergeArgs {
  std::vector<std::string> journals;
  std::string csv, h5, report, out;
  bool json = false;
};

int merge(const MergeArgs& a) {
  check_output_path(a.csv);
  check_output_path(a.h5);
  check_output_path(a.report);
  check_output_path(a.out);
  std::vector<fs::path> paths(a.journals.begin(), a.journals.end());
  const MergedSweep m = merge_journals(paths);
  SweepSummary summary;
  summary.scenario = m.sweep.value("scenario", std::string());
  summary.points_total = m.sweep.at("points_total").get<int>();
  summary.points_in_shard = summary.points_total;
  if (!a.out.empty()) {
    // One journal of the whole grid: `sweep --out` on it runs what is missing.
    write_text_atomically(a.out, journal_text(m.sweep, SweepShard{}, m.records));
    report_written(a.out, "one journal of the whole sweep");
  }
  write_files(a.csv, a.h5, a.report, summary, m.records);
  if (a.json)
    std::cout << sweep_json(summary, m.records).dump(2) << "\n";
  else
    std::cout << sweep_table(m.records);
  if (!m.missing.empty()) {
    std::string list;
    for (std::size_t i = 0; i < m.missing.size() && i < 20; ++i)
      list += fmt::format("{}{}", i ? ", " : "", m.missing[i]);
    if (m.missing.size() > 20) list += ", ...";
    throw CommandError(
        kExitBadInput,
        fmt::format("merge: {} of {} points are in no journal ({}); run them with `wafersim sweep "
                    "... --out MERGED` on a journal written by merge --out MERGED",
                    m.missing.size(), summary.points_total, list));
  }
  return sweep_has_internal_failures(m.records) ? kExitInternal : kExitSuccess;
}

}  // namespace

RegisteredCommand add_sweep_command(CLI::App& app) {
  auto args = std::make_shared<SweepArgs>();
  CLI::App* c = app.add_subcommand(
      "sweep", "Run a scenario at every point of a grid of overrides (capacity planning)");
  c->add_option("scenario", args->scenario, "Scenario YAML file")->required();
  // An option per axis (a comma-separated list of its values); the other
  // scenario overrides (--placement, --set) apply to every point.
  static const std::vector<std::string_view> kAxisOptions = [] {
    std::vector<std::string_view> v;
    for (const SweepAxis& axis : kSweepAxes) v.push_back(axis.option);
    return v;
  }();
  for (std::size_t i = 0; i < kSweepAxisCount; ++i) {
    const SweepAxis& axis = kSweepAxes[i];
    c->add_option(std::string(axis.option), args->axes.values[i], std::string(axis.help))
        ->delimiter(',')
        ->transform(CLI::Validator(
            [&axis](std::string& value) {
              // A count is checked and kept in its plain form; text is
              // checked when the points' scenarios are loaded.
              try {
                value = checked_axis_value(axis, value);
                return std::string();
              } catch (const std::invalid_argument& e) {
                return std::string(e.what());
              }
            },
            axis.values == AxisValues::text ? "" : "COUNT"));
  }
  add_scenario_override_options(c, args->base, kAxisOptions);
  c->add_option("-j,--jobs", args->jobs, "Points run at once on each machine or rank (default 1)")
      ->check(CLI::Range(1, 1024));
  c->add_option("--shard", args->shard,
                "Run shard K/N of the points (index % N == K), one per batch job; under "
                "mpirun/srun the ranks share the points without it");
  c->add_option("--out", args->out,
                "Journal: every finished point is appended to this file as it ends; rerunning "
                "the same command with it resumes (skips the points it holds)");
  c->add_flag("--json", args->json, "Print one JSON object");
  c->add_option("--csv", args->csv, "Also write the points as CSV to this file");
  c->add_option("--h5", args->h5, "Also write the points as HDF5 to this file");
  c->add_option("--report", args->report,
                "Also write an HTML report (a curve of each figure per swept parameter)");
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

RegisteredCommand add_merge_command(CLI::App& app) {
  auto args = std::make_shared<MergeArgs>();
  CLI::App* c = app.add_subcommand(
      "merge", "Gather the journals of a sweep's shards (sweep --shard K/N --out FILE) into one");
  c->add_option("journals", args->journals, "Sweep journals (sweep --out)")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_flag("--json", args->json, "Print one JSON object");
  c->add_option("--csv", args->csv, "Also write the points as CSV to this file");
  c->add_option("--h5", args->h5, "Also write the points as HDF5 to this file");
  c->add_option("--report", args->report,
                "Also write an HTML report (a curve of each figure per swept parameter)");
  c->add_option(
      "--out", args->out,
      "Also write one journal of the whole sweep (sweep --out on it runs what is missing)");
  return {c, [args] { return merge(*args); }};
}

}  // namespace wafersim::sim
