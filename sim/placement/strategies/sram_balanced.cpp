// sram-balanced: the smallest per-core byte budget B (weights + KV +
// buffers) at which the head fits a west strip and every layer its
// serpentine block: each matrix then takes the rows its tiles need at B, the
// KV cache the rows its slots need at B, so no core holds more than B. The
// head strip starts at the narrowest width whose rows could hold the head at
// B and widens (up to 64 columns more) when dead rows break its runs.
#include <algorithm>

#include <fmt/format.h>

#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

class SramBalanced : public PlacementStrategy {
 public:
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    std::string why;
    RegionPlan plan;
    std::uint64_t lo = ctx.planner.min_budget().value, hi = ctx.capacity.value;
    if (!plan_at(ctx, task, hi, plan, why))
      throw fabric::FitError(
          fmt::format("sram-balanced: {} layers{} do not fit {} even at full capacity: {}",
                      task.layers, task.has_head ? " and the head" : "", ctx.spec.name, why));
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      RegionPlan p;
      if (plan_at(ctx, task, mid, p, why))
        hi = mid, plan = p;
      else
        lo = mid + 1;
    }
    plan_at(ctx, task, hi, plan, why);
    plan.budget = Bytes{hi};
    plan.note =
        fmt::format("per-core budget {} of {}", human_bytes(Bytes{hi}), human_bytes(ctx.capacity));
    return plan;
  }

 private:
  // Whether a serpentine layout fits at budget b (the plan in p); why not in `why`.
  static bool plan_at(PlanningContext& ctx, const WaferTask& task, std::uint64_t bytes,
                      RegionPlan& p, std::string& why) {
    const Bytes b{bytes};
    const fabric::Rect& area = ctx.area;
    int first = 0;
    if (task.has_head) {
      for (first = 1; first < area.width; ++first) {
        const int r = ctx.planner.head_min_rows(first, b);
        if (r >= 0 && r <= area.height) break;
      }
      if (first >= area.width) return false;
    }
    const int last = task.has_head ? std::min(area.width - 1, first + 64) : 0;
    for (int hw = first; hw <= last; ++hw) {
      const fabric::Rect rest{area.x0 + hw, area.y0, area.width - hw, area.height};
      p.head = fabric::Rect{area.x0, area.y0, hw, area.height};
      p.blocks = snake_blocks(rest, task.layers, ctx.req.block_rows, false);
      if (p.blocks.empty()) return false;
      Placement trial;
      try {
        ctx.build(p, task, b, trial);
        return true;
      } catch (const fabric::FitError& e) {
        why = e.what();
      }
    }
    return false;
  }
};

}  // namespace

std::unique_ptr<PlacementStrategy> sram_balanced() {
  return std::make_unique<SramBalanced>();
}

}  // namespace wafersim::sim::strategies
