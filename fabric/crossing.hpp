// A message's arrival explained: it left `from`, crossed `hops` cycles of
// links and `serialization` cycles of its own wavelets, and its tail came out
// at `tail`; whatever the tail took beyond that bound it waited behind other
// traffic (contention). The flow model's traversals (FlowModel) and the line
// reductions' own hop loop (LineReductions) explain their arrivals this way.
#pragma once

#include <cstdint>

#include "fabric/critical_path.hpp"

namespace wafersim::fabric {

// Written into `out` field by field: a copy of `from` added to in place cost
// a store-forwarding stall per core where every core of a line is explained.
inline void crossed(const Timed& from, std::uint64_t hops, std::uint64_t serialization,
                    std::uint64_t tail, Timed& out) {
  const std::uint64_t bound = from.at.value + hops + serialization;
  const std::uint64_t wait = tail > bound ? tail - bound : 0;
  out.at = Cycles{bound + wait};
  out.path.compute = from.path.compute;
  out.path.sram = from.path.sram;
  out.path.hops = from.path.hops + Cycles{hops};
  out.path.serialization = from.path.serialization + Cycles{serialization};
  out.path.contention = from.path.contention + Cycles{wait};
  out.path.io = from.path.io;
  out.path.queueing = from.path.queueing;
}

inline Timed crossed(const Timed& from, std::uint64_t hops, std::uint64_t serialization,
                     std::uint64_t tail) {
  Timed t;
  crossed(from, hops, serialization, tail, t);
  return t;
}

}  // namespace wafersim::fabric
