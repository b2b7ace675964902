#include "fabric/line_reductions.hpp"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/collectives.hpp"
#include "support/test_spec.hpp"
#include "support/timed_checks.hpp"

namespace wafersim::fabric {
namespace {

using testing::Draws;
using testing::expect_same;
using testing::random_traffic;

struct Family {
  Direction along;   // from each line's root
  Direction across;  // from one line's root to the next
  Coord first;       // the first line's root
  int length;
  int lines;
};

// Every line of `family` reduced by LineReductions leaves the model exactly
// as reduce_line one line after another: the same sums (times and
// explanations), the same link records (busy intervals, floors, byte
// counters) and ramp records (probed by the traffic after), on records
// crowded before and after; `setup` prepares both models alike.
// Partials ready from `ready_from` on, over `ready_span` cycles, after
// traffic from `traffic_from` on (~600 cycles of it).
void expect_as_reduce_line(const std::function<void(FlowModel&)>& setup, const std::string& label,
                           std::uint64_t traffic_from = 0, std::uint64_t ready_from = 300,
                           std::uint64_t ready_span = 700) {
  const WaferSpec spec = testing::small_spec(34, 30);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  const std::vector<Family> families = {
      {Direction::east, Direction::south, Coord{2, 1}, 31, 26},   // a plain matrix's rows
      {Direction::south, Direction::east, Coord{1, 2}, 27, 30},   // a transposed one's
      {Direction::west, Direction::north, Coord{32, 28}, 17, 9},  // and the other ways
      {Direction::north, Direction::west, Coord{30, 27}, 2, 5},
      {Direction::east, Direction::south, Coord{4, 4}, 1, 3},
  };
  int case_number = 0;
  for (const Family& fam : families)
    for (const ReductionScheme scheme :
         {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level,
          ReductionScheme::k_tree, ReductionScheme::ring})
      for (const int groups : {0, 3}) {
        const std::string where = label + " case " + std::to_string(++case_number) + " (" +
                                  reduction_name(scheme) + ", length " +
                                  std::to_string(fam.length) + ")";
        const auto seed = static_cast<std::uint64_t>(case_number) * 31 + label.size();
        FlowModel a{mesh, spec}, b{mesh, spec};
        setup(a);
        setup(b);
        std::vector<Timed> seen_a, seen_b;
        random_traffic(mesh, a, seed, traffic_from, 2500, seen_a);
        random_traffic(mesh, b, seed, traffic_from, 2500, seen_b);
        Draws next{seed * 7919};
        LineReductions rows(mesh, b, scheme, groups, fam.along, fam.length);
        const Coord step = Mesh::step(Coord{0, 0}, fam.across);
        std::vector<Timed> ready(static_cast<std::size_t>(fam.length));
        for (int i = 0; i < fam.lines; ++i) {
          // Partials out of order, some behind the traffic's time (~600
          // cycles), some ahead of it.
          for (Timed& t : ready) {
            t = Timed{Cycles{ready_from + next(ready_span)}, {}};
            t.path.compute = Cycles{next(40)};
            t.path.sram = Cycles{next(5)};
          }
          const Bytes bytes{4 * (1 + next(5))};
          const Coord root{fam.first.x + step.x * i, fam.first.y + step.y * i};
          const Timed sum_a =
              reduce_line(mesh, a, scheme, Line{root, fam.along, fam.length}, bytes, ready, groups);
          // The next line named ahead (a hint for the caches) changes nothing.
          if (i + 1 < fam.lines) rows.next_line(Coord{root.x + step.x, root.y + step.y});
          const Timed sum_b = rows.reduce(root, bytes, ready);
          expect_same(sum_b, sum_a, where + " line " + std::to_string(i));
        }
        random_traffic(mesh, a, seed + 1000, ready_from + 400, 2500, seen_a);
        random_traffic(mesh, b, seed + 1000, ready_from + 400, 2500, seen_b);
        ASSERT_EQ(seen_a.size(), seen_b.size()) << where;
        for (std::size_t m = 0; m < seen_a.size(); ++m)
          expect_same(seen_b[m], seen_a[m], where + " traffic " + std::to_string(m));
        testing::expect_same_records(mesh, a, b, where);
        if (::testing::Test::HasFailure()) return;
      }
}

TEST(LineReductions, EveryLineAsReduceLine) {
  expect_as_reduce_line([](FlowModel&) {}, "plain");
}

TEST(LineReductions, EveryLineAsReduceLineAroundNow) {
  // Partials ready just after the traffic's time, so that each message's
  // `now` (the latest ready time before it, which decides what a full record
  // gives up) moves within a line and full records still hold intervals
  // ahead of it.
  expect_as_reduce_line([](FlowModel&) {}, "around now", 300, 880, 200);
}

TEST(LineReductions, EveryLineAsReduceLineOverRepairDetours) {
  // Repaired links that take 1-3 cycles more (no borrowed links: the lines'
  // own hop loop counts the extra cycles).
  expect_as_reduce_line(
      [](FlowModel& flow) {
        const WaferSpec spec = testing::small_spec(34, 30);
        const Mesh mesh{spec.mesh_width, spec.mesh_height};
        std::vector<std::uint16_t> extra(mesh.link_count());
        Draws next{77};
        for (auto& e : extra) e = next(5) == 0 ? static_cast<std::uint16_t>(1 + next(3)) : 0;
        flow.set_link_extra_cycles(extra);
      },
      "detours");
}

TEST(LineReductions, BorrowedLinksAndExclusiveSharingGoThroughReduceLine) {
  expect_as_reduce_line(
      [](FlowModel& flow) {
        const WaferSpec spec = testing::small_spec(34, 30);
        const Mesh mesh{spec.mesh_width, spec.mesh_height};
        // Every east link of row 3 also takes the cycles of the one below it.
        std::vector<std::uint32_t> first(mesh.link_count() + 1, 0);
        std::vector<LinkId> links;
        for (std::uint32_t l = 0; l < mesh.link_count(); ++l) {
          first[l] = static_cast<std::uint32_t>(links.size());
          const Coord c = mesh.link_source(LinkId{l});
          if (mesh.link_direction(LinkId{l}) == Direction::east && c.y == 3 &&
              c.x + 1 < mesh.width())
            links.push_back(mesh.link(Coord{c.x, 4}, Direction::east));
        }
        first[mesh.link_count()] = static_cast<std::uint32_t>(links.size());
        flow.set_link_borrowed(first, links);
      },
      "borrowed");
  expect_as_reduce_line([](FlowModel& flow) { flow.set_sharing(LinkSharing::exclusive); },
                        "exclusive");
}

// Four one-wavelet messages (ready 0, 10, 20, 30) sent west along row 0 of
// a 40-core-wide mesh from (39, 0), on each model: they cross the link from
// (1, 0) west at 38, 48, 58 and 68 and fill its compact record.
void crowd_row_zero(const Mesh& mesh, std::initializer_list<FlowModel*> models) {
  std::vector<LinkId> route;
  mesh.straight_route(Coord{39, 0}, Direction::west, 39, route);
  for (FlowModel* f : models)
    for (const std::uint64_t t : {0, 10, 20, 30}) f->send(route, Bytes{4}, Timed{Cycles{t}, {}});
}

TEST(LineReductions, AGroupChainMeetsAFullRecordAheadOfItsNow) {
  // A two-level reduction over 8 cores east from (0, 0): groups {0, 1, 2},
  // {3, 4, 5}, {6, 7}, their chains sent in that order, the model's `now`
  // raised by each first partial (31, then 100). Four earlier one-wavelet
  // messages (ready 0, 10, 20, 30) cross the link from (1, 0) west at
  // 38, 48, 58 and 68, all after 31: when the first chain reaches that link
  // (not before core 1's partial at 90) its full record keeps every gap
  // (they all have free cycles at or after 31), as reduce_line leaves it.
  // (A `now` of 100 there would fold the first interval into the floor
  // instead; the roots' send over the same link folds it in either case, so
  // the records after the whole reduction do not show which `now` the chain
  // had: its sum and every record must match all the same.)
  const WaferSpec spec = testing::small_spec(40, 4);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel a{mesh, spec}, b{mesh, spec};
  crowd_row_zero(mesh, {&a, &b});
  const LinkId watched = mesh.link(Coord{1, 0}, Direction::west);
  ASSERT_EQ(a.link_busy_intervals(watched).size(), 4u);
  ASSERT_EQ(a.link_busy_intervals(watched).front().first.value, 38u);
  std::vector<Timed> ready(8, Timed{Cycles{0}, {}});
  ready[1].at = Cycles{90};
  ready[2].at = Cycles{31};
  ready[5].at = Cycles{100};
  ready[7].at = Cycles{100};
  const Line line{Coord{0, 0}, Direction::east, 8};
  const Timed sum_a = reduce_line(mesh, a, ReductionScheme::two_level, line, Bytes{4}, ready);
  LineReductions rows(mesh, b, ReductionScheme::two_level, 0, Direction::east, 8);
  const Timed sum_b = rows.reduce(line.first, Bytes{4}, ready);
  expect_same(sum_b, sum_a, "sum");
  testing::expect_same_records(mesh, a, b, "after the reduction");
}

// Lines apart (keep_lines_apart, counts held): each line times as
// reduce_line times it alone on the model as it was when the counts were
// held, whatever lines were reduced before it; so the lines time alike in
// any order and on two threads at once, and leave the same records. The
// model's `now` afterwards is the latest any line raised it to. Partials
// ready around the traffic's time, as in EveryLineAsReduceLineAroundNow, so
// that a `now` raised by other lines would give up gaps the line uses.
TEST(LineReductions, LinesApartTimeAsEachAloneInAnyOrderAndOnTwoThreads) {
  {
    // Hand-made: as in AGroupChainMeetsAFullRecordAheadOfItsNow, the link
    // from (1, 0) west holds four one-wavelet messages (38, 48, 58, 68) when
    // a chain along row 0 (its far partial at 31, core 1's at 90) reaches
    // it. Every gap has free cycles at or after 31, so the record keeps
    // them all, as reduce_line alone leaves it. A chain along row 2 reduced
    // first raises its own `now` to 100; had row 0's chain seen that, the
    // first interval would have gone into the floor.
    const WaferSpec small = testing::small_spec(40, 4);
    const Mesh m{small.mesh_width, small.mesh_height};
    FlowModel alone{m, small}, apart{m, small};
    crowd_row_zero(m, {&alone, &apart});
    std::vector<Timed> row0(8, Timed{Cycles{0}, {}}), row2(8, Timed{Cycles{100}, {}});
    row0[1].at = Cycles{90};
    row0[7].at = Cycles{31};
    const Timed sum_alone = reduce_line(m, alone, ReductionScheme::chain,
                                        Line{Coord{0, 0}, Direction::east, 8}, Bytes{4}, row0);
    LineReductions rows(m, apart, ReductionScheme::chain, 0, Direction::east, 8);
    rows.keep_lines_apart(true);
    rows.hold_counts(true);
    rows.reduce(Coord{0, 2}, Bytes{4}, row2);
    const Timed sum_apart = rows.reduce(Coord{0, 0}, Bytes{4}, row0);
    rows.hold_counts(false);
    rows.publish_counts();
    expect_same(sum_apart, sum_alone, "row 0's chain");
    const LinkId watched = m.link(Coord{1, 0}, Direction::west);
    EXPECT_EQ(apart.link_busy_intervals(watched), alone.link_busy_intervals(watched));
    EXPECT_EQ(apart.link_busy_intervals(watched).front().first.value, 38u);
    EXPECT_EQ(apart.model_now(), 100u);
  }
  const WaferSpec spec = testing::small_spec(34, 30);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  constexpr int kLines = 24, kLength = 31;
  for (const ReductionScheme scheme :
       {ReductionScheme::chain, ReductionScheme::tree, ReductionScheme::two_level}) {
    const std::string where = reduction_name(scheme);
    const auto seed = static_cast<std::uint64_t>(scheme) * 17 + 5;
    Draws next{seed * 7919};
    std::vector<std::vector<Timed>> ready(kLines, std::vector<Timed>(kLength));
    std::vector<Bytes> bytes;
    for (auto& line : ready) {
      for (Timed& t : line) {
        t = Timed{Cycles{880 + next(200)}, {}};
        t.path.compute = Cycles{next(40)};
      }
      bytes.push_back(Bytes{4 * (1 + next(5))});
    }
    const auto root = [](int i) { return Coord{2, 1 + i}; };
    // The reference: each line alone, reduce_line on a model of its own.
    std::vector<Timed> alone;
    std::uint64_t latest_now = 0;
    for (int i = 0; i < kLines; ++i) {
      FlowModel f{mesh, spec};
      std::vector<Timed> seen;
      random_traffic(mesh, f, seed, 300, 2500, seen);
      alone.push_back(reduce_line(mesh, f, scheme, Line{root(i), Direction::east, kLength},
                                  bytes[static_cast<std::size_t>(i)],
                                  ready[static_cast<std::size_t>(i)]));
      latest_now = std::max(latest_now, f.model_now());
    }
    // In order, in reverse order, and half of them on a second thread.
    FlowModel forward{mesh, spec}, backward{mesh, spec}, two{mesh, spec};
    std::vector<Timed> seen;
    for (FlowModel* f : {&forward, &backward, &two})
      random_traffic(mesh, *f, seed, 300, 2500, seen);
    auto lines_of = [&](FlowModel& f) {
      LineReductions r(mesh, f, scheme, 0, Direction::east, kLength);
      r.keep_lines_apart(true);
      return r;
    };
    LineReductions r_forward = lines_of(forward), r_backward = lines_of(backward);
    LineReductions r_two = lines_of(two), r_helper = lines_of(two);
    std::vector<Timed> sums_forward(kLines), sums_backward(kLines), sums_two(kLines);
    auto reduce = [&](LineReductions& r, std::vector<Timed>& sums, int i) {
      const auto k = static_cast<std::size_t>(i);
      sums[k] = r.reduce(root(i), bytes[k], ready[k]);
    };
    for (LineReductions* r : {&r_forward, &r_backward, &r_two, &r_helper}) r->hold_counts(true);
    for (int i = 0; i < kLines; ++i) reduce(r_forward, sums_forward, i);
    for (int i = kLines; i-- > 0;) reduce(r_backward, sums_backward, i);
    two.set_concurrent(true);
    for (int i = 0; i < kLines; ++i) r_two.settle_line_record(root(i));
    std::thread helper([&] {
      for (int i = kLines / 2; i < kLines; ++i) reduce(r_helper, sums_two, i);
    });
    for (int i = 0; i < kLines / 2; ++i) reduce(r_two, sums_two, i);
    helper.join();
    two.set_concurrent(false);
    for (LineReductions* r : {&r_forward, &r_backward, &r_two, &r_helper}) {
      r->hold_counts(false);
      r->publish_counts();
    }
    for (int i = 0; i < kLines; ++i) {
      const auto k = static_cast<std::size_t>(i);
      const std::string line = where + " line " + std::to_string(i);
      expect_same(sums_forward[k], alone[k], line + " (in order)");
      expect_same(sums_backward[k], alone[k], line + " (reverse order)");
      expect_same(sums_two[k], alone[k], line + " (two threads)");
    }
    testing::expect_same_records(mesh, forward, backward, where + " reverse order");
    testing::expect_same_records(mesh, forward, two, where + " two threads");
    EXPECT_EQ(forward.model_now(), latest_now) << where;
    EXPECT_EQ(two.model_now(), latest_now) << where;
    EXPECT_EQ(forward.carried_bytes(), two.carried_bytes()) << where;
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(LineReductions, RejectsLinesOffTheMeshAndWrongReadyCounts) {
  const WaferSpec spec = testing::small_spec(8, 8);
  const Mesh mesh{spec.mesh_width, spec.mesh_height};
  FlowModel flow{mesh, spec};
  EXPECT_THROW(LineReductions(mesh, flow, ReductionScheme::chain, 0, Direction::east, 0),
               std::invalid_argument);
  LineReductions rows(mesh, flow, ReductionScheme::two_level, 0, Direction::east, 4);
  std::vector<Timed> ready(4);
  EXPECT_THROW(rows.reduce(Coord{5, 0}, Bytes{4}, ready), std::out_of_range);
  EXPECT_THROW(rows.reduce(Coord{0, 0}, Bytes{4}, std::span<const Timed>(ready).first(3)),
               std::invalid_argument);
  EXPECT_NO_THROW(rows.reduce(Coord{4, 7}, Bytes{4}, ready));
}

}  // namespace
}  // namespace wafersim::fabric
