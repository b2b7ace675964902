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
  Cycles compute{};        // SIMD-bound core work
  Cycles sram{};           // SRAM-read-bound core work
  Cycles hops{};           // router/link traversal latency (incl. per-hop add in reductions)
  Cycles serialization{};  // bytes / link bandwidth
  Cycles contention{};     // waiting for a link already reserved by another transfer
  Cycles io{};             // wafer edge I/O
  Cycles queueing{};       // waiting for a core still busy with other work
  Cycles total() const {
    return compute + sram + hops + serialization + contention + io + queueing;
  }
  Cycles& operator[](Resource r) { return this->*field(r); }
  Cycles operator[](Resource r) const { return this->*field(r); }
  CycleBreakdown& operator+=(const CycleBreakdown& o) {
    compute += o.compute, sram += o.sram, hops += o.hops, serialization += o.serialization;
    contention += o.contention, io += o.io, queueing += o.queueing;
    return *this;
  }
  // Field by field, modulo 2^64: a part of b may exceed a's, and adding the
  // difference back to b gives a exactly all the same.
  friend CycleBreakdown operator-(CycleBreakdown a, const CycleBreakdown& b) {
    a.compute -= b.compute, a.sram -= b.sram, a.hops -= b.hops;
    a.serialization -= b.serialization, a.contention -= b.contention, a.io -= b.io;
    a.queueing -= b.queueing;
    return a;
  }
  bool operator==(const CycleBreakdown&) const = default;

 private:
  static constexpr Cycles CycleBreakdown::*field(Resource r) {
    switch (r) {
      case Resource::compute:
        return &CycleBreakdown::compute;
      case Resource::sram:
        return &CycleBreakdown::sram;
      case Resource::hops:
        return &CycleBreakdown::hops;
      case Resource::serialization:
        return &CycleBreakdown::serialization;
      case Resource::contention:
        return &CycleBreakdown::contention;
      case Resource::io:
        return &CycleBreakdown::io;
      case Resource::queueing:
        break;
    }
    return &CycleBreakdown::queueing;
  }
};

struct Timed {
  Cycles at{0};
  CycleBreakdown path;

  // Spend `c` cycles of `r` after this moment.
  Timed plus(Resource r, Cycles c) const {
    Timed t = *this;
    t.at += c;
    t.path[r] += c;
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
