#include "analysis/metrics.hpp"

#include <stdexcept>

#include <gtest/gtest.h>

#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

using fixtures::sample_result;

TEST(Metrics, TokensPerSecondIsClockOverCyclesPerToken) {
  const RunResult r = sample_result(false);
  const Metrics m = compute_metrics(r);
  EXPECT_EQ(m.decode_tokens_per_s_per_user, 1.1e9 / 1000.0);
  EXPECT_EQ(m.decode_tokens_per_s_per_user, 1.1e6);
  EXPECT_EQ(m.inter_token_latency_s, 1000.0 / 1.1e9);
  EXPECT_EQ(m.cycles_per_token, Cycles{1000});
  EXPECT_EQ(m.ttft_s, static_cast<double>(r.ttft_cycles.value) / 1.1e9);
  EXPECT_EQ(m.total_time_s, 10000.0 / 1.1e9);
}

TEST(Metrics, NoDecodeStepsGiveZeroRateNotInfinity) {
  RunResult r = sample_result(false);
  r.decode_cycles_per_token = Cycles{0};
  const Metrics m = compute_metrics(r);
  EXPECT_EQ(m.decode_tokens_per_s_per_user, 0.0);
  EXPECT_EQ(m.inter_token_latency_s, 0.0);
  EXPECT_EQ(m.cycles_per_token, Cycles{0});
}

TEST(Metrics, UtilisationCountsOnlyCoresHoldingSram) {
  const Metrics m = compute_metrics(sample_result(false));
  EXPECT_EQ(m.cores_total, 12u);
  EXPECT_EQ(m.cores_with_sram, 4u);
  // (5000 + 2500 + 1000 + 3500) / (4 cores * 10,000 cycles); core (3,2) has no SRAM.
  EXPECT_DOUBLE_EQ(m.core_utilisation, 12000.0 / 40000.0);
  EXPECT_DOUBLE_EQ(m.sram_utilisation, 10000.0 / (12.0 * 48 * 1024));
  EXPECT_EQ(m.max_core_sram_bytes, Bytes{4000});
  EXPECT_EQ(m.sram_bytes_per_core_capacity, Bytes{48 * 1024});
}

TEST(Metrics, BusiestLinkFoundWithItsLocationAndLoad) {
  const Metrics m = compute_metrics(sample_result(false));
  ASSERT_TRUE(m.busiest_link.has_value());
  EXPECT_EQ(m.busiest_link->x, 2);
  EXPECT_EQ(m.busiest_link->y, 1);
  EXPECT_EQ(direction_name(m.busiest_link->dir), "S");
  EXPECT_EQ(m.busiest_link->bytes, Bytes{20000});
  EXPECT_DOUBLE_EQ(m.busiest_link->load, 0.5);  // 20,000 / (10,000 cycles * 4 B)
  EXPECT_EQ(m.total_link_bytes, Bytes{800 + 1200 + 20000 + 7});
}

TEST(Metrics, BusiestLinkTieGoesToTheFirstInMeshOrder) {
  RunResult r = sample_result(false);
  r.link_bytes[(1 * 4 + 2) * 4 + 2] = 0;
  r.link_bytes[(0 * 4 + 3) * 4 + 1] = 5000;  // (3,0) W
  r.link_bytes[(2 * 4 + 0) * 4 + 3] = 5000;  // (0,2) N
  const Metrics m = compute_metrics(r);
  ASSERT_TRUE(m.busiest_link.has_value());
  EXPECT_EQ(m.busiest_link->x, 3);
  EXPECT_EQ(m.busiest_link->y, 0);
  EXPECT_EQ(direction_name(m.busiest_link->dir), "W");
}

TEST(Metrics, NoTrafficMeansNoBusiestLink) {
  RunResult r = sample_result(false);
  r.link_bytes.assign(r.link_bytes.size(), 0);
  const Metrics m = compute_metrics(r);
  EXPECT_FALSE(m.busiest_link.has_value());
  EXPECT_EQ(m.total_link_bytes, Bytes{0});
}

TEST(Metrics, LinkExactlyFullIsAccepted) {
  RunResult r = sample_result(false);
  r.link_bytes[(1 * 4 + 2) * 4 + 2] = 40000;  // 10,000 cycles * 4 B
  const Metrics m = compute_metrics(r);
  ASSERT_TRUE(m.busiest_link.has_value());
  EXPECT_EQ(m.busiest_link->load, 1.0);
}

TEST(Metrics, LinkAboveItsBandwidthIsAnEngineBug) {
  RunResult r = sample_result(false);
  r.link_bytes[(1 * 4 + 2) * 4 + 2] = 40001;  // one byte more than the link can carry
  EXPECT_THROW(compute_metrics(r), std::logic_error);
  r.link_bytes_per_cycle = Bytes{0};  // bytes on a link with no bandwidth
  r.link_bytes[(1 * 4 + 2) * 4 + 2] = 1;
  EXPECT_THROW(compute_metrics(r), std::logic_error);
}

