#include "fabric/link_timing.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/test_spec.hpp"

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

// FlowModel keeps its link records in zeroed pages (ZeroedArray), which is
// right only if all-zero bytes are a fresh record.
TEST(LinkState, ZeroBytesAreAFreshRecord) {
  unsigned char zeros[sizeof(FlowModel::LinkState)] = {};
  FlowModel::LinkState z;
  std::memcpy(&z, zeros, sizeof z);
  const FlowModel::LinkState fresh{};
  EXPECT_EQ(z.floor_and_count, fresh.floor_and_count);
  EXPECT_EQ(z.floor(), 0u);
  EXPECT_EQ(z.count(), 0);
  for (int i = 0; i < kLinkIntervals; ++i) {
    EXPECT_EQ(z.start[i], fresh.start[i]);
    EXPECT_EQ(z.end[i], fresh.end[i]);
  }
}

TEST(ZeroedArray, ElementsStartValueInitialisedAndAreWritable) {
  ZeroedArray<FlowModel::LinkState> a(100000);
  ASSERT_EQ(a.size(), 100000u);
  EXPECT_EQ(a[0].floor(), 0u);
  EXPECT_EQ(a[99999].count(), 0);
  a[12345].reserve(10, 5);
  EXPECT_EQ(a[12345].earliest_fit(10, 5), 15u);
  EXPECT_EQ(a[12346].earliest_fit(10, 5), 10u);
  ZeroedArray<FlowModel::LinkState> none(0);
  EXPECT_EQ(none.size(), 0u);
}

// Prefaulting (PagePrefaulter) writes nothing: values the simulation wrote
// before and while it runs stay, untouched elements stay zero, and it covers
// every byte (or none, on a kernel without MADV_POPULATE_WRITE).
TEST(ZeroedArray, PrefaultingKeepsEveryValue) {
  const std::size_t n = std::size_t{1} << 21;  // 16 MiB of 8-byte elements
  ZeroedArray<std::uint64_t> a(n);
  a[12345] = 7;
  fabric::PagePrefaulter prefault({a.pages()});
  for (std::size_t i = 1; i < 4096; ++i) a[(i * 7919) % n] = i;  // while it runs
  prefault.wait();
  EXPECT_TRUE(prefault.done_bytes() == n * sizeof(std::uint64_t) || prefault.done_bytes() == 0)
      << prefault.done_bytes();
  for (std::size_t i = 1; i < 4096; ++i) EXPECT_EQ(a[(i * 7919) % n], i);
  EXPECT_EQ(a[12345], 7u);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < n; ++i) nonzero += a[i] != 0;
  EXPECT_EQ(nonzero, 4096u);  // the 4095 written and element 12345
}

// A plain link record: the floor and the busy intervals as absolute cycles,
// each rule written from its definition in link_timing.hpp rather than from
// the compact record's code. The reference the compact 40-byte record must
// agree with, decision for decision.
struct ReferenceLinkState {
  using Interval = std::pair<std::uint64_t, std::uint64_t>;  // busy [first, second)
  std::uint64_t floor = 0;
  std::vector<Interval> busy;  // sorted, disjoint, not touching, all after the floor
  // Intervals kept before a gap is given up (the compact record's bound;
  // SIZE_MAX: an exact record that never gives one up).
  std::size_t capacity = kLinkIntervals;

  // The busy interval cycle c is in, if any (c at or after the floor).
  const Interval* busy_at(std::uint64_t c) const {
    for (const Interval& iv : busy)
      if (iv.first <= c && c < iv.second) return &iv;
    return nullptr;
  }
  bool fits(std::uint64_t s, std::uint64_t len) const {
    if (s < floor) return false;
    for (const Interval& iv : busy)
      if (iv.first < s + len && s < iv.second) return false;
    return true;
  }
  // The earliest start >= t at which [s, s + len) is free. It is t (or the
  // floor) or the end of a busy interval; past the last interval everything
  // is free.
  std::uint64_t earliest_fit(std::uint64_t t, std::uint64_t len) const {
    const std::uint64_t s = std::max(t, floor);
    if (fits(s, len)) return s;
    for (const Interval& iv : busy)
      if (iv.second > s && fits(iv.second, len)) return iv.second;
    ADD_FAILURE() << "no fit after the last interval";
    return 0;
  }
  // Every cycle before `to` counts busy, and so does any interval the new
  // floor reaches into or touches.
  void raise_floor(std::uint64_t to) {
    if (to <= floor) return;
    floor = to;
    while (!busy.empty() && busy.front().first <= floor) {
      floor = std::max(floor, busy.front().second);
      busy.erase(busy.begin());
    }
  }
  // Insert, merge what touches, and when one interval too many, give up the
  // gap with the fewest free cycles at or after `now` (the earliest of
  // equals; the gap before the first interval is given up by raising the
  // floor). Bounds more than 2^32 cycles past the floor move it up to 2^31
  // cycles before the end.
  void reserve(std::uint64_t s, std::uint64_t len, std::uint64_t now) {
    if (len == 0) return;
    std::uint64_t e = s + len;
    constexpr std::uint64_t kSpan = std::numeric_limits<std::uint32_t>::max();
    if (e - std::min(e, floor) > kSpan) raise_floor(e - (std::uint64_t{1} << 31));
    s = std::max(s, floor);
    if (e <= floor) return;
    if (s == floor) {
      raise_floor(e);
      return;
    }
    std::vector<Interval> v = busy;
    v.emplace_back(s, e);
    std::sort(v.begin(), v.end());
    std::vector<Interval> merged;
    for (const auto& iv : v) {
      if (!merged.empty() && iv.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, iv.second);
      else
        merged.push_back(iv);
    }
    if (merged.size() > capacity) {
      auto worth = [&](std::uint64_t a, std::uint64_t b) {
        a = std::max(a, now);
        return b > a ? b - a : 0;
      };
      std::size_t gap = 0;
      std::uint64_t least = worth(floor, merged[0].first);
      for (std::size_t i = 1; i < merged.size(); ++i)
        if (worth(merged[i - 1].second, merged[i].first) < least)
          least = worth(merged[i - 1].second, merged[i].first), gap = i;
      if (gap == 0) {
        floor = merged[0].second;
        merged.erase(merged.begin());
      } else {
        merged[gap - 1].second = merged[gap].second;
        merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(gap));
      }
    }
    busy = merged;
  }
  // A link that takes one wavelet per cycle: wavelet by wavelet, each takes
  // the next cycle at or after t that was free when the fill began (a busy
  // interval is stepped over whole), until `len` are placed; then the cycles
  // taken, as runs, are reserved in order.
  std::vector<Interval> fill(std::uint64_t t, std::uint64_t len, std::uint64_t now) {
    std::vector<Interval> taken;
    std::uint64_t c = std::max(t, floor);
    for (std::uint64_t placed = 0; placed < len;) {
      if (const Interval* in = busy_at(c)) {
        c = in->second;
        continue;
      }
      if (!taken.empty() && taken.back().second == c)
        ++taken.back().second;
      else
        taken.emplace_back(c, c + 1);
      ++placed;
      ++c;
    }
    for (const Interval& run : taken) reserve(run.first, run.second - run.first, now);
    return taken;
  }
};

