// Scenario loading: presets, overrides, defaults, deterministic prompts, the
// resolved-YAML round trip, and every kind of error with its file, line,
// column, key path and message.
#include "sim/config/scenario.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "fabric/redundancy.hpp"
#include "sim/config/presets.hpp"

#include "support/scratch_folder.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = WAFERSIM_SOURCE_DIR;
const fs::path kPresets = kSourceDir / "scenarios";
const fs::path kData = kSourceDir / "tests" / "sim" / "data";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The ScenarioError that loading `file` throws.
ScenarioError load_error(const fs::path& file, const fs::path& presets = kPresets) {
  try {
    load_scenario(file, presets);
  } catch (const ScenarioError& e) {
    return e;
  }
  ADD_FAILURE() << "loading " << file << " did not throw a ScenarioError";
  return ScenarioError("", 0, 0, "", "no error");
}

// Each test writes its own scenario files into a private folder.
class ScenarioFiles : public test_support::ScratchFolder {
 protected:
  ScenarioFiles() : ScratchFolder("wafersim-scenario-") {}

  // A scenario around the given hardware/model/workload blocks.
  fs::path scenario(const std::string& body, const std::string& name = "s.yaml") {
    return write(name, body);
  }
};

// The same SplitMix64 as documented in docs/scenario-schema.md, written out
// independently so that the test pins the documented algorithm.
std::vector<std::int32_t> reference_prompt(int count, std::uint64_t vocab, std::uint64_t seed) {
  std::uint64_t state = seed ^ 0x70726F6D7074ull;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < count; ++i) {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    ids.push_back(static_cast<std::int32_t>((static_cast<unsigned __int128>(z) * vocab) >> 64));
  }
  return ids;
}

void expect_same_hardware(const fabric::WaferSpec& a, const fabric::WaferSpec& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.mesh_width, b.mesh_width);
  EXPECT_EQ(a.mesh_height, b.mesh_height);
  EXPECT_EQ(a.dies_x, b.dies_x);
  EXPECT_EQ(a.dies_y, b.dies_y);
  EXPECT_EQ(a.clock_hz, b.clock_hz);
  EXPECT_EQ(a.sram_per_core, b.sram_per_core);
  EXPECT_EQ(a.simd_lanes_16bit, b.simd_lanes_16bit);
  EXPECT_EQ(a.simd_lanes_32bit, b.simd_lanes_32bit);
  EXPECT_EQ(a.sram_read_bytes_per_cycle, b.sram_read_bytes_per_cycle);
  EXPECT_EQ(a.task_overhead, b.task_overhead);
  EXPECT_EQ(a.instruction_overhead, b.instruction_overhead);
  EXPECT_EQ(a.hop_latency, b.hop_latency);
  EXPECT_EQ(a.link_bytes_per_cycle, b.link_bytes_per_cycle);
  EXPECT_EQ(a.virtual_channels, b.virtual_channels);
  EXPECT_EQ(a.reduce_hop_overhead, b.reduce_hop_overhead);
  EXPECT_EQ(a.io_bandwidth_bytes_per_s, b.io_bandwidth_bytes_per_s);
  EXPECT_EQ(a.io_latency_s, b.io_latency_s);
}

void expect_same_model(const models::ModelConfig& a, const models::ModelConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position, b.max_position);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
}

// A functional run of `sc` is refused (check_run_mode) naming `key` and
// saying `text`; `what` says what the run had.
void expect_functional_refused(const Scenario& sc, const std::string& key, const std::string& text,
                               const std::string& what) {
  try {
    check_run_mode(sc, /*functional=*/true);
    ADD_FAILURE() << "a functional run with " << what << " was accepted";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.key_path(), key);
    EXPECT_TRUE(contains(e.what(), text)) << e.what();
  }
}

void expect_same_scenario(const Scenario& a, const Scenario& b) {
  EXPECT_EQ(a.name, b.name);
  expect_same_hardware(a.hardware, b.hardware);
  expect_same_model(a.model, b.model);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.placement.strategy, b.placement.strategy);
  EXPECT_EQ(a.placement.reduction, b.placement.reduction);
  EXPECT_EQ(a.workload.prompt_ids, b.workload.prompt_ids);
  EXPECT_EQ(a.workload.generate_tokens, b.workload.generate_tokens);
  EXPECT_EQ(a.workload.seed, b.workload.seed);
  EXPECT_EQ(a.workload.prefill_block, b.workload.prefill_block);
  EXPECT_EQ(a.outputs.results, b.outputs.results);
  EXPECT_EQ(a.outputs.functional, b.outputs.functional);
}

std::string without_comments(const std::string& yaml) {
  std::istringstream in(yaml);
  std::string line, out;
  while (std::getline(in, line)) {
    if (!line.starts_with("#")) out += line + "\n";
  }
  return out;
}

// ---------------------------------------------------------------------------
// Loading what ships.

TEST(Scenario, QuickstartLoads) {
  const Scenario s = load_scenario(kPresets / "quickstart.yaml", kPresets);
  EXPECT_EQ(s.name, "quickstart");
  EXPECT_EQ(s.source_file, (kPresets / "quickstart.yaml").string());
  EXPECT_EQ(s.hardware_preset, "small");
  EXPECT_EQ(s.model_preset, "tiny-llama");
  EXPECT_EQ(s.hardware.name, "small");
  EXPECT_EQ(s.hardware.mesh_width, 32);
  EXPECT_EQ(s.hardware.mesh_height, 32);
  EXPECT_EQ(s.model.name, "tiny-llama");
  EXPECT_EQ(s.model.num_layers, 4);
  EXPECT_EQ(s.precision, models::DType::bf16);
  EXPECT_EQ(s.placement.strategy, StrategyKind::layer_rectangles);
  EXPECT_EQ(s.placement.reduction, ReductionScheme::chain);
  EXPECT_EQ(s.workload.prompt_ids.size(), 8u);
  EXPECT_EQ(s.workload.generate_tokens, 16);
  EXPECT_EQ(s.workload.seed, 42u);
  EXPECT_EQ(s.workload.prompt_ids, reference_prompt(8, 256, 42));
  EXPECT_TRUE(s.outputs.functional);
  EXPECT_FALSE(s.outputs.results.has_value());
}

TEST(Scenario, Wse3PresetHasThePublishedFigures) {
  const fabric::WaferSpec hw = load_hardware_preset("wse3", kPresets);
  EXPECT_EQ(hw.name, "wse3");
  EXPECT_EQ(hw.mesh_width, 762);
  EXPECT_EQ(hw.mesh_height, 1176);
  EXPECT_EQ(hw.dies_x, 7);
  EXPECT_EQ(hw.dies_y, 12);
  EXPECT_EQ(hw.clock_hz, 1.1e9);
  EXPECT_EQ(hw.sram_per_core.value, 48u * 1024u);
  EXPECT_EQ(hw.simd_lanes_16bit, 8);
  EXPECT_EQ(hw.simd_lanes_32bit, 4);
  EXPECT_EQ(hw.sram_read_bytes_per_cycle.value, 16u);
  EXPECT_EQ(hw.task_overhead.value, 20u);
  EXPECT_EQ(hw.instruction_overhead.value, 0u);  // not set: kernels that keep the SIMD unit fed
  EXPECT_EQ(hw.hop_latency.value, 1u);
  EXPECT_EQ(hw.link_bytes_per_cycle.value, 4u);  // one 32-bit wavelet
  EXPECT_EQ(hw.virtual_channels, 24);
  EXPECT_EQ(hw.reduce_hop_overhead.value, 2u);
  EXPECT_DOUBLE_EQ(hw.io_bandwidth_bytes_per_s, 150e9);  // 12 x 100 Gbit/s
  EXPECT_DOUBLE_EQ(hw.io_latency_s, 1e-6);

  const fabric::WaferSpec wse2 = load_hardware_preset("wse2", kPresets);
  EXPECT_EQ(wse2.mesh_width, 757);
  EXPECT_EQ(wse2.mesh_height, 996);
  EXPECT_EQ(wse2.simd_lanes_16bit, 4);
  EXPECT_EQ(wse2.instruction_overhead.value, 0u);  // kernels that keep the SIMD unit fed
}

TEST(Scenario, EveryShippedPresetAndScenarioLoadsAndValidates) {
  int hardware = 0, models_seen = 0, scenarios = 0;
  for (const auto& e : fs::directory_iterator(kPresets / "hardware")) {
    if (e.path().extension() != ".yaml") continue;
    const fabric::WaferSpec hw = load_hardware_preset(e.path().stem().string(), kPresets);
    EXPECT_NO_THROW(hw.validate()) << e.path();
    EXPECT_EQ(hw.name, e.path().stem().string());
    ++hardware;
  }
  for (const auto& e : fs::directory_iterator(kPresets / "models")) {
    if (e.path().extension() != ".yaml") continue;
    const models::ModelConfig m = load_model_preset(e.path().stem().string(), kPresets);
    EXPECT_NO_THROW(m.validate()) << e.path();
    ++models_seen;
  }
  for (const auto& e : fs::directory_iterator(kPresets)) {
    if (e.path().extension() != ".yaml") continue;
    EXPECT_NO_THROW(load_scenario(e.path(), kPresets)) << e.path();
    ++scenarios;
  }
  EXPECT_GE(hardware, 3);
  EXPECT_GE(models_seen, 2);
  EXPECT_GE(scenarios, 2);
}

TEST(Scenario, Llama8BPresetHasTheHuggingFaceShape) {
  const models::ModelConfig m = load_model_preset("llama-3.1-8b", kPresets);
  EXPECT_EQ(m.hidden_size, 4096);
  EXPECT_EQ(m.intermediate_size, 14336);
  EXPECT_EQ(m.num_layers, 32);
  EXPECT_EQ(m.num_heads, 32);
  EXPECT_EQ(m.num_kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.vocab_size, 128256);
  EXPECT_EQ(m.max_position, 131072);
  EXPECT_EQ(m.rope_theta, 500000.0);
  EXPECT_EQ(m.rms_norm_eps, 1e-5);
  EXPECT_FALSE(m.tie_embeddings);
}

