// GPU presets and the scenario keys of issue 5: every shipped preset loads
// and validates, the figures read are the sourced ones, bad input is reported
// at its file:line:column with a did-you-mean, the resolved scenario carries
// the GPU systems inline, and `wafersim run --json` carries gpu_baselines.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/scenario.hpp"
#include "sim/studies/baselines.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;

const fs::path kPresets = fs::path(WAFERSIM_SOURCE_DIR) / "scenarios";

class GpuScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           (std::string("wafersim-gpu-") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }
  ScenarioError error_of(const fs::path& p, const fs::path& presets = kPresets) {
    try {
      load_scenario(p, presets);
    } catch (const ScenarioError& e) {
      return e;
    }
    ADD_FAILURE() << "no ScenarioError";
    return ScenarioError("", 0, 0, "", "none");
  }
  fs::path dir_;
};

const char* kBase = R"(name: g
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: 4
)";

TEST(GpuPresets, EveryShippedPresetLoadsAndValidates) {
  for (const char* name : {"dgx-a100", "dgx-a100-40gb", "dgx-h100", "dgx-h200", "dgx-b200",
                           "gb200-nvl72", "mi300x-8"}) {
    const models::gpu::ClusterSpec c = load_gpu_preset(name, kPresets);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(c.validate()) << name;
    EXPECT_GT(c.node_power_w, 0.0) << name;
  }
}

