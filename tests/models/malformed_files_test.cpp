// Broken tokenizer.json and safetensors files, made here: every one must be a
// TokenizerError / WeightsError that names the file, never a crash, a hang, a
// std::bad_alloc or another exception. Then a few hundred random byte flips
// (fixed seed) of a valid file of each kind, which must load or fail the same
// clear way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "models/dtype.hpp"
#include "models/hf_config.hpp"
#include "models/safetensors.hpp"
#include "models/tokenizer.hpp"
#include "support/presets.hpp"

namespace wafersim::models {
namespace {

namespace fs = std::filesystem;
using wafersim::testing::preset_model;

class MalformedFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("wafersim-malformed-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& bytes) const {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    return p;
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

// ---------------------------------------------------------- tokenizer.json ---

// What loading a tokenizer.json did: "" when it loaded, else the message of
// the TokenizerError; any other exception fails the test.
std::string tokenizer_error(const fs::path& file) {
  try {
    const Tokenizer t = Tokenizer::from_file(file);
    try {  // what loads must also encode and decode, or say why not
      t.decode(t.encode("Hello, world! 12 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80\n"));
    } catch (const TokenizerError&) {
    }
    return "";
  } catch (const TokenizerError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << file << ": " << typeid(e).name() << ": " << e.what();
  }
  return "(other exception)";
}

// A small valid tokenizer.json in Llama 3's shape, `model` replaced when given.
std::string valid_tokenizer(const std::string& model = "") {
  std::string vocab;
  const auto& b2u = byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    std::string tok = b2u[static_cast<std::size_t>(b)];
    if (tok == "\"" || tok == "\\") tok = "\\" + tok;
    vocab += "\"" + tok + "\":" + std::to_string(b) + ",";
  }
  vocab += R"("he":256,"ll":257,"hell":258,"hello":259)";
  return R"({"version":"1.0","truncation":null,"padding":null,
"added_tokens":[{"id":260,"content":"<|begin_of_text|>","single_word":false,"lstrip":false,
"rstrip":false,"normalized":false,"special":true}],
"normalizer":{"type":"NFC"},
"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":
"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,
"trim_offsets":true,"use_regex":false}]},
"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|begin_of_text|>",
"type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<|begin_of_text|>":
{"id":"<|begin_of_text|>","ids":[260],"tokens":["<|begin_of_text|>"]}}},
"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},
"model":)" +
         (model.empty() ? R"({"type":"BPE","dropout":null,"unk_token":null,"fuse_unk":false,
"byte_fallback":false,"ignore_merges":true,"vocab":{)" +
                              vocab + R"(},"merges":["h e","l l","he ll","hell o"]})"
                        : model) +
         "}";
}

// A tokenizer.json with one top-level member replaced (or added).
std::string with(const std::string& key, const std::string& value) {
  std::string t = valid_tokenizer();
  const std::string marker = "\"" + key + "\":";
  const auto at = t.find(marker);
  if (at == std::string::npos) return "{\"" + key + "\":" + value + "," + t.substr(1);
  // The old value ends where the next top-level key starts (or at the end).
  std::size_t end = t.size() - 1;
  for (const char* next : {",\n\"normalizer\"", ",\n\"pre_tokenizer\"", ",\n\"post_processor\"",
                           ",\n\"decoder\"", ",\n\"model\"", ",\n\"added_tokens\""}) {
    const auto n = t.find(next, at + marker.size());
    if (n != std::string::npos && n < end) end = n;
  }
  return t.substr(0, at + marker.size()) + value + t.substr(end);
}

std::string bpe_model(const std::string& vocab, const std::string& merges,
                      const std::string& more = "") {
  return R"({"type":"BPE")" + more + R"(,"vocab":)" + vocab + R"(,"merges":)" + merges + "}";
}

