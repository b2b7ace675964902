#include "fabric/redundancy.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric/sram.hpp"
#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

// A 6 x 2 logical mesh, one spare column after every 3 columns: physical
// array 8 x 2, group 0 on physical columns 0-3, group 1 on 4-7.
WaferSpec spared(std::vector<Coord> dead, Cycles detour = Cycles{1}) {
  WaferSpec s = testing::small_spec(6, 2);
  s.redundancy = Redundancy{3, 1, detour};
  s.defect_cores = std::move(dead);
  return s;
}

TEST(Redundancy, PhysicalArrayIsTheMeshPlusSpareColumns) {
  const WaferSpec s = spared({});
  EXPECT_EQ(s.spare_groups(), 2);
  EXPECT_EQ(s.physical_width(), 8);
  WaferSpec wse = testing::small_spec(762, 1176);
  wse.redundancy = Redundancy{12, 1, Cycles{1}};
  // 762 columns in 64 groups of 12 (the last one of 6): 826 x 1176 = 971,376
  // physical cores, the ~970,000 Cerebras publishes for the WSE-3.
  EXPECT_EQ(wse.physical_width(), 826);
}

TEST(Redundancy, HandDrawnMapIsRepairedByShifting) {
  // Physical (1,0) dead: row 0 of group 0 shifts logical 1 and 2 east by one
  // (onto physical 2 and the spare, 3). Physical (7,1) is group 1's spare in
  // row 1: nothing moves.
  const Repair r(spared({{1, 0}, {7, 1}}));
  EXPECT_EQ(r.dead_cores(), 2u);
  EXPECT_EQ(r.displaced_cores(), 2u);
  const int row0[] = {0, 2, 3, 4, 5, 6};
  const int row1[] = {0, 1, 2, 4, 5, 6};
  for (int x = 0; x < 6; ++x) {
    EXPECT_EQ(r.physical_x({x, 0}), row0[x]) << x;
    EXPECT_EQ(r.physical_x({x, 1}), row1[x]) << x;
    EXPECT_EQ(r.healthy_x(x), row1[x]);
  }
  // Extra hops by hand: (0,0)-(1,0) bypasses the dead core: 1; columns 1
  // and 2 are offset by one between rows 0 and 1: 1 each. Both directions.
  const Mesh m(6, 2);
  EXPECT_EQ(r.extra_hops(m, m.link({0, 0}, Direction::east)), 1);
  EXPECT_EQ(r.extra_hops(m, m.link({1, 0}, Direction::west)), 1);
  EXPECT_EQ(r.extra_hops(m, m.link({1, 0}, Direction::east)), 0);
  EXPECT_EQ(r.extra_hops(m, m.link({2, 0}, Direction::east)), 0);
  EXPECT_EQ(r.extra_hops(m, m.link({0, 0}, Direction::south)), 0);
  EXPECT_EQ(r.extra_hops(m, m.link({1, 0}, Direction::south)), 1);
  EXPECT_EQ(r.extra_hops(m, m.link({2, 1}, Direction::north)), 1);
  EXPECT_EQ(r.extra_hops(m, m.link({5, 1}, Direction::east)), 0);  // off the mesh
  EXPECT_EQ(r.repaired_links(), 6u);
  EXPECT_EQ(r.total_extra_hops(), 6u);
  // The program sees a whole logical mesh.
  EXPECT_EQ(DefectMap(spared({{1, 0}, {7, 1}})).dead_count(), 0u);
}

TEST(Redundancy, TwoDeadInOneSegmentUseTwoSpares) {
  WaferSpec s = spared({{0, 1}, {2, 1}});
  s.redundancy.spare_columns = 2;  // physical width 10: group 0 on 0-4
  const Repair r(s);
  EXPECT_EQ(r.physical_x({0, 1}), 1);
  EXPECT_EQ(r.physical_x({1, 1}), 3);
  EXPECT_EQ(r.physical_x({2, 1}), 4);
  const Mesh m(6, 2);
  EXPECT_EQ(r.extra_hops(m, m.link({0, 1}, Direction::east)), 1);   // bypasses (2,1)
  EXPECT_EQ(r.extra_hops(m, m.link({1, 0}, Direction::south)), 2);  // 1 -> 3
}

