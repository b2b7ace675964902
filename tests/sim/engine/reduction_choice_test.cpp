// placement.reduction: auto (sim/engine/reduction_choice.hpp): the
// candidates, the choice on a tiny model where every scheme fits and is
// timed, against explicit engine runs of each scheme (child processes: one
// simulation per process), with layer_groups: auto, per matrix, when none
// fits, and what validate prints. Each TEST runs in its own process.
#include "sim/engine/reduction_choice.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>

#include "sim/engine/system.hpp"
#include "support/wafersim_cli.hpp"

namespace wafersim::sim {
namespace {

using test_support::run_wafersim;

const std::string kTiny =
    std::string(WAFERSIM_SOURCE_DIR) + "/scenarios/regression/tiny-small-whole-region.yaml";

// tiny-llama (4 layers, 2 groups) on the 32 x 32 `small` wafer with 32
// colors per router, so that every scheme fits (with 24 the k-tree beside
// the others' routes needs 30 at some router).
Scenario tiny_auto(int users) {
  Scenario sc = load_scenario(kTiny);
  sc.placement.reduction_auto = true;
  sc.placement.reduction = ReductionScheme::chain;
  sc.workload.users = users;
  sc.outputs.functional = false;
  sc.hardware.virtual_channels = 32;
  return sc;
}

std::vector<ReductionChoice> choose(const Scenario& sc, Placement* placed = nullptr,
                                    PlacementRequest* planned = nullptr) {
  std::vector<ReductionChoice> choices;
  Placement pl = plan_system(sc, placement_request(sc), nullptr, &choices, planned);
  if (placed) *placed = std::move(pl);
  return choices;
}

const std::string kSetColors = " --set hardware.router.virtual_channels=32";

TEST(ReductionChoice, CandidatesAreTheSchemesSimplestFirst) {
  std::vector<std::string> names;
  for (const ReductionCandidate& c : reduction_candidates(fabric::Rect{0, 0, 28, 16}, 0))
    names.push_back(analysis::reduction_candidate_name(c));
  // sqrt(28 x 16) = 21.2 cores: K around its root 4.6: 2 and 9.
  EXPECT_EQ(names, (std::vector<std::string>{"chain", "tree", "two-level", "k-tree K=sqrt",
                                             "k-tree K=2", "k-tree K=9", "ring"}));
  // A K the scenario gives is the k-tree's only one.
  names.clear();
  for (const ReductionCandidate& c : reduction_candidates(fabric::Rect{0, 0, 331, 168}, 5))
    names.push_back(analysis::reduction_candidate_name(c));
  EXPECT_EQ(names, (std::vector<std::string>{"chain", "tree", "two-level", "k-tree K=5", "ring"}));
}

// One user: every candidate fits and is timed; the choice is the shortest
// predicted token, and the placement is the chosen scheme's own plan.
TEST(ReductionChoice, TinyModelChoosesTheShortestTimedToken) {
  const Scenario sc = tiny_auto(1);
  Placement placed;
  PlacementRequest planned;
  const std::vector<ReductionChoice> chs = choose(sc, &placed, &planned);
  ASSERT_EQ(chs.size(), 1u);
  const ReductionChoice& ch = chs[0];
  EXPECT_EQ(ch.key, "placement.reduction");
  EXPECT_EQ(ch.layer_groups, 2);
  ASSERT_EQ(ch.candidates.size(), 7u);
  int best = -1;
  for (std::size_t i = 0; i < ch.candidates.size(); ++i) {
    const ReductionCandidate& c = ch.candidates[i];
    ASSERT_TRUE(c.fits) << c.scheme << ": " << c.why_not << c.not_timed;
    EXPECT_EQ(c.token_cycles, 4 * c.layer_cycles + c.handover_cycles + c.head_cycles);
    if (best < 0 || c.token_cycles < ch.candidates[static_cast<std::size_t>(best)].token_cycles)
      best = static_cast<int>(i);
  }
  EXPECT_EQ(ch.chosen, best);
  const ReductionCandidate& chosen = ch.candidates[static_cast<std::size_t>(ch.chosen)];
  EXPECT_EQ(chosen.scheme, "k-tree");
  EXPECT_EQ(chosen.reduction_groups, 0);
  EXPECT_EQ(planned.reduction, ReductionScheme::k_tree);
  // The placement is the chosen scheme's plan, as the explicit scheme gives it.
  Scenario fixed = sc;
  fixed.placement.reduction_auto = false;
  fixed.placement.reduction = ReductionScheme::k_tree;
  const Placement explicit_plan = plan_system(fixed, placement_request(fixed));
  EXPECT_EQ(placed.layers, explicit_plan.layers);
  EXPECT_EQ(placed.head, explicit_plan.head);
  EXPECT_NE(placed.planner_note.find("reduction: auto chose k-tree K=sqrt"), std::string::npos)
      << placed.planner_note;
}

// Every candidate run through the engine with its scheme given: the one auto
// chooses is the fastest there too, and a run with auto gives its results.
TEST(ReductionChoice, ChoiceIsTheFastestExplicitEngineRun) {
  const std::string run = "run " + kTiny + " --timing-only --json --users 1" + kSetColors;
  const auto cycles = [&](const std::string& sets) {
    const test_support::CliOutcome o = run_wafersim(run + sets);
    EXPECT_EQ(o.code, 0) << sets << ": " << o.err;
    return nlohmann::json::parse(o.out);
  };
  const nlohmann::json a = cycles(" --set placement.reduction=auto");
  ASSERT_TRUE(a.contains("reduction_auto")) << a.dump();
  const nlohmann::json& ch = a["reduction_auto"][0];
  EXPECT_EQ(ch["key"], "placement.reduction");
  std::map<std::string, std::uint64_t> engine;
  std::string fastest;
  std::uint64_t fastest_cycles = std::numeric_limits<std::uint64_t>::max();
  for (const nlohmann::json& c : ch["candidates"]) {
    ASSERT_TRUE(c["fits"].get<bool>()) << c.dump();
    const std::string scheme = c["scheme"];
    const int k = c["reduction_groups"];
    const std::string sets =
        " --set placement.reduction=" + scheme +
        (k > 0 ? " --set placement.reduction_groups=" + std::to_string(k) : "");
    const std::uint64_t cpt = cycles(sets)["cycles_per_token"];
    const std::string name = scheme + "/" + std::to_string(k);
    engine[name] = cpt;
    if (cpt < fastest_cycles) fastest = name, fastest_cycles = cpt;
  }
  EXPECT_EQ(engine.size(), 7u);
  const std::string chosen = ch["chosen"].get<std::string>() + "/" +
                             std::to_string(ch["chosen_reduction_groups"].get<int>());
  EXPECT_EQ(chosen, fastest);
  // The auto run is the chosen scheme's run.
  EXPECT_EQ(a["cycles_per_token"].get<std::uint64_t>(), engine[chosen]);
}

// The same scenario twice: the same candidates, figure for figure.
TEST(ReductionChoice, Deterministic) {
  const Scenario sc = tiny_auto(2);
  const std::vector<ReductionChoice> a = choose(sc), b = choose(sc);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(analysis::reduction_choices_json(a), analysis::reduction_choices_json(b));
  EXPECT_GE(a[0].chosen, 0);
}

// A matrix's own auto is chosen after the layer-wide one, the others held at
// their schemes; with layer_groups: auto the count is chosen too.
TEST(ReductionChoice, MatrixAutoAndLayerGroupsAuto) {
  Scenario sc = tiny_auto(1);
  sc.placement.reduction_auto = false;
  sc.placement.reduction = ReductionScheme::two_level;
  sc.placement.matrix_reduction_auto = {MatrixKind::attention};
  sc.placement.matrices[MatrixKind::attention] = MatrixOverride{};
  sc.placement.layer_groups_auto = true;
  std::optional<LayerGroupChoice> groups;
  std::vector<ReductionChoice> chs;
  PlacementRequest planned;
  const Placement pl = plan_system(sc, placement_request(sc), &groups, &chs, &planned);
  ASSERT_TRUE(groups.has_value());
  ASSERT_EQ(chs.size(), 1u);
  EXPECT_EQ(chs[0].key, "placement.matrices.attention.reduction");
  EXPECT_EQ(chs[0].layer_groups, groups->chosen);
  EXPECT_EQ(planned.layer_groups, groups->chosen);
  const ReductionCandidate& c = chs[0].candidates[static_cast<std::size_t>(chs[0].chosen)];
  // The attention takes the chosen scheme, every other matrix keeps two-level.
  EXPECT_EQ(fabric::reduction_name(pl.layers.front().attention.reduction), c.scheme);
  EXPECT_EQ(pl.layers.front().o.reduction, ReductionScheme::two_level);
  EXPECT_EQ(pl.layers.front().qkv.reduction, ReductionScheme::two_level);
  EXPECT_EQ(planned.reduction, ReductionScheme::two_level);
}

// When no scheme fits, the error names the key and each candidate's reason.
TEST(ReductionChoice, NoSchemeFitsNamesEachReason) {
  Scenario sc = tiny_auto(1);
  sc.hardware.virtual_channels = 4;
  try {
    (void)choose(sc);
    FAIL() << "expected a FitError";
  } catch (const fabric::FitError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("placement.reduction: auto: no candidate scheme fits"), std::string::npos)
        << what;
    for (const char* name :
         {"; chain: ", "; tree: ", "; two-level: ", "; k-tree K=sqrt: ", "; ring: "})
      EXPECT_NE(what.find(name), std::string::npos) << name << " in " << what;
    EXPECT_NE(what.find("virtual_channels"), std::string::npos) << what;
  }
}

// validate runs the automatic choices and prints each one's line, in
// place's words.
TEST(ReductionChoice, ValidatePrintsTheChoicesAsPlaceDoes) {
  const std::string args =
      kTiny + kSetColors + " --set placement.reduction=auto --layer-groups auto";
  const test_support::CliOutcome v = run_wafersim("validate " + args);
  ASSERT_EQ(v.code, 0) << v.err;
  const test_support::CliOutcome p = run_wafersim("place " + args);
  ASSERT_EQ(p.code, 0) << p.err;
  for (const std::string start : {"  layer groups: auto chose ", "  reduction: auto chose "}) {
    const std::size_t at = v.out.find(start);
    ASSERT_NE(at, std::string::npos) << start << " in " << v.out;
    EXPECT_EQ(v.out.find(start, at + 1), std::string::npos) << "one line each: " << v.out;
    // The same words as place's, up to the host time.
    const std::string line = v.out.substr(at, v.out.find("; chosen in", at) - at);
    EXPECT_NE(p.out.find(line), std::string::npos) << line << " in " << p.out;
  }
  // Without auto, nothing of the sort.
  const test_support::CliOutcome plain = run_wafersim("validate " + kTiny);
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("auto chose"), std::string::npos) << plain.out;
}

}  // namespace
}  // namespace wafersim::sim
