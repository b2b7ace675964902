// Wafer yield under defects: for each defect rate, the fraction of drawn
// wafers whose every row segment's dead cores fit its spares (the repair of
// fabric/redundancy.hpp), with no simulation (a repair check is one pass over
// the physical array). Wafer w of every rate draws from seed `seed + w`, so
// the rates share their random numbers and the curve is monotone per wafer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/wafer_spec.hpp"

namespace wafersim::sim {

struct YieldPoint {
  double rate = 0.0;
  int wafers = 0;
  int repaired = 0;                   // wafers repaired in full
  double mean_dead_cores = 0.0;       // per wafer
  double mean_failed_segments = 0.0;  // row segments beyond their spares, per wafer
  // Closed form for independent defects: the product over row segments of
  // P(dead cores <= spares), binomial per segment. Without spares: (1-p)^cores.
  // Listed defect_cores are left out of it.
  double expected_yield = 0.0;
  double yield() const { return wafers > 0 ? static_cast<double>(repaired) / wafers : 0.0; }
};

// `spec`'s defect_rate is replaced by each rate in turn, its defect_seed is
// the first wafer's seed, its listed defect_cores stay on every wafer.
// `threads` >= 1 share the wafers (results do not depend on it).
std::vector<YieldPoint> wafer_yield(const fabric::WaferSpec& spec, std::span<const double> rates,
                                    int wafers, int threads = 1);

// The closed form of YieldPoint::expected_yield for one rate.
double expected_yield(const fabric::WaferSpec& spec, double rate);

}  // namespace wafersim::sim
