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

const char* reduction_name(ReductionScheme s) {
  switch (s) {
    case ReductionScheme::chain:
      return "chain";
    case ReductionScheme::tree:
      return "tree";
    case ReductionScheme::two_level:
      return "two-level";
    case ReductionScheme::k_tree:
      return "k-tree";
    case ReductionScheme::ring:
      return "ring";
  }
  return "chain";
}

int two_level_group(int n) {
  if (n <= 1) return 1;
  return std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n)))));
}

int k_tree_groups(int n, int groups) {
  if (n <= 1) return 1;
  if (groups <= 0) groups = two_level_group(n);  // round(sqrt(n))
  return std::clamp(groups, 1, n);
}

int k_tree_group_begin(int n, int groups, int i) {
  return static_cast<int>(static_cast<long long>(n) * i / groups);
}

int k_tree_root(int n, int groups) {
  const int k = k_tree_groups(n, groups);
  const int m = k / 2;
  const int a = k_tree_group_begin(n, k, m), b = k_tree_group_begin(n, k, m + 1);
  return a + (b - a) / 2;
}

std::vector<int> ring_sequence(int n) {
  std::vector<int> seq;
  seq.reserve(static_cast<std::size_t>(std::max(0, n)));
  for (int i = 0; i < n; i += 2) seq.push_back(i);
  for (int i = (n % 2 == 0 ? n - 1 : n - 2); i >= 1; i -= 2) seq.push_back(i);
  return seq;
}

int ring_chunks(int n, Bytes bytes) {
  const auto wavelets = static_cast<long long>((bytes.value + 3) / 4);
  return static_cast<int>(std::clamp<long long>(wavelets, 1, std::max(1, n)));
}

namespace {

// A chain toward `root` from `from` (exclusive of root), stepping by `dir`
// (+1 or -1): from into from+dir, ..., root-dir into root is left out (the
// caller adds the root's step when it wants it in its place).
void chain_toward(std::vector<CombineStep>& steps, int from, int root) {
  const int dir = root > from ? 1 : -1;
  for (int i = from; i + dir != root; i += dir) steps.push_back({i + dir, i});
}

// The k-tree's steps (see collectives.hpp): per group, then the roots.
void k_tree_order(std::vector<CombineStep>& steps, int n, int groups) {
  const int k = k_tree_groups(n, groups);
  std::vector<int> roots;
  for (int g = 0; g < k; ++g) {
    const int a = k_tree_group_begin(n, k, g), b = k_tree_group_begin(n, k, g + 1);
    const int c = a + (b - a) / 2;
    roots.push_back(c);
    if (c > a) chain_toward(steps, a, c);
    if (c < b - 1) chain_toward(steps, b - 1, c);
    // The root adds the far half's stream, then the near half's
    // (comm_pe.csl: up_recv, then down_recv).
    if (c < b - 1) steps.push_back({c, c + 1});
    if (c > a) steps.push_back({c, c - 1});
  }
  const int m = k / 2;
  for (int g = 0; g + 1 < m; ++g) steps.push_back({roots[g + 1], roots[g]});
  for (int g = k - 1; g - 1 > m; --g) steps.push_back({roots[g - 1], roots[g]});
  if (m < k - 1) steps.push_back({roots[m], roots[m + 1]});
  if (m > 0) steps.push_back({roots[m], roots[m - 1]});
}

}  // namespace

std::vector<CombineStep> reduction_order(ReductionScheme scheme, int n, int groups, int chunk) {
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
  } else if (scheme == ReductionScheme::k_tree) {
    k_tree_order(steps, n, groups);
  } else if (scheme == ReductionScheme::ring) {
    // Chunk c: ring position c+1 sends, c+2 adds its own and sends on, ...,
    // position c adds last.
    const std::vector<int> seq = ring_sequence(n);
    const int c = ((chunk % n) + n) % n;
    for (int p = c + 1; p < c + n; ++p)
      steps.push_back(
          {seq[static_cast<std::size_t>((p + 1) % n)], seq[static_cast<std::size_t>(p % n)]});
  } else {
    for (int stride = 1; stride < n; stride *= 2)
      for (int i = 0; i + stride < n; i += 2 * stride) steps.push_back({i, i + stride});
  }
  return steps;
}

int reduction_root(ReductionScheme scheme, int n, int groups, int chunk) {
  if (n <= 1) return 0;
  if (scheme == ReductionScheme::k_tree) return k_tree_root(n, groups);
  if (scheme == ReductionScheme::ring)
    return ring_sequence(n)[static_cast<std::size_t>(((chunk % n) + n) % n)];
  return 0;
}