void expect_same_state(const FlowModel::LinkState& a, const ReferenceLinkState& r,
                       const std::string& where) {
  ASSERT_EQ(a.floor(), r.floor) << where;
  ASSERT_EQ(static_cast<std::size_t>(a.count()), r.busy.size()) << where;
  for (std::size_t i = 0; i < r.busy.size(); ++i) {
    ASSERT_EQ(a.floor() + a.start[i], r.busy[i].first) << where << " interval " << i;
    ASSERT_EQ(a.floor() + a.end[i], r.busy[i].second) << where << " interval " << i;
  }
}

TEST(LinkState, CompactRecordDecidesAsTheReference) {
  // Random reservations (mostly in time order, as the engine makes them,
  // some backfilling earlier gaps, some far ahead to move the floor past
  // the 32-bit span) on the record and on the reference: every earliest fit,
  // every fill's cycles and every state after a reservation or a fill must
  // be the same.
  std::uint64_t state = 987654321;
  auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 17) % n;
  };
  int multi_piece_fills = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    FlowModel::LinkState link;
    ReferenceLinkState ref;
    std::uint64_t now = next(50);
    const int n = 1 + static_cast<int>(next(60));
    for (int i = 0; i < n; ++i) {
      const std::uint64_t kind = next(20);
      std::uint64_t t = now, len = 1 + next(40);
      if (kind == 0)
        t = now + (std::uint64_t{1} << 32) + next(1000);  // past the span
      else if (kind < 5)
        t = now > 200 ? now - next(200) : 0;  // backfill
      else
        t = now + next(60);
      if (kind == 1) len = 1 + next(1u << 20);
      const std::string where = "trial " + std::to_string(trial) + " step " + std::to_string(i);
      const std::uint64_t s = link.earliest_fit(t, len);
      ASSERT_EQ(s, ref.earliest_fit(t, len)) << where;
      ASSERT_EQ(link.floor_and_count >> FlowModel::LinkState::kCountShift, ref.busy.size())
          << where;
      if (next(8) == 0) {
        // LinkSharing::interleave: the free cycles from t on, in pieces (a
        // fill of at most a few hundred wavelets: the reference places them
        // one cycle at a time).
        len = std::min<std::uint64_t>(len, 300);
        WaveletRuns taken;
        const std::uint64_t end = link.fill(t, len, taken, now);
        const auto expected = ref.fill(t, len, now);
        ASSERT_EQ(taken.n, static_cast<int>(expected.size())) << where;
        for (int k = 0; k < taken.n; ++k) {
          const auto run = expected[static_cast<std::size_t>(k)];
          ASSERT_EQ(taken.start[k], run.first) << where << " run " << k;
          ASSERT_EQ(taken.count[k], run.second - run.first) << where << " run " << k;
        }
        ASSERT_EQ(end, expected.back().second) << where;
        multi_piece_fills += taken.n > 1;
      } else {
        link.reserve(s, len, now);
        ref.reserve(s, len, now);
      }
      expect_same_state(link, ref, where);
      now = std::max(now, s);
    }
  }
  EXPECT_GT(multi_piece_fills, 100);  // fills that went around reservations
}

