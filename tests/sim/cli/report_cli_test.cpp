// --report on `run` and `serve`, run as a user runs them: one well-formed,
// self-contained HTML file, "wrote FILE", and an unwritable path refused
// before anything is simulated.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "support/wafersim_cli.hpp"
#include "support/xml_check.hpp"

namespace {

namespace fs = std::filesystem;
using wafersim::test_support::cli_scratch_dir;
using wafersim::test_support::run_wafersim;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void expect_self_contained(const std::string& html) {
  EXPECT_EQ(wafersim::test_support::xml_problem(html), "");
  EXPECT_TRUE(wafersim::test_support::external_references(html).empty());
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(ReportCli, RunWritesOneSelfContainedReportWithItsPlacement) {
  const fs::path d = cli_scratch_dir("report_run");
  const fs::path sc = d / "s.yaml";
  std::ofstream(sc) << "name: tiny-report\nhardware: small\nmodel: tiny-llama\nplacement:\n"
                       "  strategy: layer-rectangles\nworkload:\n  prompt_tokens: 2\n"
                       "  generate_tokens: 3\n";
  const fs::path html = d / "r.html";
  const auto o = run_wafersim("run " + sc.string() + " --timing-only --report " + html.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("wrote " + html.string()), std::string::npos) << o.err;
  const std::string text = read(html);
  expect_self_contained(text);
  EXPECT_NE(text.find("wafersim run: tiny-report"), std::string::npos);
  EXPECT_NE(text.find("<h2>Placement</h2>"), std::string::npos);
  EXPECT_NE(text.find("data:image/png;base64,"), std::string::npos);
  EXPECT_NE(text.find("layer 3 qkv"), std::string::npos);  // the model's last layer is drawn
  // One marker per position processed: 2 prompt tokens (the last one's
  // logits give the first generated token) and 2 more decode steps.
  std::size_t markers = 0;
  for (std::size_t at = text.find("<circle"); at != std::string::npos;
       at = text.find("<circle", at + 1))
    ++markers;
  EXPECT_EQ(markers, 4u);
  // With --json, stdout stays one JSON object and "wrote" goes to stderr.
  const auto j = run_wafersim("run " + sc.string() + " --timing-only --json --report " +
                              (d / "j.html").string());
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_TRUE(nlohmann::json::accept(j.out)) << j.out;
  EXPECT_NE(j.err.find("wrote " + (d / "j.html").string()), std::string::npos);
  // A folder that does not exist: refused up front, naming the path.
  const auto bad = run_wafersim("run " + sc.string() + " --timing-only --report " +
                                (d / "missing" / "r.html").string());
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find((d / "missing" / "r.html").string()), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out.find("tokens/s"), std::string::npos);  // nothing was simulated
  fs::remove_all(d);
}

TEST(ReportCli, ServeWritesCdfsSloAndQueuePerSystem) {
  const fs::path d = cli_scratch_dir("report_serve");
  const fs::path sc = d / "s.yaml";
  std::ofstream(sc) << R"(name: gpus
model: llama-3.1-8b
traffic:
  arrivals: {rate: 5/s}
  requests: 200
  prompt_tokens: 1024
  output_tokens: 128
slo: {ttft: 2 s}
compare_with: [dgx-h100, dgx-a100-40gb]
)";
  const fs::path html = d / "s.html";
  const auto o = run_wafersim("serve " + sc.string() + " --report " + html.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("wrote " + html.string()), std::string::npos) << o.err;
  const std::string text = read(html);
  expect_self_contained(text);
  for (const char* what : {"time to first token", "time between tokens", "SLO attainment",
                           "requests waiting", ">dgx-a100-40gb<"})
    EXPECT_NE(text.find(what), std::string::npos) << what;
  fs::remove_all(d);
}

}  // namespace
