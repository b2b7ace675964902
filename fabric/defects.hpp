// Which cores of a wafer are dead. Built once from the WaferSpec's defect
// description (a random rate with its own seed, and/or an explicit list of
// coordinates); immutable afterwards. Placement never puts bytes on a dead
// core and routes detour around dead routers. With spare cores
// (WaferSpec::redundancy) the defects fall on the physical array and are
// repaired there (fabric/redundancy.hpp): the logical map is then clear.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fabric/mesh.hpp"
#include "fabric/units.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

class DefectMap {
 public:
  // No defects on a width x height mesh.
  DefectMap(int width, int height);
  // Every core in `cores`, plus each other core independently dead with
  // probability `rate`, drawn from `seed` (a fixed generator: the same map on
  // every platform; one draw per core in row-major order). With clustering
  // > 0 the probability of the cores of each square area of `cluster_size`
  // cores a side is `rate` times that area's gamma draw (shape clustering,
  // mean 1), drawn from a second stream of the same seed.
  DefectMap(int width, int height, double rate, std::uint64_t seed,
            const std::vector<Coord>& cores, double clustering = 0.0, int cluster_size = 64);
  // The defects `spec` leaves on the logical mesh: without redundancy, those
  // it describes (above) on the mesh itself; with redundancy none, once the
  // physical map is repaired (throws FitError, fabric/sram.hpp, naming the
  // first row segment whose dead cores outnumber its spares).
  explicit DefectMap(const WaferSpec& spec);

  int width() const { return width_; }
  int height() const { return height_; }
  bool dead(Coord c) const {
    return dead_[static_cast<std::size_t>(c.y) * static_cast<std::size_t>(width_) +
                 static_cast<std::size_t>(c.x)] != 0;
  }
  bool alive(Coord c) const { return !dead(c); }
  std::size_t dead_count() const { return dead_count_; }
  // Dead cores in row-major order.
  std::vector<Coord> dead_cores() const;
  // True when no core of `r` is dead.
  bool clear(const Rect& r) const;

 private:
  void mark(Coord c);
  int width_;
  int height_;
  std::vector<std::uint8_t> dead_;  // [y * width + x]
  std::size_t dead_count_ = 0;
};

// A draw of the gamma distribution of shape `shape` and mean 1 (Marsaglia and
// Tsang 2000), from SplitMix64 `state`: the same numbers on every platform.
double unit_gamma(double shape, std::uint64_t& state);

// The largest rectangle of `within` (most cores; ties: the first found
// scanning rows top to bottom, then columns left to right) holding no dead
// core: where a layout that needs every core of a rectangle can go.
// Width and height 0 when every core of `within` is dead.
Rect largest_clear_rect(const DefectMap& defects, const Rect& within);

}  // namespace wafersim::fabric
