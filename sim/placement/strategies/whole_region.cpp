// whole-region: the head strip on the west, the wafer's layers in
// placement.layer_groups contiguous groups, each group on one region of the
// rest (a grid of regions as near square as the area allows). Every layer
// of a group spans its group's whole region (StagePlanner::region_layer):
// one group is tensor parallelism over the whole wafer (least latency per
// token), one layer per group is a pipeline of regions (users' tokens in
// different layers at once). WaferLLM's dataflow (He et al., OSDI 2025).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "fabric/defects.hpp"

#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

// Rows of a grid of `groups` regions over `area`: the fewest empty cells
// (a grid of rows x ceil(groups / rows) cells leaves the rest unused), then
// the regions nearest square.
int squarest_rows(const fabric::Rect& area, int groups) {
  int best = 1, best_empty = groups;
  double best_skew = INFINITY;
  for (int rows = 1; rows <= groups; ++rows) {
    const int cols = (groups + rows - 1) / rows;
    const int empty = rows * cols - groups;
    const double w = static_cast<double>(area.width) / cols;
    const double h = static_cast<double>(area.height) / rows;
    const double skew = std::abs(std::log(w / h));
    if (empty < best_empty || (empty == best_empty && skew < best_skew))
      best = rows, best_empty = empty, best_skew = skew;
  }
  return best;
}

class WholeRegion : public PlacementStrategy {
 public:
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    const fabric::Rect& area = ctx.area;
    const int groups = std::min(ctx.req.layer_groups, task.layers);
    RegionPlan plan;
    plan.whole_region = true;
    plan.turn_layers = false;
    fabric::Rect rest = area;
    if (task.has_head) {
      const int hw = head_share(area.width, ctx.head_bytes, ctx.layer_bytes, task.layers);
      plan.head = fabric::Rect{area.x0, area.y0, hw, area.height};
      rest = fabric::Rect{area.x0 + hw, area.y0, area.width - hw, area.height};
    }
    plan.rest = rest;
    const int rows = squarest_rows(rest, groups);
    std::vector<fabric::Rect> regions = snake_blocks(rest, groups, rows, false);
    if (static_cast<int>(regions.size()) != groups)
      throw fabric::FitError(fmt::format(
          "whole-region: {} layer groups do not fit {} ({} x {} cores after the head strip)",
          groups, ctx.spec.name, rest.width, rest.height));
    // Every GEMV needs every core of its region: a region with dead cores
    // shrinks to its largest defect-free rectangle.
    const fabric::DefectMap defects(ctx.spec);
    int shrunk = 0;
    if (defects.dead_count() > 0)
      for (fabric::Rect& r : regions)
        if (!defects.clear(r)) {
          r = fabric::largest_clear_rect(defects, r);
          ++shrunk;
          if (r.width == 0)
            throw fabric::FitError(
                fmt::format("whole-region: every core of a layer group's region on {} is dead",
                            ctx.spec.name));
        }
    for (int g = 0; g < groups; ++g) {
      const int n = block_begin(task.layers, groups, g + 1) - block_begin(task.layers, groups, g);
      for (int i = 0; i < n; ++i) plan.blocks.push_back(regions[static_cast<std::size_t>(g)]);
    }
    plan.note = fmt::format("{} layer group{} on regions of {} x {} cores, up to {} layers each",
                            groups, groups == 1 ? "" : "s", regions.front().width,
                            regions.front().height, (task.layers + groups - 1) / groups);
    if (shrunk > 0)
      plan.note += fmt::format("; {} region{} shrunk to the largest rectangle free of dead cores",
                               shrunk, shrunk == 1 ? "" : "s");
    return plan;
  }
};

}  // namespace

std::unique_ptr<PlacementStrategy> whole_region() {
  return std::make_unique<WholeRegion>();
}

}  // namespace wafersim::sim::strategies
