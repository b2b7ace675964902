// sim::SpeculativeRounds without SystemC: how many tokens a round proposes,
// where each proposal sits, what a complete round accepts and emits, which
// positions the two KV caches keep, what the draft reads next, and the
// counters, against hand-worked rounds.
#include "sim/engine/speculative_rounds.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace wafersim::sim {
namespace {

using Ids = std::vector<std::int32_t>;

// One user, up to 3 proposals a round, functional (greedy comparison).
struct ComparedRounds : ::testing::Test {
  analysis::SpeculativeRun counters;
  SpeculativeRounds rounds{1, 3, true, 0.0, 1, counters};

  // A round from token 50 at position 10 (cycle 100); the draft proposes
  // `drafts` (ready at cycles 110, 120, ...), the target answers `choices`
  // for positions 10.. (cycles 200, 201, ...). The verdict.
  SpeculativeRounds::Verdict round(const Ids& drafts, const Ids& choices) {
    EXPECT_EQ(rounds.start(0, 10, 50, 20, Cycles{100}), 3);
    for (std::size_t i = 0; i < drafts.size(); ++i) {
      const std::uint64_t ready = 110 + 10 * i;
      const auto p = rounds.propose(0, drafts[i], Cycles{ready - 8}, Cycles{ready});
      EXPECT_EQ(p.position, 11 + static_cast<int>(i));
      EXPECT_EQ(p.more, i + 1 < drafts.size());
    }
    std::optional<SpeculativeRounds::Verdict> v;
    for (std::size_t i = 0; i < choices.size(); ++i) {
      EXPECT_FALSE(v.has_value()) << "a verdict before every token is back";
      v = rounds.verify(0, 10 + static_cast<int>(i), choices[i],
                        {static_cast<float>(choices[i]), static_cast<float>(i)}, Cycles{200 + i});
    }
    EXPECT_TRUE(v.has_value());
    return v ? *v : SpeculativeRounds::Verdict{};
  }
};

TEST_F(ComparedRounds, TheLongestAgreeingPrefixThenTheTargetsOwnToken) {
  // Proposals 11, 12, 13; the target would say 11, 12, 99 (and 7 after 13).
  const SpeculativeRounds::Verdict v = round({11, 12, 13}, {11, 12, 99, 7});
  EXPECT_EQ(v.accepted, 2);
  EXPECT_EQ(v.emitted, (Ids{11, 12, 99}));
  // Each emitted token carries the target's logits at its position.
  ASSERT_EQ(v.logits.size(), 3u);
  EXPECT_EQ(v.logits[2], (std::vector<float>{99.0f, 2.0f}));
  // The sequence is 50 (pos 10), 11, 12, 99 (pos 13): the target keeps
  // positions < 13; the draft read 50, 11, 12 (< 13) too: it lacks only 99.
  EXPECT_EQ(v.target_keep, 13);
  EXPECT_EQ(v.draft_keep, 13);
  EXPECT_EQ(v.feed, (Ids{99}));
  EXPECT_EQ(counters.rounds, 1u);
  EXPECT_EQ(counters.proposed, 3u);
  EXPECT_EQ(counters.accepted, 2u);
  EXPECT_EQ(counters.rejected, 1u);
  EXPECT_EQ(counters.draft_cycles.value, 3u * 8u);
  EXPECT_EQ(counters.verify_cycles.value,
            203u - 130u);  // the last proposal -> the last verification
  EXPECT_EQ(counters.round_cycles.value, 203u - 100u);
}

TEST_F(ComparedRounds, EveryProposalAcceptedGivesFourTokensAndFeedsTheLastProposal) {
  const SpeculativeRounds::Verdict v = round({11, 12, 13}, {11, 12, 13, 14});
  EXPECT_EQ(v.accepted, 3);
  EXPECT_EQ(v.emitted, (Ids{11, 12, 13, 14}));
  // The draft never read its own last proposal (13, position 13).
  EXPECT_EQ(v.target_keep, 14);
  EXPECT_EQ(v.draft_keep, 13);
  EXPECT_EQ(v.feed, (Ids{13, 14}));
  EXPECT_EQ(counters.rejected, 0u);
}

TEST_F(ComparedRounds, AFirstRejectionEmitsTheTargetsTokenOnly) {
  const SpeculativeRounds::Verdict v = round({11, 12, 13}, {5, 12, 13, 14});
  EXPECT_EQ(v.accepted, 0);  // 12 and 13 agree, but after a rejection
  EXPECT_EQ(v.emitted, (Ids{5}));
  EXPECT_EQ(v.target_keep, 11);
  EXPECT_EQ(v.draft_keep, 11);
  EXPECT_EQ(v.feed, (Ids{5}));
}

TEST_F(ComparedRounds, NearTheEndARoundProposesNoMoreThanTheWorkloadNeeds) {
  EXPECT_EQ(rounds.start(0, 10, 50, 3, Cycles{0}), 2);  // 2 proposals + the target's own = 3
  EXPECT_EQ(rounds.start(0, 10, 50, 1, Cycles{0}), 0);  // the target's own token only
  // A round without proposals: its first token's verification is the verdict.
  const auto v = rounds.verify(0, 10, 77, {}, Cycles{5});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->emitted, (Ids{77}));
  EXPECT_EQ(v->target_keep, 11);
  EXPECT_EQ(counters.proposed, 0u);
  EXPECT_EQ(counters.rejected, 0u);
}

