// wafersim yield --runs: the scenario simulated on repaired wafers, beside the
// same scenario with no drawn defect: what the spares' repairs cost a token.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/wafersim_cli.hpp"

namespace {

using Json = nlohmann::json;

TEST(YieldCli, RepairedWafersRunAndTheirRepairsNeverSpeedATokenUp) {
  const auto d = wafersim::test_support::cli_scratch_dir("yield_runs");
  const auto scenario = d / "spares.yaml";
  // The quickstart's 32x32 mesh with one spare column per 8 and a costly
  // detour, so a repaired link shows in a token's time.
  std::ofstream(scenario) << R"(name: spares
hardware:
  preset: small
  redundancy: {columns_per_group: 8, spare_columns: 1, detour_latency: 20 cycles}
model: tiny-llama
precision: bf16
placement: {strategy: layer-rectangles, reduction: tree}
workload: {prompt_tokens: 4, generate_tokens: 4, seed: 1}
outputs: {functional: false}
)";
  const auto o = wafersim::test_support::run_wafersim(
      "yield " + scenario.string() + " --rates 0.002,0.5 --wafers 12 --runs 3 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const Json j = Json::parse(o.out);
  const double base = j.at("defect_free_tokens_per_s_per_user").get<double>();
  ASSERT_GT(base, 0.0);
  const Json& low = j.at("points")[0];
  ASSERT_GE(low.at("repaired").get<int>(), 3) << o.out;
  ASSERT_EQ(low.at("runs").size(), 3u);
  bool some_repair = false;
  std::set<std::uint64_t> seeds;
  for (const Json& r : low.at("runs")) {
    ASSERT_EQ(r.at("exit_code"), 0) << r.dump();  // a repaired wafer always runs
    seeds.insert(r.at("seed").get<std::uint64_t>());
    EXPECT_GE(r.at("dead_cores").get<int>(), 0);
    EXPECT_LE(r.at("decode_tokens_per_s_per_user").get<double>(), base) << r.dump();
    // A repaired link slows a token only where the token crosses it.
    if (r.at("decode_tokens_per_s_per_user").get<double>() < base) {
      some_repair = true;
      EXPECT_GT(r.at("repaired_links").get<int>(), 0) << r.dump();
    }
  }
  EXPECT_EQ(seeds.size(), 3u);
  EXPECT_TRUE(some_repair) << o.out;
  const Json& t = low.at("tokens_per_s_per_user");
  EXPECT_LE(t.at("min").get<double>(), t.at("median").get<double>());
  EXPECT_LE(t.at("median").get<double>(), t.at("max").get<double>());
  // Half the cores dead: no wafer repairs, nothing to run.
  const Json& high = j.at("points")[1];
  EXPECT_EQ(high.at("repaired"), 0);
  EXPECT_TRUE(high.at("runs").empty());
  EXPECT_TRUE(high.at("tokens_per_s_per_user").at("median").is_null());
  std::filesystem::remove_all(d);
}

// The what-if without spares: no wafer with a dead core repairs, so --runs
// runs the first wafers drawn, each placed around its own dead cores.
TEST(YieldCli, WithoutSparesRunsTheFirstWafersDrawnPlacedAroundTheirDeadCores) {
  const auto d = wafersim::test_support::cli_scratch_dir("yield_no_spares");
  const auto scenario = d / "no-spares.yaml";
  std::ofstream(scenario) << R"(name: no-spares
hardware: small
model: tiny-llama
precision: bf16
placement: {strategy: layer-rectangles, reduction: tree}
workload: {prompt_tokens: 4, generate_tokens: 4, seed: 1}
outputs: {functional: false}
)";
  const auto o = wafersim::test_support::run_wafersim("yield " + scenario.string() +
                                                      " --rates 0.003 --wafers 10 --runs 3 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const Json j = Json::parse(o.out);
  EXPECT_EQ(j.at("runs_on"), "drawn");
  const Json& p = j.at("points")[0];
  ASSERT_EQ(p.at("runs").size(), 3u);
  std::set<std::uint64_t> seeds;
  int placed = 0;
  for (const Json& r : p.at("runs")) {
    seeds.insert(r.at("seed").get<std::uint64_t>());
    if (r.at("exit_code") == 0) {
      ++placed;
      EXPECT_GT(r.at("dead_cores").get<int>(), 0) << r.dump();  // ~3 on 1,024 cores
    } else {
      EXPECT_FALSE(r.at("error").get<std::string>().empty()) << r.dump();
    }
  }
  EXPECT_EQ(seeds, (std::set<std::uint64_t>{0, 1, 2}));
  EXPECT_GT(placed, 0) << o.out;  // a tiny model finds clear rows around ~3 dead cores
  std::filesystem::remove_all(d);
}

TEST(YieldCli, DensitiesPerMm2BesideRates) {
  const auto d = wafersim::test_support::cli_scratch_dir("yield_densities");
  const auto scenario = d / "wse3.yaml";
  std::ofstream(scenario) << R"(name: wse3-density
hardware: wse3
model: tiny-llama
workload: {prompt_tokens: 4, generate_tokens: 4}
outputs: {functional: false}
)";
  // wse3's core.area is 0.05 mm^2: 0.001 per mm^2 is the rate 5e-5.
  const auto o = wafersim::test_support::run_wafersim(
      "yield " + scenario.string() + " --rates 5e-5 --densities 0.001 --wafers 20 --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const Json j = Json::parse(o.out);
  EXPECT_EQ(j.at("core_area_mm2").get<double>(), 0.05);
  const Json& by_rate = j.at("points")[0];
  const Json& by_density = j.at("points")[1];
  EXPECT_TRUE(by_rate.at("density_per_mm2").is_null());
  EXPECT_EQ(by_density.at("density_per_mm2").get<double>(), 0.001);
  EXPECT_DOUBLE_EQ(by_density.at("rate").get<double>(), 5e-5);
  EXPECT_EQ(by_density.at("repaired"), by_rate.at("repaired"));
  EXPECT_EQ(by_density.at("mean_dead_cores"), by_rate.at("mean_dead_cores"));
  // The table has a density column.
  const auto t = wafersim::test_support::run_wafersim("yield " + scenario.string() +
                                                      " --densities 0.001 --wafers 5");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("defects/mm2"), std::string::npos) << t.out;
  // Neither option, or a density on hardware without a core area: a clear error.
  const auto none =
      wafersim::test_support::run_wafersim("yield " + scenario.string() + " --wafers 5");
  EXPECT_NE(none.code, 0);
  EXPECT_NE(none.err.find("--densities"), std::string::npos) << none.err;
  const auto no_area = wafersim::test_support::run_wafersim(
      "yield " + scenario.string() + " --densities 0.001 --wafers 5 --set hardware=small");
  EXPECT_NE(no_area.code, 0);
  EXPECT_NE(no_area.err.find("core area"), std::string::npos) << no_area.err;
  std::filesystem::remove_all(d);
}

}  // namespace
