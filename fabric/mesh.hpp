// Mesh geometry: core ids, coordinates, links, dimension-ordered routes and a
// Boost.Graph view of the mesh. Pure geometry; no state.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <boost/graph/grid_graph.hpp>

#include "fabric/units.hpp"

namespace wafersim::fabric {

// Output port of a router. Each core's router owns one outgoing link per
// direction; the incoming links are its neighbours' outgoing ones.
enum class Direction : std::uint8_t { east = 0, west = 1, south = 2, north = 3 };
inline constexpr int kDirections = 4;
const char* direction_name(Direction d);  // "E", "W", "S", "N"
constexpr Direction opposite(Direction d) {
  switch (d) {
    case Direction::east:
      return Direction::west;
    case Direction::west:
      return Direction::east;
    case Direction::south:
      return Direction::north;
    case Direction::north:
      return Direction::south;
  }
  return d;
}

// Dense link index. Links are stored in one plane per direction, laid out so
// that the common walks touch consecutive memory: east/west planes are
// row-major (a walk along a row is sequential), south/north planes are
// column-major (a walk down a column is sequential).
struct LinkId {
  std::uint32_t value = 0;
  constexpr auto operator<=>(const LinkId&) const = default;
};

inline int manhattan(Coord a, Coord b) {
  return std::abs(a.x - b.x) + std::abs(a.y - b.y);
}

// An axis-aligned rectangle of cores: [x0, x0+width) x [y0, y0+height).
struct Rect {
  int x0 = 0, y0 = 0, width = 0, height = 0;
  int cores() const { return width * height; }
  bool contains(Coord c) const {
    return c.x >= x0 && c.x < x0 + width && c.y >= y0 && c.y < y0 + height;
  }
  bool encloses(const Rect& inner) const {
    return inner.x0 >= x0 && inner.y0 >= y0 && inner.x0 + inner.width <= x0 + width &&
           inner.y0 + inner.height <= y0 + height;
  }
  constexpr auto operator<=>(const Rect&) const = default;
};

class Mesh {
 public:
  using Graph = boost::grid_graph<2>;

  Mesh(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }
  std::size_t core_count() const { return static_cast<std::size_t>(width_) * height_; }
  std::size_t link_count() const { return core_count() * kDirections; }

  bool contains(Coord c) const { return c.x >= 0 && c.x < width_ && c.y >= 0 && c.y < height_; }
  CoreId id(Coord c) const { return CoreId{static_cast<std::uint32_t>(c.y) * width_ + c.x}; }
  Coord coord(CoreId id) const {
    return Coord{static_cast<std::int32_t>(id.value % width_),
                 static_cast<std::int32_t>(id.value / width_)};
  }
  LinkId link(Coord from, Direction d) const {
    const auto plane = static_cast<std::uint32_t>(d) * static_cast<std::uint32_t>(core_count());
    const bool vertical = d == Direction::south || d == Direction::north;
    const auto offset = vertical ? static_cast<std::uint32_t>(from.x) * height_ + from.y
                                 : static_cast<std::uint32_t>(from.y) * width_ + from.x;
    return LinkId{plane + offset};
  }
  Direction link_direction(LinkId l) const {
    return static_cast<Direction>(l.value / core_count());
  }
  Coord link_source(LinkId l) const {
    const auto offset = static_cast<std::int32_t>(l.value % core_count());
    const Direction d = link_direction(l);
    if (d == Direction::south || d == Direction::north)
      return Coord{offset / height_, offset % height_};
    return Coord{offset % width_, offset / width_};
  }
  static Coord step(Coord c, Direction d);

  // Dimension-ordered route (X first, then Y): the links a message from `src`
  // to `dst` crosses, in order, appended to `out`. Empty when src == dst.
  void xy_route(Coord src, Coord dst, std::vector<LinkId>& out) const;
  // The links of a straight run of `hops` hops from `start` in direction `d`.
  void straight_route(Coord start, Direction d, int hops, std::vector<LinkId>& out) const;

  // Boost.Graph view of the mesh (vertices are cores, edges are the
  // bidirectional links). Used for graph algorithms over the fabric.
  Graph graph() const;

 private:
  int width_;
  int height_;
};

}  // namespace wafersim::fabric