TEST(LinkState, AppendFastPathReservesAsReserveDoes) {
  // reserve_after_last (pass()'s inline path) against earliest_fit and
  // reserve on a twin record: where it takes a reservation, earliest_fit
  // must have found the same start and reserve must leave the very same
  // 40 bytes; where it refuses, it must leave the record untouched.
  // Reservations mostly in time order, some touching the last interval,
  // some behind it, some far ahead, with `now` sometimes behind the first
  // interval (a full record then keeps its gaps: the general path).
  std::uint64_t state = 1234567;
  auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 17) % n;
  };
  int taken = 0, refused = 0, folded = 0, touching = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    FlowModel::LinkState fast, twin;
    std::uint64_t now = next(50), last_end = 0;
    const int n = 1 + static_cast<int>(next(40));
    for (int i = 0; i < n; ++i) {
      const std::uint64_t kind = next(16);
      std::uint64_t t = last_end + next(30), len = 1 + next(20);
      if (kind == 0) t = last_end;                                       // touches
      if (kind == 1) t = last_end > 40 ? last_end - next(40) : 0;        // behind the last
      if (kind == 2) t = last_end + (std::uint64_t{1} << 32) + next(9);  // past the span
      if (kind == 3) len = 0;
      const std::string where = "trial " + std::to_string(trial) + " step " + std::to_string(i);
      const std::uint64_t s = twin.earliest_fit(t, len);
      const int count_before = fast.count();
      const std::uint64_t floor_before = fast.floor();
      unsigned char before[sizeof fast];
      std::memcpy(before, &fast, sizeof fast);
      if (fast.reserve_after_last(t, len, now)) {
        ASSERT_EQ(s, t) << where;
        twin.reserve(s, len, now);
        ++taken;
        folded += count_before == kLinkIntervals && fast.floor() != floor_before;
        touching += t == last_end;
      } else {
        ASSERT_EQ(std::memcmp(before, &fast, sizeof fast), 0) << where;
        fast.reserve(s, len, now);
        twin.reserve(s, len, now);
        ++refused;
      }
      ASSERT_EQ(std::memcmp(&fast, &twin, sizeof fast), 0) << where;
      last_end = std::max(last_end, s + len);
      if (next(3) == 0) now = std::max(now, t > 30 ? t - next(30) : t);
    }
  }
  EXPECT_GT(taken, 10000);
  EXPECT_GT(refused, 3000);
  EXPECT_GT(folded, 1000);
  EXPECT_GT(touching, 500);
}

TEST(LinkState, RefusesReservationsPastItsTimeLimit) {
  FlowModel::LinkState link;
  const std::uint64_t limit = FlowModel::LinkState::kFloorMask;
  link.reserve(limit - 10, 10);  // ends exactly at the limit: still exact
  EXPECT_EQ(link.earliest_fit(limit - 20, 5), limit - 20);
  EXPECT_EQ(link.earliest_fit(limit - 12, 5), limit);
  EXPECT_THROW(link.reserve(limit, 1), std::overflow_error);
}

TEST(FlowModelCounters, ExactPastThirtyTwoBits) {
  const WaferSpec spec = testing::small_spec();
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel flow{mesh, spec};
  std::vector<LinkId> r;
  mesh.xy_route({0, 0}, {2, 0}, r);
  // 3 GiB messages: the second carries both links' byte counters past 2^32.
  const std::uint64_t gib = std::uint64_t{1} << 30;
  for (int i = 0; i < 3; ++i) flow.send(r, Bytes{3 * gib}, Timed{});
  EXPECT_EQ(flow.link_bytes(r[0]), 9 * gib);
  EXPECT_EQ(flow.link_bytes(r[1]), 9 * gib);
  // The link is busy for the three messages' serialization, 2.25 G cycles.
  const auto busy = flow.link_busy_intervals(r[0]);
  const std::uint64_t reserved =
      flow.link_floor(r[0]).value +
      (busy.empty() ? 0 : busy.back().second.value - busy.front().first.value);
  EXPECT_EQ(reserved, 3 * flow.serialization(Bytes{3 * gib}).value);
  // An untouched link next to them still reads 0.
  EXPECT_EQ(flow.link_bytes(mesh.link(Coord{0, 1}, Direction::east)), 0u);
  const auto by_core = flow.link_bytes_by_core();
  EXPECT_EQ(by_core[mesh.id(Coord{1, 0}).value * kDirections +
                    static_cast<std::uint32_t>(Direction::east)],
            9 * gib);
}

TEST_F(LinkTiming, UncontendedTransferArrivesAfterHopsPlusSerialization) {
  // 3 hops at 1 cycle each, 64 B at 4 B/cycle = 16 cycles: 100 + 3 + 16.
  const Timed t = flow.send(route({0, 0}, {3, 0}), Bytes{64}, Timed{Cycles{100}, {}});
  EXPECT_EQ(t.at.value, 119u);
  EXPECT_EQ(t.path.hops.value, 3u);
  EXPECT_EQ(t.path.serialization.value, 16u);
  EXPECT_EQ(t.path.contention.value, 0u);
  EXPECT_EQ(t.path.total().value, 19u);  // the breakdown explains the whole latency
}

TEST_F(LinkTiming, PartialWaveletRoundsUpToWholeCycles) {
  const Timed t = flow.send(route({0, 0}, {1, 0}), Bytes{6}, Timed{});
  EXPECT_EQ(t.at.value, 1u + 2u);
}

