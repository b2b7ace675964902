// Colors (virtual channels) as a budget of the placed program: every
// collective the executor runs over a line of cores (a GEMV's input
// multicast down each column and its row reductions, attention's multicasts
// and reductions along its segments and block rows, the norms' all-reduce
// along the residual's roots, the head's GEMV and embedding rows) needs
// routes configured per color in every router of its line
// (fabric::collective_colors per scheme). Routes are set once for the whole
// program, as WaferLLM's layout.csl sets them (MeshInfra/WaferLLM,
// MeshGEMV/*/src/layout.csl), so one pattern (the same line, scheme, K and
// kind) is counted once however many GEMVs reuse it, and different
// patterns through one router need colors of their own there. Point-to-point
// moves between layouts are not counted (they can share a color per
// direction and are routed around each other in time).
#pragma once

#include "fabric/mesh.hpp"
#include "fabric/wafer_spec.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

struct RouteBudget {
  int max_colors = 0;  // the most colors one router needs
  int wafer = 0;       // where (the first such router in core order)
  Coord router;
  int available = 0;  // WaferSpec::virtual_channels
};

// Counts the colors every router needs (fabric::RouteColors) and throws
// fabric::FitError naming the router, the colors needed and available, the
// patterns through it (matrix, scheme, colors) and what to change, when a
// router needs more than spec.virtual_channels (0: no limit checked).
RouteBudget check_route_colors(const Placement& placement, const fabric::WaferSpec& spec);

}  // namespace wafersim::sim
