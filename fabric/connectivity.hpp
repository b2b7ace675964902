// Which live cores of a wafer can reach one another around its dead ones,
// and where a wafer's transfers to and from the next wafer cross its edge.
// A wall of dead cores can cut a wafer in parts: no route joins cores on two
// sides of it (fabric/routing.hpp), so a placement whose data lies on both
// sides cannot run (check_connected says so before the run), and an edge
// core that is dead, or cut off, cannot be a port.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/defects.hpp"
#include "fabric/mesh.hpp"

namespace wafersim::fabric {

class LiveComponents {
 public:
  // Labels every live core with its part: the cores a route can join are
  // those of one part (4-neighbour steps between live cores).
  explicit LiveComponents(const DefectMap& defects);

  // The part of `c`, -1 when c is dead.
  int of(Coord c) const {
    return part_[static_cast<std::size_t>(c.y) * static_cast<std::size_t>(width_) +
                 static_cast<std::size_t>(c.x)];
  }
  int count() const { return count_; }
  int width() const { return width_; }
  int height() const { return height_; }

  // The live core of column `x` in `toward`'s part nearest to `toward`'s row
  // (ties: the row above), where a transfer between wafers crosses the
  // edge; without dead cores that is (x, toward.y). Throws RouteError when
  // no core of the column is in that part.
  Coord port(int x, Coord toward) const;

 private:
  int width_, height_;
  std::vector<std::int32_t> part_;  // [y * width + x]
  int count_ = 0;
};

// Throws FitError when the cores a placement uses (`used`, per core in
// row-major order: nonzero where the wafer's program keeps data) are not all
// in one part of `parts` (naming two of them), or when the wafer takes tokens
// from (west_port) or sends them to (east_port) another wafer and no core of
// that edge column is in their part. `wafer` names the wafer.
void check_connected(const LiveComponents& parts, std::span<const std::uint8_t> used, int wafer,
                     bool west_port, bool east_port);

}  // namespace wafersim::fabric
