// The scenario's traffic: section: each kind read, the round trip through the
// resolved scenario, the rate unit, and errors naming the key path and line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/config/quantity.hpp"
#include "sim/config/scenario.hpp"

#include "support/scratch_folder.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;
using serving::IntervalDistribution;
using serving::LengthDistribution;
using serving::TrafficSpec;

const fs::path kPresets = fs::path(WAFERSIM_SOURCE_DIR) / "scenarios";

const std::string kHead =
    "name: serve\nhardware: small\nmodel: tiny-llama\n"
    "workload: {prompt_tokens: 4, generate_tokens: 4}\n";  // lines 1-4

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string without_comments(const std::string& yaml) {
  std::istringstream in(yaml);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.starts_with("#")) out += line + "\n";
  }
  return out;
}

class TrafficSection : public test_support::ScratchFolder {
 protected:
  TrafficSection() : ScratchFolder("wafersim-traffic-") {}

  // A scenario whose traffic: section (from line 5) is `traffic`.
  Scenario load(const std::string& traffic, const std::string& name = "s.yaml") {
    return load_scenario(write(name, kHead + traffic), kPresets);
  }

  ScenarioError error(const std::string& traffic, const std::string& name = "bad.yaml") {
    try {
      load(traffic, name);
    } catch (const ScenarioError& e) {
      return e;
    }
    ADD_FAILURE() << "no ScenarioError for\n" << traffic;
    return ScenarioError("", 0, 0, "", "no error");
  }

  // Loads the scenario's resolved YAML again: the traffic is the same, and so
  // is the resolved text.
  void expect_round_trip(const Scenario& a) {
    ASSERT_TRUE(a.traffic.has_value());
    const Scenario b = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
    ASSERT_TRUE(b.traffic.has_value()) << a.resolved_yaml;
    EXPECT_EQ(*a.traffic, *b.traffic) << a.resolved_yaml;
    EXPECT_EQ(without_comments(a.resolved_yaml), without_comments(b.resolved_yaml));
  }
};

TEST_F(TrafficSection, OpenLoopArrivals) {
  const Scenario s = load(R"(traffic:
  seed: 7
  arrivals: {process: poisson, rate: 2.5/s}
  requests: 10000
  prompt_tokens: 2048
  output_tokens: {lognormal: {mean: 500, sigma: 0.6}, max: 4000}
)");
  ASSERT_TRUE(s.traffic.has_value());
  const TrafficSpec& t = *s.traffic;
  EXPECT_EQ(t.kind, TrafficSpec::Kind::open);
  EXPECT_EQ(t.seed, 7u);
  EXPECT_EQ(t.requests, 10000);
  EXPECT_EQ(t.interarrival.kind, IntervalDistribution::Kind::exponential);
  EXPECT_DOUBLE_EQ(t.interarrival.mean_s, 0.4);
  EXPECT_EQ(t.prompt_tokens.kind, LengthDistribution::Kind::fixed);
  EXPECT_EQ(t.prompt_tokens.value, 2048);
  EXPECT_EQ(t.output_tokens.kind, LengthDistribution::Kind::lognormal);
  EXPECT_EQ(t.output_tokens.mean, 500.0);
  EXPECT_EQ(t.output_tokens.sigma, 0.6);
  EXPECT_EQ(t.output_tokens.min, 1);
  EXPECT_EQ(t.output_tokens.max, 4000);
  EXPECT_TRUE(contains(s.resolved_yaml,
                       "traffic:\n  seed: 7\n  arrivals: {process: poisson, "
                       "rate: 2.5/s}\n  requests: 10000\n"))
      << s.resolved_yaml;
  expect_round_trip(s);
}

TEST_F(TrafficSection, GammaArrivalsAndEveryLengthForm) {
  const Scenario s = load(R"(traffic:
  arrivals: {process: gamma, rate: 150/min, cv: 2}
  requests: 50
  prompt_tokens: {table: [[512, 0.5], [4096, 0.25], [8192, 0.25]]}
  output_tokens: {uniform: [16, 1024]}
)");
  const TrafficSpec& t = *s.traffic;
  EXPECT_EQ(t.seed, 0u);
  EXPECT_EQ(t.interarrival.kind, IntervalDistribution::Kind::gamma);
  EXPECT_DOUBLE_EQ(t.interarrival.mean_s, 0.4);
  EXPECT_EQ(t.interarrival.cv, 2.0);
  EXPECT_EQ(t.prompt_tokens.kind, LengthDistribution::Kind::table);
  EXPECT_EQ(t.prompt_tokens.table,
            (std::vector<std::pair<int, double>>{{512, 0.5}, {4096, 0.25}, {8192, 0.25}}));
  EXPECT_EQ(t.output_tokens.kind, LengthDistribution::Kind::uniform);
  EXPECT_EQ(t.output_tokens.low, 16);
  EXPECT_EQ(t.output_tokens.high, 1024);
  expect_round_trip(s);
}

