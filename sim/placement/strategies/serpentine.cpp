// serpentine: the head strip on the west; layers snake through R rows of
// blocks (left to right, then right to left, ...) so that layer 0 starts
// next to the embedding and, with an even R, the last layer ends next to the
// lm_head.
#include <fmt/format.h>

#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

class Serpentine : public PlacementStrategy {
 public:
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    RegionPlan plan = ctx.snake_plan(task.layers, task.has_head, ctx.req.block_rows, false);
    if (plan.blocks.empty())
      throw fabric::FitError(fmt::format(
          "serpentine: {} block rows of {} layers do not fit {} ({} x {})", ctx.req.block_rows,
          task.layers, ctx.spec.name, ctx.area.width, ctx.area.height));
    return plan;
  }
};

}  // namespace

std::unique_ptr<PlacementStrategy> serpentine() {
  return std::make_unique<Serpentine>();
}

}  // namespace wafersim::sim::strategies
