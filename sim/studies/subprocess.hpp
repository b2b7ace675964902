// Child processes and files written whole: what the commands that run other
// wafersim processes (regress, sweep, calibration) and write reports share.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/output_file.hpp"

namespace wafersim::sim {

struct ProcessOutput {
  int exit_code = 0;       // the child's exit status, or 128 + signal
  std::string out;         // everything it wrote to stdout
  std::string err;         // everything it wrote to stderr
  bool cancelled = false;  // stopped because `cancel` was raised
};

// Runs argv[0] (searched on PATH when it has no '/') with the arguments
// argv[1..] (no shell interpretation of them) and waits for it, reading its
// stdout and stderr through pipes (nothing is written to the temporary
// directory). When `cancel` is given and becomes true while the child runs,
// the child gets SIGTERM (SIGKILL 5 s later) and the output says cancelled.
// Throws std::runtime_error if it cannot start.
ProcessOutput run_process(const std::vector<std::string>& argv,
                          const std::atomic<bool>* cancel = nullptr);

// Runs every command line, up to `jobs` at once; outputs in the order given.
std::vector<ProcessOutput> run_processes(const std::vector<std::vector<std::string>>& argvs,
                                         int jobs);

// A child's first line on stderr that says what went wrong (one with
// "error"), else its first non-empty line; "" for none.
std::string first_error_line(const std::string& err);

// Files written whole (analysis/output_file.hpp), for the commands' reports.
using analysis::write_text_atomically;

}  // namespace wafersim::sim
