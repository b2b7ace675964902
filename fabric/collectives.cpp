#include "fabric/collectives.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace wafersim::fabric {

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

int two_level_group(int n) {
  if (n <= 1) return 1;
  return std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n)))));
}

std::vector<CombineStep> reduction_order(ReductionScheme scheme, int n) {
  std::vector<CombineStep> steps;
  if (n <= 1) return steps;
  steps.reserve(static_cast<std::size_t>(n - 1));
  if (scheme == ReductionScheme::chain) {
    for (int i = n - 2; i >= 0; --i) steps.push_back({i, i + 1});
  } else if (scheme == ReductionScheme::two_level) {
    const int g = two_level_group(n);
    for (int first = 0; first < n; first += g)
      for (int i = std::min(n, first + g) - 2; i >= first; --i) steps.push_back({i, i + 1});
    const int last_root = (n - 1) / g * g;
    for (int r = last_root - g; r >= 0; r -= g) steps.push_back({r, r + g});
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
  std::vector<Timed> partial(ready.begin(), ready.end());
  std::vector<CombineStep> steps = reduction_order(scheme, n);
  if (scheme == ReductionScheme::two_level) {
    // First level: every group streams into its first core like a chain
    // (the groups use disjoint links). Second level: the roots' steps below.
    const int g = two_level_group(n);
    std::vector<Timed> node_ready;
    for (int first = 0; first < n; first += g) {
      const int len = std::min(n, first + g) - first;
      if (len == 1) continue;
      links.clear();
      mesh.straight_route(line.at(first + len - 1), toward_root, len - 1, links);
      node_ready.assign(ready.begin() + first, ready.begin() + first + len);
      std::reverse(node_ready.begin(), node_ready.end());
      partial[static_cast<std::size_t>(first)] = flow.reduce_chain(links, bytes, node_ready);
    }
    steps.erase(steps.begin(), steps.begin() + (n - (n + g - 1) / g));  // the in-group steps
  }
  // Tree (and the two-level roots): core `from` sends its partial to core
  // `into`, which adds it.
  for (const CombineStep& step : steps) {
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

void all_reduce_line(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Line& line,
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals) {
  const Timed sum = reduce_line(mesh, flow, scheme, line, bytes, ready);
  multicast_line(mesh, flow, line, bytes, sum, arrivals);
}

void multicast_rect(const Mesh& mesh, FlowModel& flow, const Rect& rect, Bytes bytes,
                    const Timed& ready, std::vector<Timed>& arrivals) {
  if (rect.width < 1 || rect.height < 1)
    throw std::invalid_argument("multicast_rect: an empty rectangle");
  const auto w = static_cast<std::size_t>(rect.width);
  arrivals.assign(w * static_cast<std::size_t>(rect.height), ready);
  const std::uint64_t ser = flow.serialization(bytes).value;
  // The top row, recording when the wavelets pass each router.
  std::vector<LinkId> links;
  std::vector<Timed> row, column;
  std::vector<WaveletRuns> passing;
  mesh.straight_route({rect.x0, rect.y0}, Direction::east, rect.width - 1, links);
  flow.stream(links, bytes, ready, WaveletRuns::from(ready.at.value, ser), nullptr, &row,
              &passing);
  for (std::size_t i = 0; i < w; ++i) arrivals[i] = row[i];
  if (rect.height == 1) return;
  const WaveletRuns corner = WaveletRuns::from(ready.at.value, ser);
  // Every column, its wavelets leaving the top router as they pass it (the
  // corner's as they are injected).
  for (int i = 0; i < rect.width; ++i) {
    links.clear();
    mesh.straight_route({rect.x0 + i, rect.y0}, Direction::south, rect.height - 1, links);
    const WaveletRuns& inject =
        i == 0 ? corner : passing[static_cast<std::size_t>(i - 1)];
    // Explained from the moment the head could reach the column's top
    // router uncontended; waits beyond it are contention.
    const Timed top = ready.plus(Resource::hops,
                                 Cycles{static_cast<std::uint64_t>(i) * flow.hop_latency().value});
    flow.stream(links, bytes, top, inject, nullptr, &column);
    for (int j = 1; j < rect.height; ++j)
      arrivals[static_cast<std::size_t>(j) * w + static_cast<std::size_t>(i)] =
          column[static_cast<std::size_t>(j)];
  }
}

void all_reduce_rect(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Rect& rect,
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals) {
  const auto w = static_cast<std::size_t>(rect.width);
  if (rect.width < 1 || rect.height < 1 ||
      ready.size() != w * static_cast<std::size_t>(rect.height))
    throw std::invalid_argument("all_reduce_rect: one ready time per core of the rectangle");
  std::vector<Timed> west(static_cast<std::size_t>(rect.height));
  for (int j = 0; j < rect.height; ++j)
    west[static_cast<std::size_t>(j)] =
        reduce_line(mesh, flow, scheme, Line{{rect.x0, rect.y0 + j}, Direction::east, rect.width},
                    bytes, ready.subspan(static_cast<std::size_t>(j) * w, w));
  const Timed sum =
      reduce_line(mesh, flow, scheme, Line{{rect.x0, rect.y0}, Direction::south, rect.height},
                  bytes, west);
  multicast_rect(mesh, flow, rect, bytes, sum, arrivals);
}

}  // namespace wafersim::fabric
