// Traffic: the seeded generator (SplitMix64 and the draws built on it), the
// three kinds of traffic and the trace reader. docs/scenario-schema.md,
// "Traffic", describes the streams and draws.
#include "sim/serving/traffic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string_view>
#include <system_error>
#include <unordered_map>

namespace wafersim::sim::serving {

namespace {

// ---------------------------------------------------------------------------
// The generator. Its whole definition is here (no <random> engines or
// distributions, whose output differs between standard libraries), so the
// same spec gives the same sessions everywhere.

// SplitMix64's output function (Steele, Lea, Flood 2014).
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// What a stream is for, in ASCII: each purpose draws from its own stream, so
// changing one distribution leaves the others' draws as they were.
constexpr std::uint64_t kArrivalStream = 0x6172726976616Cull;     // "arrival"
constexpr std::uint64_t kPromptStream = 0x70726F6D7074ull;        // "prompt"
constexpr std::uint64_t kOutputStream = 0x6F7574707574ull;        // "output"
constexpr std::uint64_t kThinkStream = 0x7468696E6Bull;           // "think"
constexpr std::uint64_t kTurnsStream = 0x7475726E73ull;           // "turns"
constexpr std::uint64_t kTurnPromptStream = 0x7475726E70726Dull;  // "turnprm"
constexpr std::uint64_t kStartStream = 0x7374617274ull;           // "start"

// One stream of draws: SplitMix64 from a state derived from the seed, the
// purpose and an index (a closed-loop session's number, 0 for open traffic).
// The index is mixed in, not added: SplitMix64 states a multiple of its
// increment apart would be the same stream shifted.
class Stream {
 public:
  Stream(std::uint64_t seed, std::uint64_t purpose, std::uint64_t index = 0)
      : state_(mix64(mix64(seed ^ purpose) ^ mix64(index + 1))) {}

  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }
  // [0, 1) from 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // (0, 1): never 0, for logarithms.
  double uniform_open() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  // [low, high], by multiply-high (bias below 2^-32 for any span of ints).
  int uniform_int(int low, int high) {
    const auto span = static_cast<std::uint64_t>(static_cast<long long>(high) - low + 1);
    const auto wide = static_cast<unsigned __int128>(next()) * span;
    return static_cast<int>(low + static_cast<long long>(wide >> 64));
  }
  // Standard normal, Marsaglia's polar method (no trigonometry).
  double normal() {
    for (;;) {
      const double u = 2.0 * uniform() - 1.0;
      const double v = 2.0 * uniform() - 1.0;
      const double s = u * u + v * v;
      if (s > 0.0 && s < 1.0) return u * std::sqrt(-2.0 * std::log(s) / s);
    }
  }
  double exponential(double mean) { return -mean * std::log(uniform_open()); }
  // Gamma with shape k and scale theta (mean k theta): Marsaglia and Tsang
  // (2000), with the boost U^(1/k) for k < 1.
  double gamma(double k, double theta) {
    if (k < 1.0) {
      const double g = gamma(k + 1.0, theta);
      return g * std::pow(uniform_open(), 1.0 / k);
    }
    const double d = k - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      const double x = normal();
      double v = 1.0 + c * x;
      if (v <= 0.0) continue;
      v = v * v * v;
      const double u = uniform_open();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * theta;
      if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * theta;
    }
  }

 private:
  std::uint64_t state_;
};

// ---------------------------------------------------------------------------
// Checks of a spec built in code (the scenario loader checks its own with
// the key and line; these catch the rest).

[[noreturn]] void bad_spec(const std::string& what) {
  throw TrafficError("traffic: " + what);
}

