// Real checkpoint folders against an implementation that shares nothing with
// wafersim's: tests/checkpoints/make_checkpoint.py writes tiny Hugging Face
// folders (config.json, safetensors, tokenizer.json), load_hf_config and
// load_safetensors read them, the reference model greedy-decodes, and
// tests/checkpoints/numpy_forward.py (float64 NumPy following the Hugging Face
// modeling code) must pick the same tokens. The tokenizer is checked the same
// way. Needs Debian's python3 with python3-numpy, found when CMake configures
// (tests/models/CMakeLists.txt); without them these tests fail and say so.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "models/hf_config.hpp"
#include "models/reference.hpp"
#include "models/safetensors.hpp"
#include "models/tokenizer.hpp"
#include "support/checkpoint_scripts.hpp"

namespace wafersim::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::id_list;
using NumpyCheckpointTest = testing::CheckpointScriptsTest;

std::string quoted(const std::string& s) {
  return testing::shell_quoted(s);
}

// One checkpoint layout the C++ side loads.
struct Layout {
  std::string model_type;
  std::string dtype;  // bf16, f16, f32
  int shards;
  std::string extra = "";  // more make_checkpoint.py flags
};

void PrintTo(const Layout& l, std::ostream* os) {
  *os << l.model_type << " " << l.dtype << " in " << l.shards << " file(s) " << l.extra;
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const Layout& l = info.param;
  std::string name = l.model_type + "_" + l.dtype;
  if (l.shards > 1) name += "_shards" + std::to_string(l.shards);
  for (char c : l.extra) {
    if (c == ' ') continue;
    name += (c == '-') ? '_' : c;
  }
  return name;
}

class NumpyLayoutTest : public NumpyCheckpointTest, public ::testing::WithParamInterface<Layout> {};

constexpr int kNewTokens = 8;

TEST_P(NumpyLayoutTest, ReferenceDecodesTheTokensNumpyDecodes) {
  const Layout& l = GetParam();
  const fs::path folder = make_checkpoint("model", "--model-type " + l.model_type + " --dtype " +
                                                       l.dtype + " --seed 7 --shards " +
                                                       std::to_string(l.shards) + " " + l.extra);
  if (HasFailure()) return;
  const ModelConfig config = load_hf_config(folder);
  const Weights weights = load_safetensors(folder, config, DType::fp32);
  const Tokenizer tok = Tokenizer::from_file(folder / "tokenizer.json");

  // Prompts of one and several tokens, one longer than the sliding windows
  // of the mistral and mixtral checkpoints (5 and 6 positions), and one given
  // as text (both tokenizers must give the same ids first).
  const std::vector<std::vector<std::int32_t>> prompts = {
      {1, 2, 3}, {496, 40, 41, 42, 43, 44, 45, 300}, {7}};
  const std::string text = "The wafer isn't hot.";
  std::string args = "--generate " + std::to_string(kNewTokens);
  for (const auto& prompt : prompts) args += " --prompt-ids " + id_list(prompt);
  args += " --tokenizer-text " + quoted(text);
  const std::vector<json> expect = numpy(folder, args);
  ASSERT_EQ(expect.size(), prompts.size() + 1);

  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(greedy_generate(weights, prompts[i], kNewTokens).tokens,
              expect[i].at("generated").get<std::vector<std::int32_t>>())
        << "prompt " << id_list(prompts[i]) << "; smallest top-2 logit gap in NumPy "
        << expect[i].at("min_margin").dump();
  }
  const json& by_text = expect.back();
  const std::vector<std::int32_t> ids = tok.encode(text);
  EXPECT_EQ(ids, by_text.at("prompt_ids").get<std::vector<std::int32_t>>());
  EXPECT_EQ(greedy_generate(weights, ids, kNewTokens).tokens,
            by_text.at("generated").get<std::vector<std::int32_t>>());
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, NumpyLayoutTest,
                         ::testing::Values(Layout{"llama", "bf16", 1}, Layout{"llama", "f32", 1},
                                           Layout{"llama", "f16", 2}, Layout{"mistral", "bf16", 1},
                                           Layout{"qwen2", "bf16", 1}, Layout{"qwen3", "bf16", 1},
                                           Layout{"qwen3", "f32", 1}, Layout{"mixtral", "bf16", 3},
                                           Layout{"mixtral", "f32", 1},
                                           Layout{"qwen3_moe", "bf16", 2},
                                           Layout{"gpt2", "bf16", 1}, Layout{"gpt2", "f32", 1},
                                           // Llama 3.1's RoPE scaling; attention_bias
                                           // (q, k, v and o_proj biases).
                                           Layout{"llama", "bf16", 1, "--rope-scaling llama3"},
                                           Layout{"llama", "f32", 1, "--attention-bias"},
                                           Layout{"qwen3", "bf16", 1, "--attention-bias"}),
                         layout_name);