TEST(Presets, ListIsSortedWithOneLineSummaries) {
  const std::vector<PresetInfo> all = list_presets(kPresets);
  ASSERT_GE(all.size(), 5u);
  for (std::size_t i = 1; i < all.size(); ++i) {
    EXPECT_LT(std::tie(all[i - 1].kind, all[i - 1].name), std::tie(all[i].kind, all[i].name));
  }
  auto find = [&](const std::string& kind, const std::string& name) -> std::string {
    for (const auto& p : all) {
      if (p.kind == kind && p.name == name) return p.summary;
    }
    return "(missing)";
  };
  EXPECT_EQ(find("hardware", "wse3"), "762x1176 cores, 48 KiB/core, 1.1 GHz");
  EXPECT_EQ(find("hardware", "small"), "32x32 cores, 48 KiB/core, 1.1 GHz");
  EXPECT_EQ(find("model", "tiny-llama"), "4 layers, d=64, 230K params");
  EXPECT_EQ(find("model", "llama-3.1-8b"), "32 layers, d=4096, 8.03B params");
  for (const auto& p : all) EXPECT_FALSE(contains(p.summary, "\n")) << p.name;
}

TEST(Presets, FormatCount) {
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1.00K");
  EXPECT_EQ(format_count(229952), "230K");
  EXPECT_EQ(format_count(1234567), "1.23M");
  EXPECT_EQ(format_count(999999), "1.00M");
  EXPECT_EQ(format_count(8030261248ull), "8.03B");
}

TEST(Presets, MissingFolderIsAnError) {
  EXPECT_THROW(list_presets(kPresets / "no-such-folder"), ScenarioError);
}

TEST(Presets, DefaultFolderFollowsEnvironment) {
  ASSERT_EQ(::setenv("WAFERSIM_PRESETS", "/tmp/some-presets", 1), 0);
  EXPECT_EQ(default_preset_dir(), fs::path("/tmp/some-presets"));
  ::unsetenv("WAFERSIM_PRESETS");
  EXPECT_EQ(default_preset_dir(), kPresets);
}

