// traffic: the requests of a serving study (serving::TrafficSpec): open-loop
// arrivals, a trace file, or closed-loop sessions. docs/scenario-schema.md,
// "Traffic".
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <system_error>

#include "sim/config/preset_resolver.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using namespace yaml;
using serving::IntervalDistribution;
using serving::LengthDistribution;
using serving::TrafficSpec;

constexpr Need O = Need::optional;

constexpr int kMostRequests = 10'000'000;
constexpr int kMostSessions = 1'000'000;
constexpr int kMostTokens = 100'000'000;  // per draw; far beyond any model's context
constexpr int kMostTurns = 1'000'000;

// The keys each kind takes, and how messages name the kind.
struct TrafficKind {
  TrafficSpec::Kind kind;
  std::string_view key;  // the key that chooses it
  std::string_view name;
  std::vector<std::string> keys;
  std::vector<std::string> required;
};

const std::vector<TrafficKind>& kinds() {
  static const std::vector<TrafficKind> k = {
      {TrafficSpec::Kind::open,
       "arrivals",
       "open-loop traffic (arrivals:)",
       {"seed", "arrivals", "requests", "prompt_tokens", "output_tokens"},
       {"arrivals", "requests", "prompt_tokens", "output_tokens"}},
      {TrafficSpec::Kind::trace, "trace", "a trace (trace:)", {"trace"}, {"trace"}},
      {TrafficSpec::Kind::sessions,
       "sessions",
       "closed-loop sessions (sessions:)",
       {"seed", "sessions", "turns", "prompt_tokens", "turn_prompt_tokens", "output_tokens",
        "think_time", "ramp"},
       {"sessions", "turns", "prompt_tokens", "turn_prompt_tokens", "output_tokens", "think_time"}},
  };
  return k;
}

// An example of each key, for "missing required key" messages.
std::string_view example_of(std::string_view key) {
  if (key == "arrivals") return "arrivals: {process: poisson, rate: 2.5/s}";
  if (key == "requests") return "requests: 10000";
  if (key == "prompt_tokens") return "prompt_tokens: {lognormal: {mean: 2048, sigma: 0.8}}";
  if (key == "output_tokens") return "output_tokens: {lognormal: {mean: 500, sigma: 0.6}}";
  if (key == "sessions") return "sessions: 64";
  if (key == "turns") return "turns: 20";
  if (key == "turn_prompt_tokens")
    return "turn_prompt_tokens: {lognormal: {mean: 400, sigma: 0.7}}";
  if (key == "think_time") return "think_time: {mean: 4 s}";
  return "trace: traces/day1.csv";
}

// ---------------------------------------------------------------------------
// Length distributions: a count, {uniform: [low, high]},
// {lognormal: {mean, sigma}, min, max} or {table: [[length, weight], ...]}.

const std::vector<std::string>& length_keys() {
  static const std::vector<std::string> k = {"uniform", "lognormal", "table", "min", "max"};
  return k;
}

int read_length_count(const Value& v, int most, const std::string& example) {
  const int n = read_count(v, example);
  if (n < 1 || n > most) fail(v.loc(), v.path, fmt::format("must be between 1 and {}", most));
  return n;
}

