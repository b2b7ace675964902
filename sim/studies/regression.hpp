// The golden regression suite: every scenario in a folder is rerun (each in
// its own process, as SystemC requires) and its JSON result compared with the
// one recorded next to it in expected/<name>.json. Results are deterministic,
// so figures must match exactly (a relative tolerance can be given for
// platforms whose libm differs); token ids always exactly.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wafersim::sim {

struct RegressionCase {
  std::string scenario;  // file name
  bool passed = false;
  bool recorded = false;                  // --accept wrote a new expected file
  std::filesystem::path expected_file;    // expected/<name>.json
  std::vector<std::string> diffs;         // every difference: "key: expected X, got Y"
  // A changed case in a few lines: a different hardware or model (then the
  // figures are not compared), each headline figure that changed with
  // better/worse, the tokens, and how many other values differ.
  std::vector<std::string> summary;
};

// The short account of a changed result: `want` the recorded JSON result,
// `got` the new one, `diffs` every difference between them.
std::vector<std::string> summarise_changes(const nlohmann::ordered_json& want,
                                           const nlohmann::ordered_json& got,
                                           const std::vector<std::string>& diffs);

struct RegressionOptions {
  std::filesystem::path binary;  // the wafersim executable to run each case with
  std::string presets;           // --presets for each case ("" = the default)
  bool accept = false;           // record the new results as expected
  double relative_tolerance = 0.0;
};

// Runs the suite in `folder` (*.yaml, sorted by name). Throws
// std::runtime_error when a scenario fails to run or has no expected result
// (unless accepting).
std::vector<RegressionCase> run_regression(
    const std::filesystem::path& folder, const RegressionOptions& options,
    const std::function<void(const std::string&)>& on_case = {});

}  // namespace wafersim::sim
