// wafersim compare: two results files side by side, A the baseline and B the
// new one (exit 4 with --fail-on-regression when a figure got worse).
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "analysis/compare.hpp"
#include "analysis/hdf5_output.hpp"
#include "sim/cli/commands.hpp"

namespace wafersim::sim {

namespace {

struct CompareArgs {
  std::string a, b;
  bool json = false;
  bool allow_different_setup = false;
  double fail_percent = -1.0;  // below 0: never fail
};

int run(const CompareArgs& a) {
  analysis::check_results_file(a.a);
  analysis::check_results_file(a.b);
  std::vector<std::string> warnings;
  const analysis::RunResult baseline = analysis::read_hdf5(a.a, &warnings);
  const analysis::RunResult candidate = analysis::read_hdf5(a.b, &warnings);
  for (const std::string& w : warnings) std::cerr << "warning: " << w << "\n";
  const analysis::Comparison c = analysis::compare(baseline, candidate, a.a, a.b);
  if (!c.setup_differences.empty()) {
    std::string what;
    for (const std::string& d : c.setup_differences) what += "\n  " + d;
    if (!a.allow_different_setup)
      throw CommandError(kExitBadInput,
                         fmt::format("{} and {} are results of different setups:{}\n  their "
                                     "figures measure different things; --allow-different-setup "
                                     "compares them anyway",
                                     a.a, a.b, what));
    std::cerr << "wafersim: warning: comparing results of different setups:" << what << "\n";
  }
  if (a.json)
    std::cout << analysis::comparison_json(c, a.fail_percent).dump(2) << "\n";
  else
    analysis::write_comparison(std::cout, c, a.fail_percent);
  return a.fail_percent >= 0 && !c.regressions(a.fail_percent).empty() ? kExitRegression
                                                                       : kExitSuccess;
}

}  // namespace

RegisteredCommand add_compare_command(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* compare =
      app.add_subcommand("compare", "Compare two results files (A = baseline, B = new)");
  compare->add_option("a", a->a, "Baseline results (.h5)")->required();
  compare->add_option("b", a->b, "New results (.h5)")->required();
  compare->add_flag("--json", a->json, "Print one JSON object");
  compare->add_flag("--allow-different-setup", a->allow_different_setup,
                    "Compare results of a different hardware, model or precision (a warning "
                    "instead of an error)");
  compare
      ->add_option("--fail-on-regression", a->fail_percent,
                   "Exit with code 4 when any figure got worse by more than PCT percent")
      ->check(CLI::NonNegativeNumber);
  return {compare, [a] { return run(*a); }};
}

}  // namespace wafersim::sim