void check(const LengthDistribution& d, std::string_view name) {
  using K = LengthDistribution::Kind;
  switch (d.kind) {
    case K::fixed:
      if (d.value < 1) bad_spec(fmt::format("{} must be at least 1, not {}", name, d.value));
      break;
    case K::uniform:
      if (d.low < 1 || d.high < d.low)
        bad_spec(fmt::format("{}: uniform bounds [{}, {}] must have 1 <= low <= high", name, d.low,
                             d.high));
      break;
    case K::lognormal:
      if (!(std::isfinite(d.mean) && d.mean > 0.0 && std::isfinite(d.sigma) && d.sigma >= 0.0))
        bad_spec(fmt::format("{}: lognormal needs a finite mean > 0 and sigma >= 0", name));
      if (d.min < 1 || d.max < d.min)
        bad_spec(fmt::format("{}: clamps [{}, {}] must have 1 <= min <= max", name, d.min, d.max));
      break;
    case K::table:
      if (d.table.empty()) bad_spec(fmt::format("{}: the table has no rows", name));
      for (const auto& [length, weight] : d.table) {
        if (length < 1 || !(std::isfinite(weight) && weight > 0.0))
          bad_spec(fmt::format("{}: table rows need a length >= 1 and a weight > 0", name));
      }
      break;
  }
}

void check(const IntervalDistribution& d, std::string_view name) {
  if (!(std::isfinite(d.mean_s) && d.mean_s >= 0.0))
    bad_spec(fmt::format("{}: the mean must be a finite time >= 0", name));
  if (d.kind != IntervalDistribution::Kind::fixed && !(d.mean_s > 0.0))
    bad_spec(fmt::format("{}: a random interval needs a mean above 0", name));
  if (d.kind == IntervalDistribution::Kind::gamma && !(std::isfinite(d.cv) && d.cv > 0.0))
    bad_spec(fmt::format("{}: gamma needs a cv above 0", name));
}

// Draws of one length distribution (the table's cumulative weights once).
class LengthDraw {
 public:
  explicit LengthDraw(const LengthDistribution& d) : d_(d) {
    if (d.kind == LengthDistribution::Kind::lognormal)
      mu_ = std::log(d.mean) - 0.5 * d.sigma * d.sigma;
    double sum = 0.0;
    for (const auto& row : d.table) cumulative_.push_back(sum += row.second);
  }

  int operator()(Stream& s) const {
    using K = LengthDistribution::Kind;
    switch (d_.kind) {
      case K::fixed:
        return d_.value;
      case K::uniform:
        return s.uniform_int(d_.low, d_.high);
      case K::lognormal: {
        const double x = std::exp(mu_ + d_.sigma * s.normal());
        // Clamped before rounding (the clamps are whole, so this is the
        // rounded draw clamped) so that a huge draw never overflows an int.
        const double clamped = std::clamp(std::nearbyint(std::min(x, 4.0e9)),
                                          static_cast<double>(d_.min), static_cast<double>(d_.max));
        return static_cast<int>(clamped);
      }
      case K::table: {
        const double u = s.uniform() * cumulative_.back();
        const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
        const auto row = std::min<std::size_t>(static_cast<std::size_t>(it - cumulative_.begin()),
                                               d_.table.size() - 1);
        return d_.table[row].first;
      }
    }
    return d_.value;
  }

 private:
  const LengthDistribution& d_;
  double mu_ = 0.0;
  std::vector<double> cumulative_;
};

double draw_interval(const IntervalDistribution& d, Stream& s) {
  switch (d.kind) {
    case IntervalDistribution::Kind::exponential:
      return s.exponential(d.mean_s);
    case IntervalDistribution::Kind::gamma: {
      const double cv2 = d.cv * d.cv;  // shape 1/cv^2, scale mean cv^2
      return s.gamma(1.0 / cv2, d.mean_s * cv2);
    }
    case IntervalDistribution::Kind::fixed:
      return d.mean_s;
  }
  return d.mean_s;
}

std::vector<Session> open_sessions(const TrafficSpec& spec) {
  if (spec.requests < 1)
    bad_spec(fmt::format("requests must be at least 1, not {}", spec.requests));
  check(spec.interarrival, "arrivals");
  check(spec.prompt_tokens, "prompt_tokens");
  check(spec.output_tokens, "output_tokens");
  Stream arrivals(spec.seed, kArrivalStream);
  Stream prompts(spec.seed, kPromptStream);
  Stream outputs(spec.seed, kOutputStream);
  const LengthDraw prompt(spec.prompt_tokens);
  const LengthDraw output(spec.output_tokens);
  std::vector<Session> out(static_cast<std::size_t>(spec.requests));
  double t = 0.0;
  for (int i = 0; i < spec.requests; ++i) {
    t += draw_interval(spec.interarrival, arrivals);
    Session& s = out[static_cast<std::size_t>(i)];
    s.id = i;
    s.turns.push_back(Turn{t, prompt(prompts), output(outputs)});
  }
  return out;
}