TEST(Presets, UnknownPresetNameListsTheAvailableOnes) {
  try {
    load_hardware_preset("wse9", kPresets);
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_TRUE(contains(e.what(), "unknown hardware preset 'wse9'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "available presets: small, wse2, wse3")) << e.what();
  }
  // Names are file names, never paths.
  EXPECT_THROW(load_model_preset("../models/tiny-llama", kPresets), ScenarioError);
}

// ---------------------------------------------------------------------------
// Presets with overrides, inline descriptions, defaults.

TEST_F(ScenarioFiles, OverridesDeepMergeIntoThePreset) {
  const Scenario s = load_scenario(scenario(R"(name: merged
hardware:
  preset: wse3
  core: {clock: 0.9 GHz}
  router:
    virtual_channels: 8
model:
  preset: tiny-llama
  num_layers: 2
workload: {prompt_tokens: 4, generate_tokens: 4}
)"),
                                   kPresets);
  fabric::WaferSpec expected = load_hardware_preset("wse3", kPresets);
  expected.clock_hz = 0.9e9;
  expected.virtual_channels = 8;
  expect_same_hardware(s.hardware, expected);  // everything else is the preset's
  models::ModelConfig model = load_model_preset("tiny-llama", kPresets);
  model.num_layers = 2;
  expect_same_model(s.model, model);
  EXPECT_EQ(s.hardware_preset, "wse3");
  EXPECT_EQ(s.model_preset, "tiny-llama");
}

TEST_F(ScenarioFiles, DefectsAreReadAndWrittenToTheResolvedScenario) {
  const Scenario a = load_scenario(scenario(R"(name: defects
hardware:
  preset: wse3
  defects:
    rate: 0.001
    seed: 9
    cores: [[3, 5], [10, 0]]
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)"),
                                   kPresets);
  EXPECT_EQ(a.hardware.defect_rate, 0.001);
  EXPECT_EQ(a.hardware.defect_seed, 9u);
  ASSERT_EQ(a.hardware.defect_cores.size(), 2u);
  EXPECT_EQ(a.hardware.defect_cores[0], (Coord{3, 5}));
  EXPECT_EQ(a.hardware.defect_cores[1], (Coord{10, 0}));
  EXPECT_TRUE(contains(a.resolved_yaml,
                       "  defects:\n    rate: 0.001\n    seed: 9\n    cores: [[3, 5], [10, 0]]\n"))
      << a.resolved_yaml;
  const Scenario b = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
  EXPECT_EQ(b.hardware.defect_rate, a.hardware.defect_rate);
  EXPECT_EQ(b.hardware.defect_seed, a.hardware.defect_seed);
  EXPECT_EQ(b.hardware.defect_cores, a.hardware.defect_cores);
  // Without defects the resolved scenario has no defects block.
  const Scenario none = load_scenario(kPresets / "quickstart.yaml", kPresets);
  EXPECT_FALSE(contains(none.resolved_yaml, "\n  defects:")) << none.resolved_yaml;
}

TEST_F(ScenarioFiles, DefectErrorsNameTheLineAndKey) {
  auto error_for = [&](const std::string& defects) {
    return load_error(
        scenario("name: bad\nhardware:\n  preset: wse3\n  defects:\n" + defects +
                 "model: tiny-llama\nworkload: {prompt_tokens: 4, generate_tokens: 4}\n"));
  };
  {
    const ScenarioError e = error_for("    rat: 0.01\n");
    EXPECT_EQ(e.line(), 5);
    EXPECT_EQ(e.column(), 5);
    EXPECT_EQ(e.key_path(), "hardware.defects.rat");
    EXPECT_TRUE(contains(e.what(), "did you mean 'rate'?")) << e.what();
  }
  {
    // Outside the WSE-3's 826 x 1176 physical array (762 logical columns + spares).
    const ScenarioError e = error_for("    seed: 1\n    cores: [[1, 2], [900, 5]]\n");
    EXPECT_EQ(e.line(), 6);
    EXPECT_EQ(e.key_path(), "hardware.defects.cores");
    EXPECT_TRUE(contains(e.what(), "(900, 5)")) << e.what();
  }
  {
    const ScenarioError e = error_for("    cores: [[1, 2], [7]]\n");
    EXPECT_EQ(e.line(), 5);
    EXPECT_EQ(e.key_path(), "hardware.defects.cores[1]");
    EXPECT_TRUE(contains(e.what(), "expected one core as [x, y]")) << e.what();
  }
  {
    const ScenarioError e = error_for("    rate: 1.5\n");
    EXPECT_EQ(e.line(), 5);
    EXPECT_EQ(e.key_path(), "hardware.defects.rate");
    EXPECT_TRUE(contains(e.what(), "[0, 1)")) << e.what();
  }
}

TEST_F(ScenarioFiles, DefectDensityPerMm2TimesTheCoreArea) {
  // wse3: core.area 0.05 mm^2 (Cerebras, "100x Defect Tolerance"), so the
  // published ~0.001 defects per mm^2 is 5e-5 per core.
  const Scenario a = load_scenario(scenario(R"(name: density
hardware:
  preset: wse3
  defects: {density_per_mm2: 0.001, seed: 7}
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)"),
                                   kPresets);
  EXPECT_EQ(a.hardware.core_area_mm2, 0.05);
  EXPECT_EQ(a.hardware.defect_density_per_mm2, 0.001);
  EXPECT_EQ(a.hardware.defect_rate, 0.0);
  EXPECT_DOUBLE_EQ(a.hardware.defect_probability(), 5e-5);
  EXPECT_TRUE(contains(a.resolved_yaml, "    area: 0.05 mm^2\n")) << a.resolved_yaml;
  EXPECT_TRUE(contains(a.resolved_yaml, "  defects:\n    density_per_mm2: 0.001\n    seed: 7\n"))
      << a.resolved_yaml;
  EXPECT_FALSE(contains(a.resolved_yaml, "rate:")) << a.resolved_yaml;
  const Scenario b = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
  EXPECT_EQ(b.hardware, a.hardware);
  // The same map as the rate it stands for.
  fabric::WaferSpec by_rate = a.hardware;
  by_rate.defect_density_per_mm2 = 0.0;
  by_rate.defect_rate = 0.001 * 0.05;
  EXPECT_EQ(fabric::physical_defects(by_rate).dead_cores(),
            fabric::physical_defects(a.hardware).dead_cores());
  // Both given: an error at the density's line naming both keys.
  auto error_for = [&](const std::string& hardware) {
    return load_error(scenario("name: bad\nhardware:\n" + hardware +
                               "model: tiny-llama\nworkload: {prompt_tokens: 4, "
                               "generate_tokens: 4}\n"));
  };
  {
    const ScenarioError e =
        error_for("  preset: wse3\n  defects:\n    rate: 0.0001\n    density_per_mm2: 0.001\n");
    EXPECT_EQ(e.line(), 6);
    EXPECT_EQ(e.key_path(), "hardware.defects.density_per_mm2");
    EXPECT_TRUE(contains(e.what(), "not both")) << e.what();
  }
  {
    // small has no core.area.
    const ScenarioError e = error_for("  preset: small\n  defects: {density_per_mm2: 0.001}\n");
    EXPECT_EQ(e.key_path(), "hardware.defects.density_per_mm2");
    EXPECT_TRUE(contains(e.what(), "core.area")) << e.what();
  }
  {
    const ScenarioError e = error_for("  preset: small\n  core: {area: 0.05}\n");
    EXPECT_EQ(e.key_path(), "hardware.core.area");
    EXPECT_TRUE(contains(e.what(), "mm^2")) << e.what();
  }
  // With an area given, it works on any hardware (um^2 too).
  const Scenario c = load_scenario(
      scenario("name: ok\nhardware:\n  preset: small\n  core: {area: 50000 um^2}\n  defects: "
               "{density_per_mm2: 0.002}\nmodel: tiny-llama\nworkload: {prompt_tokens: 4, "
               "generate_tokens: 4}\n"),
      kPresets);
  EXPECT_DOUBLE_EQ(c.hardware.defect_probability(), 1e-4);
}

TEST_F(ScenarioFiles, HandDrawnDefectMapFileIsRepairedAsByHand) {
  // small (32 x 32) with one spare column per 4: physical array 40 x 32,
  // group g on physical columns 5g .. 5g + 4.
  write("maps/wafer1.csv",
        "# a hand-drawn map, physical coordinates\n"
        "1,0\n"
        "  5 , 0   # group 1's first core\n"
        "\n"
        "9,1\r\n"  // row 1's spare of group 1 (CRLF is fine)
        "0,2\n");
  const Scenario a = load_scenario(scenario(R"(name: map
hardware:
  preset: small
  redundancy: {columns_per_group: 4, spare_columns: 1}
  defects:
    file: maps/wafer1.csv
    cores: [[20, 5]]
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)"),
                                   kPresets);
  EXPECT_EQ(a.hardware.defect_file_cores, (std::vector<Coord>{{1, 0}, {5, 0}, {9, 1}, {0, 2}}));
  EXPECT_EQ(a.hardware.defect_file_sha256.size(), 64u);
  const fabric::Repair r(a.hardware);
  EXPECT_EQ(r.dead_cores(), 5u);  // the file's four and the listed one: a union
  // By hand. Row 0: group 0 (physical 0-4) loses 1, so logical 1, 2, 3 move
  // to 2, 3, 4; group 1 (5-9) loses 5, so logical 4..7 sit on 6..9. Row 1:
  // the dead spare moves nothing. Row 2: logical 0..3 on 1..4.
  const int row0[] = {0, 2, 3, 4, 6, 7, 8, 9, 10};
  const int row1[] = {0, 1, 2, 3, 5, 6, 7, 8, 10};
  const int row2[] = {1, 2, 3, 4, 5, 6, 7, 8, 10};
  for (int x = 0; x < 9; ++x) {
    EXPECT_EQ(r.physical_x({x, 0}), row0[x]) << x;
    EXPECT_EQ(r.physical_x({x, 1}), row1[x]) << x;
    EXPECT_EQ(r.physical_x({x, 2}), row2[x]) << x;
  }
  // Row 0: 3 + 4 moved; row 2: 4; row 5 ((20, 5): group 4's first): 4.
  EXPECT_EQ(r.displaced_cores(), 15u);
  const fabric::Mesh m(32, 32);
  EXPECT_EQ(r.extra_hops(m, m.link({0, 0}, fabric::Direction::east)), 1);   // around 1
  EXPECT_EQ(r.extra_hops(m, m.link({3, 0}, fabric::Direction::east)), 1);   // around 5
  EXPECT_EQ(r.extra_hops(m, m.link({4, 0}, fabric::Direction::south)), 1);  // 6 over 5
  EXPECT_EQ(r.extra_hops(m, m.link({0, 1}, fabric::Direction::south)), 1);  // 0 over 1
  // The resolved scenario names the file (absolute) and pins its content.
  EXPECT_TRUE(contains(a.resolved_yaml, "    file: \"" + (dir_ / "maps/wafer1.csv").string()))
      << a.resolved_yaml;
  EXPECT_TRUE(contains(a.resolved_yaml, "    file_sha256: " + a.hardware.defect_file_sha256))
      << a.resolved_yaml;
  const fs::path resolved = write("resolved.yaml", a.resolved_yaml);
  EXPECT_EQ(load_scenario(resolved, kPresets).hardware, a.hardware);
  // A changed map no longer matches the hash the resolved scenario wrote.
  write("maps/wafer1.csv", "1,0\n");
  const ScenarioError e = load_error(resolved);
  EXPECT_EQ(e.key_path(), "hardware.defects.file_sha256");
  EXPECT_TRUE(contains(e.what(), "the map changed")) << e.what();
}

TEST_F(ScenarioFiles, DefectMapFileErrorsNameFileLineAndColumn) {
  struct Case {
    std::string text;
    int line, column;
    std::string says;
  };
  const Case cases[] = {
      {"x,y\n1,2\n", 1, 1, "expected x as a whole number >= 0, got 'x'"},
      {"1,2\n12;40\n", 2, 3, "expected ',' between x and y"},
      {"# c\n1.5,2\n", 2, 1, "got '1.5'"},
      {"1,2,3\n", 1, 4, "unexpected ',3' after the core's y"},
      {"1,\n", 1, 3, "expected y as a whole number"},
      {"-1,2\n", 1, 1, "negative"},
      {"3,4\n45,3\n", 2, 1, "x = 45 lies outside the 40 x 32 physical array"},
      {"3,32\n", 1, 3, "y = 32 lies outside the 40 x 32 physical array"},
      {"3,4\n7,7\n3, 4\n", 3, 1, "core 3,4 is listed twice (first on line 1)"},
  };
  for (const Case& c : cases) {
    write("bad.csv", c.text);
    const ScenarioError e = load_error(
        scenario("name: bad\nhardware:\n  preset: small\n  redundancy: {columns_per_group: 4}\n"
                 "  defects: {file: bad.csv}\nmodel: tiny-llama\nworkload: {prompt_tokens: 4, "
                 "generate_tokens: 4}\n"));
    EXPECT_EQ(e.file(), (dir_ / "bad.csv").string()) << c.text;
    EXPECT_EQ(e.line(), c.line) << c.text;
    EXPECT_EQ(e.column(), c.column) << c.text;
    EXPECT_EQ(e.key_path(), "hardware.defects.file") << c.text;
    EXPECT_TRUE(contains(e.what(), c.says)) << c.text << ": " << e.what();
  }
  // Without spares the coordinates are logical (32 x 32 mesh).
  write("bad.csv", "35,0\n");
  const ScenarioError logical = load_error(scenario(
      "name: bad\nhardware:\n  preset: small\n  defects: {file: bad.csv}\nmodel: tiny-llama\n"
      "workload: {prompt_tokens: 4, generate_tokens: 4}\n"));
  EXPECT_TRUE(contains(logical.what(), "x = 35 lies outside the 32 x 32 mesh (x in 0..31)"))
      << logical.what();
  // A missing file: at the key, saying where it looked.
  const ScenarioError missing = load_error(scenario(
      "name: bad\nhardware:\n  preset: small\n  defects: {file: nowhere.csv}\nmodel: tiny-llama\n"
      "workload: {prompt_tokens: 4, generate_tokens: 4}\n"));
  EXPECT_EQ(missing.line(), 4);
  EXPECT_EQ(missing.key_path(), "hardware.defects.file");
  EXPECT_TRUE(contains(missing.what(), (dir_ / "nowhere.csv").string())) << missing.what();
}

TEST_F(ScenarioFiles, InlineDescriptionsNeedNoPreset) {
  // missing_key.yaml with the missing key added is a complete inline description.
  std::string text = read_text(kData / "missing_key.yaml");
  text.replace(text.find("  router:\n"), 10, "  router:\n    hop_latency: 1 cycle\n");
  const Scenario inline_hw = load_scenario(write("inline.yaml", text), kPresets);
  EXPECT_EQ(inline_hw.hardware_preset, "inline");
  EXPECT_EQ(inline_hw.hardware.name, "custom");
  EXPECT_EQ(inline_hw.hardware.mesh_width, 8);
  EXPECT_EQ(inline_hw.hardware.clock_hz, 1e9);
  EXPECT_DOUBLE_EQ(inline_hw.hardware.io_bandwidth_bytes_per_s, 12.5e9);
}

TEST_F(ScenarioFiles, DefaultsAreFilled) {
  const Scenario s = load_scenario(scenario(R"(name: defaults
hardware: small
model: tiny-llama
workload:
  prompt_ids: [5, 6, 7]
  generate_tokens: 2
)"),
                                   kPresets);
  EXPECT_EQ(s.precision, models::DType::bf16);
  EXPECT_EQ(s.placement.strategy, StrategyKind::layer_rectangles);
  EXPECT_EQ(s.placement.reduction, ReductionScheme::chain);
  EXPECT_EQ(s.workload.seed, 0u);
  EXPECT_EQ(s.workload.prompt_ids, (std::vector<std::int32_t>{5, 6, 7}));
  EXPECT_TRUE(s.outputs.functional);
  EXPECT_FALSE(s.outputs.results.has_value());
}

TEST_F(ScenarioFiles, PromptTokensAreDrawnDeterministicallyFromTheSeed) {
  auto with_seed = [&](int seed, const std::string& file) {
    return load_scenario(scenario("name: p\nhardware: small\nmodel: tiny-llama\nworkload:\n"
                                  "  prompt_tokens: 32\n  generate_tokens: 4\n  seed: " +
                                      std::to_string(seed) + "\n",
                                  file),
                         kPresets)
        .workload.prompt_ids;
  };
  const auto a = with_seed(42, "a.yaml");
  const auto b = with_seed(42, "b.yaml");
  const auto c = with_seed(43, "c.yaml");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 32u);
  for (auto id : a) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 256);
  }
  EXPECT_EQ(a, reference_prompt(32, 256, 42));
  EXPECT_EQ(c, reference_prompt(32, 256, 43));
  // Pinned: the documented algorithm, not whatever the library happens to do.
  EXPECT_EQ(std::vector<std::int32_t>(a.begin(), a.begin() + 8),
            (std::vector<std::int32_t>{127, 213, 62, 80, 14, 203, 16, 66}));
}

