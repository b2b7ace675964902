#include "fabric/parallel_multicast.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "fabric/crossing.hpp"

namespace wafersim::fabric {

ParallelLineMulticast::ParallelLineMulticast(const Mesh& mesh, FlowModel& flow, Coord first,
                                             Direction along, int length, Direction across,
                                             std::span<const Bytes> bytes,
                                             std::span<const Timed> ready,
                                             const std::uint64_t* own_now)
    : flow_(flow), length_(length), ready_(ready) {
  const bool along_vertical = along == Direction::south || along == Direction::north;
  const bool across_vertical = across == Direction::south || across == Direction::north;
  if (along_vertical == across_vertical)
    throw std::invalid_argument("parallel multicast: lines must lie side by side");
  if (bytes.size() != ready.size())
    throw std::invalid_argument("parallel multicast: one message size per ready time");
  if (length < 1) throw std::invalid_argument("parallel multicast: lines of at least one core");
  const Coord s = Mesh::step(Coord{0, 0}, along), a = Mesh::step(Coord{0, 0}, across);
  if (!ready.empty()) {
    const int n = static_cast<int>(ready.size()) - 1;
    const Coord far{first.x + s.x * (length - 1) + a.x * n, first.y + s.y * (length - 1) + a.y * n};
    if (!mesh.contains(first) || !mesh.contains(far))
      throw std::out_of_range("parallel multicast: lines leave the mesh");
  }
  hop_by_hop_ = flow.sharing() == LinkSharing::interleave && flow.borrow_first_.empty();
  if (own_now && !hop_by_hop_)
    throw std::logic_error("parallel multicast: lines apart need hops of their own");
  const std::size_t count = ready.size();
  if (!hop_by_hop_) {
    // One send() per line, in line order; next_hop() hands the arrivals out.
    all_.resize(count * static_cast<std::size_t>(length));
    next_core_.assign(count, 0);
    std::vector<LinkId> route;
    std::vector<Timed> arrivals;
    for (std::size_t i = 0; i < count; ++i) {
      const auto ii = static_cast<int>(i);
      route.clear();
      mesh.straight_route(Coord{first.x + a.x * ii, first.y + a.y * ii}, along, length - 1, route);
      flow.send(route, bytes[i], ready[i], &arrivals);
      std::copy(arrivals.begin(), arrivals.end(),
                all_.begin() + static_cast<std::ptrdiff_t>(i * static_cast<std::size_t>(length)));
    }
    return;
  }
  // Link indices along a straight run move by one in their plane (Mesh::straight_route);
  // ramp records are column-major (FlowModel::ramp_slot_after).
  link_step_ = along == Direction::east || along == Direction::south ? 1u : ~0u;
  const auto h = static_cast<std::ptrdiff_t>(mesh.height());
  ramp_step_ = along == Direction::east ? h : along == Direction::west ? -h : s.y;
  const std::uint64_t hop = flow.hop_latency_.value;
  lines_.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    LineState& l = lines_[i];
    // As send() does before each message, in line order.
    flow.hold_records(ready[i].at.value);
    if (own_now) {
      l.now = std::max(*own_now, ready[i].at.value);
    } else {
      flow.now_ = std::max(flow.now_, ready[i].at.value);
      l.now = flow.now_;
    }
    l.bytes = bytes[i].value;
    l.ser = flow.serialization(bytes[i]).value;
    if (length > 1) {
      const auto ii = static_cast<int>(i);
      const Coord start{first.x + a.x * ii, first.y + a.y * ii};
      l.link0 = mesh.link(start, along).value;
      const Coord second{start.x + s.x, start.y + s.y};
      l.ramp0 = static_cast<std::size_t>(second.x) * static_cast<std::size_t>(mesh.height()) +
                static_cast<std::size_t>(second.y);
      l.runs[0] = WaveletRuns::from(ready[i].at.value, l.ser);
      l.cross = hop + flow.extra_of(LinkId{l.link0});
      l.from_hops = l.cross;
      if (own_now && flow.in_active_line(LinkId{l.link0}))
        throw std::logic_error("parallel multicast: lines apart on a run with a line record");
      l.in_line_record =
          !own_now && flow.take_line_message(l.link0, link_step_, length - 1, ready[i].at.value,
                                             l.ser, l.bytes, l.now);
    }
  }
}

