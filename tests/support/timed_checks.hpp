// What the exactness tests of the fabric's fast paths share: a comparison of
// two arrivals field by field (time and every resource of the critical path)
// and a deterministic stream of draws that both models replay identically.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "fabric/critical_path.hpp"

namespace wafersim::fabric::testing {

inline void expect_same(const Timed& a, const Timed& b, const std::string& where) {
  EXPECT_EQ(a.at.value, b.at.value) << where;
  for (const Resource r :
       {Resource::compute, Resource::sram, Resource::hops, Resource::serialization,
        Resource::contention, Resource::io, Resource::queueing})
    EXPECT_EQ(a.path[r].value, b.path[r].value) << where << " resource " << static_cast<int>(r);
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

}  // namespace wafersim::fabric::testing
