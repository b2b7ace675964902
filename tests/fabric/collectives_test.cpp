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
  for (auto scheme : {ReductionScheme::chain, ReductionScheme::tree})
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

TEST_F(Collectives, MulticastDownAColumn) {
  std::vector<Timed> arrivals;
  multicast_line(mesh, flow, Line{{3, 0}, Direction::south, 4}, Bytes{8}, Timed{}, arrivals);
  ASSERT_EQ(arrivals.size(), 4u);
  EXPECT_EQ(arrivals[0].at.value, 0u);
  EXPECT_EQ(arrivals[3].at.value, 3u + 2u);
}

}  // namespace
}  // namespace wafersim::fabric
