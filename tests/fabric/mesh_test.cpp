#include "fabric/mesh.hpp"

#include <gtest/gtest.h>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/visitors.hpp>

#include "fabric/defects.hpp"
#include "fabric/sram.hpp"

namespace wafersim::fabric {
namespace {

TEST(Mesh, IdAndCoordRoundTrip) {
  Mesh m(5, 3);
  EXPECT_EQ(m.core_count(), 15u);
  EXPECT_EQ(m.id(Coord{4, 2}).value, 14u);
  EXPECT_EQ(m.coord(CoreId{7}), (Coord{2, 1}));
  EXPECT_EQ(m.link_source(m.link(Coord{3, 1}, Direction::south)), (Coord{3, 1}));
  // Every (core, direction) has its own link id, and ids are dense.
  std::vector<int> seen(m.link_count(), 0);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 5; ++x)
      for (int d = 0; d < kDirections; ++d) {
        const LinkId l = m.link(Coord{x, y}, static_cast<Direction>(d));
        ASSERT_LT(l.value, m.link_count());
        ++seen[l.value];
        EXPECT_EQ(m.link_source(l), (Coord{x, y}));
        EXPECT_EQ(m.link_direction(l), static_cast<Direction>(d));
      }
  for (int s : seen) EXPECT_EQ(s, 1);
  // A walk down a column and along a row uses consecutive ids.
  EXPECT_EQ(m.link(Coord{2, 1}, Direction::south).value,
            m.link(Coord{2, 0}, Direction::south).value + 1);
  EXPECT_EQ(m.link(Coord{3, 1}, Direction::east).value,
            m.link(Coord{2, 1}, Direction::east).value + 1);
  EXPECT_EQ(m.link_direction(m.link(Coord{3, 1}, Direction::north)), Direction::north);
}

TEST(Mesh, XyRouteGoesXThenYAndHasManhattanLength) {
  Mesh m(6, 6);
  std::vector<LinkId> r;
  m.xy_route(Coord{1, 4}, Coord{4, 1}, r);
  ASSERT_EQ(r.size(), 6u);
  // First three hops east from (1,4), (2,4), (3,4); then north from (4,4), (4,3), (4,2).
  EXPECT_EQ(r[0], m.link(Coord{1, 4}, Direction::east));
  EXPECT_EQ(r[2], m.link(Coord{3, 4}, Direction::east));
  EXPECT_EQ(r[3], m.link(Coord{4, 4}, Direction::north));
  EXPECT_EQ(r[5], m.link(Coord{4, 2}, Direction::north));
  r.clear();
  m.xy_route(Coord{2, 2}, Coord{2, 2}, r);
  EXPECT_TRUE(r.empty());
}

TEST(Mesh, RouteOutsideMeshIsRejected) {
  Mesh m(4, 4);
  std::vector<LinkId> r;
  EXPECT_THROW(m.xy_route(Coord{0, 0}, Coord{4, 0}, r), std::out_of_range);
}

TEST(Mesh, BoostGraphDistancesEqualManhattan) {
  // Independent check of the geometry: breadth-first search on the
  // Boost.Graph view gives the hop count that XY routes use.
  Mesh m(7, 5);
  const Mesh::Graph g = m.graph();
  EXPECT_EQ(num_vertices(g), m.core_count());
  std::vector<std::size_t> dist(num_vertices(g), 0);
  const auto index = get(boost::vertex_index, g);
  auto dist_map = boost::make_iterator_property_map(dist.begin(), index);
  const Mesh::Graph::vertex_descriptor src{{2, 1}};
  boost::breadth_first_search(g, src,
                              boost::visitor(boost::make_bfs_visitor(
                                  boost::record_distances(dist_map, boost::on_tree_edge()))));
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 7; ++x) {
      const Mesh::Graph::vertex_descriptor v{
          {static_cast<std::size_t>(x), static_cast<std::size_t>(y)}};
      EXPECT_EQ(dist[get(index, v)], static_cast<std::size_t>(manhattan(Coord{2, 1}, Coord{x, y})));
    }
}

TEST(SramMap, RefusesOverflowAndNamesTheCore) {
  Mesh m(2, 2);
  SramMap sram(m, Bytes{1000});
  sram.allocate(CoreId{3}, Bytes{600}, SramUse::weights, "layer 0 wq tile");
  EXPECT_EQ(sram.used(CoreId{3}).value, 600u);
  try {
    sram.allocate(CoreId{3}, Bytes{401}, SramUse::kv_cache, "layer 0 KV");
    FAIL() << "overflow accepted";
  } catch (const FitError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(1,1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1000 B"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 0 KV"), std::string::npos) << msg;
  }
  sram.allocate(CoreId{3}, Bytes{400}, SramUse::kv_cache, "layer 0 KV");
  EXPECT_EQ(sram.free(CoreId{3}).value, 0u);
  EXPECT_EQ(sram.cores_used(), 1u);
  EXPECT_EQ(sram.used_for(SramUse::kv_cache).value, 400u);
}

// A run along a mesh row leaves the same counts as core-by-core
// allocations, and stops at the core without room (or a dead one) with the
// checked path's error, the cores before it allocated.
TEST(SramMap, ARunAllocatesAsItsCoresOneByOne) {
  Mesh m(8, 2);
  SramMap run(m, Bytes{1000}), one(m, Bytes{1000});
  auto bytes = [](int i) { return std::uint64_t{100} + static_cast<std::uint64_t>(i) * 10; };
  run.allocate_run(CoreId{9}, 6, bytes, SramUse::weights, "tiles");
  for (int i = 0; i < 6; ++i)
    one.allocate(CoreId{9u + static_cast<std::uint32_t>(i)}, Bytes{bytes(i)}, SramUse::weights,
                 "tiles");
  EXPECT_EQ(run.all_used(), one.all_used());
  EXPECT_EQ(run.used_for(SramUse::weights), one.used_for(SramUse::weights));
  EXPECT_EQ(run.used_for(SramUse::weights).value, 6u * 100 + 150);

  run.allocate(CoreId{12}, Bytes{800}, SramUse::kv_cache, "KV");  // (4,1): 930 of 1000
  try {
    run.allocate_run(CoreId{9}, 6, bytes, SramUse::activations, "buffers");
    FAIL() << "overflow accepted";
  } catch (const FitError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("core (4,1) cannot hold 130 B of buffers"), std::string::npos) << msg;
  }
  EXPECT_EQ(run.used(CoreId{11}).value, 2u * 120);  // before the full core: allocated
  EXPECT_EQ(run.used(CoreId{13}).value, 140u);      // after it: not
  EXPECT_EQ(run.used_for(SramUse::activations).value, 100u + 110 + 120);

  const DefectMap dead(8, 2, 0.0, 1, {Coord{2, 0}});
  SramMap holes(m, Bytes{1000}, &dead);
  EXPECT_THROW(holes.allocate_run(CoreId{0}, 4, bytes, SramUse::weights, "tiles"), FitError);
  EXPECT_EQ(holes.used(CoreId{1}).value, 110u);
}

}  // namespace
}  // namespace wafersim::fabric
