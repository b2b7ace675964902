// Subcommands that live in their own files (cmd_*.cpp). Each registers its
// options on the app and returns the subcommand together with the function
// main calls when the user chose it. Errors propagate as exceptions to main,
// which maps them to exit codes.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace wafersim::sim {

// A one-line progress bar on stderr, only when stderr is a terminal:
// "  WHAT [####....] DONE/TOTAL UNIT", wiped when DONE reaches TOTAL.
void show_progress_bar(const std::string& what, int done, int total, const std::string& unit = "");

struct RegisteredCommand {
  CLI::App* command = nullptr;
  std::function<int()> run;
};

// wafersim noc --mesh KxK --pattern NAME --rates R1,R2,... [--level wavelet|flow]
//              [--seed N] [--json] ...: latency-throughput curve of synthetic traffic.
RegisteredCommand add_noc_command(CLI::App& app);

// wafersim bench fabric [--json]: speed of the full-size fabric and of the
// wavelet model. wafersim bench agreement: flow vs wavelet tables (markdown).
RegisteredCommand add_bench_command(CLI::App& app);

// wafersim sweep SCENARIO [--model a,b] [--hardware ..] [--precision ..]
//                [--wafers ..] [--users 1,2,4] [-j N] [--shard K/N|mpi] [--json]
//                [--csv FILE]: the scenario at every point of the grid.
RegisteredCommand add_sweep_command(CLI::App& app);

}  // namespace wafersim::sim
