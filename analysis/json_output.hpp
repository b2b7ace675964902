// Machine-readable summary of a run (`wafersim run --json`). Complete and
// stable: keys keep their order, and identical runs give byte-identical text.
// Keys, types and units: docs/results-format.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"

namespace wafersim::analysis {

// Bumped whenever a key is renamed, removed or changes meaning (adding keys does not).
inline constexpr int kJsonFormatVersion = 1;

nlohmann::ordered_json to_json(const RunResult& result, const Metrics& metrics);

// to_json() as text: two-space indent and a trailing newline. Doubles are
// written as the shortest text that reads back to the same value.
std::string to_json_text(const RunResult& result, const Metrics& metrics);

}  // namespace wafersim::analysis
