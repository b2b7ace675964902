#include "fabric/connectivity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric/routing.hpp"
#include "fabric/sram.hpp"
#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

// An 8 x 8 mesh with these cores dead.
DefectMap dead(const std::vector<Coord>& cores) {
  return DefectMap(8, 8, 0.0, 0, cores);
}

// A wall down column x, except at the rows in `gaps`.
std::vector<Coord> wall(int x, const std::vector<int>& gaps = {}) {
  std::vector<Coord> cores;
  for (int y = 0; y < 8; ++y)
    if (std::find(gaps.begin(), gaps.end(), y) == gaps.end()) cores.push_back({x, y});
  return cores;
}

std::vector<std::uint8_t> using_cores(const std::vector<Coord>& cores) {
  std::vector<std::uint8_t> used(64, 0);
  for (const Coord& c : cores) used[static_cast<std::size_t>(c.y * 8 + c.x)] = 1;
  return used;
}

TEST(LiveComponents, AWallOfDeadCoresCutsTheMeshInTwoAndAGapJoinsIt) {
  const LiveComponents cut(dead(wall(3)));
  EXPECT_EQ(cut.count(), 2);
  EXPECT_EQ(cut.of({3, 5}), -1);
  EXPECT_EQ(cut.of({0, 0}), cut.of({2, 7}));
  EXPECT_NE(cut.of({0, 0}), cut.of({4, 0}));
  EXPECT_EQ(cut.of({4, 0}), cut.of({7, 7}));
  const LiveComponents joined(dead(wall(3, {6})));
  EXPECT_EQ(joined.count(), 1);
  EXPECT_EQ(joined.of({0, 0}), joined.of({7, 0}));
  // An isolated live core is a part of its own.
  const LiveComponents island(dead({{0, 1}, {1, 0}}));
  EXPECT_EQ(island.count(), 2);
  EXPECT_NE(island.of({0, 0}), island.of({1, 1}));
}

TEST(LiveComponents, APortIsTheNearestEdgeCoreThatReachesTheCore) {
  // Live: the edge core in the row itself.
  EXPECT_EQ(LiveComponents(dead({})).port(0, {5, 4}), (Coord{0, 4}));
  // Dead: one row away, the row above first on a tie.
  EXPECT_EQ(LiveComponents(dead({{0, 4}})).port(0, {5, 4}), (Coord{0, 3}));
  EXPECT_EQ(LiveComponents(dead({{0, 4}, {0, 3}})).port(0, {5, 4}), (Coord{0, 5}));
  EXPECT_EQ(LiveComponents(dead({{7, 4}})).port(7, {5, 4}), (Coord{7, 3}));
  // Cut off: dead cores round the corner (0..1, 0..1) cut its edge cores
  // (0, 0) and (0, 1) off from (5, 0), so the port is the first below them.
  const std::vector<Coord> corner{{2, 0}, {2, 1}, {0, 2}, {1, 2}};
  EXPECT_EQ(LiveComponents(dead(corner)).port(0, {5, 0}), (Coord{0, 3}));
  // No edge core reaches it.
  EXPECT_THROW((void)LiveComponents(dead(wall(3))).port(0, {5, 4}), RouteError);
  EXPECT_THROW((void)LiveComponents(dead({{5, 4}})).port(0, {5, 4}), RouteError);
}

TEST(LiveComponents, APlacementWhoseDataADeadWallSplitsDoesNotFit) {
  const LiveComponents cut(dead(wall(3)));
  // Data on one side fits, with the west edge (on its side) as a port; the
  // east edge (column 7) is on the other side.
  EXPECT_NO_THROW(check_connected(cut, using_cores({{0, 0}, {2, 7}}), 0, true, false));
  try {
    check_connected(cut, using_cores({{0, 0}, {5, 2}}), 1, false, false);
    FAIL() << "a split placement fitted";
  } catch (const FitError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("wafer 1: dead cores cut core (5, 2) off from core (0, 0)"), std::string::npos)
        << m;
    EXPECT_NE(m.find("valid:"), std::string::npos) << m;
  }
  try {
    check_connected(cut, using_cores({{0, 0}, {2, 7}}), 0, true, true);
    FAIL() << "a wafer cut off from its east edge fitted";
  } catch (const FitError& e) {
    EXPECT_NE(std::string(e.what()).find("east edge (column 7)"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_connected(LiveComponents(dead(wall(3, {6}))), using_cores({{0, 0}, {5, 2}}),
                                  0, true, true));
}

TEST(Fabric, TransfersCrossTheEdgeInTheirRowOrAtTheNearestLiveEdgeCore) {
  WaferSpec s = testing::small_spec(8, 8);
  EXPECT_EQ(Fabric(s).edge_port(true, {2, 5}), (Coord{7, 5}));
  EXPECT_EQ(Fabric(s).edge_port(false, {2, 5}), (Coord{0, 5}));
  s.defect_cores = {{7, 5}, {0, 5}, {0, 4}};
  const Fabric f(s);
  EXPECT_EQ(f.edge_port(true, {2, 5}), (Coord{7, 4}));
  EXPECT_EQ(f.edge_port(false, {2, 5}), (Coord{0, 6}));
  // The route from the port reaches the core around the dead ones.
  Fabric g(s);
  std::vector<LinkId> links;
  g.route(g.edge_port(false, {2, 5}), {2, 5}, links);
  EXPECT_EQ(links.size(), 3U);  // (0, 6) -> (2, 6) -> (2, 5)
}

}  // namespace
}  // namespace wafersim::fabric
