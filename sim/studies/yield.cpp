#include "sim/studies/yield.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/defects.hpp"
#include "fabric/redundancy.hpp"
#include "sim/studies/subprocess.hpp"

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
  s.defect_density_per_mm2 = 0.0;
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

// A point given as a density runs with that density (its resolved scenario
// says so), one given as a rate with the rate; the other is set to 0 so that
// a scenario giving either takes the point's.
std::vector<std::string> run_arguments(const RepairedRunOptions& o, double rate, double density,
                                       std::uint64_t seed) {
  std::vector<std::string> a{o.binary.string()};
  if (!o.presets.empty()) a.insert(a.end(), {"--presets", o.presets});
  a.insert(a.end(), {"run", o.scenario, "--json", "--timing-only", "--set",
                     fmt::format("hardware.defects.rate={}", density > 0.0 ? 0.0 : rate), "--set",
                     fmt::format("hardware.defects.density_per_mm2={}", density), "--set",
                     fmt::format("hardware.defects.seed={}", seed)});
  return a;
}

RepairedRun read_run(std::uint64_t seed, const ProcessOutput& p) {
  RepairedRun r;
  r.seed = seed;
  r.exit_code = p.exit_code;
  if (p.exit_code != 0) {
    r.error = first_error_line(p.err);
    return r;
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(p.out);
    r.decode_tokens_per_s_per_user = j.at("decode_tokens_per_s_per_user").get<double>();
    r.dead_cores = j.value("dead_cores", 0LL);
    r.repaired_links = j.value("repaired_links", 0LL);
    r.repair_extra_hops = j.value("repair_extra_hops", 0LL);
  } catch (const std::exception& e) {
    r.exit_code = 3;
    r.error = std::string("unreadable JSON from the run: ") + e.what();
  }
  return r;
}

}  // namespace

RepairCost repair_cost(const std::vector<YieldPoint>& points, const RepairedRunOptions& o) {
  // Every run at once: the defect-free one first, then each rate's wafers.
  std::vector<std::vector<std::string>> argvs{run_arguments(o, 0.0, 0.0, 0)};
  std::vector<std::pair<std::size_t, std::uint64_t>> owner;  // (rate, seed) of each run
  for (std::size_t i = 0; i < points.size(); ++i) {
    std::vector<std::uint64_t> seeds = points[i].repaired_seeds;
    if (o.every_wafer) {
      seeds.clear();
      for (int w = 0; w < std::min(o.runs, points[i].wafers); ++w)
        seeds.push_back(o.first_seed + static_cast<std::uint64_t>(w));
    }
    for (std::size_t k = 0; k < seeds.size() && static_cast<int>(k) < o.runs; ++k) {
      argvs.push_back(run_arguments(o, points[i].rate, points[i].density_per_mm2, seeds[k]));
      owner.emplace_back(i, seeds[k]);
    }
  }
  const std::vector<ProcessOutput> out = run_processes(argvs, o.jobs);
  const RepairedRun base = read_run(0, out[0]);
  if (base.exit_code != 0)
    throw std::runtime_error("the scenario with no defect does not run: " + base.error);
  RepairCost cost;
  cost.defect_free_tokens_per_s_per_user = base.decode_tokens_per_s_per_user;
  for (const YieldPoint& p : points)
    cost.rates.push_back(RepairedRuns{p.rate, p.density_per_mm2, {}, {}, {}, {}, {}});
  for (std::size_t k = 0; k < owner.size(); ++k)
    cost.rates[owner[k].first].runs.push_back(read_run(owner[k].second, out[k + 1]));
  for (RepairedRuns& r : cost.rates) {
    std::vector<double> v;
    for (const RepairedRun& run : r.runs)
      if (run.exit_code == 0) v.push_back(run.decode_tokens_per_s_per_user);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    r.min = v.front();
    r.max = v.back();
    r.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    double sum = 0.0;
    for (double x : v) sum += x;
    r.mean = sum / static_cast<double>(v.size());
  }
  return cost;
}

double expected_yield(const fabric::WaferSpec& spec, double rate) {
  if (rate <= 0.0) return 1.0;
  if (spec.defect_clustering > 0.0) {
    // Row segments can straddle two areas of different density: no closed
    // form with spares (the draws are the answer).
    if (spec.redundancy.enabled()) return std::numeric_limits<double>::quiet_NaN();
    // Stapper's negative binomial per area of n cores: (1 + n p / a)^-a.
    const double a = spec.defect_clustering;
    const int side = spec.defect_cluster_size;
    double log_yield = 0.0;
    for (int y0 = 0; y0 < spec.mesh_height; y0 += side)
      for (int x0 = 0; x0 < spec.mesh_width; x0 += side) {
        const double n = static_cast<double>(std::min(side, spec.mesh_width - x0)) *
                         std::min(side, spec.mesh_height - y0);
        log_yield -= a * std::log1p(n * rate / a);
      }
    return std::exp(log_yield);
  }
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
                                    int wafers, int threads,
                                    std::span<const double> densities_per_mm2) {
  if (wafers < 1) throw std::invalid_argument("yield: at least one wafer");
  if (!densities_per_mm2.empty() && !(spec.core_area_mm2 > 0.0))
    throw std::invalid_argument(
        "yield: defect densities per mm^2 need the hardware's core area (core.area, e.g. 0.05 "
        "mm^2); " +
        spec.name + " has none");
  threads = std::max(1, std::min(threads, wafers));
  // Each point: (rate, the density it came from or 0).
  std::vector<std::pair<double, double>> given;
  for (const double r : rates) given.emplace_back(r, 0.0);
  for (const double d : densities_per_mm2) given.emplace_back(d * spec.core_area_mm2, d);
  std::vector<YieldPoint> out;
  for (const auto& point : given) {
    const double rate = point.first;
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
    p.density_per_mm2 = point.second;
    p.wafers = wafers;
    double dead = 0.0, failed = 0.0;
    for (std::size_t w = 0; w < outcomes.size(); ++w) {
      const WaferOutcome& o = outcomes[w];
      if (o.repaired) p.repaired_seeds.push_back(spec.defect_seed + w);
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
