// The subcommands of wafersim, one file each (cmd_*.cpp). Each registers its
// options on the app and returns the subcommand together with the function
// main calls when the user chose it. Errors propagate as exceptions to main,
// the one place that turns them into messages and exit codes.
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/config/scenario.hpp"
#include "sim/engine/engine.hpp"

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

// wafersim run SCENARIO [--json] [--out FILE] [--report FILE.html]
//              [--trace FILE] [--functional|--timing-only]
//              [OVERRIDES] [--threads N] [--keep-link-records]
//              [--layer-replay auto|always|off]: simulate and report.
// OVERRIDES, on every command that takes a scenario (add_scenario_override_options):
//   --hardware --model --precision --wafers --users --layer-groups --strategy
//   --placement --set KEY=VALUE.
RegisteredCommand add_run_command(CLI::App& app);

// wafersim place SCENARIO [--json] [--svg FILE] [--block-rows N] [OVERRIDES]
//                [--write-placement FILE] [--layer-replay auto|always|off]: place the
//                model and evaluate it, with one decode step alone on the fabric.
RegisteredCommand add_place_command(CLI::App& app);

// wafersim validate SCENARIO [OVERRIDES]: check a scenario without running it.
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

// wafersim yield SCENARIO --rates R1,R2,... [--wafers N] [-j N] [--json]
//                [OVERRIDES but --wafers, which counts the wafers drawn]: the
// fraction of drawn wafers whose defects the spares repair, per rate.
RegisteredCommand add_yield_command(CLI::App& app);

// wafersim regress [FOLDER] [--accept] [--tolerance T]: rerun the golden
// regression scenarios and compare with their recorded results (exit 4 on a change).
RegisteredCommand add_regress_command(CLI::App& app);

// wafersim compare A B [--json] [--fail-on-regression PCT]: two results files
// side by side (exit 4 when a figure got worse by more than PCT percent).
RegisteredCommand add_compare_command(CLI::App& app);

// wafersim serve SCENARIO [--json] [--out FILE.h5] [--csv FILE] [--report FILE.html]
//                [OVERRIDES] [-j N]
//                [--cache DIR | --no-cache]: a serving study.
RegisteredCommand add_serve_command(CLI::App& app);
// wafersim capacity SCENARIO [--target-rate R] [...as serve]: rate per replica within the SLO.
RegisteredCommand add_capacity_command(CLI::App& app);

// The scenario overrides of every command that takes a scenario, as given on
// the command line: --hardware --model --precision --wafers --users
// --layer-groups --strategy --placement --set KEY=VALUE.
struct ScenarioOverrideOptions {
  ScenarioOverrides named;       // all but --strategy, --reduction and --set
  std::string strategy;          // --strategy NAME: placement.strategy
  std::string reduction;         // --reduction NAME|auto: placement.reduction
  std::vector<std::string> set;  // --set KEY=VALUE, in order
  // The overrides to load a scenario with (--strategy and --reduction become
  // sets of placement.strategy and placement.reduction before the --set
  // ones); CommandError (usage) for a --set without '='.
  ScenarioOverrides resolve() const;
  // All of them as KEY=VALUE pairs (what --set would be given for each), for
  // child processes that take only --set (a serving study's calibration runs).
  std::vector<std::pair<std::string, std::string>> as_sets() const;
};

// Registers the override options on a subcommand, all but those named in
// `skip` (e.g. {"--model", "--users"} for a command that gives them another
// meaning, as sweep's axes do). Every command that takes a scenario uses it.
void add_scenario_override_options(CLI::App* command, ScenarioOverrideOptions& options,
                                   std::span<const std::string_view> skip = {});

// --layer-replay auto|always|off (run, place): layers that repeat the one
// just simulated are replayed instead of simulated (exact). The word is
// kept in `mode`; layer_replay_mode reads it.
void add_layer_replay_option(CLI::App* command, std::string& mode);
LayerReplayMode layer_replay_mode(const std::string& mode);

// load_scenario with the overrides. An error in a value given on the command
// line names the option ("command line --wafers 2x: ...") instead of a place
// in the scenario file.
Scenario load_scenario_with(const std::string& file, const std::filesystem::path& presets,
                            const ScenarioOverrideOptions& options);

// Says on stderr that a command wrote a file: "wrote PATH" or "wrote PATH (WHAT)";
// stderr, so that stdout stays one JSON object under --json.
void report_written(const std::string& path, const std::string& what = "");

// The CLI parse error as a user should read it: an unknown command or option
// with the nearest valid one and the list of commands; "" when the error is
// none of these (CLI11's own message is then shown).
std::string explain_parse_error(const CLI::App& app, int argc, const char* const* argv);

// --set KEY=VALUE options as (key, value) pairs; CommandError (usage) for one without '='.
std::vector<std::pair<std::string, std::string>> parse_set_options(
    const std::vector<std::string>& options);

// The app's --presets flag as given, "" when absent.
std::string presets_flag(const CLI::App& app);
// The preset folder --presets names, or the default one.
std::filesystem::path preset_dir(const CLI::App& app);

// Progress on stderr. On a terminal, a one-line bar
// "  WHAT [####....] DONE/TOTAL UNIT, ELAPSED, ETA", wiped when DONE reaches
// TOTAL. Otherwise (a log file, a pipe) plain lines "wafersim: WHAT: DONE/TOTAL
// UNIT (PCT%), ELAPSED elapsed, ETA", at most one per 10 s of wall time or per
// 10% step, none in a task's first 2 s, and one at the end of a task that
// printed lines or took 10 s. The clock starts at the first call for WHAT
// (or when DONE goes back). `shown`: ProgressReporter::update's.
void show_progress_bar(const std::string& what, long long done, long long total,
                       const std::string& unit = "", std::string_view shown = {});
// "placing on N wafers", the bar of run and place.
void show_placement_progress(int wafers, int wafer);
// "searching the placement (anneal)", percent done, the bar of a long search.
void show_search_progress(int percent, int total);

}  // namespace wafersim::sim
