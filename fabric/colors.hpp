// Virtual channels (colors) as a finite resource per router. On the wafer a
// route is configured per color in every router it passes (Cerebras SDK:
// routable colors 0-23), so routes that are live at the same time and pass
// one router need distinct colors there. RouteColors counts the concurrent
// routes through each router and reports the routers that would need more
// colors than they have (WaferSpec::virtual_channels).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fabric/collectives.hpp"
#include "fabric/mesh.hpp"

namespace wafersim::fabric {

class RouteColors {
 public:
  explicit RouteColors(const Mesh& mesh) : mesh_(mesh), routes_(mesh.core_count(), 0) {}

  // A route leaving `src` over `links` (a connected path): it occupies a color
  // at src and at every router the links reach.
  void add_route(Coord src, std::span<const LinkId> links);
  // A line (a multicast or a reduction along it) occupies a color at each of
  // its cores.
  void add_line(const Line& line);
  void clear() { std::fill(routes_.begin(), routes_.end(), 0); }

  int routes_at(Coord c) const { return routes_[mesh_.id(c).value]; }
  int max_routes() const;

  struct Overflow {
    Coord router;
    int routes = 0;
  };
  // Routers with more concurrent routes than `colors`, in core-id order.
  std::vector<Overflow> over_budget(int colors) const;

 private:
  const Mesh& mesh_;
  std::vector<std::uint16_t> routes_;
};

}  // namespace wafersim::fabric