// ---------------------------------------------------------------------------
// The resolved scenario.

TEST_F(ScenarioFiles, ResolvedYamlRoundTripsTheQuickstart) {
  const Scenario a = load_scenario(kPresets / "quickstart.yaml", kPresets);
  EXPECT_TRUE(contains(a.resolved_yaml, "    sram: 48 KiB\n")) << a.resolved_yaml;
  EXPECT_TRUE(contains(a.resolved_yaml, "    clock: 1.1 GHz\n")) << a.resolved_yaml;
  EXPECT_TRUE(contains(a.resolved_yaml, "  prompt_ids: [127, 213, 62, 80, 14, 203, 16, 66]\n"))
      << a.resolved_yaml;
  EXPECT_FALSE(contains(without_comments(a.resolved_yaml), "preset:")) << a.resolved_yaml;

  const Scenario b = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
  expect_same_scenario(a, b);
  EXPECT_EQ(b.hardware_preset, "inline");
  EXPECT_EQ(b.model_preset, "inline");
  EXPECT_EQ(without_comments(a.resolved_yaml), without_comments(b.resolved_yaml));
}

// placement.fabric_bits: 32 (the default, not written) or 16; anything else
// is refused where it is written; 16 runs timing only or functional.
TEST_F(ScenarioFiles, FabricBitsAreThirtyTwoOrSixteen) {
  const Scenario a = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {strategy: whole-region, fabric_bits: 16}
workload: {prompt_tokens: 4, generate_tokens: 4}
outputs: {functional: false}
)"),
                                   kPresets);
  EXPECT_EQ(a.placement.fabric_bits, 16);
  EXPECT_TRUE(contains(a.resolved_yaml, "fabric_bits: 16")) << a.resolved_yaml;
  EXPECT_EQ(load_scenario(scenario(a.resolved_yaml), kPresets).placement.fabric_bits, 16);
  check_run_mode(a, /*functional=*/false);
  check_run_mode(a, /*functional=*/true);
  const Scenario plain = load_scenario(kPresets / "quickstart.yaml", kPresets);
  EXPECT_EQ(plain.placement.fabric_bits, 32);
  EXPECT_FALSE(contains(plain.resolved_yaml, "fabric_bits")) << plain.resolved_yaml;
  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {fabric_bits: 8}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(e.key_path(), "placement.fabric_bits");
  EXPECT_EQ(e.line(), 4);
  EXPECT_TRUE(contains(e.what(), "must be 32 (fp32 values on the fabric) or 16")) << e.what();
}

TEST_F(ScenarioFiles, ResolvedYamlRoundTripsEveryOption) {
  const Scenario a = load_scenario(scenario(R"(name: "true"
hardware:
  preset: wse2
  core: {clock: 0.85 GHz, sram: 40 KiB, instruction_overhead: 12 cycles}
  io: {bandwidth: 150 GB/s, latency: 2.5 us}
model:
  preset: llama-3.1-8b
  rms_norm_eps: 1.0e-6
  tie_embeddings: true
precision: fp32
placement: {strategy: layer-rectangles, reduction: tree}
workload:
  prompt_tokens: 300
  generate_tokens: 7
  seed: 18446744073709551615
  prefill_block: 32
outputs:
  results: "out dir/run #1.h5"
  functional: false
)"),
                                   kPresets);
  EXPECT_EQ(a.name, "true");
  EXPECT_EQ(a.workload.seed, 18446744073709551615ull);
  EXPECT_EQ(a.workload.prefill_block, 32);
  EXPECT_EQ(a.outputs.results, "out dir/run #1.h5");
  EXPECT_EQ(a.hardware.instruction_overhead.value, 12u);  // the preset leaves it out
  EXPECT_TRUE(contains(a.resolved_yaml, "instruction_overhead: 12 cycles")) << a.resolved_yaml;
  const Scenario b = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
  expect_same_scenario(a, b);
  EXPECT_EQ(without_comments(a.resolved_yaml), without_comments(b.resolved_yaml));
  // The resolved form needs no presets at all.
  const Scenario c = load_scenario(write("again.yaml", a.resolved_yaml), dir_ / "no-presets");
  expect_same_scenario(a, c);
}

// ---------------------------------------------------------------------------
// Errors, fixture by fixture: file, line, column, key path, message.

TEST(ScenarioErrors, UnknownKeyWithDidYouMean) {
  const fs::path file = kData / "unknown_key.yaml";
  const ScenarioError e = load_error(file);
  EXPECT_EQ(e.file(), file.string());
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 5);
  EXPECT_EQ(e.key_path(), "hardware.core.sram_size");
  EXPECT_EQ(std::string(e.what()),
            file.string() +
                ":6:5: error: hardware.core.sram_size: unknown key 'sram_size'; valid keys here: "
                "clock, sram, simd_lanes_16bit, simd_lanes_32bit, sram_read_bandwidth, "
                "task_overhead, instruction_overhead, area\n  did you mean 'sram'?");
}

TEST(ScenarioErrors, WrongType) {
  const ScenarioError e = load_error(kData / "wrong_type.yaml");
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 23);
  EXPECT_EQ(e.key_path(), "hardware.core.simd_lanes_16bit");
  EXPECT_TRUE(contains(e.what(), "expected a whole number such as 8, got '8.5'")) << e.what();
}

TEST(ScenarioErrors, MissingKeyIsNamedAtItsParentMapping) {
  const ScenarioError e = load_error(kData / "missing_key.yaml");
  EXPECT_EQ(e.line(), 15);  // the `router:` line
  EXPECT_EQ(e.column(), 3);
  EXPECT_EQ(e.key_path(), "hardware.router.hop_latency");
  EXPECT_TRUE(contains(e.what(), "missing required key 'hop_latency'")) << e.what();
}

TEST(ScenarioErrors, ImpossibleValueFromValidate) {
  const ScenarioError e = load_error(kData / "impossible_value.yaml");
  EXPECT_EQ(e.file(), (kData / "impossible_value.yaml").string());
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 5);
  EXPECT_EQ(e.key_path(), "hardware.mesh.width");
  EXPECT_TRUE(contains(e.what(), "mesh width must be at least 1 core")) << e.what();
}

TEST(ScenarioErrors, BrokenYamlSyntaxGivesTheParserPosition) {
  const fs::path file = kData / "bad_syntax.yaml";
  const ScenarioError e = load_error(file);
  EXPECT_EQ(e.file(), file.string());
  EXPECT_EQ(e.line(), 7);  // where the parser found the flow list still open
  EXPECT_GT(e.column(), 0);
  EXPECT_EQ(e.key_path(), "");
  EXPECT_TRUE(contains(e.what(), "invalid YAML: end of sequence flow not found")) << e.what();
}

TEST(ScenarioErrors, MissingFileIsNamed) {
  const fs::path file = kData / "no-such-scenario.yaml";
  const ScenarioError e = load_error(file);
  EXPECT_EQ(e.file(), file.string());
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(std::string(e.what()),
            file.string() + ": error: cannot open file: No such file or directory");
}

TEST(ScenarioErrors, UnknownPresetListsTheAvailableOnes) {
  const ScenarioError e = load_error(kData / "unknown_preset.yaml");
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 11);
  EXPECT_EQ(e.key_path(), "hardware");
  EXPECT_TRUE(contains(e.what(),
                       "unknown hardware preset 'wse-3'; available presets: small, "
                       "wse2, wse3\n  did you mean 'wse3'?"))
      << e.what();
}

TEST(ScenarioErrors, PromptLongerThanMaxPosition) {
  const ScenarioError e = load_error(kData / "prompt_too_long.yaml");
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 18);
  EXPECT_EQ(e.key_path(), "workload.prompt_tokens");
  EXPECT_TRUE(contains(e.what(), "generate_tokens (4) = 204 tokens, more than max_position 128"))
      << e.what();
}

TEST(ScenarioErrors, PromptPlusGenerateBeyondMaxPosition) {
  const ScenarioError e = load_error(kData / "generate_too_many.yaml");
  EXPECT_EQ(e.line(), 7);
  EXPECT_EQ(e.column(), 20);
  EXPECT_EQ(e.key_path(), "workload.generate_tokens");
  EXPECT_TRUE(contains(e.what(), "max_position 128")) << e.what();
  EXPECT_TRUE(contains(e.what(), "generate_tokens can be at most 120")) << e.what();
}

TEST(ScenarioErrors, TokenIdOutOfRange) {
  const ScenarioError e = load_error(kData / "token_out_of_range.yaml");
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.column(), 22);
  EXPECT_EQ(e.key_path(), "workload.prompt_ids[2]");
  EXPECT_TRUE(contains(e.what(), "token id 300 is out of range; ids must be in [0, 256)"))
      << e.what();
}

// ---------------------------------------------------------------------------
// More errors, from scenarios written by the tests.

TEST_F(ScenarioFiles, UnknownTopLevelKeySuggestsTheRightOne) {
  const ScenarioError e =
      load_error(scenario("name: x\nhardware: small\nmodel: tiny-llama\n"
                          "worklaod:\n  prompt_tokens: 4\n"));
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.column(), 1);
  EXPECT_EQ(e.key_path(), "worklaod");
  EXPECT_TRUE(contains(e.what(), "did you mean 'workload'?")) << e.what();
}

TEST_F(ScenarioFiles, NegativeAnnealLatencyWeight) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  strategy: anneal
  anneal: {latency_weight: -1}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(e.line(), 6);
  EXPECT_EQ(e.key_path(), "placement.anneal.latency_weight");
  EXPECT_TRUE(contains(e.what(), "must be a finite number >= 0")) << e.what();
}

