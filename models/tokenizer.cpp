#include "models/tokenizer.hpp"

#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utext.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

namespace wafersim::models {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------- UTF-8 ---

// Length of the UTF-8 sequence that starts with `lead` (1 for a stray byte).
std::size_t utf8_length(unsigned char lead) {
  if (lead >= 0xf0) return 4;
  if (lead >= 0xe0) return 3;
  if (lead >= 0xc0) return 2;
  return 1;
}

// Offset of the first byte that does not start a well-formed UTF-8 sequence
// (no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return i;
    }
    if (i + n > s.size()) return i;
    for (std::size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return i;
    }
    i += n;
  }
  return std::string_view::npos;
}

// The code point at s[i] of valid UTF-8; advances i past it.
char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = std::min(utf8_length(c), s.size() - i);
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
  i += n;
  return cp;
}

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

std::string hex(std::uint32_t v, int digits) {
  static const char* kDigits = "0123456789ABCDEF";
  std::string s(static_cast<std::size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = kDigits[v & 0xf];
  return s;
}

// A string for a message: JSON-quoted (control characters escaped, invalid
// UTF-8 replaced), cut after 60 bytes.
std::string quote(std::string_view s) {
  std::size_t n = std::min<std::size_t>(s.size(), 60);
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xc0) == 0x80) --n;
  std::string q =
      json(std::string(s.substr(0, n))).dump(-1, ' ', false, json::error_handler_t::replace);
  return n < s.size() ? q + "..." : q;
}

// White space and word characters as Hugging Face's added tokens see them
// (lstrip / rstrip / single_word use Rust regex's \s and \w): White_Space;
// Alphabetic, marks, decimal digits, connector punctuation, Join_Control.
bool is_white_space(char32_t c) {
  return u_isUWhiteSpace(static_cast<UChar32>(c)) != 0;
}
bool is_word_char(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  const auto mask = U_GET_GC_MASK(u);
  return u_isUAlphabetic(u) != 0 || (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL) != 0;
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// ------------------------------------------------------- file reading ---

// The key path and file of everything read, for messages.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}
  const std::string& origin() const { return origin_; }

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw TokenizerError(origin_ + ": error: " + (path.empty() ? std::string() : path + ": ") +
                         what);
  }

  static std::string key_path(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }
  static std::string index_path(const std::string& path, std::size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  // `j` must be an object with keys from `known` only.
  void object(const json& j, const std::string& path,
              std::initializer_list<std::string_view> known) const {
    if (!j.is_object()) fail(path, std::string("expected an object, got ") + j.type_name());
    for (const auto& [key, value] : j.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(key_path(path, key), "unknown key (understood here: " + list + ")");
      }
    }
  }

  // The member, or nullptr when it is absent or null.
  static const json* find(const json& obj, std::string_view key) {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  std::string string(const json& obj, std::string_view key, const std::string& path) const {
    const json* v = find(obj, key);
    if (v == nullptr) fail(key_path(path, key), "missing (expected a string)");
    if (!v->is_string()) {
      fail(key_path(path, key), std::string("expected a string, got ") + v->type_name());
    }
    return v->get<std::string>();
  }

  // A string of exactly one character (Metaspace's replacement, Strip's content).
  std::string character(const json& obj, std::string_view key, const std::string& path) const {
    std::string s = string(obj, key, path);
    std::size_t i = 0;
    if (s.empty() || (next_code_point(s, i), i != s.size())) {
      fail(key_path(path, key), "expected one character, got " + quote(s));
    }
    return s;
  }

  bool boolean(const json& obj, std::string_view key, const std::string& path,
               std::optional<bool> fallback) const {
    const json* v = find(obj, key);
    if (v == nullptr) {
      if (!fallback) fail(key_path(path, key), "missing (expected true or false)");
      return *fallback;
    }
    if (!v->is_boolean()) {
      fail(key_path(path, key), std::string("expected true or false, got ") + v->type_name());
    }
    return v->get<bool>();
  }

  std::size_t count(const json& obj, std::string_view key, const std::string& path) const {
    const json* v = find(obj, key);
    if (v == nullptr || !v->is_number_unsigned() || v->get<std::uint64_t>() > 1'000'000) {
      fail(key_path(path, key), "expected a whole number from 0 to 1000000");
    }
    return static_cast<std::size_t>(v->get<std::uint64_t>());
  }

  // A token id: a whole number from 0 to INT32_MAX - 1 (so that the largest
  // id + 1 is still an int32).
  static constexpr std::uint64_t kMaxId = INT32_MAX - 1;
  static std::optional<std::int32_t> as_id(const json& v) {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned() ? v.get<std::uint64_t>() > kMaxId : v.get<std::int64_t>() < 0)) {
      return std::nullopt;
    }
    return static_cast<std::int32_t>(v.get<std::int64_t>());
  }
  std::int32_t id(const json& v, const std::string& path) const {
    if (const auto id = as_id(v)) return *id;
    if (!v.is_number_integer()) {
      fail(path, std::string("expected a token id (a whole number), got ") + v.type_name() +
                     (v.is_number_float() ? " " + v.dump() : std::string()));
    }
    fail(path, "token id " + v.dump() + " is out of range (0 to " + std::to_string(kMaxId) + ")");
  }

 private:
  std::string origin_;
};

// Parses `text`, refusing duplicated keys (nlohmann would keep the last one
// silently) and nesting deeper than kMaxDepth (no tokenizer.json comes close;
// the limit keeps every later walk of the tree shallow).
json parse_strict(const std::string& text, const Reader& reader) {
  constexpr std::size_t kMaxDepth = 64;
  struct Frame {
    bool object = false;
    const std::string* key = nullptr;  // object: the key being read (in `keys`)
    std::size_t started = 0;           // array: elements begun
    std::unordered_set<std::string> keys;
  };
  std::vector<Frame> stack;
  auto path = [&] {
    std::string p;
    for (const Frame& f : stack) {
      if (f.object) {
        p = Reader::key_path(p, f.key != nullptr ? *f.key : std::string());
      } else if (f.started > 0) {
        p = Reader::index_path(p, f.started - 1);
      }
    }
    return p;
  };
  auto element_begins = [&] {
    if (!stack.empty() && !stack.back().object) ++stack.back().started;
  };
  auto push = [&](bool object) {
    element_begins();
    if (stack.size() >= kMaxDepth) {
      reader.fail(path(),
                  "invalid JSON: nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    stack.push_back(Frame{object, {}, 0, {}});
  };
  const json::parser_callback_t check = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        push(true);
        break;
      case json::parse_event_t::array_start:
        push(false);
        break;
      case json::parse_event_t::key: {
        Frame& f = stack.back();
        const auto [it, fresh] = f.keys.insert(parsed.get<std::string>());
        f.key = &*it;
        if (!fresh) reader.fail(path(), "invalid JSON: duplicated key");
        break;
      }
      case json::parse_event_t::value:
        element_begins();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        break;
    }
    return true;
  };
  // nlohmann stops at a NUL byte as at the end of the input; JSON has none.
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    reader.fail("", "invalid JSON: a NUL byte at offset " + std::to_string(nul));
  }
  try {
    return json::parse(text, check);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e999
    reader.fail("", std::string("invalid JSON: ") + e.what());
  }
}

