// Hugging Face tokenizer.json files: text into ids and generated ids back into
// text, following the pipeline the file spells out (normalizer,
// pre-tokenizer, BPE model, decoder, post-processor), as the `tokenizers`
// library runs it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace wafersim::models {

// A tokenizer.json that cannot be used (its message names the file and the
// JSON key path), or a text or id that the tokenizer cannot handle.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The components understood, which cover the tokenizers of every preset in
// scenarios/models/ (GPT-2, Llama 3.x, Mistral 7B / Mixtral in both of their
// SentencePiece-style spellings, Qwen2 / Qwen3):
//  - model: BPE (vocab, merges as "a b" or ["a", "b"], unk_token, fuse_unk,
//    byte_fallback to <0xNN> tokens, ignore_merges; dropout null or 0;
//    continuing_subword_prefix / end_of_word_suffix null or "");
//  - normalizer: null, NFC, NFD, NFKC, NFKD, Prepend, Replace (String or
//    Regex pattern), Sequence of those;
//  - pre_tokenizer: null, ByteLevel (add_prefix_space, use_regex: GPT-2's
//    pattern), Split (String or Regex pattern; Isolated, Removed,
//    MergedWithPrevious, MergedWithNext or Contiguous; invert), Metaspace
//    (replacement, prepend_scheme always / first / never or the older
//    add_prefix_space, split), Sequence of those;
//  - decoder: null (tokens joined by spaces, as Hugging Face does), ByteLevel,
//    Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence of those;
//  - post_processor: null, ByteLevel (no effect on ids), TemplateProcessing
//    (its `single` template), Sequence of those;
//  - added_tokens with single_word, lstrip, rstrip, normalized, special,
//    their ids as Hugging Face numbers them (the id of the same content in
//    model.vocab, else the next free one); truncation and padding null.
// Anything else (another model, component or key) is a TokenizerError naming
// the file, the key path and what is supported: nothing is approximated.
// Regular expressions are ICU's (Hugging Face uses Oniguruma; the patterns of
// the tokenizers above mean the same in both).
//
// Two deliberate differences from Hugging Face: a character that neither the
// vocabulary, byte fallback nor unk_token can represent is a TokenizerError
// (Hugging Face drops it silently), and decode returns bytes: where Hugging
// Face replaces an invalid UTF-8 sequence (a token that ends inside a
// character) by U+FFFD, the bytes are kept, so decoding ids one at a time
// and concatenating gives the bytes of decoding them all at once (for
// ByteLevel and ByteFallback decoders).
class Tokenizer {
 public:
  // TokenizerError naming the file: unreadable, not JSON (or a duplicated
  // key, or nested deeper than 64 levels), a key or component not understood,
  // a malformed or inconsistent vocabulary, merge, added token or template.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  static Tokenizer from_json(const std::string& text, const std::string& origin = "tokenizer.json");

  // Largest id + 1 over the vocabulary and the added tokens.
  int vocab_size() const;
  bool has_id(std::int32_t id) const;
  // The token as the file spells it ("Ġthe", "▁the", "<0x0A>", "<s>"); for
  // an added token its content (normalized when the token is `normalized`,
  // as Hugging Face keeps it). TokenizerError for an unknown id.
  const std::string& id_to_token(std::int32_t id) const;
  // The id of an added token's content, else of a vocabulary entry.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;

  // Text (valid UTF-8, else TokenizerError) into ids, as Hugging Face's
  // encode(text, add_special_tokens=...) does; with add_special_tokens the
  // post-processor's template adds its tokens (Llama 3's <|begin_of_text|>,
  // Mistral's <s>).
  std::vector<std::int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // Ids into the bytes of the text through the decoder (added tokens as their
  // content). TokenizerError for an id that is not in the vocabulary.
  std::string decode(std::span<const std::int32_t> ids) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // immutable once read: copies share it
};

// GPT-2's byte -> code point map (bytes 33-126, 161-172 and 174-255 map to
// themselves, the other 68 to 256, 257, ... in byte order), as UTF-8 strings
// per byte.
const std::vector<std::string>& byte_to_unicode();

}  // namespace wafersim::models