TEST_F(LinkTiming, TwoTransfersSharingALinkSerialize) {
  // A: (0,0)->(2,0) uses links (0,0)E, (1,0)E. B: (1,0)->(3,0) uses (1,0)E, (2,0)E.
  // Both ready at 0, 40 B each (10 cycles). A reserves (1,0)E for [1, 11).
  // B must wait until 11 to enter (1,0)E: s0 = 11, s1 = 12, arrives 12+1+10 = 23.
  flow.set_sharing(LinkSharing::exclusive);
  const Timed a = flow.send(route({0, 0}, {2, 0}), Bytes{40}, Timed{});
  const Timed b = flow.send(route({1, 0}, {3, 0}), Bytes{40}, Timed{});
  EXPECT_EQ(a.at.value, 12u);
  EXPECT_EQ(b.at.value, 23u);
  EXPECT_EQ(b.path.contention.value, 11u);
  EXPECT_EQ(b.path.total().value, 23u);
  // Alone, B would have taken 2 + 10 = 12 cycles.
  FlowModel fresh{mesh, spec};
  EXPECT_EQ(fresh.send(route({1, 0}, {3, 0}), Bytes{40}, Timed{}).at.value, 12u);
  // Interleaved (the default): B's first wavelet takes (1,0)E in cycle 0,
  // before A's head arrives; the other nine take [11, 20) after A's tail.
  // On (2,0)E: cycle 1 and [12, 21); through (3,0)'s ramp: the last at 22.
  FlowModel shared{mesh, spec};
  EXPECT_EQ(shared.sharing(), LinkSharing::interleave);
  EXPECT_EQ(shared.send(route({0, 0}, {2, 0}), Bytes{40}, Timed{}).at.value, 12u);
  const Timed bi = shared.send(route({1, 0}, {3, 0}), Bytes{40}, Timed{});
  EXPECT_EQ(bi.at.value, 22u);
  EXPECT_EQ(bi.path.contention.value, 10u);
  EXPECT_EQ(bi.path.total().value, 22u);
  // (1,0)E busy [0, 20): 20 wavelets in 20 cycles (from 0 on: the floor).
  EXPECT_EQ(shared.link_floor(route({1, 0}, {2, 0})[0]).value, 20u);
  EXPECT_TRUE(shared.link_busy_intervals(route({1, 0}, {2, 0})[0]).empty());
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
  ready[2].path.compute = Cycles{20};
  const Timed t = flow.reduce_chain(r, Bytes{16}, ready);
  EXPECT_EQ(t.at.value, 27u);
  EXPECT_EQ(t.path.compute.value, 20u);  // the late contributor is on the critical path
  EXPECT_EQ(t.path.total().value, 27u);
}

TEST_F(LinkTiming, AMessageBackfillsAGapBeforeALaterReservation) {
  // Link (0,0)E. A, sent first, is ready at 20: 40 B = 10 cycles, [20, 30).
  flow.set_sharing(LinkSharing::exclusive);
  const auto r = route({0, 0}, {1, 0});
  EXPECT_EQ(flow.send(r, Bytes{40}, Timed{Cycles{20}, {}}).at.value, 20u + 1u + 10u);
  // B, sent later but ready at 0: 16 B = 4 cycles fit the gap [0, 20): it
  // goes at 0 and arrives at 0 + 1 + 4 = 5 (one free_at per link: 30 + 5 = 35).
  const Timed b = flow.send(r, Bytes{16}, Timed{});
  EXPECT_EQ(b.at.value, 5u);
  EXPECT_EQ(b.path.contention.value, 0u);
  // C, ready at 2: the gap is now [4, 20); it waits 2 cycles, arrives 4 + 1 + 4 = 9.
  const Timed c = flow.send(r, Bytes{16}, Timed{Cycles{2}, {}});
  EXPECT_EQ(c.at.value, 9u);
  EXPECT_EQ(c.path.contention.value, 2u);
  // D, ready at 15, 32 B = 8 cycles: the gap [15, 20) is 5 cycles, too short;
  // it waits for A's end at 30 and arrives 30 + 1 + 8 = 39, 15 cycles of contention.
  const Timed d = flow.send(r, Bytes{32}, Timed{Cycles{15}, {}});
  EXPECT_EQ(d.at.value, 39u);
  EXPECT_EQ(d.path.contention.value, 15u);
  EXPECT_EQ(d.path.total().value, 39u - 15u);
  // The link's busy intervals: [0, 8) (B and C, merged) is the floor, then A and D merged.
  EXPECT_EQ(flow.link_floor(r[0]).value, 8u);
  const auto busy = flow.link_busy_intervals(r[0]);
  ASSERT_EQ(busy.size(), 1u);
  EXPECT_EQ(busy[0].first.value, 20u);
  EXPECT_EQ(busy[0].second.value, 38u);
  EXPECT_EQ(flow.link_reserved_until(r[0]).value, 38u);
  // Interleaved, D takes the 5 free cycles [15, 20), then [30, 33) after A:
  // it arrives at 34 (10 cycles of contention) and the link is busy [15, 33).
  FlowModel shared{mesh, spec};
  shared.send(r, Bytes{40}, Timed{Cycles{20}, {}});
  EXPECT_EQ(shared.send(r, Bytes{16}, Timed{}).at.value, 5u);
  EXPECT_EQ(shared.send(r, Bytes{16}, Timed{Cycles{2}, {}}).at.value, 9u);
  const Timed di = shared.send(r, Bytes{32}, Timed{Cycles{15}, {}});
  EXPECT_EQ(di.at.value, 34u);
  EXPECT_EQ(di.path.contention.value, 10u);
  const auto shared_busy = shared.link_busy_intervals(r[0]);
  ASSERT_EQ(shared_busy.size(), 1u);
  EXPECT_EQ(shared_busy[0].first.value, 15u);
  EXPECT_EQ(shared_busy[0].second.value, 33u);
}