TEST_F(ScenarioFiles, MissingTopLevelKey) {
  const ScenarioError e = load_error(scenario("name: x\nhardware: small\nmodel: tiny-llama\n"));
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), 1);
  EXPECT_EQ(e.key_path(), "workload");
  EXPECT_TRUE(contains(e.what(), "missing required key 'workload'")) << e.what();
}

TEST_F(ScenarioFiles, BareNumberWhereAUnitIsRequired) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware:
  preset: small
  core:
    sram: 48
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(e.line(), 5);
  EXPECT_EQ(e.column(), 11);
  EXPECT_EQ(e.key_path(), "hardware.core.sram");
  EXPECT_TRUE(contains(e.what(),
                       "hardware.core.sram: sram needs a unit, e.g. 48 KiB; accepted "
                       "units: TiB, TB, GiB, GB, MiB, MB, KiB, KB, kB, B"))
      << e.what();
}

TEST_F(ScenarioFiles, NegativeAndZeroSram) {
  const std::string head = "name: x\nhardware:\n  preset: small\n  core:\n    sram: ";
  const std::string tail =
      "\nmodel: tiny-llama\nworkload: {prompt_tokens: 4, generate_tokens: 4}\n";
  const ScenarioError negative = load_error(scenario(head + "-4 KiB" + tail, "neg.yaml"));
  EXPECT_EQ(negative.key_path(), "hardware.core.sram");
  EXPECT_EQ(negative.line(), 5);
  EXPECT_TRUE(contains(negative.what(), "sram cannot be negative")) << negative.what();

  const ScenarioError zero = load_error(scenario(head + "0 B" + tail, "zero.yaml"));
  EXPECT_EQ(zero.key_path(), "hardware.core.sram");
  EXPECT_EQ(zero.line(), 5);  // WaferSpec::validate's complaint, at the override's line
  EXPECT_EQ(zero.column(), 5);
  EXPECT_TRUE(contains(zero.what(), "SRAM per core must be positive")) << zero.what();
}

TEST_F(ScenarioFiles, CountsMustBePlainNonNegativeWholeNumbers) {
  const ScenarioError negative = load_error(scenario(R"(name: x
hardware: {preset: small, mesh: {width: -4}}
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                     "neg.yaml"));
  EXPECT_EQ(negative.key_path(), "hardware.mesh.width");
  EXPECT_TRUE(contains(negative.what(), "cannot be negative (got -4)")) << negative.what();

  const ScenarioError quoted = load_error(scenario(R"(name: x
hardware: {preset: small, router: {virtual_channels: "24"}}
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                   "quoted.yaml"));
  EXPECT_EQ(quoted.key_path(), "hardware.router.virtual_channels");
  EXPECT_TRUE(contains(quoted.what(), "write numbers without quotes")) << quoted.what();

  const ScenarioError word = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: lots}
)",
                                                 "word.yaml"));
  EXPECT_EQ(word.key_path(), "workload.generate_tokens");
  EXPECT_EQ(word.line(), 4);
  EXPECT_EQ(word.column(), 47);
  EXPECT_TRUE(contains(word.what(), "expected a whole number such as 16, got 'lots'"))
      << word.what();
}

TEST_F(ScenarioFiles, ListWhereAMappingIsExpected) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: [tree]
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(e.key_path(), "placement");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.column(), 12);
  EXPECT_TRUE(
      contains(e.what(),
               "expected a mapping with keys strategy, reduction, reduction_groups, fabric_bits, "
               "block_rows, "
               "layer_groups, seed, anneal, halo, file, reserve, matrices, got a list"))
      << e.what();
}

TEST_F(ScenarioFiles, AnnealParametersAreValidated) {
  const ScenarioError cold = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  strategy: anneal
  anneal: {initial_temperature: 0.01, final_temperature: 0.5}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(cold.key_path(), "placement.anneal.final_temperature");
  EXPECT_EQ(cold.line(), 6);
  EXPECT_TRUE(contains(cold.what(), "at most initial_temperature (0.01)")) << cold.what();
  const ScenarioError wrong = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  strategy: serpentine
  anneal: {iterations: 10}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(wrong.key_path(), "placement.anneal");
  EXPECT_TRUE(contains(wrong.what(), "set strategy: anneal")) << wrong.what();
  const ScenarioError typo = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  strategy: anneal
  anneal: {iteration: 10}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_TRUE(contains(typo.what(), "did you mean 'iterations'?")) << typo.what();
  const ScenarioError reduction = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {reduction: two_level}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_TRUE(contains(reduction.what(), "did you mean 'two-level'?")) << reduction.what();
  const ScenarioError shape = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {matrices: {attention: {rows: 3}}}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(shape.key_path(), "placement.matrices.attention.rows");
  EXPECT_TRUE(contains(shape.what(), "valid keys here: reduction")) << shape.what();
}

TEST_F(ScenarioFiles, AnnealHaloAndTwoLevelAreReadAndResolved) {
  const fs::path f = scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  strategy: anneal
  reduction: two-level
  seed: 9
  anneal: {iterations: 1000, initial_temperature: 0.2, final_temperature: 0.001, sram_weight: 0.5, latency_weight: 250, spare_slots: 0.25}
  halo: {columns: 7, rows: 2}
  matrices: {gate_up: {rows: 6, columns: 3, reduction: tree}, attention: {reduction: two-level}}
workload: {prompt_tokens: 4, generate_tokens: 4}
)");
  const Scenario s = load_scenario(f, kPresets);
  EXPECT_EQ(s.placement.reduction, ReductionScheme::two_level);
  EXPECT_EQ(s.placement.seed, 9u);
  EXPECT_EQ(s.placement.anneal.iterations, 1000);
  EXPECT_DOUBLE_EQ(s.placement.anneal.sram_weight, 0.5);
  EXPECT_DOUBLE_EQ(s.placement.anneal.latency_weight, 250.0);
  EXPECT_DOUBLE_EQ(s.placement.anneal.spare_slots, 0.25);
  EXPECT_EQ(s.placement.halo.columns, 7);
  EXPECT_EQ(s.placement.halo.rows, 2);
  // The resolved scenario reads back to the same options.
  const fs::path again = scenario(s.resolved_yaml, "t.yaml");
  const Scenario t = load_scenario(again, kPresets);
  EXPECT_EQ(t.placement.reduction, ReductionScheme::two_level);
  EXPECT_EQ(t.placement.seed, 9u);
  EXPECT_DOUBLE_EQ(t.placement.anneal.final_temperature, 0.001);
  EXPECT_DOUBLE_EQ(t.placement.anneal.spare_slots, 0.25);
  EXPECT_DOUBLE_EQ(t.placement.anneal.latency_weight, 250.0);
  EXPECT_EQ(t.placement.halo.columns, 7);
  ASSERT_EQ(t.placement.matrices.count(MatrixKind::gate_up), 1u);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::gate_up).rows, 6);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::gate_up).columns, 3);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::gate_up).reduction, ReductionScheme::tree);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::attention).reduction, ReductionScheme::two_level);
}

TEST_F(ScenarioFiles, KTreeAndRingAreReadWithTheirGroups) {
  const fs::path f = scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  reduction: k-tree
  reduction_groups: 3
  matrices: {gate_up: {reduction: ring}, o: {reduction_groups: 2}, attention: {reduction: k-tree, reduction_groups: 1}}
workload: {prompt_tokens: 4, generate_tokens: 4}
)");
  const Scenario s = load_scenario(f, kPresets);
  EXPECT_EQ(s.placement.reduction, ReductionScheme::k_tree);
  EXPECT_EQ(s.placement.reduction_groups, 3);
  // The resolved scenario reads back to the same options.
  const Scenario t = load_scenario(scenario(s.resolved_yaml, "t.yaml"), kPresets);
  EXPECT_EQ(t.placement.reduction, ReductionScheme::k_tree);
  EXPECT_EQ(t.placement.reduction_groups, 3);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::gate_up).reduction, ReductionScheme::ring);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::o).reduction_groups, 2);
  EXPECT_EQ(t.placement.matrices.at(MatrixKind::attention).reduction_groups, 1);
  // Groups are the K of a k-tree, and nothing else's.
  const ScenarioError chain_groups = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {reduction: chain, reduction_groups: 4}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_TRUE(contains(chain_groups.what(), "reduction_groups given but the reduction is 'chain'"))
      << chain_groups.what();
  const ScenarioError ring_groups = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {reduction: k-tree, matrices: {down: {reduction: ring, reduction_groups: 4}}}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(ring_groups.key_path(), "placement.matrices.down.reduction_groups");
  // An unknown name lists the valid ones.
  const ScenarioError unknown = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {reduction: ktree}
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_TRUE(contains(unknown.what(), "k-tree")) << unknown.what();
  EXPECT_TRUE(contains(unknown.what(), "ring")) << unknown.what();
}

TEST_F(ScenarioFiles, ImpossibleModelFromAnOverride) {
  const ScenarioError layers = load_error(scenario(R"(name: x
hardware: small
model:
  preset: tiny-llama
  num_layers: 0
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                   "layers.yaml"));
  EXPECT_EQ(layers.key_path(), "model.num_layers");
  EXPECT_EQ(layers.line(), 5);
  EXPECT_EQ(layers.column(), 3);

  const ScenarioError heads = load_error(scenario(R"(name: x
hardware: small
model: {preset: tiny-llama, num_kv_heads: 3}
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                  "heads.yaml"));
  EXPECT_EQ(heads.key_path(), "model.num_kv_heads");
  EXPECT_EQ(heads.line(), 3);
  EXPECT_EQ(heads.column(), 29);
}

