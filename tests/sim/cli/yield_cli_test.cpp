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
  const auto o = wafersim::test_support::run_wafersim("yield " + scenario.string() +
                                                      " --rates 0.002,0.5 --wafers 12 --runs 3 --json");
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

}  // namespace
