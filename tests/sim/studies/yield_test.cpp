// Wafer yield against its closed form and against itself: the share of 400
// drawn WSE-3 wafers that repair fully is within 3 binomial standard errors of
// the product of per-segment binomial probabilities; no defects, every wafer;
// the thread count changes nothing; a higher rate never repairs more wafers.
#include "sim/studies/yield.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "sim/config/scenario.hpp"

namespace wafersim::sim {
namespace {

TEST(WaferYield, MatchesTheBinomialClosedFormAndIsMonotone) {
  const fabric::WaferSpec wse3 =
      load_hardware_preset("wse3", std::filesystem::path(WAFERSIM_SOURCE_DIR) / "scenarios");
  const std::vector<double> rates = {0.0, 1e-4, 2e-4, 5e-4};
  const auto one = wafer_yield(wse3, rates, 400, 1);
  const auto two = wafer_yield(wse3, rates, 400, 2);
  ASSERT_EQ(one.size(), rates.size());
  EXPECT_EQ(one[0].repaired, 400);
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].repaired, two[i].repaired);
    const double p = one[i].expected_yield;
    const double sigma = std::sqrt(std::max(p * (1 - p), 1e-4) / 400.0);
    EXPECT_NEAR(one[i].yield(), p, 3 * sigma + 1e-9) << "rate " << rates[i];
    if (i > 0) {
      EXPECT_LE(one[i].repaired, one[i - 1].repaired);
    }
  }
}

// A density per mm^2 is the rate density x core area: the same wafers, the
// same answer; without a core area it is refused.
TEST(WaferYield, DensitiesAreRatesTimesTheCoreArea) {
  const fabric::WaferSpec wse3 =
      load_hardware_preset("wse3", std::filesystem::path(WAFERSIM_SOURCE_DIR) / "scenarios");
  ASSERT_EQ(wse3.core_area_mm2, 0.05);
  const std::vector<double> rates = {1e-4}, densities = {0.002};
  const auto p = wafer_yield(wse3, rates, 50, 2, densities);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].density_per_mm2, 0.0);
  EXPECT_EQ(p[1].density_per_mm2, 0.002);
  EXPECT_DOUBLE_EQ(p[1].rate, 1e-4);
  EXPECT_EQ(p[1].repaired, p[0].repaired);
  EXPECT_EQ(p[1].repaired_seeds, p[0].repaired_seeds);
  EXPECT_EQ(p[1].mean_dead_cores, p[0].mean_dead_cores);
  fabric::WaferSpec no_area = wse3;
  no_area.core_area_mm2 = 0.0;
  EXPECT_THROW(wafer_yield(no_area, rates, 5, 1, densities), std::invalid_argument);
}

// Clustered defects on a design without spares: the drawn yield is Stapper's
// negative binomial per area, (1 + n p / a)^-a, and above the independent
// yield at the same mean rate (clusters leave more areas clean).
TEST(WaferYield, ClusteredDefectsFollowTheNegativeBinomialModel) {
  fabric::WaferSpec s =
      load_hardware_preset("small", std::filesystem::path(WAFERSIM_SOURCE_DIR) / "scenarios");
  ASSERT_FALSE(s.redundancy.enabled());
  const std::vector<double> rates = {1e-3};
  const int wafers = 1500;
  const double independent = wafer_yield(s, rates, wafers, 2)[0].yield();
  EXPECT_NEAR(independent, std::pow(1 - 1e-3, s.core_count()), 0.04);
  s.defect_clustering = 0.5;
  s.defect_cluster_size = 16;
  const YieldPoint c = wafer_yield(s, rates, wafers, 2)[0];
  const double areas = static_cast<double>(s.core_count()) / (16 * 16);
  const double stapper = std::pow(1 + 256 * 1e-3 / 0.5, -0.5 * areas);
  EXPECT_NEAR(c.expected_yield, stapper, 1e-12);
  EXPECT_NEAR(c.yield(), stapper, 3 * std::sqrt(stapper * (1 - stapper) / wafers) + 0.005);
  EXPECT_GT(c.yield(), independent + 0.03);
  // With spares there is no closed form for clusters: said, not guessed.
  s.redundancy = fabric::Redundancy{8, 1, Cycles{1}};
  EXPECT_TRUE(std::isnan(expected_yield(s, 1e-3)));
}

}  // namespace
}  // namespace wafersim::sim