TEST(Redundancy, MapBeyondTheSparesFailsNamingTheSegment) {
  const WaferSpec s = spared({{5, 1}, {6, 1}});
  try {
    const Repair r(s);
    FAIL() << "repaired two dead cores with one spare";
  } catch (const FitError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("row 1, spare group 1 (logical columns 3-5, physical columns 4-7)"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("2 dead cores for 1 spare"), std::string::npos) << m;
  }
  EXPECT_THROW(DefectMap{s}, FitError);
  EXPECT_THROW(Fabric{s}, FitError);
  const auto f = first_unrepairable(s.redundancy, 6, physical_defects(s));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->row, 1);
  EXPECT_EQ(f->group, 1);
  EXPECT_EQ(f->segments_failed, 1);
}

TEST(Redundancy, DrawnMapsAreDeterministicAndSeeded) {
  WaferSpec s = testing::small_spec(120, 100);
  s.redundancy = Redundancy{12, 1, Cycles{1}};
  s.defect_rate = 0.01;
  s.defect_seed = 7;
  const DefectMap a = physical_defects(s), b = physical_defects(s);
  EXPECT_EQ(a.width(), 130);
  EXPECT_EQ(a.dead_cores(), b.dead_cores());
  EXPECT_GT(a.dead_count(), 60u);  // ~130 expected at 1% of 13,000
  EXPECT_LT(a.dead_count(), 200u);
  s.defect_seed = 8;
  EXPECT_NE(physical_defects(s).dead_cores(), a.dead_cores());
}

TEST(Redundancy, RepairedLinkAddsExactlyTheDetourLatency) {
  // 4 bytes (one wavelet) from logical (0,0) to (1,0), hop latency 1: the
  // defect-free message arrives at 1 + 1 = 2; across the repaired link, 5
  // cycles later with a detour latency of 5 cycles per extra hop.
  auto arrival = [](const WaferSpec& s, Coord to) {
    Fabric f(s);
    std::vector<LinkId> links;
    f.route({0, 0}, to, links);
    return f.flow().send(links, Bytes{4}, Timed{}).at.value;
  };
  EXPECT_EQ(arrival(spared({}, Cycles{5}), {1, 0}), 2u);
  EXPECT_EQ(arrival(spared({{1, 0}}, Cycles{5}), {1, 0}), 7u);
  // Route (0,0) -> (2,1), XY: E (extra 1), E (0), S from (2,0) (offset 1):
  // 3 hops + 1 wavelet + 2 detours of 5.
  EXPECT_EQ(arrival(spared({}, Cycles{5}), {2, 1}), 4u);
  EXPECT_EQ(arrival(spared({{1, 0}}, Cycles{5}), {2, 1}), 14u);
  // Same under the exclusive link rule.
  WaferSpec s = spared({{1, 0}}, Cycles{5});
  Fabric f(s);
  f.flow().set_sharing(LinkSharing::exclusive);
  std::vector<LinkId> links;
  f.route({0, 0}, {2, 1}, links);
  EXPECT_EQ(f.flow().send(links, Bytes{4}, Timed{}).at.value, 14u);
}

