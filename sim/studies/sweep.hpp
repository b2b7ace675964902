// Capacity-planning sweeps: one scenario run at every point of a grid of
// overrides (models x hardware x precisions x wafers x users). A SystemC
// simulation runs once per process, so every point is its own `wafersim run
// --json` process; up to `jobs` run at once, and a sweep can be split into
// shards (one per machine or MPI rank) that together cover every point once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wafersim::sim {

// The values each axis takes; an empty axis keeps the scenario's own value.
struct SweepAxes {
  std::vector<std::string> models;
  std::vector<std::string> hardware;
  std::vector<std::string> precisions;
  std::vector<std::string> wafers;  // N or auto
  std::vector<int> layer_groups;    // placement.layer_groups (whole-region)
  std::vector<int> users;
};

// One point of the grid: the overrides it applies (unset = the scenario's).
struct SweepPoint {
  int index = 0;  // position in the whole grid (row-major, models outermost)
  std::optional<std::string> model, hardware, precision, wafers;
  std::optional<int> layer_groups;
  std::optional<int> users;
};

// Which points this process runs: those with index % count == rank.
struct SweepShard {
  int rank = 0;
  int count = 1;
};

// Parses "K/N" (0 <= K < N) or "mpi" (the rank and size an MPI launcher puts
// in the environment: OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE or
// PMIX_RANK with OMPI_COMM_WORLD_SIZE). Throws std::invalid_argument.
SweepShard parse_shard(const std::string& text);

// Every point of the grid in order, then those of `shard`.
std::vector<SweepPoint> sweep_points(const SweepAxes& axes, const SweepShard& shard = {});

// The `wafersim run` command line of one point.
std::vector<std::string> sweep_run_arguments(const std::filesystem::path& binary,
                                             const std::string& scenario,
                                             const std::string& presets,
                                             std::optional<bool> functional,
                                             const SweepPoint& point);

// The outcome of one point: the run's JSON, or why it has none.
struct SweepOutcome {
  SweepPoint point;
  int exit_code = 0;
  nlohmann::ordered_json result;  // the run's --json object when exit_code == 0
  std::string error;              // the run's first error line otherwise
};

struct SweepOptions {
  std::filesystem::path binary;  // the wafersim executable to run
  std::string scenario;
  std::string presets;
  std::optional<bool> functional;
  int jobs = 1;
  // Called after each point finishes (points done, points in this shard).
  std::function<void(int, int)> progress;
};

// Runs the points, up to options.jobs at once; outcomes in point order
// whatever the order they finish in.
std::vector<SweepOutcome> run_sweep(const std::vector<SweepPoint>& points,
                                    const SweepOptions& options);

// The sweep as one JSON object: {scenario, shard, points: [{index, the
// point's overrides, exit_code, then the headline figures (and the GPU
// clusters' when the scenario compares) or error}]}.
nlohmann::ordered_json sweep_json(const std::string& scenario, const SweepShard& shard,
                                  const std::vector<SweepOutcome>& outcomes);
// The same as a table for the terminal, and as CSV.
std::string sweep_table(const std::vector<SweepOutcome>& outcomes);
std::string sweep_csv(const std::vector<SweepOutcome>& outcomes);

}  // namespace wafersim::sim
