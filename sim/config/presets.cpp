#include "sim/config/presets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <system_error>
#include <utility>

#include "sim/config/preset_resolver.hpp"
#include "sim/config/quantity.hpp"

namespace wafersim::sim {

namespace fs = std::filesystem;

std::string format_count(std::uint64_t n) {
  if (n < 1000) return std::to_string(n);
  static constexpr std::array<std::pair<double, const char*>, 4> kScales{
      {{1e3, "K"}, {1e6, "M"}, {1e9, "B"}, {1e12, "T"}}};
  for (std::size_t i = 0; i < kScales.size(); ++i) {
    const auto& [scale, suffix] = kScales[i];
    const double v = static_cast<double>(n) / scale;
    // A value that would round to 1000 moves to the next scale ("1.00M", not "1000K").
    if (v >= 999.5 && i + 1 < kScales.size()) continue;
    if (v >= 99.95) return fmt::format("{:.0f}{}", v, suffix);
    if (v >= 9.995) return fmt::format("{:.1f}{}", v, suffix);
    return fmt::format("{:.2f}{}", v, suffix);
  }
  return std::to_string(n);  // unreachable: the last scale always returns
}

std::vector<PresetInfo> list_presets(const fs::path& preset_dir) {
  std::error_code ec;
  if (!fs::is_directory(preset_dir, ec)) {
    throw ScenarioError(preset_dir.string(), 0, 0, "",
                        "preset folder not found; set WAFERSIM_PRESETS or pass --presets");
  }
  std::vector<PresetInfo> out;
  for (const std::string& name : schema::preset_names(preset_dir / "gpus")) {
    const models::gpu::ClusterSpec c = load_gpu_preset(name, preset_dir);
    out.push_back({"gpu", name,
                   fmt::format("{}x {}, {} each, {:g} kW", c.gpus_per_node, c.gpu.name,
                               format_size(Bytes{static_cast<std::uint64_t>(c.gpu.hbm_bytes)}),
                               c.node_power_w / 1000.0)});
  }
  for (const std::string& name : schema::preset_names(preset_dir / "hardware")) {
    const fabric::WaferSpec hw = load_hardware_preset(name, preset_dir);
    out.push_back({"hardware", name,
                   fmt::format("{}x{} cores, {}/core, {}", hw.mesh_width, hw.mesh_height,
                               format_size(hw.sram_per_core), format_frequency(hw.clock_hz))});
  }
  for (const std::string& name : schema::preset_names(preset_dir / "models")) {
    const models::ModelConfig m = load_model_preset(name, preset_dir);
    out.push_back({"model", name,
                   fmt::format("{} layers, d={}, {} params", m.num_layers, m.hidden_size,
                               format_count(m.parameter_count()))});
  }
  return out;  // gpu < hardware < model, names sorted within each kind
}

}  // namespace wafersim::sim