TEST_F(MalformedFiles, TheValidTokenizerLoads) {
  EXPECT_EQ(tokenizer_error(write("tokenizer.json", valid_tokenizer())), "");
  const Tokenizer t = Tokenizer::from_file(write("t.json", valid_tokenizer()));
  EXPECT_EQ(t.encode("hello", true), (std::vector<std::int32_t>{260, 259}));
}

TEST_F(MalformedFiles, BrokenTokenizersAreClearErrors) {
  const std::string deep_array = std::string(100000, '[') + std::string(100000, ']');
  std::string deep_object;
  for (int i = 0; i < 100000; ++i) deep_object += "{\"a\":";
  deep_object += "1" + std::string(100000, '}');
  std::string deep_normalizer = R"({"type":"NFC"})";
  for (int i = 0; i < 80; ++i)
    deep_normalizer = R"({"type":"Sequence","normalizers":[)" + deep_normalizer + "]}";
  const std::string a_b = R"({"a":0,"b":1,"ab":2})";

  const std::vector<std::pair<std::string, std::string>> corpus = {
      // Not JSON.
      {"empty", ""},
      {"blank", "   \n"},
      {"open brace", "{"},
      {"word", "nope"},
      {"open array", "[1,2"},
      {"missing value", R"({"model": })"},
      {"binary", std::string("\x00\x01\x02\xff", 4)},
      {"nul inside", std::string("{\"model\":\0}", 11)},
      {"nul after the document", valid_tokenizer() + std::string(1, '\0') + "garbage"},
      {"trailing garbage", valid_tokenizer() + "x"},
      {"two documents", valid_tokenizer() + valid_tokenizer()},
      // JSON of the wrong shape.
      {"array", "[]"},
      {"number", "42"},
      {"null", "null"},
      {"string", "\"tokenizer\""},
      {"no model", "{}"},
      {"model array", R"({"model":[]})"},
      {"model null", R"({"model":null})"},
      {"vocab array", with("model", bpe_model("[]", "[]"))},
      {"vocab missing", with("model", R"({"type":"BPE","merges":[]})")},
      {"merges missing", with("model", R"({"type":"BPE","vocab":{}})")},
      {"vocab string id", with("model", bpe_model(R"({"a":"0"})", "[]"))},
      {"vocab null id", with("model", bpe_model(R"({"a":null})", "[]"))},
      {"vocab bool id", with("model", bpe_model(R"({"a":true})", "[]"))},
      {"vocab nested id", with("model", bpe_model(R"({"a":{"id":0}})", "[]"))},
      {"merges object", with("model", bpe_model(a_b, R"({"a":"b"})"))},
      {"merge number", with("model", bpe_model(a_b, "[1]"))},
      {"merge null", with("model", bpe_model(a_b, "[null]"))},
      {"merge without space", with("model", bpe_model(a_b, R"(["ab"])"))},
      {"merge of three", with("model", bpe_model(a_b, R"(["a b a"])"))},
      {"merge pair of one", with("model", bpe_model(a_b, R"([["a"]])"))},
      {"merge pair of three", with("model", bpe_model(a_b, R"([["a","b","a"]])"))},
      {"merge pair of numbers", with("model", bpe_model(a_b, "[[0,1]]"))},
      {"added tokens object", with("added_tokens", "{}")},
      {"added token number", with("added_tokens", "[5]")},
      {"added token without id", with("added_tokens", R"([{"content":"<x>"}])")},
      {"added token without content", with("added_tokens", R"([{"id":260}])")},
      {"added token number content", with("added_tokens", R"([{"id":260,"content":5}])")},
      {"added token empty content", with("added_tokens", R"([{"id":260,"content":""}])")},
      {"added token special string",
       with("added_tokens", R"([{"id":260,"content":"<x>","special":"yes"}])")},
      {"unknown top-level key", with("tokenizer", "{}")},
      {"unknown model key", with("model", bpe_model(a_b, "[]", R"(,"vocab_size":3)"))},
      {"unknown pre-tokenizer key",
       with("pre_tokenizer", R"({"type":"ByteLevel","add_prefix_space":false,"regex":true})")},
      {"component without type", with("decoder", R"({"add_prefix_space":true})")},
      {"component type number", with("decoder", R"({"type":7})")},
      {"component not an object", with("normalizer", R"(["NFC"])")},
      // Merges with tokens that are not in the vocabulary.
      {"merge of unknown token", with("model", bpe_model(a_b, R"(["a q"])"))},
      {"merge into unknown token", with("model", bpe_model(R"({"a":0,"b":1})", R"(["a b"])"))},
      {"merge pair of unknown", with("model", bpe_model(a_b, R"([["q","b"]])"))},
      // Ids out of range, duplicated, negative.
      {"negative id", with("model", bpe_model(R"({"a":-1})", "[]"))},
      {"id int32 max", with("model", bpe_model(R"({"a":2147483647})", "[]"))},
      {"id 2^31", with("model", bpe_model(R"({"a":2147483648})", "[]"))},
      {"id 2^32", with("model", bpe_model(R"({"a":4294967296})", "[]"))},
      {"id uint64 max", with("model", bpe_model(R"({"a":18446744073709551615})", "[]"))},
      {"id beyond uint64", with("model", bpe_model(R"({"a":99999999999999999999999})", "[]"))},
      {"id float", with("model", bpe_model(R"({"a":1.0})", "[]"))},
      {"id exponent", with("model", bpe_model(R"({"a":1e10})", "[]"))},
      {"id overflowing double", with("model", bpe_model(R"({"a":1e400})", "[]"))},
      {"duplicated id", with("model", bpe_model(R"({"a":0,"b":0})", "[]"))},
      {"duplicated vocab key", with("model", bpe_model(R"({"a":0,"a":1})", "[]"))},
      {"duplicated top-level key", "{\"model\":{},\"model\":{}}"},
      {"duplicated added id",
       with("added_tokens", R"([{"id":260,"content":"<x>"},{"id":260,"content":"<y>"}])")},
      {"duplicated added content",
       with("added_tokens", R"([{"id":260,"content":"<x>"},{"id":261,"content":"<x>"}])")},
      {"added id not the next one", with("added_tokens", R"([{"id":300,"content":"<x>"}])")},
      {"added id of another vocab token", with("added_tokens", R"([{"id":5,"content":"<x>"}])")},
      {"added negative id", with("added_tokens", R"([{"id":-260,"content":"<x>"}])")},
      // Huge numbers where a count goes.
      {"strip start huge",
       with("decoder", R"({"type":"Strip","content":" ","start":1e20,"stop":0})")},
      {"strip stop uint64 max",
       with("decoder", R"({"type":"Strip","content":" ","start":1,"stop":18446744073709551615})")},
      {"dropout huge", with("model", bpe_model(a_b, "[]", R"(,"dropout":1e308)"))},
      // Deep nesting.
      {"deep array", deep_array},
      {"deep object", deep_object},
      {"deep normalizer", with("normalizer", deep_normalizer)},
      // Invalid UTF-8 (the file's bytes and JSON escapes).
      {"invalid byte in key", with("model", bpe_model("{\"\xff\":0}", "[]"))},
      {"overlong NUL", with("model", bpe_model("{\"\xc0\x80\":0}", "[]"))},
      {"encoded surrogate", with("model", bpe_model("{\"\xed\xa0\x80\":0}", "[]"))},
      {"cut sequence", with("model", bpe_model("{\"\xe6\x97\":0}", "[]"))},
      {"above U+10FFFF", with("model", bpe_model("{\"\xf4\x90\x80\x80\":0}", "[]"))},
      {"lone high surrogate escape", with("model", bpe_model(R"({"\ud800":0})", "[]"))},
      {"lone low surrogate escape", with("model", bpe_model(R"({"\udc00":0})", "[]"))},
      // Components and settings that are not supported.
      {"WordPiece", with("model", R"({"type":"WordPiece","vocab":{"a":0},"unk_token":"a"})")},
      {"Unigram", with("model", R"({"type":"Unigram","vocab":[["a",0.0]]})")},
      {"WordLevel", with("model", R"({"type":"WordLevel","vocab":{"a":0},"unk_token":"a"})")},
      {"dropout", with("model", bpe_model(a_b, "[]", R"(,"dropout":0.1)"))},
      {"subword prefix",
       with("model", bpe_model(a_b, "[]", R"(,"continuing_subword_prefix":"##")"))},
      {"word suffix", with("model", bpe_model(a_b, "[]", R"(,"end_of_word_suffix":"</w>")"))},
      {"unk not in vocab", with("model", bpe_model(a_b, "[]", R"(,"unk_token":"<unk>")"))},
      {"unk a number", with("model", bpe_model(a_b, "[]", R"(,"unk_token":0)"))},
      {"fuse_unk a string", with("model", bpe_model(a_b, "[]", R"(,"fuse_unk":"yes")"))},
      {"byte_fallback a number", with("model", bpe_model(a_b, "[]", R"(,"byte_fallback":1)"))},
      {"Lowercase", with("normalizer", R"({"type":"Lowercase"})")},
      {"BertNormalizer", with("normalizer", R"({"type":"BertNormalizer","lowercase":true})")},
      {"Precompiled",
       with("normalizer", R"({"type":"Precompiled","precompiled_charsmap":"AA=="})")},
      {"StripAccents", with("normalizer", R"({"type":"StripAccents"})")},
      {"Whitespace", with("pre_tokenizer", R"({"type":"Whitespace"})")},
      {"Digits", with("pre_tokenizer", R"({"type":"Digits","individual_digits":true})")},
      {"BertPreTokenizer", with("pre_tokenizer", R"({"type":"BertPreTokenizer"})")},
      {"WordPiece decoder", with("decoder", R"({"type":"WordPiece","prefix":"##"})")},
      {"BPEDecoder", with("decoder", R"({"type":"BPEDecoder","suffix":"</w>"})")},
      {"CTC", with("decoder", R"({"type":"CTC"})")},
      {"BertProcessing", with("post_processor", R"({"type":"BertProcessing"})")},
      {"RobertaProcessing", with("post_processor", R"({"type":"RobertaProcessing"})")},
      {"truncation", with("truncation", R"({"max_length":8})")},
      {"padding", with("padding", R"({"strategy":"BatchLongest"})")},
      // Bad settings of supported components.
      {"ByteLevel without add_prefix_space", with("pre_tokenizer", R"({"type":"ByteLevel"})")},
      {"empty replacement", with("pre_tokenizer", R"({"type":"Metaspace","replacement":""})")},
      {"two-character replacement",
       with("pre_tokenizer", R"({"type":"Metaspace","replacement":"ab"})")},
      {"unknown prepend scheme",
       with("pre_tokenizer",
            R"({"type":"Metaspace","replacement":"_","prepend_scheme":"sometimes"})")},
      {"add_prefix_space against prepend_scheme",
       with("pre_tokenizer", R"({"type":"Metaspace","replacement":"_","add_prefix_space":false})")},
      {"unknown split behavior",
       with("pre_tokenizer", R"({"type":"Split","pattern":{"String":" "},"behavior":"Bogus"})")},
      {"empty pattern object",
       with("pre_tokenizer", R"({"type":"Split","pattern":{},"behavior":"Isolated"})")},
      {"two patterns",
       with("pre_tokenizer", R"({"type":"Split","pattern":{"String":" ","Regex":" "},)"
                             R"("behavior":"Isolated"})")},
      {"unbalanced regex",
       with("pre_tokenizer", R"({"type":"Split","pattern":{"Regex":"("},"behavior":"Isolated"})")},
      {"reversed range regex",
       with("pre_tokenizer",
            R"({"type":"Split","pattern":{"Regex":"[z-a]"},"behavior":"Isolated"})")},
      {"empty string pattern",
       with("normalizer", R"({"type":"Replace","pattern":{"String":""},"content":"x"})")},
      {"replace without content",
       with("normalizer", R"({"type":"Replace","pattern":{"String":" "}})")},
      {"NFC with a key", with("normalizer", R"({"type":"NFC","form":"C"})")},
      {"sequence not a list", with("decoder", R"({"type":"Sequence","decoders":{}})")},
      {"template without single",
       with("post_processor", R"({"type":"TemplateProcessing","special_tokens":{}})")},
      {"template unknown special token",
       with("post_processor",
            R"({"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}}],)"
            R"("special_tokens":{}})")},
      {"template B in single",
       with("post_processor",
            R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"B","type_id":0}}],)"
            R"("special_tokens":{}})")},
      {"template item with both",
       with("post_processor",
            R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0},)"
            R"("SpecialToken":{"id":"A","type_id":0}}],"special_tokens":{}})")},
      {"template id not a token",
       with("post_processor",
            R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}}],)"
            R"("special_tokens":{"<s>":{"id":"<s>","ids":[999],"tokens":["<s>"]}}})")},
      {"template ids and tokens differ",
       with("post_processor",
            R"({"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}}],)"
            R"("special_tokens":{"<s>":{"id":"<s>","ids":[1,2],"tokens":["<s>"]}}})")},
  };
  int i = 0;
  for (const auto& [what, text] : corpus) {
    SCOPED_TRACE(what);
    const fs::path file = write("tokenizer-" + std::to_string(i++) + ".json", text);
    const std::string message = tokenizer_error(file);
    EXPECT_NE(message, "") << "accepted";
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

TEST_F(MalformedFiles, TokenizerFileErrorsNameTheFile) {
  for (const fs::path& file : {dir() / "missing.json", dir()}) {
    const std::string message = tokenizer_error(file);
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

TEST_F(MalformedFiles, RandomByteFlipsOfATokenizer) {
  const std::string valid = valid_tokenizer();
  std::mt19937 rng(20240518);
  int accepted = 0;
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::string text = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      text[rng() % text.size()] = static_cast<char>(rng() % 256);
    }
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    const fs::path file = write("flip.json", text);
    const std::string message = tokenizer_error(file);
    if (message.empty()) {
      ++accepted;
    } else {
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    }
  }
  // Most flips land in the 256 byte tokens' ids and spellings: some are
  // harmless, most are caught.
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 300);
}

