#include "fabric/line_reductions.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "fabric/crossing.hpp"

namespace wafersim::fabric {

LineReductions::LineReductions(const Mesh& mesh, FlowModel& flow, ReductionScheme scheme,
                               int groups, Direction along, int length)
    : mesh_(mesh), flow_(flow), scheme_(scheme), groups_(groups), along_(along), length_(length) {
  if (length < 1) throw std::invalid_argument("line reductions: lines of at least one core");
  own_loop_ = flow.sharing() == LinkSharing::interleave && flow.borrow_first_.empty() &&
              (scheme == ReductionScheme::chain || scheme == ReductionScheme::tree ||
               scheme == ReductionScheme::two_level);
  // Toward the root is opposite(along): link indices step down for east and
  // south runs, up for west and north (Mesh::straight_route).
  const Direction toward = opposite(along);
  toward_step_ = toward == Direction::east || toward == Direction::south ? 1u : ~0u;
  if (scheme == ReductionScheme::tree) steps_ = reduction_order(scheme, length);
  if (scheme == ReductionScheme::two_level) {
    group_ = two_level_group(length);
    steps_ = reduction_order(scheme, length);
    // Without the in-group steps (as reduce_line drops them).
    steps_.erase(steps_.begin(), steps_.begin() + (length - (length + group_ - 1) / group_));
  }
}

Timed LineReductions::traverse(std::uint32_t link0, int hops, std::size_t ramp, std::uint64_t ser,
                               std::uint64_t bytes, const Timed& ready, const Timed* node_ready,
                               const std::uint64_t* node_at) {
  FlowModel& f = flow_;
  const std::uint64_t hop = f.hop_latency_.value;
  const std::uint64_t step = hop + (node_ready ? f.reduce_hop_overhead_.value : 0);
  const Timed* from = &ready;
  std::uint64_t from_at = ready.at.value;
  std::uint64_t cross = hop + f.extra_of(LinkId{link0});
  std::uint64_t from_hops = cross;  // hop cycles from `from` to the node after the link
  WaveletRuns buffer_a = WaveletRuns::from(ready.at.value, ser), buffer_b;
  WaveletRuns* runs_on = &buffer_a;
  WaveletRuns* next_on = &buffer_b;
  // Hints for the caches, which change no result: the records of the first
  // kAhead links and the last core's ramp at once (so that their misses
  // overlap), then each hop the link kAhead on.
  constexpr int kAhead = 8;
  auto ask = [&](int k) {
    const std::uint32_t l = link0 + static_cast<std::uint32_t>(k) * toward_step_;
    prefetch_line(&f.links_[l]);
    prefetch_line(&f.bytes_low_[l]);
    if (next_delta_ != 0) {
      prefetch_line(&f.links_[l + next_delta_]);
      prefetch_line(&f.bytes_low_[l + next_delta_]);
    }
  };
  prefetch_line(&f.eject_[ramp]);
  for (int k = 0; k < std::min(hops, kAhead); ++k) ask(k);
  for (int k = 0; k < hops; ++k) {
    if (k + kAhead < hops) ask(k + kAhead);
    const LinkId link{link0 + static_cast<std::uint32_t>(k) * toward_step_};
    std::uint64_t not_before = 0;
    if (k > 0) {
      runs_on->shift(step + (cross - hop));
      cross = hop + f.extra_of(link);
      from_hops += step + (cross - hop);
      if (node_ready) {
        not_before = *(node_at - k);
        if (not_before + cross > from_at + from_hops) {
          from = node_ready - k;
          from_at = not_before;
          from_hops = cross;
        }
      }
    }
    f.add_link_bytes(link, bytes);
    carried_ += bytes;
    f.settle(link);
    max_end_ = std::max(
        max_end_, f.links_[link.value].pass(*runs_on, 0, not_before, next_on, now(), &f.wide_));
    std::swap(runs_on, next_on);
  }
  // The last core takes the message through its ramp.
  const std::uint64_t end = f.eject_[ramp].pass(*runs_on, cross, 0, nullptr, now(), &f.wide_);
  max_end_ = std::max(max_end_, end);
  return crossed(*from, from_hops, ser, end);
}

Timed LineReductions::chain(const Line& line, int far, int root, Bytes bytes,
                            std::span<const Timed> ready, const std::uint64_t* at) {
  const Timed& first = ready[static_cast<std::size_t>(far)];
  flow_.hold_records(first.at.value);
  raise_now(first.at.value);
  const Coord start = line.at(far), end = line.at(root);
  const Timed done =
      traverse(mesh_.link(start, opposite(line.along)).value, far - root,
               static_cast<std::size_t>(end.x) * static_cast<std::size_t>(mesh_.height()) +
                   static_cast<std::size_t>(end.y),
               flow_.serialization(bytes).value, bytes.value, first, &first,
               at + static_cast<std::size_t>(far));
  return later(done.plus(Resource::hops, flow_.reduce_hop_overhead_),
               ready[static_cast<std::size_t>(root)]);
}

Timed LineReductions::send(const Line& line, int from, int into, Bytes bytes, const Timed& ready) {
  flow_.hold_records(ready.at.value);
  raise_now(ready.at.value);
  const Coord start = line.at(from), end = line.at(into);
  return traverse(mesh_.link(start, opposite(line.along)).value, from - into,
                  static_cast<std::size_t>(end.x) * static_cast<std::size_t>(mesh_.height()) +
                      static_cast<std::size_t>(end.y),
                  flow_.serialization(bytes).value, bytes.value, ready, nullptr, nullptr);
}

void LineReductions::hold_counts(bool hold) {
  if (hold && !held_) now_ = base_now_ = top_now_ = flow_.now_;
  if (!hold && held_) flow_.now_ = std::max({flow_.now_, now_, top_now_});
  held_ = hold;
}

void LineReductions::settle_line_record(Coord root) {
  if (length_ < 2) return;
  flow_.settle_line_of(LinkId{far_link(root)});
}

void LineReductions::next_line(Coord next) {
  next_ = next;
}

void LineReductions::publish_counts() {
  flow_.carried_bytes_ += std::exchange(carried_, 0);
  flow_.max_end_ = std::max(flow_.max_end_, std::exchange(max_end_, 0));
}

Timed LineReductions::reduce(Coord root, Bytes bytes, std::span<const Timed> ready,
                             std::span<const std::uint64_t> at) {
  if (!own_loop_) {
    if (held_) throw std::logic_error("line reductions: counts held on reduce_line's path");
    return reduce_line(mesh_, flow_, scheme_, Line{root, along_, length_}, bytes, ready, groups_);
  }
  if (at.empty()) {
    at_.resize(ready.size());
    for (std::size_t i = 0; i < ready.size(); ++i) at_[i] = ready[i].at.value;
    at = at_;
  } else if (at.size() != ready.size()) {
    throw std::invalid_argument("line reductions: one ready cycle per ready time");
  }
  if (held_ && apart_) now_ = base_now_;
  next_delta_ = 0;
  const std::optional<Coord> next = std::exchange(next_, std::nullopt);
  auto on_mesh = [&](Coord c) {
    return mesh_.contains(c) && mesh_.contains(Line{c, along_, length_}.at(length_ - 1));
  };
  if (next && length_ > 1 && on_mesh(*next) && on_mesh(root))
    next_delta_ = far_link(*next) - far_link(root);
  const Timed sum = reduce_own(root, bytes, ready, at.data());
  if (held_ && apart_) top_now_ = std::max(top_now_, now_);
  if (!held_) publish_counts();
  return sum;
}

Timed LineReductions::reduce_own(Coord root, Bytes bytes, std::span<const Timed> ready,
                                 const std::uint64_t* at) {
  const Line line{root, along_, length_};
  const int n = length_;
  if (static_cast<int>(ready.size()) != n)
    throw std::invalid_argument("reduce_line: one ready time per core");
  if (n == 1) return ready[0];
  // The whole line on the mesh, as reduce_line's routes require.
  if (!mesh_.contains(root) || !mesh_.contains(line.at(n - 1)))
    throw std::out_of_range("route leaves the mesh");
  if (scheme_ == ReductionScheme::chain) return chain(line, n - 1, 0, bytes, ready, at);
  if (scheme_ == ReductionScheme::two_level) {
    // The roots' combines read and write the groups' roots only (every
    // group_-th core): each has its group's sum.
    partial_.resize(static_cast<std::size_t>(n));
    for (int first = 0; first < n; first += group_) {
      const int len = std::min(n, first + group_) - first;
      partial_[static_cast<std::size_t>(first)] =
          len > 1 ? chain(line, first + len - 1, first, bytes, ready, at)
                  : ready[static_cast<std::size_t>(first)];
    }
  } else {
    partial_.assign(ready.begin(), ready.end());
  }
  for (const CombineStep& s : steps_) {
    const Timed arrival =
        send(line, s.from, s.into, bytes, partial_[static_cast<std::size_t>(s.from)]);
    Timed& into = partial_[static_cast<std::size_t>(s.into)];
    into = later(into, arrival).plus(Resource::hops, flow_.reduce_hop_overhead_);
  }
  return partial_[0];
}

}  // namespace wafersim::fabric
