// Hugging Face tokenizer.json files: made ones in the shapes of GPT-2, Llama 3,
// Qwen2 and Mistral (both of its spellings), with ids worked out by hand from
// the vocabularies and merges below (each expectation says how).
#include "models/tokenizer.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace wafersim::models {
namespace {

using nlohmann::json;
using Ids = std::vector<std::int32_t>;

// Llama 3's and Qwen2's split patterns, as their tokenizer.json files spell them.
const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json bpe(json vocab, json merges) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", false},
          {"vocab", std::move(vocab)},
          {"merges", std::move(merges)}};
}

json added(int id, const std::string& content, bool special = true) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

json file(json model) {
  return {{"version", "1.0"},          {"truncation", nullptr},
          {"padding", nullptr},        {"added_tokens", json::array()},
          {"normalizer", nullptr},     {"pre_tokenizer", nullptr},
          {"post_processor", nullptr}, {"decoder", nullptr},
          {"model", std::move(model)}};
}

Tokenizer load(const json& j) {
  return Tokenizer::from_json(j.dump());
}

// The 256 byte tokens of GPT-2's byte map (id = byte value), then `extra`
// tokens from id 256 on.
json byte_level_vocab(const std::vector<std::string>& extra) {
  json v = json::object();
  for (int b = 0; b < 256; ++b) v[byte_to_unicode()[static_cast<std::size_t>(b)]] = b;
  for (std::size_t i = 0; i < extra.size(); ++i) v[extra[i]] = 256 + static_cast<int>(i);
  return v;
}

const json kByteLevel = {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", true},
                         {"use_regex", true}};