int collective_colors(ReductionScheme scheme, int n, int groups, bool all_reduce) {
  if (n <= 1) return 0;
  int colors = 0;
  switch (scheme) {
    case ReductionScheme::chain:
      colors = 2;
      break;
    case ReductionScheme::tree:
      colors = static_cast<int>(std::ceil(std::log2(static_cast<double>(n))));
      break;
    case ReductionScheme::two_level: {
      const int g = two_level_group(n);
      colors = (g > 1 ? 2 : 0) + (g < n ? 2 : 0);
      break;
    }
    case ReductionScheme::k_tree: {
      const int k = k_tree_groups(n, groups);
      colors = (k < n ? 4 : 0) + (k > 1 ? 4 : 0);
      break;
    }
    case ReductionScheme::ring:
      colors = n > 2 ? 4 : 2;
      break;
  }
  if (scheme == ReductionScheme::k_tree)
    colors += all_reduce ? 2 : (k_tree_root(n, groups) > 0 ? 1 : 0);
  else if (all_reduce && scheme != ReductionScheme::ring)
    colors += 1;
  return colors;
}

void multicast_line(const Mesh& mesh, FlowModel& flow, const Line& line, Bytes bytes,
                    const Timed& ready, std::vector<Timed>& arrivals) {
  std::vector<LinkId> links;
  mesh.straight_route(line.first, line.along, line.length - 1, links);
  flow.send(links, bytes, ready, &arrivals);
}

