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

TEST_F(LinkTiming, AMessageBackfillsAGapBeforeALaterReservation) {
  // Link (0,0)E. A, sent first, is ready at 20: 40 B = 10 cycles, [20, 30).
  const auto r = route({0, 0}, {1, 0});
  EXPECT_EQ(flow.send(r, Bytes{40}, Timed{Cycles{20}, {}}).at.value, 20u + 1u + 10u);
  // B, sent later but ready at 0: 16 B = 4 cycles fit the gap [0, 20): it
  // goes at 0 and arrives at 0 + 1 + 4 = 5 (one free_at per link: 30 + 5 = 35).
  const Timed b = flow.send(r, Bytes{16}, Timed{});
  EXPECT_EQ(b.at.value, 5u);
  EXPECT_EQ(b.path.contention, 0u);
  // C, ready at 2: the gap is now [4, 20); it waits 2 cycles, arrives 4 + 1 + 4 = 9.
  const Timed c = flow.send(r, Bytes{16}, Timed{Cycles{2}, {}});
  EXPECT_EQ(c.at.value, 9u);
  EXPECT_EQ(c.path.contention, 2u);
  // D, ready at 15, 32 B = 8 cycles: the gap [15, 20) is 5 cycles, too short;
  // it waits for A's end at 30 and arrives 30 + 1 + 8 = 39, 15 cycles of contention.
  const Timed d = flow.send(r, Bytes{32}, Timed{Cycles{15}, {}});
  EXPECT_EQ(d.at.value, 39u);
  EXPECT_EQ(d.path.contention, 15u);
  EXPECT_EQ(d.path.total(), 39u - 15u);
  // The link's busy intervals: [0, 8) (B and C, merged) is the floor, then A and D merged.
  EXPECT_EQ(flow.link_floor(r[0]).value, 8u);
  const auto busy = flow.link_busy_intervals(r[0]);
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].first.value, 20u);
  EXPECT_EQ(busy[0].second.value, 38u);
  EXPECT_EQ(flow.link_reserved_until(r[0]).value, 38u);
}

TEST_F(LinkTiming, BackfillOnALaterHopOfTheRoute) {
  // X: (1,0) -> (2,0) ready 10, 20 B = 5 cycles: link (1,0)E busy [10, 15).
  flow.send(route({1, 0}, {2, 0}), Bytes{20}, Timed{Cycles{10}, {}});
  // Y: (0,0) -> (2,0) ready 0, 24 B = 6 cycles: (0,0)E [0, 6); its head reaches
  // (1,0)E at 1 and the gap [1, 10) holds 6 cycles: arrives 1 + 1 + 6 = 8.
  const Timed y = flow.send(route({0, 0}, {2, 0}), Bytes{24}, Timed{});
  EXPECT_EQ(y.at.value, 8u);
  EXPECT_EQ(y.path.contention, 0u);
  // Z: same route, ready 6: (0,0)E free at 6; head at (1,0)E at 7, the gap
  // [7, 10) is too short for 6 cycles: waits for X's end at 15 and arrives
  // 15 + 1 + 6 = 22 (2 hops + 6 serialization + 8 contention after 6).
  const Timed z = flow.send(route({0, 0}, {2, 0}), Bytes{24}, Timed{Cycles{6}, {}});
  EXPECT_EQ(z.at.value, 22u);
  EXPECT_EQ(z.path.hops, 2u);
  EXPECT_EQ(z.path.serialization, 6u);
  EXPECT_EQ(z.path.contention, 8u);
}

TEST_F(LinkTiming, AFullLinkFoldsItsOldestIntervalIntoTheFloor) {
  // kLinkIntervals + 1 one-cycle reservations at 10, 20, ...: one too many, so
  // the oldest, [10, 11), is folded into the floor (everything before 11 busy).
  const auto r = route({0, 0}, {1, 0});
  for (int i = 1; i <= kLinkIntervals + 1; ++i)
    flow.send(r, Bytes{4}, Timed{Cycles{10u * static_cast<std::uint64_t>(i)}, {}});
  EXPECT_EQ(flow.link_floor(r[0]).value, 11u);
  EXPECT_EQ(flow.link_busy_intervals(r[0]).size(), static_cast<std::size_t>(kLinkIntervals));
  // Conservative: a message ready at 5 (free in the exact schedule) waits
  // until the floor, 11, and arrives at 11 + 1 + 1 = 13.
  const Timed early = flow.send(r, Bytes{4}, Timed{Cycles{5}, {}});
  EXPECT_EQ(early.at.value, 13u);
  EXPECT_EQ(early.path.contention, 6u);
  // A gap that is still kept is used: [21, 30) for a message ready at 25.
  EXPECT_EQ(flow.send(r, Bytes{4}, Timed{Cycles{25}, {}}).at.value, 27u);
}

