// Byte-level BPE tokenizer (GPT-2 style) read from a Hugging Face
// tokenizer.json: turns generated ids back into text, and text into ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace wafersim::models {

// A tokenizer.json that cannot be used, or an id/text it cannot handle.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Byte-level BPE as GPT-2, Llama 3 and Qwen use it:
//  - every byte is first mapped to a printable code point (GPT-2's
//    bytes_to_unicode: bytes 33-126, 161-172 and 174-255 map to themselves,
//    the other 68 to 256, 257, ... in byte order); vocabulary entries are
//    strings of those code points;
//  - `model.merges` (strings "a b" or pairs ["a", "b"]) rank the merges:
//    within a pre-token, the adjacent pair with the lowest rank is merged
//    (every occurrence, left to right) until no ranked pair remains;
//  - `added_tokens` (special tokens such as <|endoftext|>) are matched
//    verbatim in text before anything else and decode to their content.
// Pre-tokenization follows GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with letters = ASCII letters and every non-ASCII byte, numbers = ASCII
// digits (no Unicode tables here): exact for ASCII text; for other scripts
// the ids may differ from Hugging Face's, decoding is still exact.
class Tokenizer {
 public:
  // Throws TokenizerError naming the file (unreadable, invalid JSON, a model
  // type other than BPE, a malformed vocab or merge).
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  static Tokenizer from_json(const std::string& text, const std::string& origin = "tokenizer.json");

  // Largest id + 1 over the vocabulary and the added tokens.
  int vocab_size() const { return vocab_size_; }
  // Concatenated bytes of the tokens (special tokens as their content).
  // TokenizerError for an id that is not in the vocabulary.
  std::string decode(std::span<const std::int32_t> ids) const;
  std::vector<std::int32_t> encode(std::string_view text) const;

 private:
  std::vector<std::int32_t> encode_piece(std::string_view piece) const;

  std::unordered_map<std::string, std::int32_t> vocab_;  // token (mapped code points) -> id
  std::unordered_map<std::int32_t, std::string> by_id_;  // id -> token
  std::map<std::pair<std::string, std::string>, int> merge_rank_;
  std::vector<std::pair<std::string, std::int32_t>> added_;  // content, id; longest first
  std::unordered_map<std::int32_t, std::string> added_by_id_;
  int vocab_size_ = 0;
};

// GPT-2's byte -> code point map (see above), as UTF-8 strings per byte.
const std::vector<std::string>& byte_to_unicode();

}  // namespace wafersim::models
