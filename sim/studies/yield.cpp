#include "sim/studies/yield.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "fabric/defects.hpp"
#include "fabric/redundancy.hpp"

namespace wafersim::sim {

namespace {

struct WaferOutcome {
  bool repaired = false;
  std::size_t dead = 0;
  int failed_segments = 0;
};

WaferOutcome draw(const fabric::WaferSpec& spec, double rate, std::uint64_t seed) {
  fabric::WaferSpec s = spec;
  s.defect_rate = rate;
  s.defect_seed = seed;
  WaferOutcome o;
  if (!s.redundancy.enabled()) {
    const fabric::DefectMap d(s);
    o.dead = d.dead_count();
    o.repaired = o.dead == 0;
    o.failed_segments = o.repaired ? 0 : 1;
    return o;
  }
  const fabric::DefectMap physical = fabric::physical_defects(s);
  o.dead = physical.dead_count();
  const auto failure = fabric::first_unrepairable(s.redundancy, s.mesh_width, physical);
  o.repaired = !failure;
  o.failed_segments = failure ? failure->segments_failed : 0;
  return o;
}

// P(at most k of n independent cores dead), each with probability p.
double at_most(int n, int k, double p) {
  double sum = 0.0;
  for (int i = 0; i <= std::min(n, k); ++i)
    sum += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
                    i * std::log(p) + (n - i) * std::log1p(-p));
  return std::min(1.0, sum);
}

}  // namespace

double expected_yield(const fabric::WaferSpec& spec, double rate) {
  if (rate <= 0.0) return 1.0;
  const double rows = spec.mesh_height;
  if (!spec.redundancy.enabled()) return std::exp(spec.core_count() * std::log1p(-rate));
  const fabric::Redundancy& r = spec.redundancy;
  const int k = r.columns_per_group, full = spec.mesh_width / k, rest = spec.mesh_width % k;
  double log_yield = rows * full * std::log(at_most(k + r.spare_columns, r.spare_columns, rate));
  if (rest > 0)
    log_yield += rows * std::log(at_most(rest + r.spare_columns, r.spare_columns, rate));
  return std::exp(log_yield);
}

std::vector<YieldPoint> wafer_yield(const fabric::WaferSpec& spec, std::span<const double> rates,
                                    int wafers, int threads) {
  if (wafers < 1) throw std::invalid_argument("yield: at least one wafer");
  threads = std::max(1, std::min(threads, wafers));
  std::vector<YieldPoint> out;
  for (const double rate : rates) {
    std::vector<WaferOutcome> outcomes(static_cast<std::size_t>(wafers));
    auto work = [&](int first) {
      for (int w = first; w < wafers; w += threads)
        outcomes[static_cast<std::size_t>(w)] =
            draw(spec, rate, spec.defect_seed + static_cast<std::uint64_t>(w));
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
    for (std::thread& t : pool) t.join();
    YieldPoint p;
    p.rate = rate;
    p.wafers = wafers;
    double dead = 0.0, failed = 0.0;
    for (const WaferOutcome& o : outcomes) {
      p.repaired += o.repaired ? 1 : 0;
      dead += static_cast<double>(o.dead);
      failed += o.failed_segments;
    }
    p.mean_dead_cores = dead / wafers;
    p.mean_failed_segments = failed / wafers;
    p.expected_yield = expected_yield(spec, rate);
    out.push_back(p);
  }
  return out;
}

}  // namespace wafersim::sim