TEST_F(ScenarioFiles, ImpossibleValueInsideAPresetFileIsReportedThere) {
  std::string small = read_text(kPresets / "hardware" / "small.yaml");
  const auto pos = small.find("  width: 32");
  ASSERT_NE(pos, std::string::npos);
  small.replace(pos, 11, "  width: 0");
  const int width_line = 1 + static_cast<int>(std::count(small.begin(), small.begin() + pos, '\n'));
  const fs::path presets = dir_ / "presets";
  write("presets/hardware/small.yaml", small);
  write("presets/models/tiny-llama.yaml", read_text(kPresets / "models" / "tiny-llama.yaml"));

  const ScenarioError e = load_error(kPresets / "quickstart.yaml", presets);
  EXPECT_EQ(e.file(), (presets / "hardware" / "small.yaml").string());
  EXPECT_EQ(e.line(), width_line);
  EXPECT_EQ(e.column(), 3);
  EXPECT_EQ(e.key_path(), "hardware.mesh.width");

  // An override in the scenario fixes it, and then the override is what counts.
  const Scenario fixed = load_scenario(scenario(R"(name: x
hardware: {preset: small, mesh: {width: 16}}
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)"),
                                       presets);
  EXPECT_EQ(fixed.hardware.mesh_width, 16);
}

TEST_F(ScenarioFiles, UnknownKeyInsideAPresetFile) {
  std::string model = read_text(kPresets / "models" / "tiny-llama.yaml");
  model += "num_expert: 8\n";  // a misspelt num_experts
  write("presets/models/tiny-llama.yaml", model);
  write("presets/hardware/small.yaml", read_text(kPresets / "hardware" / "small.yaml"));
  const ScenarioError e = load_error(kPresets / "quickstart.yaml", dir_ / "presets");
  EXPECT_EQ(e.file(), (dir_ / "presets" / "models" / "tiny-llama.yaml").string());
  EXPECT_EQ(e.key_path(), "model.num_expert");
  EXPECT_EQ(e.column(), 1);
  EXPECT_TRUE(contains(e.what(), "unknown key 'num_expert'")) << e.what();
  EXPECT_TRUE(contains(e.what(), "did you mean 'num_experts'?")) << e.what();
}

TEST_F(ScenarioFiles, PresetNameMustMatchItsFile) {
  std::string hw = read_text(kPresets / "hardware" / "small.yaml");
  hw.replace(hw.find("name: small"), 11, "name: tiny");
  write("presets/hardware/small.yaml", hw);
  write("presets/models/tiny-llama.yaml", read_text(kPresets / "models" / "tiny-llama.yaml"));
  const ScenarioError e = load_error(kPresets / "quickstart.yaml", dir_ / "presets");
  EXPECT_EQ(e.key_path(), "hardware.name");
  EXPECT_TRUE(contains(e.what(), "does not match its file name 'small.yaml'")) << e.what();
}

TEST_F(ScenarioFiles, UnknownChoicesListTheValidOnes) {
  const ScenarioError precision = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
precision: bf8
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                      "p.yaml"));
  EXPECT_EQ(precision.key_path(), "precision");
  EXPECT_TRUE(contains(precision.what(),
                       "unknown precision 'bf8'; valid: fp32, fp16, bf16, fp8, fp8_e4m3, int8\n"
                       "  did you mean 'bf16'?"))
      << precision.what();

  const ScenarioError strategy = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {strategy: snake}
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                     "s.yaml"));
  EXPECT_EQ(strategy.key_path(), "placement.strategy");
  EXPECT_TRUE(contains(strategy.what(), "valid: layer-rectangles")) << strategy.what();

  const ScenarioError reduction = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {reduction: butterfly}
workload: {prompt_tokens: 4, generate_tokens: 4}
)",
                                                      "r.yaml"));
  EXPECT_EQ(reduction.key_path(), "placement.reduction");
  EXPECT_TRUE(contains(reduction.what(), "valid: chain, tree, two-level, k-tree, ring"))
      << reduction.what();
}

TEST_F(ScenarioFiles, PromptGivenTwiceOrNotAtAll) {
  const ScenarioError both = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_ids: [1]
  prompt_tokens: 4
  generate_tokens: 4
)",
                                                 "both.yaml"));
  EXPECT_EQ(both.key_path(), "workload.prompt_tokens");
  EXPECT_EQ(both.line(), 6);
  EXPECT_TRUE(contains(both.what(), "give one prompt")) << both.what();

  const ScenarioError neither = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  generate_tokens: 4
)",
                                                    "neither.yaml"));
  EXPECT_EQ(neither.key_path(), "workload.prompt_tokens");
  EXPECT_EQ(neither.line(), 4);

  const ScenarioError empty = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_ids: [], generate_tokens: 4}
)",
                                                  "empty.yaml"));
  EXPECT_EQ(empty.key_path(), "workload.prompt_ids");
  EXPECT_TRUE(contains(empty.what(), "at least one token id")) << empty.what();
}

TEST_F(ScenarioFiles, DuplicateKey) {
  const ScenarioError e =
      load_error(scenario("name: x\nhardware: small\nmodel: tiny-llama\nname: y\n"
                          "workload: {prompt_tokens: 4, generate_tokens: 4}\n"));
  EXPECT_EQ(e.key_path(), "name");
  EXPECT_EQ(e.line(), 4);
  EXPECT_TRUE(contains(e.what(), "duplicate key 'name'; it was already given on line 1"))
      << e.what();
}

TEST_F(ScenarioFiles, EmptyFileAndNonMappingFile) {
  const ScenarioError empty = load_error(scenario("# nothing here\n", "empty.yaml"));
  EXPECT_EQ(empty.line(), 0);
  EXPECT_TRUE(contains(empty.what(), "the file is empty")) << empty.what();

  const ScenarioError list = load_error(scenario("- name: x\n", "list.yaml"));
  EXPECT_EQ(list.line(), 1);
  EXPECT_TRUE(contains(list.what(), "expected a mapping with keys name, hardware")) << list.what();
}

TEST_F(ScenarioFiles, EmptyValueIsReportedAtItsKey) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware:
  preset: small
  core:
    clock:
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(e.key_path(), "hardware.core.clock");
  EXPECT_EQ(e.line(), 5);
  EXPECT_EQ(e.column(), 5);
  EXPECT_TRUE(contains(e.what(), "got nothing")) << e.what();
}

TEST_F(ScenarioFiles, PrefillBlockIsAPositiveCountAtItsLine) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: 4
  prefill_block: 0
)"));
  EXPECT_EQ(e.key_path(), "workload.prefill_block");
  EXPECT_EQ(e.line(), 7);
  EXPECT_TRUE(contains(e.what(), "prompt tokens per block")) << e.what();
}

// workload.decode_batch: at most the users (read after them whatever the
// order in the file), written back only when above 1, and not with
// speculative decoding (whose rounds verify one user's tokens).
// workload.batch_prompts: written back when set, read after decode_batch
// wherever the file puts it, and refused without a decode batch.
TEST_F(ScenarioFiles, BatchPromptsNeedADecodeBatch) {
  const Scenario ok = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {batch_prompts: true, prompt_tokens: 4, generate_tokens: 4, users: 3, decode_batch: 2}
)"));
  EXPECT_TRUE(ok.workload.batch_prompts);
  EXPECT_TRUE(contains(ok.resolved_yaml, "batch_prompts: true")) << ok.resolved_yaml;
  const Scenario off = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4, users: 3, decode_batch: 2}
)"));
  EXPECT_FALSE(off.workload.batch_prompts);
  EXPECT_FALSE(contains(off.resolved_yaml, "batch_prompts")) << off.resolved_yaml;

  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: 4
  users: 2
  batch_prompts: true
)"));
  EXPECT_EQ(e.key_path(), "workload.batch_prompts");
  EXPECT_EQ(e.line(), 8);
  EXPECT_TRUE(contains(e.what(), "needs workload.decode_batch > 1")) << e.what();

  const ScenarioError b = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {batch_prompts: maybe, prompt_tokens: 4, generate_tokens: 4, users: 2, decode_batch: 2}
)"));
  EXPECT_EQ(b.key_path(), "workload.batch_prompts");
}

TEST_F(ScenarioFiles, DecodeBatchIsAtMostTheUsersAndNotSpeculative) {
  const Scenario ok = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {decode_batch: 3, prompt_tokens: 4, generate_tokens: 4, users: 3}
)"));
  EXPECT_EQ(ok.workload.decode_batch, 3);
  EXPECT_TRUE(contains(ok.resolved_yaml, "decode_batch: 3")) << ok.resolved_yaml;
  const Scenario one = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4, users: 3}
)"));
  EXPECT_EQ(one.workload.decode_batch, 1);
  EXPECT_FALSE(contains(one.resolved_yaml, "decode_batch")) << one.resolved_yaml;

  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: 4
  users: 2
  decode_batch: 3
)"));
  EXPECT_EQ(e.key_path(), "workload.decode_batch");
  EXPECT_EQ(e.line(), 8);
  EXPECT_TRUE(contains(e.what(), "between 1 and workload.users (2)")) << e.what();

  const ScenarioError s = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4, users: 2, decode_batch: 2}
speculative_decoding: {draft_model: tiny-llama, draft_tokens: 2}
)"));
  EXPECT_EQ(s.key_path(), "speculative_decoding");
  EXPECT_EQ(s.line(), 5);
  EXPECT_TRUE(contains(s.what(), "decode_batch")) << s.what();
}

