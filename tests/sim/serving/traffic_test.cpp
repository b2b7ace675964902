// Traffic: determinism and independent streams, every draw's sample mean
// against an expectation worked out here (within 3 standard errors of it),
// clamps, closed-loop sessions, and the trace reader with each kind of error
// naming its file, line and column.
#include "sim/serving/traffic.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace wafersim::sim::serving {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct Moments {
  double mean = 0.0;
  double sd = 0.0;
};

Moments moments(const std::vector<double>& x) {
  Moments m;
  for (double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  double ss = 0.0;
  for (double v : x) ss += (v - m.mean) * (v - m.mean);
  m.sd = std::sqrt(ss / static_cast<double>(x.size() - 1));
  return m;
}

LengthDistribution fixed(int n) {
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::fixed;
  d.value = n;
  return d;
}
LengthDistribution lognormal(double mean, double sigma) {
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::lognormal;
  d.mean = mean;
  d.sigma = sigma;
  return d;
}
LengthDistribution uniform(int low, int high) {
  LengthDistribution d;
  d.kind = LengthDistribution::Kind::uniform;
  d.low = low;
  d.high = high;
  return d;
}

TrafficSpec open_spec(int requests, double rate) {
  TrafficSpec s;
  s.kind = TrafficSpec::Kind::open;
  s.seed = 7;
  s.requests = requests;
  s.interarrival.kind = IntervalDistribution::Kind::exponential;
  s.interarrival.mean_s = 1.0 / rate;
  s.prompt_tokens = lognormal(2048, 0.8);
  s.output_tokens = lognormal(500, 0.6);
  return s;
}

TrafficSpec session_spec(int sessions) {
  TrafficSpec s;
  s.kind = TrafficSpec::Kind::sessions;
  s.seed = 11;
  s.sessions = sessions;
  s.turns = fixed(5);
  s.prompt_tokens = fixed(6000);
  s.turn_prompt_tokens = lognormal(400, 0.7);
  s.output_tokens = lognormal(300, 0.6);
  s.think.kind = IntervalDistribution::Kind::exponential;
  s.think.mean_s = 4.0;
  s.ramp_s = 10.0;
  return s;
}

// The prompt lengths of single-turn sessions, as doubles.
std::vector<double> prompts(const std::vector<Session>& sessions) {
  std::vector<double> out;
  for (const Session& s : sessions) out.push_back(s.turns.front().new_prompt_tokens);
  return out;
}

std::vector<double> gaps(const std::vector<Session>& sessions) {
  std::vector<double> out;
  double last = 0.0;
  for (const Session& s : sessions) {
    out.push_back(s.turns.front().at_s - last);
    last = s.turns.front().at_s;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Determinism and streams.

TEST(Traffic, SameSeedSameSessionsBitForBit) {
  const TrafficSpec spec = open_spec(2000, 2.5);
  const auto a = generate_sessions(spec);
  const auto b = generate_sessions(spec);
  ASSERT_EQ(a.size(), 2000u);
  EXPECT_EQ(a, b);
  TrafficSpec other = spec;
  other.seed = 8;
  EXPECT_NE(generate_sessions(other), a);

  const TrafficSpec closed = session_spec(50);
  EXPECT_EQ(generate_sessions(closed), generate_sessions(closed));
  TrafficSpec closed_other = closed;
  closed_other.seed = 12;
  EXPECT_NE(generate_sessions(closed_other), generate_sessions(closed));
}

TEST(Traffic, EachPurposeHasItsOwnStream) {
  const TrafficSpec spec = open_spec(500, 2.5);
  TrafficSpec changed = spec;
  changed.output_tokens = uniform(1, 100);
  changed.interarrival.kind = IntervalDistribution::Kind::gamma;
  changed.interarrival.cv = 3.0;
  const auto a = generate_sessions(spec);
  const auto b = generate_sessions(changed);
  EXPECT_EQ(prompts(a), prompts(b));  // prompt lengths unchanged
  EXPECT_NE(gaps(a), gaps(b));

  // Closed loop: more turns per session leave every session's start, first
  // prompt and the outputs of the turns it already had as they were.
  const TrafficSpec closed = session_spec(40);
  TrafficSpec more_turns = closed;
  more_turns.turns = fixed(9);
  more_turns.think.mean_s = 1.0;
  const auto c = generate_sessions(closed);
  const auto d = generate_sessions(more_turns);
  ASSERT_EQ(c.size(), d.size());
  for (std::size_t i = 0; i < c.size(); ++i) {
    ASSERT_EQ(d[i].turns.size(), 9u);
    EXPECT_EQ(c[i].turns[0], d[i].turns[0]);
    for (std::size_t k = 1; k < c[i].turns.size(); ++k) {
      EXPECT_EQ(c[i].turns[k].output_tokens, d[i].turns[k].output_tokens);
      EXPECT_EQ(c[i].turns[k].new_prompt_tokens, d[i].turns[k].new_prompt_tokens);
      EXPECT_NE(c[i].turns[k].at_s, d[i].turns[k].at_s);
    }
  }
}

// The documented streams (docs/scenario-schema.md, "Traffic"), written out
// independently so that the test pins the algorithm, not whatever the
// library happens to do.
std::uint64_t reference_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(Traffic, DrawsFollowTheDocumentedStreams) {
  TrafficSpec spec = open_spec(5, 2.5);
  spec.seed = 42;
  spec.prompt_tokens = uniform(1, 100);
  const auto sessions = generate_sessions(spec);
  auto start = [](std::uint64_t seed, const char* tag) {
    std::uint64_t purpose = 0;
    for (const char* c = tag; *c != 0; ++c)
      purpose = (purpose << 8) | static_cast<unsigned char>(*c);
    return reference_mix(reference_mix(seed ^ purpose) ^ reference_mix(1));
  };
  std::uint64_t arrival = start(42, "arrival");
  std::uint64_t prompt = start(42, "prompt");
  double t = 0.0;
  for (const Session& s : sessions) {
    arrival += 0x9E3779B97F4A7C15ull;
    const double u = (static_cast<double>(reference_mix(arrival) >> 11) + 0.5) * 0x1.0p-53;
    t += -0.4 * std::log(u);
    EXPECT_EQ(s.turns[0].at_s, t);
    prompt += 0x9E3779B97F4A7C15ull;
    const auto wide = static_cast<unsigned __int128>(reference_mix(prompt)) * 100u;
    EXPECT_EQ(s.turns[0].new_prompt_tokens, 1 + static_cast<int>(wide >> 64));
  }
}

// ---------------------------------------------------------------------------
// Draws against their expectations.

TEST(Traffic, PoissonArrivalsHaveTheRate) {
  const int n = 10000;
  const auto sessions = generate_sessions(open_spec(n, 2.5));
  ASSERT_EQ(sessions.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(sessions[static_cast<std::size_t>(i)].id, i);
    EXPECT_FALSE(sessions[static_cast<std::size_t>(i)].closed_loop);
    ASSERT_EQ(sessions[static_cast<std::size_t>(i)].turns.size(), 1u);
  }
  const std::vector<double> g = gaps(sessions);
  EXPECT_GT(g.front(), 0.0);  // the first arrival is the first gap
  for (double x : g) EXPECT_GE(x, 0.0);
  // Exponential with mean 0.4 s: sd 0.4 s, cv 1.
  const Moments m = moments(g);
  EXPECT_NEAR(m.mean, 0.4, 3.0 * 0.4 / std::sqrt(n));
  EXPECT_NEAR(m.sd / m.mean, 1.0, 0.05);
  // The rate over the whole run.
  EXPECT_NEAR(n / sessions.back().turns.front().at_s, 2.5, 3.0 * 2.5 / std::sqrt(n));
}

TEST(Traffic, GammaArrivalsHaveTheirMeanAndCv) {
  const int n = 40000;
  for (double cv : {0.5, 2.0}) {
    TrafficSpec spec = open_spec(n, 2.5);
    spec.interarrival.kind = IntervalDistribution::Kind::gamma;
    spec.interarrival.cv = cv;
    const Moments m = moments(gaps(generate_sessions(spec)));
    EXPECT_NEAR(m.mean, 0.4, 3.0 * cv * 0.4 / std::sqrt(n)) << "cv " << cv;
    // The sample sd of a gamma with shape 1/cv^2 (excess kurtosis 6 cv^2)
    // has a relative standard error of about sqrt((2 + 6 cv^2) / (4n)).
    const double rel = std::sqrt((2.0 + 6.0 * cv * cv) / (4.0 * n));
    EXPECT_NEAR(m.sd / m.mean, cv, cv * 4.0 * rel) << "cv " << cv;
  }
}

TEST(Traffic, FixedArrivalsAreEvenlySpaced) {
  TrafficSpec spec = open_spec(10, 2.0);
  spec.interarrival.kind = IntervalDistribution::Kind::fixed;
  const auto s = generate_sessions(spec);
  for (std::size_t i = 0; i < s.size(); ++i)
    EXPECT_DOUBLE_EQ(s[i].turns[0].at_s, 0.5 * static_cast<double>(i + 1));
}

TEST(Traffic, LognormalLengthsHaveTheirMean) {
  const int n = 20000;
  TrafficSpec spec = open_spec(n, 2.5);
  spec.prompt_tokens = lognormal(2048, 0.8);
  const Moments m = moments(prompts(generate_sessions(spec)));
  // The mean is the parameter itself (the clamp at 1 token is ~1e-20 of the mass).
  EXPECT_NEAR(spec.prompt_tokens.expected(), 2048.0, 1e-6);
  const double sd = 2048.0 * std::sqrt(std::exp(0.8 * 0.8) - 1.0);
  EXPECT_NEAR(m.mean, 2048.0, 3.0 * sd / std::sqrt(n));
  EXPECT_NEAR(m.sd, sd, 0.1 * sd);
  // The median is mean x exp(-sigma^2 / 2).
  std::vector<double> sorted = prompts(generate_sessions(spec));
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NEAR(sorted[n / 2], 2048.0 * std::exp(-0.32), 0.03 * 2048.0 * std::exp(-0.32));
}

// E[clamp(X, a, b)] for X lognormal, by numerical integration over the normal.
double clamped_lognormal_mean(double mean, double sigma, double a, double b) {
  const double mu = std::log(mean) - 0.5 * sigma * sigma;
  double sum = 0.0;
  const double dz = 1e-4;
  for (double z = -10.0; z < 10.0; z += dz) {
    const double zc = z + 0.5 * dz;
    const double x = std::clamp(std::exp(mu + sigma * zc), a, b);
    sum += x * std::exp(-0.5 * zc * zc) / std::sqrt(2.0 * M_PI) * dz;
  }
  return sum;
}

TEST(Traffic, LognormalClampsToMinAndMax) {
  const int n = 20000;
  TrafficSpec spec = open_spec(n, 2.5);
  spec.prompt_tokens = lognormal(2048, 1.0);
  spec.prompt_tokens.min = 1000;
  spec.prompt_tokens.max = 3000;
  const std::vector<double> p = prompts(generate_sessions(spec));
  EXPECT_EQ(*std::min_element(p.begin(), p.end()), 1000.0);
  EXPECT_EQ(*std::max_element(p.begin(), p.end()), 3000.0);
  const double expected = clamped_lognormal_mean(2048, 1.0, 1000, 3000);
  EXPECT_NEAR(spec.prompt_tokens.expected(), expected, 0.5);
  EXPECT_LT(expected, 2000.0);  // the clamp matters here
  const Moments m = moments(p);
  EXPECT_NEAR(m.mean, expected, 3.0 * m.sd / std::sqrt(n));
  // sigma 0: the mean, rounded.
  EXPECT_EQ(lognormal(99.6, 0.0).expected(), 100.0);
}

TEST(Traffic, UniformLengthsCoverTheirBoundsEvenly) {
  const int n = 30000;
  TrafficSpec spec = open_spec(n, 2.5);
  spec.prompt_tokens = uniform(3, 8);
  EXPECT_EQ(spec.prompt_tokens.expected(), 5.5);
  std::map<int, int> count;
  for (double x : prompts(generate_sessions(spec))) ++count[static_cast<int>(x)];
  ASSERT_EQ(count.size(), 6u);
  EXPECT_EQ(count.begin()->first, 3);
  EXPECT_EQ(count.rbegin()->first, 8);
  for (const auto& [length, k] : count)
    EXPECT_NEAR(k, n / 6.0, 3.0 * std::sqrt(n * (1.0 / 6) * (5.0 / 6))) << length;
}

TEST(Traffic, TableLengthsHaveTheirFrequencies) {
  const int n = 30000;
  TrafficSpec spec = open_spec(n, 2.5);
  spec.prompt_tokens.kind = LengthDistribution::Kind::table;
  spec.prompt_tokens.table = {{512, 2.0}, {4096, 1.0}, {8192, 1.0}};
  EXPECT_EQ(spec.prompt_tokens.expected(), (512 * 2.0 + 4096 + 8192) / 4.0);
  std::map<int, int> count;
  for (double x : prompts(generate_sessions(spec))) ++count[static_cast<int>(x)];
  ASSERT_EQ(count.size(), 3u);
  const std::map<int, double> p = {{512, 0.5}, {4096, 0.25}, {8192, 0.25}};
  for (const auto& [length, k] : count)
    EXPECT_NEAR(k, n * p.at(length), 3.0 * std::sqrt(n * p.at(length) * (1 - p.at(length))))
        << length;
}

TEST(Traffic, ExpectedOfFixedLengths) {
  EXPECT_EQ(fixed(2048).expected(), 2048.0);
}

// ---------------------------------------------------------------------------
// Closed-loop sessions.

TEST(Traffic, SessionsHaveTheirTurnsInOrderOfStart) {
  TrafficSpec spec = session_spec(200);
  spec.think.kind = IntervalDistribution::Kind::fixed;
  spec.think.mean_s = 2.0;
  const auto sessions = generate_sessions(spec);
  ASSERT_EQ(sessions.size(), 200u);
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    const Session& s = sessions[i];
    EXPECT_EQ(s.id, static_cast<int>(i));
    EXPECT_TRUE(s.closed_loop);
    ASSERT_EQ(s.turns.size(), 5u);
    EXPECT_GE(s.turns[0].at_s, 0.0);
    EXPECT_LT(s.turns[0].at_s, 10.0);
    if (i > 0) {
      EXPECT_LE(sessions[i - 1].turns[0].at_s, s.turns[0].at_s);
    }
    EXPECT_EQ(s.turns[0].new_prompt_tokens, 6000);
    for (std::size_t k = 1; k < s.turns.size(); ++k) {
      EXPECT_EQ(s.turns[k].at_s, 2.0);
      EXPECT_GE(s.turns[k].new_prompt_tokens, 1);
      EXPECT_GE(s.turns[k].output_tokens, 1);
    }
  }
  // Starts uniform in [0, 10): mean 5, sd 10 / sqrt(12).
  std::vector<double> starts;
  for (const Session& s : sessions) starts.push_back(s.turns[0].at_s);
  EXPECT_NEAR(moments(starts).mean, 5.0, 3.0 * (10.0 / std::sqrt(12.0)) / std::sqrt(200.0));
}

TEST(Traffic, SessionTurnCountsThinkTimesAndTurnPromptsFollowTheirDistributions) {
  TrafficSpec spec = session_spec(3000);
  spec.turns = uniform(1, 9);
  spec.think.kind = IntervalDistribution::Kind::gamma;
  spec.think.cv = 0.5;
  std::vector<double> turns, thinks, added;
  for (const Session& s : generate_sessions(spec)) {
    turns.push_back(static_cast<double>(s.turns.size()));
    for (std::size_t k = 1; k < s.turns.size(); ++k) {
      thinks.push_back(s.turns[k].at_s);
      added.push_back(s.turns[k].new_prompt_tokens);
    }
  }
  const Moments t = moments(turns);
  EXPECT_NEAR(t.mean, 5.0, 3.0 * std::sqrt((81.0 - 1.0) / 12.0) / std::sqrt(3000.0));
  const Moments th = moments(thinks);
  const double n = static_cast<double>(thinks.size());
  EXPECT_NEAR(th.mean, 4.0, 3.0 * 2.0 / std::sqrt(n));
  EXPECT_NEAR(th.sd / th.mean, 0.5, 0.05);
  const Moments a = moments(added);
  EXPECT_NEAR(a.mean, 400.0, 3.0 * a.sd / std::sqrt(n));
}

TEST(Traffic, NoRampStartsEverySessionAtZeroInOrderDrawn) {
  TrafficSpec spec = session_spec(5);
  spec.ramp_s = 0.0;
  const auto s = generate_sessions(spec);
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].id, static_cast<int>(i));
    EXPECT_EQ(s[i].turns[0].at_s, 0.0);
  }
  // Tied starts keep the order drawn, so session i holds the draws of index
  // i: its first turn is the same whatever the number of turns.
  TrafficSpec one_turn = spec;
  one_turn.turns = fixed(1);
  const auto t = generate_sessions(one_turn);
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i].turns[0], t[i].turns[0]);
}

