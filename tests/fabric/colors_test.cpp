#include "fabric/colors.hpp"

#include <gtest/gtest.h>

#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

TEST(RouteColors, CountsEveryRouterARoutePasses) {
  const Mesh mesh(8, 8);
  RouteColors colors(mesh);
  std::vector<LinkId> r;
  mesh.xy_route({1, 1}, {4, 3}, r);  // (1,1) E E E to (4,1), S S to (4,3)
  colors.add_route({1, 1}, r);
  EXPECT_EQ(colors.routes_at({1, 1}), 1);
  EXPECT_EQ(colors.routes_at({3, 1}), 1);
  EXPECT_EQ(colors.routes_at({4, 1}), 1);  // the turn
  EXPECT_EQ(colors.routes_at({4, 3}), 1);
  EXPECT_EQ(colors.routes_at({1, 3}), 0);
  int total = 0;
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x) total += colors.routes_at({x, y});
  EXPECT_EQ(total, 6);  // source + 5 hops
}

TEST(RouteColors, GemvRegionNeedsTwoColorsPerCore) {
  // Column multicasts and row reductions over a region: every core is on one
  // column line and one row line.
  const Mesh mesh(16, 16);
  RouteColors colors(mesh);
  const Rect region{2, 3, 6, 5};
  for (int x = region.x0; x < region.x0 + region.width; ++x)
    colors.add_line(Line{{x, region.y0}, Direction::south, region.height});
  for (int y = region.y0; y < region.y0 + region.height; ++y)
    colors.add_line(Line{{region.x0, y}, Direction::east, region.width});
  EXPECT_EQ(colors.max_routes(), 2);
  EXPECT_EQ(colors.routes_at({4, 5}), 2);
  EXPECT_EQ(colors.routes_at({0, 0}), 0);
  EXPECT_TRUE(colors.over_budget(testing::small_spec().virtual_channels).empty());
}

TEST(RouteColors, ReportsARouterThatNeedsMoreColorsThanItHas) {
  // 25 concurrent routes from rows 2..26 of column 0 all end their turn at
  // (5,2) (east along their row, then north):
  // with 24 colors that router is over budget; nothing else is.
  const Mesh mesh(10, 30);
  RouteColors colors(mesh);
  std::vector<LinkId> r;
  for (int i = 0; i < 25; ++i) {
    r.clear();
    const Coord src{0, i + 2 <= 29 ? i + 2 : 29};
    mesh.xy_route(src, {5, 2}, r);  // along row src.y to column 5, then north to row 2
    colors.add_route(src, r);
  }
  const auto over = colors.over_budget(24);
  ASSERT_EQ(over.size(), 1u);
  EXPECT_EQ(over[0].router, (Coord{5, 2}));
  EXPECT_EQ(over[0].routes, 25);
}

}  // namespace
}  // namespace wafersim::fabric