LengthDistribution read_length(const Value& v, int most, const std::string& example) {
  using K = LengthDistribution::Kind;
  LengthDistribution d;
  if (v.node.IsScalar()) {
    d.kind = K::fixed;
    d.value = read_length_count(v, most, example);
    return d;
  }
  const std::string forms = fmt::format(
      "a count such as {0}, {{uniform: [{0}, {1}]}}, {{lognormal: {{mean: {0}, sigma: 0.8}}, max: "
      "{1}}} or {{table: [[{0}, 0.5], [{1}, 0.5]]}}",
      example, std::stoll(example) * 4);
  if (!v.node.IsMap())
    fail(v.loc(), v.path, fmt::format("expected {}, got {}", forms, describe(v.node)));
  const Mapping m(v, length_keys());
  const int given = int{m.has("uniform")} + int{m.has("lognormal")} + int{m.has("table")};
  if (given != 1) {
    const Value& at =
        given == 0 ? v : m.get(m.has("table") ? "table" : "lognormal");  // the second one given
    fail(given == 0 ? at.loc() : at.key_loc(), at.path,
         fmt::format("give one distribution: {}", forms));
  }
  if (const Value* u = m.find("uniform")) {
    if (!u->node.IsSequence() || u->node.size() != 2)
      fail(u->loc(), u->path,
           fmt::format("expected the inclusive bounds [low, high], e.g. [{}, {}], got {}", example,
                       std::stoll(example) * 4, describe(u->node)));
    d.kind = K::uniform;
    d.low = read_length_count(u->item(0), most, example);
    d.high = read_length_count(u->item(1), most, example);
    if (d.high < d.low)
      fail(u->loc(), u->path,
           fmt::format("the bounds [{}, {}] are the wrong way round; low <= high", d.low, d.high));
  }
  if (const Value* l = m.find("lognormal")) {
    const Mapping lm(*l, {"mean", "sigma"});
    d.kind = K::lognormal;
    const Value& mean = lm.require("mean");
    d.mean = read_real(mean, example);
    if (!(d.mean >= 1.0 && d.mean <= most))
      fail(mean.loc(), mean.path, fmt::format("must be between 1 and {} (tokens)", most));
    const Value& sigma = lm.require("sigma");
    d.sigma = read_real(sigma, "0.8");
    if (!(d.sigma >= 0.0 && d.sigma <= 5.0))
      fail(sigma.loc(), sigma.path,
           "must be between 0 and 5 (the standard deviation of the length's logarithm)");
  }
  if (const Value* t = m.find("table")) {
    const std::string row_example = fmt::format("[{}, 0.5]", example);
    if (!t->node.IsSequence() || t->node.size() == 0)
      fail(t->loc(), t->path,
           fmt::format("expected a list of [length, weight] rows such as [{}, [{}, 0.5]], got {}",
                       row_example, std::stoll(example) * 4, describe(t->node)));
    d.kind = K::table;
    for (std::size_t i = 0; i < t->node.size(); ++i) {
      const Value row = t->item(i);
      if (!row.node.IsSequence() || row.node.size() != 2)
        fail(row.loc(), row.path,
             fmt::format("expected a row [length, weight] such as {}, got {}", row_example,
                         describe(row.node)));
      const Value weight = row.item(1);
      const int length = read_length_count(row.item(0), most, example);
      const double w = read_real(weight, "0.5");
      if (!(w > 0.0)) fail(weight.loc(), weight.path, "must be above 0 (a relative weight)");
      for (const auto& [earlier, unused] : d.table) {
        if (earlier == length)
          fail(row.loc(), row.path, fmt::format("length {} is listed twice", length));
      }
      d.table.emplace_back(length, w);
    }
  }
  for (const char* clamp : {"min", "max"}) {
    const Value* c = m.find(clamp);
    if (c == nullptr) continue;
    if (d.kind != K::lognormal)
      fail(c->key_loc(), c->path,
           "min and max clamp a lognormal's draws; a uniform's bounds and a table's rows are "
           "already its lengths");
    (std::string_view(clamp) == "min" ? d.min : d.max) = read_length_count(*c, INT_MAX, example);
  }
  if (d.max < d.min) {
    if (const Value* c = m.find("max"))
      fail(c->loc(), c->path, fmt::format("must be at least min ({})", d.min));
    const Value& c = m.get("min");
    fail(c.loc(), c.path, fmt::format("must be at most max ({}, the default)", d.max));
  }
  return d;
}

std::string write_length(const LengthDistribution& d) {
  using K = LengthDistribution::Kind;
  switch (d.kind) {
    case K::fixed:
      return std::to_string(d.value);
    case K::uniform:
      return fmt::format("{{uniform: [{}, {}]}}", d.low, d.high);
    case K::lognormal: {
      std::string out = fmt::format("{{lognormal: {{mean: {}, sigma: {}}}", yaml_real(d.mean),
                                    yaml_real(d.sigma));
      if (d.min != LengthDistribution{}.min) out += fmt::format(", min: {}", d.min);
      if (d.max != LengthDistribution{}.max) out += fmt::format(", max: {}", d.max);
      return out + "}";
    }
    case K::table: {
      std::vector<std::string> rows;
      for (const auto& [length, weight] : d.table)
        rows.push_back(fmt::format("[{}, {}]", length, yaml_real(weight)));
      return fmt::format("{{table: [{}]}}", join_list(rows));
    }
  }
  return std::to_string(d.value);
}

