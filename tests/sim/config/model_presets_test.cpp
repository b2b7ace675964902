// The model presets in scenarios/models: each loads, validates, and has the
// parameter count its model card publishes (or that its config.json implies).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/reference.hpp"
#include "models/weights.hpp"
#include "sim/config/scenario.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;
const fs::path kPresets = fs::path(WAFERSIM_SOURCE_DIR) / "scenarios";

struct PresetCount {
  const char* name;
  models::Architecture architecture;
  std::uint64_t parameters;
};

// Published counts: the Hugging Face model pages' safetensors totals
// (Llama-3.1-8B 8,030,261,248; -70B 70,553,706,496; -405B 405,853,388,800;
// Mistral-7B-v0.1 7,241,732,096; Mixtral-8x7B 46,702,792,704; GPT-2
// 124,439,808 with the tied lm_head counted once). Qwen3-32B's 32.8B is
// given rounded; 32,762,123,264 is the exact sum of its config's tensors.
// The Qwen3 model cards give rounded counts too, checked below; the exact
// counts are the sums of their config.json's tensors:
//   Qwen3-235B-A22B (hidden h 4096, 94 layers, 64 query and 4 kv heads of
//   128, 128 experts of width 1536, vocab 151936, untied): per layer
//   attention 4096 x 8192 x 2 + 2 x 4096 x 512 = 71,303,168, experts
//   128 x 3 x 4096 x 1536 = 2,415,919,104, router 128 x 4096 = 524,288, two
//   norms 8,192, q_norm and k_norm 256: 2,487,755,008; x 94 =
//   233,848,970,752; + embedding and lm_head 2 x 151936 x 4096 =
//   1,244,659,712 + final norm 4,096 = 235,093,634,560 ("235B in total").
//   Per token 8 experts of 128: 94 x (71,303,168 + 8 x 18,874,368 + 524,288
//   + 8,448) + 1,244,663,808 = 22,190,763,520 ("22B activated").
//   Qwen3-0.6B (h 1024, 28 layers, 16 query and 8 kv heads of 128, SwiGLU
//   3072, vocab 151936, tied): per layer 1024 x 2048 x 2 + 2 x 1024 x 1024
//   + 3 x 1024 x 3072 + 2,048 + 256 = 15,730,944; x 28 = 440,466,432;
//   + embedding 155,582,464 + final norm 1,024 = 596,049,920 ("0.6B",
//   "0.44B non-embedding").
const std::vector<PresetCount> kCounts = {
    {"llama-3.1-8b", models::Architecture::llama, 8'030'261'248ull},
    {"llama-3.1-70b", models::Architecture::llama, 70'553'706'496ull},
    {"llama-3.3-70b", models::Architecture::llama, 70'553'706'496ull},
    {"llama-3.1-405b", models::Architecture::llama, 405'853'388'800ull},
    {"mistral-7b", models::Architecture::mistral, 7'241'732'096ull},
    {"mixtral-8x7b", models::Architecture::mixtral, 46'702'792'704ull},
    {"qwen3-32b", models::Architecture::qwen3, 32'762'123'264ull},
    {"qwen3-235b-a22b", models::Architecture::qwen3_moe, 235'093'634'560ull},
    {"qwen3-0.6b", models::Architecture::qwen3, 596'049'920ull},
    {"gpt2", models::Architecture::gpt2, 124'439'808ull},
};

TEST(ModelPresets, HaveThePublishedParameterCounts) {
  for (const PresetCount& p : kCounts) {
    const models::ModelConfig m = load_model_preset(p.name, kPresets);
    EXPECT_EQ(m.name, p.name);
    EXPECT_EQ(m.architecture, p.architecture) << p.name;
    EXPECT_EQ(m.parameter_count(), p.parameters) << p.name;
  }
}

TEST(ModelPresets, RecordTheArchitectureExtras) {
  const models::ModelConfig mixtral = load_model_preset("mixtral-8x7b", kPresets);
  EXPECT_EQ(mixtral.num_experts, 8);
  EXPECT_EQ(mixtral.experts_per_token, 2);
  EXPECT_EQ(load_model_preset("mistral-7b", kPresets).sliding_window, 4096);
  EXPECT_TRUE(load_model_preset("qwen3-32b", kPresets).has_qk_norm());
  EXPECT_TRUE(load_model_preset("gpt2", kPresets).tie_embeddings);
  const models::ModelConfig qwen_moe = load_model_preset("qwen3-235b-a22b", kPresets);
  EXPECT_EQ(qwen_moe.num_experts, 128);
  EXPECT_EQ(qwen_moe.experts_per_token, 8);
  EXPECT_EQ(qwen_moe.intermediate_size, 1536);
  EXPECT_TRUE(qwen_moe.has_qk_norm());
  EXPECT_TRUE(load_model_preset("qwen3-0.6b", kPresets).tie_embeddings);
}

// The model cards' rounded figures: Qwen3-235B-A22B 235B in total and 22B
// activated (234B non-embedding), Qwen3-0.6B 0.6B (0.44B non-embedding).
TEST(ModelPresets, QwenCountsRoundToTheModelCards) {
  const auto billions = [](std::uint64_t n) { return static_cast<double>(n) / 1e9; };
  const models::ModelConfig big = load_model_preset("qwen3-235b-a22b", kPresets);
  const std::uint64_t embeddings = 2ull * big.vocab_size * big.hidden_size;
  const std::uint64_t experts = 3ull * big.hidden_size * big.intermediate_size;
  const std::uint64_t active =
      big.parameter_count() - static_cast<std::uint64_t>(big.num_layers) *
                                  (big.num_experts - big.experts_per_token) * experts;
  EXPECT_EQ(active, 22'190'763'520ull);
  EXPECT_NEAR(billions(big.parameter_count()), 235.0, 0.5);
  EXPECT_NEAR(billions(big.parameter_count() - embeddings), 234.0, 0.5);
  EXPECT_NEAR(billions(active), 22.0, 0.5);
  const models::ModelConfig small = load_model_preset("qwen3-0.6b", kPresets);
  EXPECT_NEAR(billions(small.parameter_count()), 0.6, 0.05);
  EXPECT_NEAR(billions(small.parameter_count() -
                       static_cast<std::uint64_t>(small.vocab_size) * small.hidden_size),
              0.44, 0.005);
}

// Every tiny model decodes functionally in milliseconds with synthetic weights.
TEST(ModelPresets, TinyModelsDecodeWithTheReference) {
  for (const char* name : {"tiny-llama", "tiny-qwen3", "tiny-mixtral", "tiny-mistral", "tiny-gpt2",
                           "tiny-qwen3-moe"}) {
    const models::ModelConfig m = load_model_preset(name, kPresets);
    const models::Weights w = models::Weights::synthetic(m, models::DType::bf16, 3);
    const std::vector<std::int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const models::Generation g = models::greedy_generate(w, prompt, 4);
    ASSERT_EQ(g.tokens.size(), 4u) << name;
    for (std::int32_t t : g.tokens) {
      EXPECT_GE(t, 0) << name;
      EXPECT_LT(t, m.vocab_size) << name;
    }
  }
}

TEST(ModelPresets, ScenarioAcceptsTheNewArchitecturesAndPrecisions) {
  const fs::path dir = fs::temp_directory_path() / "wafersim_model_presets_test";
  fs::create_directories(dir);
  for (const char* precision : {"fp8", "int8"}) {
    const fs::path file = dir / (std::string(precision) + ".yaml");
    {
      std::ofstream out(file);
      out << "name: t\nhardware: small\nmodel: tiny-mixtral\nprecision: " << precision
          << "\nworkload:\n  prompt_tokens: 4\n  generate_tokens: 2\n";
    }
    const Scenario s = load_scenario(file, kPresets);
    EXPECT_EQ(s.model.architecture, models::Architecture::mixtral);
    EXPECT_EQ(models::dtype_bits(s.precision), 8);
    // The resolved scenario names the architecture and extras, and reloads equal.
    EXPECT_NE(s.resolved_yaml.find("architecture: mixtral"), std::string::npos);
    EXPECT_NE(s.resolved_yaml.find("num_experts: 4"), std::string::npos);
    const fs::path resolved = dir / (std::string(precision) + ".resolved.yaml");
    {
      std::ofstream out(resolved);
      out << s.resolved_yaml;
    }
    const Scenario again = load_scenario(resolved, kPresets);
    EXPECT_EQ(again.model.num_experts, 4);
    EXPECT_EQ(again.model.experts_per_token, 2);
    EXPECT_EQ(again.precision, s.precision);
  }
  fs::remove_all(dir);
}

TEST(ModelPresets, ModelMayNameAHuggingFaceCheckpoint) {
  const fs::path dir = fs::temp_directory_path() / "wafersim_model_checkpoint_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "tiny-hf");
  std::ofstream(dir / "tiny-hf" / "config.json")
      << R"({"model_type": "qwen3", "hidden_size": 32, "intermediate_size": 64,
             "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 8, "vocab_size": 64, "max_position_embeddings": 32,
             "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": true})";
  auto scenario = [&](const std::string& model) {
    const fs::path file = dir / "s.yaml";
    std::ofstream(file) << "name: t\nhardware: small\nmodel: " << model
                        << "\nworkload:\n  prompt_tokens: 4\n  generate_tokens: 2\n";
    return load_scenario(file, kPresets);
  };
  // A folder beside the scenario file, a config.json path, and a preset-style override.
  Scenario s = scenario("./tiny-hf");
  EXPECT_EQ(s.model.architecture, models::Architecture::qwen3);
  EXPECT_EQ(s.model.name, "tiny-hf");
  EXPECT_EQ(s.model.hidden_size, 32);
  EXPECT_EQ(s.model_preset, "./tiny-hf");
  s = scenario((dir / "tiny-hf" / "config.json").string());
  EXPECT_EQ(s.model.num_layers, 2);
  s = scenario("{preset: ./tiny-hf, num_layers: 1}");
  EXPECT_EQ(s.model.num_layers, 1);
  EXPECT_EQ(s.model.head_dim, 8);

  // A broken config.json is reported at the scenario's model: line, naming the file and key.
  std::ofstream(dir / "tiny-hf" / "config.json") << R"({"model_type": "qwen3"})";
  try {
    scenario("./tiny-hf");
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_EQ(e.key_path(), "model");
    EXPECT_NE(std::string(e.what()).find("config.json: error: hidden_size: missing required key"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace wafersim::sim