std::vector<Session> closed_sessions(const TrafficSpec& spec) {
  if (spec.sessions < 1)
    bad_spec(fmt::format("sessions must be at least 1, not {}", spec.sessions));
  if (!(std::isfinite(spec.ramp_s) && spec.ramp_s >= 0.0))
    bad_spec("ramp must be a finite time >= 0");
  check(spec.turns, "turns");
  check(spec.prompt_tokens, "prompt_tokens");
  check(spec.turn_prompt_tokens, "turn_prompt_tokens");
  check(spec.output_tokens, "output_tokens");
  check(spec.think, "think_time");
  const LengthDraw turns(spec.turns);
  const LengthDraw prompt(spec.prompt_tokens);
  const LengthDraw turn_prompt(spec.turn_prompt_tokens);
  const LengthDraw output(spec.output_tokens);
  std::vector<Session> out(static_cast<std::size_t>(spec.sessions));
  for (int i = 0; i < spec.sessions; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    Stream start(spec.seed, kStartStream, index);
    Stream count(spec.seed, kTurnsStream, index);
    Stream prompts(spec.seed, kPromptStream, index);
    Stream turn_prompts(spec.seed, kTurnPromptStream, index);
    Stream outputs(spec.seed, kOutputStream, index);
    Stream thinks(spec.seed, kThinkStream, index);
    Session& s = out[static_cast<std::size_t>(i)];
    s.id = i;
    s.closed_loop = true;
    const int n = turns(count);
    s.turns.reserve(static_cast<std::size_t>(n));
    s.turns.push_back(Turn{start.uniform() * spec.ramp_s, prompt(prompts), output(outputs)});
    for (int k = 1; k < n; ++k) {
      const double think = draw_interval(spec.think, thinks);
      s.turns.push_back(Turn{think, turn_prompt(turn_prompts), output(outputs)});
    }
  }
  // By start, ties in the order drawn; then numbered in that order.
  std::stable_sort(out.begin(), out.end(), [](const Session& a, const Session& b) {
    return a.turns.front().at_s < b.turns.front().at_s;
  });
  for (std::size_t i = 0; i < out.size(); ++i) out[i].id = static_cast<int>(i);
  return out;
}

// ---------------------------------------------------------------------------
// Traces.

enum class Column { arrival_s, prompt_tokens, output_tokens, session };
constexpr std::string_view kColumnNames[] = {"arrival_s", "prompt_tokens", "output_tokens",
                                             "session"};
