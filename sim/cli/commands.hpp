// The subcommands of wafersim, one file each (cmd_*.cpp). Each registers its
// options on the app and returns the subcommand together with the function
// main calls when the user chose it. Errors propagate as exceptions to main,
// the one place that turns them into messages and exit codes.
#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace wafersim::sim {

// wafersim's exit codes, the same for every command.
enum ExitCode : int {
  kExitSuccess = 0,
  kExitBadInput = 1,  // a scenario, preset or results file that is wrong, a model that does not fit
  kExitUsage = 2,     // the command line itself
  kExitInternal = 3,  // a bug, or results that contradict the reference
  kExitRegression = 4,  // a compared figure got worse (compare, regress)
};

// An error a command finds itself, outside the libraries' typed errors: main
// prints "wafersim: error: WHAT" and exits with the code.
class CommandError : public std::runtime_error {
 public:
  CommandError(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

struct RegisteredCommand {
  CLI::App* command = nullptr;
  std::function<int()> run;
  // The scenario file that main's messages about the model name ("FILE: the
  // model does not fit"); unset for commands whose messages name none.
  std::function<std::string()> scenario = nullptr;
};

// wafersim run SCENARIO [--json] [--out FILE] [--report FILE.html] [--functional|--timing-only]
//              [--hardware ..] [--model ..] [--precision ..] [--wafers ..] [--users N]
//              [--placement FILE] [--threads N] [--keep-link-records]: simulate and report.
RegisteredCommand add_run_command(CLI::App& app);

// wafersim place SCENARIO [--json] [--svg FILE] [--strategy NAME] [--block-rows N]
//                [--wafers ..] [--hardware ..] [--model ..] [--placement FILE]
//                [--write-placement FILE]: place the model and evaluate it, no simulation.
RegisteredCommand add_place_command(CLI::App& app);

// wafersim validate SCENARIO: check a scenario without running it.
RegisteredCommand add_validate_command(CLI::App& app);

// wafersim list: the hardware and model presets.
RegisteredCommand add_list_command(CLI::App& app);

// wafersim noc --mesh KxK --pattern NAME --rates R1,R2,... [--level wavelet|flow]
//              [--seed N] [--json] ...: latency-throughput curve of synthetic traffic.
RegisteredCommand add_noc_command(CLI::App& app);

// wafersim bench fabric [--json]: speed of the full-size fabric and of the
// wavelet model. wafersim bench agreement: flow vs wavelet tables (markdown).
RegisteredCommand add_bench_command(CLI::App& app);

// wafersim sweep SCENARIO [--model a,b] [--hardware ..] [--precision ..]
//                [--wafers ..] [--users 1,2,4] [-j N] [--shard K/N] [--out JOURNAL]
//                [--json] [--csv FILE]: the scenario at every point of the grid (over
//                MPI ranks when mpirun/srun started it).
RegisteredCommand add_sweep_command(CLI::App& app);
// wafersim merge JOURNAL... [--json] [--csv FILE] [--out FILE]: the journals of
// a sweep's shards as one sweep (missing points named, exit 1).
RegisteredCommand add_merge_command(CLI::App& app);

// wafersim yield SCENARIO --rates R1,R2,... [--wafers N] [-j N] [--json]: the
// fraction of drawn wafers whose defects the spares repair, per rate.
RegisteredCommand add_yield_command(CLI::App& app);

// wafersim regress [FOLDER] [--accept] [--tolerance T]: rerun the golden
// regression scenarios and compare with their recorded results (exit 4 on a change).
RegisteredCommand add_regress_command(CLI::App& app);

// wafersim compare A B [--json] [--fail-on-regression PCT]: two results files
// side by side (exit 4 when a figure got worse by more than PCT percent).
RegisteredCommand add_compare_command(CLI::App& app);

// wafersim serve SCENARIO [--json] [--out FILE.h5] [--csv FILE] [--report FILE.html]
//                [--set K=V] [-j N] [--cache DIR | --no-cache]: a serving study.
RegisteredCommand add_serve_command(CLI::App& app);
// wafersim capacity SCENARIO [--target-rate R] [...as serve]: rate per replica within the SLO.
RegisteredCommand add_capacity_command(CLI::App& app);

// --set KEY=VALUE options as (key, value) pairs; CommandError (usage) for one without '='.
std::vector<std::pair<std::string, std::string>> parse_set_options(
    const std::vector<std::string>& options);

// The app's --presets flag as given, "" when absent.
std::string presets_flag(const CLI::App& app);
// The preset folder --presets names, or the default one.
std::filesystem::path preset_dir(const CLI::App& app);

// A one-line progress bar on stderr, only when stderr is a terminal:
// "  WHAT [####....] DONE/TOTAL UNIT", wiped when DONE reaches TOTAL.
void show_progress_bar(const std::string& what, int done, int total, const std::string& unit = "");
// "placing on N wafers", the bar of run and place.
void show_placement_progress(int wafers, int wafer);

}  // namespace wafersim::sim
