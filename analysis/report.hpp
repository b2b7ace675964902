// The terminal report: short, aligned, human units. Machine-readable output is
// json_output.hpp and hdf5_output.hpp; this text is for people and is not
// stable (never parse it, never golden-test it).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "analysis/metrics.hpp"
#include "analysis/run_result.hpp"

namespace wafersim::analysis {

void write_report(std::ostream& out, const RunResult& result, const Metrics& metrics);

// Human units, exposed for the other human-facing outputs (HTML, compare).
std::string format_bytes(std::uint64_t bytes);  // "512 B", "48.0 KiB", "1.25 GiB"
std::string format_seconds(double seconds);     // "850 ns", "81.3 µs", "1.20 ms", "2.50 s"
std::string format_count(std::uint64_t n);      // "950", "15.2 K", "8.03 B" (parameters)
std::string format_hz(double hz);               // "1.10 GHz"
std::string format_grouped(std::uint64_t n);    // "1,234,567"
std::string format_percent(double fraction);    // "12.3%"

}  // namespace wafersim::analysis
