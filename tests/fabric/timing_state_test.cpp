// The fabric's timing state as later messages see it (FlowModel and
// CoreTimeline add_state_after, shift_records / shift_cores), which the engine's
// layer replay relies on (sim/exec/layer_replay.hpp): reservations that end
// before every message still to come leave no mark; states equal up to a
// shift in time fingerprint alike and answer alike, shifted; and a shifted
// state answers as the same traffic sent that much later.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/core_cost.hpp"
#include "fabric/link_timing.hpp"
#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

struct Message {
  Coord from, to;
  std::uint64_t bytes;
  std::uint64_t ready;
  bool multicast;
};

// `n` messages between random cores of an 8 x 8 mesh, ready in [t0, t0 + span).
std::vector<Message> traffic(std::uint32_t seed, int n, std::uint64_t t0, std::uint64_t span) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> xy(0, 7);
  std::uniform_int_distribution<std::uint64_t> bytes(4, 400), at(0, span - 1);
  std::vector<Message> out;
  for (int i = 0; i < n; ++i) {
    Message m{{xy(rng), xy(rng)}, {xy(rng), xy(rng)}, bytes(rng), t0 + at(rng), i % 3 == 0};
    if (m.from == m.to) m.to.x = (m.to.x + 1) % 8;
    if (m.multicast) m.to.y = m.from.y;  // along a row
    out.push_back(m);
  }
  return out;
}

class TimingState : public ::testing::Test {
 protected:
  WaferSpec spec = testing::small_spec();
  Mesh mesh{spec.mesh_width, spec.mesh_height};

  // Sends `ms` in order, each `shift` cycles later; returns every arrival.
  std::vector<std::uint64_t> send(FlowModel& flow, const std::vector<Message>& ms,
                                  std::uint64_t shift = 0) {
    std::vector<std::uint64_t> arrivals;
    for (const Message& m : ms) {
      std::vector<LinkId> r;
      mesh.xy_route(m.from, m.to, r);
      std::vector<Timed> at;
      const Timed done = flow.send(r, Bytes{m.bytes}, Timed{Cycles{m.ready + shift}, {}},
                                   m.multicast ? &at : nullptr);
      arrivals.push_back(done.at.value - shift);
      for (const Timed& t : at) arrivals.push_back(t.at.value - shift);
    }
    return arrivals;
  }
  static StateHash state(FlowModel& flow, std::uint64_t origin) {
    StateHash h;
    flow.add_state_after(origin, std::min(origin, flow.model_now()), h);
    return h;
  }
};

TEST_F(TimingState, WhatEndsBeforeTheCutoffLeavesNoMark) {
  const std::vector<Message> early = traffic(1, 200, 0, 800);
  const std::vector<Message> live = traffic(2, 150, 20000, 600);
  const std::vector<Message> after = traffic(3, 150, 20700, 600);
  FlowModel with_past{mesh, spec}, without{mesh, spec};
  send(with_past, early);
  ASSERT_LT(with_past.reserved_until().value, 20000u);  // the early traffic is over by then
  EXPECT_EQ(send(with_past, live), send(without, live));
  // From the live traffic's earliest message on, both states are the same...
  EXPECT_TRUE(state(with_past, 20000) == state(without, 20000));
  // ... and answer the same.
  EXPECT_EQ(send(with_past, after), send(without, after));
}

TEST_F(TimingState, StatesEqualUpToAShiftFingerprintAlikeAndAnswerAlike) {
  const std::vector<Message> live = traffic(4, 300, 1000, 900);
  const std::vector<Message> after = traffic(5, 300, 1800, 900);
  const std::uint64_t d = 123457;
  FlowModel a{mesh, spec}, b{mesh, spec};
  send(a, live);
  send(b, live, d);
  EXPECT_TRUE(state(a, 1000) == state(b, 1000 + d));
  EXPECT_FALSE(state(a, 1000) == state(b, 1000));
  EXPECT_EQ(send(a, after), send(b, after, d));
  // One more message in one of them is a different state.
  FlowModel c{mesh, spec};
  send(c, live);
  send(c, {Message{{0, 0}, {7, 0}, 64, 1500, false}});
  EXPECT_FALSE(state(a, 1000) == state(c, 1000));
}