// ------------------------------------------------------------ config.json ---

TEST_F(MalformedFiles, BrokenConfigsAreClearErrors) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::vector<std::pair<std::string, std::string>> corpus = {
      {"not JSON", "{\"model_type\":"},
      {"a list", deep},
      {"deeply nested value", R"({"model_type":"llama","hidden_size":)" + deep + "}"},
      {"deeply nested model_type", R"({"model_type":)" + deep + "}"},
      {"deeply nested architectures", R"({"architectures":[)" + deep + "]}"},
      {"number overflowing double", R"({"model_type":"llama","hidden_size":1e400})"},
      {"huge count", R"({"model_type":"llama","hidden_size":18446744073709551615})"},
  };
  int i = 0;
  for (const auto& [what, text] : corpus) {
    SCOPED_TRACE(what);
    const fs::path file = write("config-" + std::to_string(i++) + ".json", text);
    try {
      load_hf_config(file);
      ADD_FAILURE() << "accepted";
    } catch (const HfConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << typeid(e).name() << ": " << e.what();
    }
  }
}

// ------------------------------------------------------------ safetensors ---

std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file: the header's length, the header, the data.
std::string safetensors(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// Two tensors: "a" F32 [2, 3] (bytes 0-24), "b" BF16 [4] (bytes 24-32).
const char* kHeader =
    R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
    R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})";

