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
  std::string folder;  // "": the regression/ folder beside the presets
  bool accept = false, verbose = false;
  double tolerance = 0.0;
};

int run(const RegressArgs& args, const std::filesystem::path& presets,
        const std::string& presets_given) {
  RegressArgs a = args;
  // Found as the presets are (--presets, $WAFERSIM_PRESETS, the source tree),
  // so that regress works from any directory.
  if (a.folder.empty()) a.folder = (presets / "regression").string();
  if (!std::filesystem::is_directory(a.folder))
    throw CommandError(kExitBadInput,
                       fmt::format("{}: no such folder of regression scenarios{}", a.folder,
                                   args.folder.empty()
                                       ? " (the default, beside the presets; give the folder, or "
                                         "--presets DIR / $WAFERSIM_PRESETS)"
                                       : ""));
  RegressionOptions opt;
  opt.binary = std::filesystem::read_symlink("/proc/self/exe");
  opt.accept = a.accept;
  opt.presets = presets_given;
  opt.relative_tolerance = a.tolerance;
  const auto cases = run_regression(a.folder, opt, [](const std::string& name) {
    if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\r  running %-40s", name.c_str());
  });
  if (::isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%60s\r", "");
  int failed = 0;
  for (const auto& c : cases) {
    fmt::print("{:<40} {}\n", c.scenario, c.recorded ? "recorded" : c.passed ? "ok" : "CHANGED");
    if (c.recorded) report_written(c.expected_file.string(), "expected result");
    for (const auto& d : a.verbose ? c.diffs : c.summary) fmt::print("    {}\n", d);
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
  regress->add_option(
      "folder", a->folder,
      "Folder of scenarios with expected/ results (default: regression/ beside the presets, "
      "i.e. scenarios/regression of the source tree)");
  regress->add_flag("--accept", a->accept, "Record the new results as the expected ones");
  regress
      ->add_option("--tolerance", a->tolerance,
                   "Relative tolerance for non-integer figures (default 0: exact)")
      ->check(CLI::NonNegativeNumber);
  regress->add_flag("-v,--verbose", a->verbose,
                    "List every value that differs, not just a summary per case");
  const CLI::App* root = &app;
  return {regress, [a, root] { return run(*a, preset_dir(*root), presets_flag(*root)); }};
}

}  // namespace wafersim::sim
