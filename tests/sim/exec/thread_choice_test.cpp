// The choice between one host thread and two for the timing work
// (sim/exec/thread_choice.hpp), driven with host times made up here: which
// way it takes, when it measures the other, and what it leaves out.
#include "sim/exec/thread_choice.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace wafersim::sim {
namespace {

using Cost = std::function<double(std::uint64_t work, bool two)>;

// Runs `works` works, work i of shape i % shapes, each taking what `cost`
// says for the way the choice gave it; returns the ways, one per work.
std::vector<bool> drive(ThreadChoice& c, std::uint64_t works, int shapes, const Cost& cost,
                        std::uint64_t first = 0) {
  std::vector<bool> ways;
  for (std::uint64_t i = first; i < first + works; ++i) {
    const bool two = c.two_threads();
    ways.push_back(two);
    c.took(i % static_cast<std::uint64_t>(shapes), cost(i, two));
  }
  return ways;
}

constexpr std::uint64_t kSpell = ThreadChoice::kSpell;

TEST(ThreadChoice, TriesTwoThreadsThenOneThenTakesTheFaster) {
  ThreadChoice fast_two, fast_one;
  const auto a =
      drive(fast_two, 2 * kSpell + 10, 3, [](auto, bool two) { return two ? 1.0 : 1.3; });
  const auto b =
      drive(fast_one, 2 * kSpell + 10, 3, [](auto, bool two) { return two ? 1.3 : 1.0; });
  for (std::uint64_t i = 0; i < 2 * kSpell + 10; ++i) {
    const bool trial_way = i < kSpell;  // two threads, then one
    EXPECT_EQ(a[i], i < 2 * kSpell ? trial_way : true) << i;
    EXPECT_EQ(b[i], i < 2 * kSpell ? trial_way : false) << i;
  }
  EXPECT_EQ(fast_two.comparisons(), 1);
  EXPECT_EQ(fast_two.runs(true), kSpell + 10);
  EXPECT_EQ(fast_one.runs(false), kSpell + 10);
}

// The first choice stays on one thread unless two beat it by kMargin.
TEST(ThreadChoice, OneThreadUnlessTwoAreClearlyFaster) {
  ThreadChoice slightly, clearly;
  const double m = ThreadChoice::kMargin;
  drive(slightly, 2 * kSpell, 1, [&](auto, bool two) { return two ? 1.0 - m / 2 : 1.0; });
  drive(clearly, 2 * kSpell, 1, [&](auto, bool two) { return two ? 1.0 - 2 * m : 1.0; });
  EXPECT_FALSE(slightly.two_threads());
  EXPECT_TRUE(clearly.two_threads());
}

// After a stay of kFirstStay works the way not taken runs a spell beside
// the stay's last kSpell works; a choice that holds stays twice as long
// next time, one that changes starts over from kFirstStay.
TEST(ThreadChoice, MeasuresTheOtherWayAfterEachStayAndStaysLongerWhileTheChoiceHolds) {
  ThreadChoice c;
  const Cost two_faster = [](auto, bool two) { return two ? 1.0 : 2.0; };
  drive(c, 2 * kSpell, 2, two_faster);
  const std::uint64_t stay = ThreadChoice::kFirstStay;
  auto ways = drive(c, stay + kSpell + 2 * stay + kSpell, 2, two_faster);
  for (std::uint64_t i = 0; i < ways.size(); ++i) {
    const bool other_spell = (i >= stay && i < stay + kSpell) || i >= 3 * stay + kSpell;
    EXPECT_EQ(ways[i], !other_spell) << i;
  }
  EXPECT_EQ(c.comparisons(), 3);
  EXPECT_EQ(c.changes(), 0);
  // Now one thread gets faster: the next spell of it (after a stay of 4
  // kFirstStay) wins, and the stay after it is kFirstStay again.
  const Cost one_faster = [](auto, bool two) { return two ? 2.0 : 1.0; };
  ways = drive(c, 4 * stay + kSpell + stay + 1, 2, one_faster);
  EXPECT_TRUE(ways[4 * stay - 1]);
  EXPECT_FALSE(ways[4 * stay]);
  EXPECT_FALSE(ways[4 * stay + kSpell]);        // the new stay: one thread
  EXPECT_TRUE(ways[4 * stay + kSpell + stay]);  // then two are measured again
  EXPECT_EQ(c.changes(), 1);
}

// A spell's first kSettle works pay for what the way before left on the
// other core: they are not counted. Here they are slow enough on one
// thread to turn the choice if they were.
TEST(ThreadChoice, LeavesOutTheFirstWorksOfASpell) {
  ThreadChoice c;
  drive(c, 2 * kSpell, 1, [](std::uint64_t i, bool two) {
    if (two) return 1.0;
    return i - kSpell < ThreadChoice::kSettle ? 100.0 : 0.5;
  });
  EXPECT_FALSE(c.two_threads());
}

// The spells run different mixes of work; the ways are compared shape by
// shape. Two threads are 10% faster on both shapes here, but their spell
// ran mostly the costly shape: the plain means would say one thread.
TEST(ThreadChoice, ComparesShapeByShapeNotTheSpellsPlainMeans) {
  ThreadChoice c;
  std::uint64_t i = 0;
  for (; i < 2 * kSpell; ++i) {
    const bool two = c.two_threads();
    // Costly shape 0 three works in four on two threads, one in four on one.
    const bool costly = two ? i % 4 != 0 : i % 4 == 0;
    const double t = (costly ? 10.0 : 1.0) * (two ? 0.9 : 1.0);
    c.took(costly ? 0 : 1, t);
  }
  EXPECT_TRUE(c.two_threads());
}

// A shape met in one spell only is no evidence either way.
TEST(ThreadChoice, IgnoresShapesMetOneWayOnly) {
  ThreadChoice c;
  for (std::uint64_t i = 0; i < 2 * kSpell; ++i) {
    const bool two = c.two_threads();
    // Shape 7 only on two threads, very slow; shape 1 both ways, faster on
    // two (were shape 7 counted, one thread would win).
    const std::uint64_t shape = two && i % 2 == 0 ? 7 : 1;
    c.took(shape, shape == 7 ? 50.0 : (two ? 1.0 : 2.0));
  }
  EXPECT_TRUE(c.two_threads());
}

}  // namespace
}  // namespace wafersim::sim
