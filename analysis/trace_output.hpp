// `wafersim run --trace FILE`: a run's trace (analysis/run_trace.hpp) as a
// Chrome trace-event JSON file (the JSON object format), which Perfetto's UI
// and chrome://tracing open. Times are microseconds of simulated time (cycles
// at the run's clock). Tracks, event names and units: docs/results-format.md,
// "Trace".
#pragma once

#include <filesystem>
#include <string>

#include "analysis/run_result.hpp"
#include "analysis/run_trace.hpp"

namespace wafersim::analysis {

// Bumped whenever a track, event or argument is renamed, removed or changes
// meaning (adding does not).
inline constexpr int kTraceFormatVersion = 1;

// Throws OutputError when `path` cannot be written: its folder is missing or
// not a folder, or it is a folder itself. Called before simulating, so that a
// long run does not end on an unwritable path.
void check_trace_path(const std::filesystem::path& path);

// The trace as Chrome trace-event JSON text. `result` gives the clock, the
// per-token records (the host's token tracks) and the run's names.
std::string trace_to_json_text(const RunTrace& trace, const RunResult& result);

// trace_to_json_text() written whole or not at all (write_text_atomically).
void write_trace(const std::filesystem::path& path, const RunTrace& trace, const RunResult& result);

}  // namespace wafersim::analysis
