#include "fabric/collectives.hpp"

#include <gtest/gtest.h>

#include "test_spec.hpp"

namespace wafersim::fabric {
namespace {

TEST(ReductionOrder, ChainStartsAtTheFarEnd) {
  const auto s = reduction_order(ReductionScheme::chain, 4);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].into, 2);
  EXPECT_EQ(s[0].from, 3);
  EXPECT_EQ(s[2].into, 0);
  EXPECT_EQ(s[2].from, 1);
}

TEST(ReductionOrder, TreeIsPairwiseByStride) {
  const auto s = reduction_order(ReductionScheme::tree, 5);
  // stride 1: 0<-1, 2<-3; stride 2: 0<-2; stride 4: 0<-4.
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].into, 0);
  EXPECT_EQ(s[0].from, 1);
  EXPECT_EQ(s[1].into, 2);
  EXPECT_EQ(s[1].from, 3);
  EXPECT_EQ(s[2].into, 0);
  EXPECT_EQ(s[2].from, 2);
  EXPECT_EQ(s[3].into, 0);
  EXPECT_EQ(s[3].from, 4);
}

TEST(ReductionOrder, EveryPartialIsAddedExactlyOnce) {
  for (auto scheme : {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level})
    for (int n = 1; n < 40; ++n) {
      std::vector<int> count(n, 1);
      for (auto step : reduction_order(scheme, n)) {
        count[step.into] += count[step.from];
        count[step.from] = 0;
      }
      EXPECT_EQ(count[0], n);
    }
}

class Collectives : public ::testing::Test {
 protected:
  WaferSpec spec = testing::small_spec(16, 4);
  Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel flow{mesh, spec};
};

TEST_F(Collectives, ChainReductionOfReadyPartials) {
  // 8 cores, all ready at 0, 64 B (16 cycles): 7 hops * (1 + 2 add) - 2 + 16 + last add 2 ...
  // s0 = 0, s_k = 3k, last link k=6 starts at 18, tail at 18 + 1 + 16 = 35, root add +2 = 37.
  std::vector<Timed> ready(8);
  const Timed t = reduce_line(mesh, flow, ReductionScheme::chain, Line{{0, 0}, Direction::east, 8},
                              Bytes{64}, ready);
  EXPECT_EQ(t.at.value, 37u);
}

TEST_F(Collectives, TreeReductionOfReadyPartials) {
  // 8 cores, 64 B. Stride 1: pairs 1 hop: arrive 1 + 16 = 17, +2 add = 19 at 0,2,4,6.
  // Stride 2: from 2 (ready 19) over 2 hops. Link (1,0)W was used by 1->0 during [0,16): free.
  //   arrival 19 + 2 + 16 = 37, +2 = 39 at 0 and 4.
  // Stride 4: from 4 (ready 39) over 4 hops: 39 + 4 + 16 = 59, +2 = 61.
  std::vector<Timed> ready(8);
  const Timed t = reduce_line(mesh, flow, ReductionScheme::tree, Line{{0, 0}, Direction::east, 8},
                              Bytes{64}, ready);
  EXPECT_EQ(t.at.value, 61u);
}

TEST_F(Collectives, TreeBeatsChainForShortMessagesOnLongLines) {
  std::vector<Timed> ready(16);
  FlowModel a{mesh, spec}, b{mesh, spec};
  const Line line{{0, 0}, Direction::east, 16};
  const Timed chain = reduce_line(mesh, a, ReductionScheme::chain, line, Bytes{4}, ready);
  const Timed tree = reduce_line(mesh, b, ReductionScheme::tree, line, Bytes{4}, ready);
  // chain: the 14 forwarding nodes each cost hop + add (3), then the last hop (1), 4 B (1 cycle)
  // and the root add (2): 42 + 1 + 1 + 2 = 46. tree: 4 levels of (2^l hops + 1 + 2) = 27.
  EXPECT_EQ(chain.at.value, 46u);
  EXPECT_EQ(tree.at.value, 27u);
}

TEST(ReductionOrder, TwoLevelGroupsThenRoots) {
  // 8 cores: groups of round(sqrt 8) = 3: {0,1,2} {3,4,5} {6,7}; then roots 6 -> 3 -> 0.
  EXPECT_EQ(two_level_group(8), 3);
  EXPECT_EQ(two_level_group(16), 4);
  EXPECT_EQ(two_level_group(1), 1);
  const auto s = reduction_order(ReductionScheme::two_level, 8);
  const std::vector<std::pair<int, int>> expected = {{1, 2}, {0, 1}, {4, 5}, {3, 4},
                                                     {6, 7}, {3, 6}, {0, 3}};
  ASSERT_EQ(s.size(), expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].into, expected[i].first) << i;
    EXPECT_EQ(s[i].from, expected[i].second) << i;
  }
}

TEST_F(Collectives, TwoLevelReductionOfReadyPartials) {
  // 8 cores, 64 B (16 cycles). Groups {0,1,2} {3,4,5} {6,7} stream like chains:
  // 3 cores: links start 0 and 3, tail 3 + 1 + 16 = 20, root add -> 22 (roots 0 and 3);
  // 2 cores: tail 0 + 1 + 16 = 17, add -> 19 (root 6).
  // Root 6 -> 3 (3 hops), ready 19: W(6) at 19, W(5) at max(20, free 16) = 20,
  //   W(4) at max(21, free 19) = 21; tail 21 + 1 + 16 = 38; add -> 40 at root 3.
  // Root 3 -> 0: links free; 40, 41, 42; tail 42 + 1 + 16 = 59; add -> 61.
  std::vector<Timed> ready(8);
  const Timed t = reduce_line(mesh, flow, ReductionScheme::two_level,
                              Line{{0, 0}, Direction::east, 8}, Bytes{64}, ready);
  EXPECT_EQ(t.at.value, 61u);
}

TEST_F(Collectives, TwoLevelBetweenTreeAndChainForShortMessages) {
  // 16 cores, 4 B (1 cycle): groups of 4 stream in parallel: links at 0, 3, 6;
  // tail 6 + 1 + 1 = 8, add -> 10 at roots 0, 4, 8, 12. Roots 12 -> 8 -> 4 -> 0,
  // 4 hops each on free links: 10 + 3 + 1 + 1 = 15, +2 = 17; 17 -> 24; 24 -> 31.
  // (chain: 46, tree: 27, from TreeBeatsChainForShortMessagesOnLongLines.)
  std::vector<Timed> ready(16);
  const Timed t = reduce_line(mesh, flow, ReductionScheme::two_level,
                              Line{{0, 0}, Direction::east, 16}, Bytes{4}, ready);
  EXPECT_EQ(t.at.value, 31u);
}

TEST_F(Collectives, MulticastDownAColumn) {
  std::vector<Timed> arrivals;
  multicast_line(mesh, flow, Line{{3, 0}, Direction::south, 4}, Bytes{8}, Timed{}, arrivals);
  ASSERT_EQ(arrivals.size(), 4u);
  EXPECT_EQ(arrivals[0].at.value, 0u);
  EXPECT_EQ(arrivals[3].at.value, 3u + 2u);
}

}  // namespace
}  // namespace wafersim::fabric
