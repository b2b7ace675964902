// The terminal report is for people: these tests check that it says the right
// things, not how it lays them out (never golden-test log text).
#include "analysis/report.hpp"

#include <sstream>

#include <gtest/gtest.h>

#include "support/sample_result.hpp"

namespace wafersim::analysis {
namespace {

using fixtures::sample_result;

std::string report_of(const RunResult& r) {
  std::ostringstream out;
  write_report(out, r, compute_metrics(r));
  return out.str();
}

TEST(Report, NamesTheRunAndItsFigures) {
  const std::string text = report_of(sample_result(false));
  for (const char* s : {"tiny-decode", "mini-wafer", "tiny-llama", "bf16", "row-chain", "Fit",
                        "Performance", "Utilisation", "1,100,000.0 tokens/s per user",
                        "909 ns",  // inter-token latency: 1000 cycles at 1.1 GHz
                        "1.10 GHz", "1.23 M", "(2, 1) S", "load 50.0%", "30.0%",
                        "Bottleneck: mesh link bandwidth"}) {
    EXPECT_NE(text.find(s), std::string::npos) << "missing '" << s << "' in\n" << text;
  }
  EXPECT_EQ(text.find("tokens match reference"), std::string::npos);
}

TEST(Report, FunctionalRunShowsTheTokenCheck) {
  const std::string text = report_of(sample_result(true));
  EXPECT_NE(text.find("tokens match reference: yes"), std::string::npos) << text;
  EXPECT_NE(text.find("[9, 8]"), std::string::npos) << text;
  RunResult r = sample_result(true);
  r.tokens[0] = 1;
  EXPECT_NE(report_of(r).find("tokens match reference: no"), std::string::npos);
}

TEST(Report, SurvivesAnEmptyResult) {
  const std::string text = report_of(RunResult{});
  EXPECT_NE(text.find("Bottleneck: none"), std::string::npos) << text;
}

TEST(Units, HumanFriendly) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(48 * 1024), "48.0 KiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(format_seconds(81.25e-6), "81.2 \u00b5s");
  EXPECT_EQ(format_seconds(1.5e-3), "1.50 ms");
  EXPECT_EQ(format_seconds(0.0), "0 s");
  EXPECT_EQ(format_count(950), "950");
  EXPECT_EQ(format_count(8'030'000'000ull), "8.03 B");
  EXPECT_EQ(format_count(70'600'000ull), "70.6 M");
  EXPECT_EQ(format_hz(1.1e9), "1.10 GHz");
  EXPECT_EQ(format_grouped(1234567), "1,234,567");
  EXPECT_EQ(format_grouped(999), "999");
  EXPECT_EQ(format_percent(0.123), "12.3%");
}

}  // namespace
}  // namespace wafersim::analysis
