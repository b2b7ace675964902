// Sweep grids and shards (sim/studies/sweep.hpp); the runs themselves are checked
// through the command line in cli_test.cpp.
#include "sim/studies/sweep.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>

namespace wafersim::sim {
namespace {

SweepAxes two_models_three_user_counts() {
  SweepAxes a;
  a.models = {"tiny-llama", "tiny-qwen3"};
  a.users = {1, 2, 4};
  return a;
}

TEST(SweepPoints, TheGridIsTheProductOfItsAxesModelsOutermost) {
  const auto p = sweep_points(two_models_three_user_counts());
  ASSERT_EQ(p.size(), 6u);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i].index, static_cast<int>(i));
  EXPECT_EQ(p[0].model, "tiny-llama");
  EXPECT_EQ(p[0].users, 1);
  EXPECT_EQ(p[2].users, 4);
  EXPECT_EQ(p[3].model, "tiny-qwen3");
  EXPECT_EQ(p[3].users, 1);
  EXPECT_FALSE(p[0].hardware);  // an empty axis keeps the scenario's value
  EXPECT_FALSE(p[0].precision);
}

// Layer groups (whole-region's knob) sit between wafers and users: users
// stay innermost, and each point's run carries its --layer-groups.
TEST(SweepPoints, LayerGroupsVaryInsideWafersAndOutsideUsers) {
  SweepAxes a;
  a.wafers = {"1", "2"};
  a.layer_groups = {"1", "8"};
  a.users = {1, 16};
  const auto p = sweep_points(a);
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0].layer_groups, "1");
  EXPECT_EQ(p[1].layer_groups, "1");
  EXPECT_EQ(p[1].users, 16);
  EXPECT_EQ(p[2].layer_groups, "8");
  EXPECT_EQ(p[2].users, 1);
  EXPECT_EQ(p[4].wafers, "2");
  EXPECT_EQ(p[4].layer_groups, "1");
  const auto args = sweep_run_arguments("wafersim", "s.yaml", "", std::nullopt, p[3]);
  const auto g = std::find(args.begin(), args.end(), "--layer-groups");
  ASSERT_NE(g, args.end());
  EXPECT_EQ(*(g + 1), "8");
}

// auto is a value of the axis like a count; the sweep's JSON keeps counts as
// numbers (as before auto, so a journal's digest of a numeric axis is the
// same) and auto as a string.
TEST(SweepPoints, LayerGroupsTakeAuto) {
  SweepAxes a;
  a.layer_groups = {"8", "auto"};
  const auto p = sweep_points(a);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].layer_groups, "auto");
  const auto args = sweep_run_arguments("wafersim", "s.yaml", "", std::nullopt, p[1]);
  const auto g = std::find(args.begin(), args.end(), "--layer-groups");
  ASSERT_NE(g, args.end());
  EXPECT_EQ(*(g + 1), "auto");
  EXPECT_EQ(layer_groups_json("8"), nlohmann::ordered_json(8));
  EXPECT_EQ(layer_groups_json("auto"), nlohmann::ordered_json("auto"));
}

TEST(SweepPoints, NoAxesIsThePlainScenario) {
  const auto p = sweep_points(SweepAxes{});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_FALSE(p[0].model || p[0].hardware || p[0].precision || p[0].wafers || p[0].users);
}

TEST(SweepPoints, ShardsCoverEveryPointExactlyOnce) {
  SweepAxes a = two_models_three_user_counts();
  a.precisions = {"bf16", "fp32"};  // 12 points over 5 shards: uneven on purpose
  std::multiset<int> seen;
  for (int k = 0; k < 5; ++k)
    for (const SweepPoint& p : sweep_points(a, SweepShard{k, 5})) {
      EXPECT_EQ(p.index % 5, k);
      seen.insert(p.index);
    }
  ASSERT_EQ(seen.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

TEST(SweepShard, ParsesKOfNAndRejectsTheImpossible) {
  const SweepShard s = parse_shard("2/3");
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.count, 3);
  EXPECT_THROW(parse_shard("3/3"), std::invalid_argument);
  EXPECT_THROW(parse_shard("-1/3"), std::invalid_argument);
  EXPECT_THROW(parse_shard("1/0"), std::invalid_argument);
  EXPECT_THROW(parse_shard("1-3"), std::invalid_argument);
  EXPECT_THROW(parse_shard("a/3"), std::invalid_argument);
}

// Under mpirun the ranks share the points by themselves (sweep_mpi.hpp); the
// old per-rank shards printed one JSON per rank into one stream.
TEST(SweepShard, MpiIsNoLongerAShardAndSaysWhatToDo) {
  try {
    (void)parse_shard("mpi");
    FAIL() << "accepted --shard mpi";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("drop --shard"), std::string::npos) << e.what();
  }
}

TEST(SweepPoints, AGridTooLargeToEnumerateIsRefused) {
  SweepAxes a;
  a.users.resize(1001, 1);
  a.layer_groups.resize(1001, "1");
  EXPECT_THROW((void)sweep_points(a), std::invalid_argument);
  a.layer_groups.resize(999, "1");
  EXPECT_EQ(sweep_size(a), 1001 * 999);
}

TEST(SweepRun, ArgumentsCarryTheScenarioFlagsAndThePointsOverrides) {
  SweepPoint p;
  p.model = "llama-3.1-8b";
  p.wafers = "auto";
  p.users = 16;
  const auto a = sweep_run_arguments("/bin/wafersim", "s.yaml", "/presets", false, p);
  const std::vector<std::string> want{
      "/bin/wafersim", "--presets",    "/presets", "run",  "s.yaml",  "--json", "--timing-only",
      "--model",       "llama-3.1-8b", "--wafers", "auto", "--users", "16"};
  EXPECT_EQ(a, want);
}

}  // namespace
}  // namespace wafersim::sim