namespace {

// One store-and-forward transfer of `bytes` from line index `from` to `to`
// (a straight route along the line either way).
Timed line_send(const Mesh& mesh, FlowModel& flow, const Line& line, int from, int to, Bytes bytes,
                const Timed& ready, std::vector<LinkId>& links) {
  links.clear();
  mesh.straight_route(line.at(from), to > from ? line.along : opposite(line.along),
                      std::abs(to - from), links);
  return flow.send(links, bytes, ready);
}

// A chain of line indices from `from` toward `root` streams into `root`
// (each core adding on the way, the root adding last, as FlowModel::
// reduce_chain), the root's own partial ready at `root_ready`.
Timed chain_into(const Mesh& mesh, FlowModel& flow, const Line& line, int from, int root,
                 Bytes bytes, std::span<const Timed> ready, const Timed& root_ready,
                 std::vector<LinkId>& links) {
  const int dir = root > from ? 1 : -1;
  links.clear();
  mesh.straight_route(line.at(from), dir > 0 ? line.along : opposite(line.along),
                      std::abs(root - from), links);
  std::vector<Timed> node_ready;
  for (int i = from; i != root; i += dir) node_ready.push_back(ready[static_cast<std::size_t>(i)]);
  node_ready.push_back(root_ready);
  return flow.reduce_chain(links, bytes, node_ready);
}

// The k-tree into its root (collectives.hpp): every group's two chains into
// its centre, then the roots' pass-through steps toward the k-tree root.
// Returns when the sum is complete at line index k_tree_root(n, groups).
Timed k_tree_into_root(const Mesh& mesh, FlowModel& flow, const Line& line, Bytes bytes,
                       std::span<const Timed> ready, int groups) {
  const int n = line.length;
  const int k = k_tree_groups(n, groups);
  std::vector<LinkId> links;
  std::vector<int> roots;
  std::vector<Timed> partial(ready.begin(), ready.end());
  for (int g = 0; g < k; ++g) {
    const int a = k_tree_group_begin(n, k, g), b = k_tree_group_begin(n, k, g + 1);
    const int c = a + (b - a) / 2;
    roots.push_back(c);
    Timed at_root = ready[static_cast<std::size_t>(c)];
    // The far half's stream first, then the near half's (comm_pe.csl).
    if (c < b - 1) at_root = chain_into(mesh, flow, line, b - 1, c, bytes, ready, at_root, links);
    if (c > a) at_root = chain_into(mesh, flow, line, a, c, bytes, ready, at_root, links);
    partial[static_cast<std::size_t>(c)] = at_root;
  }
  // The roots, from each end toward the k-tree root: every root streams its
  // partial, plus what reaches it from the root before, to the next root
  // over a pass-through route (the routers between forward the wavelets,
  // their cores take no part); a root adds each wavelet as it arrives
  // (reduce_hop_overhead) and forwards it, as comm_pe.csl's faddh from the
  // fabric to the fabric does, once its own group is reduced.
  const int m = k / 2;
  const Cycles ser = flow.serialization(bytes);
  auto side = [&](int outer, int step) -> Timed {
    const auto at = [&](int g) { return roots[static_cast<std::size_t>(g)]; };
    Timed head = partial[static_cast<std::size_t>(at(outer))];
    WaveletRuns inject = WaveletRuns::from(head.at.value, ser.value), delivered;
    Timed arrival = head;
    for (int g = outer; g != m; g += step) {
      const int from = at(g), into = at(g + step);
      links.clear();
      mesh.straight_route(line.at(from), into > from ? line.along : opposite(line.along),
                          std::abs(into - from), links);
      arrival = flow.stream(links, bytes, head, inject, &delivered);
      if (g + step == m) break;
      // The next root forwards each wavelet reduce_hop_overhead after it
      // arrives, not before its own partial is complete.
      const Timed& own = partial[static_cast<std::size_t>(into)];
      head =
          later(head.plus(Resource::hops, Cycles{static_cast<std::uint64_t>(std::abs(into - from)) *
                                                     flow.hop_latency().value +
                                                 flow.reduce_hop_overhead().value}),
                own);
      inject = delivered;
      const std::uint64_t first = inject.n > 0 ? inject.start[0] : head.at.value;
      inject.shift(std::max(first + flow.reduce_hop_overhead().value, head.at.value) - first);
    }
    return arrival;
  };
  Timed& sum = partial[static_cast<std::size_t>(roots[static_cast<std::size_t>(m)])];
  // The far side's stream first, then the near side's (comm_pe.csl): the
  // root's core adds one side's partial, then the other's, so the second add
  // starts no sooner than the first has ended.
  if (m < k - 1) sum = later(side(k - 1, -1), sum).plus(Resource::hops, flow.reduce_hop_overhead());
  if (m > 0) sum = later(side(0, 1), sum).plus(Resource::hops, flow.reduce_hop_overhead());
  return partial[static_cast<std::size_t>(roots[static_cast<std::size_t>(m)])];
}

// The folded ring's all-reduce (collectives.hpp): every chunk summed around
// the ring into its position, then passed on around the ring. `arrivals[i]`
// is when line index i has every chunk's sum.
void ring_all_reduce(const Mesh& mesh, FlowModel& flow, const Line& line, Bytes bytes,
                     std::span<const Timed> ready, std::vector<Timed>& arrivals) {
  const int n = line.length;
  const std::vector<int> seq = ring_sequence(n);
  const int k = ring_chunks(n, bytes);
  const Bytes chunk{(bytes.value + static_cast<std::uint64_t>(k) - 1) /
                    static_cast<std::uint64_t>(k)};
  std::vector<LinkId> links;
  auto at = [&](int p) { return seq[static_cast<std::size_t>(((p % n) + n) % n)]; };
  // Reduce-scatter: at step s, chunk c's running sum goes from position
  // c+1+s to c+2+s, which adds its own partial (all chunks step together,
  // each ring edge carrying one of them).
  std::vector<Timed> sum(static_cast<std::size_t>(k));
  for (int c = 0; c < k; ++c)
    sum[static_cast<std::size_t>(c)] = ready[static_cast<std::size_t>(at(c + 1))];
  for (int s = 0; s + 1 < n; ++s)
    for (int c = 0; c < k; ++c) {
      const int from = at(c + 1 + s), into = at(c + 2 + s);
      Timed& t = sum[static_cast<std::size_t>(c)];
      const Timed arrival = line_send(mesh, flow, line, from, into, chunk, t, links);
      t = later(arrival, ready[static_cast<std::size_t>(into)])
              .plus(Resource::hops, flow.reduce_hop_overhead());
    }
  // All-gather: chunk c's sum, complete at position c, goes on around the
  // ring (each core forwards it as it has it).
  arrivals.assign(static_cast<std::size_t>(n), Timed{});
  std::vector<Timed> has(static_cast<std::size_t>(k));
  for (int c = 0; c < k; ++c) {
    has[static_cast<std::size_t>(c)] = sum[static_cast<std::size_t>(c)];
    Timed& a = arrivals[static_cast<std::size_t>(at(c))];
    a = later(a, sum[static_cast<std::size_t>(c)]);
  }
  for (int s = 0; s + 1 < n; ++s)
    for (int c = 0; c < k; ++c) {
      const int from = at(c + s), into = at(c + 1 + s);
      Timed& t = has[static_cast<std::size_t>(c)];
      t = line_send(mesh, flow, line, from, into, chunk, t, links);
      Timed& a = arrivals[static_cast<std::size_t>(into)];
      a = later(a, t);
    }
}

}  // namespace

