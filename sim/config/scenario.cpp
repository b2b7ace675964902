// Scenario loading: YAML -> validated, resolved sim::Scenario.
//
// Strict in both directions (STYLE.md, "Configuration and errors"): every key
// is checked against the schema (unknown keys are errors with a did-you-mean),
// required keys must be present, quantities need explicit units, and
// impossible hardware or models are reported at the line that set the value,
// whether that line is in the scenario or in the preset file it refers to.
#include "sim/config/scenario.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "models/hf_config.hpp"
#include "sim/config/quantity.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;

namespace {

std::string format_error(const std::string& file, int line, int column, const std::string& key_path,
                         const std::string& what) {
  std::string out;
  if (!file.empty()) {
    out += file;
    if (line > 0) {
      out += fmt::format(":{}", line);
      if (column > 0) out += fmt::format(":{}", column);
    }
    out += ": ";
  }
  out += "error: ";
  if (!key_path.empty()) out += key_path + ": ";
  out += what;
  return out;
}

}  // namespace

ScenarioError::ScenarioError(std::string file, int line, int column, std::string key_path,
                             const std::string& what)
    : std::runtime_error(format_error(file, line, column, key_path, what)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_path_(std::move(key_path)) {}

const char* reduction_name(ReductionScheme s) {
  switch (s) {
    case ReductionScheme::chain:
      return "chain";
    case ReductionScheme::tree:
      return "tree";
    case ReductionScheme::two_level:
      return "two-level";
  }
  return "chain";
}

std::filesystem::path default_preset_dir() {
  if (const char* env = std::getenv("WAFERSIM_PRESETS"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef WAFERSIM_SCENARIO_DIR
  return WAFERSIM_SCENARIO_DIR;
#else
  return "scenarios";
#endif
}

namespace {

// ---------------------------------------------------------------------------
// Locations and messages.

// A position in a file, 1-based; line 0 means "the file as a whole".
struct Loc {
  std::string file;
  int line = 0;
  int column = 0;
};

// yaml-cpp marks are 0-based (BUILD-NOTES.md pitfall 5).
Loc at(const std::string& file, const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

[[noreturn]] void fail(const Loc& where, const std::string& key_path, const std::string& what) {
  throw ScenarioError(where.file, where.line, where.column, key_path, what);
}

std::string join_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Levenshtein distance, ignoring case.
std::size_t edit_distance(std::string_view a_in, std::string_view b_in) {
  const std::string a = lower(a_in);
  const std::string b = lower(b_in);
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "\n  did you mean 'sram'?" for the closest candidate, or "" when none is close:
// within a third of the longer word (at least 2 edits), or one contains the other.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  const std::string w = lower(word);
  for (const std::string& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    const std::size_t threshold = std::max<std::size_t>(2, std::max(word.size(), c.size()) / 3);
    const std::string lc = lower(c);
    const bool contains = std::min(w.size(), lc.size()) >= 3 &&
                          (w.find(lc) != std::string::npos || lc.find(w) != std::string::npos);
    if ((d <= threshold || contains) && d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  return best == nullptr ? std::string() : fmt::format("\n  did you mean '{}'?", *best);
}

// ---------------------------------------------------------------------------
// YAML values with their origin.

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Scalar:
      return n.Tag() == "!" ? fmt::format("the quoted string \"{}\"", n.Scalar())
                            : fmt::format("'{}'", n.Scalar());
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined value";
}

// A value from a YAML file, with its key path in the resolved scenario and
// where its key was written.
struct Value {
  YAML::Node node;
  std::string file;
  std::string path;     // e.g. "hardware.core.sram"
  YAML::Mark key_mark;  // the key's position (the node's own for a document)

  // Where the value is; for an empty value (`sram:`), where its key is.
  Loc loc() const {
    if (!node.IsNull()) {
      const YAML::Mark m = node.Mark();
      if (!m.is_null() && m.line >= 0) return at(file, m);
    }
    return at(file, key_mark);
  }
  Loc key_loc() const { return at(file, key_mark); }
  std::string leaf() const {
    const auto dot = path.rfind('.');
    return dot == std::string::npos ? path : path.substr(dot + 1);
  }
};

Value document(const YAML::Node& root, const std::string& file, const std::string& path) {
  return Value{root, file, path, root.Mark()};
}

// A mapping whose keys are checked against a fixed schema on construction:
// not a mapping, an unknown key or a duplicate key is an error.
class Mapping {
 public:
  Mapping(Value self, std::vector<std::string> keys)
      : self_(std::move(self)), keys_(std::move(keys)) {
    if (!self_.node.IsMap()) {
      fail(self_.loc(), self_.path,
           fmt::format("expected a mapping with keys {}, got {}", join_list(keys_),
                       describe(self_.node)));
    }
    for (auto it = self_.node.begin(); it != self_.node.end(); ++it) {
      const YAML::Node key = it->first;
      const Loc key_at = at(self_.file, key.Mark());
      if (!key.IsScalar()) {
        fail(key_at, self_.path,
             fmt::format("keys must be plain names, got {}; valid keys here: {}", describe(key),
                         join_list(keys_)));
      }
      const std::string name = key.Scalar();
      const std::string path = join_path(self_.path, name);
      if (std::find(keys_.begin(), keys_.end(), name) == keys_.end()) {
        fail(key_at, path,
             fmt::format("unknown key '{}'; valid keys here: {}{}", name, join_list(keys_),
                         did_you_mean(name, keys_)));
      }
      for (const auto& [seen, value] : entries_) {
        if (seen == name) {
          fail(key_at, path,
               fmt::format("duplicate key '{}'; it was already given on line {}", name,
                           value.key_loc().line));
        }
      }
      entries_.emplace_back(name, Value{it->second, self_.file, path, key.Mark()});
    }
  }

  const Value& self() const { return self_; }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const Value& get(const std::string& key) const { return *find(key); }

  // Missing keys are reported at the key that opens this mapping (line 1 for a file).
  const Value& require(const std::string& key) const {
    if (const Value* v = find(key)) return *v;
    fail(self_.key_loc(), join_path(self_.path, key),
         fmt::format("missing required key '{}'; this mapping takes {}", key, join_list(keys_)));
  }

 private:
  const Value* find(const std::string& key) const {
    for (const auto& [name, value] : entries_) {
      if (name == key) return &value;
    }
    return nullptr;
  }

  Value self_;
  std::vector<std::string> keys_;
  std::vector<std::pair<std::string, Value>> entries_;
};

// ---------------------------------------------------------------------------
// Scalar readers. Numbers must be plain (unquoted) YAML scalars.

const std::string& scalar_text(const Value& v, const std::string& expected) {
  if (!v.node.IsScalar()) {
    fail(v.loc(), v.path, fmt::format("expected {}, got {}", expected, describe(v.node)));
  }
  return v.node.Scalar();
}

bool is_plain(const Value& v) {
  return v.node.Tag() == "?";
}

std::string read_string(const Value& v, const std::string& expected = "a string") {
  const std::string& s = scalar_text(v, expected);
  if (s.empty()) fail(v.loc(), v.path, fmt::format("must not be empty; expected {}", expected));
  return s;
}

std::uint64_t read_unsigned(const Value& v, std::uint64_t max, const std::string& example) {
  const std::string expected = fmt::format("a whole number such as {}", example);
  const std::string& s = scalar_text(v, expected);
  if (!is_plain(v)) {
    fail(v.loc(), v.path,
         fmt::format("expected {}, got {}; write numbers without quotes", expected,
                     describe(v.node)));
  }
  std::uint64_t value = 0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (!s.empty() && s.front() == '-') {
    std::uint64_t magnitude = 0;
    const auto r = std::from_chars(first + 1, last, magnitude);
    if (r.ec == std::errc{} && r.ptr == last && magnitude != 0) {
      fail(v.loc(), v.path, fmt::format("cannot be negative (got {}); expected {}", s, expected));
    }
  }
  const auto r = std::from_chars(first, last, value);
  if (r.ec == std::errc::result_out_of_range ||
      (r.ec == std::errc{} && r.ptr == last && value > max)) {
    fail(v.loc(), v.path, fmt::format("{} is too large; at most {}", s, max));
  }
  if (r.ec != std::errc{} || r.ptr != last) {
    fail(v.loc(), v.path, fmt::format("expected {}, got {}", expected, describe(v.node)));
  }
  return value;
}

int read_count(const Value& v, const std::string& example) {
  return static_cast<int>(read_unsigned(v, static_cast<std::uint64_t>(INT_MAX), example));
}

double read_real(const Value& v, const std::string& example) {
  const std::string expected = fmt::format("a number such as {}", example);
  const std::string& s = scalar_text(v, expected);
  double value = 0.0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  if (!is_plain(v) || r.ec != std::errc{} || r.ptr != s.data() + s.size() ||
      !std::isfinite(value)) {
    fail(v.loc(), v.path, fmt::format("expected {}, got {}", expected, describe(v.node)));
  }
  return value;
}

bool read_bool(const Value& v) {
  const std::string& s = scalar_text(v, "true or false");
  if (is_plain(v)) {
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  fail(v.loc(), v.path, fmt::format("expected true or false, got {}", describe(v.node)));
}

template <class Parse>
auto read_quantity(const Value& v, Parse parse, const std::string& example) {
  if (!v.node.IsScalar()) {
    fail(v.loc(), v.path,
         fmt::format("expected a quantity with a unit such as {}, got {}", example,
                     describe(v.node)));
  }
  try {
    return parse(v.node.Scalar());
  } catch (const QuantityError& e) {
    fail(v.loc(), v.path, fmt::format("{} {}", v.leaf(), e.what()));
  }
}

// One of a fixed set of names, e.g. a precision or a reduction scheme.
std::string read_choice(const Value& v, const std::string& what,
                        const std::vector<std::string>& valid) {
  const std::string s = read_string(v, fmt::format("{}: one of {}", what, join_list(valid)));
  if (std::find(valid.begin(), valid.end(), s) == valid.end()) {
    fail(v.loc(), v.path,
         fmt::format("unknown {} '{}'; valid: {}{}", what, s, join_list(valid),
                     did_you_mean(s, valid)));
  }
  return s;
}

// A list of core coordinates, [[x, y], ...] (flow or block style).
std::vector<Coord> read_coords(const Value& v) {
  const std::string expected = "a list of [x, y] core coordinates such as [[3, 5], [10, 0]]";
  if (!v.node.IsSequence()) {
    fail(v.loc(), v.path, fmt::format("expected {}, got {}", expected, describe(v.node)));
  }
  std::vector<Coord> out;
  for (std::size_t i = 0; i < v.node.size(); ++i) {
    const YAML::Node n = v.node[i];
    const Value item{n, v.file, fmt::format("{}[{}]", v.path, i), n.Mark()};
    if (!n.IsSequence() || n.size() != 2) {
      fail(item.loc(), item.path, fmt::format("expected one core as [x, y], got {}", describe(n)));
    }
    const Value x{n[0], v.file, item.path + ".x", n[0].Mark()};
    const Value y{n[1], v.file, item.path + ".y", n[1].Mark()};
    out.push_back(Coord{read_count(x, "3"), read_count(y, "5")});
  }
  return out;
}

// ---------------------------------------------------------------------------
// Provenance: where each hardware/model field was last set (preset file or
// override), so that validate() errors point at the right line.

class Provenance {
 public:
  void note(const Value& v) { where_[v.path] = v.key_loc(); }

  // The location of `path`, or of its closest parent that was set.
  std::optional<Loc> find(std::string path) const {
    while (!path.empty()) {
      if (auto it = where_.find(path); it != where_.end()) return it->second;
      const auto dot = path.rfind('.');
      if (dot == std::string::npos) break;
      path.resize(dot);
    }
    return std::nullopt;
  }

 private:
  std::map<std::string, Loc> where_;
};

// Applies the keys present in a mapping to a config struct. With `complete`
// (a preset file or an inline description) every key is required; without it
// (overrides on top of a preset) only the given keys are read.
class Section {
 public:
  Section(const Mapping& m, bool complete, Provenance& prov)
      : m_(m), complete_(complete), prov_(prov) {}

  template <class Assign>
  void field(const std::string& key, Assign&& assign) {
    if (!m_.has(key)) {
      if (complete_) m_.require(key);
      return;
    }
    const Value& v = m_.get(key);
    prov_.note(v);
    assign(v);
  }

  template <class Assign>
  void optional_field(const std::string& key, Assign&& assign) {
    if (m_.has(key)) assign(m_.get(key));
  }

  template <class Body>
  void section(const std::string& key, std::vector<std::string> keys, Body&& body) {
    if (!m_.has(key)) {
      if (complete_) m_.require(key);
      return;
    }
    const Value& v = m_.get(key);
    prov_.note(v);
    const Mapping sub(v, std::move(keys));
    Section inner(sub, complete_, prov_);
    body(inner);
  }

 private:
  const Mapping& m_;
  bool complete_;
  Provenance& prov_;
};

// ---------------------------------------------------------------------------
// Hardware and model schemas.

const std::vector<std::string> kHardwareKeys = {"name",   "description", "mesh",
                                                "dies",   "core",        "router",
                                                "io",     "system_power", "defects"};
const std::vector<std::string> kModelKeys = {
    "name",           "description",       "architecture",   "hidden_size",
    "intermediate_size", "num_layers",     "num_heads",      "num_kv_heads",
    "head_dim",       "vocab_size",        "max_position",   "rope_theta",
    "rms_norm_eps",   "tie_embeddings",    "num_experts",    "experts_per_token",
    "attention_bias", "sliding_window"};
const std::vector<std::string> kScenarioKeys = {
    "name",    "hardware", "model",        "precision",       "placement",           "workload",
    "outputs", "wafers",   "compare_with", "gpu_parallelism", "speculative_decoding", "serving"};
const std::vector<std::string> kGpuClusterKeys = {"name",      "description", "gpu",  "scale_up",
                                                  "scale_out", "power",       "model"};

// ---------------------------------------------------------------------------
// Power ("23 kW") and FLOP rates ("989.4 TFLOPS"), for the GPU presets and the
// wafer's system power. Same rules as sim/config/quantity.hpp: explicit unit, no sign.

struct ScaledUnit {
  std::string_view name;
  double scale;
};

double parse_scaled(std::string_view text, std::span<const ScaledUnit> units,
                    std::string_view example) {
  std::string accepted;
  for (const ScaledUnit& u : units) accepted += (accepted.empty() ? "" : ", ") + std::string(u.name);
  std::size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  double value = 0.0;
  const auto r = std::from_chars(text.data() + i, text.data() + text.size(), value);
  if (r.ec != std::errc{} || !std::isfinite(value)) {
    throw QuantityError(fmt::format("expects a number and a unit, e.g. {}; accepted units: {}",
                                    example, accepted));
  }
  if (value < 0.0) throw QuantityError(fmt::format("cannot be negative, e.g. {}", example));
  std::string_view unit(r.ptr, static_cast<std::size_t>(text.data() + text.size() - r.ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  while (!unit.empty() && unit.back() == ' ') unit.remove_suffix(1);
  if (unit.empty()) {
    throw QuantityError(
        fmt::format("needs a unit, e.g. {}; accepted units: {}", example, accepted));
  }
  for (const ScaledUnit& u : units) {
    if (u.name == unit) return value * u.scale;
  }
  throw QuantityError(fmt::format("has an unknown unit '{}'; accepted units: {}", unit, accepted));
}

// The largest unit in which the value is at least 1, with the shortest digits
// that read back exactly; the base unit when no scaled spelling does.
std::string format_scaled(double v, std::span<const ScaledUnit> units) {
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    if (v < it->scale && it + 1 != units.rend()) continue;
    std::array<char, 64> buf{};
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v / it->scale);
    const std::string text = std::string(buf.data(), r.ptr) + " " + std::string(it->name);
    if (parse_scaled(text, units, "") == v) return text;
  }
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr) + " " + std::string(units.front().name);
}

// Units in increasing scale: the first is the base unit.
constexpr std::array<ScaledUnit, 3> kPowerUnits{{{"W", 1.0}, {"kW", 1e3}, {"MW", 1e6}}};
constexpr std::array<ScaledUnit, 4> kFlopUnits{
    {{"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15}}};

double parse_power(std::string_view text) { return parse_scaled(text, kPowerUnits, "23 kW"); }
double parse_flop_rate(std::string_view text) {
  return parse_scaled(text, kFlopUnits, "989.4 TFLOPS");
}
std::string format_power(double w) { return format_scaled(w, kPowerUnits); }
std::string format_flop_rate(double f) { return format_scaled(f, kFlopUnits); }

void apply_hardware(const Mapping& m, bool complete, fabric::WaferSpec& hw, Provenance& prov) {
  Section s(m, complete, prov);
  s.field("name", [&](const Value& v) { hw.name = read_string(v); });
  s.optional_field("description", [&](const Value& v) { read_string(v); });
  s.section("mesh", {"width", "height"}, [&](Section& mesh) {
    mesh.field("width", [&](const Value& v) { hw.mesh_width = read_count(v, "762"); });
    mesh.field("height", [&](const Value& v) { hw.mesh_height = read_count(v, "1176"); });
  });
  s.section("dies", {"x", "y"}, [&](Section& dies) {
    dies.field("x", [&](const Value& v) { hw.dies_x = read_count(v, "7"); });
    dies.field("y", [&](const Value& v) { hw.dies_y = read_count(v, "12"); });
  });
  s.section("core",
            {"clock", "sram", "simd_lanes_16bit", "simd_lanes_32bit", "sram_read_bandwidth",
             "task_overhead"},
            [&](Section& core) {
              core.field("clock", [&](const Value& v) {
                hw.clock_hz = read_quantity(v, parse_frequency, "1.1 GHz");
              });
              core.field("sram", [&](const Value& v) {
                hw.sram_per_core = read_quantity(v, parse_size, "48 KiB");
              });
              core.field("simd_lanes_16bit",
                         [&](const Value& v) { hw.simd_lanes_16bit = read_count(v, "8"); });
              core.field("simd_lanes_32bit",
                         [&](const Value& v) { hw.simd_lanes_32bit = read_count(v, "4"); });
              core.field("sram_read_bandwidth", [&](const Value& v) {
                hw.sram_read_bytes_per_cycle =
                    read_quantity(v, parse_bytes_per_cycle, "16 B/cycle");
              });
              core.field("task_overhead", [&](const Value& v) {
                hw.task_overhead = read_quantity(v, parse_cycles, "20 cycles");
              });
            });
  s.section("router", {"hop_latency", "link_bandwidth", "virtual_channels", "reduce_hop_overhead"},
            [&](Section& router) {
              router.field("hop_latency", [&](const Value& v) {
                hw.hop_latency = read_quantity(v, parse_cycles, "1 cycle");
              });
              router.field("link_bandwidth", [&](const Value& v) {
                hw.link_bytes_per_cycle = read_quantity(v, parse_bytes_per_cycle, "32 bit/cycle");
              });
              router.field("virtual_channels",
                           [&](const Value& v) { hw.virtual_channels = read_count(v, "24"); });
              router.field("reduce_hop_overhead", [&](const Value& v) {
                hw.reduce_hop_overhead = read_quantity(v, parse_cycles, "2 cycles");
              });
            });
  s.section("io", {"bandwidth", "latency"}, [&](Section& io) {
    io.field("bandwidth", [&](const Value& v) {
      hw.io_bandwidth_bytes_per_s = read_quantity(v, parse_data_rate, "1200 Gbit/s");
    });
    io.field("latency",
             [&](const Value& v) { hw.io_latency_s = read_quantity(v, parse_duration, "1 us"); });
  });
  s.optional_field("system_power", [&](const Value& v) {
    hw.system_power_w = read_quantity(v, parse_power, "23 kW");
  });
  // Optional everywhere (a preset without it has no dead cores); each key
  // inside is optional too, and over a preset replaces only itself.
  s.optional_field("defects", [&](const Value& v) {
    prov.note(v);
    const Mapping d(v, {"rate", "seed", "cores"});
    Section defects(d, /*complete=*/false, prov);
    defects.field("rate", [&](const Value& x) { hw.defect_rate = read_real(x, "0.001"); });
    defects.field("seed", [&](const Value& x) {
      hw.defect_seed = read_unsigned(x, std::numeric_limits<std::uint64_t>::max(), "7");
    });
    defects.field("cores", [&](const Value& x) { hw.defect_cores = read_coords(x); });
  });
}

void apply_model(const Mapping& m, bool complete, models::ModelConfig& model, Provenance& prov) {
  Section s(m, complete, prov);
  s.field("name", [&](const Value& v) { model.name = read_string(v); });
  s.optional_field("description", [&](const Value& v) { read_string(v); });
  s.field("architecture", [&](const Value& v) {
    model.architecture = models::parse_architecture(
        read_choice(v, "architecture", {"llama", "mistral", "qwen2", "qwen3", "mixtral", "gpt2"}));
  });
  s.field("hidden_size", [&](const Value& v) { model.hidden_size = read_count(v, "4096"); });
  s.field("intermediate_size",
          [&](const Value& v) { model.intermediate_size = read_count(v, "14336"); });
  s.field("num_layers", [&](const Value& v) { model.num_layers = read_count(v, "32"); });
  s.field("num_heads", [&](const Value& v) { model.num_heads = read_count(v, "32"); });
  s.field("num_kv_heads", [&](const Value& v) { model.num_kv_heads = read_count(v, "8"); });
  s.field("head_dim", [&](const Value& v) { model.head_dim = read_count(v, "128"); });
  s.field("vocab_size", [&](const Value& v) { model.vocab_size = read_count(v, "128256"); });
  s.field("max_position", [&](const Value& v) { model.max_position = read_count(v, "131072"); });
  s.field("rope_theta", [&](const Value& v) { model.rope_theta = read_real(v, "500000.0"); });
  s.field("rms_norm_eps", [&](const Value& v) { model.rms_norm_eps = read_real(v, "1.0e-5"); });
  s.field("tie_embeddings", [&](const Value& v) { model.tie_embeddings = read_bool(v); });
  // Architecture extras: optional everywhere, 0 / false when absent.
  auto extra = [&](const std::string& key, auto assign) {
    s.optional_field(key, [&](const Value& v) {
      prov.note(v);
      assign(v);
    });
  };
  extra("num_experts", [&](const Value& v) { model.num_experts = read_count(v, "8"); });
  extra("experts_per_token", [&](const Value& v) { model.experts_per_token = read_count(v, "2"); });
  extra("attention_bias", [&](const Value& v) { model.attention_bias = read_bool(v); });
  extra("sliding_window", [&](const Value& v) { model.sliding_window = read_count(v, "4096"); });
}

// ---------------------------------------------------------------------------
// Files and presets.

YAML::Node parse_file(const fs::path& path) {
  const std::string shown = path.string();
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail({shown, 0, 0}, "", "is a folder; expected a YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail({shown, 0, 0}, "", fmt::format("cannot open file: {}", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    fail(at(shown, e.mark), "",
         fmt::format("invalid YAML: {}; check the indentation, brackets and quotes here", e.msg));
  }
}

// Names of the presets of one kind: the *.yaml files of <preset_dir>/<folder>.
std::vector<std::string> preset_names(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".yaml" && it->is_regular_file(ec)) {
      names.push_back(it->path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_preset_name(const std::string& s) {
  if (s.empty() || s.front() == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// <preset_dir>/<folder>/<name>.yaml, or an error at `where` listing the presets there.
fs::path find_preset(const std::string& kind, const std::string& folder, const std::string& name,
                     const fs::path& preset_dir, const Loc& where, const std::string& key_path) {
  const fs::path dir = preset_dir / folder;
  const fs::path file = dir / (name + ".yaml");
  std::error_code ec;
  if (is_preset_name(name) && fs::is_regular_file(file, ec)) return file;
  const std::vector<std::string> names = preset_names(dir);
  if (names.empty()) {
    fail(where, key_path,
         fmt::format("unknown {} preset '{}'; no presets found in {}", kind, name, dir.string()));
  }
  fail(where, key_path,
       fmt::format("unknown {} preset '{}'; available presets: {}{}", kind, name, join_list(names),
                   did_you_mean(name, names)));
}

// Reads a preset file as a complete description. `root_path` is the key path
// its contents get in error messages ("hardware" inside a scenario, "" alone).
template <class Config, class Apply>
Config read_preset_file(const fs::path& file, const std::string& expected_name,
                        const std::string& root_path, const std::vector<std::string>& keys,
                        Apply apply, Provenance& prov) {
  const std::string shown = file.string();
  const YAML::Node root = parse_file(file);
  if (root.IsNull()) {
    fail({shown, 0, 0}, root_path,
         fmt::format("the preset file is empty; expected a mapping with keys {}", join_list(keys)));
  }
  const Mapping m(document(root, shown, root_path), keys);
  Config config;
  apply(m, /*complete=*/true, config, prov);
  const Value& name = m.get("name");
  if (read_string(name) != expected_name) {
    fail(name.loc(), name.path,
         fmt::format("preset name '{}' does not match its file name '{}.yaml'; presets are looked "
                     "up by file name, so the two must agree",
                     name.node.Scalar(), expected_name));
  }
  return config;
}

void validate_hardware(const fabric::WaferSpec& hw, const std::string& root_path,
                       const Provenance& prov, const Loc& fallback) {
  try {
    hw.validate();
  } catch (const fabric::SpecError& e) {
    const std::string path = join_path(root_path, e.field());
    fail(prov.find(path).value_or(fallback), path, e.what());
  }
}

void validate_model(const models::ModelConfig& model, const std::string& root_path,
                    const Provenance& prov, const Loc& fallback) {
  try {
    model.validate();
  } catch (const models::ConfigError& e) {
    const std::string path = join_path(root_path, e.field());
    fail(prov.find(path).value_or(fallback), path, e.what());
  }
}

// What one kind of preset needs to be resolved from a scenario.
template <class Config>
struct PresetKind {
  std::string kind;    // "hardware" / "model", for messages
  std::string folder;  // "hardware" / "models"
  std::string example;
  const std::vector<std::string>& keys;
  void (*apply)(const Mapping&, bool, Config&, Provenance&);
  void (*validate)(const Config&, const std::string&, const Provenance&, const Loc&);
};

const PresetKind<fabric::WaferSpec>& hardware_kind() {
  static const PresetKind<fabric::WaferSpec> k{"hardware",    "hardware",     "wse3",
                                               kHardwareKeys, apply_hardware, validate_hardware};
  return k;
}

const PresetKind<models::ModelConfig>& model_kind() {
  static const PresetKind<models::ModelConfig> k{"model",    "models",    "tiny-llama",
                                                 kModelKeys, apply_model, validate_model};
  return k;
}

// A fraction or ratio written as a plain number (0.8), checked by validate().
double read_ratio(const Value& v) { return read_real(v, "0.8"); }

void apply_cluster(const Mapping& m, bool complete, models::gpu::ClusterSpec& c, Provenance& prov) {
  Section s(m, complete, prov);
  s.field("name", [&](const Value& v) { c.name = read_string(v); });
  s.optional_field("description", [&](const Value& v) { c.description = read_string(v); });
  s.section("gpu",
            {"name", "tf32", "bf16", "fp8", "fp4", "hbm_capacity", "hbm_bandwidth", "l2", "power"},
            [&](Section& g) {
              g.field("name", [&](const Value& v) { c.gpu.name = read_string(v); });
              g.optional_field("tf32", [&](const Value& v) {
                c.gpu.tf32_flops = read_quantity(v, parse_flop_rate, "494.7 TFLOPS");
              });
              g.field("bf16", [&](const Value& v) {
                c.gpu.bf16_flops = read_quantity(v, parse_flop_rate, "989.4 TFLOPS");
              });
              g.optional_field("fp8", [&](const Value& v) {
                c.gpu.fp8_flops = read_quantity(v, parse_flop_rate, "1978.9 TFLOPS");
              });
              g.optional_field("fp4", [&](const Value& v) {
                c.gpu.fp4_flops = read_quantity(v, parse_flop_rate, "9 PFLOPS");
              });
              g.field("hbm_capacity", [&](const Value& v) {
                c.gpu.hbm_bytes = static_cast<double>(read_quantity(v, parse_size, "80 GB").value);
              });
              g.field("hbm_bandwidth", [&](const Value& v) {
                c.gpu.hbm_bandwidth = read_quantity(v, parse_data_rate, "3.35 TB/s");
              });
              g.optional_field("l2", [&](const Value& v) {
                c.gpu.l2_bytes = static_cast<double>(read_quantity(v, parse_size, "50 MB").value);
              });
              g.optional_field("power", [&](const Value& v) {
                c.gpu.power_w = read_quantity(v, parse_power, "700 W");
              });
            });
  s.section("scale_up", {"gpus", "bandwidth"}, [&](Section& u) {
    u.field("gpus", [&](const Value& v) { c.gpus_per_node = read_count(v, "8"); });
    u.field("bandwidth", [&](const Value& v) {
      c.scaleup_bandwidth = read_quantity(v, parse_data_rate, "450 GB/s");
    });
  });
  s.section("scale_out", {"max_nodes", "bandwidth", "latency"}, [&](Section& o) {
    o.field("max_nodes", [&](const Value& v) { c.max_nodes = read_count(v, "4"); });
    o.field("bandwidth", [&](const Value& v) {
      c.scaleout_bandwidth = read_quantity(v, parse_data_rate, "400 Gbit/s");
    });
    o.field("latency", [&](const Value& v) {
      c.scaleout_latency_s = read_quantity(v, parse_duration, "5 us");
    });
  });
  s.field("power", [&](const Value& v) { c.node_power_w = read_quantity(v, parse_power, "10.2 kW"); });
  s.section("model",
            {"memory_efficiency", "compute_efficiency", "allreduce_alpha", "per_layer_overhead",
             "memory_reserve"},
            [&](Section& p) {
              p.field("memory_efficiency",
                      [&](const Value& v) { c.params.memory_efficiency = read_ratio(v); });
              p.field("compute_efficiency",
                      [&](const Value& v) { c.params.compute_efficiency = read_ratio(v); });
              p.field("allreduce_alpha", [&](const Value& v) {
                c.params.allreduce_alpha_s = read_quantity(v, parse_duration, "5 us");
              });
              p.field("per_layer_overhead", [&](const Value& v) {
                c.params.per_layer_overhead_s = read_quantity(v, parse_duration, "10 us");
              });
              p.field("memory_reserve",
                      [&](const Value& v) { c.params.memory_reserve = read_ratio(v); });
            });
}

void validate_cluster(const models::gpu::ClusterSpec& c, const std::string& root_path,
                      const Provenance& prov, const Loc& fallback) {
  try {
    c.validate();
  } catch (const models::gpu::GpuSpecError& e) {
    const std::string path = join_path(root_path, e.field());
    fail(prov.find(path).value_or(fallback), path, e.what());
  }
}

const PresetKind<models::gpu::ClusterSpec>& gpu_kind() {
  static const PresetKind<models::gpu::ClusterSpec> k{
      "GPU system", "gpus", "dgx-h100", kGpuClusterKeys, apply_cluster, validate_cluster};
  return k;
}

template <class Config>
Config load_preset(const PresetKind<Config>& kind, const std::string& name,
                   const fs::path& preset_dir) {
  const fs::path file = find_preset(kind.kind, kind.folder, name, preset_dir,
                                    Loc{(preset_dir / kind.folder).string(), 0, 0}, "");
  Provenance prov;
  Config config = read_preset_file<Config>(file, name, "", kind.keys, kind.apply, prov);
  kind.validate(config, "", prov, Loc{file.string(), 1, 1});
  return config;
}

// `model:` naming a Hugging Face checkpoint rather than a preset: a value with
// a '/' (a folder holding config.json, e.g. ./my-model) or ending in .json.
bool is_checkpoint_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

// Relative to the current directory, else to the scenario file's folder.
models::ModelConfig read_checkpoint_config(const std::string& name, const Value& v) {
  fs::path path = name;
  std::error_code ec;
  if (path.is_relative() && !fs::exists(path, ec)) {
    const fs::path beside = fs::path(v.loc().file).parent_path() / path;
    if (fs::exists(beside, ec)) path = beside;
  }
  try {
    return models::load_hf_config(path);
  } catch (const models::HfConfigError& e) {
    fail(v.loc(), v.path, e.what());
  }
}

// A scenario's `hardware:` or `model:` value: a preset name, a preset with
// overrides ({preset: NAME, ...}), or a complete inline description.
template <class Config>
Config resolve(const PresetKind<Config>& kind, const Value& v, const fs::path& preset_dir,
               std::string& preset_name) {
  Provenance prov;
  Config config;
  auto from_preset = [&](const Value& name_value) {
    const std::string name = read_string(
        name_value, fmt::format("a {} preset name such as {}", kind.kind, kind.example));
    if constexpr (std::is_same_v<Config, models::ModelConfig>) {
      if (is_checkpoint_path(name)) {  // a Hugging Face checkpoint, not a preset
        config = read_checkpoint_config(name, name_value);
        preset_name = name;
        return;
      }
    }
    const fs::path file =
        find_preset(kind.kind, kind.folder, name, preset_dir, name_value.loc(), name_value.path);
    config = read_preset_file<Config>(file, name, v.path, kind.keys, kind.apply, prov);
    preset_name = name;
  };
  if (v.node.IsScalar()) {
    from_preset(v);
  } else if (v.node.IsMap()) {
    std::vector<std::string> keys = kind.keys;
    keys.insert(keys.begin(), "preset");
    const Mapping m(v, keys);
    if (m.has("preset")) {
      from_preset(m.get("preset"));
      kind.apply(m, /*complete=*/false, config, prov);
    } else {
      kind.apply(m, /*complete=*/true, config, prov);
      preset_name = "inline";
    }
  } else {
    fail(v.loc(), v.path,
         fmt::format("expected a {} preset name (e.g. {}) or a mapping, got {}", kind.kind,
                     kind.example, describe(v.node)));
  }
  kind.validate(config, v.path, prov, v.key_loc());
  return config;
}

// ---------------------------------------------------------------------------
// Placement, workload, outputs.

void read_placement(const Value& v, PlacementOptions& placement) {
  const Mapping m(v, {"strategy", "reduction", "block_rows", "seed", "anneal", "halo", "file",
                      "matrices"});
  if (m.has("strategy")) {
    placement.strategy =
        *parse_strategy(read_choice(m.get("strategy"), "placement strategy", placement_strategies()));
  }
  if (m.has("block_rows")) {
    const Value& rows = m.get("block_rows");
    placement.block_rows = read_count(rows, "2");
    if (placement.block_rows < 1 || placement.block_rows > 64)
      fail(rows.loc(), rows.path,
           "must be between 1 and 64 (rows of layer blocks, serpentine and sram-balanced)");
  }
  if (m.has("reduction")) {
    const std::string r =
        read_choice(m.get("reduction"), "reduction scheme", {"chain", "tree", "two-level"});
    placement.reduction = r == "tree"        ? ReductionScheme::tree
                          : r == "two-level" ? ReductionScheme::two_level
                                             : ReductionScheme::chain;
  }
  if (m.has("seed")) placement.seed = read_unsigned(m.get("seed"), UINT64_MAX, "1");
  if (m.has("anneal")) {
    const Value& av = m.get("anneal");
    const Mapping a(av, {"iterations", "initial_temperature", "final_temperature", "sram_weight",
                         "latency_weight", "spare_slots"});
    if (a.has("iterations")) {
      const Value& it = a.get("iterations");
      placement.anneal.iterations = read_count(it, "200000");
      if (placement.anneal.iterations < 1 || placement.anneal.iterations > 100000000)
        fail(it.loc(), it.path, "must be between 1 and 100000000 (moves per candidate grid)");
    }
    if (a.has("initial_temperature")) {
      const Value& t = a.get("initial_temperature");
      placement.anneal.initial_temperature = read_real(t, "0.1");
      if (!(placement.anneal.initial_temperature > 0.0))
        fail(t.loc(), t.path,
             "must be > 0 (a fraction of the mean per-layer cost of the starting assignment)");
    }
    if (a.has("final_temperature")) {
      const Value& t = a.get("final_temperature");
      placement.anneal.final_temperature = read_real(t, "0.0001");
      if (!(placement.anneal.final_temperature > 0.0) ||
          placement.anneal.final_temperature > placement.anneal.initial_temperature)
        fail(t.loc(), t.path,
             fmt::format("must be > 0 and at most initial_temperature ({})",
                         placement.anneal.initial_temperature));
    }
    if (a.has("sram_weight")) {
      const Value& t = a.get("sram_weight");
      placement.anneal.sram_weight = read_real(t, "0");
      if (placement.anneal.sram_weight < 0.0)
        fail(t.loc(), t.path, "must be >= 0 (hop-bytes per byte of the fullest core)");
    }
    if (a.has("latency_weight")) {
      const Value& t = a.get("latency_weight");
      placement.anneal.latency_weight = read_real(t, "1000");
      if (!(placement.anneal.latency_weight >= 0.0) ||
          !std::isfinite(placement.anneal.latency_weight))
        fail(t.loc(), t.path,
             "must be a finite number >= 0 (hop-bytes per cycle of estimated token latency)");
    }
    if (a.has("spare_slots")) {
      const Value& t = a.get("spare_slots");
      placement.anneal.spare_slots = read_real(t, "0.25");
      if (placement.anneal.spare_slots < 0.0 || placement.anneal.spare_slots > 1.0)
        fail(t.loc(), t.path, "must be between 0 and 1 (spare slots as a fraction of the layers)");
    }
    if (placement.strategy != StrategyKind::anneal)
      fail(av.key_loc(), av.path,
           fmt::format("anneal parameters given but strategy is '{}'; set strategy: anneal",
                       strategy_name(placement.strategy)));
  }
  if (m.has("matrices")) {
    const std::vector<std::string> kinds = {"qkv", "o", "gate_up", "down", "attention", "lm_head"};
    const Mapping mm(m.get("matrices"), kinds);
    for (const std::string& kind : kinds) {
      if (!mm.has(kind)) continue;
      const bool shaped = kind != "attention" && kind != "lm_head";
      const Mapping one(mm.get(kind), shaped ? std::vector<std::string>{"rows", "columns", "reduction"}
                                             : std::vector<std::string>{"reduction"});
      MatrixOverride ov;
      for (const char* key : {"rows", "columns"}) {
        if (!one.has(key)) continue;
        const Value& n = one.get(key);
        const int value = read_count(n, "8");
        if (value < 1) fail(n.loc(), n.path, "must be at least 1 (cores)");
        (std::string(key) == "rows" ? ov.rows : ov.columns) = value;
      }
      if (one.has("reduction")) {
        const std::string r =
            read_choice(one.get("reduction"), "reduction scheme", {"chain", "tree", "two-level"});
        ov.reduction = r == "tree"        ? ReductionScheme::tree
                       : r == "two-level" ? ReductionScheme::two_level
                                          : ReductionScheme::chain;
      }
      placement.matrices[kind] = ov;
    }
  }
  if (m.has("halo")) {
    const Mapping h(m.get("halo"), {"columns", "rows"});
    if (h.has("columns")) placement.halo.columns = read_count(h.get("columns"), "7");
    if (h.has("rows")) placement.halo.rows = read_count(h.get("rows"), "2");
  }
  if (m.has("file")) {
    // Relative to the scenario's folder; kept absolute so that the resolved
    // scenario written next to results still finds it.
    const Value& f = m.get("file");
    const fs::path given = read_string(f, "a placement file such as placement.yaml");
    placement.file =
        fs::absolute(given.is_absolute() ? given : fs::path(f.file).parent_path() / given)
            .lexically_normal()
            .string();
  }
}

// SplitMix64 (Steele, Lea, Flood 2014): the generator behind prompt_tokens.
// Its whole definition is here, so ids do not depend on the standard library.
std::uint64_t splitmix64(std::uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Prompt ids drawn from `seed`: the generator starts at seed XOR "prompt" (in
// ASCII) so that the prompt stream differs from anything else seeded with the
// same number; each draw maps to [0, vocab) by multiply-high (no modulo bias
// beyond 2^-64).
std::vector<std::int32_t> draw_prompt(int count, int vocab, std::uint64_t seed) {
  constexpr std::uint64_t kPromptStream = 0x70726F6D7074ull;  // "prompt"
  std::uint64_t state = seed ^ kPromptStream;
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const unsigned __int128 wide =
        static_cast<unsigned __int128>(splitmix64(state)) * static_cast<unsigned>(vocab);
    ids.push_back(static_cast<std::int32_t>(wide >> 64));
  }
  return ids;
}

void read_workload(const Value& v, const models::ModelConfig& model, Workload& w) {
  const Mapping m(v,
                  {"prompt_ids", "prompt_tokens", "generate_tokens", "seed", "users", "prefill_block"});
  const bool explicit_ids = m.has("prompt_ids");
  if (explicit_ids && m.has("prompt_tokens")) {
    const Value& count = m.get("prompt_tokens");
    fail(count.key_loc(), count.path,
         "give either prompt_ids (explicit token ids) or prompt_tokens (a count of ids drawn "
         "from the seed), not both");
  }
  if (!explicit_ids && !m.has("prompt_tokens")) {
    fail(v.key_loc(), join_path(v.path, "prompt_tokens"),
         "missing the prompt; give prompt_tokens (a count, e.g. prompt_tokens: 8) or prompt_ids "
         "(e.g. prompt_ids: [1, 2, 3])");
  }
  if (m.has("seed")) w.seed = read_unsigned(m.get("seed"), UINT64_MAX, "42");
  if (m.has("users")) {
    const Value& users = m.get("users");
    w.users = read_count(users, "4");
    if (w.users < 1 || w.users > 100000) {
      fail(users.loc(), users.path, "must be between 1 and 100000 (sequences decoded at once)");
    }
  }
  if (m.has("prefill_block")) {
    const Value& block = m.get("prefill_block");
    w.prefill_block = read_count(block, "32");
    if (w.prefill_block < 1 || w.prefill_block > 1000000) {
      fail(block.loc(), block.path,
           "must be between 1 and 1000000 (prompt tokens per block; 1 = token by token)");
    }
  }

  const Value& generate = m.require("generate_tokens");
  w.generate_tokens = read_count(generate, "16");
  if (w.generate_tokens < 1) {
    fail(generate.loc(), generate.path, "must be at least 1 (the number of tokens to decode)");
  }

  // The prompt: its length first, so that an absurd count fails before any drawing.
  const Value& prompt = m.get(explicit_ids ? "prompt_ids" : "prompt_tokens");
  std::vector<Value> id_values;
  long long prompt_length = 0;
  if (explicit_ids) {
    if (!prompt.node.IsSequence()) {
      fail(prompt.loc(), prompt.path,
           fmt::format("expected a list of token ids such as [1, 2, 3], got {}",
                       describe(prompt.node)));
    }
    std::size_t i = 0;
    for (auto it = prompt.node.begin(); it != prompt.node.end(); ++it, ++i) {
      id_values.push_back(
          Value{*it, prompt.file, fmt::format("{}[{}]", prompt.path, i), it->Mark()});
    }
    prompt_length = static_cast<long long>(id_values.size());
    if (prompt_length == 0) {
      fail(prompt.loc(), prompt.path, "needs at least one token id, e.g. [1, 2, 3]");
    }
  } else {
    prompt_length = read_count(prompt, "8");
    if (prompt_length < 1) fail(prompt.loc(), prompt.path, "must be at least 1 token");
  }

  const long long total = prompt_length + w.generate_tokens;
  if (total > model.max_position) {
    const std::string sum = fmt::format(
        "the prompt ({} tokens) + generate_tokens ({}) = {} tokens, more than "
        "max_position {} of model {}",
        prompt_length, w.generate_tokens, total, model.max_position, model.name);
    if (prompt_length >= model.max_position) {
      fail(prompt.loc(), prompt.path,
           fmt::format("{}; the prompt must be shorter than {} tokens", sum, model.max_position));
    }
    fail(generate.loc(), generate.path,
         fmt::format("{}; with this prompt generate_tokens can be at most {}", sum,
                     model.max_position - prompt_length));
  }

  if (explicit_ids) {
    w.prompt_ids.clear();
    for (const Value& id_value : id_values) {
      const int id = read_count(id_value, "42");
      if (id >= model.vocab_size) {
        fail(id_value.loc(), id_value.path,
             fmt::format("token id {} is out of range; ids must be in [0, {}) for model {} "
                         "(vocab_size {})",
                         id, model.vocab_size, model.name, model.vocab_size));
      }
      w.prompt_ids.push_back(id);
    }
  } else {
    w.prompt_ids = draw_prompt(static_cast<int>(prompt_length), model.vocab_size, w.seed);
  }
}

void read_outputs(const Value& v, Outputs& outputs) {
  const Mapping m(v, {"results", "functional"});
  if (m.has("results")) {
    outputs.results = read_string(m.get("results"), "a file path such as out/run.h5");
  }
  if (m.has("functional")) outputs.functional = read_bool(m.get("functional"));
}

// ---------------------------------------------------------------------------
// GPU baselines, speculative decoding and serving overhead.

// compare_with: a list of GPU systems, each a preset name, a preset with
// overrides or a complete inline description. Absent: the default systems
// whose presets exist in the preset dir (none when it has no gpus/ folder).
std::vector<models::gpu::ClusterSpec> read_compare_with(const Mapping& top,
                                                        const fs::path& preset_dir) {
  std::vector<models::gpu::ClusterSpec> out;
  if (!top.has("compare_with")) {
    std::error_code ec;
    for (const std::string& name : default_compare_with()) {
      if (fs::is_regular_file(preset_dir / "gpus" / (name + ".yaml"), ec))
        out.push_back(load_preset(gpu_kind(), name, preset_dir));
    }
    return out;
  }
  const Value& list = top.get("compare_with");
  if (!list.node.IsSequence()) {
    fail(list.loc(), list.path,
         fmt::format("expected a list of GPU systems such as [dgx-h100, dgx-b200] (or [] for "
                     "none), got {}",
                     describe(list.node)));
  }
  std::size_t i = 0;
  for (auto it = list.node.begin(); it != list.node.end(); ++it, ++i) {
    const Value item{*it, list.file, fmt::format("{}[{}]", list.path, i), it->Mark()};
    std::string preset_name;
    out.push_back(resolve(gpu_kind(), item, preset_dir, preset_name));
    for (std::size_t j = 0; j + 1 < out.size(); ++j) {
      if (out[j].name == out.back().name)
        fail(item.loc(), item.path, fmt::format("'{}' is listed twice", out.back().name));
    }
  }
  return out;
}

// A tensor- or pipeline-parallel size: a count >= 1, or auto (0).
int read_split(const Value& v) {
  if (v.node.IsScalar() && v.node.Scalar() == "auto" && is_plain(v)) return 0;
  const int n = read_count(v, "8");
  if (n < 1 || n > 4096) fail(v.loc(), v.path, "must be between 1 and 4096, or auto");
  return n;
}

void read_gpu_parallelism(const Value& v, GpuComparison& gpu) {
  const Mapping m(v, {"tp", "pp"});
  if (m.has("tp")) gpu.tp = read_split(m.get("tp"));
  if (m.has("pp")) gpu.pp = read_split(m.get("pp"));
}

SpeculativeOptions read_speculative(const Value& v, const fs::path& preset_dir,
                                    const models::ModelConfig& target) {
  const Mapping m(v, {"draft_model", "draft_tokens", "acceptance_rate"});
  SpeculativeOptions o;
  o.decoding.draft = resolve(model_kind(), m.require("draft_model"), preset_dir, o.draft_preset);
  const Value& gamma = m.require("draft_tokens");
  o.decoding.draft_tokens = read_count(gamma, "4");
  if (o.decoding.draft_tokens < 1 || o.decoding.draft_tokens > 64)
    fail(gamma.loc(), gamma.path, "must be between 1 and 64 (tokens the draft proposes per step)");
  const Value& alpha = m.require("acceptance_rate");
  o.decoding.acceptance_rate = read_real(alpha, "0.7");
  if (!(o.decoding.acceptance_rate >= 0.0 && o.decoding.acceptance_rate <= 1.0))
    fail(alpha.loc(), alpha.path, "must be between 0 and 1 (probability a draft token is accepted)");
  if (o.decoding.draft.vocab_size != target.vocab_size) {
    const Value& d = m.get("draft_model");
    fail(d.loc(), d.path,
         fmt::format("the draft's vocab_size {} differs from the target's {}; a draft must share "
                     "the target's tokenizer",
                     o.decoding.draft.vocab_size, target.vocab_size));
  }
  return o;
}

models::gpu::ServingOverhead read_serving(const Value& v) {
  const Mapping m(v, {"round_trip", "per_token_overhead", "connection_setup"});
  models::gpu::ServingOverhead o;
  if (m.has("round_trip"))
    o.round_trip_s = read_quantity(m.get("round_trip"), parse_duration, "50 ms");
  if (m.has("per_token_overhead"))
    o.per_token_overhead_s = read_quantity(m.get("per_token_overhead"), parse_duration, "1 ms");
  if (m.has("connection_setup"))
    o.connection_setup_s = read_quantity(m.get("connection_setup"), parse_duration, "200 ms");
  return o;
}

// ---------------------------------------------------------------------------
// The resolved scenario, as YAML that load_scenario() reads back to an equal Scenario.

bool yaml_reserved(const std::string& s) {
  static const std::array<std::string_view, 11> kWords = {
      "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~", "nan"};
  const std::string l = lower(s);
  return std::find(kWords.begin(), kWords.end(), l) != kWords.end();
}

// A string as a YAML scalar: plain when that is unambiguous, double-quoted otherwise.
std::string yaml_string(const std::string& s) {
  const bool plain = !s.empty() &&
                     (std::isalpha(static_cast<unsigned char>(s.front())) || s.front() == '_') &&
                     std::all_of(s.begin(), s.end(),
                                 [](char c) {
                                   return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                          c == '-' || c == '.' || c == '/';
                                 }) &&
                     !yaml_reserved(s);
  if (plain) return s;
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The shortest decimal that reads back as `v`, always with a '.' or an
// exponent: fixed notation for everyday magnitudes ("500000.0"), scientific
// for tiny or huge ones ("1e-05").
std::string yaml_real(double v) {
  std::array<char, 400> buf{};
  const double magnitude = std::fabs(v);
  const auto format = (magnitude == 0.0 || (magnitude >= 1e-4 && magnitude < 1e16))
                          ? std::chars_format::fixed
                          : std::chars_format::scientific;
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v, format);
  std::string s(buf.data(), r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string one_line(std::string s) {
  std::replace_if(
      s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return s;
}

// A draft model, inline, each line prefixed by `pad` (the keys of the `model:` block).
void emit_model_inline(std::string& o, const models::ModelConfig& m, const std::string& pad) {
  o += fmt::format("{}name: {}\n", pad, yaml_string(m.name));
  o += fmt::format("{}architecture: {}\n", pad, models::architecture_name(m.architecture));
  o += fmt::format("{}hidden_size: {}\n", pad, m.hidden_size);
  o += fmt::format("{}intermediate_size: {}\n", pad, m.intermediate_size);
  o += fmt::format("{}num_layers: {}\n", pad, m.num_layers);
  o += fmt::format("{}num_heads: {}\n", pad, m.num_heads);
  o += fmt::format("{}num_kv_heads: {}\n", pad, m.num_kv_heads);
  o += fmt::format("{}head_dim: {}\n", pad, m.head_dim);
  o += fmt::format("{}vocab_size: {}\n", pad, m.vocab_size);
  o += fmt::format("{}max_position: {}\n", pad, m.max_position);
  o += fmt::format("{}rope_theta: {}\n", pad, yaml_real(m.rope_theta));
  o += fmt::format("{}rms_norm_eps: {}\n", pad, yaml_real(m.rms_norm_eps));
  o += fmt::format("{}tie_embeddings: {}\n", pad, m.tie_embeddings ? "true" : "false");
  if (m.num_experts != 0) o += fmt::format("{}num_experts: {}\n", pad, m.num_experts);
  if (m.experts_per_token != 0)
    o += fmt::format("{}experts_per_token: {}\n", pad, m.experts_per_token);
  if (m.attention_bias) o += fmt::format("{}attention_bias: true\n", pad);
  if (m.sliding_window != 0) o += fmt::format("{}sliding_window: {}\n", pad, m.sliding_window);
}

// compare_with (every system inline), gpu_parallelism, speculative_decoding, serving.
void emit_comparison(std::string& o, const Scenario& s) {
  if (s.gpu.systems.empty()) o += "compare_with: []\n";
  else o += "compare_with:\n";
  for (const models::gpu::ClusterSpec& c : s.gpu.systems) {
    o += fmt::format("  - name: {}\n", yaml_string(c.name));
    if (!c.description.empty())
      o += fmt::format("    description: {}\n", yaml_string(one_line(c.description)));
    o += "    gpu:\n";
    o += fmt::format("      name: {}\n", yaml_string(c.gpu.name));
    if (c.gpu.tf32_flops > 0.0) o += fmt::format("      tf32: {}\n", format_flop_rate(c.gpu.tf32_flops));
    o += fmt::format("      bf16: {}\n", format_flop_rate(c.gpu.bf16_flops));
    if (c.gpu.fp8_flops > 0.0) o += fmt::format("      fp8: {}\n", format_flop_rate(c.gpu.fp8_flops));
    if (c.gpu.fp4_flops > 0.0) o += fmt::format("      fp4: {}\n", format_flop_rate(c.gpu.fp4_flops));
    o += fmt::format("      hbm_capacity: {}\n",
                     format_size(Bytes{static_cast<std::uint64_t>(c.gpu.hbm_bytes)}));
    o += fmt::format("      hbm_bandwidth: {}\n", format_data_rate(c.gpu.hbm_bandwidth));
    if (c.gpu.l2_bytes > 0.0)
      o += fmt::format("      l2: {}\n", format_size(Bytes{static_cast<std::uint64_t>(c.gpu.l2_bytes)}));
    if (c.gpu.power_w > 0.0) o += fmt::format("      power: {}\n", format_power(c.gpu.power_w));
    o += fmt::format("    scale_up:\n      gpus: {}\n      bandwidth: {}\n", c.gpus_per_node,
                     format_data_rate(c.scaleup_bandwidth));
    o += fmt::format("    scale_out:\n      max_nodes: {}\n      bandwidth: {}\n      latency: {}\n",
                     c.max_nodes, format_data_rate(c.scaleout_bandwidth),
                     format_duration(c.scaleout_latency_s));
    o += fmt::format("    power: {}\n", format_power(c.node_power_w));
    o += "    model:\n";
    o += fmt::format("      memory_efficiency: {}\n", yaml_real(c.params.memory_efficiency));
    o += fmt::format("      compute_efficiency: {}\n", yaml_real(c.params.compute_efficiency));
    o += fmt::format("      allreduce_alpha: {}\n", format_duration(c.params.allreduce_alpha_s));
    o += fmt::format("      per_layer_overhead: {}\n", format_duration(c.params.per_layer_overhead_s));
    o += fmt::format("      memory_reserve: {}\n", yaml_real(c.params.memory_reserve));
  }
  auto split = [](int n) { return n == 0 ? std::string("auto") : std::to_string(n); };
  o += fmt::format("gpu_parallelism:\n  tp: {}\n  pp: {}\n", split(s.gpu.tp), split(s.gpu.pp));
  if (s.speculative) {
    o += "speculative_decoding:\n  draft_model:\n";
    emit_model_inline(o, s.speculative->decoding.draft, "    ");
    o += fmt::format("  draft_tokens: {}\n", s.speculative->decoding.draft_tokens);
    o += fmt::format("  acceptance_rate: {}\n", yaml_real(s.speculative->decoding.acceptance_rate));
  }
  if (s.serving) {
    o += "serving:\n";
    o += fmt::format("  round_trip: {}\n", format_duration(s.serving->round_trip_s));
    o += fmt::format("  per_token_overhead: {}\n", format_duration(s.serving->per_token_overhead_s));
    o += fmt::format("  connection_setup: {}\n", format_duration(s.serving->connection_setup_s));
  }
}

std::string emit_resolved(const Scenario& s) {
  const fabric::WaferSpec& h = s.hardware;
  const models::ModelConfig& m = s.model;
  std::string o;
  o += "# Fully resolved scenario written by wafersim: presets expanded, defaults filled.\n";
  o += "# Loading this file reproduces the run.\n";
  o += fmt::format("# Source: {} (hardware preset: {}, model preset: {})\n",
                   one_line(s.source_file), s.hardware_preset, s.model_preset);
  o += fmt::format("name: {}\n", yaml_string(s.name));

  o += "hardware:\n";
  o += fmt::format("  name: {}\n", yaml_string(h.name));
  o += fmt::format("  mesh:\n    width: {}\n    height: {}\n", h.mesh_width, h.mesh_height);
  o += fmt::format("  dies:\n    x: {}\n    y: {}\n", h.dies_x, h.dies_y);
  o += "  core:\n";
  o += fmt::format("    clock: {}\n", format_frequency(h.clock_hz));
  o += fmt::format("    sram: {}\n", format_size(h.sram_per_core));
  o += fmt::format("    simd_lanes_16bit: {}\n", h.simd_lanes_16bit);
  o += fmt::format("    simd_lanes_32bit: {}\n", h.simd_lanes_32bit);
  o += fmt::format("    sram_read_bandwidth: {}\n",
                   format_bytes_per_cycle(h.sram_read_bytes_per_cycle));
  o += fmt::format("    task_overhead: {}\n", format_cycles(h.task_overhead));
  o += "  router:\n";
  o += fmt::format("    hop_latency: {}\n", format_cycles(h.hop_latency));
  o += fmt::format("    link_bandwidth: {}\n", format_bits_per_cycle(h.link_bytes_per_cycle));
  o += fmt::format("    virtual_channels: {}\n", h.virtual_channels);
  o += fmt::format("    reduce_hop_overhead: {}\n", format_cycles(h.reduce_hop_overhead));
  o += "  io:\n";
  o += fmt::format("    bandwidth: {}\n", format_data_rate(h.io_bandwidth_bytes_per_s));
  o += fmt::format("    latency: {}\n", format_duration(h.io_latency_s));
  if (h.system_power_w > 0.0) o += fmt::format("  system_power: {}\n", format_power(h.system_power_w));
  if (h.defect_rate > 0.0 || h.defect_seed != 0 || !h.defect_cores.empty()) {
    o += "  defects:\n";
    o += fmt::format("    rate: {}\n", h.defect_rate);
    o += fmt::format("    seed: {}\n", h.defect_seed);
    o += "    cores: [";
    for (std::size_t i = 0; i < h.defect_cores.size(); ++i)
      o += fmt::format("{}[{}, {}]", i ? ", " : "", h.defect_cores[i].x, h.defect_cores[i].y);
    o += "]\n";
  }

  o += "model:\n";
  o += fmt::format("  name: {}\n", yaml_string(m.name));
  o += fmt::format("  architecture: {}\n", models::architecture_name(m.architecture));
  o += fmt::format("  hidden_size: {}\n", m.hidden_size);
  o += fmt::format("  intermediate_size: {}\n", m.intermediate_size);
  o += fmt::format("  num_layers: {}\n", m.num_layers);
  o += fmt::format("  num_heads: {}\n", m.num_heads);
  o += fmt::format("  num_kv_heads: {}\n", m.num_kv_heads);
  o += fmt::format("  head_dim: {}\n", m.head_dim);
  o += fmt::format("  vocab_size: {}\n", m.vocab_size);
  o += fmt::format("  max_position: {}\n", m.max_position);
  o += fmt::format("  rope_theta: {}\n", yaml_real(m.rope_theta));
  o += fmt::format("  rms_norm_eps: {}\n", yaml_real(m.rms_norm_eps));
  o += fmt::format("  tie_embeddings: {}\n", m.tie_embeddings ? "true" : "false");
  if (m.num_experts != 0) o += fmt::format("  num_experts: {}\n", m.num_experts);
  if (m.experts_per_token != 0)
    o += fmt::format("  experts_per_token: {}\n", m.experts_per_token);
  if (m.attention_bias) o += "  attention_bias: true\n";
  if (m.sliding_window != 0) o += fmt::format("  sliding_window: {}\n", m.sliding_window);

  o += fmt::format("precision: {}\n", models::dtype_name(s.precision));
  o += s.wafers_auto ? std::string("wafers: auto\n") : fmt::format("wafers: {}\n", s.wafers);
  o += "placement:\n";
  o += fmt::format("  strategy: {}\n", yaml_string(strategy_name(s.placement.strategy)));
  o += fmt::format("  reduction: {}\n", reduction_name(s.placement.reduction));
  o += fmt::format("  block_rows: {}\n", s.placement.block_rows);
  if (s.placement.strategy == StrategyKind::anneal) {
    o += fmt::format("  seed: {}\n", s.placement.seed);
    o += fmt::format(
        "  anneal: {{iterations: {}, initial_temperature: {}, final_temperature: {}, "
        "sram_weight: {}, latency_weight: {}, spare_slots: {}}}\n",
        s.placement.anneal.iterations, s.placement.anneal.initial_temperature,
        s.placement.anneal.final_temperature, s.placement.anneal.sram_weight,
        s.placement.anneal.latency_weight, s.placement.anneal.spare_slots);
  }
  if (s.placement.halo.columns != 0 || s.placement.halo.rows != 0)
    o += fmt::format("  halo: {{columns: {}, rows: {}}}\n", s.placement.halo.columns,
                     s.placement.halo.rows);
  if (!s.placement.file.empty()) o += fmt::format("  file: {}\n", yaml_string(s.placement.file));
  if (!s.placement.matrices.empty()) {
    o += "  matrices:\n";
    for (const auto& [kind, ov] : s.placement.matrices) {
      std::vector<std::string> parts;
      if (ov.rows > 0) parts.push_back(fmt::format("rows: {}", ov.rows));
      if (ov.columns > 0) parts.push_back(fmt::format("columns: {}", ov.columns));
      if (ov.reduction) parts.push_back(fmt::format("reduction: {}", reduction_name(*ov.reduction)));
      o += fmt::format("    {}: {{{}}}\n", kind, fmt::format("{}", fmt::join(parts, ", ")));
    }
  }

  o += "workload:\n";
  // A flow list, wrapped so that long prompts stay readable.
  std::string ids = "  prompt_ids: [";
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < s.workload.prompt_ids.size(); ++i) {
    std::string item = std::to_string(s.workload.prompt_ids[i]);
    if (i + 1 < s.workload.prompt_ids.size()) item += ",";
    if (i > 0) {
      if (ids.size() - line_start + 1 + item.size() > 96) {
        ids += "\n    ";
        line_start = ids.size() - 4;
      } else {
        ids += " ";
      }
    }
    ids += item;
  }
  o += ids + "]\n";
  o += fmt::format("  generate_tokens: {}\n", s.workload.generate_tokens);
  o += fmt::format("  seed: {}\n", s.workload.seed);
  o += fmt::format("  users: {}\n", s.workload.users);
  o += fmt::format("  prefill_block: {}\n", s.workload.prefill_block);

  o += "outputs:\n";
  if (s.outputs.results) o += fmt::format("  results: {}\n", yaml_string(*s.outputs.results));
  o += fmt::format("  functional: {}\n", s.outputs.functional ? "true" : "false");
  emit_comparison(o, s);
  return o;
}

}  // namespace

std::string suggest_name(const std::string& word, const std::vector<std::string>& candidates) {
  return did_you_mean(word, candidates);
}

// ---------------------------------------------------------------------------

fabric::WaferSpec load_hardware_preset(const std::string& name, const fs::path& preset_dir) {
  return load_preset(hardware_kind(), name, preset_dir);
}

models::ModelConfig load_model_preset(const std::string& name, const fs::path& preset_dir) {
  return load_preset(model_kind(), name, preset_dir);
}

models::gpu::ClusterSpec load_gpu_preset(const std::string& name, const fs::path& preset_dir) {
  return load_preset(gpu_kind(), name, preset_dir);
}

Scenario load_scenario(const fs::path& file, const fs::path& preset_dir) {
  return load_scenario(file, preset_dir, ScenarioOverrides{});
}

Scenario load_scenario(const fs::path& file, const fs::path& preset_dir,
                       const ScenarioOverrides& overrides) {
  const std::string shown = file.string();
  YAML::Node root = parse_file(file);
  if (root.IsMap()) {
    // Each override is read as YAML text, exactly as if it stood in the file.
    auto as_yaml = [](const std::string& text) {
      try {
        return YAML::Load(text);
      } catch (const YAML::Exception&) {
        return YAML::Node(text);
      }
    };
    if (overrides.hardware) root["hardware"] = as_yaml(*overrides.hardware);
    if (overrides.model) root["model"] = as_yaml(*overrides.model);
    if (overrides.precision) root["precision"] = as_yaml(*overrides.precision);
    if (overrides.wafers) root["wafers"] = as_yaml(*overrides.wafers);
    if (overrides.users && root["workload"].IsMap())
      root["workload"]["users"] = as_yaml(std::to_string(*overrides.users));
    if (overrides.placement_file) {
      // Given relative to the current directory: made absolute here, as the
      // scenario's own `file:` is resolved against the scenario's folder.
      const std::string abs = fs::absolute(*overrides.placement_file).lexically_normal().string();
      if (!root["placement"].IsMap()) root["placement"] = YAML::Node(YAML::NodeType::Map);
      root["placement"]["file"] = as_yaml(abs);
    }
  }
  if (root.IsNull()) {
    fail({shown, 0, 0}, "",
         "the file is empty; a scenario needs at least name, hardware, model and workload");
  }
  const Mapping top(document(root, shown, ""), kScenarioKeys);

  Scenario s;
  s.source_file = shown;
  s.name = read_string(top.require("name"), "a scenario name");
  s.hardware = resolve(hardware_kind(), top.require("hardware"), preset_dir, s.hardware_preset);
  s.model = resolve(model_kind(), top.require("model"), preset_dir, s.model_preset);
  if (top.has("precision")) {
    s.precision = models::parse_dtype(
        read_choice(top.get("precision"), "precision",
                    {"fp32", "fp16", "bf16", "fp8", "fp8_e4m3", "int8"}));
  }
  if (top.has("wafers")) {
    const Value& w = top.get("wafers");
    if (w.node.IsScalar() && w.node.Scalar() == "auto") {
      s.wafers_auto = true;
    } else {
      s.wafers = read_count(w, "4");
      if (s.wafers < 1 || s.wafers > 1024)
        fail(w.loc(), w.path, "must be between 1 and 1024, or auto (the fewest that fit)");
    }
  }
  if (top.has("placement")) read_placement(top.get("placement"), s.placement);
  read_workload(top.require("workload"), s.model, s.workload);
  if (top.has("outputs")) read_outputs(top.get("outputs"), s.outputs);
  s.gpu.systems = read_compare_with(top, preset_dir);
  if (top.has("gpu_parallelism")) read_gpu_parallelism(top.get("gpu_parallelism"), s.gpu);
  if (top.has("speculative_decoding"))
    s.speculative = read_speculative(top.get("speculative_decoding"), preset_dir, s.model);
  if (top.has("serving")) s.serving = read_serving(top.get("serving"));
  s.resolved_yaml = emit_resolved(s);
  return s;
}

std::vector<std::int32_t> user_prompt(const Workload& w, int u, int vocab_size) {
  std::vector<std::int32_t> ids = w.prompt_ids;
  const auto shift = static_cast<std::int64_t>(u) * 7919;
  for (std::int32_t& id : ids) id = static_cast<std::int32_t>((id + shift) % vocab_size);
  return ids;
}

}  // namespace wafersim::sim