// ---------------------------------------------------------------------------
// Rates and times.

// The rate that reads back to `mean_s` (1 / rate): 1 / (1 / r) need not be r,
// so the neighbours of 1 / mean_s are tried for the one the reader inverts
// to exactly mean_s.
std::string write_rate(double mean_s) {
  const double first = 1.0 / mean_s;
  for (const double toward : {HUGE_VAL, 0.0}) {
    double r = first;
    for (int step = 0; step < 4; ++step, r = std::nextafter(r, toward)) {
      if (1.0 / r == mean_s) return format_rate(r);
    }
  }
  return format_rate(first);
}

// The longest time a serving study takes as input (about 116 days), so that
// simulated clocks stay far from where doubles lose whole seconds.
constexpr double kLongestTime = 1e7;

double read_positive_time(const Value& v, const std::string& example) {
  const double t = read_quantity(v, parse_duration, example);
  if (!(t > 0.0)) fail(v.loc(), v.path, fmt::format("must be above 0 s, e.g. {}", example));
  in_range(v, t, 0.0, kLongestTime, format_duration);
  return t;
}

bool is_open(const TrafficSpec& t) {
  return t.kind == TrafficSpec::Kind::open;
}
bool is_sessions(const TrafficSpec& t) {
  return t.kind == TrafficSpec::Kind::sessions;
}

