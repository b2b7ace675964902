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
  a["model"] = {"tiny-llama", "tiny-qwen3"};
  a["users"] = {"1", "2", "4"};
  return a;
}

TEST(SweepPoints, TheGridIsTheProductOfItsAxesModelsOutermost) {
  const auto p = sweep_points(two_models_three_user_counts());
  ASSERT_EQ(p.size(), 6u);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i].index, static_cast<int>(i));
  EXPECT_EQ(p[0]["model"], "tiny-llama");
  EXPECT_EQ(p[0]["users"], "1");
  EXPECT_EQ(p[2]["users"], "4");
  EXPECT_EQ(p[3]["model"], "tiny-qwen3");
  EXPECT_EQ(p[3]["users"], "1");
  EXPECT_FALSE(p[0]["hardware"]);  // an empty axis keeps the scenario's value
  EXPECT_FALSE(p[0]["precision"]);
}

// Layer groups (whole-region's knob) sit between wafers and users, and each
// point's run sets placement.layer_groups.
TEST(SweepPoints, LayerGroupsVaryInsideWafersAndOutsideUsers) {
  SweepAxes a;
  a["wafers"] = {"1", "2"};
  a["layer_groups"] = {"1", "8"};
  a["users"] = {"1", "16"};
  const auto p = sweep_points(a);
  ASSERT_EQ(p.size(), 8u);
  EXPECT_EQ(p[0]["layer_groups"], "1");
  EXPECT_EQ(p[1]["layer_groups"], "1");
  EXPECT_EQ(p[1]["users"], "16");
  EXPECT_EQ(p[2]["layer_groups"], "8");
  EXPECT_EQ(p[2]["users"], "1");
  EXPECT_EQ(p[4]["wafers"], "2");
  EXPECT_EQ(p[4]["layer_groups"], "1");
  const auto args = sweep_run_arguments("wafersim", "s.yaml", "", std::nullopt, p[3]);
  EXPECT_NE(std::find(args.begin(), args.end(), "placement.layer_groups=8"), args.end());
}

// auto is a value of the axis like a count; the sweep's JSON keeps counts as
// numbers (as before auto, so a journal's digest of a numeric axis is the
// same) and auto as a string.
TEST(SweepPoints, LayerGroupsTakeAuto) {
  SweepAxes a;
  a["layer_groups"] = {"8", "auto"};
  const auto p = sweep_points(a);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1]["layer_groups"], "auto");
  const auto args = sweep_run_arguments("wafersim", "s.yaml", "", std::nullopt, p[1]);
  EXPECT_NE(std::find(args.begin(), args.end(), "placement.layer_groups=auto"), args.end());
  const SweepAxis& groups = kSweepAxes[sweep_axis("layer_groups")];
  EXPECT_EQ(axis_value_json(groups, "8"), nlohmann::ordered_json(8));
  EXPECT_EQ(axis_value_json(groups, "auto"), nlohmann::ordered_json("auto"));
}

TEST(SweepPoints, NoAxesIsThePlainScenario) {
  const auto p = sweep_points(SweepAxes{});
  ASSERT_EQ(p.size(), 1u);
  for (const auto& v : p[0].values) EXPECT_FALSE(v);
}

TEST(SweepPoints, ShardsCoverEveryPointExactlyOnce) {
  SweepAxes a = two_models_three_user_counts();
  a["precision"] = {"bf16", "fp32"};  // 12 points over 5 shards: uneven on purpose
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
  a["users"].resize(1001, "1");
  a["layer_groups"].resize(1001, "1");
  EXPECT_THROW((void)sweep_points(a), std::invalid_argument);
  a["layer_groups"].resize(999, "1");
  EXPECT_EQ(sweep_size(a), 1001 * 999);
}

TEST(SweepRun, ArgumentsCarryTheScenarioFlagsAndThePointsOverrides) {
  SweepPoint p;
  p["model"] = "llama-3.1-8b";
  p["wafers"] = "auto";
  p["users"] = "16";
  const auto a = sweep_run_arguments("/bin/wafersim", "s.yaml", "/presets", false, p,
                                     {{"workload.seed", "7"}});
  // The point's axes in table order, then the sweep's own overrides.
  const std::vector<std::string> want{
      "/bin/wafersim",     "--presets", "/presets",           "run",   "s.yaml",      "--json",
      "--timing-only",     "--set",     "model=llama-3.1-8b", "--set", "wafers=auto", "--set",
      "workload.users=16", "--set",     "workload.seed=7"};
  EXPECT_EQ(a, want);
}

