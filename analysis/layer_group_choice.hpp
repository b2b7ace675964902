// placement.layer_groups: auto, as results carry it: the whole-region
// layer-group counts tried, what the fabric model predicted for each, and
// the count chosen (sim/engine/layer_group_choice.hpp makes it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wafersim::analysis {

// One candidate count and what the fabric model predicts for it.
struct LayerGroupCandidate {
  int groups = 0;
  bool fits = false;
  std::string why_not;  // when it does not fit: the planner's or the router's reason
  std::string grid;     // the planner's note: grid and region size
  int region_width = 0, region_height = 0;
  std::uint64_t layer_cycles = 0;          // one token through the first layer, idle fabric
  std::uint64_t handover_cycles = 0;       // what entering the next group's region adds to a layer
  std::uint64_t head_cycles = 0;           // final norm, lm_head and the choice of the token
  std::uint64_t longest_stage_cycles = 0;  // the layer's longest pipeline stage (idle)
  std::uint64_t token_cycles = 0;          // predicted token latency, one user
  // More than one user: `loaded_tokens` tokens timed as a stream through
  // one group's region (its `loaded_layers` layers in turn), one entering
  // every `loaded_spacing_cycles` (the step spread over the users and the
  // group's layers), each stage one token at a time, links and cores shared;
  // the mean cycles per layer of the later half. loaded_tokens 0: not timed,
  // its one-user bound already below the best (step and figures are bounds).
  int loaded_tokens = 0;
  int loaded_layers = 0;
  std::uint64_t loaded_spacing_cycles = 0;
  std::uint64_t loaded_layer_cycles = 0;
  std::uint64_t step_cycles = 0;  // predicted steady step between a user's tokens
  double tokens_per_s_per_user = 0.0;
  double aggregate_tokens_per_s = 0.0;
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
