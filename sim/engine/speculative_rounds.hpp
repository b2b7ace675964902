// Speculative decoding's policy, user by user (scenario
// `speculative_decoding`): the draft model proposes up to `draft_tokens`
// tokens a round, the target verifies the round's first token (the newest
// emitted one) and every proposal, and when all of them are back the longest
// prefix of proposals the target agrees with is accepted, followed by the
// target's own next token; both KV caches forget the rejected positions, and
// the next round starts from that token. Functional runs accept by comparing
// greedy choices, so the tokens are exactly the target's greedy tokens;
// timing-only runs accept each proposal with the scenario's acceptance rate,
// drawn from the workload seed.
//
// Plain C++: this class decides what a round is and counts what happened
// (analysis::SpeculativeRun); the SystemC host (sim/engine/engine.cpp)
// makes and sends the tokens it names, in simulated time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/run_result.hpp"
#include "models/rng.hpp"

namespace wafersim::sim {

class SpeculativeRounds {
 public:
  // What a round ended with.
  struct Verdict {
    int accepted = 0;  // proposals accepted
    // Emitted, in order: the accepted proposals, then the target's own
    // choice after them; each with the target's logits at its position.
    std::vector<std::int32_t> emitted;
    std::vector<std::vector<float>> logits;
    // Positions each KV cache keeps: the target's hold the sequence up to
    // the own choice's position; the draft has read one proposal fewer than
    // it made.
    int target_keep = 0;
    int draft_keep = 0;
    // The next round: it starts from emitted.back() at target_keep, and the
    // draft first reads `feed` (the ids its cache lacks, ending with it).
    std::vector<std::int32_t> feed;
  };

  // `draft_tokens` proposals a round at most. Functional runs
  // (`by_comparison`) accept a proposal when the target's greedy choice is
  // the same; timing-only runs with probability `acceptance_rate`, drawn
  // from a generator seeded by the workload's `seed`. Counts into
  // `counters` (which outlives this).
  SpeculativeRounds(int users, int draft_tokens, bool by_comparison, double acceptance_rate,
                    std::uint64_t seed, analysis::SpeculativeRun& counters);

  // User `u`'s round starts from `last`, emitted at `position` and ready at
  // `cycle`, with `remaining` tokens still to emit: how many tokens the
  // draft proposes (a round yields at least one token, so no more than
  // remaining - 1).
  int start(int u, int position, std::int32_t last, int remaining, Cycles cycle);

  // A token came back from the draft's pipeline (a prompt block or a
  // proposal).
  void draft_pass() { ++counters_.draft_passes; }
  // The draft proposed `token`, the pass having started at `start_cycle`
  // and the token ready at `cycle`. Where it sits in the sequence, and
  // whether the draft proposes again this round.
  struct Proposal {
    int position = 0;
    bool more = false;
  };
  Proposal propose(int u, std::int32_t token, Cycles start_cycle, Cycles cycle);

  // The target's greedy choice (and logits) for user `u`'s round token at
  // `position`, ready at `cycle`: the verdict once the round's every token
  // is back, nothing before.
  std::optional<Verdict> verify(int u, int position, std::int32_t choice, std::vector<float> logits,
                                Cycles cycle);

 private:
  // Where one user's round stands.
  struct Round {
    int position = 0;       // position of `last` in the sequence
    std::int32_t last = 0;  // newest emitted token: the round's first token on the target
    int draft_count = 0;    // proposals this round (fewer near the end of the workload)
    std::vector<std::int32_t> drafts;
    // The target's result for the round's token at position + i: its greedy
    // choice and (functional) logits; `returned` of draft_count + 1 are back.
    std::vector<std::int32_t> choices;
    std::vector<std::vector<float>> logits;
    int returned = 0;
    Cycles started;         // when `last` was ready
    Cycles proposals_done;  // when the last proposal was ready
  };

  // Proposals the target accepts of a complete round.
  int accepted(const Round& r);

  int draft_tokens_;
  bool by_comparison_;
  double acceptance_rate_;
  analysis::SpeculativeRun& counters_;
  std::vector<Round> rounds_;
  models::Xoshiro256StarStar acceptance_rng_;
};

}  // namespace wafersim::sim
