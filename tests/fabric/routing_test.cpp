#include "fabric/routing.hpp"

#include <gtest/gtest.h>

#include "fabric/fabric.hpp"
#include "fabric/link_timing.hpp"
#include "fabric/sram.hpp"
#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

// The cores a route visits, in order, starting at `src`; fails the test if
// the links do not form a connected path.
std::vector<Coord> walk(const Mesh& mesh, Coord src, const std::vector<LinkId>& links) {
  std::vector<Coord> cores{src};
  for (LinkId l : links) {
    EXPECT_EQ(mesh.link_source(l), cores.back()) << "route is not connected";
    cores.push_back(Mesh::step(cores.back(), mesh.link_direction(l)));
  }
  return cores;
}

WaferSpec spec_with(std::vector<Coord> dead) {
  WaferSpec s = testing::small_spec(8, 8);
  s.defect_cores = std::move(dead);
  return s;
}

void expect_avoids(const DefectMap& defects, const std::vector<Coord>& cores) {
  for (const Coord& c : cores)
    EXPECT_FALSE(defects.dead(c)) << "crosses dead (" << c.x << "," << c.y << ")";
}

TEST(DetourRouter, WithoutDefectsItIsXy) {
  const WaferSpec spec = spec_with({});
  Fabric f(spec);
  std::vector<LinkId> a, b;
  f.route({1, 6}, {5, 2}, a);
  f.mesh().xy_route({1, 6}, {5, 2}, b);
  EXPECT_EQ(a, b);
}

TEST(DetourRouter, DeadCoreOnTheXyPathTakesYx) {
  // (0,0) -> (3,2): XY goes east along row 0 through (2,0), which is dead.
  // YX goes south along column 0, then east along row 2: clear, 5 hops.
  const WaferSpec spec = spec_with({{2, 0}});
  Fabric f(spec);
  std::vector<LinkId> r;
  f.route({0, 0}, {3, 2}, r);
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(f.mesh().link_direction(r[0]), Direction::south);
  const auto cores = walk(f.mesh(), {0, 0}, r);
  EXPECT_EQ(cores.back(), (Coord{3, 2}));
  EXPECT_EQ(cores[2], (Coord{0, 2}));  // the turn
  expect_avoids(f.defects(), cores);
}

TEST(DetourRouter, BothDimensionOrdersBlockedDetoursByTheShortestPath) {
  // Same row, (0,0) -> (4,0), (2,0) dead: XY and YX are the same straight
  // line. Around it: 4 hops east plus one down and one back up = 6 hops.
  {
    const WaferSpec spec = spec_with({{2, 0}});
    Fabric f(spec);
    std::vector<LinkId> r;
    f.route({0, 0}, {4, 0}, r);
    EXPECT_EQ(r.size(), 6u);
    const auto cores = walk(f.mesh(), {0, 0}, r);
    EXPECT_EQ(cores.back(), (Coord{4, 0}));
    expect_avoids(f.defects(), cores);
  }
  // A wall in column 2 from row 1 to row 5, (0,3) -> (4,3): around its top
  // (row 0: 3 up, 4 across, 3 down) or its bottom (row 6: 3 + 4 + 3): 10 hops.
  {
    const WaferSpec spec = spec_with({{2, 1}, {2, 2}, {2, 3}, {2, 4}, {2, 5}});
    Fabric f(spec);
    std::vector<LinkId> r;
    f.route({0, 3}, {4, 3}, r);
    EXPECT_EQ(r.size(), 10u);
    const auto cores = walk(f.mesh(), {0, 3}, r);
    EXPECT_EQ(cores.back(), (Coord{4, 3}));
    expect_avoids(f.defects(), cores);
  }
  // The XY path of (0,3) -> (4,5) meets the wall at (2,3) and the YX path at
  // (2,5); the wall ends at row 5, so the shortest way passes row 6:
  // 3 down to row 6, 4 across, 1 up = 8 hops (Manhattan distance 6).
  {
    const WaferSpec spec = spec_with({{2, 1}, {2, 2}, {2, 3}, {2, 4}, {2, 5}});
    Fabric f(spec);
    std::vector<LinkId> r;
    f.route({0, 3}, {4, 5}, r);
    EXPECT_EQ(r.size(), 8u);
    const auto cores = walk(f.mesh(), {0, 3}, r);
    EXPECT_EQ(cores.back(), (Coord{4, 5}));
    expect_avoids(f.defects(), cores);
  }
}

// A searched route is kept: asked again (also after other searches) the
// router gives the same links as a fresh router finds.
TEST(DetourRouter, ASearchedRouteIsTheSameWhenAskedAgain) {
  const WaferSpec spec = spec_with({{2, 1}, {2, 2}, {2, 3}, {2, 4}, {2, 5}});
  Fabric fresh(spec), used(spec);
  std::vector<LinkId> want, first, other, again;
  fresh.route({0, 3}, {4, 5}, want);
  used.route({0, 3}, {4, 5}, first);
  used.route({0, 2}, {4, 2}, other);  // another search in between
  again.push_back(LinkId{0});         // appended after what is there
  used.route({0, 3}, {4, 5}, again);
  EXPECT_EQ(first, want);
  ASSERT_EQ(again.size(), want.size() + 1);
  EXPECT_EQ(std::vector<LinkId>(again.begin() + 1, again.end()), want);
}