TEST(Traffic, ImpossibleSpecsAreTrafficErrors) {
  TrafficSpec none = open_spec(0, 1.0);
  EXPECT_THROW(generate_sessions(none), TrafficError);
  TrafficSpec no_rate = open_spec(10, 1.0);
  no_rate.interarrival.mean_s = 0.0;
  EXPECT_THROW(generate_sessions(no_rate), TrafficError);
  TrafficSpec backwards = open_spec(10, 1.0);
  backwards.prompt_tokens = uniform(10, 5);
  EXPECT_THROW(generate_sessions(backwards), TrafficError);
  TrafficSpec no_sessions = session_spec(0);
  EXPECT_THROW(generate_sessions(no_sessions), TrafficError);
}

// ---------------------------------------------------------------------------
// Traces.

class TraceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("wafersim-trace-") + info->name() + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  // The TrafficError reading `text` throws.
  std::string error(const std::string& text, const std::string& name = "t.csv") {
    const std::string path = write(name, text);
    try {
      read_trace(path);
    } catch (const TrafficError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no TrafficError for\n" << text;
    return "";
  }

  fs::path dir_;
};

TEST_F(TraceFiles, RowsBecomeSessionsAndTurnsInArrivalOrder) {
  // Columns in another order, rows out of order, an agent of three turns
  // (the second extends the context, the third does not), two requests alone.
  const std::string path = write("day1.csv",
                                 "session, output_tokens ,prompt_tokens,arrival_s\r\n"
                                 "a,100,1500,5.0\r\n"
                                 ",40,700,1.0\n"
                                 "a,200,1000,0.5\n"
                                 "\n"
                                 "b,10,64,1.0\n"
                                 "a,50,800,9\n"
                                 ",30,300,0.5\n");
  const auto s = read_trace(path);
  ASSERT_EQ(s.size(), 4u);
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].id, static_cast<int>(i));
    EXPECT_FALSE(s[i].closed_loop);
  }
  // By first arrival, ties in file order: a (0.5), the lone 0.5 row, the lone 1.0 row, b (1.0).
  ASSERT_EQ(s[0].turns.size(), 3u);
  EXPECT_EQ(s[0].turns[0], (Turn{0.5, 1000, 200}));
  EXPECT_EQ(s[0].turns[1], (Turn{5.0, 300, 100}));  // 1500 - (1000 + 200)
  EXPECT_EQ(s[0].turns[2], (Turn{9.0, 800, 50, false}));  // shorter than 1600: not reused
  EXPECT_EQ(s[1].turns, (std::vector<Turn>{{0.5, 300, 30}}));
  EXPECT_EQ(s[2].turns, (std::vector<Turn>{{1.0, 700, 40}}));
  EXPECT_EQ(s[3].turns, (std::vector<Turn>{{1.0, 64, 10}}));

  TrafficSpec spec;
  spec.kind = TrafficSpec::Kind::trace;
  spec.trace_file = path;
  EXPECT_EQ(generate_sessions(spec), s);
}

