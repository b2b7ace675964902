// The serving study and the capacity search on GPU systems alone (no engine
// runs): the rate found meets the SLO and a rate well above it does not, the
// replicas found for a target serve it, and every request's tokens are counted;
// and the wafer calibration's estimate of its runs' work.
#include "sim/studies/serving_study.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;

Scenario gpu_study() {
  const fs::path d =
      fs::temp_directory_path() / ("wafersim_serving_study_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::ofstream(d / "s.yaml") << R"(name: gpu-capacity
model: llama-3.1-8b
traffic:
  seed: 5
  arrivals: {rate: 2/s}
  requests: 600
  prompt_tokens: {uniform: [500, 1500]}
  output_tokens: {uniform: [50, 150]}
deployment: {gpu: {max_batch: 32}}
compare_with: [{preset: dgx-h100, framework: {name: vllm}}]
slo: {ttft: 500 ms, tokens_per_s: 60}
)";
  return load_scenario(d / "s.yaml", fs::path(WAFERSIM_SOURCE_DIR) / "scenarios");
}

TEST(ServingStudy, GpuAloneCountsEveryToken) {
  const Scenario sc = gpu_study();
  const auto sessions = serving::generate_sessions(*sc.traffic);
  const auto results = serve_sessions(sc, sessions, std::nullopt, false);
  ASSERT_EQ(results.size(), 1u);
  long long asked = 0;
  for (const auto& s : sessions) asked += s.turns[0].output_tokens;
  EXPECT_EQ(results[0].tokens_generated, asked);
  EXPECT_EQ(results[0].served, 600);
  EXPECT_EQ(results[0].system, "dgx-h100");
}

TEST(ServingStudy, CapacityBracketsTheSloAndSizesTheDeployment) {
  const Scenario sc = gpu_study();
  CapacityOptions o;
  o.target_rate = 60.0;
  const auto rows = capacity_search(sc, std::nullopt, o);
  ASSERT_EQ(rows.size(), 1u);
  const CapacityRow& r = rows[0];
  ASSERT_GT(r.max_rate_per_replica, 0.0);
  EXPECT_TRUE(r.at_max.slo_met);
  // 30% above the rate found, one replica misses the SLO (the bisection's bracket
  // is far tighter than that).
  Scenario one = sc;
  auto sessions = serving::generate_sessions(*sc.traffic);
  const double base =
      (sessions.size() - 1) / (sessions.back().turns[0].at_s - sessions.front().turns[0].at_s);
  for (auto& s : sessions) s.turns[0].at_s /= 1.3 * r.max_rate_per_replica / base;
  EXPECT_FALSE(serve_sessions(one, sessions, std::nullopt, true).front().slo_met);
  ASSERT_TRUE(r.target_checked);
  EXPECT_GE(r.replicas_needed * r.max_rate_per_replica, 0.95 * o.target_rate);
  EXPECT_EQ(r.chips_needed, r.replicas_needed * r.at_max.chips);
}

// Closed-loop agents: the search is over the number of sessions one replica
// serves within the SLO; one more session than that misses it.
TEST(ServingStudy, CapacityOfClosedLoopSessionsIsASessionCount) {
  const fs::path d =
      fs::temp_directory_path() / ("wafersim_serving_closed_" + std::to_string(::getpid()));
  fs::create_directories(d);
  std::ofstream(d / "s.yaml") << R"(name: agents
model: llama-3.1-8b
traffic:
  seed: 3
  sessions: 8
  turns: 4
  prompt_tokens: 3000
  turn_prompt_tokens: 300
  output_tokens: 200
  think_time: {mean: 2 s}
  ramp: 5 s
deployment: {gpu: {max_batch: 64}}
compare_with: [dgx-h100]
slo: {ttft: 300 ms, tokens_per_s: 80}
)";
  const Scenario sc = load_scenario(d / "s.yaml", fs::path(WAFERSIM_SOURCE_DIR) / "scenarios");
  CapacityOptions o;
  o.target_rate = 100;
  const auto rows = capacity_search(sc, std::nullopt, o);
  ASSERT_EQ(rows.size(), 1u);
  const double n = rows[0].max_rate_per_replica;
  ASSERT_GE(n, 1.0);
  EXPECT_EQ(n, std::floor(n));
  EXPECT_TRUE(rows[0].at_max.slo_met);
  EXPECT_EQ(rows[0].at_max.sessions.size(), static_cast<std::size_t>(n));
  serving::TrafficSpec more = *sc.traffic;
  more.sessions = static_cast<int>(n) + 1;
  EXPECT_FALSE(
      serve_sessions(sc, serving::generate_sessions(more), std::nullopt, true).front().slo_met);
  EXPECT_TRUE(rows[0].target_checked);
  EXPECT_GE(rows[0].replicas_needed * n, 100.0);
}

// The calibration's work estimate, which its progress tells the time left
// from: it grows with the sequences and the positions cached, and it ranks
// two runs of an 8-group whole-region 8B as their measured host times do
// (docs/performance.md, s27: 180 s and 213 s, a ratio of 0.85).
TEST(ServingStudy, CalibrationWorkFollowsMeasuredRuns) {
  CalibrationPlan plan;  // 3 tokens per decode point, 64-token prompt blocks
  const long long one = point_work(plan, 1, 0, 0);
  EXPECT_EQ(point_work(plan, 48, 0, 0), 48 * one);  // each sequence its own messages
  EXPECT_GT(point_work(plan, 1, 4068, 0), one);     // attention over the cache
  // A prompt of 64 tokens is one message: dearer than a decode point's three
  // single-token messages, far cheaper than 64 of them.
  EXPECT_GT(point_work(plan, 1, 0, 64), one);
  EXPECT_LT(point_work(plan, 1, 0, 64), 64 * one / 3);
  const double decode = static_cast<double>(point_work(plan, 48, 4068, 0));
  const double prompt = static_cast<double>(point_work(plan, 1, 0, 3072));
  const double measured = 180.0 / 213.0;
  EXPECT_GT(decode / prompt, measured / 1.5);
  EXPECT_LT(decode / prompt, measured * 1.5);
}

}  // namespace
}  // namespace wafersim::sim