TEST_F(TimingState, AShiftedStateAnswersAsTheSameTrafficSentLater) {
  const std::vector<Message> early = traffic(6, 100, 0, 500);
  const std::vector<Message> live = traffic(7, 300, 10000, 900);
  const std::vector<Message> after = traffic(8, 300, 10800, 900);
  const std::uint64_t d = 54321;
  FlowModel shifted{mesh, spec}, later{mesh, spec};
  send(shifted, early);
  send(shifted, live);
  const std::uint64_t cutoff = std::min<std::uint64_t>(10000, shifted.model_now());
  StateHash unused;
  std::vector<std::uint32_t> records;
  shifted.add_state_after(10000, cutoff, unused, &records);
  EXPECT_FALSE(records.empty());
  shifted.shift_records(records, cutoff, d);
  send(later, early);
  send(later, live, d);
  EXPECT_TRUE(state(shifted, 10000 + d) == state(later, 10000 + d));
  EXPECT_EQ(shifted.model_now(), later.model_now());
  EXPECT_EQ(send(shifted, after, d), send(later, after, d));
}

TEST_F(TimingState, ARegionsFingerprintTakesItsOwnRecordsOnly) {
  // Traffic inside the west half (x < 4) alike; one model also has traffic
  // in the east half, the other a message that leaves the west half.
  std::vector<Message> west = traffic(11, 100, 1000, 500);
  for (Message& m : west) m.from.x %= 4, m.to.x %= 4;
  FlowModel a{mesh, spec}, b{mesh, spec}, c{mesh, spec};
  send(a, west);
  send(b, west);
  send(c, west);
  send(b, {Message{{5, 1}, {7, 6}, 200, 1200, false}});
  send(c, {Message{{1, 2}, {6, 2}, 200, 1200, false}});
  const Rect half{0, 0, 4, 8};
  const auto region_state = [&](FlowModel& f) {
    StateHash h;
    f.add_state_after(1000, std::min<std::uint64_t>(1000, f.model_now()), h, nullptr, &half);
    return h;
  };
  EXPECT_TRUE(region_state(a) == region_state(b));
  EXPECT_FALSE(region_state(a) == region_state(c));
  EXPECT_FALSE(state(a, 1000) == state(b, 1000));
}

// The state in parts (what the replay's threads take side by side): the
// parts' live records, joined, are the whole scan's; states equal up to a
// shift fingerprint alike in parts, and differing ones do not; the byte
// counters' ranges add up to bytes_since's list.
TEST_F(TimingState, ItsPartsMakeTheWholeState) {
  const std::vector<Message> live = traffic(12, 300, 1000, 900);
  const std::uint64_t d = 777;
  FlowModel a{mesh, spec}, b{mesh, spec}, c{mesh, spec};
  send(a, live);
  send(b, live, d);
  send(c, live);
  send(c, {Message{{0, 3}, {6, 3}, 96, 1700, false}});
  const Rect all{0, 0, mesh.width(), mesh.height()};
  const auto in_parts = [&](FlowModel& f, std::uint64_t origin, int parts,
                            std::vector<std::uint32_t>* joined) {
    StateHash h;
    f.add_state_header(origin, all, h);
    for (int p = 0; p < parts; ++p) {
      StateHash part;
      std::vector<std::uint32_t> records;
      f.add_state_part(origin, origin, all, p, parts, part, &records);
      h.add(part);
      if (joined) joined->insert(joined->end(), records.begin(), records.end());
    }
    return h;
  };
  std::vector<std::uint32_t> whole, joined;
  StateHash unused;
  a.add_state_after(1000, 1000, unused, &whole);
  ASSERT_GT(whole.size(), 10u);
  for (const int parts : {1, 3, 7, 1000}) {
    SCOPED_TRACE(parts);
    joined.clear();
    EXPECT_TRUE(in_parts(a, 1000, parts, &joined) == in_parts(b, 1000 + d, parts, nullptr));
    EXPECT_EQ(joined, whole);
    EXPECT_FALSE(in_parts(a, 1000, parts, nullptr) == in_parts(c, 1000, parts, nullptr));
  }
  FlowModel::ByteCounts before;
  c.byte_counts(before);
  send(c, traffic(13, 40, 3000, 100));
  std::vector<std::pair<std::uint32_t, std::uint64_t>> since, ranges;
  c.bytes_since(before, since);
  for (int p = 0; p < 5; ++p) c.add_bytes_since(before, all, p, 5, ranges);
  ASSERT_FALSE(since.empty());
  EXPECT_EQ(ranges, since);
  // A region's: the links leaving its cores.
  const Rect west{0, 0, 4, mesh.height()};
  std::vector<std::pair<std::uint32_t, std::uint64_t>> in_west, expected;
  for (int p = 0; p < 3; ++p) c.add_bytes_since(before, west, p, 3, in_west);
  for (const auto& [l, b] : since)
    if (mesh.link_source(LinkId{l}).x < 4) expected.emplace_back(l, b);
  std::sort(in_west.begin(), in_west.end());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(in_west, expected);
}

