#include "models/tokenizer.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace wafersim::models {

using nlohmann::json;

namespace {

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

const std::unordered_map<std::string, unsigned char>& unicode_to_byte() {
  static const std::unordered_map<std::string, unsigned char> inverse = [] {
    std::unordered_map<std::string, unsigned char> m;
    const auto& fwd = byte_to_unicode();
    for (int b = 0; b < 256; ++b)
      m[fwd[static_cast<std::size_t>(b)]] = static_cast<unsigned char>(b);
    return m;
  }();
  return inverse;
}

// Length of the UTF-8 sequence starting with byte `c` (1 for a stray byte).
std::size_t utf8_length(unsigned char c) {
  if (c >= 0xf0) return 4;
  if (c >= 0xe0) return 3;
  if (c >= 0xc0) return 2;
  return 1;
}

bool is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
bool is_letter(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}
bool is_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}
bool is_other(unsigned char c) {
  return !is_space(c) && !is_letter(c) && !is_digit(c);
}

// GPT-2's pre-tokenization (see the header) of a text without special tokens.
std::vector<std::string_view> pre_tokenize(std::string_view text) {
  std::vector<std::string_view> out;
  const std::size_t n = text.size();
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  std::size_t i = 0;
  while (i < n) {
    const std::size_t start = i;
    if (text[i] == '\'' && i + 1 < n) {
      static const char* kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
      std::size_t len = 0;
      for (const char* c : kContractions) {
        const std::string_view cv(c);
        if (text.substr(i, cv.size()) == cv) {
          len = cv.size();
          break;
        }
      }
      if (len > 0) {
        out.push_back(text.substr(i, len));
        i += len;
        continue;
      }
    }
    std::size_t j = i;
    if (text[j] == ' ' && j + 1 < n && !is_space(at(j + 1))) ++j;  // the optional leading space
    if (j < n && !is_space(at(j))) {
      bool (*cls)(unsigned char) = is_letter(at(j))  ? is_letter
                                   : is_digit(at(j)) ? is_digit
                                                     : is_other;
      while (j < n && cls(at(j))) ++j;
      out.push_back(text.substr(start, j - start));
      i = j;
      continue;
    }
    std::size_t k = i;
    while (k < n && is_space(at(k))) ++k;
    // \s+(?!\S): leave the last space to the next word; else \s+.
    const std::size_t len = (k == n || k - i == 1) ? k - i : k - i - 1;
    out.push_back(text.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

const std::vector<std::string>& byte_to_unicode() {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    std::uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      t[static_cast<std::size_t>(b)] = utf8(printable ? static_cast<std::uint32_t>(b) : next++);
    }
    return t;
  }();
  return table;
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  std::ifstream in(tokenizer_json, std::ios::binary);
  if (!in) throw TokenizerError(tokenizer_json.string() + ": error: cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return from_json(text.str(), tokenizer_json.string());
}

Tokenizer Tokenizer::from_json(const std::string& text, const std::string& origin) {
  auto fail = [&](const std::string& what) -> TokenizerError {
    return TokenizerError(origin + ": error: " + what);
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw fail(std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    throw fail("model: missing the 'model' object");
  }
  const json& model = j["model"];
  if (model.contains("type") && model["type"] != "BPE") {
    throw fail("model.type: only byte-level BPE is supported, got " + model["type"].dump());
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    throw fail("model.vocab: missing or not an object of token -> id");
  }
  Tokenizer t;
  for (const auto& [token, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<long long>() < 0 ||
        id.get<long long>() > std::numeric_limits<std::int32_t>::max()) {
      throw fail("model.vocab." + token + ": the id must be a whole number >= 0");
    }
    const auto v = static_cast<std::int32_t>(id.get<long long>());
    t.vocab_[token] = v;
    t.by_id_[v] = token;
    t.vocab_size_ = std::max(t.vocab_size_, v + 1);
  }
  if (model.contains("merges")) {
    if (!model["merges"].is_array()) throw fail("model.merges: expected a list");
    int rank = 0;
    for (const json& m : model["merges"]) {
      std::pair<std::string, std::string> pair;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const auto space = s.find(' ');
        if (space == std::string::npos)
          throw fail("model.merges[" + std::to_string(rank) + "]: expected \"a b\"");
        pair = {s.substr(0, space), s.substr(space + 1)};
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        pair = {m[0].get<std::string>(), m[1].get<std::string>()};
      } else {
        throw fail("model.merges[" + std::to_string(rank) +
                   "]: expected \"a b\" or [\"a\", \"b\"]");
      }
      t.merge_rank_.emplace(std::move(pair), rank++);
    }
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a.contains("content") ||
          !a["id"].is_number_integer() || !a["content"].is_string()) {
        throw fail("added_tokens: each needs an integer id and a string content");
      }
      const auto id = static_cast<std::int32_t>(a["id"].get<long long>());
      const std::string content = a["content"].get<std::string>();
      if (content.empty()) continue;
      t.added_.emplace_back(content, id);
      t.added_by_id_[id] = content;
      t.vocab_size_ = std::max(t.vocab_size_, id + 1);
    }
    std::stable_sort(t.added_.begin(), t.added_.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
  return t;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  const auto& inverse = unicode_to_byte();
  std::string out;
  for (std::int32_t id : ids) {
    if (auto a = added_by_id_.find(id); a != added_by_id_.end()) {
      out += a->second;
      continue;
    }
    const auto it = by_id_.find(id);
    if (it == by_id_.end())
      throw TokenizerError("decode: token id " + std::to_string(id) + " is not in the vocabulary");
    const std::string& token = it->second;
    for (std::size_t i = 0; i < token.size();) {
      const std::size_t len =
          std::min(utf8_length(static_cast<unsigned char>(token[i])), token.size() - i);
      const auto b = inverse.find(token.substr(i, len));
      if (b == inverse.end()) {
        throw TokenizerError("decode: token " + std::to_string(id) + " ('" + token +
                             "') is not byte-level: it has a character outside GPT-2's byte map");
      }
      out += static_cast<char>(b->second);
      i += len;
    }
  }
  return out;
}

std::vector<std::int32_t> Tokenizer::encode_piece(std::string_view piece) const {
  const auto& fwd = byte_to_unicode();
  std::vector<std::string> symbols;
  for (char c : piece) symbols.push_back(fwd[static_cast<unsigned char>(c)]);
  while (symbols.size() > 1) {
    int best = std::numeric_limits<int>::max();
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto r = merge_rank_.find({symbols[i], symbols[i + 1]});
      if (r != merge_rank_.end() && r->second < best) {
        best = r->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<int>::max()) break;
    const std::string left = symbols[at], right = symbols[at + 1];
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        merged.push_back(left + right);
        i += 2;
      } else {
        merged.push_back(symbols[i++]);
      }
    }
    symbols = std::move(merged);
  }
  std::vector<std::int32_t> ids;
  for (const std::string& s : symbols) {
    const auto it = vocab_.find(s);
    if (it == vocab_.end())
      throw TokenizerError("encode: symbol '" + s + "' is not in the vocabulary");
    ids.push_back(it->second);
  }
  return ids;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  auto encode_plain = [&](std::string_view plain) {
    for (std::string_view piece : pre_tokenize(plain)) {
      const std::vector<std::int32_t> part = encode_piece(piece);
      ids.insert(ids.end(), part.begin(), part.end());
    }
  };
  std::size_t plain_start = 0;
  for (std::size_t i = 0; i < text.size();) {
    bool matched = false;
    for (const auto& [content, id] : added_) {  // longest first
      if (text.substr(i, content.size()) == content) {
        encode_plain(text.substr(plain_start, i - plain_start));
        ids.push_back(id);
        i += content.size();
        plain_start = i;
        matched = true;
        break;
      }
    }
    if (!matched) ++i;
  }
  encode_plain(text.substr(plain_start));
  return ids;
}

}  // namespace wafersim::models
