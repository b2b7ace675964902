#include "sim/engine/layer_group_choice.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
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
  // The counts for the model's layers and, on several wafers (where each
  // wafer's layers are grouped, at most as many groups as it has layers),
  // those for the most layers a wafer holds in each plan that fits: tried
  // in increasing order as they appear. A count whose plan an earlier count
  // already gave (more groups than a wafer's layers) shares its figures.
  std::set<int> pending;
  for (const int g : layer_group_counts(sc.model.num_layers)) pending.insert(g);
  std::deque<LayerGroupCandidate> candidates;  // stable: plans point at them
  std::vector<CandidatePlan> plans;
  int last = 0;
  for (auto next = pending.begin(); next != pending.end(); next = pending.upper_bound(last)) {
    const int g = last = *next;
    LayerGroupCandidate& figures = candidates.emplace_back();
    figures.groups = g;
    CandidatePlan& cand = plans.emplace_back();
    cand.request = req;
    cand.request.layer_groups = g;
    cand.figures = &figures;
    // Its plan: the memo's (a second round of the choices), or planned once
    // here, where a FitError is its answer.
    const auto* hit = memo ? memo->find(cand.request) : nullptr;
    std::optional<Placement> planned;
    std::string why_not;
    if (hit) {
      if (hit->first.fits) planned = hit->second;
    } else {
      try {
        planned = plan(cand.request);
      } catch (const fabric::FitError& e) {
        why_not = e.what();
      }
    }
    const CandidatePlan* same = nullptr;
    std::size_t same_index = 0;
    if (planned)
      for (std::size_t k = 0; k + 1 < plans.size() && !same; ++k)
        if (plans[k].figures->fits && plans[k].plan.wafers == planned->wafers &&
            plans[k].plan.layers == planned->layers && plans[k].plan.head == planned->head)
          same = &plans[k], same_index = k;
    if (same) {
      *cand.figures = *same->figures;
      figures.same_plan_as = candidates[same_index].groups;
      cand.plan = std::move(*planned);
    } else if (planned) {
      plan_and_time(
          sc, cand, [&](const PlacementRequest&) { return *planned; }, memo);
    } else if (hit) {
      plan_and_time(sc, cand, plan, memo);  // the memo's answer: it does not fit
    } else {
      figures.fits = false;
      figures.why_not = why_not;
      if (memo) memo->store(cand.request, figures, Placement{});
    }
    if (cand.figures->fits && cand.plan.wafers > 1) {
      std::vector<int> on(static_cast<std::size_t>(cand.plan.wafers), 0);
      for (const LayerStage& st : cand.plan.layers) ++on[static_cast<std::size_t>(st.wafer)];
      for (const int c : layer_group_counts(*std::max_element(on.begin(), on.end())))
        pending.insert(c);
    }
  }
  // The counts with plans of their own are timed loaded and allocated; one
  // that shares another's plan then takes that one's final figures.
  std::vector<std::size_t> own_index;
  std::vector<CandidatePlan> own;
  for (std::size_t k = 0; k < plans.size(); ++k)
    if (candidates[k].same_plan_as == 0) {
      own_index.push_back(k);
      own.push_back(std::move(plans[k]));
    }
  const int settled = settle_candidates(sc, choice.users, own, memo);
  for (std::size_t i = 0; i < own.size(); ++i) plans[own_index[i]] = std::move(own[i]);
  const int best =
      settled < 0 ? -1 : static_cast<int>(own_index[static_cast<std::size_t>(settled)]);
  for (LayerGroupCandidate& c : candidates)
    if (c.same_plan_as > 0)
      for (const LayerGroupCandidate& o : candidates)
        if (o.groups == c.same_plan_as) static_cast<TimedCandidate&>(c) = o;
  choice.candidates.assign(candidates.begin(), candidates.end());
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
