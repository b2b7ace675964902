// placement.layer_groups: auto. The whole-region strategy's layer-group
// count chosen for the scenario's workload from the simulated fabric, not a
// formula: every candidate count that plans (the strategy's checks, SRAM for
// the weights and the workload's KV cache among them) and whose routes fit
// the routers' colors is lowered, and on an idle fabric model (the executor's flow
// level, as `wafersim bench op layer`) one decode token at the workload's
// context is timed through the first layer, the first layer of the next
// group (the hand-over) and the head; then, for more than one user, a
// stream of tokens through one group's region as the users' tokens pass it
// in steady state (spread evenly over the step, each stage one token at a
// time as the engine's stage modules take them, links and cores shared)
// gives the mean time a token spends per layer under that load:
//   token  = layers x layer + (groups - 1) x hand-over + head   (one user)
//   step   = max(layers x loaded layer + (groups - 1) x hand-over + head,
//                users x the layer's longest stage)             (users pipelined)
// A candidate whose one-user bound (users / max(token, users x longest
// stage)) is already below the best timed figure is not timed loaded.
// The best count is then allocated (the allocator has the last word on
// SRAM; one that fails drops out and the next best is tried).
// The objective: one user, the shortest token; more users, the highest
// aggregate tokens/s (users / step), a tie (within kThroughputTie) going to
// the shorter token, then to fewer groups. Plain C++ (no SystemC).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/layer_group_choice.hpp"
#include "sim/config/scenario.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// Aggregate throughputs closer than this fraction count as a tie (the
// prediction does not resolve finer differences: docs/results.md).
inline constexpr double kThroughputTie = 0.01;

// The users' tokens timed as a stream through one group's region: at most
// this many tokens (host time grows with them: a whole-wafer layer takes
// ~0.2 s of host time per token).
inline constexpr int kMaxStreamTokens = 16;

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
// needs more than one wafer (the timing covers one wafer).
LayerGroupChoice choose_layer_groups(const Scenario& sc, const PlacementRequest& req,
                                     Placement& placement,
                                     const std::function<Placement(const PlacementRequest&)>& plan);

// One candidate's timing on its plan, one token alone (every candidate),
// then (more than one user) the users' tokens as a stream through one
// group's region, which sets its step and figures.
LayerGroupCandidate time_layer_groups(const Scenario& sc, const PlacementRequest& req,
                                      const Placement& pl, int groups);
void time_layer_groups_loaded(const Scenario& sc, const PlacementRequest& req, const Placement& pl,
                              LayerGroupCandidate& candidate);

}  // namespace wafersim::sim
