// Defect map files (`hardware.defects.file`): the dead cores of a wafer as a
// wafer test would list them, one core a line:
//
//   # WSE-3 wafer 17, physical coordinates (x = column, y = row)
//   12,40
//   13, 40     # spaces around the numbers are fine
//
// Each line is `x,y` (two whole numbers >= 0) with optional spaces, or
// blank, or a comment from '#' to its end. Physical coordinates when the
// hardware has spares (redundancy:), logical otherwise, as defects.cores.
// Strict: any other line, a core outside the array or a core listed twice is
// an error naming the file, line and column and what would be valid.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fabric/units.hpp"

namespace wafersim::sim {

struct DefectMapFile {
  std::vector<Coord> cores;  // in file order
  std::string sha256;        // of the file's bytes, lowercase hex
};

// Reads `path`. `width` x `height` is the array the coordinates index (0: not
// known yet, the range is left to WaferSpec::validate()); `array` names it in
// errors ("physical array", "mesh"). Throws ScenarioError (sim/config/
// scenario.hpp) at the file's line and column, with `key_path` (e.g.
// "hardware.defects.file").
DefectMapFile read_defect_map_file(const std::filesystem::path& path, int width, int height,
                                   const std::string& array, const std::string& key_path);

// The same for text already read (`shown` names it in errors).
DefectMapFile parse_defect_map(const std::string& text, const std::string& shown, int width,
                               int height, const std::string& array, const std::string& key_path);

}  // namespace wafersim::sim
