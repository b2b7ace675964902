#include "fabric/core_cost.hpp"

#include <algorithm>
#include <stdexcept>

namespace wafersim::fabric {

CoreCost CoreCostModel::streaming(std::uint64_t macs, int bits, std::uint64_t bytes_read,
                                  std::uint64_t instructions) const {
  const std::uint64_t simd = ceil_div(macs, static_cast<std::uint64_t>(spec_.simd_lanes(bits)));
  const std::uint64_t sram = ceil_div(bytes_read, spec_.sram_read_bytes_per_cycle.value);
  CoreCost c;
  c.overhead = spec_.task_overhead + Cycles{instructions * spec_.instruction_overhead.value};
  c.bound = sram > simd ? Resource::sram : Resource::compute;
  c.cycles = Cycles{std::max(simd, sram)} + c.overhead;
  return c;
}

CoreCost CoreCostModel::gemv_tile(std::uint64_t rows, std::uint64_t cols, int weight_bits) const {
  return gemm_tile(rows, cols, 1, weight_bits);
}

CoreCost CoreCostModel::gemm_tile(std::uint64_t rows, std::uint64_t cols, std::uint64_t tokens,
                                  int weight_bits) const {
  // Per token, one instruction per input element: y += w(:, j) x_j over the
  // tile's rows (the SDK's GEMV and WaferLLM's kernel alike).
  const std::uint64_t macs = rows * cols;
  return streaming(macs * tokens, weight_bits,
                   ceil_div(macs * static_cast<std::uint64_t>(weight_bits), 8), cols * tokens);
}

CoreCost CoreCostModel::vector_op(std::uint64_t elements, std::uint64_t ops_per_element) const {
  // One instruction over the vector per operation.
  return streaming(elements * ops_per_element, 32, elements * 4, ops_per_element);
}

CoreCost CoreCostModel::attention(std::uint64_t positions, std::uint64_t head_dim,
                                  std::uint64_t heads, int kv_bits) const {
  // Per head: q.k over every position, then the weighted sum of v: 2 MACs per
  // (position, dim); plus ~4 fp32 ops per position for max/exp/sum. The cache
  // (K and V) is read once per head group. Instructions per head: one per
  // query element over the positions' keys, one per position over its
  // values, and the 4 softmax operations.
  const std::uint64_t macs = heads * positions * (2 * head_dim + 4);
  const std::uint64_t bytes =
      ceil_div(2 * positions * head_dim * static_cast<std::uint64_t>(kv_bits), 8);
  return streaming(macs, kv_bits, bytes, heads * (head_dim + positions + 4));
}

Timed CoreTimeline::run(Coord core, const Timed& ready, const CoreCost& cost) {
  Timed t = ready;
  run_in_place(core, t, cost);
  return t;
}

void CoreTimeline::run_in_place(Coord core, Timed& t, const CoreCost& cost) {
  const std::size_t i = slot(core);
  // ready.not_before(free, queueing).plus(compute, overhead).plus(bound,
  // cycles - overhead), the same sums written out: adding to a field chosen
  // at run time through a copy of the Timed cost a store-forwarding stall on
  // every task (a whole-region GEMV runs one on each of ~780K cores).
  const std::uint64_t free = free_at_[i];
  if (free > t.at.value) {
    t.path.queueing += Cycles{free - t.at.value};
    t.at = Cycles{free};
  }
  const Cycles rest = cost.cycles - cost.overhead;
  t.at += cost.overhead;
  t.path.compute += cost.overhead;
  t.at += rest;
  switch (cost.bound) {
    case Resource::compute:
      t.path.compute += rest;
      break;
    case Resource::sram:
      t.path.sram += rest;
      break;
    default:
      t.path[cost.bound] += rest;
      break;
  }
  free_at_[i] = t.at.value;
  busy_[i] += cost.cycles.value;
}

std::vector<std::uint64_t> CoreTimeline::busy_cycles_by_core() const {
  std::vector<std::uint64_t> out(busy_.size());
  for (int y = 0; y < mesh_.height(); ++y)
    for (int x = 0; x < mesh_.width(); ++x)
      out[mesh_.id(Coord{x, y}).value] = busy_[slot(Coord{x, y})];
  return out;
}

void CoreTimeline::add_state_after(std::uint64_t from, std::uint64_t cutoff, StateHash& h,
                                   std::vector<std::uint32_t>* live, const Rect* region) const {
  for_region_slots(region, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      if (free_at_[i] <= cutoff) continue;
      if (live) live->push_back(static_cast<std::uint32_t>(i));
      if (free_at_[i] > from) h.add(i), h.add(free_at_[i] - from);
    }
  });
  h.add(free_at_.size());
}

void CoreTimeline::shift_cores(std::span<const std::uint32_t> live, std::uint64_t by) {
  for (const std::uint32_t i : live) free_at_[i] += by;
}

void CoreTimeline::copy_region(const Rect& r, std::vector<std::uint64_t>& out) const {
  out.clear();
  out.reserve(static_cast<std::size_t>(r.width) * static_cast<std::size_t>(r.height));
  for_region_slots(&r, [&](std::size_t b, std::size_t e) {
    out.insert(out.end(), free_at_.begin() + static_cast<std::ptrdiff_t>(b),
               free_at_.begin() + static_cast<std::ptrdiff_t>(e));
  });
}

void CoreTimeline::write_region(const Rect& r, std::span<const std::uint64_t> copy,
                                std::uint64_t by) {
  std::size_t k = 0;
  for_region_slots(&r, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i, ++k) {
      if (k >= copy.size()) throw std::logic_error("CoreTimeline: a copy of another region");
      free_at_[i] = copy[k] == 0 ? 0 : copy[k] + by;
    }
  });
  if (k != copy.size()) throw std::logic_error("CoreTimeline: a copy of another region");
}

void CoreTimeline::add_busy(std::span<const std::pair<std::uint32_t, std::uint64_t>> per_slot,
                            std::uint64_t times) {
  for (const auto& [i, cycles] : per_slot) busy_[i] += cycles * times;
}

void CoreTimeline::copy_busy(const Rect& r, std::vector<std::uint64_t>& into) const {
  into.resize(busy_.size());
  for_region_slots(&r, [&](std::size_t b, std::size_t e) {
    std::copy(busy_.begin() + static_cast<std::ptrdiff_t>(b),
              busy_.begin() + static_cast<std::ptrdiff_t>(e),
              into.begin() + static_cast<std::ptrdiff_t>(b));
  });
}

void CoreTimeline::add_busy_since(std::span<const std::uint64_t> before, const Rect& r,
                                  std::vector<std::pair<std::uint32_t, std::uint64_t>>& out) const {
  out.reserve(out.size() + static_cast<std::size_t>(r.width) * static_cast<std::size_t>(r.height));
  for_region_slots(&r, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i)
      if (busy_[i] != before[i])
        out.emplace_back(static_cast<std::uint32_t>(i), busy_[i] - before[i]);
  });
}

}  // namespace wafersim::fabric
