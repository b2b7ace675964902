// whole-region: the head strip on the west, the wafer's layers in
// placement.layer_groups contiguous groups, each group on one region of a
// grid over the rest (the grid whose token is shortest in closed form).
// Every layer of a group spans its group's whole region
// (StagePlanner::region_layer): one group is tensor parallelism over the
// whole wafer (every core in every GEMV, the longest multicasts), one layer
// per group a pipeline of regions (users' tokens in different layers at
// once). WaferLLM's dataflow (He et al., OSDI 2025).
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "fabric/defects.hpp"
#include "sim/placement/placement_cost.hpp"
#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

// The closed-form critical path of one token through a candidate's stages
// on this wafer (its layers, the hand-overs between them, the head).
double token_cycles(const LatencyModel& lm, const models::ModelConfig& model, const Placement& p) {
  double t = 0.0;
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    t += layer_latency_cycles(lm, model, p.layers[i]);
    if (i + 1 < p.layers.size())
      t += move_latency_cycles(lm, layer_output_layout(p.layers[i]),
                               layer_input_layout(p.layers[i + 1]));
  }
  if (p.head.lm_head.p() > 0) t += head_latency_cycles(lm, model, p.head);
  return t;
}

class WholeRegion : public PlacementStrategy {
 public:
  // Every grid of the groups (1 .. groups rows of regions) that fits is
  // planned; the one whose token has the shortest closed-form critical path
  // wins (the region's aspect sets how far each GEMV multicasts and how
  // many partial sums each reduction carries: placement_cost.hpp).
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    const int groups = std::min(ctx.req.layer_groups, task.layers);
    const LatencyModel lm{ctx.spec, ctx.req.weight_bits, std::max(1, ctx.req.context_tokens),
                          static_cast<double>(ctx.req.value_bytes())};
    std::optional<RegionPlan> best;
    double best_cycles = 0.0;
    for (int rows = 1; rows <= groups; ++rows) {
      RegionPlan candidate = grid(ctx, task, groups, rows);
      if (candidate.blocks.empty()) continue;
      Placement trial;
      try {
        ctx.build(candidate, task, ctx.capacity, trial);
      } catch (const fabric::FitError& e) {
        ctx.last_fit_error = e.what();
        continue;
      }
      const double cycles = token_cycles(lm, ctx.model, trial);
      if (!best || cycles < best_cycles) best = std::move(candidate), best_cycles = cycles;
    }
    if (!best)
      throw fabric::FitError(
          ctx.last_fit_error.empty()
              ? fmt::format("whole-region: {} layer groups do not fit {}", groups, ctx.spec.name)
              : ctx.last_fit_error);
    best->note +=
        fmt::format(" (the grid with the shortest closed-form token: {:.0f} cycles)", best_cycles);
    return *best;
  }

 private:
  // The head strip on the west and `groups` regions in `rows` rows of the
  // rest; empty blocks when the grid has no room.
  static RegionPlan grid(PlanningContext& ctx, const WaferTask& task, int groups, int rows) {
    const fabric::Rect& area = ctx.area;
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
    std::vector<fabric::Rect> regions = snake_blocks(rest, groups, rows, false);
    if (static_cast<int>(regions.size()) != groups) return plan;
    // Every GEMV needs every core of its region: a region with dead cores
    // shrinks to its largest defect-free rectangle.
    const fabric::DefectMap defects(ctx.spec);
    int shrunk = 0;
    if (defects.dead_count() > 0)
      for (fabric::Rect& r : regions)
        if (!defects.clear(r)) {
          r = fabric::largest_clear_rect(defects, r);
          ++shrunk;
          if (r.width == 0) return plan;
        }
    for (int g = 0; g < groups; ++g) {
      const int n = block_begin(task.layers, groups, g + 1) - block_begin(task.layers, groups, g);
      for (int i = 0; i < n; ++i) plan.blocks.push_back(regions[static_cast<std::size_t>(g)]);
    }
    plan.note = fmt::format(
        "{} layer group{} on {} x {} regions of {} x {} cores, up to {} "
        "layers each",
        groups, groups == 1 ? "" : "s", rows, (groups + rows - 1) / rows, regions.front().width,
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