std::string data_bytes() {
  std::string d;
  for (int i = 0; i < 6; ++i) {
    const float v = 0.5f * static_cast<float>(i);
    char b[4];
    std::memcpy(b, &v, 4);
    d.append(b, 4);
  }
  for (int i = 0; i < 4; ++i) d += std::string("\x80\x3f", 2);  // bf16 1.0
  return d;
}

// One tensor with the given fields, 24 bytes of data.
std::string one_tensor(const std::string& fields) {
  return safetensors(R"({"t":{)" + fields + "}}", data_bytes().substr(0, 24));
}

// Bytes per element of the safetensors dtypes.
std::uint64_t element_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  return 1;
}

// What opening the file and reading every tensor as fp32 did: "" when it all
// worked, else the WeightsError's message; any other exception fails the
// test. An accepted tensor's shape must account for its bytes exactly.
std::string weights_error(const fs::path& file) {
  try {
    SafetensorsFile f(file);
    for (const auto& [name, t] : f.tensors()) {
      unsigned __int128 elements = 1;
      for (std::int64_t d : t.shape) {
        EXPECT_GE(d, 0) << name << ": a negative dimension";
        elements *= static_cast<std::uint64_t>(d);
        if (elements > (static_cast<unsigned __int128>(1) << 64)) break;
      }
      EXPECT_TRUE(elements * element_size(t.dtype) == t.bytes)
          << name << ": the shape does not account for the " << t.bytes << " bytes";
    }
    for (const auto& [name, t] : f.tensors()) f.read_fp32(name);
    return "";
  } catch (const WeightsError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << file << ": " << typeid(e).name() << ": " << e.what();
  }
  return "(other exception)";
}

