// What a core's work costs in cycles, and each core's busy timeline. A core
// streams its weight tile through its SIMD unit; the tile takes the larger of
// the SIMD time and the SRAM read time, plus a fixed task start-up and a fixed
// cost per vector instruction it issues.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "fabric/critical_path.hpp"
#include "fabric/mesh.hpp"
#include "fabric/state_hash.hpp"
#include "fabric/wafer_spec.hpp"

namespace wafersim::fabric {

struct CoreCost {
  Cycles cycles{0};                    // total, including the task overhead
  Cycles overhead{0};                  // part of `cycles` that is task start-up and
                                       // instruction overhead
  Resource bound = Resource::compute;  // what limits the rest: compute or sram
};

class CoreCostModel {
 public:
  explicit CoreCostModel(const WaferSpec& spec) : spec_(spec) {}

  // y = W x for a rows x cols tile of `weight_bits`-bit weights.
  CoreCost gemv_tile(std::uint64_t rows, std::uint64_t cols, int weight_bits) const;
  // Y = W X for a block of `tokens` input vectors (prefill as GEMM): the tile
  // is read from SRAM once, every weight multiplies every token. Equal to
  // gemv_tile for one token.
  CoreCost gemm_tile(std::uint64_t rows, std::uint64_t cols, std::uint64_t tokens,
                     int weight_bits) const;
  // An fp32 vector operation of `ops_per_element` operations per element.
  CoreCost vector_op(std::uint64_t elements, std::uint64_t ops_per_element) const;
  // Decode attention of `heads` query heads over `positions` cached positions
  // of one kv head (scores q.k, softmax terms, weighted sum of v), with a KV
  // cache held in `kv_bits`-bit values.
  CoreCost attention(std::uint64_t positions, std::uint64_t head_dim, std::uint64_t heads,
                     int kv_bits) const;

 private:
  // `macs` at the lanes of `bits`, or `bytes_read` at the SRAM's rate,
  // whichever is longer, plus the task's start and `instructions` vector
  // instructions' overhead.
  CoreCost streaming(std::uint64_t macs, int bits, std::uint64_t bytes_read,
                     std::uint64_t instructions) const;
  const WaferSpec& spec_;
};

// Per-core timeline: a core runs one task at a time. Busy cycles are counted
// per core (flat array indexed by core id).
class CoreTimeline {
 public:
  explicit CoreTimeline(const Mesh& mesh)
      : mesh_(mesh), free_at_(mesh.core_count(), 0), busy_(mesh.core_count(), 0) {}
  // Runs `cost` on `core` once `ready`; waiting for the core is queueing.
  Timed run(Coord core, const Timed& ready, const CoreCost& cost);
  // run() on `t` in place (t = run(core, t, cost)): a GEMV's tile loop
  // runs one task on each of a region's cores, and a Timed returned by
  // value and copied back stalls each (its 16-byte loads wait on the
  // callee's 8-byte stores).
  void run_in_place(Coord core, Timed& t, const CoreCost& cost);
  Timed run(CoreId core, const Timed& ready, const CoreCost& cost) {
    return run(mesh_.coord(core), ready, cost);
  }
  std::uint64_t busy_cycles(Coord core) const { return busy_[slot(core)]; }
  std::uint64_t busy_cycles(CoreId core) const { return busy_cycles(mesh_.coord(core)); }
  // Busy cycles of every core, by core id (row-major).
  std::vector<std::uint64_t> busy_cycles_by_core() const;
  // The timing state relative to `from` (fabric::FlowModel::add_state_after):
  // every core still busy after it, and how long for; with `live`, every
  // core busy after `cutoff` (<= from) is appended to it, and
  // shift_cores() moves those `by` cycles later.
  // With `region`, its cores only.
  void add_state_after(std::uint64_t from, std::uint64_t cutoff, StateHash& h,
                       std::vector<std::uint32_t>* live = nullptr,
                       const Rect* region = nullptr) const;
  void shift_cores(std::span<const std::uint32_t> live, std::uint64_t by);
  // A copy of `region`'s cores (when each is next free), and that copy
  // written back over them `by` cycles later (a core never used stays so):
  // fabric::FlowModel::copy_region_part's counterpart.
  void copy_region(const Rect& region, std::vector<std::uint64_t>& out) const;
  void write_region(const Rect& region, std::span<const std::uint64_t> copy, std::uint64_t by);
  // `times` times `per_slot` added to the busy cycles by slot (an order of
  // this timeline's own, as add_busy_since names them).
  void add_busy(std::span<const std::pair<std::uint32_t, std::uint64_t>> per_slot,
                std::uint64_t times);
  // The busy counters of `region`'s cores, copied into `into` by slot (the
  // other entries are left as they are), and what each of them added since
  // such a copy (cores that added nothing left out).
  void copy_busy(const Rect& region, std::vector<std::uint64_t>& into) const;
  void add_busy_since(std::span<const std::uint64_t> before, const Rect& region,
                      std::vector<std::pair<std::uint32_t, std::uint64_t>>& out) const;

 private:
  // Column-major (x * height + y), as the ramp records: a GEMV runs its
  // tiles down each column of its rectangle, so consecutive tasks touch
  // consecutive entries instead of one page apart (a 762-core-wide WSE-3 row
  // is 6 KiB of each array).
  std::size_t slot(Coord c) const {
    return static_cast<std::size_t>(c.x) * static_cast<std::size_t>(mesh_.height()) +
           static_cast<std::size_t>(c.y);
  }
  // f(begin, end) for the slots of each of `region`'s columns (all of the
  // mesh without one), in slot order.
  template <class F>
  void for_region_slots(const Rect* region, F&& f) const {
    const Rect r = region ? *region : Rect{0, 0, mesh_.width(), mesh_.height()};
    for (int x = r.x0; x < r.x0 + r.width; ++x) {
      const std::size_t b = slot(Coord{x, r.y0});
      f(b, b + static_cast<std::size_t>(r.height));
    }
  }
  const Mesh& mesh_;
  std::vector<std::uint64_t> free_at_;
  std::vector<std::uint64_t> busy_;
};

}  // namespace wafersim::fabric
