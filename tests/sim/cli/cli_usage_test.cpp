// The command line as a new user meets it: the same scenario overrides on
// every command, did-you-mean for a mistyped command or option, errors in a
// command-line override named as such, a line for every file written,
// regress from any folder, compare refusing what it cannot compare, and the
// progress lines of a run whose stderr is a log.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/cli/progress.hpp"
#include "support/wafersim_cli.hpp"

namespace {

namespace fs = std::filesystem;
using Outcome = wafersim::test_support::CliOutcome;

Outcome wafersim(const std::string& args) {
  return wafersim::test_support::run_wafersim(args);
}

std::string src(const std::string& rel) {
  return std::string(WAFERSIM_SOURCE_DIR) + "/" + rel;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CliUsage, MistypedCommandSuggestsTheNearestAndListsAll) {
  const Outcome o = wafersim("rnu " + src("scenarios/quickstart.yaml"));
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(has(o.err, "unknown command 'rnu'")) << o.err;
  EXPECT_TRUE(has(o.err, "did you mean 'run'?")) << o.err;
  EXPECT_TRUE(has(o.err, "commands: run, place, validate")) << o.err;
  // Nothing near: no suggestion, still the list.
  const Outcome far = wafersim("frobnicate");
  EXPECT_EQ(far.code, 2);
  EXPECT_FALSE(has(far.err, "did you mean")) << far.err;
  EXPECT_TRUE(has(far.err, "commands: ")) << far.err;
}

TEST(CliUsage, MistypedOptionSuggestsTheNearest) {
  const Outcome o = wafersim("run " + src("scenarios/quickstart.yaml") + " --wafer 2");
  EXPECT_EQ(o.code, 2);
  EXPECT_TRUE(has(o.err, "run: unknown option --wafer")) << o.err;
  EXPECT_TRUE(has(o.err, "did you mean '--wafers'?")) << o.err;
  const Outcome p = wafersim("place " + src("scenarios/quickstart.yaml") + " --stratgy=anneal");
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(has(p.err, "did you mean '--strategy'?")) << p.err;
  // A missing scenario is still CLI11's own message.
  const Outcome r = wafersim("run");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "scenario")) << r.err;
}

TEST(CliUsage, EveryScenarioCommandTakesTheSameOverrides) {
  const std::string q = src("scenarios/quickstart.yaml");
  const std::string common =
      " --precision fp32 --users 2 --strategy serpentine --set workload.seed=1";
  const Outcome run = wafersim("run " + q + " --timing-only --json" + common);
  ASSERT_EQ(run.code, 0) << run.err;
  const auto r = nlohmann::json::parse(run.out);
  EXPECT_EQ(r["precision"], "fp32");
  EXPECT_EQ(r["users"], 2);
  EXPECT_EQ(r["placement_strategy"], "serpentine");
  const Outcome place = wafersim("place " + q + " --json" + common);
  ASSERT_EQ(place.code, 0) << place.err;
  EXPECT_EQ(nlohmann::json::parse(place.out)["strategy"], "serpentine");
  const Outcome validate = wafersim("validate " + q + common);
  ASSERT_EQ(validate.code, 0) << validate.err;
  EXPECT_TRUE(has(validate.out, "fp32")) << validate.out;
  EXPECT_TRUE(has(validate.out, "serpentine")) << validate.out;
  EXPECT_TRUE(has(validate.out, "for 2 users")) << validate.out;
  for (const char* command : {"serve", "capacity", "yield"}) {
    const Outcome help = wafersim(std::string(command) + " --help");
    EXPECT_EQ(help.code, 0) << command;
    for (const char* option : {"--hardware", "--model", "--precision", "--users", "--strategy",
                               "--reduction", "--layer-groups", "--placement", "--set"})
      EXPECT_TRUE(has(help.out, option)) << command << " lacks " << option;
  }
}

