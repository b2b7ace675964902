// placement.layer_groups: auto. The whole-region strategy's layer-group
// count chosen for the scenario's workload from the simulated fabric, not a
// formula: every candidate count is planned, checked against the routers'
// colors and timed on an idle fabric model, and the best for the workload is
// allocated and taken (sim/engine/candidate_timing.hpp: how, and the
// objective; ties go to fewer groups). Plain C++ (no SystemC).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/layer_group_choice.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/candidate_timing.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

using analysis::LayerGroupCandidate;
using analysis::LayerGroupChoice;

// The counts tried for a model of `layers` layers on one wafer: 1, the
// powers of two and the divisors of the layers, up to the layers, increasing.
std::vector<int> layer_group_counts(int layers);

// The index of the best of `candidates` (those that fit) for `users` users,
// by the objective above; -1 when none fits.
int best_layer_groups(const std::vector<LayerGroupCandidate>& candidates, int users);

// Plans, times and predicts every candidate count for the scenario (whose
// placement.layer_groups is auto) and returns them with the choice.
// `plan` plans the scenario with the request it is given (plan_system);
// `placement` receives the chosen count's plan. Throws fabric::FitError
// when no candidate fits (with each count's reason), or when the scenario
// needs more than one wafer (the timing covers one wafer). `memo`: the
// candidates timed before (plan_system's rounds).
LayerGroupChoice choose_layer_groups(const Scenario& sc, const PlacementRequest& req,
                                     Placement& placement,
                                     const std::function<Placement(const PlacementRequest&)>& plan,
                                     CandidateMemo* memo = nullptr);

// One candidate's timing on its plan, one token alone (time_candidate).
LayerGroupCandidate time_layer_groups(const Scenario& sc, const PlacementRequest& req,
                                      const Placement& pl, int groups);

}  // namespace wafersim::sim
