// A scenario's model placed on its wafers: the fabrics (one per wafer), the
// placement and the lowered program. Shared by `run` and `place`.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "fabric/fabric.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/layer_group_choice.hpp"
#include "sim/engine/reduction_choice.hpp"
#include "sim/placement/placement.hpp"
#include "sim/placement/route_budget.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

struct PlacedSystem {
  std::vector<std::unique_ptr<fabric::Fabric>> wafers;
  std::vector<fabric::Fabric*> wafer_ptrs;
  Placement placement;
  Program program;
  RouteBudget routes;  // the colors its collectives need per router (checked)
  // placement.layer_groups: auto: the candidates and the count chosen.
  std::optional<LayerGroupChoice> layer_group_choice;
  // placement.reduction: auto (and matrices.<m>.reduction: auto): each
  // key's candidates and the scheme chosen.
  std::vector<ReductionChoice> reduction_choices;
};

// What the scenario asks of placement: its placement keys, and the context,
// users and weight bits of its workload.
PlacementRequest placement_request(const Scenario& scenario,
                                   const std::function<void(int, int)>& progress = {},
                                   const std::function<void(int, int)>& search_progress = {});

// Plans the scenario's placement without allocating: its placement file, or
// its strategy on scenario.wafers wafers, or with wafers_auto on the fewest
// that fit (a FitError saying why when none does, up to one layer per
// wafer). `validate` checks a scenario's fit with it. With
// placement.layer_groups: auto the count is chosen first
// (choose_layer_groups: every candidate planned and timed on the fabric
// model); `choice`, when given, receives the candidates and the choice.
// With placement.reduction: auto (or a matrix's) the schemes are chosen too
// (choose_reductions), after the count; `reductions` receives them, and
// `planned` the request with every choice made (what was planned).
Placement plan_system(const Scenario& scenario, const PlacementRequest& request,
                      std::optional<LayerGroupChoice>* choice = nullptr,
                      std::vector<ReductionChoice>* reductions = nullptr,
                      PlacementRequest* planned = nullptr);

// Places the scenario's model on scenario.wafers wafers, or, with
// wafers_auto, on the fewest that fit (starting from the fewest whose SRAM
// could hold the weights). Throws fabric::FitError. `progress` and
// `search_progress` as PlacementRequest's.
std::unique_ptr<PlacedSystem> place_system(
    const Scenario& scenario, const std::function<void(int, int)>& progress = {},
    const std::function<void(int, int)>& search_progress = {});

// The scenario a speculative draft is placed by: the target's hardware,
// precision, strategy (its layer groups at most one a draft layer) and
// workload (so its cache holds the same context), on the fewest wafers that
// hold it; a placement file or per-matrix overrides name the target's
// matrices and do not apply.
Scenario draft_scenario(const Scenario& scenario);

// With speculative_decoding, the draft placed on wafers of its own
// (draft_scenario), as `run` and `validate` place it; null without. Throws
// fabric::FitError naming the draft.
std::unique_ptr<PlacedSystem> place_draft(
    const Scenario& scenario, const std::function<void(int, int)>& progress = {},
    const std::function<void(int, int)>& search_progress = {});

}  // namespace wafersim::sim
