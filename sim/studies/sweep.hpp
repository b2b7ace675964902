// Capacity-planning sweeps: one scenario run at every point of a grid of
// overrides (the axes of sweep_axes.hpp: models x hardware x ... x users x
// strategies x reductions x decode batches).
// A SystemC simulation runs once per process, so every point is its own
// `wafersim run --json` process; up to `jobs` run at once on a machine, the
// points can be spread over MPI ranks (sweep_mpi.hpp) or split into shards
// (one per batch job), and each finished point is one record that a journal
// (sweep_journal.hpp) keeps so that an interrupted sweep resumes.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/studies/sweep_axes.hpp"

namespace wafersim::sim {

// Which points this process runs: those with index % count == rank.
struct SweepShard {
  int rank = 0;
  int count = 1;
};

// Parses "K/N" (0 <= K < N). Throws std::invalid_argument.
SweepShard parse_shard(const std::string& text);

// How many points the whole grid has.
int sweep_size(const SweepAxes& axes);
// Every point of the grid in order, then those of `shard`.
std::vector<SweepPoint> sweep_points(const SweepAxes& axes, const SweepShard& shard = {});

// The `wafersim run` command line of one point.
// `sets` (KEY=VALUE, the sweep's own overrides of every point) follow the
// point's axes as --set options.
std::vector<std::string> sweep_run_arguments(
    const std::filesystem::path& binary, const std::string& scenario, const std::string& presets,
    std::optional<bool> functional, const SweepPoint& point,
    const std::vector<std::pair<std::string, std::string>>& sets = {});

// A finished point as a sweep keeps, journals, gathers and prints it: one JSON
// object {index, overrides, exit_code, then the headline figures, power_kw and
// gpu_baselines when the run succeeded, or error}.
using SweepRecord = nlohmann::ordered_json;

// The record of a point from its run's exit code and output.
SweepRecord sweep_record(const SweepPoint& point, int exit_code, const std::string& out,
                         const std::string& err);

struct SweepOptions {
  std::filesystem::path binary;  // the wafersim executable to run
  std::string scenario;
  std::string presets;
  std::optional<bool> functional;
  // Overrides of every point besides its axes (--strategy, --placement, --set).
  std::vector<std::pair<std::string, std::string>> sets;
  int jobs = 1;
  // Raised (by a signal handler, say) to stop: no new point starts, and the
  // points running are stopped and left out (a resumed sweep runs them).
  const std::atomic<bool>* cancel = nullptr;
};

// Runs one point; nullopt when it was cancelled before it finished.
std::optional<SweepRecord> run_sweep_point(const SweepOptions& options, const SweepPoint& point);

// Runs the points, up to options.jobs at once, calling `finished` with each
// record as its point ends (one call at a time, in the order they finish).
void run_sweep(const std::vector<SweepPoint>& points, const SweepOptions& options,
               const std::function<void(const SweepRecord&)>& finished);

// What a sweep's outputs say of it besides its records.
struct SweepSummary {
  std::string scenario;
  SweepShard shard;
  int points_total = 0;  // in the whole grid (all shards)
  int points_in_shard = 0;
  bool interrupted = false;
};

// The indices of `shard`'s points that `records` lack, in order.
std::vector<int> missing_points(const SweepSummary& summary,
                                const std::vector<SweepRecord>& records);

// The sweep as one JSON object: {format, scenario, shard, points_total,
// complete, missing, points: records in index order}.
nlohmann::ordered_json sweep_json(const SweepSummary& summary, std::vector<SweepRecord> records);
// The same as a table for the terminal (a row per point, the GPU clusters
// beneath it), and as CSV: one row per point and system (the wafer's and each
// GPU cluster's), every figure of the JSON at full precision.
std::string sweep_table(std::vector<SweepRecord> records);
std::string sweep_csv(std::vector<SweepRecord> records);

// Points whose run failed for a reason other than bad input (exit > 1).
bool sweep_has_internal_failures(const std::vector<SweepRecord>& records);

}  // namespace wafersim::sim