TEST_F(TimingState, ByteCountersAddWhatALayerAdded) {
  FlowModel flow{mesh, spec};
  send(flow, traffic(9, 50, 0, 100));
  FlowModel::ByteCounts before;
  flow.byte_counts(before);
  std::vector<std::uint64_t> then(mesh.link_count());
  for (std::size_t l = 0; l < then.size(); ++l)
    then[l] = flow.link_bytes(LinkId{static_cast<std::uint32_t>(l)});
  send(flow, traffic(10, 50, 200, 100));
  std::vector<std::pair<std::uint32_t, std::uint64_t>> added;
  flow.bytes_since(before, added);
  ASSERT_FALSE(added.empty());
  const std::uint64_t once = flow.carried_bytes() - before.carried;
  flow.add_bytes(added, 3);
  EXPECT_EQ(flow.carried_bytes(), before.carried + 4 * once);
  std::vector<std::uint64_t> per_link(mesh.link_count(), 0);
  for (const auto& [l, b] : added) per_link[l] = b;
  std::uint64_t sum = 0;
  for (std::size_t l = 0; l < per_link.size(); ++l) {
    sum += per_link[l];
    EXPECT_EQ(flow.link_bytes(LinkId{static_cast<std::uint32_t>(l)}), then[l] + 4 * per_link[l]);
  }
  EXPECT_EQ(sum, once);
}

TEST_F(TimingState, CoresBusyAfterTheOriginAreTheCoresState) {
  CoreTimeline a(mesh), b(mesh);
  CoreCost cost;
  cost.cycles = Cycles{100};
  a.run(Coord{1, 1}, Timed{Cycles{0}, {}}, cost);  // done at 100: before the origin
  a.run(Coord{2, 2}, Timed{Cycles{950}, {}}, cost);
  b.run(Coord{2, 2}, Timed{Cycles{950 + 7}, {}}, cost);
  StateHash ha, hb;
  std::vector<std::uint32_t> live;
  a.add_state_after(1000, 1000, ha, &live);
  b.add_state_after(1007, 1007, hb);
  EXPECT_TRUE(ha == hb);
  ASSERT_EQ(live.size(), 1u);
  a.shift_cores(live, 7);
  const Timed ta = a.run(Coord{2, 2}, Timed{Cycles{1010}, {}}, cost);
  const Timed tb = b.run(Coord{2, 2}, Timed{Cycles{1010}, {}}, cost);
  EXPECT_EQ(ta.at, tb.at);
  EXPECT_EQ(ta.path.queueing, tb.path.queueing);
  const std::pair<std::uint32_t, std::uint64_t> once[] = {{0, 5}};
  const std::uint64_t before = a.busy_cycles(Coord{0, 0});  // slot 0
  a.add_busy(once, 4);
  EXPECT_EQ(a.busy_cycles(Coord{0, 0}), before + 20);
}

}  // namespace
}  // namespace wafersim::fabric
