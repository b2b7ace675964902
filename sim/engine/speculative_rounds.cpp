#include "sim/engine/speculative_rounds.hpp"

#include <algorithm>
#include <utility>

namespace wafersim::sim {

SpeculativeRounds::SpeculativeRounds(int users, int draft_tokens, bool by_comparison,
                                     double acceptance_rate, std::uint64_t seed,
                                     analysis::SpeculativeRun& counters)
    : draft_tokens_(draft_tokens),
      by_comparison_(by_comparison),
      acceptance_rate_(acceptance_rate),
      counters_(counters),
      rounds_(static_cast<std::size_t>(users)),
      acceptance_rng_(seed ^ 0x5bd1e995a1b2c3d4ull) {}

int SpeculativeRounds::start(int u, int position, std::int32_t last, int remaining, Cycles cycle) {
  Round& r = rounds_[static_cast<std::size_t>(u)];
  r.position = position;
  r.last = last;
  r.drafts.clear();
  r.draft_count = std::min(draft_tokens_, remaining - 1);
  r.choices.assign(static_cast<std::size_t>(r.draft_count) + 1, 0);
  r.logits.assign(static_cast<std::size_t>(r.draft_count) + 1, {});
  r.returned = 0;
  r.started = r.proposals_done = cycle;
  return r.draft_count;
}

SpeculativeRounds::Proposal SpeculativeRounds::propose(int u, std::int32_t token,
                                                       Cycles start_cycle, Cycles cycle) {
  counters_.draft_cycles += cycle - start_cycle;
  Round& r = rounds_[static_cast<std::size_t>(u)];
  r.drafts.push_back(token);
  r.proposals_done = cycle;
  const int made = static_cast<int>(r.drafts.size());
  return Proposal{r.position + made, made < r.draft_count};
}

// The longest prefix of proposals equal to the target's choices, or each
// proposal accepted with the acceptance rate until the first rejection.
int SpeculativeRounds::accepted(const Round& r) {
  const int k = r.draft_count;
  int n = 0;
  if (by_comparison_)
    while (n < k && r.drafts[static_cast<std::size_t>(n)] == r.choices[static_cast<std::size_t>(n)])
      ++n;
  else
    while (n < k && acceptance_rng_.uniform01() < acceptance_rate_) ++n;
  return n;
}

std::optional<SpeculativeRounds::Verdict> SpeculativeRounds::verify(int u, int position,
                                                                    std::int32_t choice,
                                                                    std::vector<float> logits,
                                                                    Cycles cycle) {
  Round& r = rounds_[static_cast<std::size_t>(u)];
  const auto i = static_cast<std::size_t>(position - r.position);
  r.choices[i] = choice;
  r.logits[i] = std::move(logits);
  if (++r.returned < r.draft_count + 1) return std::nullopt;
  const int k = r.draft_count;
  Verdict v;
  const int n = v.accepted = accepted(r);
  ++counters_.rounds;
  counters_.proposed += static_cast<std::uint64_t>(k);
  counters_.accepted += static_cast<std::uint64_t>(n);
  if (n < k) ++counters_.rejected;
  counters_.verify_cycles += cycle - r.proposals_done;
  counters_.round_cycles += cycle - r.started;
  // The target's result at position + j carries token j's logits.
  for (int j = 0; j < n; ++j) {
    v.emitted.push_back(r.drafts[static_cast<std::size_t>(j)]);
    v.logits.push_back(std::move(r.logits[static_cast<std::size_t>(j)]));
  }
  const std::int32_t own = r.choices[static_cast<std::size_t>(n)];
  v.emitted.push_back(own);
  v.logits.push_back(std::move(r.logits[static_cast<std::size_t>(n)]));
  // Positions up to r.position + n hold the sequence (last, then the
  // accepted proposals); the draft has read up to r.position + k - 1.
  v.target_keep = r.position + n + 1;
  v.draft_keep = r.position + std::min(n, k - 1) + 1;
  for (int p = v.draft_keep; p < v.target_keep; ++p)
    v.feed.push_back(p == r.position ? r.last
                                     : r.drafts[static_cast<std::size_t>(p - r.position - 1)]);
  v.feed.push_back(own);
  return v;
}

}  // namespace wafersim::sim
