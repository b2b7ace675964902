// short-path: boustrophedons whose path returns next to the head (an even
// number of snake rows, or of snake columns with the head across the top),
// every such grid tried; the lowest closed-form hop-bytes wins.
#include <limits>

#include <fmt/format.h>

#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

class ShortPath : public PlacementStrategy {
 public:
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    const int k = task.layers;
    RegionPlan plan;
    double best = std::numeric_limits<double>::infinity();
    for (const bool by_columns : {false, true})
      for (int rows = 2; rows <= k; rows += 2) {
        if (rows > 2 &&
            static_cast<int>(ceil_div(k, rows)) == static_cast<int>(ceil_div(k, rows - 2)))
          continue;  // same grid as a smaller even count
        RegionPlan p = ctx.snake_plan(k, task.has_head, rows, by_columns);
        double cost = 0.0;
        if (p.blocks.empty() || !ctx.candidate_cost(p, task, cost)) continue;
        if (cost < best) {
          best = cost;
          plan = p;
          plan.note =
              fmt::format("{} {} of {} blocks, closed-form {:.4g} hop-bytes/token", rows,
                          by_columns ? "snake columns" : "snake rows", ceil_div(k, rows), cost);
        }
      }
    if (k == 1) plan = ctx.snake_plan(k, task.has_head, 1, false);
    if (plan.blocks.empty())
      throw fabric::FitError(
          fmt::format("short-path: no boustrophedon of {} layers fits {}; the last: {}", k,
                      ctx.spec.name, ctx.last_fit_error));
    return plan;
  }
};

}  // namespace

std::unique_ptr<PlacementStrategy> short_path() {
  return std::make_unique<ShortPath>();
}

}  // namespace wafersim::sim::strategies
