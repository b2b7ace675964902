// Child processes and files written whole: what the commands that run other
// wafersim processes (regress, sweep) and write reports share.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/output_file.hpp"

namespace wafersim::sim {

struct ProcessOutput {
  int exit_code = 0;  // the child's exit status, or 128 + signal
  std::string out;    // everything it wrote to stdout
  std::string err;    // everything it wrote to stderr
};

// Runs argv[0] with the arguments argv[1..] (no shell interpretation of
// them) and waits for it. Throws std::runtime_error if it cannot start.
ProcessOutput run_process(const std::vector<std::string>& argv);

// A child's first line on stderr that says what went wrong (one with
// "error"), else its first non-empty line; "" for none.
std::string first_error_line(const std::string& err);

// Files written whole (analysis/output_file.hpp), for the commands' reports.
using analysis::write_text_atomically;

}  // namespace wafersim::sim
