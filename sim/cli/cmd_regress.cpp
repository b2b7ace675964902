// wafersim regress: rerun the golden regression scenarios and compare their
// results with the recorded ones (exit 4 when any changed).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "sim/cli/commands.hpp"
#include "sim/studies/regression.hpp"

namespace wafersim::sim {

namespace {

struct RegressArgs {
  std::string folder = "scenarios/regression";
  bool accept = false;
  double tolerance = 0.0;
};

int run(const RegressArgs& a) {
  RegressionOptions opt;
  opt.binary = std::filesystem::read_symlink("/proc/self/exe");
  opt.accept = a.accept;
  opt.relative_tolerance = a.tolerance;
  const auto cases = run_regression(a.folder, opt, [](const std::string& name) {
    if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\r  running %-40s", name.c_str());
  });
  if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%60s\r", "");
  int failed = 0;
  for (const auto& c : cases) {
    fmt::print("{:<40} {}\n", c.scenario, c.recorded ? "recorded" : c.passed ? "ok" : "CHANGED");
    for (const auto& d : c.diffs) fmt::print("    {}\n", d);
    failed += c.passed ? 0 : 1;
  }
  fmt::print("{} passed, {} failed\n", static_cast<int>(cases.size()) - failed, failed);
  if (failed > 0)
    fmt::print(
        "To accept the new results as the baseline, on purpose: wafersim regress {} --accept "
        "(and say why in the commit)\n",
        a.folder);
  return failed > 0 ? kExitRegression : kExitSuccess;
}

}  // namespace

RegisteredCommand add_regress_command(CLI::App& app) {
  auto a = std::make_shared<RegressArgs>();
  CLI::App* regress = app.add_subcommand(
      "regress", "Rerun the golden regression scenarios and compare with their recorded results");
  regress->add_option("folder", a->folder,
                      "Folder of scenarios with expected/ results (default scenarios/regression)");
  regress->add_flag("--accept", a->accept, "Record the new results as the expected ones");
  regress
      ->add_option("--tolerance", a->tolerance,
                   "Relative tolerance for non-integer figures (default 0: exact)")
      ->check(CLI::NonNegativeNumber);
  return {regress, [a] { return run(*a); }};
}

}  // namespace wafersim::sim
