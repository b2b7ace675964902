// Drawn defect maps (fabric/defects.hpp): the gamma sampler behind clustered
// defects against its moments, and clustered maps against the compound
// (negative-binomial) model's mean and variance; independent draws unchanged
// by the clustering code.
#include "fabric/defects.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace wafersim::fabric {
namespace {

struct Moments {
  double mean = 0.0, variance = 0.0;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= static_cast<double>(v.size() - 1);
  return m;
}

TEST(UnitGamma, HasMeanOneAndVarianceOneOverTheShape) {
  for (const double shape : {0.3, 0.5, 1.0, 2.0, 8.0}) {
    std::uint64_t state = 12345;
    std::vector<double> draws(200000);
    for (double& d : draws) {
      d = unit_gamma(shape, state);
      ASSERT_GE(d, 0.0);
    }
    const Moments m = moments(draws);
    // Standard errors: sqrt(var / n) for the mean; the variance's is wider.
    EXPECT_NEAR(m.mean, 1.0, 5.0 * std::sqrt(1.0 / shape / draws.size())) << shape;
    EXPECT_NEAR(m.variance, 1.0 / shape, 0.06 / shape) << shape;
  }
}

TEST(UnitGamma, IsTheSameForTheSameSeed) {
  std::uint64_t a = 7, b = 7;
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(unit_gamma(0.7, a), unit_gamma(0.7, b));
}

// Dead cores per wafer: mean n p; variance sum over areas of
// n_a p (1 - p (1 + 1/a)) + n_a^2 p^2 / a (the binomial's plus the areas'
// shared density), far above the binomial's n p (1 - p) when clustered.
TEST(DefectMap, ClusteredDrawsHaveTheCompoundModelsMeanAndVariance) {
  const int side = 64, area = 16;  // 16 areas of 16 x 16 cores
  const double p = 2e-3, shape = 0.5;
  const double n = side * side, n_area = area * area, areas = n / n_area;
  std::vector<double> clustered, independent;
  for (std::uint64_t seed = 0; seed < 3000; ++seed) {
    clustered.push_back(
        static_cast<double>(DefectMap(side, side, p, seed, {}, shape, area).dead_count()));
    independent.push_back(static_cast<double>(DefectMap(side, side, p, seed, {}).dead_count()));
  }
  const Moments c = moments(clustered), i = moments(independent);
  const double want_var = areas * (n_area * p * (1 - p * (1 + 1 / shape)) +
                                   n_area * n_area * p * p / shape);
  EXPECT_NEAR(c.mean, n * p, 5.0 * std::sqrt(want_var / clustered.size()));
  EXPECT_NEAR(c.variance, want_var, 0.15 * want_var);
  EXPECT_NEAR(i.mean, n * p, 5.0 * std::sqrt(n * p / independent.size()));
  EXPECT_NEAR(i.variance, n * p * (1 - p), 0.15 * n * p);
  EXPECT_GT(c.variance, 1.6 * i.variance);  // about twice, here
}

// The clustering code leaves independent maps exactly as they were drawn
// before it: one uniform per core, row-major, below the rate.
TEST(DefectMap, IndependentDrawsAreOneUniformPerCoreBelowTheRate) {
  const int w = 40, h = 30;
  const double p = 0.05;
  const DefectMap d(w, h, p, 99, {});
  std::uint64_t state = 99;
  std::size_t dead = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      const bool want = static_cast<double>(z >> 11) * 0x1.0p-53 < p;
      EXPECT_EQ(d.dead(Coord{x, y}), want) << x << "," << y;
      dead += want;
    }
  EXPECT_EQ(d.dead_count(), dead);
}

}  // namespace
}  // namespace wafersim::fabric
