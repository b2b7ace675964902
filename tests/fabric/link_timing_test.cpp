#include "fabric/link_timing.hpp"

#include <gtest/gtest.h>

#include "test_spec.hpp"

namespace wafersim::fabric {
namespace {

class LinkTiming : public ::testing::Test {
 protected:
  WaferSpec spec = testing::small_spec();
  Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel flow{mesh, spec};
  std::vector<LinkId> route(Coord a, Coord b) {
    std::vector<LinkId> r;
    mesh.xy_route(a, b, r);
    return r;
  }
};

TEST_F(LinkTiming, UncontendedTransferArrivesAfterHopsPlusSerialization) {
  // 3 hops at 1 cycle each, 64 B at 4 B/cycle = 16 cycles: 100 + 3 + 16.
  const Timed t = flow.send(route({0, 0}, {3, 0}), Bytes{64}, Timed{Cycles{100}, {}});
  EXPECT_EQ(t.at.value, 119u);
  EXPECT_EQ(t.path.hops, 3u);
  EXPECT_EQ(t.path.serialization, 16u);
  EXPECT_EQ(t.path.contention, 0u);
  EXPECT_EQ(t.path.total(), 19u);  // the breakdown explains the whole latency
}

TEST_F(LinkTiming, PartialWaveletRoundsUpToWholeCycles) {
  const Timed t = flow.send(route({0, 0}, {1, 0}), Bytes{6}, Timed{});
  EXPECT_EQ(t.at.value, 1u + 2u);
}

TEST_F(LinkTiming, TwoTransfersSharingALinkSerialize) {
  // A: (0,0)->(2,0) uses links (0,0)E, (1,0)E. B: (1,0)->(3,0) uses (1,0)E, (2,0)E.
  // Both ready at 0, 40 B each (10 cycles). A reserves (1,0)E for [1, 11).
  // B must wait until 11 to enter (1,0)E: s0 = 11, s1 = 12, arrives 12+1+10 = 23.
  const Timed a = flow.send(route({0, 0}, {2, 0}), Bytes{40}, Timed{});
  const Timed b = flow.send(route({1, 0}, {3, 0}), Bytes{40}, Timed{});
  EXPECT_EQ(a.at.value, 12u);
  EXPECT_EQ(b.at.value, 23u);
  EXPECT_EQ(b.path.contention, 11u);
  EXPECT_EQ(b.path.total(), 23u);
  // Alone, B would have taken 2 + 10 = 12 cycles.
  FlowModel fresh{mesh, spec};
  EXPECT_EQ(fresh.send(route({1, 0}, {3, 0}), Bytes{40}, Timed{}).at.value, 12u);
}

TEST_F(LinkTiming, DisjointTransfersDoNotInterfere) {
  const Timed a = flow.send(route({0, 0}, {3, 0}), Bytes{40}, Timed{});
  const Timed b = flow.send(route({0, 1}, {3, 1}), Bytes{40}, Timed{});
  EXPECT_EQ(a.at, b.at);
}

TEST_F(LinkTiming, BytesAreConservedOnEveryLinkOfTheRoute) {
  const auto r = route({1, 1}, {4, 3});
  flow.send(r, Bytes{100}, Timed{});
  std::uint64_t total = 0;
  for (auto b : flow.link_bytes_by_core()) total += b;
  EXPECT_EQ(total, 100u * r.size());
  for (LinkId l : r) {
    EXPECT_EQ(flow.link_bytes(l), 100u);
    EXPECT_EQ(flow.link_busy_cycles(l), 25u);
  }
}

TEST_F(LinkTiming, MulticastDeliversToEveryNodeOnThePath) {
  std::vector<Timed> arrivals;
  std::vector<LinkId> r;
  mesh.straight_route({2, 0}, Direction::south, 4, r);
  flow.send(r, Bytes{32}, Timed{Cycles{5}, {}}, &arrivals);
  ASSERT_EQ(arrivals.size(), 5u);
  for (int k = 1; k <= 4; ++k) EXPECT_EQ(arrivals[k].at.value, 5u + k + 8u) << "node " << k;
}

TEST_F(LinkTiming, ChainReductionWaitsForEachContributor) {
  // 3 links, 16 B (4 cycles), hop 1, add 2 per receiving node.
  // node ready: 0, 0, 20, 0. s0 = 0; s1 = max(0+1+2, 0) = 3; s2 = max(3+1+2, 20) = 20;
  // tail at last node = 20 + 1 + 4 = 25, plus its own add (2) = 27.
  std::vector<LinkId> r;
  mesh.straight_route({0, 0}, Direction::east, 3, r);
  std::vector<Timed> ready{Timed{}, Timed{}, Timed{Cycles{20}, {}}, Timed{}};
  ready[2].path.compute = 20;
  const Timed t = flow.reduce_chain(r, Bytes{16}, ready);
  EXPECT_EQ(t.at.value, 27u);
  EXPECT_EQ(t.path.compute, 20u);  // the late contributor is on the critical path
  EXPECT_EQ(t.path.total(), 27u);
}

}  // namespace
}  // namespace wafersim::fabric
