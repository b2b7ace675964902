// Wafer yield under defects: for each defect rate, the fraction of drawn
// wafers whose every row segment's dead cores fit its spares (the repair of
// fabric/redundancy.hpp), with no simulation (a repair check is one pass over
// the physical array). Wafer w of every rate draws from seed `seed + w`, so
// the rates share their random numbers and the curve is monotone per wafer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fabric/wafer_spec.hpp"

namespace wafersim::sim {

struct YieldPoint {
  double rate = 0.0;
  double density_per_mm2 = 0.0;  // what the rate came from (x core area); 0: given as a rate
  int wafers = 0;
  int repaired = 0;                   // wafers repaired in full
  double mean_dead_cores = 0.0;       // per wafer
  double mean_failed_segments = 0.0;  // row segments beyond their spares, per wafer
  // Closed form for independent defects: the product over row segments of
  // P(dead cores <= spares), binomial per segment. Without spares: (1-p)^cores;
  // clustered without spares: Stapper's product over areas of (1 + n p/a)^-a;
  // clustered with spares: NaN (no closed form). Listed defect_cores are left out.
  double expected_yield = 0.0;
  // The seeds of the wafers repaired in full, in order (defects.seed of each).
  std::vector<std::uint64_t> repaired_seeds;
  double yield() const { return wafers > 0 ? static_cast<double>(repaired) / wafers : 0.0; }
};

// `spec`'s defect probability is replaced by each rate in turn (and by each
// density x spec.core_area_mm2 after them), its defect_seed is the first
// wafer's seed, its listed cores (defects.cores and defects.file) stay on
// every wafer. `threads` >= 1 share the wafers (results do not depend on it).
// Throws std::invalid_argument for densities on a spec without a core area.
std::vector<YieldPoint> wafer_yield(const fabric::WaferSpec& spec, std::span<const double> rates,
                                    int wafers, int threads = 1,
                                    std::span<const double> densities_per_mm2 = {});

// What the repairs cost: the scenario run (timing only) on repaired wafers,
// each a `wafersim run` child process with its defect map, beside the same
// scenario with no defect.
struct RepairedRun {
  std::uint64_t seed = 0;
  int exit_code = 0;
  std::string error;  // the run's first error line when exit_code != 0
  double decode_tokens_per_s_per_user = 0.0;
  long long dead_cores = 0, repaired_links = 0, repair_extra_hops = 0;
};
struct RepairedRuns {
  double rate = 0.0;
  double density_per_mm2 = 0.0;
  std::vector<RepairedRun> runs;  // the first `runs` repaired (every_wafer: drawn) wafers
  // Over the runs that succeeded: tokens/s per user (nullopt: none ran).
  std::optional<double> min, median, max, mean;
};
struct RepairedRunOptions {
  std::filesystem::path binary;  // the wafersim executable
  std::string scenario;
  std::string presets;  // --presets as given, "" for the default
  int runs = 0;         // wafers run per rate
  int jobs = 1;         // runs at once
  // Without spares no wafer with a dead core repairs, so the repaired ones
  // are the defect-free ones: the runs are then the first `runs` wafers
  // drawn (seeds first_seed, first_seed + 1, ...), each placed around its own
  // dead cores by the scenario's strategy; a wafer it cannot place is a
  // failed run (its FitError in RepairedRun::error).
  bool every_wafer = false;
  std::uint64_t first_seed = 0;
};
// The defect-free run, then each rate's first `runs` repaired wafers (or,
// with every_wafer, its first `runs` wafers).
// Throws std::runtime_error when the defect-free run fails (its error).
struct RepairCost {
  double defect_free_tokens_per_s_per_user = 0.0;
  std::vector<RepairedRuns> rates;
};
RepairCost repair_cost(const std::vector<YieldPoint>& points, const RepairedRunOptions& options);

// The closed form of YieldPoint::expected_yield for one rate.
double expected_yield(const fabric::WaferSpec& spec, double rate);

}  // namespace wafersim::sim
