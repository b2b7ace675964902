#include "fabric/colors.hpp"

#include <algorithm>
#include <limits>

namespace wafersim::fabric {

namespace {
void bump(std::uint16_t& count) {
  if (count < std::numeric_limits<std::uint16_t>::max()) ++count;
}
}  // namespace

void RouteColors::add_route(Coord src, std::span<const LinkId> links) {
  bump(routes_[mesh_.id(src).value]);
  for (LinkId l : links)
    bump(routes_[mesh_.id(Mesh::step(mesh_.link_source(l), mesh_.link_direction(l))).value]);
}

void RouteColors::add_line(const Line& line) {
  for (int i = 0; i < line.length; ++i) bump(routes_[mesh_.id(line.at(i)).value]);
}

int RouteColors::max_routes() const {
  return routes_.empty() ? 0 : *std::max_element(routes_.begin(), routes_.end());
}

std::vector<RouteColors::Overflow> RouteColors::over_budget(int colors) const {
  std::vector<Overflow> out;
  for (std::uint32_t i = 0; i < routes_.size(); ++i)
    if (routes_[i] > colors) out.push_back({mesh_.coord(CoreId{i}), routes_[i]});
  return out;
}

}  // namespace wafersim::fabric