constexpr Key<TrafficSpec> kTraffic[] = {
    {"seed", O, "whole number in [0, 2^64), default 0",
     "seeds every draw (arrivals, lengths, turns, think times); each purpose has its own stream",
     [](auto& v, auto& t, auto&) { t.seed = read_unsigned(v, UINT64_MAX, "7"); },
     [](auto& t) { return fmt::format("{}", t.seed); },
     [](auto& t) { return t.kind != TrafficSpec::Kind::trace; }},
    {"arrivals.process", O, "poisson | gamma | fixed (default poisson)",
     "open loop: how requests arrive: Poisson (exponential gaps), gamma gaps with a cv "
     "(burstier above 1), or evenly spaced",
     [](auto& v, auto& t, auto&) {
       const std::string p = read_choice(v, "process", {"poisson", "gamma", "fixed"});
       t.interarrival.kind = p == "gamma"   ? IntervalDistribution::Kind::gamma
                             : p == "fixed" ? IntervalDistribution::Kind::fixed
                                            : IntervalDistribution::Kind::exponential;
     },
     [](auto& t) {
       switch (t.interarrival.kind) {
         case IntervalDistribution::Kind::gamma:
           return std::string("gamma");
         case IntervalDistribution::Kind::fixed:
           return std::string("fixed");
         default:
           return std::string("poisson");
       }
     },
     is_open, 0, /*flow=*/true},
    {"arrivals.rate", O, "rate > 0: 2.5/s, 150/min, 9000/h (required with arrivals)",
     "open loop: mean arrivals per unit of time (the mean gap is 1 / rate)",
     [](auto& v, auto& t, auto&) {
       const double rate = read_quantity(v, parse_rate, "2.5/s");
       if (!(rate > 0.0) || !std::isfinite(1.0 / rate))
         fail(v.loc(), v.path, "must be above 0, e.g. 2.5/s (requests per second)");
       in_range(v, rate, 1.0 / kLongestTime, 1e9, format_rate);
       t.interarrival.mean_s = 1.0 / rate;
     },
     [](auto& t) { return write_rate(t.interarrival.mean_s); }, is_open},
    {"arrivals.cv", O, "number > 0 (process gamma: required)",
     "gamma: the gaps' standard deviation / mean (1 = Poisson; above 1 burstier)",
     [](auto& v, auto& t, auto&) {
       if (t.interarrival.kind != IntervalDistribution::Kind::gamma)
         fail(v.key_loc(), v.path,
              "cv belongs to process: gamma (a poisson process has cv 1, a fixed one 0); give "
              "process: gamma, or remove cv");
       t.interarrival.cv = read_real(v, "2");
       if (!(t.interarrival.cv > 0.0 && t.interarrival.cv <= 100.0))
         fail(v.loc(), v.path, "must be above 0 and at most 100, e.g. 2 (burstier than Poisson)");
     },
     [](auto& t) { return yaml_real(t.interarrival.cv); },
     [](auto& t) {
       return is_open(t) && t.interarrival.kind == IntervalDistribution::Kind::gamma;
     }},
    {"requests", O, "count 1..10000000 (open loop: required)", "open loop: requests sent",
     [](auto& v, auto& t, auto&) { t.requests = read_length_count(v, kMostRequests, "10000"); },
     [](auto& t) { return fmt::format("{}", t.requests); }, is_open},
    {"trace", O, "path to a CSV file (relative to the scenario's folder)",
     "a trace: one request per row (arrival_s, prompt_tokens, output_tokens, optional session), "
     "read and checked when the scenario loads",
     [](auto& v, auto& t, auto&) {
       const std::string given = read_string(v, "a CSV file such as traces/day1.csv");
       const std::filesystem::path p = checkpoint_path(given, v);
       std::error_code ec;
       if (!std::filesystem::exists(p, ec))
         fail(v.loc(), v.path,
              fmt::format("'{}' is not a file (looked for {}, relative to the current directory "
                          "and to the scenario's folder)",
                          given, p.string()));
       if (!std::filesystem::is_regular_file(p, ec))
         fail(v.loc(), v.path,
              fmt::format("{} is a folder or a device; expected a CSV file", p.string()));
       try {
         (void)serving::read_trace(p.string());
       } catch (const serving::TrafficError& e) {
         fail(v.loc(), v.path, e.what());
       }
       t.trace_file = p.string();
     },
     [](auto& t) { return yaml_string(t.trace_file); },
     [](auto& t) { return t.kind == TrafficSpec::Kind::trace; }},
    {"sessions", O, "count 1..1000000 (closed loop: required)",
     "closed loop: agents, each running its turns one after another",
     [](auto& v, auto& t, auto&) { t.sessions = read_length_count(v, kMostSessions, "64"); },
     [](auto& t) { return fmt::format("{}", t.sessions); }, is_sessions},
    {"turns", O, "length distribution of turns (closed loop: required)", "turns per session",
     [](auto& v, auto& t, auto&) { t.turns = read_length(v, kMostTurns, "20"); },
     [](auto& t) { return write_length(t.turns); }, is_sessions},
    {"prompt_tokens", O, "length distribution (required)",
     "prompt tokens of each request (open loop) or of each session's first turn",
     [](auto& v, auto& t, auto&) { t.prompt_tokens = read_length(v, kMostTokens, "2048"); },
     [](auto& t) { return write_length(t.prompt_tokens); },
     [](auto& t) { return is_open(t) || is_sessions(t); }},
    {"turn_prompt_tokens", O, "length distribution (closed loop: required)",
     "tokens each later turn adds to the session's context (tool output, the user's message)",
     [](auto& v, auto& t, auto&) { t.turn_prompt_tokens = read_length(v, kMostTokens, "400"); },
     [](auto& t) { return write_length(t.turn_prompt_tokens); }, is_sessions},
    {"output_tokens", O, "length distribution (required)",
     "tokens generated for each request or turn",
     [](auto& v, auto& t, auto&) { t.output_tokens = read_length(v, kMostTokens, "500"); },
     [](auto& t) { return write_length(t.output_tokens); },
     [](auto& t) { return is_open(t) || is_sessions(t); }},
    {"think_time.mean", O, "time > 0 (or fixed)",
     "closed loop: mean time from a turn's last token to the next turn; exponential, or gamma "
     "with cv",
     [](auto& v, auto& t, auto&) {
       t.think.kind = IntervalDistribution::Kind::exponential;
       t.think.mean_s = read_positive_time(v, "4 s");
     },
     [](auto& t) { return format_duration(t.think.mean_s); },
     [](auto& t) { return is_sessions(t) && t.think.kind != IntervalDistribution::Kind::fixed; }, 0,
     /*flow=*/true},
    {"think_time.cv", O, "number > 0 (with mean)",
     "think times drawn from a gamma with this standard deviation / mean",
     [](auto& v, auto& t, auto& ctx) {
       if (!ctx.mapping->has("mean"))
         fail(v.key_loc(), v.path, "cv needs mean, e.g. think_time: {mean: 4 s, cv: 0.5}");
       t.think.kind = IntervalDistribution::Kind::gamma;
       t.think.cv = read_real(v, "0.5");
       if (!(t.think.cv > 0.0 && t.think.cv <= 100.0))
         fail(v.loc(), v.path, "must be above 0 and at most 100, e.g. 0.5");
     },
     [](auto& t) { return yaml_real(t.think.cv); },
     [](auto& t) { return is_sessions(t) && t.think.kind == IntervalDistribution::Kind::gamma; }},
    {"think_time.fixed", O, "time >= 0 (instead of mean)", "the same think time every turn",
     [](auto& v, auto& t, auto& ctx) {
       if (ctx.mapping->has("mean"))
         fail(v.key_loc(), v.path,
              "give mean (random think times) or fixed (always the same), not both");
       t.think.kind = IntervalDistribution::Kind::fixed;
       t.think.mean_s =
           read_quantity_in(v, parse_duration, "2 s", 0.0, kLongestTime, format_duration);
     },
     [](auto& t) { return format_duration(t.think.mean_s); },
     [](auto& t) { return is_sessions(t) && t.think.kind == IntervalDistribution::Kind::fixed; }},
    {"ramp", O, "time, default 0 s", "closed loop: sessions start uniformly in [0, ramp)",
     [](auto& v, auto& t, auto&) {
       t.ramp_s = read_quantity_in(v, parse_duration, "10 s", 0.0, kLongestTime, format_duration);
     },
     [](auto& t) { return format_duration(t.ramp_s); }, is_sessions},
};

}  // namespace

