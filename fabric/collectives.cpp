#include "fabric/collectives.hpp"

#include <stdexcept>

namespace wafersim::fabric {

namespace {
Direction opposite(Direction d) {
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
}  // namespace

Coord Line::at(int i) const {
  switch (along) {
    case Direction::east:
      return {first.x + i, first.y};
    case Direction::west:
      return {first.x - i, first.y};
    case Direction::south:
      return {first.x, first.y + i};
    case Direction::north:
      return {first.x, first.y - i};
  }
  return first;
}

std::vector<CombineStep> reduction_order(ReductionScheme scheme, int n) {
  std::vector<CombineStep> steps;
  if (n <= 1) return steps;
  steps.reserve(static_cast<std::size_t>(n - 1));
  if (scheme == ReductionScheme::chain) {
    for (int i = n - 2; i >= 0; --i) steps.push_back({i, i + 1});
  } else {
    for (int stride = 1; stride < n; stride *= 2)
      for (int i = 0; i + stride < n; i += 2 * stride) steps.push_back({i, i + stride});
  }
  return steps;
}

void multicast_line(const Mesh& mesh, FlowModel& flow, const Line& line, Bytes bytes,
                    const Timed& ready, std::vector<Timed>& arrivals) {
  std::vector<LinkId> links;
  mesh.straight_route(line.first, line.along, line.length - 1, links);
  flow.send(links, bytes, ready, &arrivals);
}

Timed reduce_line(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Line& line,
                  Bytes bytes, std::span<const Timed> ready) {
  const int n = line.length;
  if (static_cast<int>(ready.size()) != n)
    throw std::invalid_argument("reduce_line: one ready time per core");
  if (n == 1) return ready[0];
  const Direction toward_root = opposite(line.along);
  std::vector<LinkId> links;
  if (scheme == ReductionScheme::chain) {
    // One stream from the far end to the root; every core adds on the way.
    mesh.straight_route(line.at(n - 1), toward_root, n - 1, links);
    std::vector<Timed> node_ready(ready.rbegin(), ready.rend());
    return flow.reduce_chain(links, bytes, node_ready);
  }
  // Tree: at stride s, core i+s sends its partial to core i, which adds it.
  std::vector<Timed> partial(ready.begin(), ready.end());
  for (const CombineStep& step : reduction_order(scheme, n)) {
    links.clear();
    const int hops = step.from - step.into;
    mesh.straight_route(line.at(step.from), toward_root, hops, links);
    const Timed arrival = flow.send(links, bytes, partial[step.from]);
    // The receiver adds the incoming stream as it arrives (same per-hop add
    // cost as a chain node).
    partial[step.into] =
        later(partial[step.into], arrival).plus(Resource::hops, flow.reduce_hop_overhead());
  }
  return partial[0];
}

}  // namespace wafersim::fabric
