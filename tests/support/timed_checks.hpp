// What the exactness tests of the fabric's fast paths share: a comparison of
// two arrivals field by field (time and every resource of the critical path)
// and of two models' link records,
// a deterministic stream of draws that both models replay identically, and
// the random traffic drawn from it that crosses the fast paths' lines, and
// the shape of a GEMV's multicast lines and tile rows.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fabric/collectives.hpp"
#include "fabric/critical_path.hpp"
#include "fabric/link_timing.hpp"
#include "fabric/mesh.hpp"

namespace wafersim::fabric::testing {

// A GEMV's multicast lines: `lines` parallel lines of `length` cores each
// (the tile rows P), the first from `first` along `along`, each next one a
// core further `across`.
struct GemvShape {
  Direction along;   // the multicasts' direction
  Direction across;  // from one line to the next
  Coord first;
  int length;  // cores per multicast line (P)
  int lines;   // Q
};

// The line a row of cores (core k of every multicast line) is reduced along,
// as a GEMV reduces its tile row: from line 0's core k across the lines.
inline Line row_line(const GemvShape& g, int k) {
  const Coord s = Mesh::step(Coord{0, 0}, g.along);
  return Line{Coord{g.first.x + s.x * k, g.first.y + s.y * k}, g.across, g.lines};
}

inline void expect_same(const Timed& a, const Timed& b, const std::string& where) {
  EXPECT_EQ(a.at.value, b.at.value) << where;
  for (const Resource r :
       {Resource::compute, Resource::sram, Resource::hops, Resource::serialization,
        Resource::contention, Resource::io, Resource::queueing})
    EXPECT_EQ(a.path[r].value, b.path[r].value) << where << " resource " << static_cast<int>(r);
}

// Every link's record of two models (bytes, floor, busy intervals) and their
// totals are the same.
inline void expect_same_records(const Mesh& mesh, const FlowModel& a, const FlowModel& b,
                                const std::string& where) {
  for (std::uint32_t l = 0; l < mesh.link_count(); ++l) {
    ASSERT_EQ(b.link_bytes(LinkId{l}), a.link_bytes(LinkId{l})) << where << " link " << l;
    ASSERT_EQ(b.link_floor(LinkId{l}), a.link_floor(LinkId{l})) << where << " link " << l;
    ASSERT_EQ(b.link_busy_intervals(LinkId{l}), a.link_busy_intervals(LinkId{l}))
        << where << " link " << l;
  }
  EXPECT_EQ(b.reserved_until(), a.reserved_until()) << where;
  EXPECT_EQ(b.carried_bytes(), a.carried_bytes()) << where;
}

// A deterministic stream of numbers in [0, n) (a linear congruential
// generator; the same on both models).
struct Draws {
  std::uint64_t state;
  std::uint64_t operator()(std::uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 17) % n;
  }
};

// Which of random_traffic's messages are line multicasts (every core's
// arrival seen): none (one_in 0), or about one in `one_in`, along a column
// (vertical) or a row.
struct Multicasts {
  int one_in = 0;
  bool vertical = true;
};

// `messages` messages of 1-6 wavelets from cycle `from` on, now and then a few
// cycles later, between random cores: unicasts along XY routes and, per
// `multicasts`, line multicasts; every arrival is appended to `seen`. Sent on
// two models with the same seed, they crowd the links' records ahead of and
// behind a fast path's messages, some past their four compact intervals.
inline void random_traffic(const Mesh& mesh, FlowModel& flow, std::uint64_t seed,
                           std::uint64_t from, int messages, std::vector<Timed>& seen,
                           Multicasts multicasts = {}) {
  Draws next{seed};
  std::vector<LinkId> route;
  std::vector<Timed> arrivals;
  std::uint64_t now = from;
  for (int m = 0; m < messages; ++m) {
    if (next(8) == 0) now += 1 + next(3);
    const Coord src{static_cast<int>(next(static_cast<std::uint64_t>(mesh.width()))),
                    static_cast<int>(next(static_cast<std::uint64_t>(mesh.height())))};
    const Coord dst{static_cast<int>(next(static_cast<std::uint64_t>(mesh.width()))),
                    static_cast<int>(next(static_cast<std::uint64_t>(mesh.height())))};
    const Bytes bytes{4 * (1 + next(6))};
    const int along = multicasts.vertical ? dst.y - src.y : dst.x - src.x;
    route.clear();
    if (multicasts.one_in > 0 && next(static_cast<std::uint64_t>(multicasts.one_in)) == 0 &&
        along != 0) {
      const Direction d = multicasts.vertical ? (along > 0 ? Direction::south : Direction::north)
                                              : (along > 0 ? Direction::east : Direction::west);
      mesh.straight_route(src, d, std::abs(along), route);
      flow.send(route, bytes, Timed{Cycles{now}, {}}, &arrivals);
      seen.insert(seen.end(), arrivals.begin(), arrivals.end());
    } else if (src.x != dst.x || src.y != dst.y) {
      mesh.xy_route(src, dst, route);
      seen.push_back(flow.send(route, bytes, Timed{Cycles{now}, {}}));
    }
  }
}

}  // namespace wafersim::fabric::testing