std::span<const Key<TrafficSpec>> traffic_keys() {
  return kTraffic;
}

TrafficSpec read_traffic(const Value& v) {
  const Mapping m(v, top_keys(traffic_keys()));
  // The kind: exactly one of arrivals, trace and sessions.
  const TrafficKind* chosen = nullptr;
  for (const TrafficKind& k : kinds()) {
    const Value* given = m.find(std::string(k.key));
    if (given == nullptr) continue;
    if (chosen != nullptr)
      fail(given->key_loc(), given->path,
           fmt::format("give one kind of traffic, not both {} and {}: arrivals (open loop), "
                       "trace (a CSV file) or sessions (closed loop)",
                       chosen->key, k.key));
    chosen = &k;
  }
  if (chosen == nullptr)
    fail(v.loc(), v.path,
         "give one kind of traffic: arrivals (open loop, e.g. arrivals: {process: poisson, rate: "
         "2.5/s} with requests:), trace (a CSV file, e.g. trace: traces/day1.csv) or sessions "
         "(closed loop, e.g. sessions: 64 with turns:)");
  // Keys of another kind, then the kind's required keys.
  for (const std::string& key : m.keys()) {
    const Value* given = m.find(key);
    if (given == nullptr ||
        std::find(chosen->keys.begin(), chosen->keys.end(), key) != chosen->keys.end())
      continue;
    std::vector<std::string> owners;
    for (const TrafficKind& k : kinds()) {
      if (std::find(k.keys.begin(), k.keys.end(), key) != k.keys.end()) owners.emplace_back(k.name);
    }
    fail(given->key_loc(), given->path,
         fmt::format("{} belongs to {}, not to {}; {} takes {}", key, join_list(owners),
                     chosen->name, chosen->name, join_list(chosen->keys)));
  }
  for (const std::string& key : chosen->required) {
    if (!m.has(key))
      fail(v.key_loc(), join_path(v.path, key),
           fmt::format("missing required key '{}' for {}, e.g. {}", key, chosen->name,
                       example_of(key)));
  }
  TrafficSpec t;
  t.kind = chosen->kind;
  Provenance unused;
  read_keys(m, /*complete=*/true, traffic_keys(), t, unused, ReadContext{});
  if (const Value* arrivals = m.find("arrivals")) {
    const Mapping a(*arrivals, group_keys(traffic_keys(), "arrivals"));
    a.require("rate");
    if (t.interarrival.kind == IntervalDistribution::Kind::gamma) a.require("cv");
  }
  if (const Value* think = m.find("think_time")) {
    const Mapping th(*think, group_keys(traffic_keys(), "think_time"));
    if (!th.has("mean") && !th.has("fixed"))
      fail(think->loc(), think->path,
           "give mean (exponential think times, e.g. {mean: 4 s}; with cv: gamma) or fixed "
           "(e.g. {fixed: 2 s})");
  }
  return t;
}

}  // namespace wafersim::sim::schema
