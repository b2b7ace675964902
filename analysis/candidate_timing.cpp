#include "analysis/candidate_timing.hpp"

#include <fmt/format.h>

namespace wafersim::analysis {

std::string timed_candidate_header() {
  return fmt::format("{:>11} {:>9} {:>9} {:>8} {:>11} {:>11} {:>9} {:>11} {:>10} {:>11}", "region",
                     "layer", "hand-over", "head", "token", "stream", "loaded", "step",
                     "tok/s/user", "aggregate");
}

std::string timed_candidate_columns(const TimedCandidate& c, int users) {
  const bool bound = users > 1 && c.loaded_tokens == 0;
  return fmt::format("{:>11} {:>9} {:>9} {:>8} {:>11} {:>11} {:>9} {:>11} {:>10} {:>11}",
                     fmt::format("{} x {}", c.region_width, c.region_height), c.layer_cycles,
                     c.handover_cycles, c.head_cycles, c.token_cycles,
                     c.loaded_tokens > 0
                         ? fmt::format("{}/{}", c.loaded_tokens, c.loaded_spacing_cycles)
                         : std::string("-"),
                     c.loaded_tokens > 0 ? std::to_string(c.loaded_layer_cycles) : std::string("-"),
                     fmt::format("{}{}", bound ? ">=" : "", c.step_cycles),
                     fmt::format("{}{:.0f}", bound ? "<=" : "", c.tokens_per_s_per_user),
                     fmt::format("{}{:.0f}", bound ? "<=" : "", c.aggregate_tokens_per_s));
}

std::string timed_candidate_note() {
  return "  (cycles on the fabric model. layer, hand-over, head: one token alone; token = layers "
         "x layer + (groups-1) x hand-over + head. stream: tokens/spacing, the users' tokens "
         "through one group's region in steady state (one layer each, entering every token / "
         "(users x the group's layers) cycles), a stage one token at a time; loaded: their mean "
         "cycles per layer (later half); step = max(layers x loaded + (groups-1) x hand-over + "
         "head, users x longest stage). <=, >=: bounds of a candidate not timed loaded, its "
         "one-user bound below the best)";
}

std::string timed_wafers_note(int wafers) {
  if (wafers <= 1) return "";
  return fmt::format(
      "\n  (on {} wafers: timed on the last, which holds the head; token and step add groups-1 "
      "hand-overs on every wafer, a crossing between each two (onto the last from the wafer "
      "before) and the next token's embedding back to the first wafer: crossing_cycles and "
      "return_cycles in the JSON)",
      wafers);
}

void add_timed_candidate_json(const TimedCandidate& c, nlohmann::ordered_json& o) {
  o["grid"] = c.grid;
  o["wafers"] = c.wafers;
  o["region_width"] = c.region_width;
  o["region_height"] = c.region_height;
  o["layer_cycles"] = c.layer_cycles;
  o["handover_cycles"] = c.handover_cycles;
  o["head_cycles"] = c.head_cycles;
  o["crossing_cycles"] = c.crossing_cycles;
  o["return_cycles"] = c.return_cycles;
  o["longest_stage_cycles"] = c.longest_stage_cycles;
  o["token_cycles"] = c.token_cycles;
  o["loaded_tokens"] = c.loaded_tokens;
  o["loaded_layers"] = c.loaded_layers;
  o["loaded_spacing_cycles"] = c.loaded_spacing_cycles;
  o["loaded_layer_cycles"] = c.loaded_layer_cycles;
  o["step_cycles"] = c.step_cycles;
  o["tokens_per_s_per_user"] = c.tokens_per_s_per_user;
  o["aggregate_tokens_per_s"] = c.aggregate_tokens_per_s;
}

}  // namespace wafersim::analysis