TEST(DetourRouter, NoPathIsAnError) {
  // (7,7) is walled in by (6,7) and (7,6); a dead endpoint has no route either.
  const WaferSpec spec = spec_with({{6, 7}, {7, 6}, {3, 3}});
  Fabric f(spec);
  std::vector<LinkId> r;
  EXPECT_THROW(f.route({0, 0}, {7, 7}, r), RouteError);
  try {
    f.route({3, 3}, {5, 5}, r);
    FAIL() << "a dead source was accepted";
  } catch (const RouteError& e) {
    EXPECT_NE(std::string(e.what()).find("(3, 3) is dead"), std::string::npos) << e.what();
  }
}

TEST(DetourRouter, ADetourCostsItsHopsInTheFlowModel) {
  // The 10-hop detour around the wall, 64 B (16 cycles): hops x hop_latency
  // + serialization = 10 + 16, more than the 4 + 16 of the blocked straight path.
  const WaferSpec spec = spec_with({{2, 1}, {2, 2}, {2, 3}, {2, 4}, {2, 5}});
  Fabric f(spec);
  std::vector<LinkId> r;
  f.route({0, 3}, {4, 3}, r);
  const Timed t = f.flow().send(r, Bytes{64}, Timed{});
  EXPECT_EQ(t.at.value, 26u);
  EXPECT_EQ(t.path.hops.value, 10u);
  EXPECT_GE(t.at.value, r.size() * spec.hop_latency.value);
}

TEST(DetourRouter, RandomDefectsNeverCrossedAndNeverShorterThanManhattan) {
  WaferSpec spec = testing::small_spec(16, 16);
  spec.defect_rate = 0.08;
  spec.defect_seed = 3;
  Fabric f(spec);
  ASSERT_GT(f.defects().dead_count(), 5u);
  int routed = 0;
  for (int sy = 0; sy < 16; sy += 3)
    for (int sx = 0; sx < 16; sx += 3)
      for (int dy = 1; dy < 16; dy += 4)
        for (int dx = 2; dx < 16; dx += 4) {
          const Coord s{sx, sy}, d{dx, dy};
          if (f.defects().dead(s) || f.defects().dead(d)) continue;
          std::vector<LinkId> r;
          try {
            f.route(s, d, r);
          } catch (const RouteError&) {
            continue;  // cut off by dead cores
          }
          ++routed;
          const auto cores = walk(f.mesh(), s, r);
          EXPECT_EQ(cores.back(), d);
          EXPECT_GE(static_cast<int>(r.size()), manhattan(s, d));
          expect_avoids(f.defects(), cores);
        }
  EXPECT_GT(routed, 100);
}

TEST(SramMap, DeadCoreHoldsNothingAndTheErrorNamesIt) {
  const WaferSpec spec = spec_with({{2, 1}});
  Fabric f(spec);
  const CoreId dead = f.mesh().id({2, 1});
  EXPECT_EQ(f.sram().capacity(dead).value, 0u);
  EXPECT_EQ(f.sram().free(dead).value, 0u);
  try {
    f.sram().allocate(dead, Bytes{4}, SramUse::weights, "layer 3 wq tile");
    FAIL() << "an allocation on a dead core was accepted";
  } catch (const FitError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(2,1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dead"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 3 wq tile"), std::string::npos) << msg;
  }
  // Its neighbour is untouched.
  f.sram().allocate(f.mesh().id({3, 1}), Bytes{48 * 1024}, SramUse::weights, "full core");
  EXPECT_EQ(f.sram().free(f.mesh().id({3, 1})).value, 0u);
}

// ---- The largest clear rectangle (where a whole-region layout can go) -------

TEST(LargestClearRect, AvoidsEveryDeadCoreAndIsTheLargest) {
  // 8 x 8 with dead (5, 2) and (1, 6): candidates are rows 3..5 x all 8
  // columns (24 cores), columns 0..4 x rows 0..5 (30), columns 2..7 x rows
  // 3..7 (30), rows 0..1 x 8 (16) ...; the largest is 30 cores, and the
  // first found scanning down is columns 0..4 x rows 0..5.
  const DefectMap d(spec_with({{5, 2}, {1, 6}}));
  const Rect r = largest_clear_rect(d, Rect{0, 0, 8, 8});
  EXPECT_EQ(r.width * r.height, 30);
  EXPECT_EQ(r, (Rect{0, 0, 5, 6}));
  EXPECT_TRUE(d.clear(r));
  // Brute force over every rectangle agrees on the area.
  int best = 0;
  for (int y0 = 0; y0 < 8; ++y0)
    for (int x0 = 0; x0 < 8; ++x0)
      for (int h = 1; y0 + h <= 8; ++h)
        for (int w = 1; x0 + w <= 8; ++w)
          if (d.clear(Rect{x0, y0, w, h})) best = std::max(best, w * h);
  EXPECT_EQ(best, 30);
  // Inside a sub-rectangle; a clear one is itself; an all-dead one is empty.
  // Right of x 4, rows 0..3 around the dead (5, 2): rows 0..1 (8 cores)
  // and columns 6..7 (8) tie; the first found wins.
  EXPECT_EQ(largest_clear_rect(d, Rect{4, 0, 4, 4}), (Rect{4, 0, 4, 2}));
  EXPECT_EQ(largest_clear_rect(d, Rect{0, 0, 4, 4}), (Rect{0, 0, 4, 4}));
  EXPECT_EQ(largest_clear_rect(d, Rect{5, 2, 1, 1}).cores(), 0);
}

}  // namespace
}  // namespace wafersim::fabric
