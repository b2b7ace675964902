#include "fabric/collectives.hpp"

#include <gtest/gtest.h>

#include "support/test_spec.hpp"

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
  for (auto scheme : {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level,
                      ReductionScheme::k_tree, ReductionScheme::ring})
    for (int n = 1; n < 40; ++n)
      for (int groups : {0, 1, 2, 3, 7, n})
        for (int chunk : {0, 1, n - 1}) {
          std::vector<int> count(n, 1);
          for (auto step : reduction_order(scheme, n, groups, chunk)) {
            ASSERT_GT(count[step.from], 0) << n;  // a partial sent on is not sent again
            count[step.into] += count[step.from];
            count[step.from] = 0;
          }
          EXPECT_EQ(count[reduction_root(scheme, n, groups, chunk)], n)
              << static_cast<int>(scheme) << " n " << n << " K " << groups;
        }
}

TEST(ReductionOrder, KTreeGroupsReduceToTheirCentresThenToTheMiddleGroupsCentre) {
  // WaferLLM's run_sim.sh with P = 8, group_num = 2: groups of 4, group roots
  // at 4 / 2 = 2 inside each ({0..3} -> 2, {4..7} -> 6), the line's root at
  // (2 / 2) * 4 + 2 = 6. Per group: the near half's chain (1 <- 0), then the
  // root adds the far half (2 <- 3) and the near half (2 <- 1); then the
  // roots: 6 <- 2.
  const auto s = reduction_order(ReductionScheme::k_tree, 8, 2);
  const std::vector<std::pair<int, int>> expected = {{1, 0}, {2, 3}, {2, 1}, {5, 4},
                                                     {6, 7}, {6, 5}, {6, 2}};
  ASSERT_EQ(s.size(), expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].into, expected[i].first) << i;
    EXPECT_EQ(s[i].from, expected[i].second) << i;
  }
  EXPECT_EQ(reduction_root(ReductionScheme::k_tree, 8, 2), 6);
  // The default K is round(sqrt n): 20 on WaferLLM's 420-core lines, groups
  // of 21, the root at 10 * 21 + 10 = 220.
  EXPECT_EQ(k_tree_groups(420, 0), 20);
  EXPECT_EQ(k_tree_root(420, 0), 220);
  EXPECT_EQ(k_tree_groups(5, 9), 5);  // at most one group per core
  // 12 cores, K = 3: groups {0..3} {4..7} {8..11}, roots 2, 6, 10; the
  // line's root 6. Roots: 6 <- 10 (the far side first), then 6 <- 2.
  const auto t = reduction_order(ReductionScheme::k_tree, 12, 3);
  ASSERT_EQ(t.size(), 11u);
  EXPECT_EQ(t[9].into, 6);
  EXPECT_EQ(t[9].from, 10);
  EXPECT_EQ(t[10].into, 6);
  EXPECT_EQ(t[10].from, 2);
}

TEST(ReductionOrder, RingIsFoldedOnTheLineAndEachChunkStartsOnePositionOn) {
  // 5 cores: ring 0 -> 2 -> 4 -> 3 -> 1 -> 0, every edge 1 or 2 links.
  EXPECT_EQ(ring_sequence(5), (std::vector<int>{0, 2, 4, 3, 1}));
  EXPECT_EQ(ring_sequence(4), (std::vector<int>{0, 2, 3, 1}));
  // 4 cores (ring 0 2 3 1), chunk 0: position 1 (core 2) sends first, to
  // core 3, which adds and sends to core 1, then core 1 to core 0, the root.
  const auto c0 = reduction_order(ReductionScheme::ring, 4, 0, 0);
  const std::vector<std::pair<int, int>> e0 = {{3, 2}, {1, 3}, {0, 1}};
  ASSERT_EQ(c0.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c0[i].into, e0[i].first) << i;
    EXPECT_EQ(c0[i].from, e0[i].second) << i;
  }
  // Chunk 1 starts at core 3 and lands on core 2.
  const auto c1 = reduction_order(ReductionScheme::ring, 4, 0, 1);
  const std::vector<std::pair<int, int>> e1 = {{1, 3}, {0, 1}, {2, 0}};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c1[i].into, e1[i].first) << i;
    EXPECT_EQ(c1[i].from, e1[i].second) << i;
  }
  EXPECT_EQ(reduction_root(ReductionScheme::ring, 4, 0, 1), 2);
  EXPECT_EQ(ring_chunks(4, Bytes{16}), 4);
  EXPECT_EQ(ring_chunks(420, Bytes{40}), 10);  // one wavelet each at least
}

