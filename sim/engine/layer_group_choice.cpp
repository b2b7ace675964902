#include "sim/engine/layer_group_choice.hpp"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>

namespace wafersim::sim {

std::vector<int> layer_group_counts(int layers) {
  std::set<int> counts;
  for (int g = 1; g <= layers; g *= 2) counts.insert(g);
  for (int g = 1; g <= layers; ++g)
    if (layers % g == 0) counts.insert(g);
  return {counts.begin(), counts.end()};
}

int best_layer_groups(const std::vector<LayerGroupCandidate>& cs, int users) {
  std::vector<const TimedCandidate*> figures;
  for (const LayerGroupCandidate& c : cs) figures.push_back(&c);
  return best_candidate(figures, users);  // ties: the earlier, fewer groups
}

LayerGroupCandidate time_layer_groups(const Scenario& sc, const PlacementRequest& req,
                                      const Placement& pl, int groups) {
  LayerGroupCandidate c;
  c.groups = groups;
  time_candidate(sc, req, pl, c);
  return c;
}

LayerGroupChoice choose_layer_groups(const Scenario& sc, const PlacementRequest& req,
                                     Placement& placement,
                                     const std::function<Placement(const PlacementRequest&)>& plan,
                                     CandidateMemo* memo) {
  const auto t0 = std::chrono::steady_clock::now();
  LayerGroupChoice choice;
  choice.users = std::max(1, req.users);
  choice.position = std::max(0, req.context_tokens - 1);
  choice.objective = objective_name(choice.users);
  // The counts for the model's layers; a plan on several wafers groups each
  // wafer's layers (at most as many groups as it has layers), so once one
  // group's plan shows the most layers a wafer holds, the counts are those
  // for that many (1 group is a count of both).
  std::vector<int> counts = layer_group_counts(sc.model.num_layers);
  choice.candidates.reserve(counts.size());
  std::vector<CandidatePlan> plans;
  plans.reserve(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const int g = counts[i];
    choice.candidates.emplace_back().groups = g;
    CandidatePlan& cand = plans.emplace_back();
    cand.request = req;
    cand.request.layer_groups = g;
    cand.figures = &choice.candidates.back();
    plan_and_time(sc, cand, plan, memo);
    if (i == 0 && cand.figures->fits && cand.plan.wafers > 1) {
      std::vector<int> on(static_cast<std::size_t>(cand.plan.wafers), 0);
      for (const LayerStage& st : cand.plan.layers) ++on[static_cast<std::size_t>(st.wafer)];
      counts = layer_group_counts(*std::max_element(on.begin(), on.end()));
      choice.candidates.reserve(counts.size());
      plans.reserve(counts.size());
      plans.front().figures = &choice.candidates.front();  // the reserve may have moved it
    }
  }
  const int best = settle_candidates(sc, choice.users, plans, memo);
  if (best < 0) {
    std::string why;
    for (const LayerGroupCandidate& c : choice.candidates)
      why += fmt::format("; {} group{}: {}", c.groups, c.groups == 1 ? "" : "s", c.why_not);
    throw fabric::FitError(fmt::format(
        "placement.layer_groups: auto: no candidate count of layer groups fits{}", why));
  }
  choice.chosen = choice.candidates[static_cast<std::size_t>(best)].groups;
  placement = std::move(plans[static_cast<std::size_t>(best)].plan);
  choice.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return choice;
}

}  // namespace wafersim::sim
