#include "sim/placement/strategy.hpp"

#include <algorithm>
#include <utility>

#include "sim/placement/placement_cost.hpp"

namespace wafersim::sim {

using fabric::FitError;
using fabric::Rect;

PlanningContext::PlanningContext(const models::ModelConfig& model_in,
                                 const fabric::WaferSpec& spec_in, int wafers,
                                 const PlacementRequest& request, const Placement& so_far)
    : model(model_in),
      spec(spec_in),
      req(request),
      n_wafers(wafers),
      area(usable_area(spec_in, request.halo)),
      capacity(spec_in.sram_per_core),
      planner(model_in, spec_in, request),
      so_far_(so_far) {
  const auto bits = static_cast<std::uint64_t>(req.weight_bits);
  const std::uint64_t kv_bytes = kv_cache_bytes(model, req).value;
  layer_bytes = Bytes{ceil_div(model.layer_parameters() * bits, 8) +
                      kv_bytes / static_cast<std::uint64_t>(model.num_layers)};
  head_bytes =
      Bytes{ceil_div((model.tie_embeddings ? 1u : 2u) *
                         static_cast<std::uint64_t>(model.vocab_size) * model.hidden_size * bits,
                     8)};
}

void PlanningContext::build(const RegionPlan& plan, const WaferTask& task, Bytes budget,
                            Placement& out) {
  const std::string strategy = strategy_name(req.strategy);
  for (std::size_t i = 0; i < plan.blocks.size(); ++i) {
    const int l = task.first_layer + static_cast<int>(i);
    if (plan.whole_region) {
      const auto sharing =
          static_cast<int>(std::count(plan.blocks.begin(), plan.blocks.end(), plan.blocks[i]));
      out.layers.push_back(
          planner.region_layer(l, task.wafer, plan.blocks[i], sharing, budget, strategy));
      continue;
    }
    LayerStage st =
        planner.layer(l, task.wafer, plan.blocks[i], budget, strategy, plan.kv_segment, false);
    // The layer before: this wafer's last, else the previous wafer's.
    const LayerStage* before = !out.layers.empty()       ? &out.layers.back()
                               : !so_far_.layers.empty() ? &so_far_.layers.back()
                                                         : nullptr;
    if (plan.turn_layers && before) {
      try {
        LayerStage up =
            planner.layer(l, task.wafer, plan.blocks[i], budget, strategy, plan.kv_segment, true);
        const Layout from = layer_output_layout(*before);
        if (move_hop_bytes(from, layer_input_layout(up), spec.mesh_width) <
            move_hop_bytes(from, layer_input_layout(st), spec.mesh_width))
          st = std::move(up);
      } catch (const FitError&) {
        // Dead rows can leave room for the stack one way only: keep it top-down.
      }
    }
    out.layers.push_back(std::move(st));
  }
  if (task.has_head) out.head = planner.head(task.wafer, plan.head, budget);
}

bool PlanningContext::candidate_cost(const RegionPlan& plan, const WaferTask& task, double& cost) {
  Placement trial;
  try {
    build(plan, task, capacity, trial);
  } catch (const FitError& e) {
    last_fit_error = e.what();
    return false;
  }
  cost = 0.0;
  for (std::size_t i = 0; i < trial.layers.size(); ++i) {
    cost += layer_hop_bytes(model, trial.layers[i]);
    if (i + 1 < trial.layers.size())
      cost += move_hop_bytes(layer_output_layout(trial.layers[i]),
                             layer_input_layout(trial.layers[i + 1]));
  }
  if (task.has_head) {
    cost += head_hop_bytes(model, trial.head);
    cost += move_hop_bytes(layer_output_layout(trial.layers.back()),
                           head_input_layout(model, trial.head));
    cost += n_wafers == 1
                ? move_hop_bytes(embedding_row_layout(trial.head),
                                 layer_input_layout(trial.layers.front()))
                : to_east_edge_hop_bytes(embedding_row_layout(trial.head), spec.mesh_width);
  } else {
    cost += to_east_edge_hop_bytes(layer_output_layout(trial.layers.back()), spec.mesh_width);
  }
  if (n_wafers > 1) cost += from_west_edge_hop_bytes(layer_input_layout(trial.layers.front()));
  return true;
}

RegionPlan PlanningContext::snake_plan(int k, bool has_head, int rows, bool by_columns) const {
  RegionPlan p;
  Rect rest = area;
  if (has_head) {
    if (by_columns) {
      const int hh = head_share(area.height, head_bytes, layer_bytes, k);
      p.head = Rect{area.x0, area.y0, area.width, hh};
      rest = Rect{area.x0, area.y0 + hh, area.width, area.height - hh};
    } else {
      const int hw = head_share(area.width, head_bytes, layer_bytes, k);
      p.head = Rect{area.x0, area.y0, hw, area.height};
      rest = Rect{area.x0 + hw, area.y0, area.width - hw, area.height};
    }
  }
  p.rest = rest;
  p.blocks = snake_blocks(rest, k, rows, by_columns);
  return p;
}

}  // namespace wafersim::sim