TEST(Redundancy, DetoursBorrowTheDestinationRowsLinks) {
  // Physical (1,0) dead (as HandDrawnMapIsRepairedByShifting): row 0 holds
  // logical 0..5 on physical {0, 2, 3, 4, 5, 6}, row 1 on {0, 1, 2, 4, 5, 6}.
  // (1,0) -> (1,1) goes down physical column 2, then west 2 -> 1 along row 1:
  // the physical link inside logical (2,1) -> (1,1)'s span [1, 2]. (2,0) ->
  // (2,1): down column 3, west 3 -> 2: inside (3,1) -> (2,1)'s span [2, 4]
  // (the idle spare between). Northward, (1,1) -> (1,0) goes up column 1 and
  // east 1 -> 2 along row 0: inside (0,0) -> (1,0)'s span [0, 2] (around the
  // dead core); (2,1) -> (2,0) east 2 -> 3: inside (1,0) -> (2,0)'s.
  const Repair r(spared({{1, 0}}));
  const Mesh m(6, 2);
  const Repair::BorrowedLinks b = r.borrowed_links(m);
  ASSERT_EQ(b.first.size(), m.link_count() + 1);
  EXPECT_EQ(b.borrowing(), 4u);
  auto borrowed = [&](Coord c, Direction d) {
    const LinkId l = m.link(c, d);
    return std::vector<LinkId>(b.links.begin() + b.first[l.value],
                               b.links.begin() + b.first[l.value + 1]);
  };
  EXPECT_EQ(borrowed({1, 0}, Direction::south), (std::vector{m.link({2, 1}, Direction::west)}));
  EXPECT_EQ(borrowed({2, 0}, Direction::south), (std::vector{m.link({3, 1}, Direction::west)}));
  EXPECT_EQ(borrowed({1, 1}, Direction::north), (std::vector{m.link({0, 0}, Direction::east)}));
  EXPECT_EQ(borrowed({2, 1}, Direction::north), (std::vector{m.link({1, 0}, Direction::east)}));
  EXPECT_TRUE(borrowed({0, 0}, Direction::east).empty());  // its own detour
  EXPECT_TRUE(borrowed({0, 0}, Direction::south).empty());
  // A defect-free wafer borrows nothing.
  EXPECT_TRUE(Repair(spared({})).borrowed_links(m).links.empty());
}

TEST(Redundancy, FlowsSharingABorrowedLinkSerialize) {
  // 40 bytes = 10 wavelets at 4 B/cycle, hop latency 1, detour 1 per extra hop.
  // A: (1,0) -> (1,1), one repaired link (hop + detour = 2) that borrows
  // (2,1) -> (1,1). B: (2,1) -> (0,1), west over that borrowed link, then
  // (1,1) -> (0,1). Alone, A's tail arrives at 2 + 10 = 12 and B's at
  // 2 hops + 10 = 12. Together, ready at 0, the second one sent waits for the
  // first's 10 wavelets on the shared physical link: 12 + 10 = 22 (A second:
  // its wavelets cross at [10, 20) and reach (1,1) 2 cycles later; B second:
  // [10, 20) on the borrowed link, [11, 21) on the next, its core has the
  // last at 22).
  const WaferSpec spec = spared({{1, 0}});
  for (const LinkSharing sharing : {LinkSharing::interleave, LinkSharing::exclusive})
    for (const bool a_first : {true, false}) {
      Fabric f(spec);
      f.flow().set_sharing(sharing);
      std::vector<LinkId> a, b;
      f.route({1, 0}, {1, 1}, a);
      f.route({2, 1}, {0, 1}, b);
      ASSERT_EQ(a.size(), 1u);
      ASSERT_EQ(b.size(), 2u);
      const std::uint64_t first = f.flow().send(a_first ? a : b, Bytes{40}, Timed{}).at.value;
      const std::uint64_t second = f.flow().send(a_first ? b : a, Bytes{40}, Timed{}).at.value;
      EXPECT_EQ(first, 12u) << static_cast<int>(sharing) << a_first;
      EXPECT_EQ(second, 22u) << static_cast<int>(sharing) << a_first;
    }
  // Links that share no physical link do not wait: A beside (1,1) -> (0,1).
  Fabric f(spec);
  std::vector<LinkId> a, c;
  f.route({1, 0}, {1, 1}, a);
  f.route({1, 1}, {0, 1}, c);
  EXPECT_EQ(f.flow().send(a, Bytes{40}, Timed{}).at.value, 12u);
  EXPECT_EQ(f.flow().send(c, Bytes{40}, Timed{}).at.value, 11u);
}

}  // namespace
}  // namespace wafersim::fabric
