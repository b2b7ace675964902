// The trace recorder's cap and the trace-event writer, on a hand-built trace
// whose every time is easy to convert by hand (no simulation).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/run_trace.hpp"
#include "analysis/trace_output.hpp"
#include "support/sample_result.hpp"

namespace {

using namespace wafersim;
using namespace wafersim::analysis;
using nlohmann::json;

// Two stages on one wafer; one message through both: stage 0 from cycle
// 1,000 to 3,200 (two phases), stage 1 from 3,200 to 4,300 (one phase).
RunTrace two_stage_trace(std::size_t cap = RunTrace::kDefaultMaxRecords) {
  RunTrace t(cap);
  t.wafers.push_back({"wafer 0", 5000, 48000});
  t.stages.push_back({"layer 0", 0});
  t.stages.push_back({"head", 0});
  TracePass a;
  a.stage = 0, a.message = 0, a.user = 0, a.position = 7;
  a.enter = Cycles{1000}, a.leave = Cycles{3200}, a.wafer_link_bytes = 640;
  t.add_pass(a, {{t.label("enter layer 0"), Cycles{1000}, Cycles{1200}, 128},
                 {t.label("layer 0 qkv gemv"), Cycles{1200}, Cycles{3200}, 512}});
  TracePass b = a;
  b.stage = 1, b.enter = Cycles{3200}, b.leave = Cycles{4300}, b.wafer_link_bytes = 1740;
  t.add_pass(b, {{t.label("argmax"), Cycles{3200}, Cycles{4300}, 1100}});
  return t;
}

std::vector<json> of_phase(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

TEST(TraceOutput, SlicesFlowsAndCountersInMicrosecondsAtTheClock) {
  RunResult r = fixtures::sample_result(false);
  r.clock_hz = 1e9;  // one cycle = 1 ns = 0.001 us
  r.token_records.clear();
  const json trace = json::parse(trace_to_json_text(two_stage_trace(), r));
  const std::vector<json> x = of_phase(trace, "X");
  ASSERT_EQ(x.size(), 5u);  // pass, 2 phases, pass, 1 phase
  EXPECT_EQ(x[0]["name"], "user 0 pos 7");
  EXPECT_DOUBLE_EQ(x[0]["ts"], 1.0);
  EXPECT_DOUBLE_EQ(x[0]["dur"], 2.2);
  EXPECT_EQ(x[2]["name"], "layer 0 qkv gemv");
  EXPECT_DOUBLE_EQ(x[2]["ts"], 1.2);
  EXPECT_EQ(x[2]["args"]["link_bytes"], 512);
  EXPECT_EQ(x[2]["args"]["cycles"], 2000);
  EXPECT_EQ(x[3]["tid"], x[0]["tid"].get<int>() + 1);
  // The message's flow: from the middle of the first stage's last phase to
  // the middle of the second's first (inside them, clear of their edges).
  const std::vector<json> s = of_phase(trace, "s"), f = of_phase(trace, "f");
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(s[0]["id"], f[0]["id"]);
  EXPECT_DOUBLE_EQ(s[0]["ts"], 2.2);
  EXPECT_DOUBLE_EQ(f[0]["ts"], 3.75);
  EXPECT_EQ(f[0]["bp"], "e");
  // Link load: 640 B over cycles 0..3,200, then 1,100 B over 3,200..4,300.
  std::vector<double> load;
  for (const json& c : of_phase(trace, "C"))
    if (c["name"] == "link load") load.push_back(c["args"]["bytes_per_cycle"]);
  ASSERT_EQ(load.size(), 2u);
  EXPECT_DOUBLE_EQ(load[0], 0.2);
  EXPECT_DOUBLE_EQ(load[1], 1.0);
  EXPECT_EQ(trace["otherData"]["passes"], 2);
  EXPECT_EQ(trace["otherData"]["truncated"], false);
}

TEST(TraceOutput, TheCapKeepsTheBeginningAndSaysWhatItDropped) {
  // Room for the first pass and its two phases, not for the second pass.
  const RunTrace t = two_stage_trace(4);
  EXPECT_EQ(t.passes.size(), 1u);
  EXPECT_EQ(t.phases.size(), 2u);
  EXPECT_TRUE(t.truncated());
  EXPECT_EQ(t.dropped_passes(), 1u);
  EXPECT_EQ(t.dropped_phases(), 1u);
  RunResult r = fixtures::sample_result(false);
  const json trace = json::parse(trace_to_json_text(t, r));
  EXPECT_EQ(trace["otherData"]["truncated"], true);
  EXPECT_EQ(trace["otherData"]["dropped_passes"], 1);
  EXPECT_EQ(trace["otherData"]["max_records"], 4);
  // No flow leads to the pass that was dropped.
  EXPECT_TRUE(of_phase(trace, "s").empty());
  EXPECT_TRUE(of_phase(trace, "f").empty());
}

TEST(TraceOutput, AfterOneDroppedPassEveryLaterOneIsDroppedToo) {
  RunTrace t(3);
  t.stages.push_back({"layer 0", 0});
  TracePass p;
  t.add_pass(p, std::vector<TracePhase>(5));  // too big: dropped
  t.add_pass(p, {});                          // would fit, but would leave a hole
  EXPECT_TRUE(t.passes.empty());
  EXPECT_EQ(t.dropped_passes(), 2u);
}

}  // namespace