// GPT-2's shape. In byte-level tokens 'Ġ' is the space byte, 'Ċ' the newline
// and 'Â' the byte 0xC2.
json gpt2_style(bool pair_merges = false) {
  json j =
      file(bpe(byte_level_vocab({"he", "Ġt", "Ġthe", "ll", "llo", "hello", "ĊĊ", "xÂ"}),
               pair_merges ? json::array({json::array({"h", "e"}), json::array({"Ġ", "t"}),
                                          json::array({"Ġt", "he"}), json::array({"l", "l"}),
                                          json::array({"ll", "o"}), json::array({"he", "llo"}),
                                          json::array({"Ċ", "Ċ"}), json::array({"x", "Â"})})
                           : json{"h e", "Ġ t", "Ġt he", "l l", "ll o", "he llo", "Ċ Ċ", "x Â"}));
  j["added_tokens"] = {added(264, "<|endoftext|>")};
  j["pre_tokenizer"] = kByteLevel;
  j["decoder"] = kByteLevel;
  return j;
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

TEST(Gpt2Style, EncodesWithRankedMergesAndDecodesBack) {
  for (bool pairs : {false, true}) {
    const Tokenizer t = load(gpt2_style(pairs));
    EXPECT_EQ(t.vocab_size(), 265);
    // "hello" merges fully (h e, l l, ll o, he llo); " the" is Ġthe;
    // " hello" is Ġ + hello (no merge starts with Ġh).
    const Ids ids = t.encode("hello the hello");
    EXPECT_EQ(ids, (Ids{261, 258, 32, 261}));
    EXPECT_EQ(t.decode(ids), "hello the hello");
  }
}

TEST(Gpt2Style, PreTokenizesWithGpt2sPattern) {
  const Tokenizer t = load(gpt2_style());
  // "  the": the first space alone (\s+(?!\S)), then " the".
  EXPECT_EQ(t.encode("a  the"), (Ids{'a', ' ', 258}));
  // Contractions, digits and punctuation are pieces of their own.
  EXPECT_EQ(t.encode("he's 42!"), (Ids{256, '\'', 's', ' ', '4', '2', '!'}));
  // "\n\n" before a word: \s+(?!\S) takes one newline, \s+ the other, so the
  // Ċ Ċ merge never sees them together; at the end of the text it does.
  EXPECT_EQ(t.encode("a\n\nb"), (Ids{'a', '\n', '\n', 'b'}));
  EXPECT_EQ(t.encode("a\n\n"), (Ids{'a', 262}));
  // '²' (U+00B2, C2 B2) is \p{N}, not a letter: "x" and "²" are two pieces,
  // so the x Â merge does not apply.
  EXPECT_EQ(t.encode("x\xC2\xB2"), (Ids{'x', 0xC2, 0xB2}));
  // Unicode letters stay in their word: ids are the UTF-8 bytes.
  EXPECT_EQ(t.encode("\xCE\xA9mega"), (Ids{0xCE, 0xA9, 'm', 'e', 'g', 'a'}));
}

TEST(Gpt2Style, SpecialTokensAndUnicodeRoundTrip) {
  const Tokenizer t = load(gpt2_style());
  EXPECT_EQ(t.encode("hello<|endoftext|>hello"), (Ids{261, 264, 261}));
  const std::vector<std::string> texts = {
      "caf\xC3\xA9 \xE2\x82\xAC\n\n  tabs\tend ",           // é, €, blank runs
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",               // 日本語
      "\xF0\x9F\x98\x80 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",  // 😀 👍🏽
      "e\xCC\x81 n\xCC\x83",                                // e + U+0301, n + U+0303
      "\r\n\r\n\v\f \xC2\xA0\xE3\x80\x80x",                 // CR LF, VT, FF, NBSP, U+3000
      "<|endoftext|><|endoftext|>x<|endoftext|>",
      ""};
  for (const std::string& text : texts) {
    const Ids ids = t.encode(text);
    EXPECT_EQ(t.decode(ids), text);
    // Token by token, the bytes are the same (no U+FFFD inside a character).
    std::string pieces;
    for (std::int32_t id : ids) pieces += t.decode(Ids{id});
    EXPECT_EQ(pieces, text);
  }
  // 日 is E6 97 A5: three byte tokens.
  EXPECT_EQ(t.encode("\xE6\x97\xA5"), (Ids{0xE6, 0x97, 0xA5}));
  EXPECT_THROW(t.decode(Ids{999}), TokenizerError);
  EXPECT_THROW(t.encode("bad \xFF byte"), TokenizerError);
}

// Llama 3's shape: Split with its pattern, then ByteLevel without a regex;
// ignore_merges; <|begin_of_text|> added by the template.
json llama3_style() {
  json j = file(bpe(byte_level_vocab({"12", "123", "34", "45", "ĊĊ", "T'", "eÌ", "hello"}),
                    {"1 2", "3 4", "12 3", "4 5", "Ċ Ċ", "T '", "e Ì"}));
  j["model"]["ignore_merges"] = true;
  j["added_tokens"] = {added(264, "<|begin_of_text|>"), added(265, "<|eot_id|>")};
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", kLlama3Pattern}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}}}}};
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {kByteLevel,
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"pair",
          {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
           {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 1}}}},
           {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
         {"special_tokens",
          {{"<|begin_of_text|>",
            {{"id", "<|begin_of_text|>"}, {"ids", {264}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
  j["decoder"] = kByteLevel;
  return j;
}

TEST(Llama3Style, SplitsWithItsPattern) {
  const Tokenizer t = load(llama3_style());
  // \p{N}{1,3}: "123" and "45". Within "123": 1 2 -> 12, 12 3 -> 123. Unsplit,
  // the 3 4 merge (rank 1) would come before 12 3 (rank 2).
  EXPECT_EQ(t.encode("12345"), (Ids{257, 259}));
  // (?i:'s) takes "'S": "IT" and "'S" are two pieces; the T ' merge waits in vain.
  EXPECT_EQ(t.encode("IT'S"), (Ids{'I', 'T', '\'', 'S'}));
  // \s*[\r\n]+ keeps "\n\n" whole (GPT-2's pattern splits it): Ċ Ċ applies.
  EXPECT_EQ(t.encode("a\n\nb"), (Ids{'a', 260, 'b'}));
  // A combining accent (U+0301, CC 81) is no \p{L}: "e" and the accent are
  // two pieces, and e Ì does not merge.
  EXPECT_EQ(t.encode("e\xCC\x81"), (Ids{'e', 0xCC, 0x81}));
  // CJK letters are one piece; an emoji is "other".
  EXPECT_EQ(t.encode("\xE6\x97\xA5\xE6\x9C\xAC"), (Ids{0xE6, 0x97, 0xA5, 0xE6, 0x9C, 0xAC}));
  EXPECT_EQ(t.encode("a\xF0\x9F\x98\x80"), (Ids{'a', 0xF0, 0x9F, 0x98, 0x80}));
}

TEST(Llama3Style, IgnoreMergesAndSpecialTokens) {
  const Tokenizer t = load(llama3_style());
  // ignore_merges: "hello" is in the vocabulary, so it is one token although
  // no merge builds it.
  EXPECT_EQ(t.encode("hello"), (Ids{263}));
  EXPECT_EQ(t.encode("<|begin_of_text|>hello<|eot_id|>"), (Ids{264, 263, 265}));
  EXPECT_EQ(t.encode("hello", /*add_special_tokens=*/true), (Ids{264, 263}));
  EXPECT_EQ(t.encode("", true), (Ids{264}));
  EXPECT_EQ(t.decode(Ids{264, 263, 265}), "<|begin_of_text|>hello<|eot_id|>");
  EXPECT_EQ(t.token_to_id("<|eot_id|>"), 265);
  EXPECT_EQ(t.token_to_id("Ġ"), 32);
  EXPECT_FALSE(t.token_to_id("nope").has_value());
  EXPECT_EQ(t.id_to_token(257), "123");
  EXPECT_TRUE(t.has_id(265));
  EXPECT_FALSE(t.has_id(266));
  EXPECT_EQ(t.vocab_size(), 266);
}

TEST(Qwen2Style, NormalizesToNfcAndSplitsDigitsOneByOne) {
  json j = llama3_style();
  j["model"]["ignore_merges"] = false;
  j["normalizer"] = {{"type", "NFC"}};
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = kQwen2Pattern;
  j["post_processor"] = kByteLevel;
  const Tokenizer t = load(j);
  // e + U+0301 composes to é (U+00E9, C3 A9) before anything else.
  EXPECT_EQ(t.encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));
  EXPECT_EQ(t.decode(t.encode("e\xCC\x81")), "\xC3\xA9");
  // \p{N}: one digit per piece, so the 1 2 merge never applies.
  EXPECT_EQ(t.encode("123"), (Ids{'1', '2', '3'}));
  // Without ignore_merges, "hello" is its bytes (no merges reach it).
  EXPECT_EQ(t.encode("hello"), (Ids{'h', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(t.encode("hello", true), (Ids{'h', 'e', 'l', 'l', 'o'}));  // ByteLevel adds nothing
}

// Mistral's shape: SentencePiece-style BPE over characters, '▁' for spaces,
// byte fallback to <0xNN>. Ids: <unk> 0, <s> 1, </s> 2, <0x00>..<0xFF> 3..258
// (<0xNN> is 3 + NN), then the characters and merged pieces below.
json sentencepiece_style(bool metaspace) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    vocab[std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">"] = 3 + b;
  }
  const std::vector<std::string> pieces = {"▁",  "h",    "e",  "l",      "o",     "w",      "r",
                                           "d",  "▁h",   "ll", "▁he",    "▁hell", "▁hello", "▁w",
                                           "or", "▁wor", "ld", "▁world", "日",    "本"};
  for (std::size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = 259 + static_cast<int>(i);
  json j = file(bpe(
      vocab, {"▁ h", "l l", "▁h e", "▁he ll", "▁hell o", "▁ w", "o r", "▁w or", "l d", "▁wor ld"}));
  j["model"]["unk_token"] = "<unk>";
  j["model"]["fuse_unk"] = true;
  j["model"]["byte_fallback"] = true;
  j["added_tokens"] = {added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")};
  if (metaspace) {  // the newer conversion
    j["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  } else {  // the original one
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers",
                        {{{"type", "Prepend"}, {"prepend", "▁"}},
                         {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
  }
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                    {{"type", "ByteFallback"}},
                    {{"type", "Fuse"}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  return j;
}

TEST(SentencePieceStyle, EncodesLikeMistral) {
  for (bool metaspace : {false, true}) {
    SCOPED_TRACE(metaspace ? "Metaspace pre-tokenizer" : "Prepend + Replace normalizer");
    const Tokenizer t = load(sentencepiece_style(metaspace));
    // "▁hello▁world" is one word: ▁ h (0), l l (1), ▁h e (2), ▁he ll (3),
    // ▁hell o (4), ▁ w (5), o r (6), ▁w or (7), l d (8), ▁wor ld (9).
    EXPECT_EQ(t.encode("hello world"), (Ids{271, 276}));
    EXPECT_EQ(t.encode("hello world", true), (Ids{1, 271, 276}));
    // Two spaces: the first ▁ stays alone, the second starts ▁world.
    EXPECT_EQ(t.encode("hello  world"), (Ids{271, 259, 276}));
    // é (C3 A9) is not in the vocabulary: <0xC3> <0xA9>.
    EXPECT_EQ(t.encode("h\xC3\xA9"), (Ids{267, 3 + 0xC3, 3 + 0xA9}));
    // 😀 (F0 9F 98 80) likewise; 日 and 本 are in it.
    EXPECT_EQ(t.encode("\xF0\x9F\x98\x80"), (Ids{259, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
    EXPECT_EQ(t.encode("\xE6\x97\xA5\xE6\x9C\xAC"), (Ids{259, 277, 278}));
    // A newline is <0x0A>; "world" without ▁ only gets o r and l d.
    EXPECT_EQ(t.encode("hello\nworld"), (Ids{271, 3 + '\n', 264, 273, 275}));
  }
}

TEST(SentencePieceStyle, SpecialTokensAndThePrependScheme) {
  // The original spelling prepends ▁ to every stretch between added tokens;
  // Metaspace with prepend_scheme "first" only at the start of the text.
  EXPECT_EQ(load(sentencepiece_style(false)).encode("<s>hello"), (Ids{1, 271}));
  // "hello" alone: l l -> ll, nothing else (every other merge needs ▁).
  EXPECT_EQ(load(sentencepiece_style(true)).encode("<s>hello"), (Ids{1, 260, 261, 268, 263}));
  EXPECT_EQ(load(sentencepiece_style(true)).encode("hello</s>"), (Ids{271, 2}));
}

TEST(SentencePieceStyle, DecodesAndRoundTrips) {
  for (bool metaspace : {false, true}) {
    const Tokenizer t = load(sentencepiece_style(metaspace));
    // ▁ -> space, <0xNN> -> bytes, fused, the first space stripped.
    EXPECT_EQ(t.decode(Ids{271, 276}), "hello world");
    EXPECT_EQ(t.decode(Ids{267, 3 + 0xC3, 3 + 0xA9}), "h\xC3\xA9");
    EXPECT_EQ(t.decode(Ids{1, 271, 2}), "<s> hello</s>");
    for (const std::string text :
         {"hello world", "tabs\tand\nnew\r\nlines  ", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E ok",
          "e\xCC\x81\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xEF\xBB\xBF\xE2\x80\x8Bz"}) {
      EXPECT_EQ(t.decode(t.encode(text)), text);
    }
  }
  // A leading space: the original spelling prepends ▁ anyway ("▁▁▁two"), and
  // the decoder strips one space again. Metaspace's "first" prepends nothing
  // to a text that already starts with ▁, so one space is lost, as in
  // Hugging Face.
  EXPECT_EQ(load(sentencepiece_style(false))
                .decode(load(sentencepiece_style(false)).encode("  two leading")),
            "  two leading");
  const Tokenizer metaspace = load(sentencepiece_style(true));
  // "▁▁two" ('t' is not in the vocabulary: <0x74>; no merge applies).
  EXPECT_EQ(metaspace.encode("  two"), (Ids{259, 259, 3 + 't', 264, 263}));
  EXPECT_EQ(metaspace.decode(metaspace.encode("  two leading")), " two leading");
}

TEST(SentencePieceStyle, UnknownCharactersFuseIntoOneUnk) {
  json j = sentencepiece_style(false);
  j["model"]["byte_fallback"] = false;
  // "▁h😀😀": ▁ h -> ▁h, and the two unknown characters one <unk> (fuse_unk).
  EXPECT_EQ(load(j).encode("h\xF0\x9F\x98\x80\xF0\x9F\x98\x80"), (Ids{267, 0}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(load(j).encode("h\xF0\x9F\x98\x80\xF0\x9F\x98\x80"), (Ids{267, 0, 0}));
  // Neither byte fallback nor unk_token: an error, not a silent drop.
  j["model"]["unk_token"] = nullptr;
  EXPECT_THROW(load(j).encode("h\xF0\x9F\x98\x80"), TokenizerError);
}

TEST(MetaspaceDecoder, DropsTheFirstReplacementOfTheFirstToken) {
  json j = sentencepiece_style(true);
  j["decoder"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "always"}, {"split", true}};
  const Tokenizer t = load(j);
  EXPECT_EQ(t.decode(Ids{271, 276}), "hello world");
  EXPECT_EQ(t.decode(Ids{259, 259, 271}), "  hello");  // the first token "▁" decodes to ""
  EXPECT_EQ(t.decode(Ids{260, 276}), "h world");
}

TEST(MetaspaceSplit, SplitsBeforeEachReplacement) {
  json j = sentencepiece_style(true);
  j["pre_tokenizer"]["split"] = true;
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  // "▁hello▁▁world" cut before each ▁: "▁hello", "▁", "▁world".
  EXPECT_EQ(load(j).encode("<s>hello  world"), (Ids{1, 271, 259, 276}));
}

TEST(AddedTokens, StripAndSingleWordOptions) {
  json j = gpt2_style();
  j["added_tokens"] = {added(264, "<mask>"), added(265, "<R>"), added(266, "word", false)};
  j["added_tokens"][0]["lstrip"] = true;
  j["added_tokens"][1]["rstrip"] = true;
  j["added_tokens"][2]["single_word"] = true;
  const Tokenizer t = load(j);
  EXPECT_EQ(t.encode("a <mask>b"), (Ids{'a', 264, 'b'}));  // lstrip takes the space
  EXPECT_EQ(t.encode("a<R>  b"), (Ids{'a', 265, 'b'}));    // rstrip takes both
  EXPECT_EQ(t.encode("a word b"), (Ids{'a', ' ', 266, ' ', 'b'}));
  EXPECT_EQ(t.encode("swords"), (Ids{'s', 'w', 'o', 'r', 'd', 's'}));  // not a word of its own
  EXPECT_EQ(t.encode("word_"), (Ids{'w', 'o', 'r', 'd', '_'}));        // '_' is a word character
}

TEST(Tokenizer, ReadsFilesAndNamesThemInErrors) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("wafersim_tokenizer_test_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << gpt2_style().dump();
  EXPECT_EQ(Tokenizer::from_file(path).encode("hello"), (Ids{261}));
  json j = gpt2_style();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  std::ofstream(path) << j.dump();
  try {
    Tokenizer::from_file(path);
    ADD_FAILURE() << "an unsupported pre-tokenizer was accepted";
  } catch (const TokenizerError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("pre_tokenizer.type"), std::string::npos) << what;
    EXPECT_NE(what.find("ByteLevel, Split, Metaspace, Sequence"), std::string::npos) << what;
  }
  std::filesystem::remove(path);
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), TokenizerError);
}

TEST(Tokenizer, RejectsWhatItDoesNotUnderstand) {
  auto message = [](const json& j) -> std::string {
    try {
      load(j);
    } catch (const TokenizerError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  json j = gpt2_style();
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(message(j).find("model.type: \"WordPiece\" is not supported"), std::string::npos);
  j = gpt2_style();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}}}};
  EXPECT_NE(message(j).find("normalizer.normalizers[0].type"), std::string::npos);
  j = gpt2_style();
  j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
  EXPECT_NE(message(j).find("decoder.type"), std::string::npos);
  j = gpt2_style();
  j["model"]["merges"] = {"h zz"};
  EXPECT_NE(message(j).find("model.merges[0]: \"zz\" is not in model.vocab"), std::string::npos);
  j = gpt2_style();
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(message(j).find("model.dropout"), std::string::npos);
  j = gpt2_style();
  j["pre_tokenizer"]["add_prefix_spaces"] = true;  // a misspelt key
  EXPECT_NE(message(j).find("pre_tokenizer.add_prefix_spaces: unknown key"), std::string::npos);
}

}  // namespace
}  // namespace wafersim::models
