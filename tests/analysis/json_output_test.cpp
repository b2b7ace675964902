#include "analysis/json_output.hpp"

#include <gtest/gtest.h>

#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

using fixtures::sample_result;

nlohmann::json parsed(const RunResult& r) {
  return nlohmann::json::parse(to_json_text(r, compute_metrics(r)));
}

TEST(Json, HasEveryRequiredKey) {
  const nlohmann::json j = parsed(sample_result(true));
  for (const char* key : {"scenario",
                          "hardware",
                          "model",
                          "precision",
                          "placement_strategy",
                          "seed",
                          "functional",
                          "mesh_width",
                          "mesh_height",
                          "cores_used",
                          "sram_bytes_used",
                          "sram_bytes_capacity",
                          "parameter_count",
                          "decode_tokens_per_s_per_user",
                          "inter_token_latency_s",
                          "ttft_s",
                          "cycles_per_token",
                          "clock_hz",
                          "total_cycles",
                          "bottleneck",
                          "critical_path_cycles",
                          "core_utilisation",
                          "sram_utilisation",
                          "busiest_link",
                          "prompt_ids",
                          "tokens",
                          "reference_tokens",
                          "tokens_match_reference",
                          "max_logit_abs_error",
                          "token_records"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  for (const char* key : {"compute", "sram", "hops", "serialization", "contention", "io"}) {
    EXPECT_TRUE(j["critical_path_cycles"].contains(key)) << key;
  }
  for (const char* key : {"x", "y", "dir", "bytes", "load"}) {
    EXPECT_TRUE(j["busiest_link"].contains(key)) << key;
  }
  ASSERT_EQ(j["token_records"].size(), 5u);
  for (const char* key : {"position", "prefill", "start_cycle", "end_cycle"}) {
    EXPECT_TRUE(j["token_records"][0].contains(key)) << key;
  }
}

TEST(Json, TimingModeLeavesOutTheFunctionalKeys) {
  const nlohmann::json j = parsed(sample_result(false));
  for (const char* key :
       {"tokens", "reference_tokens", "tokens_match_reference", "max_logit_abs_error"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j.contains("prompt_ids"));
}

TEST(Json, ValuesAreTheMetricsValues) {
  const RunResult r = sample_result(true);
  const Metrics m = compute_metrics(r);
  const nlohmann::json j = parsed(r);
  EXPECT_EQ(j["seed"].get<std::uint64_t>(), r.seed);
  EXPECT_EQ(j["decode_tokens_per_s_per_user"].get<double>(), m.decode_tokens_per_s_per_user);
  EXPECT_EQ(j["inter_token_latency_s"].get<double>(), m.inter_token_latency_s);
  EXPECT_EQ(j["ttft_s"].get<double>(), m.ttft_s);
  EXPECT_EQ(j["core_utilisation"].get<double>(), m.core_utilisation);
  EXPECT_EQ(j["sram_utilisation"].get<double>(), m.sram_utilisation);
  EXPECT_EQ(j["bottleneck"], "mesh link bandwidth");
  EXPECT_EQ(j["critical_path_cycles"]["serialization"], 700);
  EXPECT_EQ(j["busiest_link"]["dir"], "S");
  EXPECT_EQ(j["busiest_link"]["x"], 2);
  EXPECT_EQ(j["busiest_link"]["y"], 1);
  EXPECT_EQ(j["busiest_link"]["load"].get<double>(), 0.5);
  EXPECT_EQ(j["tokens_match_reference"], true);
  EXPECT_EQ(j["max_logit_abs_error"].get<double>(), r.max_logit_abs_error);
  EXPECT_EQ(j["token_records"][4]["end_cycle"], r.token_records[4].end_cycle.value);
}

TEST(Json, DoublesRoundTripExactly) {
  RunResult r = sample_result(true);
  r.clock_hz = 1.0e9 / 3.0;  // not a short decimal
  r.max_logit_abs_error = 0.1 + 0.2;
  const nlohmann::json j = parsed(r);
  EXPECT_EQ(j["clock_hz"].get<double>(), r.clock_hz);
  EXPECT_EQ(j["max_logit_abs_error"].get<double>(), r.max_logit_abs_error);
  EXPECT_EQ(j["inter_token_latency_s"].get<double>(), compute_metrics(r).inter_token_latency_s);
}

TEST(Json, IdenticalRunsGiveIdenticalText) {
  const RunResult a = sample_result(true);
  const RunResult b = sample_result(true);
  const std::string ta = to_json_text(a, compute_metrics(a));
  EXPECT_EQ(ta, to_json_text(b, compute_metrics(b)));
  EXPECT_EQ(ta.back(), '\n');
  // Keys keep their written order, not alphabetical order.
  EXPECT_LT(ta.find("\"scenario\""), ta.find("\"hardware\""));
  EXPECT_LT(ta.find("\"hardware\""), ta.find("\"bottleneck\""));
}

TEST(Json, NoTrafficGivesANullBusiestLink) {
  RunResult r = sample_result(false);
  r.link_bytes.assign(r.link_bytes.size(), 0);
  EXPECT_TRUE(parsed(r)["busiest_link"].is_null());
}

}  // namespace
}  // namespace wafersim::analysis