TEST_F(LinkTiming, BackfillOnALaterHopOfTheRoute) {
  // X: (1,0) -> (2,0) ready 10, 20 B = 5 cycles: link (1,0)E busy [10, 15).
  flow.set_sharing(LinkSharing::exclusive);
  flow.send(route({1, 0}, {2, 0}), Bytes{20}, Timed{Cycles{10}, {}});
  // Y: (0,0) -> (2,0) ready 0, 24 B = 6 cycles: (0,0)E [0, 6); its head reaches
  // (1,0)E at 1 and the gap [1, 10) holds 6 cycles: arrives 1 + 1 + 6 = 8.
  const Timed y = flow.send(route({0, 0}, {2, 0}), Bytes{24}, Timed{});
  EXPECT_EQ(y.at.value, 8u);
  EXPECT_EQ(y.path.contention.value, 0u);
  // Z: same route, ready 6: (0,0)E free at 6; head at (1,0)E at 7, the gap
  // [7, 10) is too short for 6 cycles: waits for X's end at 15 and arrives
  // 15 + 1 + 6 = 22 (2 hops + 6 serialization + 8 contention after 6).
  const Timed z = flow.send(route({0, 0}, {2, 0}), Bytes{24}, Timed{Cycles{6}, {}});
  EXPECT_EQ(z.at.value, 22u);
  EXPECT_EQ(z.path.hops.value, 2u);
  EXPECT_EQ(z.path.serialization.value, 6u);
  EXPECT_EQ(z.path.contention.value, 8u);
  // Interleaved, Z's wavelets reach (1,0)E at 7..12: three take [7, 10), the
  // other three [15, 18) after X; arrives 18 + 1 = 19 (5 cycles of contention).
  FlowModel shared{mesh, spec};
  shared.send(route({1, 0}, {2, 0}), Bytes{20}, Timed{Cycles{10}, {}});
  EXPECT_EQ(shared.send(route({0, 0}, {2, 0}), Bytes{24}, Timed{}).at.value, 8u);
  const Timed zi = shared.send(route({0, 0}, {2, 0}), Bytes{24}, Timed{Cycles{6}, {}});
  EXPECT_EQ(zi.at.value, 19u);
  EXPECT_EQ(zi.path.contention.value, 5u);
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
  EXPECT_EQ(early.path.contention.value, 6u);
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
  exclusive.set_sharing(LinkSharing::exclusive);
  exclusive.send(route({1, 0}, {2, 0}), Bytes{40}, Timed{Cycles{10}, {}});
  const Timed t = flow.send(route({0, 0}, {3, 0}), Bytes{40}, Timed{Cycles{4}, {}});
  EXPECT_EQ(t.at.value, 27u);
  EXPECT_EQ(t.path.hops.value, 3u);
  EXPECT_EQ(t.path.serialization.value, 10u);
  EXPECT_EQ(t.path.contention.value, 10u);
  EXPECT_EQ(t.path.total().value, 23u);
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
// [1, 41)).
TEST_F(LinkTiming, ACoreReceivesOneWaveletPerCycleInAll) {
  const Coord centre{5, 5};
  std::uint64_t last = 0, sum = 0;
  for (const Coord from : {Coord{4, 5}, Coord{6, 5}, Coord{5, 4}, Coord{5, 6}}) {
    const Timed t = flow.send(route(from, centre), Bytes{40}, Timed{Cycles{0}, {}});
    last = std::max(last, t.at.value);
    sum += t.at.value;
  }
  EXPECT_EQ(last, 41u);
  EXPECT_EQ(sum, 11u + 21u + 31u + 41u);  // fill gives the ramp to them in turn here
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

// With the model's table of wide records, a link answers every query at or
// after `now` as an exact record (one that never gives a gap up) does,
// whatever order the reservations come in: here far ahead of `now` and
// mixed, as a message's later hops reserve them, with `now` advancing; the
// record goes wide and comes back to compact form as its intervals fall
// behind `now`.
TEST(LinkState, WithWideRecordsAnswersAsAnExactRecord) {
  std::uint64_t state = 424242;
  auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 17) % n;
  };
  FlowModel::WideRecords wide;
  int went_wide = 0, came_back = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    FlowModel::LinkState link;
    ReferenceLinkState exact;
    exact.capacity = std::numeric_limits<std::size_t>::max();
    std::uint64_t now = next(50);
    bool was_wide = false;
    const int n = 1 + static_cast<int>(next(300));
    for (int i = 0; i < n; ++i) {
      const std::string where = "trial " + std::to_string(trial) + " step " + std::to_string(i);
      const std::uint64_t t = now + (next(4) == 0 ? next(8) : next(400));
      std::uint64_t len = 1 + (next(3) == 0 ? next(30) : next(3));
      const std::uint64_t s = link.earliest_fit(t, len, &wide);
      ASSERT_EQ(s, exact.earliest_fit(t, len)) << where;
      if (next(6) == 0) {
        WaveletRuns taken;
        const std::uint64_t end = link.fill(t, len, taken, now, &wide);
        const auto expected = exact.fill(t, len, now);
        ASSERT_EQ(end, expected.back().second) << where;
        ASSERT_EQ(taken.wavelets(), len) << where;
        if (static_cast<int>(expected.size()) <= WaveletRuns::kMax) {
          ASSERT_EQ(taken.n, static_cast<int>(expected.size())) << where;
          for (int k = 0; k < taken.n; ++k)
            ASSERT_EQ(taken.start[k], expected[static_cast<std::size_t>(k)].first) << where;
        }
      } else {
        link.reserve(s, len, now, &wide);
        exact.reserve(s, len, now);
      }
      was_wide = was_wide || link.wide();
      came_back += was_wide && !link.wide() ? 1 : 0;
      if (was_wide && !link.wide()) was_wide = false;
      if (next(3) == 0) now += next(6);
      // Every cycle a query may still ask about is as the exact record has it.
      for (std::uint64_t c = now; c < now + 450; c += 1 + next(7))
        ASSERT_EQ(link.earliest_fit(c, 1, &wide), exact.earliest_fit(c, 1))
            << where << " cycle " << c;
    }
    went_wide += was_wide || link.wide();
    wide.retire_all();
  }
  EXPECT_GT(went_wide, 300);
  EXPECT_GT(came_back, 100);
  EXPECT_EQ(wide.in_use(), 0u);
  EXPECT_EQ(wide.gaps_given_up(), 0u);  // never full at these sizes
}