TEST(CliUsage, AnOverrideErrorNamesTheOptionNotTheFile) {
  const std::string q = src("scenarios/quickstart.yaml");
  const Outcome set = wafersim("run " + q + " --set workload.users=abc");
  EXPECT_EQ(set.code, 1);
  EXPECT_TRUE(has(set.err, "command line --set workload.users=abc")) << set.err;
  EXPECT_TRUE(has(set.err, "workload.users")) << set.err;
  EXPECT_FALSE(has(set.err, "quickstart.yaml:1:1")) << set.err;
  const Outcome wafers = wafersim("validate " + q + " --wafers lots");
  EXPECT_EQ(wafers.code, 1);
  EXPECT_TRUE(has(wafers.err, "command line --wafers lots")) << wafers.err;
  const Outcome strategy = wafersim("place " + q + " --strategy nope");
  EXPECT_EQ(strategy.code, 1);
  EXPECT_TRUE(has(strategy.err, "command line --strategy nope")) << strategy.err;
  EXPECT_TRUE(has(strategy.err, "serpentine")) << strategy.err;  // the valid ones
  const Outcome reduction = wafersim("validate " + q + " --reduction spiral");
  EXPECT_EQ(reduction.code, 1);
  EXPECT_TRUE(has(reduction.err, "command line --reduction spiral")) << reduction.err;
  EXPECT_TRUE(has(reduction.err, "k-tree")) << reduction.err;  // the valid ones
}

// --reduction is placement.reduction: the same run as the key, and auto
// (whole-region) chooses as the key does.
TEST(CliUsage, ReductionOptionSetsThePlacementKey) {
  const std::string q = src("scenarios/quickstart.yaml");
  const Outcome option = wafersim("run " + q + " --timing-only --json --reduction tree");
  const Outcome key = wafersim("run " + q + " --timing-only --json --set placement.reduction=tree");
  const Outcome chain = wafersim("run " + q + " --timing-only --json --reduction chain");
  ASSERT_EQ(option.code, 0) << option.err;
  ASSERT_EQ(key.code, 0) << key.err;
  ASSERT_EQ(chain.code, 0) << chain.err;
  EXPECT_EQ(option.out, key.out);
  EXPECT_NE(option.out, chain.out);  // the option took effect
  const std::string tiny = src("scenarios/regression/tiny-small-whole-region.yaml");
  const Outcome validate = wafersim("validate " + tiny + " --reduction auto");
  ASSERT_EQ(validate.code, 0) << validate.err;
  EXPECT_TRUE(has(validate.out, "reduction: auto chose")) << validate.out;
}

TEST(CliUsage, EveryWrittenFileIsReported) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("written");
  const std::string q = src("scenarios/quickstart.yaml");
  const std::string svg = (d / "p.svg").string(), pl = (d / "p.yaml").string();
  const Outcome place =
      wafersim("place " + q + " --json --svg " + svg + " --write-placement " + pl);
  ASSERT_EQ(place.code, 0) << place.err;
  EXPECT_TRUE(has(place.err, "wrote " + svg)) << place.err;
  EXPECT_TRUE(has(place.err, "wrote " + pl)) << place.err;
  EXPECT_TRUE(nlohmann::json::accept(place.out)) << place.out;  // stdout stays one JSON object
  const std::string h5 = (d / "r.h5").string();
  const Outcome run = wafersim("run " + q + " --timing-only --out " + h5);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(has(run.err, "wrote " + h5 + " (results)")) << run.err;
  EXPECT_TRUE(has(run.err, "wrote " + h5 + ".scenario.yaml")) << run.err;
  EXPECT_TRUE(fs::exists(h5));
  fs::remove_all(d);
}

TEST(CliUsage, RegressRunsFromAnyFolder) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("regress_cwd");
  const std::string cmd = "cd " + d.string() + " && " + std::string(WAFERSIM_BINARY) +
                          " regress > out.txt 2> err.txt";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream out(d / "out.txt");
  const std::string text((std::istreambuf_iterator<char>(out)), {});
  EXPECT_TRUE(has(text, "0 failed")) << text;
  EXPECT_TRUE(has(text, "tiny-small-chain.yaml")) << text;
  fs::remove_all(d);
}

