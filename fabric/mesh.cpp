#include "fabric/mesh.hpp"

#include <stdexcept>

namespace wafersim::fabric {

const char* direction_name(Direction d) {
  static constexpr std::array<const char*, kDirections> kNames{"E", "W", "S", "N"};
  return kNames[static_cast<int>(d)];
}

Mesh::Mesh(int width, int height) : width_(width), height_(height) {
  if (width <= 0 || height <= 0) throw std::invalid_argument("mesh dimensions must be positive");
}

Coord Mesh::step(Coord c, Direction d) {
  switch (d) {
    case Direction::east:
      return {c.x + 1, c.y};
    case Direction::west:
      return {c.x - 1, c.y};
    case Direction::south:
      return {c.x, c.y + 1};
    case Direction::north:
      return {c.x, c.y - 1};
  }
  return c;
}

void Mesh::straight_route(Coord start, Direction d, int hops, std::vector<LinkId>& out) const {
  Coord end = start;
  if (hops > 0) {
    // Along a straight run the link index moves by one in its plane (link():
    // east/west planes are row-major, south/north column-major), up for east
    // and south, down for west and north (modulo 2^32, as link() computes).
    const std::uint32_t first = link(start, d).value;
    const std::uint32_t delta = d == Direction::east || d == Direction::south ? 1u : ~0u;
    const std::size_t n = out.size();
    out.resize(n + static_cast<std::size_t>(hops));
    for (int i = 0; i < hops; ++i)
      out[n + static_cast<std::size_t>(i)] = LinkId{first + static_cast<std::uint32_t>(i) * delta};
    const Coord one = step(Coord{0, 0}, d);
    end = Coord{start.x + one.x * hops, start.y + one.y * hops};
  }
  if (!contains(end)) throw std::out_of_range("route leaves the mesh");
}

void Mesh::xy_route(Coord src, Coord dst, std::vector<LinkId>& out) const {
  if (!contains(src) || !contains(dst)) throw std::out_of_range("route endpoint outside the mesh");
  const int dx = dst.x - src.x;
  straight_route(src, dx >= 0 ? Direction::east : Direction::west, std::abs(dx), out);
  const Coord turn{dst.x, src.y};
  const int dy = dst.y - src.y;
  straight_route(turn, dy >= 0 ? Direction::south : Direction::north, std::abs(dy), out);
}

Mesh::Graph Mesh::graph() const {
  const boost::array<std::size_t, 2> lengths{
      {static_cast<std::size_t>(width_), static_cast<std::size_t>(height_)}};
  return Graph(lengths);
}

}  // namespace wafersim::fabric