// ---------------------------------------------------------- patterns ---

struct Span {
  std::size_t begin = 0, end = 0;
};

// An ICU regular expression over UTF-8 text; byte offsets in and out.
class Regex {
 public:
  Regex(const std::string& pattern, const Reader& reader, const std::string& path)
      : origin_(reader.origin()) {
    UErrorCode status = U_ZERO_ERROR;
    UParseError where{};
    pattern_.reset(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, where, status));
    if (U_FAILURE(status) || !pattern_) {
      reader.fail(path,
                  "not a regular expression ICU accepts: " + std::string(u_errorName(status)) +
                      " at line " + std::to_string(where.line) + ", offset " +
                      std::to_string(where.offset) + " of " + quote(pattern));
    }
  }

  // Leftmost-first, non-overlapping matches (possibly empty ones).
  std::vector<Span> find_all(std::string_view text) const {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<UText, decltype(&utext_close)> ut(
        utext_openUTF8(nullptr, text.data(), static_cast<int64_t>(text.size()), &status),
        &utext_close);
    std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(status));
    if (U_FAILURE(status) || !ut || !m) {
      throw TokenizerError(
          origin_ + ": encode: ICU cannot run the regular expression: " + u_errorName(status));
    }
    m->reset(ut.get());
    // A pathological pattern from a file must not hang an encode: about ten
    // seconds per match (ICU counts in steps of roughly a millisecond).
    m->setTimeLimit(10'000, status);
    std::vector<Span> out;
    while (m->find(status)) {
      out.push_back({static_cast<std::size_t>(m->start64(status)),
                     static_cast<std::size_t>(m->end64(status))});
    }
    if (U_FAILURE(status)) {
      throw TokenizerError(
          origin_ + ": encode: the regular expression failed on this text: " + u_errorName(status));
    }
    return out;
  }

 private:
  std::string origin_;
  std::shared_ptr<icu::RegexPattern> pattern_;
};

// Split's and Replace's `pattern`: {"String": "..."} or {"Regex": "..."}.
class Pattern {
 public:
  Pattern(const json& j, const Reader& reader, const std::string& path) {
    reader.object(j, path, {"String", "Regex"});
    if (j.size() != 1) reader.fail(path, "expected {\"String\": ...} or {\"Regex\": ...}");
    if (j.contains("String")) {
      literal_ = reader.string(j, "String", path);
      if (literal_.empty()) reader.fail(Reader::key_path(path, "String"), "must not be empty");
    } else {
      regex_.emplace(reader.string(j, "Regex", path), reader, Reader::key_path(path, "Regex"));
    }
  }

  std::vector<Span> find_all(std::string_view text) const {
    if (regex_) return regex_->find_all(text);
    std::vector<Span> out;
    for (std::size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size())) {
      out.push_back({at, at + literal_.size()});
    }
    return out;
  }

  // Every match replaced by `content`.
  std::string replace(std::string_view text, const std::string& content) const {
    std::string out;
    std::size_t last = 0;
    for (const Span& m : find_all(text)) {
      out.append(text.substr(last, m.begin - last));
      out += content;
      last = m.end;
    }
    out.append(text.substr(last));
    return out;
  }

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