TEST(CliUsage, RegressSummarisesAChangedCaseWithBetterOrWorse) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("regress_summary");
  fs::create_directories(d / "expected");
  std::ifstream in(src("scenarios/regression/tiny-small-chain.yaml"));
  std::string yaml((std::istreambuf_iterator<char>(in)), {});
  yaml.replace(yaml.find("reduction: chain"), 16, "reduction: tree");
  std::ofstream(d / "tiny-small-chain.yaml") << yaml;
  fs::copy_file(src("scenarios/regression/expected/tiny-small-chain.json"),
                d / "expected/tiny-small-chain.json");
  const Outcome o = wafersim("regress " + d.string());
  EXPECT_EQ(o.code, 4) << o.out << o.err;
  EXPECT_TRUE(has(o.out, "cycles_per_token: ")) << o.out;
  EXPECT_TRUE(has(o.out, "better") || has(o.out, "worse")) << o.out;
  EXPECT_TRUE(has(o.out, "lower is better")) << o.out;
  EXPECT_TRUE(has(o.out, "--verbose lists them")) << o.out;
  const auto lines = std::count(o.out.begin(), o.out.end(), '\n');
  EXPECT_LT(lines, 20) << o.out;
  const Outcome all = wafersim("regress " + d.string() + " --verbose");
  EXPECT_GT(std::count(all.out.begin(), all.out.end(), '\n'), lines) << all.out;
  // A different model in the new result: said, figures not compared.
  std::string other = yaml;
  other.replace(other.find("precision: bf16"), 15, "precision: fp32");
  std::ofstream(d / "tiny-small-chain.yaml") << other;
  const Outcome setup = wafersim("regress " + d.string());
  EXPECT_EQ(setup.code, 4);
  EXPECT_TRUE(has(setup.out, "a different setup")) << setup.out;
  fs::remove_all(d);
}

TEST(CliUsage, CompareRefusesADifferentSetupAndAFileThatIsNotHdf5) {
  const fs::path d = wafersim::test_support::cli_scratch_dir("compare_setup");
  const std::string q = src("scenarios/quickstart.yaml");
  const std::string a = (d / "a.h5").string(), b = (d / "b.h5").string();
  ASSERT_EQ(wafersim("run " + q + " --timing-only --out " + a).code, 0);
  ASSERT_EQ(wafersim("run " + q + " --timing-only --precision fp32 --out " + b).code, 0);
  const Outcome refused = wafersim("compare " + a + " " + b);
  EXPECT_EQ(refused.code, 1);
  EXPECT_TRUE(has(refused.err, "different setups")) << refused.err;
  EXPECT_TRUE(has(refused.err, "precision: A bf16, B fp32")) << refused.err;
  const Outcome allowed = wafersim("compare " + a + " " + b + " --allow-different-setup");
  EXPECT_EQ(allowed.code, 0) << allowed.err;
  EXPECT_TRUE(has(allowed.err, "warning")) << allowed.err;
  EXPECT_TRUE(has(allowed.out, "WARNING: different setups")) << allowed.out;
  const Outcome json_out = wafersim("run " + q + " --timing-only --json");
  const std::string j = (d / "r.json").string();
  std::ofstream(j) << json_out.out;
  const Outcome not_h5 = wafersim("compare " + a + " " + j);
  EXPECT_EQ(not_h5.code, 1);
  EXPECT_TRUE(has(not_h5.err, "not a wafersim results file (HDF5 expected; it looks like JSON"))
      << not_h5.err;
  EXPECT_FALSE(has(not_h5.err, "H5Fopen")) << not_h5.err;
  fs::remove_all(d);
}

// ---- progress ----------------------------------------------------------------

using wafersim::sim::ProgressReporter;
using std::chrono::seconds;