TEST(GpuPresets, FiguresAreTheSourcedOnes) {
  const models::gpu::ClusterSpec h100 = load_gpu_preset("dgx-h100", kPresets);
  EXPECT_DOUBLE_EQ(h100.gpu.bf16_flops, 989.4e12);
  EXPECT_DOUBLE_EQ(h100.gpu.fp8_flops, 1978.9e12);
  EXPECT_EQ(h100.gpu.fp4_flops, 0.0);
  EXPECT_DOUBLE_EQ(h100.gpu.hbm_bytes, 80e9);
  EXPECT_DOUBLE_EQ(h100.gpu.hbm_bandwidth, 3.35e12);
  EXPECT_DOUBLE_EQ(h100.scaleup_bandwidth, 450e9);
  EXPECT_DOUBLE_EQ(h100.scaleout_bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(h100.node_power_w, 10.2e3);
  EXPECT_EQ(h100.gpus_per_node, 8);
  const models::gpu::ClusterSpec nvl = load_gpu_preset("gb200-nvl72", kPresets);
  EXPECT_EQ(nvl.gpus_per_node, 72);
  EXPECT_DOUBLE_EQ(nvl.gpu.fp4_flops, 10e15);
  EXPECT_DOUBLE_EQ(load_gpu_preset("mi300x-8", kPresets).gpu.bf16_flops, 1307.4e12);
  // The 40 GB A100: the 80 GB part's compute and node, HBM2 at 1,555 GB/s.
  const models::gpu::ClusterSpec a40 = load_gpu_preset("dgx-a100-40gb", kPresets);
  const models::gpu::ClusterSpec a80 = load_gpu_preset("dgx-a100", kPresets);
  EXPECT_DOUBLE_EQ(a40.gpu.hbm_bytes, 40e9);
  EXPECT_DOUBLE_EQ(a40.gpu.hbm_bandwidth, 1555e9);
  EXPECT_EQ(a40.gpu.bf16_flops, a80.gpu.bf16_flops);
  EXPECT_EQ(a40.scaleup_bandwidth, a80.scaleup_bandwidth);
  EXPECT_EQ(a40.node_power_w, a80.node_power_w);
  // No shipped preset names a framework: the bare hardware model unless a scenario picks one.
  EXPECT_TRUE(h100.framework.is_none());
  EXPECT_DOUBLE_EQ(load_hardware_preset("wse3", kPresets).system_power_w, 23e3);
}

TEST_F(GpuScenario, CompareWithDefaultsToH100AndB200) {
  const Scenario s = load_scenario(write("s.yaml", kBase), kPresets);
  ASSERT_EQ(s.gpu.systems.size(), 2u);
  EXPECT_EQ(s.gpu.systems[0].name, "dgx-h100");
  EXPECT_EQ(s.gpu.systems[1].name, "dgx-b200");
  EXPECT_EQ(s.gpu.tp, 0);
  // No gpus/ folder among the presets: the default is empty, not an error.
  fs::create_directories(dir_ / "p" / "hardware");
  fs::create_directories(dir_ / "p" / "models");
  fs::copy(kPresets / "hardware" / "small.yaml", dir_ / "p" / "hardware" / "small.yaml");
  fs::copy(kPresets / "models" / "tiny-llama.yaml", dir_ / "p" / "models" / "tiny-llama.yaml");
  EXPECT_TRUE(load_scenario(write("t.yaml", kBase), dir_ / "p").gpu.systems.empty());
}

TEST_F(GpuScenario, UnknownGpuPresetIsReportedWithDidYouMean) {
  const ScenarioError e =
      error_of(write("s.yaml", std::string(kBase) + "compare_with: [dgx-h100, dgx-h20]\n"));
  EXPECT_EQ(e.line(), 7);
  EXPECT_EQ(e.column(), 26);
  EXPECT_EQ(e.key_path(), "compare_with[1]");
  EXPECT_NE(std::string(e.what()).find("unknown GPU system preset 'dgx-h20'"), std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("did you mean 'dgx-h200'?"), std::string::npos) << e.what();
}

TEST_F(GpuScenario, ImpossibleOverrideIsReportedAtItsLine) {
  const ScenarioError e = error_of(write("s.yaml", std::string(kBase) + R"(compare_with:
  - preset: dgx-h100
    model: {memory_efficiency: 1.5}
)"));
  EXPECT_EQ(e.line(), 9);
  EXPECT_EQ(e.key_path(), "compare_with[0].model.memory_efficiency");
  EXPECT_NE(std::string(e.what()).find("must be in (0, 1]"), std::string::npos) << e.what();
}

TEST_F(GpuScenario, UnknownFrameworkIsReportedWithDidYouMean) {
  const ScenarioError e = error_of(write("s.yaml", std::string(kBase) + R"(compare_with:
  - preset: dgx-h100
    framework: {name: sglnag}
)"));
  EXPECT_EQ(e.line(), 9);
  EXPECT_EQ(e.key_path(), "compare_with[0].framework.name");
  EXPECT_NE(std::string(e.what()).find("did you mean 'sglang'?"), std::string::npos) << e.what();
}

TEST_F(GpuScenario, UnknownKeysAreErrorsWithDidYouMean) {
  ScenarioError e =
      error_of(write("a.yaml", std::string(kBase) + "gpu_parallelism: {tp: 8, ppp: 2}\n"));
  EXPECT_EQ(e.line(), 7);
  EXPECT_EQ(e.key_path(), "gpu_parallelism.ppp");
  EXPECT_NE(std::string(e.what()).find("did you mean 'pp'?"), std::string::npos) << e.what();
  e = error_of(write("b.yaml", std::string(kBase) + "serving: {round_trip: 50}\n"));
  EXPECT_EQ(e.key_path(), "serving.round_trip");
  EXPECT_NE(std::string(e.what()).find("needs a unit"), std::string::npos) << e.what();
  e = error_of(
      write("c.yaml", std::string(kBase) +
                          "speculative_decoding: {draft_model: tiny-llama, draft_tokens: 4, "
                          "acceptance_rate: 1.5}\n"));
  EXPECT_EQ(e.key_path(), "speculative_decoding.acceptance_rate");
  e = error_of(write("d.yaml", std::string(kBase) + "compare_whit: []\n"));
  EXPECT_NE(std::string(e.what()).find("did you mean 'compare_with'?"), std::string::npos)
      << e.what();
}

TEST_F(GpuScenario, ResolvedYamlCarriesEverySystemInlineAndRoundTrips) {
  const Scenario a = load_scenario(write("s.yaml", std::string(kBase) + R"(compare_with:
  - dgx-h200
  - preset: mi300x-8
    scale_out: {max_nodes: 2}
    framework: {name: sglang, per_sequence: 4 us}
gpu_parallelism: {tp: 2, pp: auto}
speculative_decoding: {draft_model: tiny-llama, draft_tokens: 3, acceptance_rate: 0.75}
serving: {round_trip: 40 ms, per_token_overhead: 0.5 ms, connection_setup: 150 ms}
)"),
                                   kPresets);
  ASSERT_EQ(a.gpu.systems.size(), 2u);
  EXPECT_EQ(a.gpu.systems[1].max_nodes, 2);
  // The named framework's figures, one overridden; the first system has none.
  EXPECT_EQ(a.gpu.systems[1].framework.name, "sglang");
  EXPECT_EQ(a.gpu.systems[1].framework.per_iteration_s,
            models::gpu::framework_preset("sglang")->per_iteration_s);
  EXPECT_DOUBLE_EQ(a.gpu.systems[1].framework.per_sequence_s, 4e-6);
  EXPECT_TRUE(a.gpu.systems[0].framework.is_none());
  EXPECT_EQ(a.gpu.tp, 2);
  EXPECT_EQ(a.gpu.pp, 0);
  ASSERT_TRUE(a.speculative && a.serving);
  EXPECT_DOUBLE_EQ(a.serving->per_token_overhead_s, 0.5e-3);
  // Loading the resolved form needs no presets at all and gives the same figures.
  fs::create_directories(dir_ / "none");
  const Scenario b = load_scenario(write("r.yaml", a.resolved_yaml), dir_ / "none");
  ASSERT_EQ(b.gpu.systems.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& x = a.gpu.systems[i];
    const auto& y = b.gpu.systems[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.gpu.bf16_flops, y.gpu.bf16_flops);
    EXPECT_EQ(x.gpu.fp8_flops, y.gpu.fp8_flops);
    EXPECT_EQ(x.gpu.hbm_bytes, y.gpu.hbm_bytes);
    EXPECT_EQ(x.gpu.hbm_bandwidth, y.gpu.hbm_bandwidth);
    EXPECT_EQ(x.scaleup_bandwidth, y.scaleup_bandwidth);
    EXPECT_EQ(x.node_power_w, y.node_power_w);
    EXPECT_EQ(x.max_nodes, y.max_nodes);
    EXPECT_EQ(x.params.allreduce_alpha_s, y.params.allreduce_alpha_s);
    EXPECT_EQ(x.params.memory_efficiency, y.params.memory_efficiency);
    EXPECT_EQ(x.framework.name, y.framework.name);
    EXPECT_EQ(x.framework.per_iteration_s, y.framework.per_iteration_s);
    EXPECT_EQ(x.framework.per_sequence_s, y.framework.per_sequence_s);
  }
  EXPECT_EQ(b.speculative->decoding.draft_tokens, 3);
  EXPECT_EQ(b.speculative->decoding.acceptance_rate, 0.75);
  EXPECT_EQ(b.serving->connection_setup_s, a.serving->connection_setup_s);
  auto body = [](const std::string& y) { return y.substr(y.find("\nname:")); };
  EXPECT_EQ(body(a.resolved_yaml), body(b.resolved_yaml));
  // compare_with: [] survives the round trip (the default would otherwise come back).
  const Scenario c =
      load_scenario(write("n.yaml", std::string(kBase) + "compare_with: []\n"), kPresets);
  EXPECT_TRUE(c.gpu.systems.empty());
  EXPECT_TRUE(load_scenario(write("rn.yaml", c.resolved_yaml), kPresets).gpu.systems.empty());
}

// `wafersim run --json` on a scenario with GPU baselines.
std::string run_json(const fs::path& scenario) {
  const std::string cmd = std::string(WAFERSIM_BINARY) + " run " + scenario.string() + " --json";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  EXPECT_EQ(::pclose(p), 0);
  return out;
}

TEST_F(GpuScenario, JsonCarriesGpuBaselinesAndTheWaferRow) {
  const fs::path s =
      write("s.yaml", std::string(kBase) + R"(compare_with: [dgx-h100, dgx-b200, gb200-nvl72]
serving: {round_trip: 40 ms, per_token_overhead: 1 ms, connection_setup: 100 ms}
outputs: {functional: false}
)");
  const auto j = nlohmann::json::parse(run_json(s));
  ASSERT_TRUE(j.contains("gpu_baselines")) << j.dump(2);
  const auto& rows = j["gpu_baselines"];
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["system"], "dgx-h100");
  EXPECT_EQ(rows[2]["system"], "gb200-nvl72");
  for (const auto& r : rows) {
    for (const char* key : {"system", "gpus", "tp", "pp", "decode_tokens_per_s_per_user",
                            "aggregate_tokens_per_s", "ttft_s", "power_kw", "bottleneck"})
      EXPECT_TRUE(r.contains(key)) << key;
    EXPECT_GT(r["decode_tokens_per_s_per_user"].get<double>(), 0.0);
    // One user: the aggregate is that user's rate, on 72 GPUs too (where
    // replicas x users per replica of this tiny model pass INT_MAX).
    EXPECT_DOUBLE_EQ(r["aggregate_tokens_per_s"].get<double>(),
                     r["decode_tokens_per_s_per_user"].get<double>());
    EXPECT_GT(r["power_kw"].get<double>(), 0.0);
    EXPECT_LT(r["end_to_end"]["decode_tokens_per_s_per_user"].get<double>(),
              r["decode_tokens_per_s_per_user"].get<double>());
    EXPECT_GT(r["end_to_end_persistent"]["decode_tokens_per_s_per_user"].get<double>(),
              r["end_to_end"]["decode_tokens_per_s_per_user"].get<double>());
  }
  EXPECT_EQ(rows[2]["gpus"], 72);
  ASSERT_TRUE(j.contains("wafer_system"));
  EXPECT_EQ(j["wafer_system"]["system"], "small");
  EXPECT_TRUE(j["wafer_system"]["power_kw"].is_null());  // the test mesh has no power figure
  EXPECT_DOUBLE_EQ(j["wafer_system"]["decode_tokens_per_s_per_user"].get<double>(),
                   j["decode_tokens_per_s_per_user"].get<double>());
  EXPECT_DOUBLE_EQ(j["serving"]["round_trip_s"].get<double>(), 0.04);
  // compare_with: [] and nothing else: no comparison keys at all.
  const auto none = nlohmann::json::parse(run_json(
      write("n.yaml", std::string(kBase) + "compare_with: []\noutputs: {functional: false}\n")));
  EXPECT_FALSE(none.contains("gpu_baselines"));
  EXPECT_FALSE(none.contains("wafer_system"));
}

}  // namespace
}  // namespace wafersim::sim
