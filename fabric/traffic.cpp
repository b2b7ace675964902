#include "fabric/traffic.hpp"

#include <algorithm>
#include <queue>
#include <stdexcept>
#include <string>
#include <tuple>

namespace wafersim::fabric {

std::uint32_t Traffic::add(const Message& m, std::span<const After> after) {
  const auto index = static_cast<std::uint32_t>(messages_.size());
  Message stored = m;
  stored.after_first = static_cast<std::uint32_t>(after_.size());
  stored.after_count = static_cast<std::uint32_t>(after.size());
  after_.insert(after_.end(), after.begin(), after.end());
  messages_.push_back(stored);
  colors_ = std::max(colors_, static_cast<int>(m.color) + 1);
  return index;
}

std::uint32_t Traffic::unicast(Coord src, Coord dst, Bytes bytes, Cycles ready,
                               std::uint8_t color) {
  Message m;
  m.src = src;
  m.dst = dst;
  m.bytes = bytes;
  m.ready = ready;
  m.color = color;
  return add(m);
}

std::uint32_t Traffic::multicast(const Line& line, Bytes bytes, Cycles ready, std::uint8_t color,
                                 std::span<const After> after) {
  Message m;
  m.src = line.at(0);
  m.dst = line.at(line.length - 1);
  m.bytes = bytes;
  m.ready = ready;
  m.multicast = line.length > 1;
  m.color = color;
  return add(m, after);
}

std::vector<std::vector<After>> Traffic::describe_reduction(
    ReductionScheme scheme, const Line& line, Bytes bytes, Cycles reduce_hop_overhead,
    std::span<const NodeReady> ready, std::uint8_t color, int groups, bool in_place) {
  const int n = line.length;
  if (static_cast<int>(ready.size()) != n)
    throw std::invalid_argument("Traffic::reduction: one ready time per core");
  // Per node: its own readiness, then the partials it has received.
  std::vector<std::vector<After>> afters(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    if (ready[i].has_after) afters[i].push_back(ready[i].after);
  auto send = [&](int from, int into, std::uint32_t stream_from) {
    Message m;
    m.src = line.at(from);
    m.dst = line.at(into);
    m.bytes = bytes;
    m.ready = ready[from].at;
    m.color = color;
    m.stream_from = stream_from;
    m.stream_delay = stream_from == kNoMessage ? Cycles{0} : reduce_hop_overhead;
    return add(m, afters[from]);
  };
  if (scheme == ReductionScheme::chain) {
    // One stream from the far end; every core adds on the way (wavelet by
    // wavelet), the root adds last.
    std::uint32_t prev = kNoMessage;
    for (int from = n - 1; from >= 1; --from) prev = send(from, from - 1, prev);
    if (prev != kNoMessage) afters[0].push_back({MessageRef{prev, 0}, reduce_hop_overhead});
  } else if (scheme == ReductionScheme::two_level) {
    // Each group streams into its first core (a chain), then the roots
    // send to one another like tree steps (same as reduce_line).
    const int g = two_level_group(n);
    for (int first = 0; first < n; first += g) {
      std::uint32_t prev = kNoMessage;
      for (int from = std::min(n, first + g) - 1; from > first; --from)
        prev = send(from, from - 1, prev);
      if (prev != kNoMessage)
        afters[static_cast<std::size_t>(first)].push_back(
            {MessageRef{prev, 0}, reduce_hop_overhead});
    }
    const auto steps = reduction_order(scheme, n);
    for (std::size_t i = static_cast<std::size_t>(n - (n + g - 1) / g); i < steps.size(); ++i) {
      const std::uint32_t m = send(steps[i].from, steps[i].into, kNoMessage);
      afters[static_cast<std::size_t>(steps[i].into)].push_back(
          {MessageRef{m, 0}, reduce_hop_overhead});
    }
  } else if (scheme == ReductionScheme::k_tree && n > 1) {
    // Every group's two streams into its centre (the far half's, the near
    // half's), then the roots' pass-through sends toward the k-tree root
    // (reduction_order's steps after the groups'), then the move to line.at(0).
    const int k = k_tree_groups(n, groups);
    for (int g = 0; g < k; ++g) {
      const int a = k_tree_group_begin(n, k, g), b = k_tree_group_begin(n, k, g + 1);
      const int c = a + (b - a) / 2;
      for (const auto& [from_end, dir] : {std::pair{b - 1, -1}, std::pair{a, 1}}) {
        if (from_end == c) continue;
        std::uint32_t prev = kNoMessage;
        for (int from = from_end; from != c; from += dir) prev = send(from, from + dir, prev);
        afters[static_cast<std::size_t>(c)].push_back({MessageRef{prev, 0}, reduce_hop_overhead});
      }
    }
    // The roots stream from each end toward the k-tree root, each adding
    // and forwarding wavelet by wavelet (the far side first).
    std::vector<int> roots;
    for (int g = 0; g < k; ++g) {
      const int a = k_tree_group_begin(n, k, g), b = k_tree_group_begin(n, k, g + 1);
      roots.push_back(a + (b - a) / 2);
    }
    const int mid = k / 2;
    const auto root_of = [&](int g) { return roots[static_cast<std::size_t>(g)]; };
    for (const auto& [outer, step] : {std::pair{k - 1, -1}, std::pair{0, 1}}) {
      if (outer == mid) continue;
      std::uint32_t prev = kNoMessage;
      for (int g = outer; g != mid; g += step) prev = send(root_of(g), root_of(g + step), prev);
      afters[static_cast<std::size_t>(root_of(mid))].push_back(
          {MessageRef{prev, 0}, reduce_hop_overhead});
    }
    const int root = k_tree_root(n, groups);
    if (root != 0 && !in_place) {
      const std::uint32_t m = send(root, 0, kNoMessage);
      afters[0] = {After{MessageRef{m, 0}, Cycles{0}}};
    }
  } else if (scheme == ReductionScheme::ring && n > 1) {
    // The folded ring (ring_sequence): reduce-scatter, every chunk's running
    // sum sent on and added to at each position, then the all-gather; done
    // when line.at(0) has every chunk.
    const std::vector<int> seq = ring_sequence(n);
    auto at = [&](int p) { return seq[static_cast<std::size_t>(((p % n) + n) % n)]; };
    const int k = ring_chunks(n, bytes);
    const Bytes chunk{(bytes.value + static_cast<std::uint64_t>(k) - 1) /
                      static_cast<std::uint64_t>(k)};
    auto hop = [&](int from, int into, std::vector<After> deps) {
      Message m;
      m.src = line.at(from);
      m.dst = line.at(into);
      m.bytes = chunk;
      m.ready = ready[static_cast<std::size_t>(from)].at;
      m.color = color;
      return add(m, deps);
    };
    std::vector<std::uint32_t> last(static_cast<std::size_t>(k), kNoMessage);
    for (int s = 0; s + 1 < n; ++s)
      for (int c = 0; c < k; ++c) {
        const int from = at(c + 1 + s);
        std::vector<After> deps = afters[static_cast<std::size_t>(from)];
        if (s > 0)
          deps.push_back({MessageRef{last[static_cast<std::size_t>(c)], 0}, reduce_hop_overhead});
        last[static_cast<std::size_t>(c)] = hop(from, at(c + 2 + s), std::move(deps));
      }
    // Per core: when it has each chunk's sum.
    std::vector<std::vector<After>> has(static_cast<std::size_t>(n));
    for (int c = 0; c < k; ++c) {
      // Position c adds the last partial, then passes the sum on around.
      std::vector<After> deps = afters[static_cast<std::size_t>(at(c))];
      deps.push_back({MessageRef{last[static_cast<std::size_t>(c)], 0}, reduce_hop_overhead});
      has[static_cast<std::size_t>(at(c))].push_back(deps.back());
      std::uint32_t prev = kNoMessage;
      for (int s = 0; s + 1 < n; ++s) {
        const int from = at(c + s), into = at(c + 1 + s);
        if (s > 0) deps = {After{MessageRef{prev, 0}, Cycles{0}}};
        prev = hop(from, into, deps);
        has[static_cast<std::size_t>(into)].push_back({MessageRef{prev, 0}, Cycles{0}});
      }
    }
    if (in_place) return has;
    afters[0] = std::move(has[0]);
  } else {
    for (const CombineStep& step : reduction_order(scheme, n)) {
      const std::uint32_t m = send(step.from, step.into, kNoMessage);
      afters[step.into].push_back({MessageRef{m, 0}, reduce_hop_overhead});
    }
  }
  return afters;
}

std::uint32_t Traffic::marker(Coord at, Cycles ready, std::uint8_t color,
                              std::span<const After> after) {
  Message done;
  done.src = done.dst = at;
  done.ready = ready;
  done.color = color;
  return add(done, after);
}

std::uint32_t Traffic::multicast_both_ways(const Line& line, int root, Bytes bytes, Cycles ready,
                                           std::uint8_t color, std::span<const After> after) {
  const int n = line.length;
  if (root < 0 || root >= n)
    throw std::invalid_argument("Traffic::multicast_both_ways: the root is not on the line");
  if (root == 0) return multicast(line, bytes, ready, color, after);
  if (root == n - 1)
    return multicast(Line{line.at(root), opposite(line.along), n}, bytes, ready, color, after);
  Message m;
  m.src = line.at(root);
  m.dst = line.at(n - 1);
  m.back_hops = static_cast<std::uint32_t>(root);
  m.bytes = bytes;
  m.ready = ready;
  m.multicast = true;
  m.color = color;
  return add(m, after);
}

std::uint32_t Traffic::reduction(ReductionScheme scheme, const Line& line, Bytes bytes,
                                 Cycles reduce_hop_overhead, std::span<const NodeReady> ready,
                                 std::uint8_t color, int groups) {
  const std::vector<std::vector<After>> afters =
      describe_reduction(scheme, line, bytes, reduce_hop_overhead, ready, color, groups, false);
  return marker(line.at(0), ready[0].at, color, afters[0]);
}

std::vector<MessageRef> Traffic::all_reduce(ReductionScheme scheme, const Line& line, Bytes bytes,
                                            Cycles reduce_hop_overhead,
                                            std::span<const NodeReady> ready, std::uint8_t color,
                                            int groups) {
  const int n = line.length;
  std::vector<MessageRef> has(static_cast<std::size_t>(n));
  if (n == 1) {
    has[0] = {reduction(scheme, line, bytes, reduce_hop_overhead, ready, color, groups), 0};
    return has;
  }
  const std::vector<std::vector<After>> afters =
      describe_reduction(scheme, line, bytes, reduce_hop_overhead, ready, color, groups, true);
  if (scheme == ReductionScheme::ring) {
    // Every core has the sum once it has every chunk's.
    for (int i = 0; i < n; ++i)
      has[static_cast<std::size_t>(i)] = {
          marker(line.at(i), ready[static_cast<std::size_t>(i)].at, color,
                 afters[static_cast<std::size_t>(i)]),
          0};
    return has;
  }
  // The sum at the root (line.at(0); a k-tree's own root), multicast from
  // there to both ends.
  const int root = scheme == ReductionScheme::k_tree ? k_tree_root(n, groups) : 0;
  const auto r = static_cast<std::size_t>(root);
  const std::uint32_t sum = marker(line.at(root), ready[r].at, color, afters[r]);
  has[r] = {sum, 0};
  const After after{MessageRef{sum, 0}, Cycles{0}};
  const std::uint32_t back =
      multicast_both_ways(line, root, bytes, ready[r].at, color, std::span(&after, 1));
  for (int i = 0; i < n; ++i)
    if (i != root)
      has[static_cast<std::size_t>(i)] = {back, Traffic::receiver_at(messages_[back], line.at(i))};
  return has;
}

std::vector<std::uint32_t> add_gemv_phase(Traffic& traffic, const GemvPhase& phase,
                                          Cycles reduce_hop_overhead) {
  const Rect& r = phase.region;
  std::vector<std::uint32_t> columns;
  for (int x = r.x0; x < r.x0 + r.width; ++x)
    columns.push_back(traffic.multicast(Line{{x, r.y0}, Direction::south, r.height},
                                        phase.chunk_bytes, phase.start, phase.multicast_color));
  std::vector<std::uint32_t> rows;
  std::vector<NodeReady> ready(static_cast<std::size_t>(r.width));
  for (int y = r.y0; y < r.y0 + r.height; ++y) {
    for (int i = 0; i < r.width; ++i) {
      NodeReady& n = ready[static_cast<std::size_t>(i)];
      if (y == r.y0 || r.height == 1) {
        // The column's source has its chunk at the start.
        n = NodeReady{phase.start + phase.compute, false, {}};
      } else {
        n = NodeReady{phase.start, true,
                      After{MessageRef{columns[static_cast<std::size_t>(i)],
                                       static_cast<std::uint32_t>(y - r.y0 - 1)},
                            phase.compute}};
      }
    }
    rows.push_back(traffic.reduction(phase.scheme, Line{{r.x0, y}, Direction::east, r.width},
                                     phase.partial_bytes, reduce_hop_overhead, ready,
                                     phase.reduce_color));
  }
  return rows;
}

std::uint64_t TrafficResult::done(std::uint32_t m) const {
  const std::uint32_t end = m + 1 < first_receiver.size()
                                ? first_receiver[m + 1]
                                : static_cast<std::uint32_t>(arrival.size());
  std::uint64_t t = 0;
  for (std::uint32_t i = first_receiver[m]; i < end; ++i) t = std::max(t, arrival[i]);
  return t;
}

std::uint64_t TrafficResult::done(std::span<const std::uint32_t> ms) const {
  std::uint64_t t = 0;
  for (std::uint32_t m : ms) t = std::max(t, done(m));
  return t;
}

std::uint64_t TrafficResult::makespan() const {
  std::uint64_t t = 0;
  for (std::uint64_t a : arrival) t = std::max(t, a);
  return t;
}

void validate_traffic(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic) {
  if (traffic.colors() > spec.virtual_channels)
    throw std::invalid_argument("traffic uses " + std::to_string(traffic.colors()) +
                                " colors; the router has " + std::to_string(spec.virtual_channels));
  const auto& ms = traffic.messages();
  for (std::size_t i = 0; i < ms.size(); ++i) {
    const Message& m = ms[i];
    const std::string what = "message " + std::to_string(i) + ": ";
    if (!mesh.contains(m.src) || !mesh.contains(m.dst))
      throw std::invalid_argument(what + "endpoint outside the mesh");
    if (m.multicast && m.src.x != m.dst.x && m.src.y != m.dst.y)
      throw std::invalid_argument(what + "a multicast runs along one row or column");
    if (m.back_hops > 0) {
      Coord back_end = m.src;
      for (std::uint32_t k = 0; m.multicast && k < m.back_hops; ++k)
        back_end = Mesh::step(back_end, opposite(Traffic::heading(m)));
      if (!m.multicast || !mesh.contains(back_end))
        throw std::invalid_argument(what + "a multicast both ways must end inside the mesh");
    }
    if (m.bytes.value == 0 && !(m.src == m.dst))
      throw std::invalid_argument(what + "an empty message cannot travel");
    for (const After& a : traffic.after(m))
      if (a.ref.message >= i || a.ref.receiver >= Traffic::receivers(ms[a.ref.message]))
        throw std::invalid_argument(what + "depends on a later message or a missing receiver");
    if (m.stream_from != kNoMessage) {
      if (m.stream_from >= i) throw std::invalid_argument(what + "streams from a later message");
      const Message& up = ms[m.stream_from];
      if (up.multicast || !(up.dst == m.src) || up.bytes != m.bytes || up.src == up.dst)
        throw std::invalid_argument(
            what + "streams from a unicast of the same size that ends at its source");
    }
  }
}

namespace detail {

ReadyTracker::ReadyTracker(const Traffic& traffic, TrafficResult& result, bool stream_blocks,
                           Bytes link_bytes_per_cycle)
    : traffic_(traffic),
      result_(result),
      stream_blocks_(stream_blocks),
      link_bytes_(link_bytes_per_cycle) {
  const auto& ms = traffic.messages();
  result.ready.assign(ms.size(), kNever);
  result.first_receiver.resize(ms.size());
  std::uint32_t slots = 0;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    result.first_receiver[i] = slots;
    slots += Traffic::receivers(ms[i]);
  }
  result.arrival.assign(slots, kNever);
  pending_.assign(ms.size(), 0);
  heads_.assign(stream_blocks ? ms.size() : 0, kNever);
  dependents_first_.assign(slots + 1, 0);
  auto for_each_dep = [&](auto&& f) {
    for (std::uint32_t i = 0; i < ms.size(); ++i) {
      for (const After& a : traffic.after(ms[i])) f(i, a.ref);
      if (stream_blocks_ && ms[i].stream_from != kNoMessage) f(i, MessageRef{ms[i].stream_from, 0});
    }
  };
  for_each_dep([&](std::uint32_t i, MessageRef r) {
    ++pending_[i];
    ++dependents_first_[result.first_receiver[r.message] + r.receiver + 1];
  });
  for (std::uint32_t s = 0; s < slots; ++s) dependents_first_[s + 1] += dependents_first_[s];
  dependents_.resize(dependents_first_[slots]);
  std::vector<std::uint32_t> fill(dependents_first_.begin(), dependents_first_.end() - 1);
  for_each_dep([&](std::uint32_t i, MessageRef r) {
    dependents_[fill[result.first_receiver[r.message] + r.receiver]++] = i;
  });
  for (std::uint32_t i = 0; i < ms.size(); ++i)
    if (pending_[i] == 0) {
      result.ready[i] = compute_ready(i);
      initial_.push_back(i);
    }
}

std::uint64_t ReadyTracker::own_ready(std::uint32_t i) const {
  const Message& m = traffic_.messages()[i];
  std::uint64_t r = m.ready.value;
  for (const After& a : traffic_.after(m))
    r = std::max(r, result_.arrival_at(a.ref)) + a.delay.value;
  return r;
}

std::uint64_t ReadyTracker::compute_ready(std::uint32_t i) const {
  const Message& m = traffic_.messages()[i];
  std::uint64_t r = own_ready(i);
  if (stream_blocks_ && m.stream_from != kNoMessage) {
    const Message& up = traffic_.messages()[m.stream_from];
    const std::uint64_t ser = ceil_div(up.bytes.value, link_bytes_.value);
    // Head arrival of the upstream stream at this source, then the add.
    const std::uint64_t head = heads_[m.stream_from] != kNever
                                   ? heads_[m.stream_from]
                                   : result_.arrival_at(MessageRef{m.stream_from, 0}) - ser;
    r = std::max(r, head + m.stream_delay.value);
  }
  return r;
}

void ReadyTracker::arrive(MessageRef r, std::uint64_t cycle, std::vector<std::uint32_t>& now_ready,
                          std::uint64_t head) {
  const std::uint32_t slot = result_.first_receiver[r.message] + r.receiver;
  result_.arrival[slot] = cycle;
  if (head != kNever) heads_[r.message] = head;
  for (std::uint32_t k = dependents_first_[slot]; k < dependents_first_[slot + 1]; ++k) {
    const std::uint32_t d = dependents_[k];
    if (--pending_[d] == 0) {
      result_.ready[d] = compute_ready(d);
      now_ready.push_back(d);
    }
  }
}

}  // namespace detail

TrafficResult run_flow(const Mesh& mesh, const WaferSpec& spec, FlowModel& flow,
                       const Traffic& traffic) {
  validate_traffic(mesh, spec, traffic);
  TrafficResult result;
  detail::ReadyTracker tracker(traffic, result, /*stream_blocks=*/true, spec.link_bytes_per_cycle);
  using Entry = std::pair<std::uint64_t, std::uint32_t>;  // (ready, message)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  for (std::uint32_t m : tracker.initially_ready()) queue.push({result.ready[m], m});
  std::vector<LinkId> route;
  std::vector<Timed> arrivals;
  std::vector<std::uint32_t> now_ready;
  const auto& ms = traffic.messages();
  // A reduction's hop streams the wavelets its source receives, as they
  // arrive: the cycles its upstream message's wavelets reached the source
  // (FlowModel::stream; one contiguous run under LinkSharing::exclusive),
  // kept for each message something streams from.
  std::vector<std::uint32_t> runs_slot(ms.size(), kNoMessage);
  std::vector<WaveletRuns> delivered;
  for (const Message& m : ms)
    if (m.stream_from != kNoMessage && runs_slot[m.stream_from] == kNoMessage) {
      runs_slot[m.stream_from] = static_cast<std::uint32_t>(delivered.size());
      delivered.emplace_back();
    }
  while (!queue.empty()) {
    const auto [ready, i] = queue.top();
    queue.pop();
    const Message& m = ms[i];
    now_ready.clear();
    const Timed start{Cycles{ready}, {}};
    if (m.src == m.dst) {
      tracker.arrive({i, 0}, ready, now_ready);
    } else if (m.multicast) {
      // Ahead, then (both ways) behind: the two branches leave the source's
      // router together.
      const Direction d = Traffic::heading(m);
      const auto ahead = static_cast<std::uint32_t>(manhattan(m.src, m.dst));
      for (const auto& [dir, hops, first] :
           {std::tuple{d, ahead, 0u}, std::tuple{opposite(d), m.back_hops, ahead}}) {
        if (hops == 0) continue;
        route.clear();
        mesh.straight_route(m.src, dir, static_cast<int>(hops), route);
        flow.send(route, m.bytes, start, &arrivals);
        for (std::uint32_t j = 0; j + 1 < arrivals.size(); ++j)
          tracker.arrive({i, first + j}, arrivals[j + 1].at.value, now_ready);
      }
    } else {
      route.clear();
      mesh.xy_route(m.src, m.dst, route);
      const std::uint64_t ser = flow.serialization(m.bytes).value;
      WaveletRuns inject = WaveletRuns::from(ready, ser);
      if (m.stream_from != kNoMessage) {
        // Wavelet i leaves stream_delay after its upstream wavelet i reached
        // the source, and not before the message's own readiness.
        const WaveletRuns& up = delivered[runs_slot[m.stream_from]];
        inject.n = 0;
        std::uint64_t cursor = tracker.own_ready(i);
        for (int r = 0; r < up.n; ++r) {
          const std::uint64_t s = std::max(up.start[r] + m.stream_delay.value, cursor);
          inject.append(s, up.count[r]);
          cursor = s + up.count[r];
        }
      }
      WaveletRuns* out = runs_slot[i] == kNoMessage ? nullptr : &delivered[runs_slot[i]];
      const std::uint64_t done = flow.stream(route, m.bytes, start, inject, out).at.value;
      tracker.arrive({i, 0}, done, now_ready, out && out->n > 0 ? out->start[0] : kNever);
    }
    for (std::uint32_t d : now_ready) queue.push({result.ready[d], d});
  }
  return result;
}

TrafficResult run_flow(const Mesh& mesh, const WaferSpec& spec, const Traffic& traffic) {
  FlowModel flow(mesh, spec);
  return run_flow(mesh, spec, flow, traffic);
}

}  // namespace wafersim::fabric