TEST(Progress, ALogGetsThrottledLinesWithElapsedAndEta) {
  ProgressReporter p("simulating tokens", "tokens", /*terminal=*/false);
  const auto t0 = ProgressReporter::Clock::time_point{};
  EXPECT_FALSE(p.update(0, 100, t0));
  EXPECT_FALSE(p.update(20, 100, t0 + seconds(1)));  // quiet during the first seconds
  const auto first = p.update(21, 100, t0 + seconds(3));
  ASSERT_TRUE(first);
  EXPECT_EQ(*first,
            "wafersim: simulating tokens: 21/100 tokens (21%), 3 s elapsed, about 11 s left");
  EXPECT_FALSE(p.update(22, 100, t0 + seconds(5)));  // same 10% step, within 10 s
  EXPECT_TRUE(p.update(23, 100, t0 + seconds(14)));  // 10 s since the last line
  EXPECT_TRUE(p.update(30, 100, t0 + seconds(16)));  // a new 10% step
  EXPECT_FALSE(p.update(31, 100, t0 + seconds(17)));
  const auto last = p.update(100, 100, t0 + seconds(200));
  ASSERT_TRUE(last);
  EXPECT_EQ(*last, "wafersim: simulating tokens: 100/100 tokens (100%), 3 min 20 s elapsed");
}

TEST(Progress, AShortTaskLeavesNoLineAndATerminalGetsABarWithEta) {
  ProgressReporter quick("placing", "", false);
  const auto t0 = ProgressReporter::Clock::time_point{};
  for (int i = 0; i <= 10; ++i)
    EXPECT_FALSE(quick.update(i, 10, t0 + std::chrono::milliseconds(i)));
  // A long task reporting only its start and end: its end is a line.
  ProgressReporter phase("placing on 1 wafer", "", false);
  EXPECT_FALSE(phase.update(0, 1, t0));
  const auto end = phase.update(1, 1, t0 + seconds(40));
  ASSERT_TRUE(end);
  EXPECT_EQ(*end, "wafersim: placing on 1 wafer: 1/1 (100%), 40 s elapsed");
  ProgressReporter bar("placing", "", true);
  EXPECT_TRUE(bar.update(0, 4, t0));
  const auto half = bar.update(2, 4, t0 + seconds(10));
  ASSERT_TRUE(half);
  EXPECT_TRUE(has(*half, "[###############...............] 2/4, 10 s, about 10 s left")) << *half;
}

// The engine reports after every stage pass: a terminal's bar is redrawn
// only when its text changes (a count, or the elapsed seconds).
TEST(Progress, ATerminalBarIsRedrawnOnlyWhenItsTextChanges) {
  ProgressReporter bar("simulating tokens", "tokens", true);
  const auto t0 = ProgressReporter::Clock::time_point{};
  EXPECT_TRUE(bar.update(0, 8, t0));
  EXPECT_FALSE(bar.update(0, 8, t0 + std::chrono::milliseconds(300)));
  EXPECT_FALSE(bar.update(0, 8, t0 + std::chrono::milliseconds(400)));
  const auto later = bar.update(0, 8, t0 + std::chrono::milliseconds(1600));
  ASSERT_TRUE(later);
  EXPECT_TRUE(has(*later, "0/8 tokens, 2 s")) << *later;
  EXPECT_TRUE(bar.update(1, 8, t0 + std::chrono::milliseconds(1700)));
  EXPECT_FALSE(bar.update(1, 8, t0 + std::chrono::milliseconds(1750)));  // about 12 s left still
  EXPECT_TRUE(bar.update(8, 8, t0 + std::chrono::milliseconds(1900)));   // the end always
}

// run's report: tokens shown, the fraction and the time left from the
// finer count of stage passes (1 of 8 tokens back, 41 of 80 passes done).
TEST(Progress, ACoarseCountCanBeShownWhileAFinerOneMeasures) {
  ProgressReporter p("simulating tokens", "", false);
  const auto t0 = ProgressReporter::Clock::time_point{};
  EXPECT_FALSE(p.update(0, 80, t0, "0/8 tokens"));
  const auto line = p.update(41, 80, t0 + seconds(41), "1/8 tokens");
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "wafersim: simulating tokens: 1/8 tokens (51%), 41 s elapsed, about 39 s left");
}

TEST(Progress, DurationsReadAsAPersonWritesThem) {
  EXPECT_EQ(wafersim::sim::format_wall_time(8.4), "8 s");
  EXPECT_EQ(wafersim::sim::format_wall_time(185), "3 min 05 s");
  EXPECT_EQ(wafersim::sim::format_wall_time(3720), "1 h 02 min");
}

}  // namespace
