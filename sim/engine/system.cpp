#include "sim/engine/system.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "fabric/defects.hpp"

#include "sim/config/placement_file.hpp"

namespace wafersim::sim {

PlacementRequest placement_request(const Scenario& sc,
                                   const std::function<void(int, int)>& progress,
                                   const std::function<void(int, int)>& search_progress) {
  PlacementRequest req;
  static_cast<PlacementChoices&>(req) = sc.placement;
  // Every user's cache is reserved for the longest user's context.
  req.context_tokens = sc.placement.reserve_context_tokens;
  for (int u = 0; u < sc.workload.users; ++u)
    req.context_tokens = std::max(req.context_tokens, user_context_tokens(sc.workload, u));
  req.users = std::max(sc.placement.reserve_users, sc.workload.users);
  req.weight_bits = models::dtype_bits(sc.precision);
  req.progress = progress;
  req.search_progress = search_progress;
  return req;
}

namespace {

// The placement for a fixed count of layer groups (or none: another strategy).
Placement plan_counted(const Scenario& sc, const PlacementRequest& req) {
  // A placement file fixes the wafers and every rectangle; it is checked on
  // reading, and the allocator has the final word on SRAM.
  if (!sc.placement.file.empty())
    return read_placement_file(sc.placement.file, sc.model, sc.hardware, req,
                               sc.wafers_auto ? 0 : sc.wafers);
  if (!sc.wafers_auto) return plan_placement(sc.model, sc.hardware, sc.wafers, req);
  // The fewest wafers that fit: plan (no allocation) from the fewest whose
  // SRAM could hold the weights and the KV cache upward; the first plan that
  // fits wins, and is the placement (planning is deterministic). One layer
  // per wafer is the last try.
  const std::uint64_t bytes =
      ceil_div(sc.model.parameter_count() * static_cast<std::uint64_t>(req.weight_bits), 8) +
      kv_cache_bytes(sc.model, req).value;
  int n = static_cast<int>(
      std::max<std::uint64_t>(1, ceil_div(bytes, sc.hardware.sram_capacity().value)));
  n = std::min(n, sc.model.num_layers);
  const int fewest = n;
  std::string first_error;
  for (;; ++n) {
    try {
      return plan_placement(sc.model, sc.hardware, n, req);
    } catch (const fabric::FitError& e) {
      if (first_error.empty()) first_error = e.what();
      if (n < sc.model.num_layers) continue;
      throw fabric::FitError(fmt::format(
          "{} fits on no number of {} wafers with strategy {} ({} tokens x {} users of "
          "context): on {} wafer{} (the fewest its bytes allow): {}; on {} (one layer per "
          "wafer): {}{}",
          sc.model.name, sc.hardware.name, strategy_name(req.strategy), req.context_tokens,
          std::max(1, req.users), fewest, fewest == 1 ? "" : "s", first_error, n, e.what(),
          req.strategy == StrategyKind::whole_region
              ? ""
              : "; whole-region spreads each layer's KV cache over all of its region's cores "
                "(placement: {strategy: whole-region})"));
    }
  }
}

}  // namespace

Placement plan_system(const Scenario& sc, const PlacementRequest& req,
                      std::optional<LayerGroupChoice>* choice) {
  check_wafer_supports(sc.model);
  if (!sc.placement.layer_groups_auto || !sc.placement.file.empty() ||
      sc.placement.strategy != StrategyKind::whole_region)
    return plan_counted(sc, req);
  Placement pl;
  LayerGroupChoice made = choose_layer_groups(
      sc, req, pl, [&](const PlacementRequest& r) { return plan_counted(sc, r); });
  pl.planner_note += fmt::format("; layer_groups: auto chose {} ({})", made.chosen, made.objective);
  if (choice) *choice = std::move(made);
  return pl;
}

std::unique_ptr<PlacedSystem> place_system(const Scenario& sc,
                                           const std::function<void(int, int)>& progress,
                                           const std::function<void(int, int)>& search_progress) {
  auto sys = std::make_unique<PlacedSystem>();
  PlacementRequest req = placement_request(sc, progress, search_progress);
  sys->placement = plan_system(sc, req, &sys->layer_group_choice);
  if (sys->layer_group_choice) req.layer_groups = sys->layer_group_choice->chosen;
  // The plan is final: its collectives' routes must fit the routers' colors.
  sys->routes = check_route_colors(sys->placement, sc.hardware);
  for (int w = 0; w < sys->placement.wafers; ++w) {
    // Each wafer its own defect draw where spares repair it (fabric/defects.hpp).
    sys->wafers.push_back(std::make_unique<fabric::Fabric>(fabric::wafer_instance(sc.hardware, w)));
    sys->wafer_ptrs.push_back(sys->wafers.back().get());
  }
  allocate_placement(sc.model, sys->placement, sys->wafer_ptrs, req);
  sys->program = lower(sc.model, sys->placement);
  return sys;
}

}  // namespace wafersim::sim