// A shared table of wide records (WideRecords::set_shared, as
// FlowModel::set_concurrent sets it while Executor::gemv times a GEMV on two
// threads) takes two threads at once, each reserving on links of its own:
// every link still answers as an exact record, while both threads' links
// go wide, grow and come back to compact form side by side. (Built with
// -fsanitize=thread, this also checks that the table's changes are guarded.)
TEST(LinkState, SharedWideRecordsTakeTwoThreadsAtOnce) {
  FlowModel::WideRecords wide;
  wide.set_shared(true);
  struct Side {
    std::uint64_t state;
    int went_wide = 0, came_back = 0, mismatches = 0;
  };
  auto run = [&wide](Side& side) {
    auto next = [&side](std::uint64_t n) {
      side.state = side.state * 6364136223846793005ull + 1442695040888963407ull;
      return (side.state >> 17) % n;
    };
    for (int trial = 0; trial < 600; ++trial) {
      FlowModel::LinkState link;
      ReferenceLinkState exact;
      exact.capacity = std::numeric_limits<std::size_t>::max();
      std::uint64_t now = next(50);
      bool was_wide = false;
      const int n = 1 + static_cast<int>(next(300));
      for (int i = 0; i < n; ++i) {
        const std::uint64_t t = now + (next(4) == 0 ? next(8) : next(400));
        const std::uint64_t len = 1 + (next(3) == 0 ? next(30) : next(3));
        const std::uint64_t s = link.earliest_fit(t, len, &wide);
        if (s != exact.earliest_fit(t, len)) ++side.mismatches;
        if (next(6) == 0) {
          WaveletRuns taken;
          link.fill(t, len, taken, now, &wide);
          exact.fill(t, len, now);
        } else {
          link.reserve(s, len, now, &wide);
          exact.reserve(s, len, now);
        }
        if (link.wide()) was_wide = true;
        if (was_wide && !link.wide()) ++side.came_back, was_wide = false;
        if (next(3) == 0) now += next(6);
        for (std::uint64_t c = now; c < now + 450; c += 1 + next(7))
          if (link.earliest_fit(c, 1, &wide) != exact.earliest_fit(c, 1)) ++side.mismatches;
      }
      side.went_wide += was_wide || link.wide() ? 1 : 0;
      // Back to compact form before the record goes (its block to the table).
      link.reserve(now + 100000, 1, now + 100000, &wide);
    }
  };
  Side a{11}, b{977};
  std::thread other(run, std::ref(b));
  run(a);
  other.join();
  for (const Side* side : {&a, &b}) {
    EXPECT_EQ(side->mismatches, 0);
    EXPECT_GT(side->went_wide, 100);
    EXPECT_GT(side->came_back, 50);
  }
  EXPECT_EQ(wide.in_use(), 0u);
}

