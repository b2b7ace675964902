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
const std::vector<PresetCount> kCounts = {
    {"llama-3.1-8b", models::Architecture::llama, 8'030'261'248ull},
    {"llama-3.1-70b", models::Architecture::llama, 70'553'706'496ull},
    {"llama-3.3-70b", models::Architecture::llama, 70'553'706'496ull},
    {"llama-3.1-405b", models::Architecture::llama, 405'853'388'800ull},
    {"mistral-7b", models::Architecture::mistral, 7'241'732'096ull},
    {"mixtral-8x7b", models::Architecture::mixtral, 46'702'792'704ull},
    {"qwen3-32b", models::Architecture::qwen3, 32'762'123'264ull},
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
}

// Every tiny model decodes functionally in milliseconds with synthetic weights.
TEST(ModelPresets, TinyModelsDecodeWithTheReference) {
  for (const char* name :
       {"tiny-llama", "tiny-qwen3", "tiny-mixtral", "tiny-mistral", "tiny-gpt2"}) {
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