TEST_F(TrafficSection, ClosedLoopSessions) {
  const Scenario s = load(R"(traffic:
  sessions: 64
  turns: {lognormal: {mean: 20, sigma: 0.5}, min: 2, max: 100}
  prompt_tokens: 6000
  turn_prompt_tokens: {lognormal: {mean: 400, sigma: 0.7}}
  output_tokens: {lognormal: {mean: 300, sigma: 0.6}}
  think_time: {mean: 4 s, cv: 0.5}
  ramp: 10 s
  seed: 3
)");
  const TrafficSpec& t = *s.traffic;
  EXPECT_EQ(t.kind, TrafficSpec::Kind::sessions);
  EXPECT_EQ(t.sessions, 64);
  EXPECT_EQ(t.turns.kind, LengthDistribution::Kind::lognormal);
  EXPECT_EQ(t.turns.min, 2);
  EXPECT_EQ(t.turns.max, 100);
  EXPECT_EQ(t.prompt_tokens.value, 6000);
  EXPECT_EQ(t.turn_prompt_tokens.mean, 400.0);
  EXPECT_EQ(t.think.kind, IntervalDistribution::Kind::gamma);
  EXPECT_EQ(t.think.mean_s, 4.0);
  EXPECT_EQ(t.think.cv, 0.5);
  EXPECT_EQ(t.ramp_s, 10.0);
  EXPECT_EQ(t.seed, 3u);
  expect_round_trip(s);

  const Scenario fixed = load(R"(traffic:
  sessions: 2
  turns: 3
  prompt_tokens: 100
  turn_prompt_tokens: 10
  output_tokens: 5
  think_time: {fixed: 250 ms}
)",
                              "fixed.yaml");
  EXPECT_EQ(fixed.traffic->think.kind, IntervalDistribution::Kind::fixed);
  EXPECT_EQ(fixed.traffic->think.mean_s, 0.25);
  EXPECT_EQ(fixed.traffic->ramp_s, 0.0);
  expect_round_trip(fixed);
  const Scenario exponential = load(R"(traffic:
  sessions: 2
  turns: 3
  prompt_tokens: 100
  turn_prompt_tokens: 10
  output_tokens: 5
  think_time: {mean: 1.5 s}
)",
                                    "exp.yaml");
  EXPECT_EQ(exponential.traffic->think.kind, IntervalDistribution::Kind::exponential);
  EXPECT_EQ(exponential.traffic->think.mean_s, 1.5);
  expect_round_trip(exponential);
}

TEST_F(TrafficSection, TraceRelativeToTheScenariosFolder) {
  write("traces/day1.csv", "arrival_s,prompt_tokens,output_tokens\n0.25,2048,500\n");
  const Scenario s = load("traffic: {trace: traces/day1.csv}\n", "studies/../s.yaml");
  EXPECT_EQ(s.traffic->kind, TrafficSpec::Kind::trace);
  EXPECT_EQ(fs::path(s.traffic->trace_file), (dir_ / "traces/day1.csv").lexically_normal());
  EXPECT_TRUE(fs::path(s.traffic->trace_file).is_absolute());
  expect_round_trip(s);
}

TEST_F(TrafficSection, ABadTraceIsAnErrorAtItsKey) {
  write("t.csv", "arrival_s,prompt_tokens,output_tokens\n0.25,2048,500\n1,0,5\n");
  const ScenarioError e = error("traffic:\n  trace: t.csv\n");
  EXPECT_EQ(e.key_path(), "traffic.trace");
  EXPECT_EQ(e.line(), 6);
  EXPECT_TRUE(contains(e.what(), (dir_ / "t.csv").string() + ":3: column prompt_tokens: '0'"))
      << e.what();
  const ScenarioError missing = error("traffic:\n  trace: nowhere.csv\n", "missing.yaml");
  EXPECT_EQ(missing.key_path(), "traffic.trace");
  EXPECT_TRUE(contains(missing.what(), "'nowhere.csv' is not a file")) << missing.what();
}

TEST_F(TrafficSection, AbsentTrafficIsNotWritten) {
  const Scenario s = load("");
  EXPECT_FALSE(s.traffic.has_value());
  EXPECT_FALSE(contains(without_comments(s.resolved_yaml), "traffic")) << s.resolved_yaml;
}

// ---------------------------------------------------------------------------
// Errors.

const std::string kOpen =
    "  requests: 10\n  prompt_tokens: 100\n  output_tokens: 10\n";  // after arrivals

