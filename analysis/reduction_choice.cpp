#include "analysis/reduction_choice.hpp"

#include <fmt/format.h>

namespace wafersim::analysis {

std::string reduction_candidate_name(const ReductionCandidate& c) {
  if (c.scheme != "k-tree") return c.scheme;
  return c.reduction_groups > 0 ? fmt::format("k-tree K={}", c.reduction_groups)
                                : std::string("k-tree K=sqrt");
}

std::string reduction_choice_key(const ReductionChoice& ch) {
  const std::string prefix = "placement.";
  return ch.key.compare(0, prefix.size(), prefix) == 0 ? ch.key.substr(prefix.size()) : ch.key;
}

std::vector<std::string> reduction_choice_lines(const ReductionChoice& ch) {
  std::vector<std::string> out;
  const std::string chosen =
      ch.chosen >= 0 ? reduction_candidate_name(ch.candidates[static_cast<std::size_t>(ch.chosen)])
                     : std::string("nothing");
  out.push_back(fmt::format(
      "{}: auto chose {} for {} ({} user{}, decode token at position {}, {} layer group{}; "
      "chosen in {:.1f} s of host time)",
      reduction_choice_key(ch), chosen, ch.objective, ch.users, ch.users == 1 ? "" : "s",
      ch.position, ch.layer_groups, ch.layer_groups == 1 ? "" : "s", ch.host_s));
  out.push_back(fmt::format("  {:>13} {}", "scheme", timed_candidate_header()));
  for (std::size_t i = 0; i < ch.candidates.size(); ++i) {
    const ReductionCandidate& c = ch.candidates[i];
    const std::string name = reduction_candidate_name(c);
    if (!c.not_timed.empty())
      out.push_back(fmt::format("  {:>13} not timed: {}", name, c.not_timed));
    else if (!c.fits)
      out.push_back(fmt::format("  {:>13} does not fit: {}", name, c.why_not));
    else
      out.push_back(fmt::format("  {:>13} {}{}", name, timed_candidate_columns(c, ch.users),
                                static_cast<int>(i) == ch.chosen ? "  <- chosen" : ""));
  }
  out.push_back(timed_candidate_note() +
                " K=sqrt: WaferLLM's round(sqrt n) groups per line of n cores." +
                timed_wafers_note(candidates_wafers(ch.candidates)));
  return out;
}

nlohmann::ordered_json reduction_choices_json(const std::vector<ReductionChoice>& choices) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const ReductionChoice& ch : choices) {
    nlohmann::ordered_json j;
    j["key"] = ch.key;
    j["chosen"] =
        ch.chosen >= 0 ? ch.candidates[static_cast<std::size_t>(ch.chosen)].scheme : std::string();
    j["chosen_reduction_groups"] =
        ch.chosen >= 0 ? ch.candidates[static_cast<std::size_t>(ch.chosen)].reduction_groups : 0;
    j["objective"] = ch.objective;
    j["users"] = ch.users;
    j["position"] = ch.position;
    j["layer_groups"] = ch.layer_groups;
    j["candidates"] = nlohmann::ordered_json::array();
    for (const ReductionCandidate& c : ch.candidates) {
      nlohmann::ordered_json o;
      o["scheme"] = c.scheme;
      o["reduction_groups"] = c.reduction_groups;
      o["fits"] = c.fits;
      if (!c.not_timed.empty()) {
        o["not_timed"] = c.not_timed;
      } else if (!c.fits) {
        o["why_not"] = c.why_not;
      } else {
        add_timed_candidate_json(c, o);
      }
      j["candidates"].push_back(o);
    }
    all.push_back(j);
  }
  return all;
}

}  // namespace wafersim::analysis
