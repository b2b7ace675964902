// wafersim: the command-line front end. Every command lives in its own file
// (cmd_*.cpp, registered through commands.hpp); library code throws typed
// errors, and only this file turns them into messages and exit codes:
//   0 success, 1 bad input (scenario, fit, output), 2 usage, 3 internal error,
//   4 regression (compare, regress).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analysis/hdf5_output.hpp"
#include "fabric/sram.hpp"
#include "models/safetensors.hpp"
#include "models/tokenizer.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/program/program.hpp"
#include "sim/studies/sweep_journal.hpp"

int main(int argc, char** argv) {
  using namespace wafersim;
  CLI::App app{"wafersim: a wafer-scale hardware simulator for LLM decoding"};
  app.require_subcommand(1);
  std::string presets;  // the commands read it from the app (sim::preset_dir)
  app.add_option(
      "--presets", presets,
      "Folder of hardware/ and models/ presets (default: $WAFERSIM_PRESETS or the source tree)");
  // In the order of the help text.
  const std::vector<sim::RegisteredCommand> commands = {
      sim::add_run_command(app),      sim::add_place_command(app), sim::add_validate_command(app),
      sim::add_list_command(app),     sim::add_noc_command(app),   sim::add_bench_command(app),
      sim::add_sweep_command(app),    sim::add_merge_command(app), sim::add_serve_command(app),
      sim::add_capacity_command(app), sim::add_yield_command(app), sim::add_regress_command(app),
      sim::add_compare_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      // CLI11 names neither the nearest command or option nor the commands.
      const std::string explained = sim::explain_parse_error(app, argc, argv);
      if (!explained.empty()) {
        std::cerr << "wafersim: error: " << explained << "\n";
        return sim::kExitUsage;
      }
    }
    return app.exit(e) == 0 ? sim::kExitSuccess : sim::kExitUsage;
  }
  const auto chosen =
      std::find_if(commands.begin(), commands.end(),
                   [](const sim::RegisteredCommand& c) { return c.command->parsed(); });
  if (chosen == commands.end()) return sim::kExitUsage;
  const std::string file = chosen->scenario ? chosen->scenario() : "";
  try {
    return chosen->run();
  } catch (const sim::CommandError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return e.code();
  } catch (const sim::ScenarioError& e) {
    std::cerr << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const fabric::FitError& e) {
    std::cerr << "wafersim: error: " << file << ": the model does not fit: " << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const sim::UnsupportedModelError& e) {
    std::cerr << "wafersim: error: " << file << ": " << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const analysis::ResultReadError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const models::WeightsError& e) {
    std::cerr << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const models::TokenizerError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const sim::SweepJournalError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const analysis::OutputError& e) {
    std::cerr << "wafersim: error: " << e.what() << "\n";
    return sim::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "wafersim: internal error: " << e.what() << "\n";
    return sim::kExitInternal;
  }
}
