#include "fabric/line_reductions.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
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
  std::vector<LinkId> route;
  mesh.straight_route(Coord{39, 0}, Direction::west, 39, route);
  for (FlowModel* f : {&a, &b})
    for (const std::uint64_t t : {0, 10, 20, 30}) f->send(route, Bytes{4}, Timed{Cycles{t}, {}});
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
