// Strict YAML, the one reader behind scenarios, presets and placement files:
// values that remember their file, key path and position; mappings checked
// against the keys they take (unknown keys with a did-you-mean, duplicates,
// missing keys); scalar readers that want plain numbers and explicit units;
// and the scalar spellings the resolved scenario is written with.
//
// Every error is a ScenarioError at file:line:column with the key path.
// Private to sim/config (the only library that reads YAML).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fabric/units.hpp"
#include "sim/config/quantity.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim::sim::yaml {

// ---------------------------------------------------------------------------
// Locations and messages.

// A position in a file, 1-based; line 0 means "the file as a whole".
struct Loc {
  std::string file;
  int line = 0;
  int column = 0;
};

// yaml-cpp marks are 0-based (BUILD-NOTES.md pitfall 5).
Loc at(const std::string& file, const YAML::Mark& m);

[[noreturn]] void fail(const Loc& where, const std::string& key_path, const std::string& what);

std::string join_path(const std::string& parent, const std::string& key);
std::string join_list(const std::vector<std::string>& items);
std::string lower(std::string_view s);

// "\n  did you mean 'sram'?" for the closest candidate, or "" when none is close:
// within a third of the longer word (at least 2 edits), or one contains the other.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// "nothing", "'8.5'", "the quoted string \"24\"", "a list", "a mapping".
std::string describe(const YAML::Node& n);

// ---------------------------------------------------------------------------
// Values and mappings.

// A value from a YAML file, with its key path in the resolved scenario and
// where its key was written.
struct Value {
  YAML::Node node;
  std::string file;
  std::string path;     // e.g. "hardware.core.sram"
  YAML::Mark key_mark;  // the key's position (the node's own for a document)

  // Where the value is; for an empty value (`sram:`), where its key is.
  Loc loc() const;
  Loc key_loc() const { return at(file, key_mark); }
  // Where the node itself is, even an empty one (placement files report there).
  Loc node_loc() const { return at(file, node.Mark()); }
  // The last key of the path: "sram" for "hardware.core.sram".
  std::string leaf() const;
  // Element i of a list, its path "path[i]".
  Value item(std::size_t i) const;
};

// A whole document (or an override parsed on its own) as a value at `path`.
Value document(const YAML::Node& root, const std::string& file, const std::string& path);

// How a mapping reports what is wrong with its keys. Scenarios and presets use
// the defaults; placement files keep the wording they have always had.
struct KeyRules {
  // A key given twice, or a key that is not a plain name, is an error (else
  // the first of duplicates counts and a non-scalar key is an unknown one).
  bool strict_keys = true;
  // "expected a mapping with keys ..., got a list" at the value, or without
  // the ", got ..." at the node itself.
  bool say_what_was_given = true;
  // More to say after an unknown key's did-you-mean ("" for nothing).
  std::function<std::string(const std::string&)> unknown_key_note;
};

// A mapping whose keys are checked against a fixed list on construction:
// not a mapping, an unknown key or a duplicate key is an error.
class Mapping {
 public:
  Mapping(Value self, std::vector<std::string> keys, const KeyRules& rules = {});

  const Value& self() const { return self_; }
  const std::vector<std::string>& keys() const { return keys_; }
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const Value& get(const std::string& key) const { return *find(key); }
  const Value* find(const std::string& key) const;

  // Missing keys are reported at the key that opens this mapping (line 1 for a file).
  const Value& require(const std::string& key) const;

 private:
  Value self_;
  std::vector<std::string> keys_;
  std::vector<std::pair<std::string, Value>> entries_;
};

// ---------------------------------------------------------------------------
// Scalar readers. Numbers must be plain (unquoted) YAML scalars.

// The scalar's text, or an error "expected <expected>, got ...".
const std::string& scalar_text(const Value& v, const std::string& expected);
bool is_plain(const Value& v);  // not quoted, no tag

std::string read_string(const Value& v, const std::string& expected = "a string");
std::uint64_t read_unsigned(const Value& v, std::uint64_t max, const std::string& example);
int read_count(const Value& v, const std::string& example);    // 0..INT_MAX
double read_real(const Value& v, const std::string& example);  // finite
bool read_bool(const Value& v);

// A quantity with a unit, parsed by `parse` (sim/config/quantity.hpp); a
// QuantityError becomes "<leaf> needs a unit, e.g. ...".
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

// `value` (read from `v`) if it lies in [lo, hi]; otherwise an error at `v`
// naming the value (as written) and the valid range (written by `show`, the
// canonical spelling of its unit). Every numeric scenario input has such a
// range (docs/scenario-schema.md, "Valid ranges"): generous enough for
// what-if hardware, tight enough that derived figures cannot overflow.
//
// With `zero_later`, a zero passes here: validate() refuses it once presets
// and overrides have merged (an override may fix a preset's zero).
template <class T, class Show>
T in_range(const Value& v, T value, T lo, T hi, Show show, bool zero_later = false) {
  if (zero_later && value == T{}) return value;
  if (value < lo || value > hi || value != value) {
    // The value as the user wrote it (a canonical spelling of 1e-300 Hz would be 300 digits).
    fail(v.loc(), v.path,
         fmt::format("{} is out of range; valid: {} to {}",
                     v.node.IsScalar() ? v.node.Scalar() : show(value), show(lo), show(hi)));
  }
  return value;
}

// A count in [lo, hi] (or 0, with zero_later).
int read_count_in(const Value& v, int lo, int hi, const std::string& example,
                  bool zero_later = false);

// A quantity with a unit (as read_quantity) in [lo, hi], shown by `show`.
template <class Parse, class T, class Show>
T read_quantity_in(const Value& v, Parse parse, const std::string& example, T lo, T hi, Show show,
                   bool zero_later = false) {
  return in_range<T>(v, read_quantity(v, parse, example), lo, hi, show, zero_later);
}

// One of a fixed set of names, e.g. a precision or a reduction scheme.
std::string read_choice(const Value& v, const std::string& what,
                        const std::vector<std::string>& valid);

// A list of core coordinates, [[x, y], ...] (flow or block style).
std::vector<Coord> read_coords(const Value& v);

// The YAML document of a file; a missing file, a folder, a device, invalid
// UTF-8, invalid YAML, a second document or a tag is an error.
YAML::Node parse_file(const std::filesystem::path& path);
// The same for text already read (`shown` names it in errors).
YAML::Node parse_text(const std::string& text, const std::string& shown);

// ---------------------------------------------------------------------------
// Writing: scalars that read back to the same value.

// A string as a YAML scalar: plain when that is unambiguous, double-quoted otherwise.
std::string yaml_string(const std::string& s);
// The shortest decimal that reads back as `v`, always with a '.' or an
// exponent: fixed notation for everyday magnitudes ("500000.0"), scientific
// for tiny or huge ones ("1e-05").
std::string yaml_real(double v);
std::string yaml_bool(bool b);
// Line breaks as spaces (a free-text value or a path on one comment line).
std::string one_line(std::string s);

}  // namespace wafersim::sim::yaml
