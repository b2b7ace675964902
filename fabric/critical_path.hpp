// A moment in simulated time together with the reason it is that late: the
// cycles on the critical path that led to it, split by the resource that
// spent them. Every timing rule in the fabric combines these instead of bare
// cycle counts, so a token's latency always comes with its explanation and
// the categories add up to the latency exactly.
#pragma once

#include <cstdint>

#include "fabric/units.hpp"

namespace wafersim {

enum class Resource : std::uint8_t { compute, sram, hops, serialization, contention, io, queueing };

struct CycleBreakdown {
  std::uint64_t compute = 0;  // SIMD-bound core work
  std::uint64_t sram = 0;     // SRAM-read-bound core work
  std::uint64_t hops = 0;     // router/link traversal latency (incl. per-hop add in reductions)
  std::uint64_t serialization = 0;  // bytes / link bandwidth
  std::uint64_t contention = 0;     // waiting for a link already reserved by another transfer
  std::uint64_t io = 0;             // wafer edge I/O
  std::uint64_t queueing = 0;       // waiting for a core still busy with other work
  std::uint64_t total() const {
    return compute + sram + hops + serialization + contention + io + queueing;
  }
  std::uint64_t& operator[](Resource r) {
    switch (r) {
      case Resource::compute:
        return compute;
      case Resource::sram:
        return sram;
      case Resource::hops:
        return hops;
      case Resource::serialization:
        return serialization;
      case Resource::contention:
        return contention;
      case Resource::io:
        return io;
      case Resource::queueing:
        return queueing;
    }
    return queueing;
  }
  CycleBreakdown& operator+=(const CycleBreakdown& o) {
    compute += o.compute, sram += o.sram, hops += o.hops, serialization += o.serialization;
    contention += o.contention, io += o.io, queueing += o.queueing;
    return *this;
  }
};

struct Timed {
  Cycles at{0};
  CycleBreakdown path;

  // Spend `c` cycles of `r` after this moment.
  Timed plus(Resource r, Cycles c) const {
    Timed t = *this;
    t.at += c;
    t.path[r] += c.value;
    return t;
  }
  // Not before `resource_free`: the wait is charged to `why`.
  Timed not_before(Cycles resource_free, Resource why) const {
    return resource_free > at ? plus(why, resource_free - at) : *this;
  }
};

// The later of two moments carries its own critical path (ties keep `a`).
inline const Timed& later(const Timed& a, const Timed& b) {
  return b.at > a.at ? b : a;
}

}  // namespace wafersim
