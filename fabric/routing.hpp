// Routes on a mesh with dead routers (fabric/defects.hpp). A message never
// crosses a dead router: dimension-ordered XY when that path is clear, else
// YX, else a shortest path around the dead cores (breadth-first search over
// the live cores, neighbours tried E, W, S, N, so the choice is
// deterministic). With no defects this is exactly Mesh::xy_route.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "fabric/defects.hpp"
#include "fabric/mesh.hpp"

namespace wafersim::fabric {

// No live path: an endpoint is dead, or dead cores cut it off.
class RouteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DetourRouter {
 public:
  DetourRouter(const Mesh& mesh, const DefectMap& defects);

  // Appends the links from `src` to `dst` to `out` (nothing when src == dst).
  // Throws RouteError when no path avoids the dead cores.
  void route(Coord src, Coord dst, std::vector<LinkId>& out);

  // True when the XY (x_first) or YX path from src to dst visits no dead core,
  // endpoints included.
  bool clear(Coord src, Coord dst, bool x_first) const;

 private:
  void yx_route(Coord src, Coord dst, std::vector<LinkId>& out) const;
  void search(Coord src, Coord dst, std::vector<LinkId>& out);

  const Mesh& mesh_;
  const DefectMap& defects_;
  // Breadth-first search scratch, reused across calls (allocated on first
  // use): the search that last reached each core, and the direction it came in.
  std::vector<std::uint32_t> seen_;
  std::vector<std::uint8_t> came_;
  std::vector<std::uint32_t> queue_;
  std::uint32_t epoch_ = 0;
  // The routes searched so far, by (source id << 32 | destination id): a
  // placement sends the same messages every token, and a search over a
  // large mesh costs up to its whole area.
  std::unordered_map<std::uint64_t, std::vector<LinkId>> searched_;
};

}  // namespace wafersim::fabric