// A stretch of text on its way through the pipeline. `at_start`: its first
// character is the first of the input (Metaspace's prepend_scheme "first").
struct Piece {
  std::string text;
  bool at_start = false;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Hugging Face's NormalizedString::split: the matches and the text between
// them, arranged by `behavior`; empty pieces dropped.
void split(const Piece& piece, const std::vector<Span>& matches, SplitBehavior behavior,
           bool invert, std::vector<Piece>& out) {
  struct Part {
    Span span;
    bool match;
  };
  std::vector<Part> parts;
  std::size_t last = 0;
  for (const Span& m : matches) {
    if (m.begin > last) parts.push_back({{last, m.begin}, invert});
    parts.push_back({m, !invert});
    last = m.end;
  }
  if (last < piece.text.size() || parts.empty())
    parts.push_back({{last, piece.text.size()}, invert});

  std::vector<Part> kept;  // `match` now means "removed"
  switch (behavior) {
    case SplitBehavior::kRemoved:
      kept = parts;
      break;
    case SplitBehavior::kIsolated:
      for (const Part& p : parts) kept.push_back({p.span, false});
      break;
    case SplitBehavior::kContiguous: {
      std::optional<bool> previous;
      for (const Part& p : parts) {
        if (previous == p.match && !kept.empty()) {
          kept.back().span.end = p.span.end;
        } else {
          kept.push_back({p.span, false});
        }
        previous = p.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Part& p : parts) {
        if (p.match && !previous && !kept.empty()) {
          kept.back().span.end = p.span.end;
        } else {
          kept.push_back({p.span, false});
        }
        previous = p.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto p = parts.rbegin(); p != parts.rend(); ++p) {
        if (p->match && !previous && !kept.empty()) {
          kept.back().span.begin = p->span.begin;
        } else {
          kept.push_back({p->span, false});
        }
        previous = p->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (const Part& p : kept) {
    if (p.match || p.span.end == p.span.begin) continue;
    out.push_back({piece.text.substr(p.span.begin, p.span.end - p.span.begin),
                   piece.at_start && p.span.begin == 0});
  }
}

SplitBehavior split_behavior(const std::string& name, const Reader& reader,
                             const std::string& path) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  reader.fail(path, quote(name) +
                        " is not a split behavior (Removed, Isolated, MergedWithPrevious, "
                        "MergedWithNext, Contiguous)");
}

// ----------------------------------------------------------- byte level ---

// GPT-2's byte map as code points.
const std::array<char32_t, 256>& byte_code_points() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// Code point -> byte (-1 for a code point outside the map, all below 324).
int byte_of_code_point(char32_t cp) {
  static const std::array<int, 324> inverse = [] {
    std::array<int, 324> t{};
    t.fill(-1);
    const auto& fwd = byte_code_points();
    for (int b = 0; b < 256; ++b) t[fwd[static_cast<std::size_t>(b)]] = b;
    return t;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

// GPT-2's pre-tokenization pattern, as Hugging Face's ByteLevel spells it.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------- normalizer ---

struct UnicodeForm {
  const icu::Normalizer2* form;
};
struct Prepend {
  std::string prefix;
};
struct Replace {
  std::shared_ptr<const Pattern> pattern;
  std::string content;
};
using NormalizerStep = std::variant<UnicodeForm, Prepend, Replace>;

void normalize(const std::vector<NormalizerStep>& steps, Piece& piece) {
  for (const NormalizerStep& step : steps) {
    if (const auto* f = std::get_if<UnicodeForm>(&step)) {
      UErrorCode status = U_ZERO_ERROR;
      const icu::UnicodeString out =
          f->form->normalize(icu::UnicodeString::fromUTF8(piece.text), status);
      if (U_FAILURE(status)) {
        throw TokenizerError("encode: Unicode normalization failed: " +
                             std::string(u_errorName(status)));
      }
      piece.text.clear();
      out.toUTF8String(piece.text);
    } else if (const auto* p = std::get_if<Prepend>(&step)) {
      if (!piece.text.empty()) piece.text = p->prefix + piece.text;
    } else {
      const auto& r = std::get<Replace>(step);
      if (r.content.empty() && piece.at_start) {
        const std::vector<Span> m = r.pattern->find_all(piece.text);
        if (!m.empty() && m.front().begin == 0 && m.front().end > 0) piece.at_start = false;
      }
      piece.text = r.pattern->replace(piece.text, r.content);
    }
  }
}

std::vector<NormalizerStep> read_normalizer(const json& j, const Reader& reader,
                                            const std::string& path) {
  std::vector<NormalizerStep> steps;
  if (j.is_null()) return steps;
  if (!j.is_object()) reader.fail(path, std::string("expected an object, got ") + j.type_name());
  const std::string type = reader.string(j, "type", path);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = nullptr;
  if (type == "Sequence") {
    reader.object(j, path, {"type", "normalizers"});
    const json* list = Reader::find(j, "normalizers");
    const std::string list_path = Reader::key_path(path, "normalizers");
    if (list == nullptr || !list->is_array()) reader.fail(list_path, "expected a list");
    for (std::size_t i = 0; i < list->size(); ++i) {
      for (NormalizerStep& s :
           read_normalizer((*list)[i], reader, Reader::index_path(list_path, i)))
        steps.push_back(std::move(s));
    }
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    reader.object(j, path, {"type"});
    form = type == "NFC"    ? icu::Normalizer2::getNFCInstance(status)
           : type == "NFD"  ? icu::Normalizer2::getNFDInstance(status)
           : type == "NFKC" ? icu::Normalizer2::getNFKCInstance(status)
                            : icu::Normalizer2::getNFKDInstance(status);
    if (U_FAILURE(status) || form == nullptr) {
      reader.fail(path, "ICU has no " + type + " data: " + u_errorName(status));
    }
    steps.push_back(UnicodeForm{form});
  } else if (type == "Prepend") {
    reader.object(j, path, {"type", "prepend"});
    steps.push_back(Prepend{reader.string(j, "prepend", path)});
  } else if (type == "Replace") {
    reader.object(j, path, {"type", "pattern", "content"});
    const json* pattern = Reader::find(j, "pattern");
    if (pattern == nullptr) reader.fail(Reader::key_path(path, "pattern"), "missing");
    steps.push_back(Replace{
        std::make_shared<const Pattern>(*pattern, reader, Reader::key_path(path, "pattern")),
        reader.string(j, "content", path)});
  } else {
    reader.fail(Reader::key_path(path, "type"),
                quote(type) +
                    " is not supported (supported normalizers: NFC, NFD, NFKC, NFKD, Prepend, "
                    "Replace, Sequence)");
  }
  return steps;
}

// ------------------------------------------------------- pre-tokenizer ---

struct ByteLevelSplit {
  bool add_prefix_space = false;
  std::shared_ptr<const Regex> regex;  // GPT-2's pattern when use_regex
};
struct PatternSplit {
  std::shared_ptr<const Pattern> pattern;
  SplitBehavior behavior;
  bool invert;
};
struct MetaspaceSplit {
  std::string replacement;
  enum class Prepend { kAlways, kFirst, kNever } prepend;
  bool split;
};
using PreTokenizerStep = std::variant<ByteLevelSplit, PatternSplit, MetaspaceSplit>;

void pre_tokenize(const std::vector<PreTokenizerStep>& steps, std::vector<Piece>& pieces) {
  for (const PreTokenizerStep& step : steps) {
    std::vector<Piece> next;
    for (Piece& piece : pieces) {
      if (const auto* b = std::get_if<ByteLevelSplit>(&step)) {
        if (b->add_prefix_space && !piece.text.empty() && piece.text.front() != ' ') {
          piece.text.insert(0, 1, ' ');
        }
        std::vector<Piece> parts;
        if (b->regex) {
          split(piece, b->regex->find_all(piece.text), SplitBehavior::kIsolated, false, parts);
        } else if (!piece.text.empty()) {
          parts.push_back(std::move(piece));
        }
        const auto& map = byte_code_points();
        for (Piece& p : parts) {
          std::string mapped;
          for (char c : p.text) mapped += utf8(map[static_cast<unsigned char>(c)]);
          p.text = std::move(mapped);
          next.push_back(std::move(p));
        }
      } else if (const auto* s = std::get_if<PatternSplit>(&step)) {
        split(piece, s->pattern->find_all(piece.text), s->behavior, s->invert, next);
      } else {
        const auto& m = std::get<MetaspaceSplit>(step);
        std::string text;
        for (char c : piece.text) {
          if (c == ' ') {
            text += m.replacement;
          } else {
            text += c;
          }
        }
        const bool prepend = m.prepend == MetaspaceSplit::Prepend::kAlways ||
                             (m.prepend == MetaspaceSplit::Prepend::kFirst && piece.at_start);
        if (prepend && !text.empty() && text.compare(0, m.replacement.size(), m.replacement) != 0) {
          text = m.replacement + text;
        }
        const Piece replaced{std::move(text), piece.at_start};
        if (m.split) {
          std::vector<Span> marks;
          for (std::size_t at = replaced.text.find(m.replacement); at != std::string::npos;
               at = replaced.text.find(m.replacement, at + m.replacement.size())) {
            marks.push_back({at, at + m.replacement.size()});
          }
          split(replaced, marks, SplitBehavior::kMergedWithNext, false, next);
        } else if (!replaced.text.empty()) {
          next.push_back(replaced);
        }
      }
    }
    pieces = std::move(next);
  }
}

MetaspaceSplit::Prepend read_prepend_scheme(const json& j, const Reader& reader,
                                            const std::string& path) {
  if (Reader::find(j, "prepend_scheme") != nullptr) {
    const std::string s = reader.string(j, "prepend_scheme", path);
    if (!reader.boolean(j, "add_prefix_space", path, true) && s != "never") {
      reader.fail(Reader::key_path(path, "add_prefix_space"),
                  "false does not match prepend_scheme " + quote(s));
    }
    if (s == "always") return MetaspaceSplit::Prepend::kAlways;
    if (s == "first") return MetaspaceSplit::Prepend::kFirst;
    if (s == "never") return MetaspaceSplit::Prepend::kNever;
    reader.fail(Reader::key_path(path, "prepend_scheme"),
                quote(s) + " is not one of always, first, never");
  }
  // Files written before prepend_scheme existed: add_prefix_space. As
  // Hugging Face, false needs prepend_scheme "never" spelled out.
  if (!reader.boolean(j, "add_prefix_space", path, true)) {
    reader.fail(Reader::key_path(path, "add_prefix_space"),
                "false does not match prepend_scheme (absent: \"always\"); write "
                "\"prepend_scheme\": \"never\"");
  }
  return MetaspaceSplit::Prepend::kAlways;
}

std::vector<PreTokenizerStep> read_pre_tokenizer(const json& j, const Reader& reader,
                                                 const std::string& path) {
  std::vector<PreTokenizerStep> steps;
  if (j.is_null()) return steps;
  if (!j.is_object()) reader.fail(path, std::string("expected an object, got ") + j.type_name());
  const std::string type = reader.string(j, "type", path);
  if (type == "Sequence") {
    reader.object(j, path, {"type", "pretokenizers"});
    const json* list = Reader::find(j, "pretokenizers");
    const std::string list_path = Reader::key_path(path, "pretokenizers");
    if (list == nullptr || !list->is_array()) reader.fail(list_path, "expected a list");
    for (std::size_t i = 0; i < list->size(); ++i) {
      for (PreTokenizerStep& s :
           read_pre_tokenizer((*list)[i], reader, Reader::index_path(list_path, i)))
        steps.push_back(std::move(s));
    }
  } else if (type == "ByteLevel") {
    reader.object(j, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    ByteLevelSplit b;
    b.add_prefix_space = reader.boolean(j, "add_prefix_space", path, std::nullopt);
    reader.boolean(j, "trim_offsets", path, true);  // offsets only
    if (reader.boolean(j, "use_regex", path, true)) {
      b.regex = std::make_shared<const Regex>(kGpt2Pattern, reader, path);
    }
    steps.push_back(std::move(b));
  } else if (type == "Split") {
    reader.object(j, path, {"type", "pattern", "behavior", "invert"});
    const json* pattern = Reader::find(j, "pattern");
    if (pattern == nullptr) reader.fail(Reader::key_path(path, "pattern"), "missing");
    steps.push_back(PatternSplit{
        std::make_shared<const Pattern>(*pattern, reader, Reader::key_path(path, "pattern")),
        split_behavior(reader.string(j, "behavior", path), reader,
                       Reader::key_path(path, "behavior")),
        reader.boolean(j, "invert", path, false)});
  } else if (type == "Metaspace") {
    reader.object(
        j, path, {"type", "replacement", "prepend_scheme", "add_prefix_space", "split", "str_rep"});
    steps.push_back(MetaspaceSplit{reader.character(j, "replacement", path),
                                   read_prepend_scheme(j, reader, path),
                                   reader.boolean(j, "split", path, true)});
  } else {
    reader.fail(Reader::key_path(path, "type"),
                quote(type) +
                    " is not supported (supported pre-tokenizers: ByteLevel, Split, Metaspace, "
                    "Sequence)");
  }
  return steps;
}

// ------------------------------------------------------------- decoder ---

struct ByteLevelDecoder {};
struct MetaspaceDecoder {
  std::string replacement;
  bool strip_first;  // prepend_scheme other than never
};
struct ReplaceDecoder {
  std::shared_ptr<const Pattern> pattern;
  std::string content;
};
struct ByteFallbackDecoder {};
struct FuseDecoder {};
struct StripDecoder {
  std::string content;
  std::size_t start, stop;
};
using DecoderStep = std::variant<ByteLevelDecoder, MetaspaceDecoder, ReplaceDecoder,
                                 ByteFallbackDecoder, FuseDecoder, StripDecoder>;

// "<0xNN>" -> NN.
std::optional<unsigned char> byte_token(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return std::nullopt;
  int v = 0;
  for (char c : t.substr(3, 2)) {
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + d;
  }
  return static_cast<unsigned char>(v);
}

// Hugging Face's decode_chain of each step in turn, on bytes.
std::vector<std::string> run_decoders(const std::vector<DecoderStep>& steps,
                                      std::vector<std::string> tokens) {
  for (const DecoderStep& step : steps) {
    std::vector<std::string> out;
    if (std::holds_alternative<ByteLevelDecoder>(step)) {
      std::string bytes;
      for (const std::string& t : tokens) {
        std::string mapped;
        bool all = true;
        for (std::size_t i = 0; i < t.size() && all;) {
          const int b = byte_of_code_point(next_code_point(t, i));
          if (b < 0) all = false;
          mapped += static_cast<char>(b);
        }
        bytes += all ? mapped : t;  // a token outside the map stays as it is
      }
      out.push_back(std::move(bytes));
    } else if (const auto* m = std::get_if<MetaspaceDecoder>(&step)) {
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::string t;
        const std::string_view s = tokens[i];
        for (std::size_t at = 0; at < s.size();) {
          if (s.compare(at, m->replacement.size(), m->replacement) == 0) {
            if (i != 0 || !m->strip_first) t += ' ';
            at += m->replacement.size();
          } else {
            t += s[at++];
          }
        }
        out.push_back(std::move(t));
      }
    } else if (const auto* r = std::get_if<ReplaceDecoder>(&step)) {
      for (const std::string& t : tokens) out.push_back(r->pattern->replace(t, r->content));
    } else if (std::holds_alternative<ByteFallbackDecoder>(step)) {
      std::string run;  // consecutive <0xNN> tokens, as bytes
      bool in_run = false;
      for (std::string& t : tokens) {
        if (const auto b = byte_token(t)) {
          run += static_cast<char>(*b);
          in_run = true;
          continue;
        }
        if (in_run) out.push_back(std::move(run));
        run.clear();
        in_run = false;
        out.push_back(std::move(t));
      }
      if (in_run) out.push_back(std::move(run));
    } else if (std::holds_alternative<FuseDecoder>(step)) {
      std::string all;
      for (const std::string& t : tokens) all += t;
      out.push_back(std::move(all));
    } else {
      const auto& s = std::get<StripDecoder>(step);
      const std::size_t n = s.content.size();
      for (const std::string& t : tokens) {
        std::size_t begin = 0, end = t.size();
        for (std::size_t k = 0; k < s.start && t.compare(begin, n, s.content) == 0; ++k) begin += n;
        for (std::size_t k = 0;
             k < s.stop && end >= begin + n && t.compare(end - n, n, s.content) == 0; ++k) {
          end -= n;
        }
        out.push_back(t.substr(begin, end - begin));
      }
    }
    tokens = std::move(out);
  }
  return tokens;
}

std::vector<DecoderStep> read_decoder(const json& j, const Reader& reader,
                                      const std::string& path) {
  std::vector<DecoderStep> steps;
  if (!j.is_object()) reader.fail(path, std::string("expected an object, got ") + j.type_name());
  const std::string type = reader.string(j, "type", path);
  if (type == "Sequence") {
    reader.object(j, path, {"type", "decoders"});
    const json* list = Reader::find(j, "decoders");
    const std::string list_path = Reader::key_path(path, "decoders");
    if (list == nullptr || !list->is_array()) reader.fail(list_path, "expected a list");
    for (std::size_t i = 0; i < list->size(); ++i) {
      for (DecoderStep& s : read_decoder((*list)[i], reader, Reader::index_path(list_path, i)))
        steps.push_back(std::move(s));
    }
  } else if (type == "ByteLevel") {
    reader.object(j, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    steps.push_back(ByteLevelDecoder{});
  } else if (type == "Metaspace") {
    reader.object(
        j, path, {"type", "replacement", "prepend_scheme", "add_prefix_space", "split", "str_rep"});
    reader.boolean(j, "split", path, true);  // not used in decoding
    steps.push_back(
        MetaspaceDecoder{reader.character(j, "replacement", path),
                         read_prepend_scheme(j, reader, path) != MetaspaceSplit::Prepend::kNever});
  } else if (type == "Replace") {
    reader.object(j, path, {"type", "pattern", "content"});
    const json* pattern = Reader::find(j, "pattern");
    if (pattern == nullptr) reader.fail(Reader::key_path(path, "pattern"), "missing");
    steps.push_back(ReplaceDecoder{
        std::make_shared<const Pattern>(*pattern, reader, Reader::key_path(path, "pattern")),
        reader.string(j, "content", path)});
  } else if (type == "ByteFallback") {
    reader.object(j, path, {"type"});
    steps.push_back(ByteFallbackDecoder{});
  } else if (type == "Fuse") {
    reader.object(j, path, {"type"});
    steps.push_back(FuseDecoder{});
  } else if (type == "Strip") {
    reader.object(j, path, {"type", "content", "start", "stop"});
    steps.push_back(StripDecoder{reader.character(j, "content", path),
                                 reader.count(j, "start", path), reader.count(j, "stop", path)});
  } else {
    reader.fail(Reader::key_path(path, "type"),
                quote(type) +
                    " is not supported (supported decoders: ByteLevel, Metaspace, Replace, "
                    "ByteFallback, Fuse, Strip, Sequence)");
  }
  return steps;
}

// ---------------------------------------------------------- BPE model ---

struct BpeModel {
  StringMap<std::int32_t> vocab;
  std::unordered_map<std::int32_t, std::string> by_id;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  std::optional<std::int32_t> unk_id;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  std::array<std::int32_t, 256> byte_ids{};  // id of <0xNN>, -1 when absent

  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }

  // Hugging Face's BPE::tokenize of one pre-token (valid UTF-8).
  void tokenize(std::string_view word, std::vector<std::int32_t>& out,
                const std::string& origin) const {
    if (word.empty()) return;
    if (ignore_merges) {
      if (const auto it = vocab.find(word); it != vocab.end()) {
        out.push_back(it->second);
        return;
      }
    }
    struct Symbol {
      std::int32_t id;
      std::ptrdiff_t prev, next;
      bool gone;
    };
    std::vector<Symbol> symbols;
    auto add = [&](std::int32_t id) {
      const auto n = static_cast<std::ptrdiff_t>(symbols.size());
      if (!symbols.empty()) symbols.back().next = n;
      symbols.push_back({id, n - 1, -1, false});
    };
    std::int32_t pending_unk = -1;  // an unk not yet added (fuse_unk may extend it)
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t begin = i;
      const char32_t cp = next_code_point(word, i);
      const std::string_view ch = word.substr(begin, i - begin);
      if (const auto it = vocab.find(ch); it != vocab.end()) {
        if (pending_unk >= 0) add(pending_unk);
        pending_unk = -1;
        add(it->second);
        continue;
      }
      if (byte_fallback && std::all_of(ch.begin(), ch.end(), [&](char c) {
            return byte_ids[static_cast<unsigned char>(c)] >= 0;
          })) {
        // As Hugging Face: a pending unk is not flushed here.
        for (char c : ch) add(byte_ids[static_cast<unsigned char>(c)]);
        continue;
      }
      if (unk_id) {
        if (pending_unk >= 0 && !fuse_unk) add(pending_unk);
        pending_unk = *unk_id;
        continue;
      }
      throw TokenizerError(origin + ": encode: the character U+" +
                           hex(static_cast<std::uint32_t>(cp), cp > 0xffff ? 6 : 4) + " (" +
                           quote(ch) +
                           ") is not in the vocabulary, and the tokenizer has neither "
                           "byte_fallback nor an unk_token for it");
    }
    if (pending_unk >= 0) add(pending_unk);
    merge(symbols);
    for (const Symbol& s : symbols) {
      if (!s.gone) out.push_back(s.id);
    }
  }

  // Hugging Face's Word::merge_all: the lowest-ranked pair first, the
  // leftmost among equals, until no pair has a merge.
  template <typename Symbol>
  void merge(std::vector<Symbol>& symbols) const {
    struct Candidate {
      std::int32_t rank;
      std::size_t pos;
      std::int32_t new_id;
      bool operator<(const Candidate& o) const {  // the queue's top: lowest rank, then pos
        return rank != o.rank ? rank > o.rank : pos > o.pos;
      }
    };
    std::priority_queue<Candidate> queue;
    auto consider = [&](std::size_t pos) {
      const Symbol& s = symbols[pos];
      if (s.next < 0) return;
      const auto m = merges.find(key(s.id, symbols[static_cast<std::size_t>(s.next)].id));
      if (m != merges.end()) queue.push({m->second.first, pos, m->second.second});
    };
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) consider(i);
    while (!queue.empty()) {
      const Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (left.gone || left.next < 0) continue;
      Symbol& right = symbols[static_cast<std::size_t>(left.next)];
      const auto m = merges.find(key(left.id, right.id));
      if (m == merges.end() || m->second.second != top.new_id) continue;  // stale entry
      left.id = top.new_id;
      right.gone = true;
      left.next = right.next;
      if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.pos;
      if (left.prev >= 0) consider(static_cast<std::size_t>(left.prev));
      consider(top.pos);
    }
  }
};

BpeModel read_model(const json& j, const Reader& reader) {
  const std::string path = "model";
  if (!j.is_object()) reader.fail(path, "missing the 'model' object");
  // No type: Hugging Face guesses from the keys; BPE's are checked below.
  if (const json* type = Reader::find(j, "type"); type != nullptr && *type != "BPE") {
    reader.fail("model.type",
                (type->is_string() ? quote(type->get<std::string>()) : type->type_name()) +
                    " is not supported (supported models: BPE)");
  }
  reader.object(j, path,
                {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                 "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (const json* dropout = Reader::find(j, "dropout");
      dropout != nullptr && (!dropout->is_number() || dropout->get<double>() != 0.0)) {
    reader.fail("model.dropout", "only null or 0 is supported (BPE dropout is random)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (Reader::find(j, key) != nullptr && !reader.string(j, key, path).empty()) {
      reader.fail(Reader::key_path(path, key), "only null or \"\" is supported");
    }
  }
  BpeModel m;
  m.fuse_unk = reader.boolean(j, "fuse_unk", path, false);
  m.byte_fallback = reader.boolean(j, "byte_fallback", path, false);
  m.ignore_merges = reader.boolean(j, "ignore_merges", path, false);

  const json* vocab = Reader::find(j, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    reader.fail("model.vocab", "missing, or not an object of token -> id");
  }
  m.vocab.reserve(vocab->size());
  m.by_id.reserve(vocab->size());
  for (const auto& [token, value] : vocab->items()) {
    auto where = [&, &token = token] { return "model.vocab[" + quote(token) + "]"; };
    const auto id = Reader::as_id(value);
    if (!id) reader.id(value, where());  // fails, saying why
    const auto [it, fresh] = m.by_id.emplace(*id, token);
    if (!fresh) {
      reader.fail(where(), "id " + std::to_string(*id) + " is also the id of " + quote(it->second));
    }
    m.vocab.emplace(token, *id);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = m.vocab.find("<0x" + hex(static_cast<std::uint32_t>(b), 2) + ">");
    m.byte_ids[static_cast<std::size_t>(b)] = it == m.vocab.end() ? -1 : it->second;
  }
  if (Reader::find(j, "unk_token") != nullptr) {
    const std::string unk = reader.string(j, "unk_token", path);
    const auto it = m.vocab.find(unk);
    if (it == m.vocab.end()) reader.fail("model.unk_token", quote(unk) + " is not in model.vocab");
    m.unk_id = it->second;
  }

  const json* merges = Reader::find(j, "merges");
  if (merges == nullptr || !merges->is_array()) {
    reader.fail("model.merges", "missing, or not a list of \"a b\" or [\"a\", \"b\"]");
  }
  m.merges.reserve(merges->size());
  std::int32_t rank = 0;
  std::string joined;
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const json& e = (*merges)[i];
    auto where = [i] { return Reader::index_path("model.merges", i); };
    std::string_view a, b;
    if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      if (s.rfind("#version", 0) == 0) continue;  // a merges.txt header, as Hugging Face skips it
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        reader.fail(where(), "expected \"a b\" (two tokens and one space), got " + quote(s));
      }
      a = std::string_view(s).substr(0, space);
      b = std::string_view(s).substr(space + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get_ref<const std::string&>();
      b = e[1].get_ref<const std::string&>();
    } else {
      reader.fail(where(), "expected \"a b\" or [\"a\", \"b\"]");
    }
    auto id_of = [&](std::string_view token) {
      const auto it = m.vocab.find(token);
      if (it == m.vocab.end()) reader.fail(where(), quote(token) + " is not in model.vocab");
      return it->second;
    };
    const std::int32_t ia = id_of(a), ib = id_of(b);
    joined.assign(a).append(b);
    const std::int32_t merged = id_of(joined);
    // As Hugging Face: a pair listed twice keeps its later rank.
    m.merges[BpeModel::key(ia, ib)] = {rank++, merged};
  }
  return m;
}

// ------------------------------------------------------- added tokens ---

struct AddedToken {
  std::string content;  // as the file spells it
  std::string text;     // what it matches and decodes to: the content, normalized when `normalized`
  std::int32_t id;
  bool single_word, lstrip, rstrip, normalized, special;
};

// Added tokens found in text as Hugging Face's AddedVocabulary does
// (leftmost-longest, non-overlapping; single_word, lstrip and rstrip).
class AddedTokenMatcher {
 public:
  void add(std::string pattern, const AddedToken* token) {
    if (pattern.empty()) return;
    const auto first = static_cast<unsigned char>(pattern.front());
    auto& list = by_first_byte_[first];
    list.push_back({std::move(pattern), token});
    std::stable_sort(list.begin(), list.end(), [](const auto& x, const auto& y) {
      return x.pattern.size() > y.pattern.size();
    });
  }
  bool empty() const {
    return std::all_of(by_first_byte_.begin(), by_first_byte_.end(),
                       [](const auto& l) { return l.empty(); });
  }

  // The text cut into plain stretches (token == nullptr) and added tokens.
  struct Part {
    Span span;
    const AddedToken* token;
  };
  std::vector<Part> split(std::string_view text) const {
    std::vector<Part> parts;
    std::size_t plain_from = 0;
    for (std::size_t i = 0; i < text.size();) {
      const Entry* found = nullptr;
      for (const Entry& e : by_first_byte_[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, e.pattern.size(), e.pattern) == 0) {
          found = &e;
          break;  // longest first
        }
      }
      if (found == nullptr) {
        ++i;
        continue;
      }
      std::size_t begin = i, end = i + found->pattern.size();
      i = end;  // the next search starts after this match, even when it is refused
      const AddedToken& t = *found->token;
      if (t.single_word && ((begin > 0 && word_char_before(text, begin)) ||
                            (end < text.size() && word_char_after(text, end)))) {
        continue;
      }
      if (t.lstrip) {
        while (begin > plain_from && is_white_space(code_point_before(text, begin))) {
          begin -= utf8_length_before(text, begin);
        }
      }
      if (t.rstrip) {
        while (end < text.size()) {
          std::size_t k = end;
          if (!is_white_space(next_code_point(text, k))) break;
          end = k;
        }
      }
      if (begin > plain_from) parts.push_back({{plain_from, begin}, nullptr});
      parts.push_back({{begin, end}, &t});
      plain_from = end;
      i = std::max(i, end);
    }
    if (plain_from < text.size() || parts.empty()) {
      parts.push_back({{plain_from, text.size()}, nullptr});
    }
    return parts;
  }

 private:
  struct Entry {
    std::string pattern;
    const AddedToken* token;
  };
  static std::size_t utf8_length_before(std::string_view s, std::size_t end) {
    std::size_t n = 1;
    while (n < end && n < 4 && (static_cast<unsigned char>(s[end - n]) & 0xc0) == 0x80) ++n;
    return n;
  }
  static char32_t code_point_before(std::string_view s, std::size_t end) {
    std::size_t i = end - utf8_length_before(s, end);
    return next_code_point(s, i);
  }
  static bool word_char_before(std::string_view s, std::size_t end) {
    return is_word_char(code_point_before(s, end));
  }
  static bool word_char_after(std::string_view s, std::size_t begin) {
    return is_word_char(next_code_point(s, begin));
  }
  std::array<std::vector<Entry>, 256> by_first_byte_;
};

// ------------------------------------------------------ post-processor ---

// A TemplateProcessing template: the text's ids (nullopt) and special tokens'.
using Template = std::vector<std::optional<std::vector<std::int32_t>>>;

}  // namespace