TEST_F(ComparedRounds, ResultsMayComeBackInAnyOrder) {
  rounds.start(0, 10, 50, 20, Cycles{0});
  for (std::int32_t d : {11, 12, 13}) rounds.propose(0, d, Cycles{0}, Cycles{1});
  EXPECT_FALSE(rounds.verify(0, 13, 1, {}, Cycles{9}).has_value());
  EXPECT_FALSE(rounds.verify(0, 11, 12, {}, Cycles{9}).has_value());
  EXPECT_FALSE(rounds.verify(0, 10, 11, {}, Cycles{9}).has_value());
  const auto v = rounds.verify(0, 12, 4, {}, Cycles{9});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->emitted, (Ids{11, 12, 4}));
}

// Timing-only: each proposal accepted with the acceptance rate, until the
// first rejection; the choices are not compared.
SpeculativeRounds::Verdict timing_round(SpeculativeRounds& rounds) {
  rounds.start(0, 0, 1, 100, Cycles{0});
  for (std::int32_t d : {2, 3, 4, 5}) rounds.propose(0, d, Cycles{0}, Cycles{0});
  std::optional<SpeculativeRounds::Verdict> v;
  for (int p = 0; p <= 4; ++p) v = rounds.verify(0, p, 0, {}, Cycles{1});
  return *v;
}

TEST(TimingOnlyRounds, RateOneAcceptsEveryProposalRateZeroNone) {
  analysis::SpeculativeRun c1, c0;
  SpeculativeRounds all(1, 4, false, 1.0, 7, c1), none(1, 4, false, 0.0, 7, c0);
  for (int i = 0; i < 5; ++i) {
    const auto a = timing_round(all);
    EXPECT_EQ(a.accepted, 4);
    EXPECT_EQ(a.emitted, (Ids{2, 3, 4, 5, 0}));  // the target's "choice" at position 4
    const auto n = timing_round(none);
    EXPECT_EQ(n.accepted, 0);
    EXPECT_EQ(n.emitted, (Ids{0}));
  }
  EXPECT_EQ(c1.accepted, 20u);
  EXPECT_EQ(c1.rejected, 0u);
  EXPECT_EQ(c0.accepted, 0u);
  EXPECT_EQ(c0.rejected, 5u);
}

TEST(TimingOnlyRounds, TheSameSeedDrawsTheSameAcceptancesAndTheRateShows) {
  analysis::SpeculativeRun a, b, c;
  SpeculativeRounds ra(1, 4, false, 0.6, 42, a), rb(1, 4, false, 0.6, 42, b),
      rc(1, 4, false, 0.6, 43, c);
  std::vector<int> seq_a, seq_b, seq_c;
  for (int i = 0; i < 2000; ++i) {
    seq_a.push_back(timing_round(ra).accepted);
    seq_b.push_back(timing_round(rb).accepted);
    seq_c.push_back(timing_round(rc).accepted);
  }
  EXPECT_EQ(seq_a, seq_b);
  EXPECT_NE(seq_a, seq_c);
  // Per examined proposal the share accepted is the rate (binomial sd about
  // 0.008 over some 3,500 examined proposals).
  EXPECT_NEAR(a.measured_acceptance(), 0.6, 0.04);
}

}  // namespace
}  // namespace wafersim::sim
