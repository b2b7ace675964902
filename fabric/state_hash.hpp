// A 128-bit fingerprint of a sequence of 64-bit words: how the engine tells
// that the fabric's timing state at one moment is, up to a shift in time, the
// state at another (sim/exec/layer_replay.hpp). Two lanes of a multiply-
// rotate mix with different constants (one multiply per word and lane: the
// fingerprint of a whole wafer is ~20 M words); two different sequences
// share a fingerprint with a chance of the order of 2^-128, which the
// replay takes as never.
#pragma once

#include <cstdint>

namespace wafersim::fabric {

class StateHash {
 public:
  void add(std::uint64_t v) {
    a_ = rotl((a_ ^ v) * 0x9e3779b97f4a7c15ull, 29);
    b_ = rotl((b_ + v) * 0xc2b2ae3d27d4eb4full, 31) ^ 0x5851f42d4c957f2dull;
    ++words_;
  }
  // Another fingerprint's words, as three words.
  void add(const StateHash& o) {
    add(o.a_);
    add(o.b_);
    add(o.words_);
  }
  bool operator==(const StateHash& o) const {
    return a_ == o.a_ && b_ == o.b_ && words_ == o.words_;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  std::uint64_t a_ = 0x243f6a8885a308d3ull;
  std::uint64_t b_ = 0x13198a2e03707344ull;
  std::uint64_t words_ = 0;
};

}  // namespace wafersim::fabric
