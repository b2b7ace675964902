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

}  // namespace
}  // namespace wafersim::sim