TEST_F(TrafficSection, UnknownKeysSuggestTheRightOne) {
  ScenarioError e = error("traffic:\n  arrivals: {rate: 1/s}\n  request: 10\n");
  EXPECT_EQ(e.key_path(), "traffic.request");
  EXPECT_EQ(e.line(), 7);
  EXPECT_TRUE(contains(e.what(), "did you mean 'requests'?")) << e.what();
  e = error("traffic:\n  arrivals: {process: poisson, rte: 1/s}\n" + kOpen, "b.yaml");
  EXPECT_EQ(e.key_path(), "traffic.arrivals.rte");
  EXPECT_EQ(e.line(), 6);
  EXPECT_TRUE(contains(e.what(), "did you mean 'rate'?")) << e.what();
  e = error(
      "traffic:\n  arrivals: {rate: 1/s}\n  requests: 10\n  prompt_tokens: {lognormal: "
      "{mean: 100, sigmaa: 1}}\n  output_tokens: 5\n",
      "c.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.lognormal.sigmaa");
  EXPECT_EQ(e.line(), 8);
  EXPECT_TRUE(contains(e.what(), "did you mean 'sigma'?")) << e.what();
}

TEST_F(TrafficSection, ExactlyOneKind) {
  ScenarioError e = error("traffic:\n  arrivals: {rate: 1/s}\n  trace: t.csv\n" + kOpen);
  EXPECT_EQ(e.key_path(), "traffic.trace");
  EXPECT_EQ(e.line(), 7);
  EXPECT_TRUE(contains(e.what(), "give one kind of traffic, not both arrivals and trace"))
      << e.what();
  e = error("traffic:\n  requests: 10\n", "none.yaml");
  EXPECT_EQ(e.key_path(), "traffic");
  EXPECT_EQ(e.line(), 6);
  EXPECT_TRUE(contains(e.what(), "give one kind of traffic: arrivals")) << e.what();
  // A key of another kind names both.
  e = error("traffic:\n  arrivals: {rate: 1/s}\n" + kOpen + "  ramp: 10 s\n", "ramp.yaml");
  EXPECT_EQ(e.key_path(), "traffic.ramp");
  EXPECT_EQ(e.line(), 10);
  EXPECT_TRUE(contains(e.what(),
                       "ramp belongs to closed-loop sessions (sessions:), not to "
                       "open-loop traffic (arrivals:)"))
      << e.what();
  e = error("traffic:\n  trace: t.csv\n  seed: 3\n", "seed.yaml");
  EXPECT_EQ(e.key_path(), "traffic.seed");
  EXPECT_TRUE(contains(e.what(), "not to a trace (trace:)")) << e.what();
  // A required key of the kind.
  e = error("traffic:\n  arrivals: {rate: 1/s}\n  prompt_tokens: 10\n  output_tokens: 10\n",
            "req.yaml");
  EXPECT_EQ(e.key_path(), "traffic.requests");
  EXPECT_EQ(e.line(), 5);
  EXPECT_TRUE(contains(e.what(), "missing required key 'requests' for open-loop traffic"))
      << e.what();
}

TEST_F(TrafficSection, RatesNeedAUnitAndMustBePositive) {
  ScenarioError e = error("traffic:\n  arrivals: {rate: 2.5}\n" + kOpen);
  EXPECT_EQ(e.key_path(), "traffic.arrivals.rate");
  EXPECT_EQ(e.line(), 6);
  EXPECT_TRUE(contains(e.what(), "rate needs a unit, e.g. 2.5/s; accepted units: /s, /min, /h"))
      << e.what();
  e = error("traffic:\n  arrivals: {rate: 3/day}\n" + kOpen, "day.yaml");
  EXPECT_TRUE(contains(e.what(), "unknown unit '/day'")) << e.what();
  e = error("traffic:\n  arrivals: {rate: 0/s}\n" + kOpen, "zero.yaml");
  EXPECT_EQ(e.key_path(), "traffic.arrivals.rate");
  EXPECT_EQ(e.line(), 6);
  EXPECT_TRUE(contains(e.what(), "must be above 0")) << e.what();
  e = error("traffic:\n  arrivals: {rate: -1/s}\n" + kOpen, "neg.yaml");
  EXPECT_TRUE(contains(e.what(), "cannot be negative")) << e.what();
  e = error("traffic:\n  arrivals: {process: poisson}\n" + kOpen, "norate.yaml");
  EXPECT_EQ(e.key_path(), "traffic.arrivals.rate");
  EXPECT_TRUE(contains(e.what(), "missing required key 'rate'")) << e.what();
  e = error("traffic:\n  arrivals: {rate: 1/s, cv: 2}\n" + kOpen, "cv.yaml");
  EXPECT_EQ(e.key_path(), "traffic.arrivals.cv");
  EXPECT_TRUE(contains(e.what(), "cv belongs to process: gamma")) << e.what();
  e = error("traffic:\n  arrivals: {process: gamma, rate: 1/s}\n" + kOpen, "nocv.yaml");
  EXPECT_EQ(e.key_path(), "traffic.arrivals.cv");
  e = error("traffic:\n  arrivals: {process: bursty, rate: 1/s}\n" + kOpen, "proc.yaml");
  EXPECT_TRUE(contains(e.what(), "unknown process 'bursty'; valid: poisson, gamma, fixed"))
      << e.what();
}

