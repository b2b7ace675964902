// The HTML reports: one self-contained, well-formed file each (every SVG
// inside parses as XML, no script, nothing fetched), carrying the figures
// they are about.
#include "analysis/html_report.hpp"

#include "analysis/svg_chart.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "support/sample_result.hpp"
#include "support/xml_check.hpp"

namespace wafersim::analysis {
namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(test_support::xml_problem(html), "");
  for (const std::string& svg : test_support::svg_elements(html))
    EXPECT_EQ(test_support::xml_problem(svg), "") << svg.substr(0, 200);
  EXPECT_TRUE(test_support::external_references(html).empty())
      << test_support::external_references(html).front();
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

TEST(HtmlReport, RunReportHasTheHeadlineFiguresPathTokensGpusAndPlacement) {
  RunResult r = fixtures::sample_result(false);
  Baselines b;
  b.wafer.system = "mini-wafer";
  b.wafer.decode_tokens_per_s_per_user = 1100;
  b.gpus.push_back({});
  b.gpus.back().system = "dgx-h100";
  b.gpus.back().decode_tokens_per_s_per_user = 150;
  r.baselines = b;
  const Metrics m = compute_metrics(r);
  PlacementPicture p;
  p.mesh_width = r.mesh_width;
  p.mesh_height = r.mesh_height;
  p.layers = 1;
  p.regions = {{"layer 0 qkv", 0, 0, {0, 0, 3, 1}, false}, {"lm_head", -1, 0, {1, 1, 1, 1}, false}};
  p.core_sram = r.core_sram_bytes;
  p.link_bytes = r.link_bytes;
  p.sram_capacity_per_core = 48 * 1024;
  const std::string html = run_report_html(r, m, &p);
  expect_self_contained(html);
  // 1.1 GHz / 1000 cycles per token = 1.1M tokens/s per user.
  EXPECT_NE(html.find(">1.1M<"), std::string::npos);
  EXPECT_NE(html.find(">" + m.bottleneck + "<"), std::string::npos);
  // The critical path: one segment per resource, the mean over the two
  // generated tokens (link bandwidth 700 / 2 = 350 cycles, 34.2% of 1023.5).
  EXPECT_NE(html.find("mesh link bandwidth: 350 cycles (34.2%)"), std::string::npos) << html;
  // Every token drawn: 3 prompt tokens and 2 generated ones.
  EXPECT_EQ(count(html, "<circle"), 5u);
  // The GPU comparison and the placement picture.
  EXPECT_NE(html.find(">dgx-h100<"), std::string::npos);
  EXPECT_NE(html.find("data:image/png;base64,"), std::string::npos);
  EXPECT_NE(html.find(">L0 qkv<"), std::string::npos);
  // Without a picture or GPUs, no such sections.
  r.baselines.reset();
  const std::string bare = run_report_html(r, m, nullptr);
  expect_self_contained(bare);
  EXPECT_EQ(bare.find("<h2>Placement"), std::string::npos);
  EXPECT_EQ(bare.find("dgx-h100"), std::string::npos);
}

TEST(HtmlReport, ServingReportHasCdfsSloAndQueuePerSystem) {
  std::vector<ServingResult> results(2);
  for (int k = 0; k < 2; ++k) {
    ServingResult& r = results[static_cast<std::size_t>(k)];
    r.system = k == 0 ? "wafer" : "dgx-h100";
    r.slo_attainment = k == 0 ? 1.0 : 0.5;
    for (int i = 0; i < 4; ++i) {
      RequestRecord q;
      q.id = i;
      q.ttft_s = 0.1 * (i + 1) * (k + 1);
      q.tbt_mean_s = 0.01 * (k + 1);
      r.requests.push_back(q);
    }
    r.requests.back().rejected = true;  // not in the CDF
    r.timeline = {{0.0, 1.0, 2.0, 0.5}, {1.0, 3.0, 2.0, 0.9}};
  }
  ServingHeader h{"chat <&> study", "llama at bf16", "100 requests", "TTFT p99 <= 500 ms", ""};
  const std::string html = serving_report_html(h, results);
  expect_self_contained(html);
  EXPECT_NE(html.find("chat &lt;&amp;&gt; study"), std::string::npos);
  // Two CDFs and two timelines with a line per system, the SLO bars.
  EXPECT_EQ(count(html, "<polyline"), 2u * 2u + 2u * 2u);
  EXPECT_NE(html.find("share of served requests meeting the SLO"), std::string::npos);
  EXPECT_NE(html.find("<title>SLO met, dgx-h100: 50</title>"), std::string::npos) << html;
}

// Two systems, one that sustains 8 requests/s and one that never meets the
// SLO: every probe a marker, the SLO's bounds drawn, the serving sections
// only for the system that has a highest sustained load.
TEST(HtmlReport, CapacityReportDrawsEveryProbeAgainstTheSlo) {
  std::vector<CapacityResult> rows(2);
  rows[0].system = "wafer";
  rows[0].max_rate_per_replica = 8.0;
  rows[0].at_max.system = "wafer";
  rows[0].at_max.requests.resize(3);
  rows[0].replicas_needed = 3;
  rows[0].chips_needed = 3;
  rows[0].power_w_needed = 69e3;
  rows[0].target_checked = true;
  for (double load : {0.01, 1.0, 8.0, 16.0, 12.0})
    rows[0].probes.push_back({load, load <= 8.0, 0, load <= 8.0 ? 1.0 : 0.4,
                              load <= 8.0 ? 0.5 : 40.0, 900.0, 100.0 * load});
  rows[1].system = "dgx-h100";
  rows[1].probes.push_back({0.01, false, 0, 0.2, 3.0, 50.0, 1.0});
  CapacityHeader h;
  h.serving = {"agents", "llama at bf16", "100 requests", "TTFT p99 <= 2000 ms", ""};
  h.target_rate = 20.0;
  h.slo_ttft_s = 2.0;
  h.slo_tokens_per_s = 100.0;
  const std::string html = capacity_report_html(h, rows);
  expect_self_contained(html);
  // Four charts over the load, each a marker per probe (6 probes).
  EXPECT_EQ(count(html, "<circle"), 4u * 6u);
  EXPECT_EQ(count(html, "SLO bound"), 2u);  // in the legends of the TTFT and speed charts
  EXPECT_NE(html.find("ms (log scale)"), std::string::npos);  // 0.5 s .. 40 s TTFT
  EXPECT_NE(html.find("chips for the target"), std::string::npos);
  EXPECT_NE(html.find("At the highest load"), std::string::npos);
  EXPECT_NE(html.find(">never<"), std::string::npos);
}

// A log y axis: a decade takes the same height wherever it is.
TEST(SvgChart, LogYAxisGivesEveryDecadeTheSameHeight) {
  XyChart c;
  c.series.push_back({"s", {1.0, 2.0, 3.0}, {1.0, 10.0, 100.0}, false, true});
  c.y_log = true;
  const std::string svg = xy_chart_svg(c);
  std::vector<double> cy;
  for (std::size_t at = svg.find("cy=\""); at != std::string::npos;
       at = svg.find("cy=\"", at + 1))
    cy.push_back(std::stod(svg.substr(at + 4)));
  ASSERT_EQ(cy.size(), 3u);
  EXPECT_GT(cy[0], cy[1]);  // higher values are drawn higher up
  EXPECT_NEAR(cy[0] - cy[1], cy[1] - cy[2], 0.11);
  // Points a log axis cannot show are left out.
  c.series[0].y[0] = 0.0;
  const std::string without = xy_chart_svg(c);
  EXPECT_EQ(count(without, "<circle"), 2u);
}

nlohmann::ordered_json hand_made_sweep() {
  nlohmann::ordered_json s;
  s["format"] = "wafersim-sweep";
  s["scenario"] = "scenarios/x.yaml";
  s["points"] = nlohmann::ordered_json::array();
  int index = 0;
  for (const char* model : {"llama-3.1-8b", "llama-3.1-70b"})
    for (int users : {1, 4, 16}) {
      nlohmann::ordered_json p;
      p["index"] = index++;
      p["overrides"] = {{"model", model}, {"users", users}};
      if (std::string(model) == "llama-3.1-70b" && users == 16) {
        p["exit_code"] = 1;
        p["error"] = "does not fit";
      } else {
        p["exit_code"] = 0;
        p["decode_tokens_per_s_per_user"] = 1000.0 / users;
        p["aggregate_tokens_per_s"] = 1000.0 * (1 + users) / users;
        p["ttft_s"] = 0.01 * users;
        p["inter_token_latency_s"] = users / 1000.0;
        p["bottleneck"] = "core compute";
      }
      s["points"].push_back(p);
    }
  return s;
}

TEST(HtmlReport, SweepReportDrawsEachFigureOverEachParameter) {
  const std::string html = sweep_report_html(hand_made_sweep());
  expect_self_contained(html);
  // Four figures over users (curves, one per model) and by model (bars, one
  // series per users value): eight charts.
  EXPECT_EQ(count(html, "<svg"), 8u);
  EXPECT_EQ(count(html, "<polyline"), 4u * 2u);
  // The 8B's curve over users 1, 4, 16 has three points, the 70B's two (16 failed).
  EXPECT_EQ(count(html, "<circle"), 4u * (3u + 2u));
  // Bars: 2 models x 3 users values, less the failed point, for each figure.
  EXPECT_EQ(count(html, "</rect>"), 4u * 5u);
  EXPECT_NE(html.find("<td>does not fit</td>"), std::string::npos);
  EXPECT_NE(html.find("users (log scale)"), std::string::npos);
}

TEST(HtmlReport, SweepReportRefusesWhatIsNotASweep) {
  EXPECT_THROW(sweep_report_html(nlohmann::ordered_json::object()), std::invalid_argument);
  nlohmann::ordered_json wrong = hand_made_sweep();
  wrong["format"] = "wafersim-serving";
  EXPECT_THROW(sweep_report_html(wrong), std::invalid_argument);
}

}  // namespace
}  // namespace wafersim::analysis
