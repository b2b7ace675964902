// The GPU, hardware and model presets shipped under scenarios/, for `wafersim list`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/config/scenario.hpp"

namespace wafersim::sim {

struct PresetInfo {
  std::string kind;     // "gpu", "hardware" or "model"
  std::string name;     // what a scenario writes: `hardware: wse3`
  std::string summary;  // one line, e.g. "762x1176 cores, 48 KiB/core, 1.1 GHz"
};

// Every preset in <preset_dir>/hardware and <preset_dir>/models, loaded and
// validated, sorted by kind then name. Throws ScenarioError for a preset that
// does not load (a broken preset should not hide in a listing) and when
// preset_dir does not exist.
std::vector<PresetInfo> list_presets(
    const std::filesystem::path& preset_dir = default_preset_dir());

// "230K", "1.24M", "8.03B": a count with three significant digits.
std::string format_count(std::uint64_t n);

}  // namespace wafersim::sim