// The flow model on crowded traffic along long routes, where later hops
// reserve far ahead of `now` and links go wide: every arrival (each node's,
// for multicasts) is as exact records give it, link by link and ramp by ramp
// under the interleave rule written out here. The hop loop asks the caches
// for records and blocks hops ahead of the one it times; this holds it to
// reading them only as they are when its hop comes.
TEST(FlowModelWide, CrowdedLongRoutesArriveAsWithExactRecords) {
  const WaferSpec spec = testing::small_spec(24, 24);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel flow{mesh, spec};
  std::uint64_t state = 777;
  auto next = [&state](std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 17) % n;
  };
  std::vector<ReferenceLinkState> links(mesh.link_count()), ramps(mesh.core_count());
  for (auto& r : links) r.capacity = std::numeric_limits<std::size_t>::max();
  for (auto& r : ramps) r.capacity = std::numeric_limits<std::size_t>::max();
  const std::uint64_t hop = spec.hop_latency.value;
  // The interleave rule on one exact record: each run through the free
  // cycles, in order, `delay` after its cycles in `at`.
  auto pass = [](ReferenceLinkState& r, const WaveletRuns& at, std::uint64_t delay,
                 std::uint64_t now, WaveletRuns& out) {
    out.n = 0;
    std::uint64_t cursor = 0;
    for (int i = 0; i < at.n; ++i)
      for (const auto& [a, b] : r.fill(std::max(at.start[i] + delay, cursor), at.count[i], now))
        out.append(a, b - a), cursor = b;
    return cursor;
  };
  const auto step = [](Direction d) {
    return d == Direction::east    ? Coord{1, 0}
           : d == Direction::west  ? Coord{-1, 0}
           : d == Direction::south ? Coord{0, 1}
                                   : Coord{0, -1};
  };
  std::uint64_t now = 0;
  std::vector<LinkId> route;
  std::vector<Timed> arrivals;
  for (int m = 0; m < 20000; ++m) {
    if (next(40) == 0) now += 1 + next(2);
    const Coord src{static_cast<int>(next(24)), static_cast<int>(next(24))};
    const std::uint64_t wavelets = 1 + (next(4) == 0 ? next(6) : 0);
    const Bytes bytes{4 * wavelets};
    const std::string where = "message " + std::to_string(m);
    route.clear();
    std::vector<Coord> receivers;  // the core at the end of each link that receives
    if (next(5) == 0) {            // a multicast along a line: every node receives
      const auto d = static_cast<Direction>(next(4));
      const Coord s = step(d);
      int hops = 0;
      for (Coord c{src.x + s.x, src.y + s.y};
           c.x >= 0 && c.y >= 0 && c.x < 24 && c.y < 24 && hops < 20;
           c = Coord{c.x + s.x, c.y + s.y})
        receivers.push_back(c), ++hops;
      if (hops == 0) continue;
      mesh.straight_route(src, d, hops, route);
    } else {
      const Coord dst{static_cast<int>(next(24)), static_cast<int>(next(24))};
      if (dst.x == src.x && dst.y == src.y) continue;
      mesh.xy_route(src, dst, route);
      receivers.push_back(dst);
    }
    const bool line = receivers.size() == route.size() && receivers.size() > 1;
    const Timed got = line ? flow.send(route, bytes, Timed{Cycles{now}, {}}, &arrivals)
                           : flow.send(route, bytes, Timed{Cycles{now}, {}});
    WaveletRuns runs = WaveletRuns::from(now, wavelets), taken, received;
    for (std::size_t k = 0; k < route.size(); ++k) {
      if (k > 0) runs.shift(hop);
      pass(links[route[k].value], runs, 0, now, taken);
      runs.assign(taken);
      const bool receives = line || k + 1 == route.size();
      if (!receives) continue;
      const Coord at = line ? receivers[k] : receivers.back();
      const std::uint64_t end = pass(ramps[mesh.id(at).value], runs, hop, now, received);
      if (line) {
        ASSERT_EQ(arrivals[k + 1].at.value, end) << where << " node " << k + 1;
      }
      if (k + 1 == route.size()) {
        ASSERT_EQ(got.at.value, end) << where;
      }
    }
  }
  EXPECT_GT(flow.wide_records().peak(), 200u);  // the wide path was taken (382 links at once)
  EXPECT_EQ(flow.wide_records().gaps_given_up(), 0u);
}

// A full wide record gives up the gap with the fewest free cycles ahead, as
// the compact record did: conservative, never double-booking.
TEST(LinkState, AFullWideRecordGivesUpTheGapWorthLeast) {
  FlowModel::WideRecords wide;
  FlowModel::LinkState link;
  const std::uint64_t now = 0;
  // kWideLinkIntervals + 1 one-cycle reservations, 3 cycles apart but for
  // one pair 2 apart (the gap worth least): far ahead, in reverse order.
  std::vector<std::uint64_t> at;
  for (int i = 0; i <= kWideLinkIntervals; ++i)
    at.push_back(1000 + 3 * static_cast<std::uint64_t>(i) - (i > 500 ? 1 : 0));
  for (auto it = at.rbegin(); it != at.rend(); ++it) link.reserve(*it, 1, now, &wide);
  EXPECT_TRUE(link.wide());
  EXPECT_EQ(wide.gaps_given_up(), 1u);
  // The gap [1000 + 3*500 + 1, 1000 + 3*501 - 1) = [2501, 2502) is busy now.
  EXPECT_EQ(link.earliest_fit(2501, 1, &wide), 2503u);
  EXPECT_EQ(link.earliest_fit(2498, 2, &wide), 2498u);  // the others are kept
  EXPECT_EQ(link.earliest_fit(now, 1000, &wide), now);  // and the long gap before them
}

