// placement.reduction: auto (and placement.matrices.<m>.reduction: auto), as
// results carry it: the reduction schemes tried, what the fabric model
// predicted for each, and the scheme chosen (sim/engine/reduction_choice.hpp
// makes it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/candidate_timing.hpp"

namespace wafersim::analysis {

// One candidate scheme and what the fabric model predicts for it.
struct ReductionCandidate : TimedCandidate {
  std::string scheme;        // "chain", "tree", "two-level", "k-tree" or "ring"
  int reduction_groups = 0;  // k-tree: its K per line; 0: round(sqrt n) per line of n cores
  // Fits the routers' colors but was not timed, and why (ring on long lines).
  std::string not_timed;
};

// A candidate's name in reports: "two-level", "k-tree K=8", "k-tree K=sqrt".
std::string reduction_candidate_name(const ReductionCandidate& c);

struct ReductionChoice {
  std::string key;        // the scenario key chosen: "placement.reduction" or
                          // "placement.matrices.<kind>.reduction"
  int chosen = -1;        // index into candidates (-1 before a choice)
  int layer_groups = 1;   // the whole-region layer groups the candidates were planned with
  int users = 1;          // the workload's users the prediction is for
  int position = 0;       // the decode token's position (its context) in the timing
  std::string objective;  // as LayerGroupChoice's
  std::vector<ReductionCandidate> candidates;  // in order of simplicity (ties go to the first)
  double host_s = 0.0;  // host time of the whole choice (not a result: varies run to run)
};

// The key as reports name it: "reduction", "matrices.o.reduction".
std::string reduction_choice_key(const ReductionChoice& choice);

// The choice as text lines for reports (a header line, a table, a note).
std::vector<std::string> reduction_choice_lines(const ReductionChoice& choice);

// The choices as JSON, one object each (host_s left out: results are deterministic).
nlohmann::ordered_json reduction_choices_json(const std::vector<ReductionChoice>& choices);

}  // namespace wafersim::analysis