constexpr std::string_view kColumnExamples[] = {"0.25", "2048", "500", "s7"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  for (;;) {
    const std::size_t comma = line.find(',');
    out.push_back(trim(line.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    line.remove_prefix(comma + 1);
  }
}

std::string valid_columns() {
  return "arrival_s, prompt_tokens, output_tokens and, optionally, session";
}

struct TraceRow {
  double arrival_s = 0.0;
  int prompt_tokens = 1;
  int output_tokens = 1;
  std::string session;  // "" = a request of its own
  int line = 0;
};

class TraceReader {
 public:
  explicit TraceReader(std::string path) : path_(std::move(path)) {}

  std::vector<TraceRow> read() {
    std::error_code ec;
    if (std::filesystem::is_directory(path_, ec))
      fail_file("is a folder, not a trace file (a CSV file is expected)");
    std::ifstream in(path_, std::ios::binary);
    if (!in) fail_file("cannot open the trace file (no such file, or not readable)");
    std::string line;
    int number = 0;
    bool header = false;
    std::vector<TraceRow> rows;
    while (std::getline(in, line)) {
      ++number;
      std::string_view text = line;
      if (number == 1 && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a BOM
      if (trim(text).empty()) continue;
      if (!header) {
        read_header(text, number);
        header = true;
        continue;
      }
      rows.push_back(read_row(text, number));
    }
    if (!header)
      fail_file(
          fmt::format("is empty; its first line must name the columns, e.g. {}", header_example()));
    if (rows.empty())
      fail_file(fmt::format("has a header but no requests; add rows such as {}", row_example()));
    return rows;
  }

 private:
  [[noreturn]] void fail_file(const std::string& what) const {
    throw TrafficError(fmt::format("{}: {}", path_, what));
  }
  [[noreturn]] void fail_line(int line, const std::string& what) const {
    throw TrafficError(fmt::format("{}:{}: {}", path_, line, what));
  }
  [[noreturn]] void fail_field(int line, Column c, std::string_view field,
                               const std::string& what) const {
    fail_line(line, fmt::format("column {}: '{}' {}; a valid row looks like {}",
                                kColumnNames[static_cast<int>(c)], field, what, row_example()));
  }

  std::string header_example() const { return "arrival_s,prompt_tokens,output_tokens,session"; }

  // A row in this file's order of columns (the canonical one before the header is read).
  std::string row_example() const {
    std::string out;
    const std::vector<Column> order =
        columns_.empty() ? std::vector<Column>{Column::arrival_s, Column::prompt_tokens,
                                               Column::output_tokens, Column::session}
                         : columns_;
    for (const Column c : order) {
      if (!out.empty()) out += ',';
      out += kColumnExamples[static_cast<int>(c)];
    }
    return out;
  }

  void read_header(std::string_view text, int line) {
    for (const std::string_view name : split_fields(text)) {
      const auto* it = std::find(std::begin(kColumnNames), std::end(kColumnNames), name);
      if (it == std::end(kColumnNames)) {
        fail_line(line,
                  fmt::format("unknown column '{}' in the header; valid columns: {} (e.g. {})",
                              name, valid_columns(), header_example()));
      }
      const auto c = static_cast<Column>(it - std::begin(kColumnNames));
      if (std::find(columns_.begin(), columns_.end(), c) != columns_.end())
        fail_line(line, fmt::format("the header names column '{}' twice", name));
      columns_.push_back(c);
    }
    for (const Column c : {Column::arrival_s, Column::prompt_tokens, Column::output_tokens}) {
      if (std::find(columns_.begin(), columns_.end(), c) == columns_.end()) {
        fail_line(line, fmt::format("the header has no column '{}'; it must name {} (e.g. {})",
                                    kColumnNames[static_cast<int>(c)], valid_columns(),
                                    header_example()));
      }
    }
  }

  TraceRow read_row(std::string_view text, int line) const {
    const std::vector<std::string_view> fields = split_fields(text);
    if (fields.size() != columns_.size()) {
      std::string names;
      for (const Column c : columns_) {
        if (!names.empty()) names += ", ";
        names += kColumnNames[static_cast<int>(c)];
      }
      fail_line(line, fmt::format("{} {} where the header names {} ({}); a valid row looks like {}",
                                  fields.size(), fields.size() == 1 ? "field" : "fields",
                                  columns_.size(), names, row_example()));
    }
    TraceRow row;
    row.line = line;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const std::string_view f = fields[i];
      switch (columns_[i]) {
        case Column::arrival_s:
          row.arrival_s = read_time(f, line);
          break;
        case Column::prompt_tokens:
        case Column::output_tokens: {
          const int n = read_tokens(f, line, columns_[i]);
          (columns_[i] == Column::prompt_tokens ? row.prompt_tokens : row.output_tokens) = n;
          break;
        }
        case Column::session:
          row.session = std::string(f);
          break;
      }
    }
    return row;
  }

  double read_time(std::string_view f, int line) const {
    double v = 0.0;
    const auto r = std::from_chars(f.data(), f.data() + f.size(), v);
    if (r.ec == std::errc::result_out_of_range)
      fail_field(line, Column::arrival_s, f, "is out of range (seconds from the trace's start)");
    if (f.empty() || r.ec != std::errc{} || r.ptr != f.data() + f.size())
      fail_field(line, Column::arrival_s, f, "is not a number of seconds");
    if (!std::isfinite(v)) fail_field(line, Column::arrival_s, f, "is not a finite number");
    if (v < 0.0)
      fail_field(line, Column::arrival_s, f,
                 "is negative; arrival times are seconds from the trace's start, >= 0");
    return v;
  }

  int read_tokens(std::string_view f, int line, Column c) const {
    int v = 0;
    const auto r = std::from_chars(f.data(), f.data() + f.size(), v);
    if (r.ec == std::errc::result_out_of_range && r.ptr == f.data() + f.size())
      fail_field(line, c, f, fmt::format("is out of range (a token count, 1..{})", INT_MAX));
    if (f.empty() || r.ec != std::errc{} || r.ptr != f.data() + f.size())
      fail_field(line, c, f, "is not a whole number of tokens");
    if (v < 1) fail_field(line, c, f, "must be at least 1 token");
    return v;
  }

  std::string path_;
  std::vector<Column> columns_;
};

}  // namespace

double LengthDistribution::expected() const {
  switch (kind) {
    case Kind::fixed:
      return value;
    case Kind::uniform:
      return 0.5 * (static_cast<double>(low) + static_cast<double>(high));
    case Kind::table: {
      double sum = 0.0;
      double weights = 0.0;
      for (const auto& [length, weight] : table) {
        sum += length * weight;
        weights += weight;
      }
      return weights > 0.0 ? sum / weights : 0.0;
    }
    case Kind::lognormal: {
      const double a = min;
      const double b = max;
      if (!(sigma > 0.0)) return std::clamp(std::nearbyint(mean), a, b);
      // X = exp(mu + sigma Z), E[X] = mean. E[clamp(X, a, b)] = a P(X < a)
      // + E[X; a <= X <= b] + b P(X > b), with E[X; X < c] = mean
      // Phi((ln c - mu - sigma^2) / sigma).
      const double mu = std::log(mean) - 0.5 * sigma * sigma;
      auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
      const double za = (std::log(a) - mu) / sigma;
      const double zb = (std::log(b) - mu) / sigma;
      return a * phi(za) + mean * (phi(zb - sigma) - phi(za - sigma)) + b * (1.0 - phi(zb));
    }
  }
  return value;
}

std::vector<Session> generate_sessions(const TrafficSpec& spec) {
  switch (spec.kind) {
    case TrafficSpec::Kind::open:
      return open_sessions(spec);
    case TrafficSpec::Kind::sessions:
      return closed_sessions(spec);
    case TrafficSpec::Kind::trace:
      return read_trace(spec.trace_file);
  }
  return {};
}

std::vector<Session> read_trace(const std::string& path) {
  std::vector<TraceRow> rows = TraceReader(path).read();
  std::stable_sort(rows.begin(), rows.end(),
                   [](const TraceRow& a, const TraceRow& b) { return a.arrival_s < b.arrival_s; });
  // Sessions in order of their first request (rows are in arrival order).
  std::vector<Session> out;
  std::vector<long long> context;  // tokens each session's context holds after its last turn
  std::unordered_map<std::string, std::size_t> by_name;
  for (const TraceRow& row : rows) {
    std::size_t index = out.size();
    if (!row.session.empty()) {
      const auto [it, added] = by_name.emplace(row.session, out.size());
      index = it->second;
    }
    if (index == out.size()) {
      out.push_back(Session{static_cast<int>(index), false, {}});
      context.push_back(0);
    }
    // A prompt longer than the context built so far extends it (the context
    // is reused); otherwise the turn starts afresh with its whole prompt.
    const long long built = context[index];
    const int added_tokens =
        row.prompt_tokens > built ? static_cast<int>(row.prompt_tokens - built) : row.prompt_tokens;
    out[index].turns.push_back(
        Turn{row.arrival_s, added_tokens, row.output_tokens, row.prompt_tokens > built});
    context[index] = static_cast<long long>(row.prompt_tokens) + row.output_tokens;
  }
  return out;
}

}  // namespace wafersim::sim::serving
