// FlowModel's line records (link_timing.hpp: a run of links' multicasts kept
// as one record, written into the links when anything else reads or uses
// them) against link-by-link multicasts: the same arrivals, row sums, link
// records, byte counters and traffic after.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/collectives.hpp"
#include "fabric/line_reductions.hpp"
#include "fabric/parallel_multicast.hpp"
#include "support/test_spec.hpp"
#include "support/timed_checks.hpp"

namespace wafersim::fabric {
namespace {

using testing::Draws;
using testing::expect_same;
using testing::expect_same_records;
using testing::GemvShape;
using testing::random_traffic;
using testing::row_line;

// Rounds of GEMV-like multicasts (every line of a shape, one row reduction
// per core row) on three models: `a` multicasts line after line
// (multicast_line) and reduces with reduce_line; `b` and `c` use
// ParallelLineMulticast and LineReductions, `b` with line records, `c`
// without. Between rounds, at random: other traffic across the lines,
// queries of single link records, rounds that follow the last one too
// closely for a line record (touching or overlapping its reservations),
// shorter lines on the same rows or columns. Everything must match, and
// `b` must have kept links in line records (folded ones included: many
// quiet rounds in a row).
void check_rounds(const WaferSpec& spec, const std::vector<std::uint16_t>& extra,
                  const std::string& name, bool expect_line_records) {
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  const std::vector<GemvShape> shapes = {
      {Direction::south, Direction::east, Coord{3, 2}, 30, 33},
      {Direction::east, Direction::south, Coord{2, 1}, 35, 31},
      {Direction::north, Direction::east, Coord{5, 33}, 29, 30},
      {Direction::west, Direction::north, Coord{38, 34}, 36, 20},
  };
  int case_number = 0;
  for (const GemvShape& shape : shapes)
    for (const ReductionScheme scheme : {ReductionScheme::chain, ReductionScheme::two_level}) {
      const auto seed = static_cast<std::uint64_t>(++case_number) * 7919;
      const std::string where = name + " case " + std::to_string(case_number);
      FlowModel a{mesh, spec}, b{mesh, spec}, c{mesh, spec};
      c.set_line_records(false);
      if (!extra.empty()) {
        a.set_link_extra_cycles(extra);
        b.set_link_extra_cycles(extra);
        c.set_link_extra_cycles(extra);
      }
      std::vector<Timed> seen_a, seen_b, seen_c;
      random_traffic(mesh, a, seed, 0, 1500, seen_a, {3, true});
      random_traffic(mesh, b, seed, 0, 1500, seen_b, {3, true});
      random_traffic(mesh, c, seed, 0, 1500, seen_c, {3, true});
      Draws next{seed + 5};
      std::uint64_t base = 1000;
      bool ahead = false;  // other traffic sent ahead of this round
      int just_after = 0;  // rounds still to follow the last one closely
      std::vector<std::uint64_t> last_ready(static_cast<std::size_t>(shape.lines)),
          last_ser(static_cast<std::size_t>(shape.lines));
      std::size_t most_in_records = 0;
      for (int round = 0; round < 40; ++round) {
        const std::string at = where + " round " + std::to_string(round);
        const std::uint64_t kind = next(12);
        // Mostly well after the last round; sometimes right behind it.
        base += kind == 0 ? next(30) : ahead ? 300 : 300 + next(400);
        ahead = false;
        GemvShape g = shape;
        if (next(6) == 0) g.length -= 1 + static_cast<int>(next(5));
        std::vector<Timed> ready;
        std::vector<Bytes> bytes;
        const std::uint64_t hop = spec.hop_latency.value;
        for (int i = 0; i < g.lines; ++i) {
          Timed t{Cycles{base + next(kind == 1 ? 400 : 60)}, {}};
          const auto ii = static_cast<std::size_t>(i);
          if (round > 0 && kind == 2)  // right at the end of this line's last message on link 0
            t.at = Cycles{last_ready[ii] + last_ser[ii]};
          if (round > 0 && kind == 3)  // right at its end on the line's last link
            t.at = Cycles{last_ready[ii] + static_cast<std::uint64_t>(g.length - 2) * hop +
                          last_ser[ii]};
          if (kind == 4) t.at = Cycles{base};  // every line at once ...
          if (just_after > 0)  // ... then five rounds each just after the last one on link 0,
                               // before its start on the line's last link
            t.at = Cycles{last_ready[ii] + last_ser[ii] + 1 + next(2)};
          t.path.compute = Cycles{next(50)};
          ready.push_back(t);
          bytes.push_back(Bytes{4 * (1 + next(6))});
          last_ready[ii] = t.at.value;
          last_ser[ii] = (bytes.back().value + spec.link_bytes_per_cycle.value - 1) /
                         spec.link_bytes_per_cycle.value;
        }
        if (kind == 2 || kind == 3 || just_after > 0)
          base = *std::max_element(last_ready.begin(), last_ready.end());
        const Bytes row_bytes{4 * (1 + next(4))};
        // The rows' reductions raise the model's `now` past the multicasts'
        // last hops: none in the close rounds, whose later lines must meet
        // records whose intervals start after `now`.
        const bool reduce_rows = kind != 4 && just_after == 0;
        // a: line after line, then the rows.
        std::vector<std::vector<Timed>> arr(static_cast<std::size_t>(g.lines));
        const Coord s = Mesh::step(Coord{0, 0}, g.across);
        for (int i = 0; i < g.lines; ++i)
          multicast_line(mesh, a,
                         Line{Coord{g.first.x + s.x * i, g.first.y + s.y * i}, g.along, g.length},
                         bytes[static_cast<std::size_t>(i)], ready[static_cast<std::size_t>(i)],
                         arr[static_cast<std::size_t>(i)]);
        std::vector<Timed> sums_a, row(static_cast<std::size_t>(g.lines));
        for (int k = 0; k < g.length; ++k) {
          for (int i = 0; i < g.lines; ++i)
            row[static_cast<std::size_t>(i)] =
                arr[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
          if (reduce_rows)
            sums_a.push_back(reduce_line(mesh, a, scheme, row_line(g, k), row_bytes, row));
        }
        // b and c: all lines at once, row by row, each row reduced when reached.
        for (FlowModel* m : {&b, &c}) {
          ParallelLineMulticast lines(mesh, *m, g.first, g.along, g.length, g.across, bytes, ready);
          if (m == &b) most_in_records = std::max(most_in_records, b.links_in_line_records());
          LineReductions rows(mesh, *m, scheme, 0, g.across, g.lines);
          std::vector<Timed> got(static_cast<std::size_t>(g.lines));
          for (int k = 0; k < g.length; ++k) {
            lines.next_hop(0, g.lines, got);
            for (int i = 0; i < g.lines; ++i)
              expect_same(got[static_cast<std::size_t>(i)],
                          arr[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)],
                          at + (m == &b ? " b" : " c") + " line " + std::to_string(i) + " core " +
                              std::to_string(k));
            if (reduce_rows)
              expect_same(rows.reduce(row_line(g, k).first, row_bytes, got),
                          sums_a[static_cast<std::size_t>(k)],
                          at + (m == &b ? " b" : " c") + " row sum " + std::to_string(k));
          }
        }
        if (::testing::Test::HasFailure()) return;
        if (just_after == 1)
          // The end of a close run: every link of the lines (a full record
          // whose oldest interval starts after `now` goes wide, which later
          // rounds would fold back out of sight).
          for (int i = 0; i < g.lines; ++i)
            for (int k = 0; k + 1 < g.length; ++k) {
              const Coord a0 = Mesh::step(Coord{0, 0}, g.across),
                          s0 = Mesh::step(Coord{0, 0}, g.along);
              const LinkId l = mesh.link(
                  Coord{g.first.x + a0.x * i + s0.x * k, g.first.y + a0.y * i + s0.y * k}, g.along);
              ASSERT_EQ(b.link_busy_intervals(l), a.link_busy_intervals(l)) << at << " line " << i;
              ASSERT_EQ(b.link_floor(l), a.link_floor(l)) << at << " line " << i;
            }
        just_after = just_after > 0 ? just_after - 1 : kind == 4 ? 5 : 0;
        // Now and then other traffic, crossing the lines too, or a query
        // of one link's record.
        const std::uint64_t after = next(8);
        if (after == 0) {
          const std::uint64_t ts = seed * 31 + static_cast<std::uint64_t>(round);
          random_traffic(mesh, a, ts, base + 200, 60, seen_a, {3, true});
          random_traffic(mesh, b, ts, base + 200, 60, seen_b, {3, true});
          random_traffic(mesh, c, ts, base + 200, 60, seen_c, {3, true});
        } else if (after == 2) {
          // Traffic ready in the next round's time, sent before it (the
          // links written out must then be checked, not assumed free).
          const std::uint64_t ts = seed * 37 + static_cast<std::uint64_t>(round);
          random_traffic(mesh, a, ts, base + 310, 80, seen_a, {3, true});
          random_traffic(mesh, b, ts, base + 310, 80, seen_b, {3, true});
          random_traffic(mesh, c, ts, base + 310, 80, seen_c, {3, true});
          ahead = true;
        } else if (after == 1) {
          // One link of one of the lines, read first in b (its line record written out).
          const auto i = static_cast<int>(next(static_cast<std::uint64_t>(g.lines)));
          const auto k = static_cast<int>(next(static_cast<std::uint64_t>(g.length - 1)));
          const Coord c0{g.first.x + s.x * i, g.first.y + s.y * i};
          const Coord step = Mesh::step(Coord{0, 0}, g.along);
          const LinkId l = mesh.link(Coord{c0.x + step.x * k, c0.y + step.y * k}, g.along);
          ASSERT_EQ(b.link_busy_intervals(l), a.link_busy_intervals(l)) << at;
          ASSERT_EQ(b.link_floor(l), a.link_floor(l)) << at;
          ASSERT_EQ(b.link_bytes(l), a.link_bytes(l)) << at;
        }
      }
      if (expect_line_records)
        EXPECT_GT(most_in_records, 0u) << where << ": no line record was taken";
      else
        EXPECT_EQ(most_in_records, 0u) << where;
      // Every record as the rounds left it (floors included, which the
      // traffic after could not tell apart), then again after that traffic.
      expect_same_records(mesh, a, b, where + " b, before the traffic after");
      // The traffic after sees the same records; then every record.
      random_traffic(mesh, a, seed + 99, base + 100, 3000, seen_a, {3, true});
      random_traffic(mesh, b, seed + 99, base + 100, 3000, seen_b, {3, true});
      random_traffic(mesh, c, seed + 99, base + 100, 3000, seen_c, {3, true});
      ASSERT_EQ(seen_a.size(), seen_b.size()) << where;
      ASSERT_EQ(seen_a.size(), seen_c.size()) << where;
      for (std::size_t m = 0; m < seen_a.size(); ++m) {
        expect_same(seen_b[m], seen_a[m], where + " traffic b " + std::to_string(m));
        expect_same(seen_c[m], seen_a[m], where + " traffic c " + std::to_string(m));
      }
      expect_same_records(mesh, a, b, where + " b");
      expect_same_records(mesh, a, c, where + " c");
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(LineRecords, RoundsOfMulticastsAreExactlyLinkByLink) {
  check_rounds(testing::small_spec(40, 36), {}, "plain", true);
}

// Longer messages than hops between rounds' lines and a hop latency of 2.
TEST(LineRecords, SlowHopsAreExactlyLinkByLink) {
  WaferSpec spec = testing::small_spec(40, 36);
  spec.hop_latency = Cycles{2};
  spec.link_bytes_per_cycle = Bytes{2};
  check_rounds(spec, {}, "slow hops", true);
}

// A wafer with repaired links (detours take extra cycles): no line record is
// taken, and the results are the link-by-link ones.
TEST(LineRecords, RepairDetoursGoLinkByLink) {
  const WaferSpec spec = testing::small_spec(40, 36);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  std::vector<std::uint16_t> extra(mesh.link_count(), 0);
  Draws next{17};
  for (int i = 0; i < 200; ++i) extra[next(extra.size())] = static_cast<std::uint16_t>(1 + next(4));
  check_rounds(spec, extra, "detours", false);
}

// The line record itself: after five quiet multicasts a link holds the
// floor at the fifth-latest's end and the four latest, whatever it held.
TEST(LineRecords, FoldedRecordIsTheHopsRecord) {
  const WaferSpec spec = testing::small_spec(12, 12);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel a{mesh, spec}, b{mesh, spec};
  a.set_line_records(false);
  std::vector<Timed> seen_a, seen_b;
  random_traffic(mesh, a, 3, 0, 100, seen_a, {3, true});
  random_traffic(mesh, b, 3, 0, 100, seen_b, {3, true});
  const std::vector<Bytes> bytes(12, Bytes{12});
  for (int round = 0; round < 7; ++round) {
    const std::vector<Timed> ready(
        12, Timed{Cycles{1000 + 100 * static_cast<std::uint64_t>(round)}, {}});
    std::vector<Timed> got(12);
    for (FlowModel* m : {&a, &b}) {
      ParallelLineMulticast lines(mesh, *m, Coord{0, 0}, Direction::south, 12, Direction::east,
                                  bytes, ready);
      for (int k = 0; k < 12; ++k) lines.next_hop(0, 12, got);
    }
    EXPECT_EQ(b.links_in_line_records(), 12u * 11u) << "round " << round;
  }
  // Column 3's link 5 (south): floor at the end of round 2's message there.
  const LinkId l = mesh.link(Coord{3, 5}, Direction::south);
  EXPECT_EQ(b.link_floor(l).value, 1000 + 200 + 5 + 3);
  EXPECT_EQ(b.links_in_line_records(), 12u * 11u - 1u);  // that link written out
  expect_same_records(mesh, a, b, "folded");
}

}  // namespace
}  // namespace wafersim::fabric

namespace wafersim::fabric {
namespace {

// Messages close behind one another on a line (each just after the last on
// the first link, so before the last one's start on the line's far links):
// once a link's record is full, its oldest interval may start after the
// model's `now`, and appending then does not fold it (the record goes wide).
// A line record must not take such a message.
TEST(LineRecords, CloseMessagesMeetFullRecordsAheadOfNow) {
  const WaferSpec spec = testing::small_spec(12, 40);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel a{mesh, spec}, b{mesh, spec};
  a.set_line_records(false);
  const std::vector<Bytes> bytes(12, Bytes{8});  // 2 cycles a link
  std::uint64_t t = 1000;
  std::vector<Timed> got_a(12), got_b(12);
  for (int round = 0; round < 12; ++round) {
    t += round < 4 ? 100 : 3;  // four quiet rounds, then close ones
    const std::vector<Timed> ready(12, Timed{Cycles{t}, {}});
    ParallelLineMulticast la(mesh, a, Coord{0, 0}, Direction::south, 40, Direction::east, bytes,
                             ready);
    ParallelLineMulticast lb(mesh, b, Coord{0, 0}, Direction::south, 40, Direction::east, bytes,
                             ready);
    for (int k = 0; k < 40; ++k) {
      la.next_hop(0, 12, got_a);
      lb.next_hop(0, 12, got_b);
      for (int i = 0; i < 12; ++i)
        expect_same(got_b[static_cast<std::size_t>(i)], got_a[static_cast<std::size_t>(i)],
                    "round " + std::to_string(round) + " line " + std::to_string(i));
    }
    if (round == 4) {
      EXPECT_GT(b.links_in_line_records(), 0u);
    }
  }
  EXPECT_GT(a.wide_records().peak(), 0u);  // the case this checks happened
  expect_same_records(mesh, a, b, "close");
}

}  // namespace
}  // namespace wafersim::fabric
