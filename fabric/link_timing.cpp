#include "fabric/link_timing.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace wafersim::fabric {

std::uint64_t FlowModel::LinkState::earliest_fit(std::uint64_t t, std::uint64_t len) const {
  const std::uint64_t floor = this->floor();
  const int count = this->count();
  std::uint64_t s = std::max(t, floor);
  // Fast path (messages issued in time order): at or after the last interval.
  if (count == 0 || s >= floor + end[count - 1]) return s;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t b = floor + end[i];
    if (b <= s) continue;                    // ends before the candidate start
    if (floor + start[i] >= s + len) break;  // the message fits before it
    s = b;                                   // overlaps: try right after it
  }
  return s;
}

void FlowModel::LinkState::raise_floor(std::uint64_t to) {
  const std::uint64_t floor = this->floor();
  if (to <= floor) return;
  const int count = this->count();
  // Intervals that start at or before the new floor merge into it.
  int absorbed = 0;
  while (absorbed < count && floor + start[absorbed] <= to) {
    to = std::max(to, floor + end[absorbed]);
    ++absorbed;
  }
  const auto shift = static_cast<std::uint32_t>(to - floor);
  for (int i = absorbed; i < count; ++i) {
    start[i - absorbed] = start[i] - shift;
    end[i - absorbed] = end[i] - shift;
  }
  set(to, count - absorbed);
}

void FlowModel::LinkState::reserve(std::uint64_t s, std::uint64_t len) {
  if (len == 0) return;
  std::uint64_t e = s + len;
  if (e > kFloorMask)
    throw std::overflow_error("link reservation past 2^56 cycles (the flow model's time limit)");
  constexpr std::uint64_t kSpan = std::numeric_limits<std::uint32_t>::max();
  if (e - std::min(e, floor()) > kSpan) raise_floor(e - (std::uint64_t{1} << 31));
  std::uint64_t floor = this->floor();
  s = std::max(s, floor);
  if (e <= floor) return;  // already counted busy
  if (s == floor) {        // touches the floor: extend it
    raise_floor(e);
    return;
  }
  auto so = static_cast<std::uint32_t>(s - floor);
  auto eo = static_cast<std::uint32_t>(e - floor);
  int count = this->count();
  // Fast path: after the last interval (extend it, or append).
  if (count > 0 && so >= end[count - 1]) {
    if (so == end[count - 1]) {
      end[count - 1] = eo;
      return;
    }
    if (count == kLinkIntervals) {
      // Full: fold the oldest interval into the floor (conservative).
      const std::uint32_t shift = end[0];
      for (int i = 1; i < count; ++i) start[i - 1] = start[i] - shift, end[i - 1] = end[i] - shift;
      floor += shift;
      so -= shift;
      eo -= shift;
      --count;
    }
    start[count] = so;
    end[count] = eo;
    set(floor, count + 1);
    return;
  }
  int p = 0;  // intervals before the new one
  while (p < count && end[p] <= so) ++p;
  const bool left = p > 0 && end[p - 1] == so;
  const bool right = p < count && start[p] == eo;
  if (left && right) {
    end[p - 1] = end[p];
    for (int i = p + 1; i < count; ++i) start[i - 1] = start[i], end[i - 1] = end[i];
    set(floor, count - 1);
    return;
  }
  if (left) {
    end[p - 1] = eo;
    return;
  }
  if (right) {
    start[p] = so;
    return;
  }
  if (count == kLinkIntervals) {
    // Full: fold the oldest interval into the floor (conservative).
    raise_floor(floor + end[0]);
    floor = this->floor();
    if (e <= floor) return;
    s = std::max(s, floor);
    if (s == floor) {
      raise_floor(e);
      return;
    }
    so = static_cast<std::uint32_t>(s - floor);
    eo = static_cast<std::uint32_t>(e - floor);
    count = this->count();
    p = 0;
    while (p < count && end[p] <= so) ++p;
  }
  for (int i = count; i > p; --i) start[i] = start[i - 1], end[i] = end[i - 1];
  start[p] = so;
  end[p] = eo;
  set(floor, count + 1);
}