Timed reduce_line(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme, const Line& line,
                  Bytes bytes, std::span<const Timed> ready, int groups) {
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
  if (scheme == ReductionScheme::k_tree) {
    // Into the k-tree's root, then moved to line.at(0).
    const Timed sum = k_tree_into_root(mesh, flow, line, bytes, ready, groups);
    const int root = k_tree_root(n, groups);
    return root == 0 ? sum : line_send(mesh, flow, line, root, 0, bytes, sum, links);
  }
  if (scheme == ReductionScheme::ring) {
    // The ring is an all-reduce: line.at(0) has the sum when the all-gather
    // has brought it every chunk.
    std::vector<Timed> arrivals;
    ring_all_reduce(mesh, flow, line, bytes, ready, arrivals);
    return arrivals[0];
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
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals,
                     int groups) {
  const int n = line.length;
  if (scheme == ReductionScheme::ring && n > 1) {
    if (static_cast<int>(ready.size()) != n)
      throw std::invalid_argument("all_reduce_line: one ready time per core");
    return ring_all_reduce(mesh, flow, line, bytes, ready, arrivals);
  }
  if (scheme == ReductionScheme::k_tree && n > 1) {
    if (static_cast<int>(ready.size()) != n)
      throw std::invalid_argument("all_reduce_line: one ready time per core");
    // Reduced into the k-tree root, multicast from it both ways (WaferLLM's
    // up and down broadcast colors).
    const int root = k_tree_root(n, groups);
    const Timed sum = k_tree_into_root(mesh, flow, line, bytes, ready, groups);
    arrivals.assign(static_cast<std::size_t>(n), sum);
    std::vector<Timed> half;
    if (root < n - 1) {
      multicast_line(mesh, flow, Line{line.at(root), line.along, n - root}, bytes, sum, half);
      for (int i = root + 1; i < n; ++i)
        arrivals[static_cast<std::size_t>(i)] = half[static_cast<std::size_t>(i - root)];
    }
    if (root > 0) {
      multicast_line(mesh, flow, Line{line.at(root), opposite(line.along), root + 1}, bytes, sum,
                     half);
      for (int i = 0; i < root; ++i)
        arrivals[static_cast<std::size_t>(i)] = half[static_cast<std::size_t>(root - i)];
    }
    return;
  }
  const Timed sum = reduce_line(mesh, flow, scheme, line, bytes, ready, groups);
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
  flow.stream(links, bytes, ready, WaveletRuns::from(ready.at.value, ser), nullptr, &row, &passing);
  for (std::size_t i = 0; i < w; ++i) arrivals[i] = row[i];
  if (rect.height == 1) return;
  const WaveletRuns corner = WaveletRuns::from(ready.at.value, ser);
  // Every column, its wavelets leaving the top router as they pass it (the
  // corner's as they are injected).
  for (int i = 0; i < rect.width; ++i) {
    links.clear();
    mesh.straight_route({rect.x0 + i, rect.y0}, Direction::south, rect.height - 1, links);
    const WaveletRuns& inject = i == 0 ? corner : passing[static_cast<std::size_t>(i - 1)];
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
                     Bytes bytes, std::span<const Timed> ready, std::vector<Timed>& arrivals,
                     int groups) {
  const auto w = static_cast<std::size_t>(rect.width);
  if (rect.width < 1 || rect.height < 1 ||
      ready.size() != w * static_cast<std::size_t>(rect.height))
    throw std::invalid_argument("all_reduce_rect: one ready time per core of the rectangle");
  std::vector<Timed> west(static_cast<std::size_t>(rect.height));
  for (int j = 0; j < rect.height; ++j)
    west[static_cast<std::size_t>(j)] =
        reduce_line(mesh, flow, scheme, Line{{rect.x0, rect.y0 + j}, Direction::east, rect.width},
                    bytes, ready.subspan(static_cast<std::size_t>(j) * w, w), groups);
  const Timed sum =
      reduce_line(mesh, flow, scheme, Line{{rect.x0, rect.y0}, Direction::south, rect.height},
                  bytes, west, groups);
  multicast_rect(mesh, flow, rect, bytes, sum, arrivals);
}

}  // namespace wafersim::fabric