// workload.arrivals_s: one time >= 0 per user (read after the users whatever
// the order in the file), written back as given; a wrong count or a
// negative time names the key, its line and what would be valid.
TEST_F(ScenarioFiles, ArrivalsAreOneTimePerUser) {
  const Scenario ok = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {arrivals_s: [0, 0.0025], prompt_tokens: 4, generate_tokens: 4, users: 2}
)"));
  EXPECT_EQ(ok.workload.arrivals_s, (std::vector<double>{0.0, 0.0025}));
  EXPECT_TRUE(contains(ok.resolved_yaml, "arrivals_s: [0, 0.0025]")) << ok.resolved_yaml;
  const Scenario none = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4, users: 2}
)"));
  EXPECT_TRUE(none.workload.arrivals_s.empty());
  EXPECT_FALSE(contains(none.resolved_yaml, "arrivals_s")) << none.resolved_yaml;

  const ScenarioError count = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: 4
  users: 3
  arrivals_s: [0, 0.001]
)"));
  EXPECT_EQ(count.key_path(), "workload.arrivals_s");
  EXPECT_EQ(count.line(), 8);
  EXPECT_TRUE(contains(count.what(), "2 arrival times but workload.users is 3")) << count.what();

  const ScenarioError negative = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: 4
  users: 2
  arrivals_s:
    - 0
    - -0.5
)"));
  EXPECT_EQ(negative.key_path(), "workload.arrivals_s[1]");
  EXPECT_EQ(negative.line(), 10);
  EXPECT_TRUE(contains(negative.what(), "between 0 and 1e6 seconds")) << negative.what();

  const ScenarioError scalar = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4, arrivals_s: 0.5}
)"));
  EXPECT_EQ(scalar.key_path(), "workload.arrivals_s");
  EXPECT_TRUE(contains(scalar.what(), "one per user")) << scalar.what();
}

// workload.prompt_tokens, generate_tokens and cached_tokens as lists, one per
// user: each user's prompt is the first of its ids drawn at the longest
// length; the resolved scenario writes the lists back (and no prompt_ids),
// and reading it gives the same ids; a wrong count, an item out of range or
// one user's context beyond the model's names the key (the item), its line
// and what would be valid.
TEST_F(ScenarioFiles, PromptOutputAndCachedLengthsMayBeGivenPerUser) {
  const Scenario ok = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: [3, 8, 5]
  generate_tokens: [4, 1, 6]
  cached_tokens: [0, 20, 100]
  users: 3
outputs: {functional: false}
)"));
  const Workload& w = ok.workload;
  EXPECT_EQ(w.prompt_ids.size(), 8u);
  EXPECT_EQ(w.generate_tokens, 6);
  EXPECT_EQ(w.cached_tokens, 100);
  const int lengths[] = {3, 8, 5}, generate[] = {4, 1, 6}, cached[] = {0, 20, 100};
  for (int u = 0; u < 3; ++u) {
    EXPECT_EQ(user_prompt_tokens(w, u), lengths[u]);
    EXPECT_EQ(user_generate_tokens(w, u), generate[u]);
    EXPECT_EQ(user_cached_tokens(w, u), cached[u]);
    EXPECT_EQ(user_context_tokens(w, u), lengths[u] + generate[u] + cached[u]);
    const std::vector<std::int32_t> ids = user_prompt(w, u, ok.model.vocab_size);
    ASSERT_EQ(ids.size(), static_cast<std::size_t>(lengths[u]));
    for (std::size_t i = 0; i < ids.size(); ++i)
      EXPECT_EQ(ids[i], (w.prompt_ids[i] + u * 7919) % ok.model.vocab_size) << u << " " << i;
  }
  EXPECT_EQ(workload_token_passes(w), (3 + 4 - 1) + (8 + 1 - 1) + (5 + 6 - 1));
  EXPECT_TRUE(contains(ok.resolved_yaml, "prompt_tokens: [3, 8, 5]")) << ok.resolved_yaml;
  EXPECT_TRUE(contains(ok.resolved_yaml, "generate_tokens: [4, 1, 6]")) << ok.resolved_yaml;
  EXPECT_TRUE(contains(ok.resolved_yaml, "cached_tokens: [0, 20, 100]")) << ok.resolved_yaml;
  EXPECT_FALSE(contains(ok.resolved_yaml, "prompt_ids")) << ok.resolved_yaml;
  // Cached positions need a timing-only run, whichever user has them.
  expect_functional_refused(ok, "workload.cached_tokens", "gives a user 100 cached positions",
                            "cached positions");
  const Scenario again = load_scenario(scenario(ok.resolved_yaml));
  EXPECT_EQ(again.workload.prompt_ids, w.prompt_ids);
  EXPECT_EQ(again.workload.prompt_tokens_by_user, w.prompt_tokens_by_user);
  EXPECT_EQ(again.workload.generate_tokens_by_user, w.generate_tokens_by_user);
  EXPECT_EQ(again.workload.cached_tokens_by_user, w.cached_tokens_by_user);

  // A single count is every user's, and writes back as before.
  const Scenario single = load_scenario(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4, users: 2}
)"));
  EXPECT_TRUE(single.workload.prompt_tokens_by_user.empty());
  EXPECT_EQ(user_prompt_tokens(single.workload, 1), 4);
  EXPECT_TRUE(contains(single.resolved_yaml, "prompt_ids:")) << single.resolved_yaml;

  const ScenarioError count = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 4
  generate_tokens: [4, 2, 1]
  users: 2
)"));
  EXPECT_EQ(count.key_path(), "workload.generate_tokens");
  EXPECT_EQ(count.line(), 6);
  EXPECT_TRUE(contains(count.what(), "3 values but workload.users is 2")) << count.what();

  const ScenarioError zero = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens:
    - 4
    - 0
  generate_tokens: 4
  users: 2
)"));
  EXPECT_EQ(zero.key_path(), "workload.prompt_tokens[1]");
  EXPECT_EQ(zero.line(), 7);
  EXPECT_TRUE(contains(zero.what(), "valid: 1 to")) << zero.what();

  // User 1's context: 100 cached + 20 prompt + 10 generated > 128.
  const ScenarioError context = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload:
  prompt_tokens: 20
  generate_tokens:
    - 10
    - 10
  cached_tokens: [0, 100]
  users: 2
outputs: {functional: false}
)"));
  EXPECT_EQ(context.key_path(), "workload.generate_tokens[1]");
  EXPECT_EQ(context.line(), 8);
  EXPECT_TRUE(contains(context.what(), "user 1: cached_tokens (100) + the prompt (20 tokens)"))
      << context.what();
  EXPECT_TRUE(contains(context.what(), "generate_tokens can be at most 8")) << context.what();
}

TEST_F(ScenarioFiles, BooleansAreStrict) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
outputs: {functional: yes}
)"));
  EXPECT_EQ(e.key_path(), "outputs.functional");
  EXPECT_TRUE(contains(e.what(), "expected true or false, got 'yes'")) << e.what();
}

// weights: and a text prompt. A folder with a config.json (and a tokenizer
// that maps each byte to its own id), without weights unless written.
class CheckpointScenario : public ScenarioFiles {
 protected:
  fs::path folder() {
    write("ck/config.json",
          R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 192,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 256, "max_position_embeddings": 128})");
    // GPT-2's byte map: printable bytes stand for themselves, space is U+0120.
    std::string vocab;
    for (int b = 33; b < 127; ++b) {
      if (b == '"' || b == '\\') continue;
      if (!vocab.empty()) vocab += ',';
      vocab += '"';
      vocab += static_cast<char>(b);
      vocab += "\":";
      vocab += std::to_string(b);
    }
    vocab += ",\"\xc4\xa0\":32";
    write("ck/tokenizer.json",
          R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
              "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {)" +
              vocab + R"(}, "merges": []}, "added_tokens": []})");
    return dir_ / "ck";
  }
};

TEST_F(CheckpointScenario, WeightsDefaultToTheCheckpointsAndAreRequiredOnlyToComputeValues) {
  const fs::path ck = folder();
  const std::string model = "name: x\nhardware: small\nmodel: " + ck.string() + "\n";
  const std::string work = "workload:\n  prompt_ids: [1, 2]\n  generate_tokens: 2\n";
  const Scenario s = load_scenario(scenario(model + work), kPresets);
  EXPECT_EQ(s.weights.source, WeightsOptions::Source::checkpoint);
  EXPECT_EQ(s.weights.path, ck.string());
  EXPECT_EQ(s.model_checkpoint, ck.string());
  EXPECT_EQ(s.workload.tokenizer, (ck / "tokenizer.json").string());
  check_run_mode(s, false);  // timing only: no weights needed
  expect_functional_refused(s, "weights.path", "source: synthetic", "no weights files");
  // Synthetic, asked for: no weights needed, and none for a preset.
  const Scenario synthetic =
      load_scenario(scenario(model + "weights: {source: synthetic}\n" + work), kPresets);
  check_run_mode(synthetic, true);
  const Scenario preset = load_scenario(
      scenario("name: x\nhardware: small\nmodel: tiny-llama\n" + work, "p.yaml"), kPresets);
  EXPECT_EQ(preset.weights.source, WeightsOptions::Source::synthetic);
  EXPECT_TRUE(preset.workload.tokenizer.empty());
}

TEST_F(CheckpointScenario, WeightsErrorsNameTheKey) {
  const fs::path ck = folder();
  const std::string work = "workload:\n  prompt_ids: [1, 2]\n  generate_tokens: 2\n";
  const std::string preset = "name: x\nhardware: small\nmodel: tiny-llama\n";
  ScenarioError e = load_error(scenario(preset + "weights: {source: checkpoint}\n" + work));
  EXPECT_EQ(e.key_path(), "weights.path");
  e = load_error(
      scenario(preset + "weights: {source: synthetic, path: " + ck.string() + "}\n" + work));
  EXPECT_EQ(e.key_path(), "weights.path");
  EXPECT_EQ(e.line(), 4);
  e = load_error(scenario(preset + "weights: {source: checkpoint, path: ./nowhere}\n" + work));
  EXPECT_EQ(e.key_path(), "weights.path");
  EXPECT_TRUE(contains(e.what(), "does not exist")) << e.what();
  e = load_error(scenario("name: x\nhardware: small\nmodel: " + ck.string() +
                          "\nweights: {sha256: abc}\n" + work));
  EXPECT_EQ(e.key_path(), "weights.sha256");
  e = load_error(scenario(preset + "weights: {source: real}\n" + work));
  EXPECT_EQ(e.key_path(), "weights.source");
}

