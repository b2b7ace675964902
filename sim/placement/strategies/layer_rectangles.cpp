// layer-rectangles: full-height strips, layers left to right, the head on
// the right (as wide as its share of the bytes).
#include <algorithm>

#include <fmt/format.h>

#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

class LayerRectangles : public PlacementStrategy {
 public:
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    const fabric::Rect& area = ctx.area;
    const int k = task.layers;
    if (area.width < task.stages())
      throw fabric::FitError(fmt::format(
          "layer-rectangles gives each stage at least one column, but wafer {} holds {} stages "
          "({} layers{}) and {} is only {} columns wide; use more wafers or serpentine",
          task.wafer, task.stages(), k, task.has_head ? " + head" : "", ctx.spec.name, area.width));
    const int head_width =
        task.has_head ? head_share(area.width, ctx.head_bytes, ctx.layer_bytes, k) : 0;
    const int layer_width = std::max(1, (area.width - head_width) / k);
    RegionPlan plan;
    for (int i = 0; i < k; ++i)
      plan.blocks.push_back(
          fabric::Rect{area.x0 + i * layer_width, area.y0, layer_width, area.height});
    plan.head =
        fabric::Rect{area.x0 + k * layer_width, area.y0, area.width - k * layer_width, area.height};
    return plan;
  }
};

}  // namespace

std::unique_ptr<PlacementStrategy> layer_rectangles() {
  return std::make_unique<LayerRectangles>();
}

}  // namespace wafersim::sim::strategies