TEST_F(TraceFiles, WithoutASessionColumnEveryRowIsItsOwnSession) {
  const auto s =
      read_trace(write("t.csv", "arrival_s,prompt_tokens,output_tokens\n2,5,6\n1,3,4\n"));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].turns, (std::vector<Turn>{{1.0, 3, 4}}));
  EXPECT_EQ(s[1].turns, (std::vector<Turn>{{2.0, 5, 6}}));
}

TEST_F(TraceFiles, EveryErrorNamesTheFileLineAndColumn) {
  const std::string head = "arrival_s,prompt_tokens,output_tokens,session\n0.1,10,10,a\n";
  struct Case {
    std::string row;
    std::string column;
    std::string what;
  };
  const std::vector<Case> cases = {
      {"abc,10,10,a", "arrival_s", "is not a number"},
      {"-1,10,10,a", "arrival_s", "is negative"},
      {"inf,10,10,a", "arrival_s", "is not a finite number"},
      {"nan,10,10,a", "arrival_s", "is not a finite number"},
      {"1e400,10,10,a", "arrival_s", "is out of range"},
      {"1,0,10,a", "prompt_tokens", "must be at least 1 token"},
      {"1,10,-5,a", "output_tokens", "must be at least 1 token"},
      {"1,10.5,10,a", "prompt_tokens", "is not a whole number"},
      {"1,99999999999,10,a", "prompt_tokens", "is out of range"},
      {"1,,10,a", "prompt_tokens", "is not a whole number"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string name = "bad" + std::to_string(i++) + ".csv";
    const std::string e = error(head + c.row + "\n", name);
    EXPECT_TRUE(contains(e, (dir_ / name).string() + ":3: column " + c.column + ": ")) << e;
    EXPECT_TRUE(contains(e, c.what)) << e;
    EXPECT_TRUE(contains(e, "a valid row looks like 0.25,2048,500,s7")) << e;
  }
}

TEST_F(TraceFiles, FieldCountsAndHeadersAreChecked) {
  const std::string f = (dir_ / "t.csv").string();
  std::string e = error("arrival_s,prompt_tokens,output_tokens\n1,2,3\n1,2\n");
  EXPECT_TRUE(contains(e, f + ":3: 2 fields where the header names 3")) << e;
  EXPECT_TRUE(contains(e, "a valid row looks like 0.25,2048,500")) << e;
  e = error("arrival_s,prompt_tokens,output_tokens\n1,2,3,4\n");
  EXPECT_TRUE(contains(e, f + ":2: 4 fields where the header names 3")) << e;
  // The example follows the file's own order of columns.
  e = error("output_tokens,arrival_s,prompt_tokens\nx,1,2\n");
  EXPECT_TRUE(contains(e, f + ":2: column output_tokens: 'x'")) << e;
  EXPECT_TRUE(contains(e, "a valid row looks like 500,0.25,2048")) << e;
  e = error("arrival_s,prompt_tokens,output_tokens,user\n1,2,3,x\n");
  EXPECT_TRUE(contains(e, f + ":1: unknown column 'user'")) << e;
  EXPECT_TRUE(contains(e, "valid columns: arrival_s, prompt_tokens, output_tokens")) << e;
  EXPECT_TRUE(contains(e, "session")) << e;
  e = error("arrival_s,prompt_tokens\n1,2\n");
  EXPECT_TRUE(contains(e, f + ":1: the header has no column 'output_tokens'")) << e;
  e = error("arrival_s,prompt_tokens,output_tokens,arrival_s\n");
  EXPECT_TRUE(contains(e, f + ":1: the header names column 'arrival_s' twice")) << e;
  e = error("");
  EXPECT_TRUE(contains(e, f + ": is empty")) << e;
  e = error("arrival_s,prompt_tokens,output_tokens\n\n");
  EXPECT_TRUE(contains(e, f + ": has a header but no requests")) << e;
  try {
    read_trace((dir_ / "missing.csv").string());
    ADD_FAILURE() << "a missing file was read";
  } catch (const TrafficError& x) {
    EXPECT_TRUE(contains(x.what(), (dir_ / "missing.csv").string() + ": cannot open")) << x.what();
  }
  try {
    read_trace(dir_.string());
    ADD_FAILURE() << "a folder was read";
  } catch (const TrafficError& x) {
    EXPECT_TRUE(contains(x.what(), "is a folder")) << x.what();
  }
}

}  // namespace
}  // namespace wafersim::sim::serving
