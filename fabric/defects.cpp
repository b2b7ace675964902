#include "fabric/defects.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "fabric/redundancy.hpp"

namespace wafersim::fabric {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): fully specified, so a defect seed
// gives the same map on every platform (std distributions do not).
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(std::uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) / static_cast<double>(std::uint64_t{1} << 53);
}

double standard_normal(std::uint64_t& state) {
  // Box-Muller; 1 - u keeps the logarithm finite.
  const double u = 1.0 - uniform01(state), v = uniform01(state);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

// Gamma of shape a >= 1 and scale 1 (Marsaglia and Tsang, ACM TOMS 2000).
double gamma_at_least_one(double a, std::uint64_t& state) {
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = standard_normal(state);
    double v = 1.0 + c * x;
    if (v <= 0.0) continue;
    v = v * v * v;
    const double u = 1.0 - uniform01(state);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace

WaferSpec wafer_instance(const WaferSpec& spec, int wafer) {
  WaferSpec s = spec;
  if (wafer > 0 && spec.redundancy.enabled() && spec.defect_probability() > 0.0) {
    std::uint64_t state =
        spec.defect_seed ^ (0xd1b54a32d192ed03ull * static_cast<std::uint64_t>(wafer));
    s.defect_seed = splitmix64(state);
  }
  return s;
}

double unit_gamma(double shape, std::uint64_t& state) {
  // Shape below 1: Gamma(a) = Gamma(a + 1) U^(1/a).
  if (shape < 1.0) {
    const double g = gamma_at_least_one(shape + 1.0, state);
    return g * std::pow(1.0 - uniform01(state), 1.0 / shape) / shape;
  }
  return gamma_at_least_one(shape, state) / shape;
}

DefectMap::DefectMap(int width, int height)
    : width_(width),
      height_(height),
      dead_(static_cast<std::size_t>(width) * static_cast<std::size_t>(height), 0) {}

DefectMap::DefectMap(int width, int height, double rate, std::uint64_t seed,
                     const std::vector<Coord>& cores, double clustering, int cluster_size)
    : DefectMap(width, height) {
  if (rate > 0.0) {
    // Each area's rate: the mean, or the mean times its gamma draw (areas in
    // row-major order, from a stream of their own).
    const int side = std::max(1, cluster_size);
    const int areas_x = (width_ + side - 1) / side, areas_y = (height_ + side - 1) / side;
    std::vector<double> area_rate(static_cast<std::size_t>(areas_x) * areas_y, rate);
    if (clustering > 0.0) {
      std::uint64_t cluster_state = seed ^ 0x6a09e667f3bcc909ull;
      for (double& r : area_rate) r = std::min(1.0, rate * unit_gamma(clustering, cluster_state));
    }
    // A core is dead when its 53-bit uniform draw falls below its area's
    // rate; one draw per core in row-major order.
    std::uint64_t state = seed;
    for (int y = 0; y < height_; ++y)
      for (int x = 0; x < width_; ++x) {
        const double r = area_rate[static_cast<std::size_t>(y / side) * areas_x + x / side];
        if (uniform01(state) < r) mark(Coord{x, y});
      }
  }
  for (const Coord& c : cores) mark(c);
}

DefectMap::DefectMap(const WaferSpec& spec) : DefectMap(spec.mesh_width, spec.mesh_height) {
  if (spec.redundancy.enabled()) {
    // Repaired in full or FitError: no logical core is dead.
    check_repairable(spec.redundancy, spec.mesh_width, physical_defects(spec));
    return;
  }
  *this = DefectMap(spec.mesh_width, spec.mesh_height, spec.defect_probability(), spec.defect_seed,
                    spec.listed_defects(), spec.defect_clustering, spec.defect_cluster_size);
}

void DefectMap::mark(Coord c) {
  auto& d = dead_[static_cast<std::size_t>(c.y) * static_cast<std::size_t>(width_) +
                  static_cast<std::size_t>(c.x)];
  if (d == 0) ++dead_count_;
  d = 1;
}

std::vector<Coord> DefectMap::dead_cores() const {
  std::vector<Coord> out;
  out.reserve(dead_count_);
  if (dead_count_ == 0) return out;
  for (int y = 0; y < height_; ++y)
    for (int x = 0; x < width_; ++x)
      if (dead(Coord{x, y})) out.push_back(Coord{x, y});
  return out;
}

bool DefectMap::clear(const Rect& r) const {
  if (dead_count_ == 0) return true;
  for (int y = r.y0; y < r.y0 + r.height; ++y)
    for (int x = r.x0; x < r.x0 + r.width; ++x)
      if (dead(Coord{x, y})) return false;
  return true;
}

Rect largest_clear_rect(const DefectMap& defects, const Rect& within) {
  // Row by row, the run of clear cores above each column (a histogram);
  // the largest rectangle under each histogram by the stack method.
  const auto w = static_cast<std::size_t>(std::max(0, within.width));
  std::vector<int> run(w, 0);
  std::vector<std::size_t> stack;
  Rect best{within.x0, within.y0, 0, 0};
  for (int y = 0; y < within.height; ++y) {
    for (std::size_t i = 0; i < w; ++i)
      run[i] = defects.dead(Coord{within.x0 + static_cast<int>(i), within.y0 + y}) ? 0 : run[i] + 1;
    stack.clear();
    for (std::size_t i = 0; i <= w; ++i) {
      const int h = i < w ? run[i] : 0;
      while (!stack.empty() && run[stack.back()] >= h) {
        const int height = run[stack.back()];
        stack.pop_back();
        const std::size_t left = stack.empty() ? 0 : stack.back() + 1;
        const int width = static_cast<int>(i - left);
        if (static_cast<std::int64_t>(width) * height >
            static_cast<std::int64_t>(best.width) * best.height)
          best =
              Rect{within.x0 + static_cast<int>(left), within.y0 + y - height + 1, width, height};
      }
      stack.push_back(i);
    }
  }
  return best;
}

}  // namespace wafersim::fabric