std::pair<std::uint64_t, std::uint64_t> FlowModel::LinkState::fill(std::uint64_t t,
                                                                   std::uint64_t len) {
  const std::uint64_t floor = this->floor();
  std::uint64_t s = std::max(t, floor);
  if (len == 0) return {s, s};
  // The free pieces, computed before any is reserved (reserving may fold).
  std::uint64_t piece_start[kLinkIntervals + 1], piece_len[kLinkIntervals + 1];
  int pieces = 0;
  std::uint64_t left = len;
  const int count = this->count();
  for (int i = 0; i < count && left > 0; ++i) {
    const std::uint64_t a = floor + start[i], b = floor + end[i];
    if (b <= s) continue;
    if (a > s) {
      const std::uint64_t take = std::min(a - s, left);
      piece_start[pieces] = s, piece_len[pieces] = take, ++pieces;
      left -= take;
    }
    s = b;
  }
  if (left > 0) piece_start[pieces] = s, piece_len[pieces] = left, ++pieces;
  for (int i = 0; i < pieces; ++i) reserve(piece_start[i], piece_len[i]);
  return {piece_start[0], piece_start[pieces - 1] + piece_len[pieces - 1]};
}

void FlowModel::carry_traffic(LinkId l, std::uint64_t bytes_carry, std::uint64_t busy_carry) {
  CounterCarry& carry = carries_[l.value];
  carry.bytes += bytes_carry;
  carry.busy += busy_carry;
}

std::uint64_t FlowModel::link_bytes(LinkId l) const {
  std::uint64_t high = 0;
  if (!carries_.empty())
    if (const auto it = carries_.find(l.value); it != carries_.end()) high = it->second.bytes;
  return (high << 32) + links_[l.value].bytes_low;
}

std::uint64_t FlowModel::link_busy_cycles(LinkId l) const {
  std::uint64_t high = 0;
  if (!carries_.empty())
    if (const auto it = carries_.find(l.value); it != carries_.end()) high = it->second.busy;
  return (high << 32) + links_[l.value].busy_low;
}

FlowModel::FlowModel(const Mesh& mesh, const WaferSpec& spec)
    : hop_latency_(spec.hop_latency),
      link_bytes_per_cycle_(spec.link_bytes_per_cycle),
      reduce_hop_overhead_(spec.reduce_hop_overhead),
      mesh_(mesh),
      links_(mesh.link_count()),
      eject_(mesh.core_count()) {}

Cycles FlowModel::link_reserved_until(LinkId l) const {
  const LinkState& s = links_[l.value];
  const int count = s.count();
  return Cycles{count == 0 ? s.floor() : s.floor() + s.end[count - 1]};
}

std::vector<std::pair<Cycles, Cycles>> FlowModel::link_busy_intervals(LinkId l) const {
  const LinkState& s = links_[l.value];
  std::vector<std::pair<Cycles, Cycles>> out;
  for (int i = 0; i < s.count(); ++i)
    out.emplace_back(Cycles{s.floor() + s.start[i]}, Cycles{s.floor() + s.end[i]});
  return out;
}

std::vector<std::uint64_t> FlowModel::link_bytes_by_core() const {
  std::vector<std::uint64_t> out(mesh_.link_count(), 0);
  write_link_bytes_by_core(out);
  return out;
}

void FlowModel::write_link_bytes_by_core(std::span<std::uint64_t> out) const {
  if (out.size() != mesh_.link_count())
    throw std::invalid_argument("write_link_bytes_by_core: one element per link");
  // Each plane is read in its memory order (mesh.hpp: column-major for the
  // vertical directions), the output written where it belongs.
  auto put = [&](int x, int y, int d) {
    out[mesh_.id(Coord{x, y}).value * kDirections + static_cast<std::uint32_t>(d)] =
        link_bytes(mesh_.link(Coord{x, y}, static_cast<Direction>(d)));
  };
  for (int d = 0; d < kDirections; ++d) {
    const auto dir = static_cast<Direction>(d);
    if (dir == Direction::south || dir == Direction::north) {
      for (int x = 0; x < mesh_.width(); ++x)
        for (int y = 0; y < mesh_.height(); ++y) put(x, y, d);
    } else {
      for (int y = 0; y < mesh_.height(); ++y)
        for (int x = 0; x < mesh_.width(); ++x) put(x, y, d);
    }
  }
}

Timed FlowModel::eject(CoreId c, Cycles ser, const Timed& tail) {
  // Shared wavelet by wavelet: the core has the message once ser free ramp
  // cycles from its head's arrival on have passed.
  const std::uint64_t last_end = eject_[c.value].fill(tail.at.value - ser.value, ser.value).second;
  return tail.not_before(Cycles{last_end}, Resource::contention);
}

Timed FlowModel::send(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                      std::vector<Timed>* arrivals) {
  if (links.empty()) return traverse(links, bytes, ready, {}, Cycles{0}, arrivals);
  const Cycles ser = serialization(bytes);
  if (!arrivals)
    return eject(link_target(links.back()), ser,
                 traverse(links, bytes, ready, {}, Cycles{0}, nullptr));
  // A line multicast: every core after the first receives its copy.
  traverse(links, bytes, ready, {}, Cycles{0}, arrivals);
  for (std::size_t k = 0; k < links.size(); ++k) {
    const CoreId c = link_target(links[k]);
    (*arrivals)[k + 1] = eject(c, ser, (*arrivals)[k + 1]);
  }
  return arrivals->back();
}

