// Small, fully specified pseudo-random generators for synthetic weights.
// The standard library's distributions are implementation-defined, so the
// same seed would give different weights on different platforms; these give
// the same bits everywhere.
#pragma once

#include <cstdint>

namespace wafersim::models {

// SplitMix64 (Steele, Lea, Flood 2014; reference code by S. Vigna). Used to
// expand a seed into generator states.
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(std::uint64_t seed) : state_(seed) {}
  constexpr std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

// xoshiro256** 1.0 (Blackman and Vigna 2018, https://prng.di.unimi.it/).
class Xoshiro256StarStar {
 public:
  // State from four SplitMix64 outputs, as the authors recommend.
  explicit constexpr Xoshiro256StarStar(std::uint64_t seed) {
    SplitMix64 sm(seed);
    for (auto& word : s_) word = sm.next();
  }
  // Raw state, for checking against the reference implementation.
  constexpr Xoshiro256StarStar(std::uint64_t s0, std::uint64_t s1, std::uint64_t s2,
                               std::uint64_t s3)
      : s_{s0, s1, s2, s3} {}

  constexpr std::uint64_t next() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1): the top 24 bits scaled by 2^-24, exact in fp32.
  constexpr float uniform01() { return static_cast<float>(next() >> 40) * 0x1p-24f; }
  // Uniform in [-1, 1): 2 * uniform01() - 1, exact in fp32.
  constexpr float uniform_pm1() { return 2.0f * uniform01() - 1.0f; }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4];
};

// Seed of an independent stream for tensor `index` under `seed`: two rounds of
// SplitMix64 mixing, so neighbouring seeds and indices give unrelated streams.
constexpr std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t index) {
  SplitMix64 a(seed);
  SplitMix64 b(a.next() ^ (index * 0xd1b54a32d192ed03ull));
  return b.next();
}

}  // namespace wafersim::models
