// The C++ copies of preset models and wafers in tests/support/presets.hpp
// (what the YAML-free placement and exec tests use) equal their preset files.
#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "support/presets.hpp"

namespace wafersim::sim {
namespace {

TEST(SupportPresets, EveryModelEqualsItsPresetFile) {
  for (const std::string& name : testing::preset_model_names()) {
    const models::ModelConfig file = load_model_preset(name);
    const models::ModelConfig copy = testing::preset_model(name);
    EXPECT_TRUE(file == copy) << name;
    EXPECT_EQ(file.parameter_count(), copy.parameter_count()) << name;
  }
}

TEST(SupportPresets, EveryWaferEqualsItsPresetFile) {
  for (const std::string& name : testing::preset_hardware_names()) {
    const fabric::WaferSpec file = load_hardware_preset(name);
    const fabric::WaferSpec copy = testing::preset_hardware(name);
    EXPECT_TRUE(file == copy) << name;
    EXPECT_EQ(file.clock_hz, copy.clock_hz) << name;
    EXPECT_EQ(file.io_bandwidth_bytes_per_s, copy.io_bandwidth_bytes_per_s) << name;
  }
}

// The comparison sees every field: one changed field is a difference.
TEST(SupportPresets, ADifferentFieldIsADifference) {
  models::ModelConfig m = testing::preset_model("tiny-llama");
  m.sliding_window = 8;
  EXPECT_FALSE(m == load_model_preset("tiny-llama"));
  fabric::WaferSpec s = testing::preset_hardware("small");
  s.system_power_w = 1.0;
  EXPECT_FALSE(s == load_hardware_preset("small"));
}

}  // namespace
}  // namespace wafersim::sim