TEST_F(CheckpointScenario, ATextPromptIsEncodedWithTheTokenizer) {
  const fs::path ck = folder();
  const Scenario s =
      load_scenario(scenario("name: x\nhardware: small\nmodel: " + ck.string() +
                             "\nworkload:\n  prompt: \"Hi there\"\n  generate_tokens: 2\n"),
                    kPresets);
  // Each byte its own id (no merges): 'H' 'i', then ' t' is two ids, ...
  EXPECT_EQ(s.workload.prompt_ids,
            (std::vector<std::int32_t>{'H', 'i', ' ', 't', 'h', 'e', 'r', 'e'}));
  EXPECT_EQ(s.workload.prompt_text, "Hi there");
  // The resolved scenario gives the ids and the tokenizer back.
  EXPECT_TRUE(contains(s.resolved_yaml, "prompt_ids: [72, 105, 32, 116")) << s.resolved_yaml;
  EXPECT_TRUE(contains(s.resolved_yaml, "tokenizer: ")) << s.resolved_yaml;

  // No tokenizer: an error at the prompt.
  ScenarioError e = load_error(
      scenario("name: x\nhardware: small\nmodel: tiny-llama\nworkload:\n  prompt: \"Hi\"\n  "
               "generate_tokens: 2\n",
               "none.yaml"));
  EXPECT_EQ(e.key_path(), "workload.prompt");
  EXPECT_EQ(e.line(), 5);
  EXPECT_TRUE(contains(e.what(), "tokenizer")) << e.what();
  // Text the tokenizer cannot encode (a byte it has no token for).
  e = load_error(scenario("name: x\nhardware: small\nmodel: " + ck.string() +
                              "\nworkload:\n  prompt: \"tab\\there\"\n  generate_tokens: 2\n",
                          "tab.yaml"));
  EXPECT_EQ(e.key_path(), "workload.prompt");
  // A tokenizer that is not one.
  write("bad/tokenizer.json", "{\"model\": 3}");
  e = load_error(scenario("name: x\nhardware: small\nmodel: tiny-llama\nworkload:\n  tokenizer: " +
                              (dir_ / "bad/tokenizer.json").string() +
                              "\n  prompt_ids: [1]\n  generate_tokens: 2\n",
                          "bad.yaml"));
  EXPECT_EQ(e.key_path(), "workload.tokenizer");
}

// placement.layer_groups: a count or auto; anything else names the key, its
// line and the valid values (auto among them).
TEST_F(ScenarioFiles, LayerGroupsTakeACountOrAuto) {
  const std::string head =
      "name: x\nhardware: small\nmodel: tiny-llama\nplacement:\n"
      "  strategy: whole-region\n";
  const std::string tail = "workload: {prompt_tokens: 4, generate_tokens: 4}\n";
  const Scenario a = load_scenario(scenario(head + "  layer_groups: auto\n" + tail), kPresets);
  EXPECT_TRUE(a.placement.layer_groups_auto);
  EXPECT_TRUE(contains(a.resolved_yaml, "layer_groups: auto")) << a.resolved_yaml;
  // The resolved scenario reads back as auto.
  const Scenario again = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
  EXPECT_TRUE(again.placement.layer_groups_auto);
  const Scenario n = load_scenario(scenario(head + "  layer_groups: 2\n" + tail), kPresets);
  EXPECT_FALSE(n.placement.layer_groups_auto);
  EXPECT_EQ(n.placement.layer_groups, 2);
  EXPECT_TRUE(contains(n.resolved_yaml, "layer_groups: 2")) << n.resolved_yaml;

  for (const std::string bad : {"foo", "-1", "2.5", "[2]"}) {
    const ScenarioError e = load_error(scenario(head + "  layer_groups: " + bad + "\n" + tail));
    EXPECT_EQ(e.key_path(), "placement.layer_groups") << bad;
    EXPECT_EQ(e.line(), 6) << bad;
    EXPECT_TRUE(contains(e.what(), "or auto")) << e.what();
    EXPECT_TRUE(contains(e.what(), "1 to the model's layers")) << e.what();
  }
  const ScenarioError zero = load_error(scenario(head + "  layer_groups: 0\n" + tail));
  EXPECT_EQ(zero.key_path(), "placement.layer_groups");
  EXPECT_TRUE(contains(zero.what(), "or auto")) << zero.what();
}

// auto, like a count, belongs to whole-region alone.
TEST_F(ScenarioFiles, LayerGroupsAutoNeedsWholeRegion) {
  const ScenarioError e = load_error(scenario(R"(name: x
hardware: small
model: tiny-llama
placement:
  strategy: serpentine
  layer_groups: auto
workload: {prompt_tokens: 4, generate_tokens: 4}
)"));
  EXPECT_EQ(e.key_path(), "placement.layer_groups");
  EXPECT_EQ(e.line(), 6);
  EXPECT_TRUE(contains(e.what(), "strategy is 'serpentine'; set strategy: whole-region"))
      << e.what();
}

// placement.reduction: a scheme or auto (whole-region); anything else names
// the key, its line and the valid values, auto among them. The resolved
// scenario writes auto back, and the matrices' own auto too.
TEST_F(ScenarioFiles, ReductionTakesASchemeOrAuto) {
  const std::string head =
      "name: x\nhardware: small\nmodel: tiny-llama\nplacement:\n"
      "  strategy: whole-region\n";
  const std::string tail = "workload: {prompt_tokens: 4, generate_tokens: 4}\n";
  const Scenario a =
      load_scenario(scenario(head +
                             "  reduction: auto\n  reduction_groups: 4\n"
                             "  matrices: {o: {reduction: auto}, qkv: {reduction: chain}}\n" +
                             tail),
                    kPresets);
  EXPECT_TRUE(a.placement.reduction_auto);
  EXPECT_EQ(a.placement.reduction_groups, 4);  // the k-tree candidate's K
  ASSERT_EQ(a.placement.matrix_reduction_auto.size(), 1u);
  EXPECT_EQ(a.placement.matrix_reduction_auto[0], MatrixKind::o);
  EXPECT_FALSE(a.placement.matrices.at(MatrixKind::o).reduction.has_value());
  EXPECT_EQ(a.placement.matrices.at(MatrixKind::qkv).reduction, ReductionScheme::chain);
  EXPECT_TRUE(contains(a.resolved_yaml, "reduction: auto\n")) << a.resolved_yaml;
  EXPECT_TRUE(contains(a.resolved_yaml, "o: {reduction: auto}")) << a.resolved_yaml;
  const Scenario again = load_scenario(write("resolved.yaml", a.resolved_yaml), kPresets);
  EXPECT_TRUE(again.placement.reduction_auto);
  EXPECT_EQ(again.placement.matrix_reduction_auto, a.placement.matrix_reduction_auto);
  const Scenario n = load_scenario(scenario(head + "  reduction: ring\n" + tail), kPresets);
  EXPECT_FALSE(n.placement.reduction_auto);
  EXPECT_TRUE(n.placement.matrix_reduction_auto.empty());
  EXPECT_EQ(n.placement.reduction, ReductionScheme::ring);

  for (const std::string bad : {"fastest", "Auto", "[chain]"}) {
    const ScenarioError e = load_error(scenario(head + "  reduction: " + bad + "\n" + tail));
    EXPECT_EQ(e.key_path(), "placement.reduction") << bad;
    EXPECT_EQ(e.line(), 6) << bad;
    EXPECT_TRUE(contains(e.what(), "chain, tree, two-level, k-tree, ring, auto")) << e.what();
  }
  const ScenarioError m =
      load_error(scenario(head + "  matrices:\n    attention: {reduction: autom}\n" + tail));
  EXPECT_EQ(m.key_path(), "placement.matrices.attention.reduction");
  EXPECT_EQ(m.line(), 7);
  EXPECT_TRUE(contains(m.what(), "auto")) << m.what();
}

// reduction: auto belongs to whole-region alone: elsewhere the error names
// the key, its line and the schemes valid there.
TEST_F(ScenarioFiles, ReductionAutoNeedsWholeRegion) {
  for (const std::string where : {"  reduction: auto\n", "  matrices: {o: {reduction: auto}}\n"}) {
    const ScenarioError e = load_error(scenario(
        "name: x\nhardware: small\nmodel: tiny-llama\nplacement:\n  strategy: serpentine\n" +
        where + "workload: {prompt_tokens: 4, generate_tokens: 4}\n"));
    EXPECT_TRUE(e.key_path() == "placement.reduction" ||
                e.key_path() == "placement.matrices.o.reduction")
        << e.key_path();
    EXPECT_EQ(e.line(), 6);
    EXPECT_TRUE(contains(e.what(), "strategy is 'serpentine'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "valid here: chain, tree, two-level, k-tree, ring")) << e.what();
  }
}

// --layer-groups auto (a command-line override) is the key's auto.
TEST_F(ScenarioFiles, LayerGroupsOverrideTakesAuto) {
  const fs::path f = scenario(R"(name: x
hardware: small
model: tiny-llama
placement: {strategy: whole-region, layer_groups: 2}
workload: {prompt_tokens: 4, generate_tokens: 4}
)");
  ScenarioOverrides o;
  o.layer_groups = "auto";
  EXPECT_TRUE(load_scenario(f, kPresets, o).placement.layer_groups_auto);
  o.layer_groups = "3";
  const Scenario three = load_scenario(f, kPresets, o);
  EXPECT_FALSE(three.placement.layer_groups_auto);
  EXPECT_EQ(three.placement.layer_groups, 3);
  o.layer_groups = "many";
  EXPECT_THROW(load_scenario(f, kPresets, o), ScenarioError);
}

}  // namespace
}  // namespace wafersim::sim