// One hop of FlowModel::traverse_interleaved for a multicast (no node_ready,
// no per-hop extra, no borrowed links): link k - 1 of the line, then the ramp
// of core k. The same calls with the same arguments, in the same order for
// this line's records.
void ParallelLineMulticast::hop(LineState& l, const Timed& from, Timed& out, Counts& counts) {
  const auto kk = static_cast<std::uint32_t>(l.k - 1);
  const std::uint64_t hop = flow_.hop_latency_.value;
  const LinkId link{l.link0 + kk * link_step_};
  WaveletRuns* runs_on = &l.runs[l.on];
  if (l.in_line_record) {
    // The link is free from the wavelets' arrival on (the line record's
    // condition), so they leave it as they entered; no repair detour.
    if (kk > 0) {
      runs_on->shift(hop);
      l.from_hops += hop;
    }
    if (l.k == length_ - 1) counts.max_end = std::max(counts.max_end, runs_on->end());
  } else {
    WaveletRuns* next_on = &l.runs[1 - l.on];
    if (kk > 0) {
      runs_on->shift(hop + (l.cross - hop));
      l.cross = hop + flow_.extra_of(link);
      l.from_hops += hop + (l.cross - hop);
    }
    flow_.add_link_bytes(link, l.bytes);
    counts.carried += l.bytes;
    counts.max_end = std::max(counts.max_end, flow_.links_[link.value].pass(*runs_on, 0, 0, next_on,
                                                                            l.now, &flow_.wide_));
    l.on = 1 - l.on;
    runs_on = next_on;
  }
  // The receiving core's ramp takes the wavelets as they arrive.
  const auto ramp = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(l.ramp0) +
                                             ramp_step_ * static_cast<std::ptrdiff_t>(kk));
  const std::uint64_t end =
      flow_.eject_[ramp].pass(*runs_on, l.cross, 0, nullptr, l.now, &flow_.wide_);
  counts.max_end = std::max(counts.max_end, end);
  crossed(from, l.from_hops, l.ser, end, out);
}

void ParallelLineMulticast::next_hop(int first, int n, std::span<Timed> out) {
  Counts counts;
  next_hop(first, n, out, counts);
  publish(counts);
}

void ParallelLineMulticast::next_hop(int first, int n, std::span<Timed> out, Counts& counts) {
  if (first < 0 || n < 0 || first + n > lines() || out.size() < static_cast<std::size_t>(n))
    throw std::invalid_argument("parallel multicast: lines out of range");
  if (!hop_by_hop_) {
    for (int j = 0; j < n; ++j) {
      const auto i = static_cast<std::size_t>(first + j);
      if (next_core_[i] >= length_)
        throw std::logic_error("parallel multicast: past the end of a line");
      out[static_cast<std::size_t>(j)] =
          all_[i * static_cast<std::size_t>(length_) + static_cast<std::size_t>(next_core_[i]++)];
    }
    return;
  }
  constexpr int kAhead = 4;  // hops ahead that each line's records are asked for
  for (int j = 0; j < n; ++j) {
    const auto i = static_cast<std::size_t>(first + j);
    LineState& l = lines_[i];
    if (l.k >= length_) throw std::logic_error("parallel multicast: past the end of a line");
    if (l.k > 0) {
      if (l.k + kAhead < length_) {
        // Hints for the caches, which change no result.
        const auto ahead = static_cast<std::uint32_t>(l.k + kAhead - 1);
        const std::uint32_t link = l.link0 + ahead * link_step_;
        if (!l.in_line_record) {
          prefetch_line(&flow_.links_[link]);
          prefetch_line(&flow_.bytes_low_[link]);
        }
        prefetch_line(&flow_.eject_[static_cast<std::size_t>(
            static_cast<std::ptrdiff_t>(l.ramp0) +
            ramp_step_ * static_cast<std::ptrdiff_t>(ahead))]);
      }
      hop(l, ready_[i], out[static_cast<std::size_t>(j)], counts);
    } else {
      out[static_cast<std::size_t>(j)] = ready_[i];
    }
    ++l.k;
  }
}

void ParallelLineMulticast::publish(Counts& counts) {
  flow_.carried_bytes_ += std::exchange(counts.carried, 0);
  flow_.max_end_ = std::max(flow_.max_end_, std::exchange(counts.max_end, 0));
}

}  // namespace wafersim::fabric