TEST_F(MalformedFiles, TheValidSafetensorsLoads) {
  EXPECT_EQ(weights_error(write("model.safetensors", safetensors(kHeader, data_bytes()))), "");
}

TEST_F(MalformedFiles, SafetensorsTruncatedAnywhereIsAClearError) {
  const std::string valid = safetensors(kHeader, data_bytes());
  for (std::size_t n = 0; n < valid.size(); ++n) {
    SCOPED_TRACE("first " + std::to_string(n) + " bytes");
    const fs::path file = write("cut.safetensors", valid.substr(0, n));
    const std::string message = weights_error(file);
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

TEST_F(MalformedFiles, BrokenSafetensorsAreClearErrors) {
  const std::string header = kHeader;
  const std::string data = data_bytes();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::vector<std::pair<std::string, std::string>> corpus = {
      // The header's length lies.
      {"length zero", le64(0) + header + data},
      {"length huge", le64(std::numeric_limits<std::uint64_t>::max()) + header + data},
      {"length 2^63", le64(std::uint64_t{1} << 63) + header + data},
      {"length one beyond the file", le64(header.size() + data.size() + 1) + header + data},
      {"length one short", le64(header.size() - 1) + header + data},
      {"length into the data", le64(header.size() + 4) + header + data},
      // Offsets out of range or reversed, spans of the wrong size.
      {"end beyond data", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,28])")},
      {"begin beyond data", one_tensor(R"("dtype":"F32","shape":[0],"data_offsets":[40,40])")},
      {"offsets uint64 max",
       one_tensor(R"("dtype":"F32","shape":[0],)"
                  R"("data_offsets":[18446744073709551615,18446744073709551615])")},
      {"reversed", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[24,0])")},
      {"span too short", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,20])")},
      {"span too long", one_tensor(R"("dtype":"F32","shape":[2,2],"data_offsets":[0,24])")},
      {"one offset", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[24])")},
      {"three offsets", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,12,24])")},
      {"negative offset", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[-24,0])")},
      {"float offset", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,24.0])")},
      {"string offsets", one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":"0,24")")},
      // Shapes.
      {"negative dimension", one_tensor(R"("dtype":"F32","shape":[-2,-3],"data_offsets":[0,24])")},
      {"float dimension", one_tensor(R"("dtype":"F32","shape":[6.0],"data_offsets":[0,24])")},
      {"string dimension", one_tensor(R"("dtype":"F32","shape":["6"],"data_offsets":[0,24])")},
      {"shape not a list", one_tensor(R"("dtype":"F32","shape":6,"data_offsets":[0,24])")},
      {"nested shape", one_tensor(R"("dtype":"F32","shape":[[6]],"data_offsets":[0,24])")},
      {"huge shape without overflow",
       one_tensor(R"("dtype":"F32","shape":[1099511627776,1048576],"data_offsets":[0,24])")},
      {"dimension beyond uint64",
       one_tensor(R"("dtype":"F32","shape":[99999999999999999999999],"data_offsets":[0,24])")},
      // Dtypes.
      {"unknown dtype", one_tensor(R"("dtype":"F12","shape":[6],"data_offsets":[0,24])")},
      {"lower-case dtype", one_tensor(R"("dtype":"f32","shape":[6],"data_offsets":[0,24])")},
      {"empty dtype", one_tensor(R"("dtype":"","shape":[6],"data_offsets":[0,24])")},
      {"number dtype", one_tensor(R"("dtype":4,"shape":[6],"data_offsets":[0,24])")},
      {"null dtype", one_tensor(R"("dtype":null,"shape":[6],"data_offsets":[0,24])")},
      {"readable dtype, not a float",
       one_tensor(R"("dtype":"I64","shape":[3],"data_offsets":[0,24])")},
      // Entries missing or not objects.
      {"no dtype", one_tensor(R"("shape":[6],"data_offsets":[0,24])")},
      {"no shape", one_tensor(R"("dtype":"F32","data_offsets":[0,24])")},
      {"no offsets", one_tensor(R"("dtype":"F32","shape":[6])")},
      {"entry a number", safetensors(R"({"t":5})", data)},
      {"entry a list", safetensors(R"({"t":["F32",[6],[0,24]]})", data)},
      // Headers that are not JSON objects, or not JSON.
      {"header a list", safetensors("[]", data)},
      {"header a number", safetensors("5", data)},
      {"header a string", safetensors("\"model\"", data)},
      {"header null", safetensors("null", data)},
      {"header empty", safetensors("", data)},
      {"header spaces", safetensors("        ", data)},
      {"header of NUL bytes", safetensors(std::string(16, '\0'), data)},
      {"NUL inside the header", safetensors(R"({"t":{"dtype":"F32")" + std::string(1, '\0') +
                                                R"(,"shape":[6],"data_offsets":[0,24]}})",
                                            data)},
      {"invalid UTF-8 name",
       safetensors("{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}",
                   data)},
      {"deep nesting", safetensors(R"({"t":)" + deep + "}", data)},
      {"deep nesting in a shape",
       one_tensor(R"("dtype":"F32","shape":)" + deep + R"(,"data_offsets":[0,24])")},
  };
  int i = 0;
  for (const auto& [what, bytes] : corpus) {
    SCOPED_TRACE(what);
    const fs::path file = write("model-" + std::to_string(i++) + ".safetensors", bytes);
    const std::string message = weights_error(file);
    EXPECT_NE(message, "") << "accepted";
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

// Headers that lie in ways a plain reader would accept or crash on: shapes
// whose element or byte count wraps 2^64, a dimension above INT64_MAX,
// numbers out of range (1e400), overlapping tensors, a name given twice (a
// JSON reader keeps the last), a NUL byte inside the header, a __metadata__
// that is not an object of strings.
TEST_F(MalformedFiles, SafetensorsLiesAboutSizesOffsetsAndNames) {
  const std::string data = data_bytes();
  const std::vector<std::pair<std::string, std::string>> corpus = {
      // elements *= d wraps: 2^32 x 2^32 = 2^64 = 0 elements, 0 bytes.
      {"shape product wraps to 0",
       one_tensor(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0])")},
      // elements * 4 wraps: 2^62 F32 elements = 2^64 bytes = 0 bytes.
      {"byte count wraps to 0",
       one_tensor(R"("dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0])")},
      // A dimension above INT64_MAX becomes a negative shape entry.
      {"dimension above int64",
       one_tensor(R"("dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0])")},
      // 2 x (2^63 + 3) = 2^64 + 6 elements wrap to 6: six floats' bytes.
      {"shape product wraps to the span",
       one_tensor(R"("dtype":"F32","shape":[2,9223372036854775811],"data_offsets":[0,24])")},
      // 2 x (2^62 + 3) = 2^63 + 6 BF16 elements, times 2 bytes, wrap to 12.
      {"byte count wraps to the span",
       one_tensor(R"("dtype":"BF16","shape":[2,4611686018427387907],"data_offsets":[0,12])")},
      // json::out_of_range (not parse_error) escapes the header's catch.
      {"number overflowing double", one_tensor(R"("dtype":"F32","shape":[1e400],)"
                                               R"("data_offsets":[0,24])")},
      // Two tensors over the same bytes.
      {"overlapping offsets",
       safetensors(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                   R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]}})",
                   data)},
      // nlohmann keeps the last of two equal keys silently.
      {"duplicated tensor name",
       safetensors(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                   R"("a":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})",
                   data)},
      // nlohmann's parser stops at a NUL byte as at the end of the input, so
      // whatever follows one is never read.
      {"header then NUL padding", safetensors(std::string(kHeader) + std::string(8, '\0'), data)},
      {"header then NUL and more",
       safetensors(std::string(kHeader) + std::string(1, '\0') + "{\"c\": garbage", data)},
      // The format's __metadata__ is an object of strings.
      {"metadata not an object", safetensors(R"({"__metadata__":[1,2,3]})", "")},
  };
  int i = 0;
  for (const auto& [what, bytes] : corpus) {
    SCOPED_TRACE(what);
    const fs::path file = write("pending-" + std::to_string(i++) + ".safetensors", bytes);
    const std::string message = weights_error(file);
    EXPECT_NE(message, "") << "accepted";
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

// The index's reader has the same catch (json::out_of_range escapes it).
TEST_F(MalformedFiles, SafetensorsIndexWithOutOfRangeNumbers) {
  const fs::path index =
      write("model.safetensors.index.json", R"({"metadata":{"total_size":1e400},"weight_map":{}})");
  try {
    load_safetensors(index, preset_model("tiny-llama"), DType::fp32);
    ADD_FAILURE() << "accepted";
  } catch (const WeightsError& e) {
    EXPECT_NE(std::string(e.what()).find(index.string()), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << typeid(e).name() << ": " << e.what();
  }
}

TEST_F(MalformedFiles, SafetensorsFileErrorsNameTheFile) {
  for (const fs::path& file : {dir() / "missing.safetensors", dir()}) {
    const std::string message = weights_error(file);
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

TEST_F(MalformedFiles, RandomByteFlipsOfASafetensorsFile) {
  const std::string valid = safetensors(kHeader, data_bytes());
  std::mt19937 rng(20240519);
  int accepted = 0;
  for (int iteration = 0; iteration < 300; ++iteration) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      // The header's length and JSON are where parsing happens: most flips there.
      const std::size_t span = rng() % 4 == 0 ? bytes.size() : 8 + std::string(kHeader).size();
      bytes[rng() % span] ^= static_cast<char>(1 + rng() % 255);
    }
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    const fs::path file = write("flip.safetensors", bytes);
    const std::string message = weights_error(file);
    if (message.empty()) {
      ++accepted;
    } else {
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    }
  }
  EXPECT_GT(accepted, 0);  // flips in the data are harmless
  EXPECT_LT(accepted, 300);
}

}  // namespace
}  // namespace wafersim::models
