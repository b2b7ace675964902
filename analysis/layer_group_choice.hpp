// placement.layer_groups: auto, as results carry it: the whole-region
// layer-group counts tried, what the fabric model predicted for each, and
// the count chosen (sim/engine/layer_group_choice.hpp makes it).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/candidate_timing.hpp"

namespace wafersim::analysis {

// One candidate count and what the fabric model predicts for it.
struct LayerGroupCandidate : TimedCandidate {
  int groups = 0;
  // On several wafers, more groups than a wafer has layers can give an
  // earlier count's plan: that count (its figures copied), else 0.
  int same_plan_as = 0;
};

struct LayerGroupChoice {
  int chosen = 0;         // the chosen count (0 before a choice)
  int users = 1;          // the workload's users the prediction is for
  int position = 0;       // the decode token's position (its context) in the timing
  std::string objective;  // "lowest token latency (1 user)" or "highest aggregate tokens/s"
  std::vector<LayerGroupCandidate> candidates;  // in increasing count
  double host_s = 0.0;  // host time of the whole choice (not a result: varies run to run)
};

// The choice as text lines for reports (a header line, a table, a note).
std::vector<std::string> layer_group_choice_lines(const LayerGroupChoice& choice);

// The choice as JSON (host_s left out: results are deterministic).
nlohmann::ordered_json layer_group_choice_json(const LayerGroupChoice& choice);

}  // namespace wafersim::analysis
