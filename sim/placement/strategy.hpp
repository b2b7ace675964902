// The placement strategy interface. A strategy decides the regions of one
// wafer's stages (a RegionPlan: a block per layer, a strip for the head);
// the StagePlanner lays each stage out inside its region, the same way for
// every strategy. One file per strategy in sim/placement/strategies/,
// registered by name in strategy_registry.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fabric/wafer_spec.hpp"
#include "models/model_config.hpp"
#include "sim/placement/placement.hpp"
#include "sim/placement/regions.hpp"
#include "sim/placement/stage_planner.hpp"

namespace wafersim::sim {

// One wafer's share of the model: `layers` layers from `first_layer` (a
// contiguous run, balanced over the wafers), and the head on the last wafer.
struct WaferTask {
  int wafer = 0;
  int first_layer = 0;
  int layers = 0;
  bool has_head = false;
  int stages() const { return layers + (has_head ? 1 : 0); }
};

// What every strategy plans with: the model, the wafer, the request, the
// stage planner, and the stages already placed on earlier wafers.
class PlanningContext {
 public:
  PlanningContext(const models::ModelConfig& model, const fabric::WaferSpec& spec, int n_wafers,
                  const PlacementRequest& req, const Placement& so_far);

  const models::ModelConfig& model;
  const fabric::WaferSpec& spec;
  const PlacementRequest& req;
  const int n_wafers;
  const fabric::Rect area;  // the usable area (the mesh less the halo)
  const Bytes capacity;     // SRAM per core
  Bytes layer_bytes;        // one layer's weights and KV cache
  Bytes head_bytes;         // embedding and lm_head (once when tied)
  StagePlanner planner;
  std::string last_fit_error;  // why the last rejected candidate did not fit

  // Plans a wafer's stages from a region plan at a per-core budget,
  // appending them to `out`. With plan.turn_layers, each layer is stacked
  // bottom-up when that brings its input nearer the previous layer's output.
  void build(const RegionPlan& plan, const WaferTask& task, Bytes budget, Placement& out);
  // Closed-form hop-bytes per token of a candidate plan for one wafer (its
  // stages alone, and their legs to and from other wafers); false (and
  // last_fit_error) when it does not fit.
  bool candidate_cost(const RegionPlan& plan, const WaferTask& task, double& cost);
  // A snake candidate: the head strip on the west (row snakes) or across the
  // north (column snakes) of the area, `k` layer blocks in the rest.
  RegionPlan snake_plan(int k, bool has_head, int rows, bool by_columns) const;

 private:
  const Placement& so_far_;
};

class PlacementStrategy {
 public:
  virtual ~PlacementStrategy() = default;
  // The regions of `task`'s stages; throws fabric::FitError when none fits.
  virtual RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const = 0;
};

// The strategy of that kind (strategy_registry.cpp).
std::unique_ptr<PlacementStrategy> make_strategy(StrategyKind kind);

}  // namespace wafersim::sim
