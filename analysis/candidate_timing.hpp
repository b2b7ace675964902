// A placement candidate timed on the fabric model, as results carry it: the
// figures every automatic choice (placement.layer_groups: auto,
// placement.reduction: auto) shows for each candidate it tried
// (sim/engine/candidate_timing.hpp makes them), and how they are shown.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace wafersim::analysis {

// One candidate plan and what the fabric model predicts for it.
struct TimedCandidate {
  bool fits = false;
  std::string why_not;  // when it does not fit: the planner's, router's or allocator's reason
  std::string grid;     // the planner's note: grid and region size
  int wafers = 1;       // the plan's wafers (more than one: timed on the head's wafer)
  int region_width = 0, region_height = 0;
  std::uint64_t layer_cycles = 0;          // one token through the first layer, idle fabric
  std::uint64_t handover_cycles = 0;       // what entering the next group's region adds to a layer
  std::uint64_t head_cycles = 0;           // final norm, lm_head and the choice of the token
  std::uint64_t crossing_cycles = 0;       // several wafers: onto a wafer from the one before
  std::uint64_t return_cycles = 0;         // several wafers: the next token's embedding to wafer 0
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

// The table's columns after a candidate's own (region, cycles, figures):
// the header, and one fitting candidate's row (`users`: the choice's).
std::string timed_candidate_header();
std::string timed_candidate_columns(const TimedCandidate& c, int users);
// The table's closing note: what the columns mean.
std::string timed_candidate_note();
// For candidates on more than one wafer, a line more: what the timing of one
// wafer stands for ("" for one wafer).
std::string timed_wafers_note(int wafers);
// The most wafers any fitting candidate of `candidates` is on.
template <class Candidates>
int candidates_wafers(const Candidates& candidates) {
  int w = 1;
  for (const TimedCandidate& c : candidates)
    if (c.fits && c.wafers > w) w = c.wafers;
  return w;
}

// A fitting candidate's figures added to its JSON object (`grid` to
// `aggregate_tokens_per_s`, as docs/results-format.md lists them).
void add_timed_candidate_json(const TimedCandidate& c, nlohmann::ordered_json& o);

}  // namespace wafersim::analysis