// The placement's knobs are axes too, after users (so a grid that leaves
// them unset keeps the indices it had before they were), each point setting
// its scenario key.
TEST(SweepPoints, StrategyReductionAndDecodeBatchVaryInsideUsers) {
  SweepAxes a;
  a["users"] = {"1", "16"};
  a["strategy"] = {"layer-rectangles", "whole-region"};
  a["reduction"] = {"tree", "k-tree", "auto"};
  a["decode_batch"] = {"1", "16"};
  const auto p = sweep_points(a);
  ASSERT_EQ(p.size(), 24u);
  EXPECT_EQ(p[0]["decode_batch"], "1");
  EXPECT_EQ(p[1]["decode_batch"], "16");
  EXPECT_EQ(p[1]["reduction"], "tree");
  EXPECT_EQ(p[2]["reduction"], "k-tree");
  EXPECT_EQ(p[6]["strategy"], "whole-region");
  EXPECT_EQ(p[6]["reduction"], "tree");
  EXPECT_EQ(p[11]["users"], "1");
  EXPECT_EQ(p[12]["users"], "16");
  EXPECT_EQ(p[12]["strategy"], "layer-rectangles");
  const auto args = sweep_run_arguments("wafersim", "s.yaml", "", std::nullopt, p[23]);
  for (const char* set : {"workload.users=16", "placement.strategy=whole-region",
                          "placement.reduction=auto", "workload.decode_batch=16"})
    EXPECT_NE(std::find(args.begin(), args.end(), set), args.end()) << set;
}

// The axes' names are the table's, once each, and name the keys of a
// point's overrides, the CSV's override_ columns and the HDF5 datasets.
TEST(SweepAxesTable, EveryAxisHasItsOwnNameOptionAndKey) {
  std::set<std::string_view> names, options, keys;
  for (const SweepAxis& a : kSweepAxes) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_TRUE(options.insert(a.option).second) << a.option;
    EXPECT_TRUE(keys.insert(a.scenario_key).second) << a.scenario_key;
    EXPECT_EQ(a.option.substr(0, 2), "--") << a.option;
    EXPECT_EQ(kSweepAxes[sweep_axis(a.name)].name, a.name);
  }
  EXPECT_THROW((void)sweep_axis("groups"), std::logic_error);
  EXPECT_EQ(sweep_axis_names().size(), kSweepAxisCount);
}

TEST(SweepAxesTable, CountsAreCheckedAndWrittenPlainly) {
  const SweepAxis& users = kSweepAxes[sweep_axis("users")];
  const SweepAxis& groups = kSweepAxes[sweep_axis("layer_groups")];
  const SweepAxis& reduction = kSweepAxes[sweep_axis("reduction")];
  EXPECT_EQ(checked_axis_value(users, "016"), "16");
  EXPECT_EQ(checked_axis_value(users, "1000000"), "1000000");
  for (const char* bad : {"0", "-1", "1000001", "x", "4.5", "", "auto", "99999999999999999999"})
    EXPECT_THROW((void)checked_axis_value(users, bad), std::invalid_argument) << bad;
  EXPECT_EQ(checked_axis_value(groups, "auto"), "auto");
  EXPECT_THROW((void)checked_axis_value(groups, "Auto"), std::invalid_argument);
  try {
    (void)checked_axis_value(groups, "0");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'0' is not a whole number from 1 to 1000000 or auto"),
              std::string::npos)
        << e.what();
  }
  // Text is the scenario's to check (with the key and what is valid).
  EXPECT_EQ(checked_axis_value(reduction, "nonsense"), "nonsense");
  EXPECT_EQ(axis_value_json(users, "16"), nlohmann::ordered_json(16));
  EXPECT_EQ(axis_value_json(reduction, "tree"), nlohmann::ordered_json("tree"));
  EXPECT_EQ(axis_value_json(kSweepAxes[sweep_axis("wafers")], "2"), nlohmann::ordered_json("2"));
}

}  // namespace
}  // namespace wafersim::sim