TEST(CollectiveColors, PerSchemeAsTheRoutesNeedThem) {
  EXPECT_EQ(collective_colors(ReductionScheme::chain, 8, 0, false), 2);
  EXPECT_EQ(collective_colors(ReductionScheme::chain, 8, 0, true), 3);
  EXPECT_EQ(collective_colors(ReductionScheme::tree, 8, 0, false), 3);
  EXPECT_EQ(collective_colors(ReductionScheme::two_level, 16, 0, true), 5);
  // WaferLLM's MeshGEMV layout: colors 5-8 (both directions of the groups'
  // chains), 13-16 (the roots'), 9-10 (the broadcast both ways).
  EXPECT_EQ(collective_colors(ReductionScheme::k_tree, 420, 20, true), 10);
  EXPECT_EQ(collective_colors(ReductionScheme::k_tree, 420, 1, true), 6);
  EXPECT_EQ(collective_colors(ReductionScheme::k_tree, 420, 20, false), 9);
  EXPECT_EQ(collective_colors(ReductionScheme::ring, 420, 0, true), 4);
  EXPECT_EQ(collective_colors(ReductionScheme::ring, 1, 0, true), 0);
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

TEST_F(Collectives, KTreeReductionOfReadyPartials) {
  // 16 cores, 4 B (1 cycle), K = 4: groups {0..3} {4..7} {8..11} {12..15},
  // roots 2, 6, 10, 14, the line's root 10. Per group (1 hop + 2 per add):
  // the far half 1 hop: 1 + 1 = 2, add -> 4; the near half 2 hops: links at 0
  // and 3, tail 3 + 1 + 1 = 5, add -> 7: every root at 7 (the groups' links
  // are disjoint: near halves go east, far halves west).
  // Roots, streaming (each adds a wavelet 2 cycles after it arrives and
  // forwards it): 14 -> 10 over 4 links from 7: tail 7 + 4 + 1 = 12, add ->
  // 14; 2 -> 6 from 7: the wavelet reaches 6 at 11, leaves at 13, reaches 10
  // at 17, tail 18, add -> 20 (store and forward would give 21).
  // Reduce into core 0: the sum moves 10 hops west: 20 + 10 + 1 = 31.
  std::vector<Timed> ready(16);
  const Line line{{0, 0}, Direction::east, 16};
  const Timed t = reduce_line(mesh, flow, ReductionScheme::k_tree, line, Bytes{4}, ready, 4);
  EXPECT_EQ(t.at.value, 31u);
  // All-reduce: from the root 10 both ways: core i has it at 20 + |i - 10| + 1
  // (two-level on this line: 31 into core 0, then 15 + 1 more to core 15).
  FlowModel fresh{mesh, spec};
  std::vector<Timed> arrivals;
  all_reduce_line(mesh, fresh, ReductionScheme::k_tree, line, Bytes{4}, ready, arrivals, 4);
  ASSERT_EQ(arrivals.size(), 16u);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(arrivals[static_cast<std::size_t>(i)].at.value,
              i == 10 ? 20u : 20u + static_cast<std::uint64_t>(std::abs(i - 10)) + 1u)
        << i;
}

TEST_F(Collectives, RingAllReduceOfReadyPartials) {
  // 4 cores, 16 B: 4 chunks of 4 B (1 cycle); ring 0 -> 2 -> 3 -> 1 -> 0
  // (edges of 2, 1, 2, 1 links, each link direction used by one edge).
  // Reduce-scatter, chunk c from position c+1: every step is the edge's hops
  // + 1 + the add 2. Step 0: 1-link edges 4, 2-link edges 5; step 1: the
  // chunks that came over 2 links now take 1 and the others 2: all at 9;
  // step 2: 13 (chunks 0, 2 on 1-link edges) and 14 (chunks 1, 3).
  // All-gather (no adds): step 0 all at 16, step 1 at 18 or 19, step 2 at 21.
  std::vector<Timed> ready(4), arrivals;
  const Line line{{0, 1}, Direction::east, 4};
  all_reduce_line(mesh, flow, ReductionScheme::ring, line, Bytes{16}, ready, arrivals);
  ASSERT_EQ(arrivals.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(arrivals[i].at.value, 21u) << i;
  FlowModel fresh{mesh, spec};
  EXPECT_EQ(reduce_line(mesh, fresh, ReductionScheme::ring, line, Bytes{16}, ready).at.value, 21u);
}

TEST_F(Collectives, MulticastDownAColumn) {
  std::vector<Timed> arrivals;
  multicast_line(mesh, flow, Line{{3, 0}, Direction::south, 4}, Bytes{8}, Timed{}, arrivals);
  ASSERT_EQ(arrivals.size(), 4u);
  EXPECT_EQ(arrivals[0].at.value, 0u);
  EXPECT_EQ(arrivals[3].at.value, 3u + 2u);
}

TEST_F(Collectives, AllReduceAlongALine) {
  // The chain above (sum at core 0 at 37), then multicast back from core 0:
  // core i has the 64 B (16 cycles) at 37 + i + 16.
  std::vector<Timed> ready(8), arrivals;
  all_reduce_line(mesh, flow, ReductionScheme::chain, Line{{0, 0}, Direction::east, 8}, Bytes{64},
                  ready, arrivals);
  ASSERT_EQ(arrivals.size(), 8u);
  EXPECT_EQ(arrivals[0].at.value, 37u);
  for (std::size_t i = 1; i < 8; ++i) EXPECT_EQ(arrivals[i].at.value, 37u + i + 16u) << i;
  EXPECT_EQ(arrivals[7].path.total().value, arrivals[7].at.value);
}

TEST_F(Collectives, MulticastToARectangle) {
  // Rectangle x 2..6, y 0..2 from its corner (2,0), 8 B (2 cycles), ready 10:
  // the top row's routers replicate each wavelet south as it passes, so core
  // (2 + i, j) has it at 10 + i + j + 2 (the corner at 10).
  const Rect r{2, 0, 5, 3};
  std::vector<Timed> arrivals;
  multicast_rect(mesh, flow, r, Bytes{8}, Timed{Cycles{10}, {}}, arrivals);
  ASSERT_EQ(arrivals.size(), 15u);
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 5; ++i) {
      const Timed& a = arrivals[static_cast<std::size_t>(j * 5 + i)];
      const std::uint64_t expected =
          i + j == 0 ? 10u : 10u + static_cast<std::uint64_t>(i + j) + 2u;
      EXPECT_EQ(a.at.value, expected) << i << "," << j;
      EXPECT_EQ(a.path.total().value, a.at.value - 10u) << i << "," << j;
      if (i + j > 0) {
        EXPECT_EQ(a.path.contention.value, 0u) << i << "," << j;
      }
    }
  // Every link of the spanning tree carries the 8 B once: 4 along the top
  // row, 2 down each of the 5 columns.
  std::uint64_t total = 0;
  for (auto b : flow.link_bytes_by_core()) total += b;
  EXPECT_EQ(total, 8u * (4u + 5u * 2u));
  // A second multicast over the same rectangle right after queues behind
  // the first wavelet by wavelet: each core has it 2 cycles later.
  std::vector<Timed> second;
  multicast_rect(mesh, flow, r, Bytes{8}, Timed{Cycles{10}, {}}, second);
  for (std::size_t k = 1; k < second.size(); ++k)
    EXPECT_EQ(second[k].at.value, arrivals[k].at.value + 2u) << k;
}

TEST_F(Collectives, AllReduceOverARectangle) {
  // 3 x 2 cores at (0,0), chain, 16 B (4 cycles), all ready at 0. Each row
  // chains into its west core: s0 = 0, s1 = 0 + 1 + 2 = 3, tail 3 + 1 + 4 = 8,
  // add 2: 10 (the rows use disjoint links). The west column chains (0,1)
  // into (0,0): 10 + 1 + 4 = 15, add 2: 17. Then the corner multicasts to
  // the rectangle: core (i, j) at 17 + i + j + 4, the corner at 17.
  const Rect r{0, 0, 3, 2};
  std::vector<Timed> ready(6), arrivals;
  all_reduce_rect(mesh, flow, ReductionScheme::chain, r, Bytes{16}, ready, arrivals);
  const std::uint64_t expected[6] = {17, 22, 23, 22, 23, 24};
  ASSERT_EQ(arrivals.size(), 6u);
  for (std::size_t k = 0; k < 6; ++k) EXPECT_EQ(arrivals[k].at.value, expected[k]) << k;
  EXPECT_THROW(all_reduce_rect(mesh, flow, ReductionScheme::chain, r, Bytes{16},
                               std::span(ready).first(5), arrivals),
               std::invalid_argument);
}

}  // namespace
}  // namespace wafersim::fabric
