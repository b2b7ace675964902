#include "analysis/layer_group_choice.hpp"

#include <fmt/format.h>

namespace wafersim::analysis {

std::vector<std::string> layer_group_choice_lines(const LayerGroupChoice& ch) {
  std::vector<std::string> out;
  out.push_back(fmt::format(
      "layer groups: auto chose {} for {} ({} user{}, decode token at position {}; "
      "chosen in {:.1f} s of host time)",
      ch.chosen, ch.objective, ch.users, ch.users == 1 ? "" : "s", ch.position, ch.host_s));
  out.push_back(fmt::format("  {:>6} {}", "groups", timed_candidate_header()));
  for (const LayerGroupCandidate& c : ch.candidates) {
    if (!c.fits) {
      out.push_back(fmt::format("  {:>6} does not fit: {}", c.groups, c.why_not));
      continue;
    }
    out.push_back(fmt::format(
        "  {:>6} {}{}{}", c.groups, timed_candidate_columns(c, ch.users),
        c.same_plan_as > 0 ? fmt::format("  (the plan of {})", c.same_plan_as) : std::string(),
        c.groups == ch.chosen ? "  <- chosen" : ""));
  }
  out.push_back(timed_candidate_note() + timed_wafers_note(candidates_wafers(ch.candidates)));
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
    if (c.same_plan_as > 0) o["same_plan_as"] = c.same_plan_as;
    add_timed_candidate_json(c, o);
    j["candidates"].push_back(o);
  }
  return j;
}

}  // namespace wafersim::analysis
