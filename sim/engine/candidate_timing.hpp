// Candidate placements timed on the simulated fabric, not a formula: what
// every automatic placement choice (placement.layer_groups: auto,
// sim/engine/layer_group_choice.hpp; placement.reduction: auto,
// sim/engine/reduction_choice.hpp) does with its candidates. A candidate is
// a placement request; it is planned (the strategy's checks, SRAM for the
// weights and the workload's KV cache among them), its routes checked
// against the routers' colors, lowered, and on an idle fabric model (the
// executor's flow level, as `wafersim bench op layer`) one decode token at
// the workload's context is timed through the first layer, the first layer
// of the next group (the hand-over) and the head; then, for more than one
// user, a stream of tokens through one group's region as the users' tokens
// pass it in steady state (spread evenly over the step, each stage one token
// at a time as the engine's stage modules take them, links and cores
// shared) gives the mean time a token spends per layer under that load:
//   token  = layers x layer + (groups - 1) x hand-over + head   (one user)
//   step   = max(layers x loaded layer + (groups - 1) x hand-over + head,
//                users x the layer's longest stage)             (users pipelined)
// (on W wafers: groups - 1 hand-overs on each, and W - 1 crossings between
// them, each the timed wafer's crossing).
// A candidate whose one-user bound (users / max(token, users x longest
// stage)) is already below the best timed figure is not timed loaded.
// The best is then allocated (the allocator has the last word on SRAM; one
// that fails drops out and the next best is tried).
// The objective: one user, the shortest token; more users, the highest
// aggregate tokens/s (users / step), a tie (within kThroughputTie) going to
// the shorter token, then to the earlier candidate (each choice lists its
// candidates simplest first). Plain C++ (no SystemC).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/candidate_timing.hpp"
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

using analysis::TimedCandidate;

// A candidate: the request it is planned with (its layer_groups the
// whole-region groups), its plan once planned, and where its figures go.
struct CandidatePlan {
  PlacementRequest request;
  Placement plan;
  TimedCandidate* figures = nullptr;
};

// Candidates already planned and timed, by what their requests choose (the
// layer groups and the schemes): when both layer_groups and reduction are
// auto, the second round meets candidates the first one timed.
class CandidateMemo {
 public:
  // The entry for a request, or nullptr.
  const std::pair<TimedCandidate, Placement>* find(const PlacementRequest& r) const;
  void store(const PlacementRequest& r, const TimedCandidate& figures, const Placement& plan);

 private:
  std::map<std::string, std::pair<TimedCandidate, Placement>> entries_;
};

// The index of the best of `candidates` (those that fit) for `users` users,
// by the objective above (ties: the earlier); -1 when none fits.
int best_candidate(const std::vector<const TimedCandidate*>& candidates, int users);

// The objective's name for `users` users, as results show it.
std::string objective_name(int users);

// Plans the candidate's request with `plan` (plan_system's planning), checks
// its routes' colors and times one token alone (time_candidate); a FitError
// on the way marks it as not fitting, with the reason.
// With a memo, a request it holds is not planned or timed again.
void plan_and_time(const Scenario& sc, CandidatePlan& candidate,
                   const std::function<Placement(const PlacementRequest&)>& plan,
                   CandidateMemo* memo = nullptr);

// Times the fitting candidates loaded (more than one user, those whose bound
// could still win), allocates the best (the next best where the allocator
// refuses it) and returns its index; -1 when none fits.
int settle_candidates(const Scenario& sc, int users, std::vector<CandidatePlan>& candidates,
                      CandidateMemo* memo = nullptr);

// One candidate's timing on its plan: one token alone; then (more than one
// user) the users' tokens as a stream through one group's region, which
// sets its step and figures. A plan on several wafers is timed on the wafer
// that holds the head (its first layer, its next group's, the head, and the
// crossing onto it from the wafer before), with every wafer's hand-overs
// between groups and every crossing counted.
void time_candidate(const Scenario& sc, const PlacementRequest& req, const Placement& pl,
                    TimedCandidate& candidate);
void time_candidate_loaded(const Scenario& sc, const PlacementRequest& req, const Placement& pl,
                           TimedCandidate& candidate);

}  // namespace wafersim::sim