struct Tokenizer::Impl {
  std::string origin;
  BpeModel model;
  std::vector<std::unique_ptr<AddedToken>> added;
  std::unordered_map<std::int32_t, const AddedToken*> added_by_id;
  StringMap<std::int32_t> added_by_content;
  AddedTokenMatcher raw_tokens;         // normalized: false, matched in the input
  AddedTokenMatcher normalized_tokens;  // normalized: true, matched after the normalizer
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::optional<std::vector<DecoderStep>> decoder;  // nullopt: tokens joined by spaces
  std::vector<Template> post_processor;             // applied in order
  int vocab_size = 0;

  const std::string* token(std::int32_t id) const {
    if (const auto a = added_by_id.find(id); a != added_by_id.end()) return &a->second->text;
    if (const auto v = model.by_id.find(id); v != model.by_id.end()) return &v->second;
    return nullptr;
  }
};

namespace {

void read_added_tokens(const json& list, const Reader& reader, Tokenizer::Impl& t) {
  const std::string path = "added_tokens";
  if (!list.is_array()) reader.fail(path, std::string("expected a list, got ") + list.type_name());
  std::optional<std::int32_t> max;  // the largest added id so far
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& a = list[i];
    const std::string where = Reader::index_path(path, i);
    reader.object(a, where,
                  {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    auto token = std::make_unique<AddedToken>();
    const json* id = Reader::find(a, "id");
    if (id == nullptr) reader.fail(Reader::key_path(where, "id"), "missing");
    token->id = reader.id(*id, Reader::key_path(where, "id"));
    token->content = reader.string(a, "content", where);
    if (token->content.empty()) reader.fail(Reader::key_path(where, "content"), "is empty");
    token->special = reader.boolean(a, "special", where, false);
    token->single_word = reader.boolean(a, "single_word", where, false);
    token->lstrip = reader.boolean(a, "lstrip", where, false);
    token->rstrip = reader.boolean(a, "rstrip", where, false);
    token->normalized = reader.boolean(a, "normalized", where, !token->special);
    if (const auto it = t.added_by_id.find(token->id); it != t.added_by_id.end()) {
      reader.fail(Reader::key_path(where, "id"), "id " + std::to_string(token->id) +
                                                     " is already the id of the added token " +
                                                     quote(it->second->content));
    }
    if (const auto it = t.added_by_content.find(token->content); it != t.added_by_content.end()) {
      reader.fail(
          Reader::key_path(where, "content"),
          quote(token->content) + " is already added, with id " + std::to_string(it->second));
    }
    // Hugging Face does not take these ids from the file: it gives an added
    // token the id of the same content in model.vocab, else the next id after
    // the vocabulary's size and the added tokens before it (and warns when
    // the file says otherwise). A file that disagrees is refused here.
    std::int32_t expected = 0;
    if (const auto v = t.model.vocab.find(token->content); v != t.model.vocab.end()) {
      expected = v->second;
    } else {
      const auto size = static_cast<std::int32_t>(t.model.vocab.size());
      expected = !max ? size : (*max >= size || size == 0) ? *max + 1 : size;
    }
    if (token->id != expected) {
      reader.fail(Reader::key_path(where, "id"),
                  "id " + std::to_string(token->id) + " for " + quote(token->content) +
                      ", but the token is " + std::to_string(expected) +
                      " (the id of the same content in model.vocab, else the next id after "
                      "the vocabulary and the added tokens before it, as Hugging Face numbers "
                      "them)");
    }
    max = std::max(max.value_or(token->id), token->id);
    t.added_by_id[token->id] = token.get();
    t.added_by_content[token->content] = token->id;
    t.added.push_back(std::move(token));
  }
}

Template read_template(const json& j, const Reader& reader, const std::string& path,
                       const StringMap<std::vector<std::int32_t>>& special, bool pair) {
  if (!j.is_array()) {
    reader.fail(path, "expected a list of {\"SpecialToken\": ...} and {\"Sequence\": ...}");
  }
  Template out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const json& item = j[i];
    const std::string where = Reader::index_path(path, i);
    reader.object(item, where, {"SpecialToken", "Sequence"});
    if (item.size() != 1) {
      reader.fail(where, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
    const bool sequence = item.contains("Sequence");
    const std::string at = Reader::key_path(where, sequence ? "Sequence" : "SpecialToken");
    const json& body = item.begin().value();
    reader.object(body, at, {"id", "type_id"});
    const std::string name = reader.string(body, "id", at);
    if (sequence) {
      if (name != "A" && (name != "B" || !pair)) {
        reader.fail(Reader::key_path(at, "id"), quote(name) +
                                                    " is not a sequence of this template (A" +
                                                    std::string(pair ? " or B)" : ")"));
      }
      out.emplace_back(std::nullopt);
    } else {
      const auto it = special.find(name);
      if (it == special.end()) {
        reader.fail(Reader::key_path(at, "id"), quote(name) + " is not in special_tokens");
      }
      out.emplace_back(it->second);
    }
  }
  return out;
}

void read_post_processor(const json& j, const Reader& reader, const std::string& path,
                         Tokenizer::Impl& t) {
  if (j.is_null()) return;
  if (!j.is_object()) reader.fail(path, std::string("expected an object, got ") + j.type_name());
  const std::string type = reader.string(j, "type", path);
  if (type == "Sequence") {
    reader.object(j, path, {"type", "processors"});
    const json* list = Reader::find(j, "processors");
    const std::string list_path = Reader::key_path(path, "processors");
    if (list == nullptr || !list->is_array()) reader.fail(list_path, "expected a list");
    for (std::size_t i = 0; i < list->size(); ++i) {
      read_post_processor((*list)[i], reader, Reader::index_path(list_path, i), t);
    }
  } else if (type == "ByteLevel") {
    reader.object(j, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  } else if (type == "TemplateProcessing") {
    reader.object(j, path, {"type", "single", "pair", "special_tokens"});
    StringMap<std::vector<std::int32_t>> special;
    const std::string sp = Reader::key_path(path, "special_tokens");
    const json* tokens = Reader::find(j, "special_tokens");
    if (tokens == nullptr) reader.fail(sp, "missing");
    if (!tokens->is_object()) reader.fail(sp, "expected an object of name -> {id, ids, tokens}");
    for (const auto& [name, entry] : tokens->items()) {
      const std::string where = sp + "[" + quote(name) + "]";
      reader.object(entry, where, {"id", "ids", "tokens"});
      const json* ids = Reader::find(entry, "ids");
      const json* names = Reader::find(entry, "tokens");
      if (ids == nullptr || !ids->is_array() || names == nullptr || !names->is_array() ||
          ids->size() != names->size()) {
        reader.fail(where, "expected \"ids\" and \"tokens\": two lists of the same length");
      }
      std::vector<std::int32_t> list;
      for (std::size_t i = 0; i < ids->size(); ++i) {
        const std::string ip = Reader::index_path(Reader::key_path(where, "ids"), i);
        const std::int32_t id = reader.id((*ids)[i], ip);
        if (t.token(id) == nullptr) reader.fail(ip, "id " + std::to_string(id) + " is not a token");
        list.push_back(id);
      }
      special.emplace(name, std::move(list));
    }
    const json* single = Reader::find(j, "single");
    if (single == nullptr) reader.fail(Reader::key_path(path, "single"), "missing");
    t.post_processor.push_back(
        read_template(*single, reader, Reader::key_path(path, "single"), special, false));
    if (const json* pair = Reader::find(j, "pair")) {  // checked, unused: encode takes one text
      read_template(*pair, reader, Reader::key_path(path, "pair"), special, true);
    }
  } else {
    reader.fail(Reader::key_path(path, "type"),
                quote(type) +
                    " is not supported (supported post-processors: TemplateProcessing, ByteLevel, "
                    "Sequence)");
  }
}

}  // namespace

const std::vector<std::string>& byte_to_unicode() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t;
    for (char32_t cp : byte_code_points()) t.push_back(utf8(cp));
    return t;
  }();
  return table;
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  const std::string shown = tokenizer_json.string();
  std::error_code ec;
  if (std::filesystem::is_directory(tokenizer_json, ec)) {
    throw TokenizerError(shown + ": error: is a folder, not a tokenizer.json file");
  }
  std::ifstream in(tokenizer_json, std::ios::binary);
  if (!in) throw TokenizerError(shown + ": error: cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw TokenizerError(shown + ": error: cannot read file");
  return from_json(text.str(), shown);
}

Tokenizer Tokenizer::from_json(const std::string& text, const std::string& origin) {
  const Reader reader(origin);
  const json j = parse_strict(text, reader);
  if (!j.is_object()) {
    reader.fail("", std::string("expected a JSON object (a tokenizer.json), got ") + j.type_name());
  }
  reader.object(j, "",
                {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                 "post_processor", "decoder", "model"});
  for (const char* key : {"truncation", "padding"}) {
    if (Reader::find(j, key) != nullptr) {
      reader.fail(key, "only null is supported (encode takes one whole text)");
    }
  }
  auto t = std::make_shared<Impl>();
  t->origin = origin;
  const json* model = Reader::find(j, "model");
  if (model == nullptr) reader.fail("model", "missing the 'model' object");
  t->model = read_model(*model, reader);
  if (const json* added = Reader::find(j, "added_tokens")) read_added_tokens(*added, reader, *t);

  static const json kNull;
  auto member = [&](const char* key) -> const json& {
    const json* v = Reader::find(j, key);
    return v == nullptr ? kNull : *v;
  };
  t->normalizer = read_normalizer(member("normalizer"), reader, "normalizer");
  t->pre_tokenizer = read_pre_tokenizer(member("pre_tokenizer"), reader, "pre_tokenizer");
  if (const json* decoder = Reader::find(j, "decoder")) {
    t->decoder = read_decoder(*decoder, reader, "decoder");
  }
  read_post_processor(member("post_processor"), reader, "post_processor", *t);

  // Added tokens with normalized: true are looked for in normalized text,
  // under their normalized spelling, which is also what they decode to
  // (Hugging Face's AddedVocabulary).
  StringMap<const AddedToken*> normalized_texts;
  for (std::size_t i = 0; i < t->added.size(); ++i) {
    AddedToken& a = *t->added[i];
    if (!a.normalized) {
      a.text = a.content;
      t->raw_tokens.add(a.text, &a);
      continue;
    }
    Piece p{a.content, false};
    normalize(t->normalizer, p);
    a.text = std::move(p.text);
    if (a.text.empty()) {
      reader.fail(Reader::key_path(Reader::index_path("added_tokens", i), "content"),
                  quote(a.content) + " normalizes to nothing");
    }
    if (const auto [it, fresh] = normalized_texts.emplace(a.text, &a); !fresh) {
      reader.fail(Reader::key_path(Reader::index_path("added_tokens", i), "content"),
                  quote(a.content) + " normalizes to " + quote(a.text) + ", as " +
                      quote(it->second->content) + " does");
    }
    t->normalized_tokens.add(a.text, &a);
  }
  for (const auto& [id, token] : t->model.by_id) t->vocab_size = std::max(t->vocab_size, id + 1);
  for (const auto& a : t->added) t->vocab_size = std::max(t->vocab_size, a->id + 1);
  return Tokenizer(std::move(t));
}

int Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

bool Tokenizer::has_id(std::int32_t id) const {
  return impl_->token(id) != nullptr;
}

const std::string& Tokenizer::id_to_token(std::int32_t id) const {
  const std::string* t = impl_->token(id);
  if (t == nullptr) {
    throw TokenizerError(impl_->origin + ": token id " + std::to_string(id) +
                         " is not in the vocabulary (" + std::to_string(impl_->vocab_size) +
                         " ids)");
  }
  return *t;
}

std::optional<std::int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto a = impl_->added_by_content.find(token); a != impl_->added_by_content.end()) {
    return a->second;
  }
  if (const auto v = impl_->model.vocab.find(token); v != impl_->model.vocab.end()) {
    return v->second;
  }
  return std::nullopt;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& t = *impl_;
  if (const std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    throw TokenizerError(t.origin + ": encode: the text is not valid UTF-8 (byte " +
                         std::to_string(bad) + ")");
  }
  std::vector<std::int32_t> ids;
  for (const auto& part : t.raw_tokens.split(text)) {
    if (part.token != nullptr) {
      ids.push_back(part.token->id);
      continue;
    }
    Piece piece{std::string(text.substr(part.span.begin, part.span.end - part.span.begin)),
                part.span.begin == 0};
    normalize(t.normalizer, piece);
    for (const auto& sub : t.normalized_tokens.split(piece.text)) {
      if (sub.token != nullptr) {
        ids.push_back(sub.token->id);
        continue;
      }
      std::vector<Piece> pieces{{piece.text.substr(sub.span.begin, sub.span.end - sub.span.begin),
                                 piece.at_start && sub.span.begin == 0}};
      pre_tokenize(t.pre_tokenizer, pieces);
      for (const Piece& p : pieces) t.model.tokenize(p.text, ids, t.origin);
    }
  }
  if (add_special_tokens) {
    for (const Template& tpl : t.post_processor) {
      std::vector<std::int32_t> out;
      for (const auto& item : tpl) {
        const std::vector<std::int32_t>& add = item ? *item : ids;
        out.insert(out.end(), add.begin(), add.end());
      }
      ids = std::move(out);
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) tokens.push_back(id_to_token(id));
  std::string out;
  if (!impl_->decoder) {  // Hugging Face without a decoder: the tokens joined by spaces
    for (std::size_t i = 0; i < tokens.size(); ++i) out += (i > 0 ? " " : "") + tokens[i];
    return out;
  }
  for (const std::string& s : run_decoders(*impl_->decoder, std::move(tokens))) out += s;
  return out;
}

}  // namespace wafersim::models
