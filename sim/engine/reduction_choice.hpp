// placement.reduction: auto (and placement.matrices.<kind>.reduction: auto).
// The whole-region strategy's reduction scheme chosen for the scenario's
// workload from the simulated fabric, not a formula: every scheme whose
// routes fit the routers' colors is planned and timed as a candidate
// placement (sim/engine/candidate_timing.hpp: how, and the objective), and
// the best for the workload is allocated and taken.
//
// Each key that says auto is one choice. The layer-wide `reduction: auto`
// is one scheme for every matrix without its own (qkv, o, the MLP, the
// attention segments and lm_head together): in whole-region every matrix
// spans the same region, so their routes share every router and their
// colors add up (24 on the WSE): a scheme that fits alone may not fit beside
// the others', and only the layer as a whole says whether a choice fits.
// A matrix's own `auto` is chosen after the layer-wide one, holding every
// other matrix at its scheme (given or chosen), in the kinds' order.
//
// The candidates, simplest first (a tie goes to the earlier): chain, tree,
// two-level, k-tree, ring. The k-tree's K is the scenario's
// reduction_groups where it gives one; else WaferLLM's rule, round(sqrt n)
// groups per line of n cores (the 20 groups of its 420-core lines, He et
// al., OSDI 2025: fabric/collectives.hpp), then half and twice the square
// root of the region's mean line (sqrt(width x height) cores). Ring is timed
// only on regions whose lines are at most kRingTimedCores long: it passes
// each of a line's n chunks 2(n - 1) times, and through a whole-wafer layer
// the fabric model takes minutes of host time for it (docs/results.md); on
// a longer line it is not timed, and says so. Plain C++ (no SystemC).
#pragma once

#include <functional>
#include <vector>

#include "analysis/reduction_choice.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/candidate_timing.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

using analysis::ReductionCandidate;
using analysis::ReductionChoice;

// Ring is timed on regions whose longer side is at most this many cores.
inline constexpr int kRingTimedCores = 64;

// Whether the scenario asks for any reduction: auto.
bool reduction_auto(const Scenario& sc);

// The candidates of one choice on `region` (the current plan's first layer
// region), in order: chain, tree, two-level, k-tree with each K (`given_k`
// alone when > 0), ring.
std::vector<ReductionCandidate> reduction_candidates(const fabric::Rect& region, int given_k);

// Chooses every reduction the scenario leaves to auto, in order: the
// layer-wide one, then each matrix's. `req` is the request planned so far
// (layer groups chosen); it receives the chosen schemes. `placement` is its
// plan, and receives the chosen one's. Throws fabric::FitError when no
// candidate of a choice fits, with each candidate's reason. `memo`: the
// candidates timed before (plan_system's rounds).
std::vector<ReductionChoice> choose_reductions(
    const Scenario& sc, PlacementRequest& req, Placement& placement,
    const std::function<Placement(const PlacementRequest&)>& plan, CandidateMemo* memo = nullptr);

}  // namespace wafersim::sim