// FP8 weights (F8_E4M3 codes times their per-row scales) decode as NumPy
// decodes them.
TEST_F(NumpyCheckpointTest, Fp8CheckpointDecodesAsNumpyDoes) {
  const fs::path folder = make_checkpoint("fp8", "--model-type llama --fp8");
  if (HasFailure()) return;
  const std::vector<json> got = numpy(folder, "--prompt-ids 1,2,3 --generate 8");
  ASSERT_EQ(got.size(), 1u);
  const ModelConfig config = load_hf_config(folder);
  const Weights weights = load_safetensors(folder, config, DType::fp32);
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  EXPECT_EQ(greedy_generate(weights, prompt, 8).tokens,
            got[0].at("generated").get<std::vector<std::int32_t>>());
  // Weights as F8_E4M3 with a [rows, 1] F32 scale, the rest in bf16.
  const SafetensorsFile file(folder / "model.safetensors");
  const auto& t = file.tensors();
  ASSERT_TRUE(t.count("model.layers.0.self_attn.q_proj.weight_scale"));
  EXPECT_EQ(t.at("model.layers.0.self_attn.q_proj.weight").dtype, "F8_E4M3");
  EXPECT_EQ(t.at("model.layers.0.self_attn.q_proj.weight_scale").dtype, "F32");
  EXPECT_EQ(t.at("model.layers.0.self_attn.q_proj.weight_scale").shape,
            (std::vector<std::int64_t>{64, 1}));
  EXPECT_EQ(t.at("model.embed_tokens.weight").dtype, "BF16");
}

// Encoding: texts where the C++ tokenizer's byte classes agree with Hugging
// Face's Unicode ones (ASCII, and non-ASCII letters). Non-ASCII punctuation,
// symbols, digits and spaces (an em dash, an emoji, U+00A0) are split
// differently by the C++ pre-tokenizer, which takes every non-ASCII byte for
// a letter (models/tokenizer.hpp); for those only decoding is checked.
TEST_F(NumpyCheckpointTest, TokenizerEncodesAsNumpyDoes) {
  const fs::path folder = make_checkpoint("tok", "--model-type llama");
  if (HasFailure()) return;
  const Tokenizer tok = Tokenizer::from_file(folder / "tokenizer.json");
  const std::vector<std::string> texts = {
      "The wafer is one large chip.",
      "It's 3.14, isn't it?  They'll say 2048!\n\n\tNext line   ",
      "   leading and trailing spaces   ",
      "Special<|endoftext|>tokens <|endoftext|> inside",
      "caf\xc3\xa9 na\xc3\xafve Stra\xc3\x9f"
      "e \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 "
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",  // café naïve Straße Привет 日本語
  };
  std::string args;
  for (const std::string& text : texts) args += " --tokenizer-text " + quoted(text);
  const std::vector<json> got = numpy(folder, args);
  ASSERT_EQ(got.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::vector<std::int32_t> want = got[i].at("prompt_ids").get<std::vector<std::int32_t>>();
    EXPECT_EQ(tok.encode(texts[i]), want) << texts[i];
    EXPECT_EQ(tok.decode(want), texts[i]);
  }
}

TEST_F(NumpyCheckpointTest, TokenizerDecodesAsNumpyDoes) {
  const fs::path folder = make_checkpoint("tok", "--model-type gpt2");
  if (HasFailure()) return;
  const Tokenizer tok = Tokenizer::from_file(folder / "tokenizer.json");
  // Every id of the vocabulary and the special token, in one run: the same
  // bytes (compared as hex, since single tokens may cut UTF-8 sequences).
  std::vector<std::int32_t> all;
  for (std::int32_t i = 0; i < tok.vocab_size(); ++i) all.push_back(i);
  const std::vector<json> got = numpy(folder, "--decode-ids " + id_list(all));
  ASSERT_EQ(got.size(), 1u);
  std::string hex;
  for (unsigned char c : tok.decode(all)) {
    static const char* digits = "0123456789abcdef";
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  EXPECT_EQ(hex, got[0].at("hex").get<std::string>());
  // Text the pre-tokenizers split differently still round-trips.
  const std::string mixed =
      "a\xe2\x80\x94"
      "b \xf0\x9f\x99\x82 \xe2\x82\xac"
      "5";  // a—b 🙂 €5
  EXPECT_EQ(tok.decode(tok.encode(mixed)), mixed);
}

}  // namespace
}  // namespace wafersim::models