// WaveletRuns keeps at most kMax runs: one more joins the two with the
// shortest gap, the earlier run moved up against the later (never earlier).
TEST(WaveletRuns, AFullListJoinsTheClosestRunsLater) {
  WaveletRuns r;
  for (int i = 0; i < WaveletRuns::kMax; ++i)
    r.append(100u * static_cast<std::uint64_t>(i), 10);  // gaps of 90
  r.append(795, 3);                                      // touches nothing, so one run too many
  EXPECT_EQ(r.n, WaveletRuns::kMax);
  EXPECT_EQ(r.wavelets(), 10u * WaveletRuns::kMax + 3u);
  EXPECT_EQ(r.end(), 798u);
  // The shortest gap is the new one's (795 - 710 = 85): the run at 700
  // moves up to [785, 795) and joins it.
  EXPECT_EQ(r.start[WaveletRuns::kMax - 1], 785u);
  EXPECT_EQ(r.count[WaveletRuns::kMax - 1], 13u);
  r.append(798, 2);  // touching: extends the last run
  EXPECT_EQ(r.count[WaveletRuns::kMax - 1], 15u);
  // A shorter gap inside: runs 0 and 1 at 0 and 12 (gap 2) join at [2, 22).
  WaveletRuns q;
  q.append(0, 10);
  q.append(12, 10);
  for (int i = 2; i < WaveletRuns::kMax; ++i) q.append(100u * static_cast<std::uint64_t>(i), 10);
  q.append(1000, 1);
  EXPECT_EQ(q.start[0], 2u);
  EXPECT_EQ(q.count[0], 20u);
  EXPECT_EQ(q.start[WaveletRuns::kMax - 1], 1000u);
}

// Pipelining: a 40-wavelet message over 6 links, each link busy for one
// cycle somewhere inside the message's window, on a different wavelet. With
// interleaving, each busy cycle delays the wavelets behind it by one cycle,
// once: the tail is late by the number of busy cycles its wavelets meet
// (at most one per link), not by a whole message per link as in the
// exclusive rule, where every hop waits for a 40-cycle gap.
TEST_F(LinkTiming, InterleavedWavesPayEachBusyCycleOnce) {
  std::vector<LinkId> r;
  mesh.straight_route({0, 0}, Direction::east, 6, r);
  auto run = [&](LinkSharing sharing) {
    FlowModel f{mesh, spec};
    f.set_sharing(sharing);
    // Link k busy in cycle 10 + 6k (a 1-wavelet message from its source).
    for (int k = 0; k < 6; ++k) {
      const Coord src{k, 0};
      f.send(route(src, {k + 1, 0}), Bytes{4},
             Timed{Cycles{10u + 6u * static_cast<unsigned>(k)}, {}});
    }
    return f.send(r, Bytes{160}, Timed{});
  };
  const Timed shared = run(LinkSharing::interleave);
  // Uncontended: 6 hops + 40 = 46. Wavelet 10 meets link 0's busy cycle and
  // moves to 11, pushing the 30 behind it; on link k the stream is at
  // 10 + 6k... + k (+1 from link 0): it meets link k's busy cycle at 10 + 6k
  // only if a wavelet is due there, which every link has (the window is 40
  // cycles wide), so each of the 6 costs one cycle: 52.
  EXPECT_EQ(shared.at.value, 52u);
  EXPECT_EQ(shared.path.contention.value, 6u);
  // Exclusive: every hop waits past its link's busy cycle for a 40-cycle gap:
  // s0 = 11; head at link k at s(k-1) + 1 = 6k + 6 <= 10 + 6k, so sk = 11 + 6k;
  // s5 = 41, tail 41 + 1 + 40 = 82 (36 cycles of contention).
  const Timed exclusive = run(LinkSharing::exclusive);
  EXPECT_EQ(exclusive.at.value, 82u);
  EXPECT_EQ(exclusive.path.contention.value, 36u);
}

// A message that waited far ahead (behind a long one) reserves there; a
// full link record then gives up the short gaps between such far
// reservations, not the long gap before them, which an earlier-ready
// message still finds free.
TEST(LinkState, AFullRecordKeepsTheGapWorthMost) {
  FlowModel::LinkState link;
  const std::uint64_t now = 100;
  link.reserve(90, 10, now);  // [90, 100): the past
  for (std::uint64_t t : {1000u, 1003u, 1006u, 1009u}) link.reserve(t, 1, now);
  // Five intervals: the gap before [90, 100) lies in the past (worth 0): the
  // floor takes it.
  EXPECT_EQ(link.floor(), 100u);
  EXPECT_EQ(link.count(), kLinkIntervals);
  link.reserve(1012, 1, now);
  // Five again: the gap [100, 1000) is worth 900 cycles, each gap between
  // the far ones 2; the first of those, [1001, 1003), is given up.
  EXPECT_EQ(link.floor(), 100u);
  EXPECT_EQ(link.count(), kLinkIntervals);
  EXPECT_EQ(link.earliest_fit(now, 500), now);   // the long gap survives
  EXPECT_EQ(link.earliest_fit(1001, 1), 1004u);  // [1001, 1003) counts busy now
  EXPECT_EQ(link.earliest_fit(1004, 2), 1004u);  // the others are kept
  // Issued in time order (now past everything), the oldest interval is folded.
  FlowModel::LinkState timely;
  for (std::uint64_t t : {10u, 20u, 30u, 40u, 50u}) timely.reserve(t, 1, t);
  EXPECT_EQ(timely.floor(), 11u);
  EXPECT_EQ(timely.count(), kLinkIntervals);
}

}  // namespace
}  // namespace wafersim::fabric