Timed FlowModel::reduce_chain(std::span<const LinkId> links, Bytes bytes,
                              std::span<const Timed> node_ready) {
  if (node_ready.size() != links.size() + 1)
    throw std::invalid_argument("reduce_chain: one ready time per node");
  Timed done = node_ready[0];
  if (!links.empty()) {
    const Cycles ser = serialization(bytes);
    const CoreId last = link_target(links.back());
    done = eject(last, ser,
                 traverse(links, bytes, node_ready[0], node_ready, reduce_hop_overhead_, nullptr));
  }
  // The last node adds its own contribution as the stream arrives, like every
  // node before it.
  return later(done.plus(Resource::hops, reduce_hop_overhead_), node_ready.back());
}

Timed FlowModel::traverse(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                          std::span<const Timed> node_ready, Cycles per_hop_extra,
                          std::vector<Timed>* arrivals) {
  if (sharing_ == LinkSharing::interleave)
    return traverse_interleaved(links, bytes, ready, node_ready, per_hop_extra, arrivals);
  if (arrivals) {
    arrivals->clear();
    arrivals->push_back(ready);
  }
  if (links.empty()) return ready;
  const std::uint64_t ser = serialization(bytes).value;
  const std::uint64_t hop = hop_latency_.value;
  const std::uint64_t step = hop + per_hop_extra.value;
  // The head's Timed is kept as the moment it started from (`from`: `ready`,
  // or the node_ready that last held it back) plus the hop and contention
  // cycles added since; `at` is its time. The Timed is only built where one
  // is returned, which keeps this per-hop loop on plain integers. Every rule
  // is the exclusive rule of the header, with the same sums as Timed::plus
  // and Timed::not_before would make.
  const Timed* from = &ready;
  std::uint64_t at = ready.at.value, hops = 0, contention = 0;
  // The tail's arrival at the node after the link the head is on.
  auto tail = [&] {
    Timed t = *from;
    t.at = Cycles{at + hop + ser};
    t.path.hops += hops + hop;
    t.path.contention += contention;
    t.path.serialization += ser;
    return t;
  };
  for (std::size_t k = 0; k < links.size(); ++k) {
    if (k > 0) {
      at += step;
      hops += step;
      // A node that is not ready holds the head back (later(): ties keep the head).
      if (!node_ready.empty() && node_ready[k].at.value > at) {
        from = &node_ready[k];
        at = from->at.value;
        hops = contention = 0;
      }
    }
    LinkState& link = links_[links[k].value];
    // Waiting for a gap the whole message fits in is contention.
    const std::uint64_t start = link.earliest_fit(at, ser);
    contention += start - at;
    at = start;
    link.reserve(at, ser);
    count_traffic(links[k], link, bytes.value, ser);
    if (arrivals) arrivals->push_back(tail());
  }
  return tail();
}

Timed FlowModel::traverse_interleaved(std::span<const LinkId> links, Bytes bytes,
                                      const Timed& ready, std::span<const Timed> node_ready,
                                      Cycles per_hop_extra, std::vector<Timed>* arrivals) {
  if (arrivals) {
    arrivals->clear();
    arrivals->push_back(ready);
  }
  if (links.empty()) return ready;
  const Cycles ser = serialization(bytes);
  Timed head = ready;  // when the head may enter the next link
  Timed tail_arrival = ready;
  for (std::size_t k = 0; k < links.size(); ++k) {
    if (k > 0) {
      head = head.plus(Resource::hops, hop_latency_ + per_hop_extra);
      if (!node_ready.empty()) head = later(head, node_ready[k]);
    }
    LinkState& link = links_[links[k].value];
    const auto [first, last_end] = link.fill(head.at.value, ser.value);
    head = head.not_before(Cycles{first}, Resource::contention);
    Timed tail = head.plus(Resource::hops, hop_latency_)
                     .plus(Resource::serialization, ser)
                     .plus(Resource::contention, Cycles{last_end - first - ser.value});
    // The tail cannot pass the tail of the hop before.
    if (k > 0) tail = later(tail, tail_arrival.plus(Resource::hops, hop_latency_));
    tail_arrival = tail;
    count_traffic(links[k], link, bytes.value, ser.value);
    if (arrivals) arrivals->push_back(tail_arrival);
  }
  return tail_arrival;
}

}  // namespace wafersim::fabric