TEST_F(TrafficSection, LengthsAreChecked) {
  const std::string head =
      "traffic:\n  arrivals: {rate: 1/s}\n  requests: 10\n  output_tokens: 5\n";
  ScenarioError e = error(head + "  prompt_tokens: {uniform: [4096, 512]}\n");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.uniform");
  EXPECT_EQ(e.line(), 9);
  EXPECT_TRUE(contains(e.what(), "wrong way round")) << e.what();
  e = error(head + "  prompt_tokens: 0\n", "zero.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens");
  EXPECT_TRUE(contains(e.what(), "must be between 1 and")) << e.what();
  e = error(head + "  prompt_tokens: {uniform: [1, 2], max: 5}\n", "clamp.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.max");
  EXPECT_TRUE(contains(e.what(), "min and max clamp a lognormal's draws")) << e.what();
  e = error(head + "  prompt_tokens: {uniform: [1, 2], table: [[1, 1]]}\n", "two.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.table");
  EXPECT_TRUE(contains(e.what(), "give one distribution")) << e.what();
  e = error(head + "  prompt_tokens: {table: [[512, 0]]}\n", "weight.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.table[0][1]");
  EXPECT_TRUE(contains(e.what(), "must be above 0")) << e.what();
  e = error(head + "  prompt_tokens: {lognormal: {mean: 100, sigma: 1}, min: 50, max: 10}\n",
            "minmax.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.max");
  EXPECT_TRUE(contains(e.what(), "must be at least min (50)")) << e.what();
  e = error(head + "  prompt_tokens: {lognormal: {mean: 100, sigma: 1}, min: 2000000000}\n",
            "min.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.min");
  EXPECT_TRUE(contains(e.what(), "must be at most max (1073741824, the default)")) << e.what();
  e = error(head + "  prompt_tokens: {lognormal: {mean: 100}}\n", "sigma.yaml");
  EXPECT_EQ(e.key_path(), "traffic.prompt_tokens.lognormal.sigma");
  EXPECT_TRUE(contains(e.what(), "missing required key 'sigma'")) << e.what();
}

TEST_F(TrafficSection, ThinkTimesAreChecked) {
  const std::string head =
      "traffic:\n  sessions: 2\n  turns: 3\n  prompt_tokens: 100\n  turn_prompt_tokens: 10\n"
      "  output_tokens: 5\n";
  ScenarioError e = error(head + "  think_time: {mean: 4 s, fixed: 2 s}\n");
  EXPECT_EQ(e.key_path(), "traffic.think_time.fixed");
  EXPECT_EQ(e.line(), 11);
  EXPECT_TRUE(contains(e.what(), "not both")) << e.what();
  e = error(head + "  think_time: {cv: 0.5}\n", "cv.yaml");
  EXPECT_EQ(e.key_path(), "traffic.think_time.cv");
  EXPECT_TRUE(contains(e.what(), "cv needs mean")) << e.what();
  e = error(head + "  think_time: {mean: 4}\n", "unit.yaml");
  EXPECT_TRUE(contains(e.what(), "mean needs a unit")) << e.what();
  e = error(head + "  think_time: {mean: 0 s}\n", "zero.yaml");
  EXPECT_TRUE(contains(e.what(), "must be above 0 s")) << e.what();
  e = error(head, "missing.yaml");
  EXPECT_EQ(e.key_path(), "traffic.think_time");
  EXPECT_TRUE(contains(e.what(), "missing required key 'think_time' for closed-loop sessions"))
      << e.what();
}

// ---------------------------------------------------------------------------
// The rate unit.

TEST(Rates, ParseAndFormatRoundTrip) {
  EXPECT_EQ(parse_rate("2.5/s"), 2.5);
  EXPECT_EQ(parse_rate("150/min"), 2.5);
  EXPECT_EQ(parse_rate("9000 /h"), 2.5);
  EXPECT_EQ(format_rate(2.5), "2.5/s");
  EXPECT_EQ(format_rate(0.5), "30/min");
  EXPECT_EQ(format_rate(1.0 / 3600.0), "1/h");
  EXPECT_THROW(parse_rate("2.5"), QuantityError);
  EXPECT_THROW(parse_rate("2.5/day"), QuantityError);
  for (double r : {1.0 / 3.0, 7.0 / 60.0, 123.456, 1e-7, 0.1, 1e6}) {
    EXPECT_EQ(parse_rate(format_rate(r)), r) << format_rate(r);
  }
}

}  // namespace
}  // namespace wafersim::sim