TEST(Metrics, CoreBusierThanTheRunIsAnEngineBug) {
  RunResult r = sample_result(false);
  r.core_busy_cycles[0] = r.total_cycles.value + 1;
  EXPECT_THROW(compute_metrics(r), std::logic_error);
}

TEST(Metrics, ArraysNotShapedLikeTheMeshAreRejected) {
  RunResult r = sample_result(false);
  r.core_sram_bytes.pop_back();
  EXPECT_THROW(compute_metrics(r), std::logic_error);
  r = sample_result(false);
  r.link_bytes.push_back(0);
  EXPECT_THROW(compute_metrics(r), std::logic_error);
}

TEST(Metrics, EmptyArraysMeanNothingRecorded) {
  RunResult r = sample_result(false);
  r.core_busy_cycles.clear();
  r.core_sram_bytes.clear();
  r.link_bytes.clear();
  const Metrics m = compute_metrics(r);
  EXPECT_EQ(m.core_utilisation, 0.0);
  EXPECT_EQ(m.cores_with_sram, 0u);
  EXPECT_FALSE(m.busiest_link.has_value());
}

TEST(Metrics, BottleneckIsTheLargestDecodeCategory) {
  const Metrics m = compute_metrics(sample_result(false));
  EXPECT_EQ(m.critical_path_basis, "decode");
  EXPECT_EQ(m.critical_path_tokens, 2u);
  // Decode tokens: serialization 2 * 350 beats compute 2 * 300; the prompt's
  // larger compute must not count.
  EXPECT_EQ(m.critical_path.compute, Cycles{600});
  EXPECT_EQ(m.critical_path.serialization, Cycles{700});
  EXPECT_EQ(m.critical_path.io, Cycles{27});
  EXPECT_EQ(m.bottleneck, "mesh link bandwidth");
  EXPECT_DOUBLE_EQ(m.critical_path_share[3], 700.0 / 2047.0);
}

TEST(Metrics, EveryCategoryMapsToItsResource) {
  const char* expected[] = {"core compute",        "SRAM bandwidth",       "mesh hop latency",
                            "mesh link bandwidth", "mesh link contention", "wafer I/O",
                            "core queueing"};
  static_assert(std::size(expected) == kPathCategoryCount);
  for (std::size_t i = 0; i < kPathCategoryCount; ++i) {
    RunResult r = sample_result(false);
    for (TokenRecord& t : r.token_records) {
      for (Resource c : kPathCategories) t.critical_path[c] = Cycles{1};
      if (!t.prefill) t.critical_path[kPathCategories[i]] = Cycles{50};
    }
    const Metrics m = compute_metrics(r);
    EXPECT_EQ(m.bottleneck, expected[i]) << "category " << category_key(kPathCategories[i]);
    EXPECT_EQ(resource_name(kPathCategories[i]), expected[i]);
    EXPECT_EQ(m.critical_path_share[i], 100.0 / (100.0 + 12.0));
  }
}

TEST(Metrics, SharesAddUpToOne) {
  const Metrics m = compute_metrics(sample_result(false));
  double sum = 0.0;
  for (double s : m.critical_path_share) sum += s;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(Metrics, WithoutDecodeTokensThePromptDecides) {
  RunResult r = sample_result(false);
  std::erase_if(r.token_records, [](const TokenRecord& t) { return !t.prefill; });
  const Metrics m = compute_metrics(r);
  EXPECT_EQ(m.critical_path_basis, "prefill");
  EXPECT_EQ(m.critical_path_tokens, 3u);
  EXPECT_EQ(m.critical_path.compute, Cycles{1800});
  EXPECT_EQ(m.bottleneck, "core compute");
}

TEST(Metrics, NoTokensNoBottleneck) {
  RunResult r = sample_result(false);
  r.token_records.clear();
  const Metrics m = compute_metrics(r);
  EXPECT_EQ(m.critical_path_basis, "none");
  EXPECT_EQ(m.bottleneck, "none");
  EXPECT_EQ(m.critical_path_tokens, 0u);
}

TEST(Metrics, TokensMatchReferenceOnlyWhenFunctionalAndEqual) {
  EXPECT_TRUE(compute_metrics(sample_result(true)).tokens_match_reference);
  EXPECT_FALSE(compute_metrics(sample_result(false)).tokens_match_reference);
  RunResult r = sample_result(true);
  r.tokens[1] = 7;
  EXPECT_FALSE(compute_metrics(r).tokens_match_reference);
}

}  // namespace
}  // namespace wafersim::analysis
