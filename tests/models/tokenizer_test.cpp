#include "models/tokenizer.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace wafersim::models {
namespace {

// A small byte-level BPE tokenizer.json: the 256 byte tokens (ids 0-255 in
// byte order), then merged tokens, and one special token.
std::string tokenizer_json(bool pair_merges = false) {
  const auto& b2u = byte_to_unicode();
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string tok = b2u[b];
    if (tok == "\"") tok = "\\\"";
    if (tok == "\\") tok = "\\\\";
    vocab += "\"" + tok + "\":" + std::to_string(b) + ",";
  }
  // "Ġ" is the space byte, 'Ċ' the newline.
  vocab += "\"he\":256,\"Ġt\":257,\"Ġthe\":258,\"ll\":259,\"llo\":260,\"hello\":261";
  const std::string merges =
      pair_merges ? R"([["h","e"],["Ġ","t"],["Ġt","he"],["l","l"],["ll","o"],["he","llo"]])"
                  : R"(["h e","Ġ t","Ġt he","l l","ll o","he llo"])";
  return R"({"version":"1.0","added_tokens":[{"id":262,"content":"<|endoftext|>","special":true}],)"
         R"("model":{"type":"BPE","vocab":{)" +
         vocab + "},\"merges\":" + merges + "}}";
}

TEST(ByteToUnicode, IsGpt2sMap) {
  const auto& m = byte_to_unicode();
  EXPECT_EQ(m['A'], "A");
  EXPECT_EQ(m[' '], "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(m['\n'], "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(m[0], "\xC4\x80");     // U+0100
  EXPECT_EQ(m[0xAD], "\xC5\x83");  // soft hyphen, the 68th unprintable: U+0143
  EXPECT_EQ(m[0xE9], "\xC3\xA9");  // printable Latin-1 maps to itself
}

TEST(Tokenizer, EncodesWithRankedMergesAndDecodesBack) {
  for (bool pairs : {false, true}) {
    const Tokenizer t = Tokenizer::from_json(tokenizer_json(pairs));
    EXPECT_EQ(t.vocab_size(), 263);
    // "hello" merges fully; " the" -> Ġthe; " hello" is Ġ + hello (no "Ġh" merge).
    const std::vector<std::int32_t> ids = t.encode("hello the hello");
    EXPECT_EQ(ids, (std::vector<std::int32_t>{261, 258, 32, 261}));
    EXPECT_EQ(t.decode(ids), "hello the hello");
  }
}

TEST(Tokenizer, PreTokenizesLikeGpt2) {
  const Tokenizer t = Tokenizer::from_json(tokenizer_json());
  // "  the": the first space alone (\s+(?!\S)), then " the".
  EXPECT_EQ(t.encode("a  the"), (std::vector<std::int32_t>{'a', ' ', 258}));
  // Contractions and digits split off; punctuation is its own piece.
  EXPECT_EQ(t.encode("he's 42!"), (std::vector<std::int32_t>{256, '\'', 's', ' ', '4', '2', '!'}));
}

TEST(Tokenizer, SpecialTokensAndArbitraryBytesRoundTrip) {
  const Tokenizer t = Tokenizer::from_json(tokenizer_json());
  const std::string text = "hello<|endoftext|>caf\xC3\xA9 \xE2\x82\xAC\n\n  tabs\tend ";
  const std::vector<std::int32_t> ids = t.encode(text);
  EXPECT_EQ(ids[0], 261);
  EXPECT_EQ(ids[1], 262);
  EXPECT_EQ(t.decode(ids), text);
  const std::vector<std::int32_t> bad = {999};
  EXPECT_THROW(t.decode(bad), TokenizerError);
}

TEST(Tokenizer, RejectsUnusableFiles) {
  EXPECT_THROW(Tokenizer::from_json("{ nope"), TokenizerError);
  EXPECT_THROW(Tokenizer::from_json(R"({"model":{"type":"WordPiece","vocab":{}}})"),
               TokenizerError);
  EXPECT_THROW(Tokenizer::from_json(R"({"model":{"type":"BPE","vocab":{},"merges":["ab"]}})"),
               TokenizerError);
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), TokenizerError);
}

}  // namespace
}  // namespace wafersim::models
