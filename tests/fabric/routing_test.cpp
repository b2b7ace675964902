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

}  // namespace
}  // namespace wafersim::fabric
