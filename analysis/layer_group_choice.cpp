#include "analysis/layer_group_choice.hpp"

#include <fmt/format.h>

namespace wafersim::analysis {

std::vector<std::string> layer_group_choice_lines(const LayerGroupChoice& ch) {
  std::vector<std::string> out;
  out.push_back(fmt::format(
      "layer groups: auto chose {} for {} ({} user{}, decode token at position {}; "
      "chosen in {:.1f} s of host time)",
      ch.chosen, ch.objective, ch.users, ch.users == 1 ? "" : "s", ch.position, ch.host_s));
  out.push_back(
      fmt::format("  {:>6} {:>11} {:>9} {:>9} {:>8} {:>11} {:>11} {:>9} {:>11} {:>10} {:>11}",
                  "groups", "region", "layer", "hand-over", "head", "token", "stream", "loaded",
                  "step", "tok/s/user", "aggregate"));
  for (const LayerGroupCandidate& c : ch.candidates) {
    if (!c.fits) {
      out.push_back(fmt::format("  {:>6} does not fit: {}", c.groups, c.why_not));
      continue;
    }
    const bool bound = ch.users > 1 && c.loaded_tokens == 0;
    out.push_back(fmt::format(
        "  {:>6} {:>11} {:>9} {:>9} {:>8} {:>11} {:>11} {:>9} {:>11} {:>10} {:>11}{}", c.groups,
        fmt::format("{} x {}", c.region_width, c.region_height), c.layer_cycles, c.handover_cycles,
        c.head_cycles, c.token_cycles,
        c.loaded_tokens > 0 ? fmt::format("{}/{}", c.loaded_tokens, c.loaded_spacing_cycles)
                            : std::string("-"),
        c.loaded_tokens > 0 ? std::to_string(c.loaded_layer_cycles) : std::string("-"),
        fmt::format("{}{}", bound ? ">=" : "", c.step_cycles),
        fmt::format("{}{:.0f}", bound ? "<=" : "", c.tokens_per_s_per_user),
        fmt::format("{}{:.0f}", bound ? "<=" : "", c.aggregate_tokens_per_s),
        c.groups == ch.chosen ? "  <- chosen" : ""));
  }
  out.push_back(
      "  (cycles on the fabric model. layer, hand-over, head: one token alone; token = layers "
      "x layer + (groups-1) x hand-over + head. stream: tokens/spacing, the users' tokens "
      "through one group's region in steady state (one layer each, entering every token / "
      "(users x the group's layers) cycles), a stage one token at a time; loaded: their mean "
      "cycles per layer (later half); step = max(layers x loaded + (groups-1) x hand-over + "
      "head, users x longest stage). <=, >=: bounds of a candidate not timed loaded, its "
      "one-user bound below the best)");
  return out;
}

nlohmann::ordered_json layer_group_choice_json(const LayerGroupChoice& ch) {
  nlohmann::ordered_json j;
  j["chosen"] = ch.chosen;
  j["objective"] = ch.objective;
  j["users"] = ch.users;
  j["position"] = ch.position;
  j["candidates"] = nlohmann::ordered_json::array();
  for (const LayerGroupCandidate& c : ch.candidates) {
    nlohmann::ordered_json o;
    o["groups"] = c.groups;
    o["fits"] = c.fits;
    if (!c.fits) {
      o["why_not"] = c.why_not;
      j["candidates"].push_back(o);
      continue;
    }
    o["grid"] = c.grid;
    o["region_width"] = c.region_width;
    o["region_height"] = c.region_height;
    o["layer_cycles"] = c.layer_cycles;
    o["handover_cycles"] = c.handover_cycles;
    o["head_cycles"] = c.head_cycles;
    o["longest_stage_cycles"] = c.longest_stage_cycles;
    o["token_cycles"] = c.token_cycles;
    o["loaded_tokens"] = c.loaded_tokens;
    o["loaded_layers"] = c.loaded_layers;
    o["loaded_spacing_cycles"] = c.loaded_spacing_cycles;
    o["loaded_layer_cycles"] = c.loaded_layer_cycles;
    o["step_cycles"] = c.step_cycles;
    o["tokens_per_s_per_user"] = c.tokens_per_s_per_user;
    o["aggregate_tokens_per_s"] = c.aggregate_tokens_per_s;
    j["candidates"].push_back(o);
  }
  return j;
}

}  // namespace wafersim::analysis
