#include "fabric/link_timing.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "fabric/crossing.hpp"

namespace wafersim::fabric {

std::uint64_t FlowModel::LinkState::earliest_fit(std::uint64_t t, std::uint64_t len,
                                                 const WideRecords* wide) const {
  const int count = this->count();
  if (count == kWide) return wide->earliest_fit(*this, t, len);
  const std::uint64_t floor = this->floor();
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

void FlowModel::LinkState::reserve(std::uint64_t s, std::uint64_t len, std::uint64_t now,
                                   WideRecords* wide) {
  if (len == 0) return;
  if (wide && this->wide()) {
    wide->reserve(*this, s, len, now);
    return;
  }
  std::uint64_t e = s + len;
  if (e > kFloorMask)
    throw std::overflow_error("link reservation past 2^56 cycles (the flow model's time limit)");
  constexpr std::uint64_t kSpan = std::numeric_limits<std::uint32_t>::max();
  if (e - std::min(e, floor()) > kSpan) raise_floor(e - (std::uint64_t{1} << 31));
  const std::uint64_t floor = this->floor();
  s = std::max(s, floor);
  if (e <= floor) return;  // already counted busy
  if (s == floor) {        // touches the floor: extend it
    raise_floor(e);
    return;
  }
  const auto so = static_cast<std::uint32_t>(s - floor);
  const auto eo = static_cast<std::uint32_t>(e - floor);
  const int count = this->count();
  // Fast paths (issued in time order): extend the last interval, or append.
  if (count > 0 && so == end[count - 1]) {
    end[count - 1] = eo;
    return;
  }
  if (count < kLinkIntervals && (count == 0 || so > end[count - 1])) {
    start[count] = so;
    end[count] = eo;
    set(floor, count + 1);
    return;
  }
  if (count == kLinkIntervals && so > end[count - 1] && floor + start[0] <= now) {
    // Full, appending, and the gap before the first interval lies before
    // `now` (worth nothing, the earliest): the rule below folds the oldest
    // interval into the floor. The same, without building the merged list.
    const std::uint32_t shift = end[0];
    for (int i = 1; i < count; ++i) start[i - 1] = start[i] - shift, end[i - 1] = end[i] - shift;
    start[count - 1] = so - shift;
    end[count - 1] = eo - shift;
    set(floor + shift, count);
    return;
  }
  // Between intervals: joins one or two that it touches, or is inserted
  // while there is room.
  int p = 0;  // intervals that end at or before the new one's start
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
  if (count < kLinkIntervals) {
    for (int i = count; i > p; --i) start[i] = start[i - 1], end[i] = end[i - 1];
    start[p] = so;
    end[p] = eo;
    set(floor, count + 1);
    return;
  }
  // One interval too many: with the new one in place at p, give up the gap
  // worth least, i.e. with the fewest free cycles at or after `now` (ties:
  // the earliest). Gap 0 lies between the floor and the first interval
  // (giving it up raises the floor); gap i between intervals i-1 and i.
  std::uint32_t st[kLinkIntervals + 1], en[kLinkIntervals + 1];
  for (int i = 0, j = 0; i <= count; ++i) {
    if (i == p) {
      st[i] = so, en[i] = eo;
    } else {
      st[i] = start[j], en[i] = end[j];
      ++j;
    }
  }
  auto worth = [&](std::uint64_t from, std::uint64_t to) {
    from = std::max(from, now);
    return to > from ? to - from : 0;
  };
  int gap = 0;
  std::uint64_t least = worth(floor, floor + st[0]);
  for (int i = 1; i <= count; ++i) {
    const std::uint64_t w = worth(floor + en[i - 1], floor + st[i]);
    if (w < least) least = w, gap = i;
  }
  if (least > 0 && wide) {
    // Every gap has free cycles ahead: keep them all, in a wide record.
    wide->adopt(*this, floor, st, en, count + 1);
    return;
  }
  if (gap == 0) {
    const std::uint32_t shift = en[0];
    for (int i = 1; i <= count; ++i) start[i - 1] = st[i] - shift, end[i - 1] = en[i] - shift;
    set(floor + shift, count);
    return;
  }
  for (int i = 0, j = 0; i <= count; ++i) {
    if (i == gap) {
      end[j - 1] = en[i];  // intervals gap-1 and gap become one
      continue;
    }
    start[j] = st[i], end[j] = en[i];
    ++j;
  }
}

int FlowModel::LinkState::free_pieces(std::uint64_t t, std::uint64_t len,
                                      std::uint64_t* piece_start, std::uint64_t* piece_len) const {
  const std::uint64_t floor = this->floor();
  std::uint64_t s = std::max(t, floor);
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
  return pieces;
}

std::uint64_t FlowModel::LinkState::fill(std::uint64_t t, std::uint64_t len, WaveletRuns& out,
                                         std::uint64_t now, WideRecords* wide) {
  if (wide && this->wide()) {
    if (len == 0) return std::max(t, floor());
    // The pieces are free cycles found before any of them is reserved (a
    // reservation may move the record back to compact form).
    // (Per thread: two may reserve at once, WideRecords::set_shared.)
    thread_local std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
    wide->free_pieces(*this, t, len, pieces);
    for (const auto& [ps, pl] : pieces) {
      reserve(ps, pl, now, wide);
      out.append(ps, pl);
    }
    return pieces.back().first + pieces.back().second;
  }
  if (len == 0) return std::max(t, floor());
  std::uint64_t piece_start[kLinkIntervals + 1], piece_len[kLinkIntervals + 1];
  const int pieces = free_pieces(t, len, piece_start, piece_len);
  for (int i = 0; i < pieces; ++i) {
    reserve(piece_start[i], piece_len[i], now, wide);
    out.append(piece_start[i], piece_len[i]);
  }
  return piece_start[pieces - 1] + piece_len[pieces - 1];
}

std::uint64_t FlowModel::LinkState::pass_pieces(const WaveletRuns& at, std::uint64_t delay,
                                                std::uint64_t not_before, WaveletRuns* out,
                                                std::uint64_t now, WideRecords* wide) {
  WaveletRuns scratch;
  WaveletRuns& taken = out ? *out : scratch;
  taken.n = 0;
  std::uint64_t cursor = not_before;
  for (int i = 0; i < at.n; ++i)
    cursor = fill(std::max(at.start[i] + delay, cursor), at.count[i], taken, now, wide);
  return cursor;
}

void FlowModel::add_carry(std::uint32_t l, std::uint64_t units) {
  std::unique_lock<std::mutex> lock;
  if (wide_.shared()) lock = std::unique_lock<std::mutex>(*carries_mutex_);
  carries_[l] += units;
}

std::uint64_t FlowModel::WideRecords::earliest_fit(const LinkState& link, std::uint64_t t,
                                                   std::uint64_t len) const {
  const std::uint64_t floor = link.floor();
  const std::uint32_t n = size_of(link), c = capacity_of(link);
  const std::uint32_t* en = block_of(link);
  const std::uint32_t* st = en + c;
  std::uint64_t s = std::max(t, floor) - floor;
  if (s >= last_end_of(link)) return floor + s;  // after the last interval
  // The first interval that ends after s, then as LinkState::earliest_fit.
  for (std::uint32_t i = static_cast<std::uint32_t>(std::upper_bound(en, en + n, s) - en);
       i < n && st[i] < s + len; ++i)
    s = en[i];
  return floor + s;
}

void FlowModel::WideRecords::free_pieces(
    const LinkState& link, std::uint64_t t, std::uint64_t len,
    std::vector<std::pair<std::uint64_t, std::uint64_t>>& pieces) const {
  const std::uint64_t floor = link.floor();
  const std::uint32_t n = size_of(link), c = capacity_of(link);
  const std::uint32_t* en = block_of(link);
  const std::uint32_t* st = en + c;
  pieces.clear();
  std::uint64_t s = std::max(t, floor) - floor, left = len;
  for (auto i = static_cast<std::uint32_t>(std::upper_bound(en, en + n, s) - en); i < n && left > 0;
       ++i) {
    if (st[i] > s) {
      const std::uint64_t take = std::min(st[i] - s, left);
      pieces.emplace_back(floor + s, take);
      left -= take;
    }
    s = en[i];
  }
  if (left > 0) pieces.emplace_back(floor + s, left);
}

void FlowModel::WideRecords::point_at(LinkState& link, std::uint32_t slot, std::uint64_t floor,
                                      std::uint32_t size) {
  Slot& w = slots_[slot];
  link.set(floor, LinkState::kWide);
  link.start[0] = slot;
  link.start[1] = size;
  link.start[2] = w.capacity;
  std::uint32_t* p = w.block.get();
  link.start[3] = size > 0 ? p[size - 1] : 0;
  std::memcpy(&link.end[0], &p, sizeof p);
}

void FlowModel::WideRecords::adopt(LinkState& link, std::uint64_t floor, const std::uint32_t* st,
                                   const std::uint32_t* en, int n) {
  assign(link, floor, st, en, static_cast<std::uint32_t>(n));
}

void FlowModel::WideRecords::grow(LinkState& link) {
  const auto lock = hold();
  Slot& w = slots_[slot_of(link)];
  const std::uint32_t n = size_of(link), c = w.capacity;
  const std::uint32_t bigger =
      std::min<std::uint32_t>(2 * c, static_cast<std::uint32_t>(kWideLinkIntervals) + 1);
  auto block = std::make_unique<std::uint32_t[]>(2 * std::size_t{bigger});
  std::memcpy(block.get(), w.block.get(), n * sizeof(std::uint32_t));
  std::memcpy(block.get() + bigger, w.block.get() + c, n * sizeof(std::uint32_t));
  w.block = std::move(block);
  w.capacity = bigger;
  point_at(link, slot_of(link), link.floor(), n);
}

void FlowModel::WideRecords::release(LinkState& link) {
  const std::uint32_t index = slot_of(link), n = size_of(link), c = capacity_of(link);
  const std::uint32_t* en = block_of(link);
  std::uint32_t st[kLinkIntervals], e[kLinkIntervals];
  for (std::uint32_t i = 0; i < n; ++i) st[i] = en[c + i], e[i] = en[i];
  for (std::uint32_t i = 0; i < kLinkIntervals; ++i)
    link.start[i] = i < n ? st[i] : 0, link.end[i] = i < n ? e[i] : 0;
  link.set(link.floor(), static_cast<int>(n));
  const auto lock = hold();
  slots_[index].owner = nullptr;
  free_.push_back(index);
}

void FlowModel::WideRecords::drop(LinkState& link) {
  const std::uint32_t index = slot_of(link);
  link = LinkState{};
  const auto lock = hold();
  slots_[index].owner = nullptr;
  free_.push_back(index);
}

void FlowModel::WideRecords::assign(LinkState& link, std::uint64_t floor, const std::uint32_t* st,
                                    const std::uint32_t* en, std::uint32_t n) {
  const auto lock = hold();
  std::uint32_t index;
  if (link.wide()) {
    index = slot_of(link);
  } else if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& w = slots_[index];
  // Room for one more than it holds, as a record of its size grown would
  // have (the capacity is storage only: no answer reads it).
  constexpr std::uint32_t kFirstCapacity = 4 * kLinkIntervals;
  std::uint32_t capacity = std::max(w.capacity, kFirstCapacity);
  while (capacity < n + 1 && capacity < static_cast<std::uint32_t>(kWideLinkIntervals) + 1)
    capacity =
        std::min<std::uint32_t>(2 * capacity, static_cast<std::uint32_t>(kWideLinkIntervals) + 1);
  if (capacity != w.capacity) {
    w.block = std::make_unique<std::uint32_t[]>(2 * std::size_t{capacity});
    w.capacity = capacity;
  }
  w.owner = &link;
  std::uint32_t* block = w.block.get();
  for (std::uint32_t i = 0; i < n; ++i) block[i] = en[i], block[w.capacity + i] = st[i];
  point_at(link, index, floor, n);
  peak_ = std::max(peak_, in_use());
}

void FlowModel::WideRecords::fold(LinkState& link, std::uint64_t to, std::uint64_t now) {
  const std::uint64_t floor = link.floor();
  std::uint32_t n = size_of(link);
  const std::uint32_t c = capacity_of(link);
  std::uint32_t* en = block_of(link);
  std::uint32_t* st = en + c;
  // An interval that starts by the floor joins it. While there are more
  // than kLinkIntervals, one that starts by `now` is folded in too: the gap
  // before it has no free cycle at or after `now`, and it is the gap a full
  // compact record would give up (the earliest worth nothing), so the record
  // is the same in either form.
  std::uint32_t k = 0;
  while (k < n && (floor + st[k] <= to ||
                   (n - k > static_cast<std::uint32_t>(kLinkIntervals) && floor + st[k] <= now))) {
    to = std::max(to, floor + en[k]);
    ++k;
  }
  if (to <= floor) return;
  const std::uint64_t shift = to - floor;
  for (std::uint32_t m = k; m < n; ++m)
    en[m - k] = static_cast<std::uint32_t>(en[m] - shift),
           st[m - k] = static_cast<std::uint32_t>(st[m] - shift);
  n -= k;
  resize(link, to, n);
}

void FlowModel::WideRecords::reserve(LinkState& link, std::uint64_t s, std::uint64_t len,
                                     std::uint64_t now) {
  const std::uint64_t e = s + len;
  if (e > LinkState::kFloorMask)
    throw std::overflow_error("link reservation past 2^56 cycles (the flow model's time limit)");
  // Bounds more than 2^32 cycles past the floor: the floor moves up to 2^31
  // cycles before the end, as in the compact record.
  constexpr std::uint64_t kSpan = std::numeric_limits<std::uint32_t>::max();
  if (e - std::min(e, link.floor()) > kSpan) fold(link, e - (std::uint64_t{1} << 31), 0);
  std::uint64_t floor = link.floor();
  s = std::max(s, floor);
  if (e <= floor) return;  // already counted busy
  if (size_of(link) == capacity_of(link)) grow(link);
  std::uint32_t n = size_of(link);
  const std::uint32_t c = capacity_of(link);
  std::uint32_t* en = block_of(link);
  std::uint32_t* st = en + c;
  // The intervals [i, j) that [s, e) overlaps or touches become one.
  std::uint64_t so = s - floor, eo = e - floor;
  const auto i = static_cast<std::uint32_t>(std::lower_bound(en, en + n, so) - en);
  std::uint32_t j = i;
  for (; j < n && st[j] <= eo; ++j) {
    so = std::min<std::uint64_t>(so, st[j]);
    eo = std::max<std::uint64_t>(eo, en[j]);
  }
  if (i == j) {  // a new interval at i
    std::memmove(en + i + 1, en + i, (n - i) * sizeof(std::uint32_t));
    std::memmove(st + i + 1, st + i, (n - i) * sizeof(std::uint32_t));
    ++n;
  } else if (j > i + 1) {
    std::memmove(en + i + 1, en + j, (n - j) * sizeof(std::uint32_t));
    std::memmove(st + i + 1, st + j, (n - j) * sizeof(std::uint32_t));
    n -= j - i - 1;
  }
  en[i] = static_cast<std::uint32_t>(eo);
  st[i] = static_cast<std::uint32_t>(so);
  resize(link, floor, n);
  // What touches the floor joins it; gaps worth nothing are given up.
  fold(link, floor, now);
  floor = link.floor();
  n = size_of(link);
  if (n > static_cast<std::uint32_t>(kWideLinkIntervals)) {
    // Full: give up the gap with the fewest free cycles at or after `now`
    // (every gap has some: the rest were folded above), the earliest of equals.
    auto worth = [now](std::uint64_t from, std::uint64_t to) {
      from = std::max(from, now);
      return to > from ? to - from : 0;
    };
    std::uint32_t gap = 0;
    std::uint64_t least = worth(floor, floor + st[0]);
    for (std::uint32_t m = 1; m < n; ++m) {
      const std::uint64_t g = worth(floor + en[m - 1], floor + st[m]);
      if (g < least) least = g, gap = m;
    }
    {
      const auto lock = hold();
      ++gaps_given_up_;
    }
    if (gap == 0) {
      fold(link, floor + en[0], 0);
    } else {
      en[gap - 1] = en[gap];
      std::memmove(en + gap, en + gap + 1, (n - gap - 1) * sizeof(std::uint32_t));
      std::memmove(st + gap, st + gap + 1, (n - gap - 1) * sizeof(std::uint32_t));
      resize(link, floor, n - 1);
    }
  }
  // Back to the compact record once it holds everything.
  if (size_of(link) <= static_cast<std::uint32_t>(kLinkIntervals)) release(link);
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> FlowModel::WideRecords::busy(
    const LinkState& link) const {
  const std::uint64_t floor = link.floor();
  const std::uint32_t n = size_of(link), c = capacity_of(link);
  const std::uint32_t* en = block_of(link);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (std::uint32_t i = 0; i < n; ++i) out.emplace_back(floor + en[c + i], floor + en[i]);
  return out;
}

void FlowModel::WideRecords::retire_all() {
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& w = slots_[i];
    if (!w.owner) continue;
    LinkState& link = *w.owner;
    const std::uint64_t end = link.floor() + block_of(link)[size_of(link) - 1];
    link.set(end, 0);
    for (int k = 0; k < kLinkIntervals; ++k) link.start[k] = link.end[k] = 0;
    w.owner = nullptr;
    free_.push_back(i);
  }
}

void WaveletRuns::append(std::uint64_t s, std::uint64_t c) {
  if (c == 0) return;
  if (n > 0 && start[n - 1] + count[n - 1] == s) {
    count[n - 1] += c;
    return;
  }
  if (n == kMax) {
    // Join the two runs (the new one included) with the shortest gap.
    int best = n - 1;  // joins run best with run best + 1 (n - 1: with the new one)
    std::uint64_t best_gap = s - end();
    for (int i = 0; i + 1 < n; ++i) {
      const std::uint64_t gap = start[i + 1] - (start[i] + count[i]);
      if (gap < best_gap) best = i, best_gap = gap;
    }
    if (best == n - 1) {
      // The last run moves up against the new one.
      start[n - 1] = s - count[n - 1];
      count[n - 1] += c;
      return;
    }
    start[best + 1] -= count[best];
    count[best + 1] += count[best];
    for (int i = best; i + 1 < n; ++i) start[i] = start[i + 1], count[i] = count[i + 1];
    --n;
  }
  start[n] = s;
  count[n] = c;
  ++n;
}

std::uint64_t WaveletRuns::wavelets() const {
  std::uint64_t w = 0;
  for (int i = 0; i < n; ++i) w += count[i];
  return w;
}

Cycles FlowModel::link_floor(LinkId l) const {
  const_cast<FlowModel*>(this)->settle(l);  // changes no answer
  return Cycles{links_[l.value].floor()};
}

std::uint64_t FlowModel::link_bytes(LinkId l) const {
  std::uint64_t pending = 0;
  if (lines_active_ != 0)
    if (in_line_record(l.value)) pending = line_records_[line_slot(l)].bytes;
  std::uint64_t high = 0;
  if (!carries_.empty())
    if (const auto it = carries_.find(l.value); it != carries_.end()) high = it->second;
  return (high << 32) + bytes_low_[l.value] + pending;
}

FlowModel::FlowModel(const Mesh& mesh, const WaferSpec& spec)
    : hop_latency_(spec.hop_latency),
      link_bytes_per_cycle_(spec.link_bytes_per_cycle),
      reduce_hop_overhead_(spec.reduce_hop_overhead),
      mesh_(mesh),
      links_(mesh.link_count()),
      bytes_low_(mesh.link_count()),
      eject_(mesh.core_count()) {
  plane_size_ = mesh.core_count();
  line_bits_.assign((mesh.link_count() + 63) / 64, 0);
  line_records_.resize(2 * static_cast<std::size_t>(mesh.width()) +
                       2 * static_cast<std::size_t>(mesh.height()));
}

std::size_t FlowModel::line_slot(LinkId l) const {
  const auto plane = static_cast<std::size_t>(l.value / plane_size_);
  const std::size_t offset = l.value % plane_size_;
  const auto w = static_cast<std::size_t>(mesh_.width()),
             h = static_cast<std::size_t>(mesh_.height());
  // East and west planes: one line per row; south and north: one per column.
  switch (static_cast<Direction>(plane)) {
    case Direction::east:
      return offset / w;
    case Direction::west:
      return h + offset / w;
    case Direction::south:
      return 2 * h + offset / h;
    default:  // north
      return 2 * h + w + offset / h;
  }
}

void FlowModel::settle_slow(LinkId l) {
  // l is in an active record, not written out.
  LineRecord& r = line_records_[line_slot(l)];
  const auto k = static_cast<int>(r.step == 1 ? l.value - r.link0 : r.link0 - l.value);
  if (r.written.size() >= std::min(kLineExceptions, static_cast<std::size_t>(r.links) / 4 + 1)) {
    settle_line(r);
    return;
  }
  write_line_link(r, k);
  mark_line_link(l.value, false);
  r.written.push_back(k);
}

void FlowModel::settle_lines() {
  if (lines_active_ == 0) return;
  for (LineRecord& r : line_records_)
    if (r.active) settle_line(r);
}

void FlowModel::settle_line_of(LinkId l) {
  if (lines_active_ == 0) return;
  LineRecord& r = line_records_[line_slot(l)];
  if (r.active) settle_line(r);
}

bool FlowModel::in_active_line(LinkId l) const {
  return lines_active_ != 0 && line_records_[line_slot(l)].active;
}

std::size_t FlowModel::links_in_line_records() const {
  std::size_t n = 0;
  for (const LineRecord& r : line_records_)
    if (r.active) n += static_cast<std::size_t>(r.links) - r.written.size();
  return n;
}

void FlowModel::write_line_link(const LineRecord& r, int k) {
  const LinkId l{r.link0 + static_cast<std::uint32_t>(k) * r.step};
  LinkState& st = links_[l.value];
  const auto kk = static_cast<std::uint64_t>(k);
  if (r.folded) {
    // Whatever the link held before, the hops would have left these.
    const std::uint64_t floor = r.floor0 + kk * hop_latency_.value;
    for (int i = 0; i < kLinkIntervals; ++i) {
      st.start[i] = static_cast<std::uint32_t>(r.start[i] - r.floor0);
      st.end[i] = static_cast<std::uint32_t>(r.start[i] + r.ser[i] - r.floor0);
    }
    st.set(floor, r.kept);
  } else {
    for (int i = 0; i < r.kept; ++i)
      if (!st.reserve_after_last(r.start[i] + kk * hop_latency_.value, r.ser[i], r.now[i]))
        throw std::logic_error("flow model: a line record's message does not append to link " +
                               std::to_string(l.value));
  }
  if (r.bytes != 0) add_link_bytes(l, r.bytes);
}

void FlowModel::settle_line(LineRecord& r) {
  for (int k = 0; k < r.links; ++k) {
    const std::uint32_t l = r.link0 + static_cast<std::uint32_t>(k) * r.step;
    if (!in_line_record(l)) continue;  // written out already
    write_line_link(r, k);
    mark_line_link(l, false);
  }
  r.written.clear();
  if (r.folded)
    r.backoff = 0;
  else if (r.kept <= 1)
    back_off(r);
  r.active = false;
  --lines_active_;
}

bool FlowModel::take_line_message(std::uint32_t link0, std::uint32_t step, int links,
                                  std::uint64_t ready, std::uint64_t ser, std::uint64_t bytes,
                                  std::uint64_t now) {
  if (!line_records_on_ || links < 1 || ser == 0 || !link_extra_.empty() ||
      !borrow_first_.empty() || sharing_ != LinkSharing::interleave)
    return false;
  LineRecord& r = line_records_[line_slot(LinkId{link0})];
  if (r.active && (r.link0 != link0 || r.step != step || r.links != links)) settle_line(r);
  const std::uint64_t hop = hop_latency_.value;
  const auto last_k = static_cast<std::uint64_t>(links - 1);
  const std::uint64_t last_end = ready + last_k * hop + ser;
  if (last_end > LinkState::kFloorMask) {
    if (r.active) settle_line(r);
    return false;
  }
  if (!r.active) {
    if (r.skip > 0) {
      --r.skip;
      return false;
    }
    // A new line record: every link compact, free after base_last.
    std::uint64_t base_last = 0, base_floor = LinkState::kFloorMask;
    for (int k = 0; k < links; ++k) {
      const LinkState& st = links_[link0 + static_cast<std::uint32_t>(k) * step];
      if (st.wide()) {
        back_off(r);
        return false;
      }
      const int c = st.count();
      base_last = std::max(base_last, c == 0 ? st.floor() : st.floor() + st.end[c - 1]);
      base_floor = std::min(base_floor, st.floor());
    }
    // Strictly after: a message touching the last interval would extend it.
    if (base_last >= ready || last_end - base_floor > std::uint64_t{0xffffffff}) {
      back_off(r);
      return false;
    }
    std::vector<int> written = std::move(r.written);  // empty; its memory kept
    const std::uint8_t backoff = r.backoff;
    r = LineRecord{};
    r.written = std::move(written);
    r.backoff = backoff;
    r.active = true;
    r.link0 = link0;
    r.step = step;
    r.links = links;
    r.base_last = base_last;
    r.base_floor = base_floor;
    ++lines_active_;
    for (int k = 0; k < links; ++k)
      mark_line_link(link0 + static_cast<std::uint32_t>(k) * step, true);
  } else {
    const int p = r.kept - 1;
    // After the last message, not touching it; where a link's record is
    // full its oldest interval starts by `now`, so appending folds it: with
    // fewer than four messages kept that interval is the link's own (it
    // ended by base_last, before the first message's start, so by `now`),
    // with four the oldest message's (on the last link, the latest of its
    // starts); and the interval's bounds stay within 2^32 cycles of the floor.
    const bool ok = p < 0 ? r.base_last < ready
                          : r.start[p] + r.ser[p] < ready &&
                                (r.kept < kLinkIntervals || r.start[0] + last_k * hop <= now);
    const std::uint64_t span = r.folded ? ready + ser - r.floor0 : last_end - r.base_floor;
    // The links written out: each free from the wavelets' arrival on.
    bool free = true;
    for (std::size_t i = 0; free && i < r.written.size(); ++i) {
      const auto kk = static_cast<std::uint64_t>(r.written[i]);
      const std::uint32_t l = link0 + static_cast<std::uint32_t>(r.written[i]) * step;
      free = links_[l].earliest_fit(ready + kk * hop, ser, &wide_) == ready + kk * hop;
    }
    if (!ok || !free || span > std::uint64_t{0xffffffff}) {
      settle_line(r);
      return false;
    }
    // They take the message at once, as its hops would.
    for (const int k : r.written) {
      const LinkId l{link0 + static_cast<std::uint32_t>(k) * step};
      links_[l.value].pass(WaveletRuns::from(ready + static_cast<std::uint64_t>(k) * hop, ser), 0,
                           0, nullptr, now, &wide_);
      add_link_bytes(l, bytes);
    }
  }
  if (r.kept == kLinkIntervals) {
    // The oldest folds into every link's floor.
    r.floor0 = r.start[0] + r.ser[0];
    r.folded = true;
    for (int i = 1; i < kLinkIntervals; ++i)
      r.start[i - 1] = r.start[i], r.ser[i - 1] = r.ser[i], r.now[i - 1] = r.now[i];
    --r.kept;
  }
  r.start[r.kept] = ready;
  r.ser[r.kept] = ser;
  r.now[r.kept] = now;
  ++r.kept;
  r.bytes += bytes;
  carried_bytes_ += bytes * static_cast<std::uint64_t>(links);
  return true;
}

void FlowModel::set_link_extra_cycles(std::vector<std::uint16_t> extra) {
  if (!extra.empty() && extra.size() != mesh_.link_count())
    throw std::invalid_argument("set_link_extra_cycles: one value per link");
  settle_lines();
  link_extra_ = std::move(extra);
}

void FlowModel::set_link_borrowed(std::vector<std::uint32_t> first, std::vector<LinkId> links) {
  if (!first.empty() && (first.size() != mesh_.link_count() + 1 || first.back() != links.size()))
    throw std::invalid_argument("set_link_borrowed: link_count() + 1 offsets into the links");
  if (first.empty() != links.empty())
    throw std::invalid_argument(
        "set_link_borrowed: offsets without links or links without offsets");
  settle_lines();
  borrow_first_ = std::move(first);
  borrow_links_ = std::move(links);
}

std::uint64_t FlowModel::pass_borrowed(LinkId l, WaveletRuns& runs) {
  std::uint64_t end = 0;
  WaveletRuns out;
  for (const LinkId b : link_borrowed(l)) {
    settle(b);
    end = std::max(end, links_[b.value].pass(runs, 0, 0, &out, now_, &wide_));
    runs.assign(out);
  }
  return end;
}

std::uint64_t FlowModel::fit_with_borrowed(LinkId l, std::uint64_t start, std::uint64_t ser) const {
  const std::span<const LinkId> borrowed = link_borrowed(l);
  // (traverse settled l and what it borrows)
  for (;;) {
    std::uint64_t s = links_[l.value].earliest_fit(start, ser, &wide_);
    for (const LinkId b : borrowed) s = links_[b.value].earliest_fit(s, ser, &wide_);
    if (s == start) return s;  // free on every one of them
    start = s;
  }
}

void FlowModel::use_record_pool(PagePool& pool) {
  pool_ = &pool;
  if (max_end_ == 0) {
    // Nothing reserved yet: the model's own records (never touched) are
    // unmapped rather than pooled, so that the pool's blocks are the only ones.
    links_.give_pages();
    eject_.give_pages();
  } else {
    release_records(Cycles{max_end_});
  }
}

std::size_t FlowModel::link_block_bytes(const Mesh& mesh) {
  return mesh.link_count() * sizeof(LinkState);
}

std::size_t FlowModel::ramp_block_bytes(const Mesh& mesh) {
  return mesh.core_count() * sizeof(LinkState);
}

std::vector<PageRange> FlowModel::stock_records(PagePool& pool, const Mesh& mesh, int wafers) {
  std::vector<PageRange> ranges = pool.stock(wafers, link_block_bytes(mesh));
  for (const PageRange& r : pool.stock(wafers, ramp_block_bytes(mesh))) ranges.push_back(r);
  return ranges;
}

bool FlowModel::release_records(Cycles all_ready_from) {
  if (!pool_ || kept_ || !links_.held() || max_end_ > all_ready_from.value) return false;
  settle_lines();
  // Every reservation is in the past: the wide records' links go back to
  // compact records (a pool's next owner reads only those).
  wide_.retire_all();
  pool_->give(links_.give_pages(), max_end_);
  pool_->give(eject_.give_pages(), max_end_);
  released_until_ = max_end_;
  return true;
}

void FlowModel::take_records() {
  if (!pool_) throw std::logic_error("FlowModel: records released without a pool");
  // Another model's records may come with the block: stale ones, all
  // ending by the block's tag, which this model's messages must not precede.
  PagePool::Block links = pool_->take(link_block_bytes(mesh_));
  PagePool::Block ramps = pool_->take(ramp_block_bytes(mesh_));
  released_until_ = std::max({released_until_, links.tag, ramps.tag});
  max_end_ = std::max(max_end_, released_until_);
  links_ = ZeroedArray<LinkState>(std::move(links.pages), mesh_.link_count());
  eject_ = ZeroedArray<LinkState>(std::move(ramps.pages), mesh_.core_count());
}

void FlowModel::message_before_release(std::uint64_t ready) const {
  throw std::logic_error(
      "flow model: a message ready at cycle " + std::to_string(ready) +
      " came after link records were recycled as idle until cycle " +
      std::to_string(released_until_) +
      "; the recycling bound is wrong (run with --keep-link-records to avoid it)");
}

Cycles FlowModel::link_reserved_until(LinkId l) const {
  if (!links_.held()) return Cycles{0};
  const_cast<FlowModel*>(this)->settle(l);  // changes no answer
  return Cycles{record_end(links_[l.value])};
}

std::vector<std::pair<Cycles, Cycles>> FlowModel::link_busy_intervals(LinkId l) const {
  std::vector<std::pair<Cycles, Cycles>> out;
  if (!links_.held()) return out;
  const_cast<FlowModel*>(this)->settle(l);  // changes no answer
  const LinkState& s = links_[l.value];
  if (s.wide()) {
    for (const auto& [a, b] : wide_.busy(s)) out.emplace_back(Cycles{a}, Cycles{b});
    return out;
  }
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

std::size_t FlowModel::ramp_slot_after(LinkId l) const {
  const std::size_t cores = mesh_.core_count();
  const std::size_t offset = l.value % cores;  // the source's index in its plane
  const std::size_t h = static_cast<std::size_t>(mesh_.height());
  const std::size_t w = static_cast<std::size_t>(mesh_.width());
  switch (static_cast<Direction>(l.value / cores)) {
    case Direction::south:  // vertical planes are column-major already
      return offset + 1;
    case Direction::north:
      return offset - 1;
    case Direction::east:
      return (offset % w + 1) * h + offset / w;
    default:  // west
      return (offset % w - 1) * h + offset / w;
  }
}

Timed FlowModel::eject(LinkId in, Cycles ser, const Timed& tail) {
  // Shared wavelet by wavelet: the core has the message once ser free ramp
  // cycles from its head's arrival on have passed.
  const std::uint64_t last_end = eject_[ramp_slot_after(in)].pass(
      WaveletRuns::from(tail.at.value - ser.value, ser.value), 0, 0, nullptr, now_, &wide_);
  max_end_ = std::max(max_end_, last_end);
  return tail.not_before(Cycles{last_end}, Resource::contention);
}

Timed FlowModel::send(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                      std::vector<Timed>* arrivals) {
  hold_records(ready.at.value);
  now_ = std::max(now_, ready.at.value);
  if (links.empty()) return traverse(links, bytes, ready, {}, Cycles{0}, arrivals);
  const Cycles ser = serialization(bytes);
  if (sharing_ == LinkSharing::interleave)
    return traverse_interleaved(links, bytes, ready, WaveletRuns::from(ready.at.value, ser.value),
                                {}, Cycles{0}, true, arrivals, nullptr);
  if (!arrivals)
    return eject(links.back(), ser, traverse(links, bytes, ready, {}, Cycles{0}, nullptr));
  // A line multicast: every core after the first receives its copy.
  traverse(links, bytes, ready, {}, Cycles{0}, arrivals);
  for (std::size_t k = 0; k < links.size(); ++k) {
    (*arrivals)[k + 1] = eject(links[k], ser, (*arrivals)[k + 1]);
  }
  return arrivals->back();
}

Timed FlowModel::reduce_chain(std::span<const LinkId> links, Bytes bytes,
                              std::span<const Timed> node_ready) {
  if (node_ready.size() != links.size() + 1)
    throw std::invalid_argument("reduce_chain: one ready time per node");
  hold_records(node_ready[0].at.value);
  now_ = std::max(now_, node_ready[0].at.value);
  Timed done = node_ready[0];
  if (!links.empty()) {
    const Cycles ser = serialization(bytes);
    done = sharing_ == LinkSharing::interleave
               ? traverse_interleaved(links, bytes, node_ready[0],
                                      WaveletRuns::from(node_ready[0].at.value, ser.value),
                                      node_ready, reduce_hop_overhead_, true, nullptr, nullptr)
               : eject(links.back(), ser,
                       traverse(links, bytes, node_ready[0], node_ready, reduce_hop_overhead_,
                                nullptr));
  }
  // The last node adds its own contribution as the stream arrives, like every
  // node before it.
  return later(done.plus(Resource::hops, reduce_hop_overhead_), node_ready.back());
}

Timed FlowModel::traverse(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                          std::span<const Timed> node_ready, Cycles per_hop_extra,
                          std::vector<Timed>* arrivals) {
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
  // The current link's crossing: hop_latency plus its repair detour.
  std::uint64_t cross = hop;
  // The tail's arrival at the node after the link the head is on.
  auto tail = [&] {
    Timed t = *from;
    t.at = Cycles{at + cross + ser};
    t.path.hops += Cycles{hops + cross};
    t.path.contention += Cycles{contention};
    t.path.serialization += Cycles{ser};
    return t;
  };
  for (std::size_t k = 0; k < links.size(); ++k) {
    if (k > 0) {
      at += step + (cross - hop);
      hops += step + (cross - hop);
      // A node that is not ready holds the head back (later(): ties keep the head).
      if (!node_ready.empty() && node_ready[k].at.value > at) {
        from = &node_ready[k];
        at = from->at.value;
        hops = contention = 0;
      }
    }
    cross = hop + extra_of(links[k]);
    settle(links[k]);
    if (!borrow_first_.empty())
      for (const LinkId b : link_borrowed(links[k])) settle(b);
    LinkState& link = links_[links[k].value];
    // Waiting for a gap the whole message fits in is contention (on the
    // links a detour borrows too).
    const std::uint64_t start = borrow_first_.empty() ? link.earliest_fit(at, ser, &wide_)
                                                      : fit_with_borrowed(links[k], at, ser);
    contention += start - at;
    at = start;
    link.reserve(at, ser, now_, &wide_);
    if (!borrow_first_.empty())
      for (const LinkId b : link_borrowed(links[k])) links_[b.value].reserve(at, ser, now_, &wide_);
    max_end_ = std::max(max_end_, at + ser);
    count_bytes(links[k], bytes.value);
    if (arrivals) arrivals->push_back(tail());
  }
  return tail();
}

Timed FlowModel::stream(std::span<const LinkId> links, Bytes bytes, const Timed& ready,
                        const WaveletRuns& inject, WaveletRuns* delivered,
                        std::vector<Timed>* arrivals, std::vector<WaveletRuns>* passing) {
  hold_records(ready.at.value);  // no wavelet of inject is before ready
  now_ = std::max(now_, ready.at.value);
  if (passing) passing->clear();
  if (inject.n == 0 || links.empty()) {
    if (delivered) delivered->assign(inject);
    if (arrivals) arrivals->assign(1, ready);
    return ready;
  }
  if (sharing_ == LinkSharing::interleave)
    return traverse_interleaved(links, bytes, ready, inject, {}, Cycles{0}, true, arrivals,
                                delivered, passing);
  const std::uint64_t ser = serialization(bytes).value;
  // Exclusive: one contiguous run from inject's first wavelet; a node's
  // wavelets pass from its arrival less the serialization on.
  const Timed start = ready.not_before(Cycles{inject.start[0]}, Resource::contention);
  const Timed done = send(links, bytes, start, arrivals);
  if (delivered) *delivered = WaveletRuns::from(done.at.value - ser, ser);
  if (passing)
    for (std::size_t k = 1; k <= links.size(); ++k)
      passing->push_back(WaveletRuns::from(
          arrivals ? (*arrivals)[k].at.value - ser : start.at.value + k * hop_latency_.value, ser));
  return done;
}

Timed FlowModel::traverse_interleaved(std::span<const LinkId> links, Bytes bytes,
                                      const Timed& ready, const WaveletRuns& inject,
                                      std::span<const Timed> node_ready, Cycles per_hop_extra,
                                      bool eject_last, std::vector<Timed>* arrivals,
                                      WaveletRuns* delivered, std::vector<WaveletRuns>* passing) {
  if (arrivals) {
    arrivals->clear();
    arrivals->push_back(ready);
  }
  const std::uint64_t ser = serialization(bytes).value;
  const std::uint64_t hop = hop_latency_.value;
  const std::uint64_t step = hop + per_hop_extra.value;
  // Explanation: the moment (`ready`, or a node_ready) whose uncontended
  // bound on the tail is the latest; the tail's time beyond that bound is
  // contention. `bound` is the tail's uncontended arrival at node k + 1 from it.
  const Timed* from = &ready;
  // The current link's crossing: hop_latency plus its repair detour.
  std::uint64_t cross = hop + extra_of(links[0]);
  std::uint64_t from_hops = cross;  // hop cycles from `from` to node k + 1
  WaveletRuns buffer_a, buffer_b;
  buffer_a.assign(inject);
  WaveletRuns* runs_on = &buffer_a;  // the wavelets on the current link
  WaveletRuns* next_on = &buffer_b;
  auto explain = [&](std::uint64_t tail) { return crossed(*from, from_hops, ser, tail); };
  // The core at the end of link k takes `runs` (on link k) through its ramp.
  auto receive = [&](std::size_t k, WaveletRuns* out) {
    const std::uint64_t end =
        eject_[ramp_slot_after(links[k])].pass(*runs_on, cross, 0, out, now_, &wide_);
    max_end_ = std::max(max_end_, end);
    return explain(end);
  };
  // Hints for the caches, which change no result: hop k asks for the link
  // record and byte counter kRecordAhead links ahead and for the wide block
  // kBlockAhead links ahead (whose record an earlier hop asked for). A long
  // route's hops then find them at hand instead of waiting for each in turn
  // (wide blocks lie anywhere in memory).
  constexpr std::size_t kRecordAhead = 8, kBlockAhead = 4;
  auto ask_record = [&](std::size_t j) {
    if (j >= links.size()) return;
    prefetch_line(&links_[links[j].value]);
    prefetch_line(&bytes_low_[links[j].value]);
  };
  auto ask_block = [&](std::size_t j) {
    if (j >= links.size()) return;
    if (const LinkState& l = links_[links[j].value]; l.wide()) WideRecords::prefetch(l);
  };
  for (std::size_t j = 0; j < kRecordAhead; ++j) ask_record(j);
  for (std::size_t j = 1; j < kBlockAhead; ++j) ask_block(j);
  for (std::size_t k = 0; k < links.size(); ++k) {
    ask_record(k + kRecordAhead);
    ask_block(k + kBlockAhead);
    std::uint64_t not_before = 0;
    if (k > 0) {
      // Off link k - 1 (its detour included) onto link k.
      runs_on->shift(step + (cross - hop));
      cross = hop + extra_of(links[k]);
      from_hops += step + (cross - hop);
      if (!node_ready.empty()) {
        // A node whose own contribution is later than the stream holds it.
        not_before = node_ready[k].at.value;
        if (not_before + cross > from->at.value + from_hops) {
          from = &node_ready[k];
          from_hops = cross;
        }
      }
    }
    count_bytes(links[k], bytes.value);
    settle(links[k]);
    max_end_ = std::max(
        max_end_, links_[links[k].value].pass(*runs_on, 0, not_before, next_on, now_, &wide_));
    // A detour's wavelets also take their cycles on the links it borrows.
    if (!borrow_first_.empty()) max_end_ = std::max(max_end_, pass_borrowed(links[k], *next_on));
    std::swap(runs_on, next_on);
    if (passing)
      passing->emplace_back(), passing->back().assign(*runs_on), passing->back().shift(cross);
    if (arrivals) arrivals->push_back(receive(k, nullptr));
  }
  if (arrivals) return arrivals->back();
  if (eject_last) return receive(links.size() - 1, delivered);
  if (delivered) delivered->assign(*runs_on), delivered->shift(cross);
  return explain(runs_on->end() + cross);
}

std::uint64_t FlowModel::record_end(const LinkState& s) const {
  if (s.wide()) {
    const auto busy = wide_.busy(s);
    return busy.empty() ? s.floor() : busy.back().second;
  }
  const int count = s.count();
  return count == 0 ? s.floor() : s.floor() + s.end[count - 1];
}

template <class F>
void FlowModel::for_region_records(const Rect& r, bool ramps, int part, int parts, F&& f) const {
  const auto w = static_cast<std::size_t>(r.width), ht = static_cast<std::size_t>(r.height);
  const std::size_t total = (kDirections + (ramps ? 1 : 0)) * w * ht;
  const std::size_t lo = total * static_cast<std::size_t>(part) / static_cast<std::size_t>(parts);
  const std::size_t hi =
      total * static_cast<std::size_t>(part + 1) / static_cast<std::size_t>(parts);
  std::size_t at = 0;  // where the next run starts in that order
  const auto take = [&](bool ramp, std::size_t b, std::size_t n) {
    const std::size_t from = std::max(at, lo), to = std::min(at + n, hi);
    if (from < to) f(ramp, b + (from - at), b + (to - at));
    at += n;
  };
  for (int d = 0; d < kDirections && at < hi; ++d) {
    const auto dir = static_cast<Direction>(d);
    if (dir == Direction::south || dir == Direction::north) {
      for (int x = r.x0; x < r.x0 + r.width && at < hi; ++x)
        take(false, mesh_.link(Coord{x, r.y0}, dir).value, ht);
    } else {
      for (int y = r.y0; y < r.y0 + r.height && at < hi; ++y)
        take(false, mesh_.link(Coord{r.x0, y}, dir).value, w);
    }
  }
  for (int x = r.x0; ramps && x < r.x0 + r.width && at < hi; ++x)
    take(true,
         static_cast<std::size_t>(x) * static_cast<std::size_t>(mesh_.height()) +
             static_cast<std::size_t>(r.y0),
         ht);
}

void FlowModel::add_state_after(std::uint64_t origin, std::uint64_t cutoff, StateHash& h,
                                std::vector<std::uint32_t>* live, const Rect* region) {
  const Rect r = region ? *region : Rect{0, 0, mesh_.width(), mesh_.height()};
  add_state_header(origin, r, h);
  add_state_part(origin, cutoff, r, 0, 1, h, live);
}

void FlowModel::add_state_header(std::uint64_t origin, const Rect& r, StateHash& h) {
  settle_lines();
  h.add(now_ - origin);  // wraps when now is earlier: still one value per state
  h.add(static_cast<std::uint64_t>(sharing_));
  h.add(static_cast<std::uint64_t>(r.x0) << 48 | static_cast<std::uint64_t>(r.y0) << 32 |
        static_cast<std::uint64_t>(r.width) << 16 | static_cast<std::uint64_t>(r.height));
  if (!links_.held()) h.add(~std::uint64_t{0});  // released: every record ends by the release
}

void FlowModel::add_state_part(std::uint64_t origin, std::uint64_t cutoff, const Rect& r, int part,
                               int parts, StateHash& h, std::vector<std::uint32_t>* live) const {
  if (!links_.held()) return;
  // A record's busy cycles after the cutoff, relative to the origin: what
  // it answers every message to come by. Its intervals are sorted, disjoint
  // and not touching (nor the first its floor), so clipped at the cutoff
  // they are the busy cycles' one description. A piece whose start is
  // within 2^31 cycles of the origin and whose length is below 2^32 takes
  // one word, any other two (the record's first word says which form
  // follows, so the words stay one description). Records alternate between
  // two fingerprints, which the host computes side by side.
  StateHash lanes[2];
  std::uint64_t pieces[kWideLinkIntervals + 2][2];
  // Records [begin, end) of `records`, numbered from `first`.
  const auto add_records = [&](const ZeroedArray<LinkState>& records, std::uint32_t first,
                               std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const LinkState& s = records[i];
      if (s.floor_and_count == 0 || record_end(s) <= cutoff) continue;
      if (live) live->push_back(first + static_cast<std::uint32_t>(i));
      int n = 0;
      bool packed = true;
      const auto piece = [&](std::uint64_t a, std::uint64_t b) {
        a = std::max(a, cutoff);
        if (b <= a) return;
        packed = packed && a - origin + (std::uint64_t{1} << 31) < (std::uint64_t{1} << 32) &&
                 b - a < (std::uint64_t{1} << 32);
        pieces[n][0] = a - origin, pieces[n][1] = b - a;
        ++n;
      };
      const std::uint64_t floor = s.floor();
      piece(0, floor);
      if (s.wide()) {
        for (const auto& [a, b] : wide_.busy(s)) piece(a, b);
      } else {
        for (int k = 0; k < s.count(); ++k) piece(floor + s.start[k], floor + s.end[k]);
      }
      StateHash& lane = lanes[i & 1];
      lane.add((first + i) << 12 | static_cast<std::uint64_t>(n) << 1 | (packed ? 1 : 0));
      for (int k = 0; k < n; ++k) {
        if (packed) {
          lane.add((pieces[k][0] + (std::uint64_t{1} << 31)) << 32 | pieces[k][1]);
        } else {
          lane.add(pieces[k][0]);
          lane.add(pieces[k][1]);
        }
      }
    }
  };
  for_region_records(r, true, part, parts, [&](bool ramp, std::size_t b, std::size_t e) {
    if (ramp)
      add_records(eject_, static_cast<std::uint32_t>(links_.size()), b, e);
    else
      add_records(links_, 0, b, e);
  });
  h.add(lanes[0]);
  h.add(lanes[1]);
}

void FlowModel::shift_records(std::span<const std::uint32_t> live, std::uint64_t cutoff,
                              std::uint64_t by) {
  shift_clock(cutoff, by);
  shift_some_records(live, by);
}

void FlowModel::shift_clock(std::uint64_t cutoff, std::uint64_t by) {
  if (!links_.held())
    throw std::logic_error("FlowModel: records shifted after they were given back to the pool");
  settle_lines();
  now_ += by;
  if (max_end_ > cutoff) max_end_ += by;
}

void FlowModel::shift_some_records(std::span<const std::uint32_t> live, std::uint64_t by) {
  for (const std::uint32_t r : live) {
    LinkState& s = r < links_.size() ? links_[r] : eject_[r - links_.size()];
    if (s.floor() + by > LinkState::kFloorMask)
      throw std::overflow_error("FlowModel: a shifted link record passes 2^56 cycles");
    s.floor_and_count += by;  // the intervals are offsets from the floor
  }
}

std::size_t FlowModel::count_region_records(const Rect& r, bool ramps, int part, int parts) const {
  std::size_t n = 0;
  for_region_records(r, ramps, part, parts,
                     [&](bool, std::size_t b, std::size_t e) { n += e - b; });
  return n;
}

std::size_t FlowModel::region_part_size(const Rect& r, int part, int parts) const {
  return count_region_records(r, true, part, parts);
}

void FlowModel::copy_region_part(const Rect& r, int part, int parts, RegionCopy& out) const {
  out.records.clear();
  out.wide.clear();
  if (!links_.held())
    throw std::logic_error("FlowModel: records copied after they were given back to the pool");
  // Sized once (a full wafer's part is tens of MB: no copies as it grows),
  // then filled a run of records at a time.
  out.records.reserve(region_part_size(r, part, parts));
  for_region_records(r, true, part, parts, [&](bool ramp, std::size_t b, std::size_t e) {
    const ZeroedArray<LinkState>& records = ramp ? eject_ : links_;
    const std::size_t first = out.records.size();
    out.records.insert(out.records.end(), &records[b], &records[b] + (e - b));
    for (std::size_t i = first; i < out.records.size(); ++i) {
      if (!out.records[i].wide()) continue;
      // Its copy keeps the floor and names its intervals in `wide`.
      LinkState& c = out.records[i];
      const LinkState& s = records[b + (i - first)];
      const auto busy = wide_.busy(s);
      c.start[0] = static_cast<std::uint32_t>(out.wide.size());
      c.start[1] = static_cast<std::uint32_t>(busy.size());
      for (const auto& [a, z] : busy) out.wide.push_back(static_cast<std::uint32_t>(a - s.floor()));
      for (const auto& [a, z] : busy) out.wide.push_back(static_cast<std::uint32_t>(z - s.floor()));
    }
  });
}

void FlowModel::write_region_part(const Rect& r, int part, int parts, const RegionCopy& copy,
                                  std::uint64_t by) {
  if (!links_.held())
    throw std::logic_error("FlowModel: records written after they were given back to the pool");
  std::size_t k = 0;
  for_region_records(r, true, part, parts, [&](bool ramp, std::size_t b, std::size_t e) {
    ZeroedArray<LinkState>& records = ramp ? eject_ : links_;
    for (std::size_t i = b; i < e; ++i, ++k) {
      if (k >= copy.records.size())
        throw std::logic_error("FlowModel: a region copy of another region");
      LinkState& s = records[i];
      const LinkState& c = copy.records[k];
      if (c.floor_and_count != 0 && c.floor() + by > LinkState::kFloorMask)
        throw std::overflow_error("FlowModel: a shifted link record passes 2^56 cycles");
      if (c.wide()) {
        const std::uint32_t* st = copy.wide.data() + c.start[0];
        wide_.assign(s, c.floor() + by, st, st + c.start[1], c.start[1]);
        continue;
      }
      if (s.wide()) wide_.drop(s);
      s = c;
      if (s.floor_and_count != 0) s.floor_and_count += by;
    }
  });
  if (k != copy.records.size())
    throw std::logic_error("FlowModel: a region copy of another region");
}

void FlowModel::write_clock(std::pair<std::uint64_t, std::uint64_t> clock, std::uint64_t by) {
  now_ = clock.first + by;
  max_end_ = std::max(max_end_, clock.second + by);
}

void FlowModel::byte_counts(ByteCounts& c, const Rect* region) {
  settle_lines();
  if (!c.low) c.low = std::make_unique_for_overwrite<std::uint32_t[]>(mesh_.link_count());
  if (region) {
    for_region_records(*region, false, 0, 1, [&](bool, std::size_t b, std::size_t e) {
      for (std::size_t l = b; l < e; ++l) c.low[l] = bytes_low_[l];
    });
  } else {
    for (std::size_t l = 0; l < mesh_.link_count(); ++l) c.low[l] = bytes_low_[l];
  }
  c.carries = carries_;
  c.carried = carried_bytes_;
}

void FlowModel::bytes_since(const ByteCounts& b,
                            std::vector<std::pair<std::uint32_t, std::uint64_t>>& out) {
  settle_lines();
  out.clear();
  // The whole mesh's runs are every link, in index order (Mesh::link).
  add_bytes_since(b, Rect{0, 0, mesh_.width(), mesh_.height()}, 0, 1, out);
}

void FlowModel::add_bytes_since(const ByteCounts& b, const Rect& region, int part, int parts,
                                std::vector<std::pair<std::uint32_t, std::uint64_t>>& out) const {
  const auto high = [](const std::unordered_map<std::uint32_t, std::uint64_t>& m,
                       std::uint32_t l) -> std::uint64_t {
    if (m.empty()) return 0;
    const auto it = m.find(l);
    return it == m.end() ? 0 : it->second;
  };
  // Room for every link of the part at once (pages only as they are
  // written): a layer over a whole wafer changes most of its millions.
  out.reserve(out.size() + count_region_records(region, false, part, parts));
  for_region_records(region, false, part, parts, [&](bool, std::size_t first, std::size_t last) {
    for (auto l = static_cast<std::uint32_t>(first); l < last; ++l) {
      if (bytes_low_[l] == b.low[l] && carries_.empty()) continue;
      const std::uint64_t now = (high(carries_, l) << 32) + bytes_low_[l];
      const std::uint64_t then = (high(b.carries, l) << 32) + b.low[l];
      if (now != then) out.emplace_back(l, now - then);
    }
  });
}

void FlowModel::add_bytes(std::span<const std::pair<std::uint32_t, std::uint64_t>> per_link,
                          std::uint64_t times) {
  for (const auto& [l, bytes] : per_link) count_bytes(LinkId{l}, bytes * times);
}

}  // namespace wafersim::fabric
