#include "sim/config/strict_yaml.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

namespace wafersim::sim::yaml {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Locations and messages.

Loc at(const std::string& file, const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

void fail(const Loc& where, const std::string& key_path, const std::string& what) {
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

namespace {

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

}  // namespace

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

// ---------------------------------------------------------------------------
// Values and mappings.

Loc Value::loc() const {
  if (!node.IsNull()) {
    const YAML::Mark m = node.Mark();
    if (!m.is_null() && m.line >= 0) return at(file, m);
  }
  return at(file, key_mark);
}

std::string Value::leaf() const {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

Value Value::item(std::size_t i) const {
  const YAML::Node n = node[i];
  return Value{n, file, fmt::format("{}[{}]", path, i), n.Mark()};
}

Value document(const YAML::Node& root, const std::string& file, const std::string& path) {
  return Value{root, file, path, root.Mark()};
}

Mapping::Mapping(Value self, std::vector<std::string> keys, const KeyRules& rules)
    : self_(std::move(self)), keys_(std::move(keys)) {
  if (!self_.node.IsMap()) {
    if (!rules.say_what_was_given) {
      fail(self_.node_loc(), self_.path,
           fmt::format("expected a mapping with keys {}", join_list(keys_)));
    }
    fail(self_.loc(), self_.path,
         fmt::format("expected a mapping with keys {}, got {}", join_list(keys_),
                     describe(self_.node)));
  }
  for (auto it = self_.node.begin(); it != self_.node.end(); ++it) {
    const YAML::Node key = it->first;
    const Loc key_at = at(self_.file, key.Mark());
    if (!key.IsScalar() && rules.strict_keys) {
      fail(key_at, self_.path,
           fmt::format("keys must be plain names, got {}; valid keys here: {}", describe(key),
                       join_list(keys_)));
    }
    const std::string name = key.Scalar();
    const std::string path = join_path(self_.path, name);
    if (std::find(keys_.begin(), keys_.end(), name) == keys_.end()) {
      fail(key_at, path,
           fmt::format("unknown key '{}'; valid keys here: {}{}{}", name, join_list(keys_),
                       did_you_mean(name, keys_),
                       rules.unknown_key_note ? rules.unknown_key_note(name) : std::string()));
    }
    if (rules.strict_keys) {
      for (const auto& [seen, value] : entries_) {
        if (seen == name) {
          fail(key_at, path,
               fmt::format("duplicate key '{}'; it was already given on line {}", name,
                           value.key_loc().line));
        }
      }
    } else if (find(name) != nullptr) {
      continue;  // the first one counts, as yaml-cpp's lookup has it
    }
    entries_.emplace_back(name, Value{it->second, self_.file, path, key.Mark()});
  }
}

const Value* Mapping::find(const std::string& key) const {
  for (const auto& [name, value] : entries_) {
    if (name == key) return &value;
  }
  return nullptr;
}

const Value& Mapping::require(const std::string& key) const {
  if (const Value* v = find(key)) return *v;
  fail(self_.key_loc(), join_path(self_.path, key),
       fmt::format("missing required key '{}'; this mapping takes {}", key, join_list(keys_)));
}

// ---------------------------------------------------------------------------
// Scalar readers.

const std::string& scalar_text(const Value& v, const std::string& expected) {
  if (!v.node.IsScalar()) {
    fail(v.loc(), v.path, fmt::format("expected {}, got {}", expected, describe(v.node)));
  }
  return v.node.Scalar();
}

bool is_plain(const Value& v) {
  return v.node.Tag() == "?";
}

std::string read_string(const Value& v, const std::string& expected) {
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

int read_count_in(const Value& v, int lo, int hi, const std::string& example, bool zero_later) {
  return in_range<int>(
      v, read_count(v, example), lo, hi, [](int n) { return std::to_string(n); }, zero_later);
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

namespace {

// The first byte of `text` that is not UTF-8 (overlong forms, surrogates and
// code points past U+10FFFF included), or npos.
std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    int more = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      more = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      more = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      more = 3;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + static_cast<std::size_t>(more) >= text.size()) return i;  // cut short
    for (int k = 1; k <= more; ++k) {
      const auto d = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((d & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (d & 0x3F);
    }
    const std::uint32_t least[] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[more] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += static_cast<std::size_t>(more) + 1;
  }
  return std::string_view::npos;
}

// Tags (`!!int abc`, `!foo`) change what a value means behind the reader's
// back: errors. A quoted scalar's "!" and a plain node's "?" are not tags.
// Nesting and aliases are bounded, so a hostile file cannot exhaust the stack
// or expand without end.
void check_no_tags(const YAML::Node& n, const std::string& file, int depth, long& budget) {
  if (--budget < 0) fail({file, 0, 0}, "", "too many values (aliases expand to over a million)");
  if (depth > 200) fail(at(file, n.Mark()), "", "nested more than 200 levels deep");
  const std::string& tag = n.Tag();
  if (!tag.empty() && tag != "?" && tag != "!") {
    fail(at(file, n.Mark()), "",
         fmt::format("YAML tags are not supported (found '{}'); write the value plainly, "
                     "numbers without quotes and strings with them where needed",
                     tag));
  }
  if (n.IsSequence()) {
    for (const YAML::Node& item : n) check_no_tags(item, file, depth + 1, budget);
  } else if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      check_no_tags(it->first, file, depth + 1, budget);
      check_no_tags(it->second, file, depth + 1, budget);
    }
  }
}

}  // namespace

namespace {

// Where a second document starts, if the text has one: the event parser
// asked for at most two documents, recording only their starts.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) second_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  std::optional<YAML::Mark> second() const { return second_; }

 private:
  int documents_ = 0;
  std::optional<YAML::Mark> second_;
};

std::optional<YAML::Mark> second_document(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  for (int i = 0; i < 2 && parser.HandleNextDocument(starts); ++i) {
  }
  return starts.second();
}

}  // namespace

YAML::Node parse_text(const std::string& text, const std::string& shown) {
  if (const std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    const std::string_view before(text.data(), bad);
    const int line = 1 + static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    const std::size_t line_start = before.rfind('\n');
    const int column =
        1 + static_cast<int>(line_start == std::string_view::npos ? bad : bad - line_start - 1);
    fail({shown, line, column}, "",
         fmt::format("invalid UTF-8 (byte 0x{:02x}); save the file as UTF-8",
                     static_cast<unsigned char>(text[bad])));
  }
  // One document, then a bounded look for a second: yaml-cpp 0.7's LoadAll
  // never ends on some malformed input (an empty flow-mapping entry, "{,"),
  // making empty documents until memory runs out.
  YAML::Node document;
  std::optional<YAML::Mark> second;
  try {
    document = YAML::Load(text);
    second = second_document(text);
  } catch (const YAML::Exception& e) {
    fail(at(shown, e.mark), "",
         fmt::format("invalid YAML: {}; check the indentation, brackets and quotes here", e.msg));
  }
  if (second) {
    // A real second document starts with "---" (or "..." before it); any
    // other text where the parser stopped is YAML it could not read.
    const std::size_t pos = static_cast<std::size_t>(std::max(0, second->pos));
    const std::string_view rest = std::string_view(text).substr(std::min(pos, text.size()));
    if (rest.rfind("---", 0) == 0 || rest.rfind("...", 0) == 0)
      fail(at(shown, *second), "", "a second YAML document (after ---); a file holds one document");
    fail(at(shown, *second), "",
         "invalid YAML: the document cannot go on here; check the indentation, brackets and "
         "quotes here and on the line before");
  }
  long budget = 1'000'000;
  check_no_tags(document, shown, 0, budget);
  return document;
}

YAML::Node parse_file(const fs::path& path) {
  const std::string shown = path.string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::directory)
    fail({shown, 0, 0}, "", "is a folder; expected a YAML file");
  if (fs::exists(st) && st.type() != fs::file_type::regular)
    fail({shown, 0, 0}, "",
         "is not a regular file (a device, pipe or socket); expected a YAML file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail({shown, 0, 0}, "", fmt::format("cannot open file: {}", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail({shown, 0, 0}, "", fmt::format("cannot read file: {}", std::strerror(errno)));
  return parse_text(text.str(), shown);
}

// ---------------------------------------------------------------------------
// Writing.

namespace {

bool yaml_reserved(const std::string& s) {
  static const std::array<std::string_view, 11> kWords = {
      "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~", "nan"};
  const std::string l = lower(s);
  return std::find(kWords.begin(), kWords.end(), l) != kWords.end();
}

}  // namespace

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

std::string yaml_bool(bool b) {
  return b ? "true" : "false";
}

std::string one_line(std::string s) {
  std::replace_if(
      s.begin(), s.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  return s;
}

}  // namespace wafersim::sim::yaml