TEST_F(LinkTiming, InterleavedSharingTakesTheFreeCyclesAroundReservations) {
  // Link (1,0)E busy [10, 20) (40 B from (1,0) to (2,0), sent at 10). An
  // interleaving 40 B message from (0,0) to (3,0), ready at 4 (other ramps
  // than the first's): (0,0)E idle, [4, 14); its head reaches (1,0)E at 5 and
  // takes [5, 10) and [20, 25): tail at (2,0) 25 + 1 = 26, 10 cycles of it
  // contention; (2,0)E is idle but the tail cannot pass the hop before:
  // 26 + 1 = 27 (hops 3, serialization 10, contention 10). Exclusive, it
  // waits for a 10-cycle gap on (1,0)E: [20, 30), then (2,0)E [21, 31): 32.
  flow.send(route({1, 0}, {2, 0}), Bytes{40}, Timed{Cycles{10}, {}});
  FlowModel exclusive{mesh, spec};
  exclusive.send(route({1, 0}, {2, 0}), Bytes{40}, Timed{Cycles{10}, {}});
  flow.set_sharing(LinkSharing::interleave);
  const Timed t = flow.send(route({0, 0}, {3, 0}), Bytes{40}, Timed{Cycles{4}, {}});
  EXPECT_EQ(t.at.value, 27u);
  EXPECT_EQ(t.path.hops, 3u);
  EXPECT_EQ(t.path.serialization, 10u);
  EXPECT_EQ(t.path.contention, 10u);
  EXPECT_EQ(t.path.total(), 23u);
  const auto busy = flow.link_busy_intervals(route({1, 0}, {2, 0})[0]);
  ASSERT_EQ(busy.size(), 1u);  // [5, 25): the gap was filled
  EXPECT_EQ(busy[0].first.value, 5u);
  EXPECT_EQ(busy[0].second.value, 25u);
  EXPECT_EQ(exclusive.send(route({0, 0}, {3, 0}), Bytes{40}, Timed{Cycles{4}, {}}).at.value, 32u);
}

// Core ramps: a core receives one wavelet per cycle in all. Four 40 B
// messages (10 wavelets each) from the four neighbours of (5,5), all ready at
// 0 and on disjoint links, each arrive after 1 hop + 10 cycles = 11 on their
// own; through (5,5)'s one ejection ramp, shared wavelet by wavelet, the last
// has all its wavelets at 1 + 40 = 41 (the ramp took 40 wavelets in cycles
// [1, 41)). Likewise one core sending four messages at once injects them at
// one wavelet per cycle.
TEST_F(LinkTiming, ACoreReceivesAndSendsOneWaveletPerCycleInAll) {
  const Coord centre{5, 5};
  std::uint64_t last = 0, sum = 0;
  for (const Coord from : {Coord{4, 5}, Coord{6, 5}, Coord{5, 4}, Coord{5, 6}}) {
    const Timed t = flow.send(route(from, centre), Bytes{40}, Timed{Cycles{0}, {}});
    last = std::max(last, t.at.value);
    sum += t.at.value;
  }
  EXPECT_EQ(last, 41u);
  EXPECT_EQ(sum, 11u + 21u + 31u + 41u);  // fill gives the ramp to them in turn here
  EXPECT_EQ(flow.ramp_bytes_ejected(mesh.id(centre)), 160u);
  FlowModel out{mesh, spec};
  std::uint64_t last_out = 0;
  for (const Coord to : {Coord{4, 5}, Coord{6, 5}, Coord{5, 4}, Coord{5, 6}})
    last_out = std::max(last_out,
                        out.send(route(centre, to), Bytes{40}, Timed{Cycles{0}, {}}).at.value);
  EXPECT_EQ(last_out, 41u);  // the fourth leaves the ramp at 40, 1 hop later it is there
  EXPECT_EQ(out.ramp_bytes_injected(mesh.id(centre)), 160u);
}

TEST(LinkState, NeverDoubleBooksAndIsExactWhileItHasRoom) {
  // Random reservations on one link against a cycle-by-cycle occupancy map:
  // every chosen slot is free in the map (no cycle booked twice), and while
  // no interval had to be folded (at most kLinkIntervals reservations) the
  // chosen start is the exact earliest fit.
  std::uint64_t state = 12345;
  auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    FlowModel::LinkState link;
    std::vector<bool> used(2000, false);
    const int n = 1 + static_cast<int>(next(24));
    for (int i = 0; i < n; ++i) {
      const std::uint64_t t = next(300), len = 1 + next(20);
      const std::uint64_t s = link.earliest_fit(t, len);
      std::uint64_t exact = t;
      auto free_at = [&](std::uint64_t a) {
        for (std::uint64_t c = a; c < a + len; ++c) {
          if (used[c]) return false;
        }
        return true;
      };
      while (!free_at(exact)) ++exact;
      ASSERT_GE(s, t);
      ASSERT_TRUE(free_at(s)) << "trial " << trial << " step " << i;
      if (i < kLinkIntervals) {
        ASSERT_EQ(s, exact) << "trial " << trial << " step " << i;
      }
      link.reserve(s, len);
      for (std::uint64_t c = s; c < s + len; ++c) used[c] = true;
    }
  }
}

}  // namespace
}  // namespace wafersim::fabric
