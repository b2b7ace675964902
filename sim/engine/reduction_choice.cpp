#include "sim/engine/reduction_choice.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace wafersim::sim {

namespace {

// Sets one choice's scheme (the layer-wide one: no kind) in a request.
void apply(PlacementRequest& r, std::optional<MatrixKind> kind, ReductionScheme scheme,
           int groups) {
  if (!kind) {
    r.reduction = scheme;
    r.reduction_groups = groups;
    return;
  }
  MatrixOverride& ov = r.matrices[*kind];
  ov.reduction = scheme;
  ov.reduction_groups = groups;
}

}  // namespace

bool reduction_auto(const Scenario& sc) {
  return sc.placement.reduction_auto || !sc.placement.matrix_reduction_auto.empty();
}

std::vector<ReductionCandidate> reduction_candidates(const fabric::Rect& region, int given_k) {
  std::vector<ReductionCandidate> out;
  auto add = [&](ReductionScheme s, int k) {
    ReductionCandidate c;
    c.scheme = reduction_name(s);
    c.reduction_groups = k;
    out.push_back(c);
  };
  add(ReductionScheme::chain, 0);
  add(ReductionScheme::tree, 0);
  add(ReductionScheme::two_level, 0);
  if (given_k > 0) {
    add(ReductionScheme::k_tree, given_k);
  } else {
    // WaferLLM's round(sqrt n) per line, then half and twice the square root
    // of the region's mean line.
    add(ReductionScheme::k_tree, 0);
    const double root = std::sqrt(std::sqrt(static_cast<double>(region.width) * region.height));
    std::vector<int> ks;
    for (const double k : {root / 2.0, root * 2.0}) {
      const int K = std::max(2, static_cast<int>(std::lround(k)));
      if (std::find(ks.begin(), ks.end(), K) == ks.end()) ks.push_back(K);
    }
    for (const int K : ks) add(ReductionScheme::k_tree, K);
  }
  add(ReductionScheme::ring, 0);
  return out;
}

std::vector<ReductionChoice> choose_reductions(
    const Scenario& sc, PlacementRequest& req, Placement& placement,
    const std::function<Placement(const PlacementRequest&)>& plan, CandidateMemo* memo) {
  std::vector<std::optional<MatrixKind>> keys;
  if (sc.placement.reduction_auto) keys.emplace_back(std::nullopt);
  for (const MatrixKind k : sc.placement.matrix_reduction_auto) keys.emplace_back(k);
  std::vector<ReductionChoice> out;
  for (const std::optional<MatrixKind> kind : keys) {
    const auto t0 = std::chrono::steady_clock::now();
    ReductionChoice ch;
    ch.key = kind ? fmt::format("placement.matrices.{}.reduction", matrix_kind_name(*kind))
                  : std::string("placement.reduction");
    ch.layer_groups = req.layer_groups;
    ch.users = std::max(1, req.users);
    ch.position = std::max(0, req.context_tokens - 1);
    ch.objective = objective_name(ch.users);
    // The K the scenario gives this key's k-tree (0: none).
    int given_k = sc.placement.reduction_groups;
    if (kind) {
      const auto it = sc.placement.matrices.find(*kind);
      if (it != sc.placement.matrices.end() && it->second.reduction_groups > 0)
        given_k = it->second.reduction_groups;
    }
    const fabric::Rect region = placement.layers.front().strip;
    ch.candidates = reduction_candidates(region, given_k);
    // A matrix's K = 0 falls back to the layer-wide reduction_groups.
    if (kind && req.reduction_groups > 0)
      for (ReductionCandidate& c : ch.candidates)
        if (c.scheme == "k-tree" && c.reduction_groups == 0)
          c.reduction_groups = req.reduction_groups;
    std::vector<CandidatePlan> plans(ch.candidates.size());
    const int longest = std::max(region.width, region.height);
    for (std::size_t i = 0; i < ch.candidates.size(); ++i) {
      ReductionCandidate& c = ch.candidates[i];
      const ReductionScheme scheme = *parse_reduction(c.scheme);
      plans[i].figures = &c;
      plans[i].request = req;
      apply(plans[i].request, kind, scheme,
            scheme == ReductionScheme::k_tree ? c.reduction_groups
                                              : (kind ? 0 : req.reduction_groups));
      if (scheme == ReductionScheme::ring && longest > kRingTimedCores) {
        c.not_timed = fmt::format(
            "its lines of up to {} cores are longer than {} (ring passes each of a line's n "
            "chunks 2(n - 1) times: minutes of host time through a layer of this region)",
            longest, kRingTimedCores);
        continue;
      }
      plan_and_time(sc, plans[i], plan, memo);
    }
    ch.chosen = settle_candidates(sc, ch.users, plans, memo);
    if (ch.chosen < 0) {
      std::string why;
      for (const ReductionCandidate& c : ch.candidates)
        why += fmt::format("; {}: {}", analysis::reduction_candidate_name(c),
                           c.not_timed.empty() ? c.why_not : "not timed: " + c.not_timed);
      throw fabric::FitError(fmt::format("{}: auto: no candidate scheme fits{}", ch.key, why));
    }
    CandidatePlan& best = plans[static_cast<std::size_t>(ch.chosen)];
    req = best.request;
    placement = std::move(best.plan);
    ch.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.push_back(std::move(ch));
  }
  return out;
}

}  // namespace wafersim::sim
