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
                      std::optional<LayerGroupChoice>* choice,
                      std::vector<ReductionChoice>* reductions, PlacementRequest* planned) {
  check_wafer_supports(sc.model);
  const bool chooses =
      sc.placement.file.empty() && sc.placement.strategy == StrategyKind::whole_region;
  const bool groups_auto = chooses && sc.placement.layer_groups_auto;
  const bool schemes_auto = chooses && reduction_auto(sc);
  if (planned) *planned = req;
  if (!groups_auto && !schemes_auto) return plan_counted(sc, req);
  const auto plan = [&](const PlacementRequest& r) { return plan_counted(sc, r); };
  PlacementRequest r = req;
  Placement pl;
  std::optional<LayerGroupChoice> groups;
  std::vector<ReductionChoice> schemes;
  CandidateMemo memo;
  if (!groups_auto) pl = plan(r);
  // Both auto: the count first, with the schemes provisional (chain, the
  // default: the fewest colors); the schemes at that count; where they
  // changed, the count again with them, and where that changed, the schemes
  // again at the new count (two rounds at most: docs/scenario-schema.md).
  for (int round = 0; round < 2; ++round) {
    if (groups_auto) {
      LayerGroupChoice g = choose_layer_groups(sc, r, pl, plan, &memo);
      const bool same = groups && groups->chosen == g.chosen;
      r.layer_groups = g.chosen;
      groups = std::move(g);
      if (same) break;
    }
    if (!schemes_auto) break;
    const PlacementChoices before = r;
    schemes = choose_reductions(sc, r, pl, plan, &memo);
    if (!groups_auto || static_cast<const PlacementChoices&>(r) == before) break;
  }
  if (groups)
    pl.planner_note +=
        fmt::format("; layer_groups: auto chose {} ({})", groups->chosen, groups->objective);
  for (const ReductionChoice& ch : schemes)
    pl.planner_note += fmt::format(
        "; {}: auto chose {} ({})", analysis::reduction_choice_key(ch),
        analysis::reduction_candidate_name(ch.candidates[static_cast<std::size_t>(ch.chosen)]),
        ch.objective);
  if (choice) *choice = std::move(groups);
  if (reductions) *reductions = std::move(schemes);
  if (planned) *planned = r;
  return pl;
}

std::unique_ptr<PlacedSystem> place_system(const Scenario& sc,
                                           const std::function<void(int, int)>& progress,
                                           const std::function<void(int, int)>& search_progress) {
  auto sys = std::make_unique<PlacedSystem>();
  PlacementRequest req = placement_request(sc, progress, search_progress);
  sys->placement = plan_system(sc, req, &sys->layer_group_choice, &sys->reduction_choices, &req);
  // The plan is final: its collectives' routes must fit the routers' colors,
  // and get past the dead cores.
  sys->routes = check_route_colors(sys->placement, sc.hardware);
  check_reachable(sc.model, sys->placement, req, sc.hardware);
  for (int w = 0; w < sys->placement.wafers; ++w) {
    // Each wafer its own defect draw where spares repair it (fabric/defects.hpp).
    sys->wafers.push_back(std::make_unique<fabric::Fabric>(fabric::wafer_instance(sc.hardware, w)));
    sys->wafer_ptrs.push_back(sys->wafers.back().get());
  }
  allocate_placement(sc.model, sys->placement, sys->wafer_ptrs, req);
  sys->program = lower(sc.model, sys->placement);
  return sys;
}

Scenario draft_scenario(const Scenario& sc) {
  Scenario d = sc;
  d.model = sc.speculative->decoding.draft;
  d.model_preset = sc.speculative->draft_preset;
  d.wafers_auto = true;
  d.placement.file.clear();
  d.placement.matrices.clear();
  d.speculative.reset();
  // The target's layer groups, at most one a layer of the draft's.
  d.placement.layer_groups = std::min(d.placement.layer_groups, d.model.num_layers);
  return d;
}

std::unique_ptr<PlacedSystem> place_draft(const Scenario& sc,
                                          const std::function<void(int, int)>& progress,
                                          const std::function<void(int, int)>& search_progress) {
  if (!sc.speculative) return nullptr;
  try {
    return place_system(draft_scenario(sc), progress, search_progress);
  } catch (const fabric::FitError& e) {
    throw fabric::FitError("the speculative draft " + sc.speculative->decoding.draft.name +
                           " (placed on wafers of its own, " +
                           "as many as it needs up to one per layer): " + e.what());
  }
}

}  // namespace wafersim::sim
