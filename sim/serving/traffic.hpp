// The requests a serving study sends: open-loop arrivals (Poisson or gamma at
// a rate), a trace file, or closed-loop sessions of many turns (an agent:
// each turn's prompt adds to the context the earlier turns built, and the
// next turn follows the previous one's last token after think or tool time).
// Plain data and a seeded generator; no scheduling (simulator.hpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace wafersim::sim::serving {

// A trace file (or generated traffic) that cannot be used; the message names
// the file and line.
class TrafficError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A token count drawn per request.
struct LengthDistribution {
  enum class Kind { fixed, uniform, lognormal, table };
  Kind kind = Kind::fixed;
  int value = 1;  // fixed
  int low = 1;    // uniform: inclusive bounds
  int high = 1;
  // lognormal: the mean length in tokens and the standard deviation of its
  // logarithm (the median is mean x exp(-sigma^2 / 2)); draws are rounded and
  // clamped to [min, max].
  double mean = 1.0;
  double sigma = 0.0;
  int min = 1;
  int max = 1 << 30;
  // table: (length, weight) rows of an empirical distribution; weights > 0.
  std::vector<std::pair<int, double>> table;
  // The distribution's mean (for reports and the KV sizing of deployments):
  // a lognormal's is that of its draws clamped to [min, max] (rounding to
  // whole tokens aside, which moves it by well under one token).
  double expected() const;
  bool operator==(const LengthDistribution&) const = default;
};

// Time between events drawn per draw: exponential (Poisson arrivals, cv 1),
// gamma with a coefficient of variation (burstier above 1), or fixed.
struct IntervalDistribution {
  enum class Kind { exponential, gamma, fixed };
  Kind kind = Kind::exponential;
  double mean_s = 1.0;
  double cv = 1.0;  // gamma: standard deviation / mean
  bool operator==(const IntervalDistribution&) const = default;
};

struct TrafficSpec {
  enum class Kind { open, trace, sessions };
  Kind kind = Kind::open;
  std::uint64_t seed = 0;

  // open: `requests` single-turn requests, inter-arrival times drawn from
  // `interarrival` (mean 1 / rate).
  int requests = 0;
  IntervalDistribution interarrival;
  LengthDistribution prompt_tokens;
  LengthDistribution output_tokens;

  // trace: a CSV file (absolute path) with a header line naming the columns
  // arrival_s, prompt_tokens, output_tokens and, optionally, session; rows in
  // any order of arrival (sorted on reading). Requests of one session are its
  // turns in arrival order; a turn whose prompt is longer than the context
  // the session built so far reuses that context.
  std::string trace_file;

  // sessions (closed loop): `sessions` agents, each starting at a time drawn
  // uniformly in [0, ramp_s), each running `turns` turns. The first turn's
  // prompt is `prompt_tokens` (a system prompt and the task); every later
  // turn adds `turn_prompt_tokens` (tool output, the user's message) to the
  // context of the earlier turns' prompts and outputs. Between a turn's last
  // token (as the client sees it) and the next turn: `think` time.
  int sessions = 0;
  LengthDistribution turns;
  LengthDistribution turn_prompt_tokens;
  IntervalDistribution think;
  double ramp_s = 0.0;

  bool operator==(const TrafficSpec&) const = default;
};

// One turn of a session. For an open-loop session (open traffic, traces)
// `at_s` is its arrival time; for a closed-loop one it is the think time
// after the previous turn (the first turn: the session's start).
struct Turn {
  double at_s = 0.0;
  int new_prompt_tokens = 1;  // tokens this turn adds to the context (the first: its whole prompt)
  int output_tokens = 1;
  // Whether the prompt starts with the context the session's earlier turns
  // built (false: a trace row whose prompt is not longer than that context;
  // its prompt is new_prompt_tokens alone and nothing is reused).
  bool extends_context = true;
  bool operator==(const Turn&) const = default;
};

struct Session {
  int id = 0;
  bool closed_loop = false;
  std::vector<Turn> turns;
  bool operator==(const Session&) const = default;
};

// The sessions of a traffic spec, drawn from its seed (same spec, same
// sessions, bit for bit), in order of their first arrival. Throws
// TrafficError for a trace file that cannot be read (naming the file, line
// and column, and what a valid row looks like).
std::vector<Session> generate_sessions(const TrafficSpec& spec);

// Reads a trace CSV into sessions (used by generate_sessions).
std::vector<Session> read_trace(const std::string& path);

}  // namespace wafersim::sim::serving
