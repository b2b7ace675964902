// Engine tests. Each TEST runs in its own process (gtest_discover_tests), as a
// SystemC simulation can run only once per process.
#include "sim/engine/engine.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "analysis/metrics.hpp"
#include "fabric/defects.hpp"
#include "fabric/redundancy.hpp"
#include "sim/engine/system.hpp"
#include "sim/exec/executor.hpp"
#include "support/test_spec.hpp"

namespace wafersim::sim {
namespace {

// ---- Whole runs -------------------------------------------------------------

Scenario quickstart(std::uint64_t seed,
                    fabric::ReductionScheme reduction = fabric::ReductionScheme::chain) {
  Scenario sc = load_scenario(std::string(WAFERSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml");
  sc.workload.seed = seed;
  sc.placement.reduction = reduction;
  return sc;
}

void expect_tokens_match_reference(const Scenario& sc) {
  RunOptions opt;
  opt.functional = true;
  const analysis::RunResult r = run_scenario(sc, opt);
  std::size_t generated = 0;
  for (int u = 0; u < sc.workload.users; ++u)
    generated += static_cast<std::size_t>(user_generate_tokens(sc.workload, u));
  ASSERT_EQ(r.tokens.size(), generated);
  EXPECT_EQ(r.tokens, r.reference_tokens);
  EXPECT_LT(r.max_logit_abs_error, 1e-3);
}

// Every strategy changes where tiles sit and the order of nothing else: the
// tokens must still be the reference's.
Scenario with_strategy(const std::string& strategy, std::uint64_t seed) {
  Scenario sc = quickstart(seed, fabric::ReductionScheme::two_level);
  sc.placement.strategy = *parse_strategy(strategy);
  sc.placement.anneal.iterations = 5000;
  return sc;
}

Scenario with_model(const char* preset, std::uint64_t seed) {
  Scenario sc = quickstart(seed);
  sc.model = load_model_preset(preset);
  return sc;
}

Scenario with_reduction(Scenario sc, fabric::ReductionScheme reduction) {
  sc.placement.reduction = reduction;
  return sc;
}

Scenario with_users(Scenario sc, int users, int generate_tokens) {
  sc.workload.users = users;
  sc.workload.generate_tokens = generate_tokens;
  return sc;
}

Scenario on_wafers(Scenario sc, int wafers) {
  sc.wafers = wafers;
  return sc;
}

// Decode in batches of `batch` users (workload.decode_batch).
Scenario with_decode_batch(Scenario sc, int batch) {
  sc.workload.decode_batch = batch;
  return sc;
}

// Five users in decode batches of 3 and 2 whose prompts go together
// (workload.batch_prompts), each with its own prompt and output length,
// two arriving later, prompt blocks of 2.
Scenario batched_prompts(Scenario sc) {
  const double clock = sc.hardware.clock_hz;
  sc.workload.users = 5;
  sc.workload.arrivals_s = {0.0, 15000.0 / clock, 0.0, 0.0, 4000.0 / clock};
  sc.workload.decode_batch = 3;
  sc.workload.batch_prompts = true;
  sc.workload.prompt_tokens_by_user = {3, 8, 5, 2, 4};
  sc.workload.generate_tokens_by_user = {6, 1, 4, 3, 5};
  sc.workload.generate_tokens = 6;
  sc.workload.prefill_block = 2;
  return sc;
}

// Prefill in blocks (workload.prefill_block): the prompt goes through each
// stage as GEMMs over blocks of tokens; the tokens must not change.
Scenario with_prefill_blocks(const char* preset, int block) {
  Scenario sc = with_model(preset, 17);
  sc.workload.prefill_block = block;
  sc.workload.generate_tokens = 6;
  return sc;
}

// The whole-region dataflow: every GEMV over the group's whole region,
// qkv and gate_up transposed, the KV cache spread over the region's columns
// (scores all-reduced along rows), the norms reduced with the scheme.
Scenario whole_region(Scenario sc, int groups,
                      fabric::ReductionScheme reduction = fabric::ReductionScheme::two_level) {
  sc.placement.strategy = StrategyKind::whole_region;
  sc.placement.layer_groups = groups;
  sc.placement.reduction = reduction;
  return sc;
}

Scenario with_dead_cores_and_halo() {
  Scenario sc = with_strategy("serpentine", 9);
  sc.hardware.defect_rate = 0.003;
  sc.hardware.defect_seed = 11;
  sc.hardware.defect_cores = {{3, 3}, {10, 20}};
  sc.placement.halo.columns = 7;
  sc.placement.halo.rows = 2;
  return sc;
}

// ---- Functional: the tokens are the reference forward pass's ----------------
// One case per scenario (one simulation per process: gtest_discover_tests
// runs each case on its own).

struct FunctionalCase {
  const char* name;
  Scenario (*scenario)();
};

void PrintTo(const FunctionalCase& c, std::ostream* os) {
  *os << c.name;
}

const FunctionalCase kFunctionalCases[] = {
    {"Seed1", [] { return quickstart(1); }},
    {"Seed7", [] { return quickstart(7); }},
    {"Seed42Tree", [] { return quickstart(42, fabric::ReductionScheme::tree); }},
    {"Fp32",
     [] {
       Scenario sc = quickstart(3);
       sc.precision = models::DType::fp32;
       return sc;
     }},
    {"TwoLevel", [] { return quickstart(42, fabric::ReductionScheme::two_level); }},
    // WaferLLM's k-tree (default K, and K = 3) and the folded ring: sums
    // added in their orders (the ring's chunk by chunk), roots at the
    // k-tree's centre.
    {"KTree", [] { return quickstart(42, fabric::ReductionScheme::k_tree); }},
    {"KTreeThreeGroups",
     [] {
       Scenario sc = quickstart(7, fabric::ReductionScheme::k_tree);
       sc.placement.reduction_groups = 3;
       return sc;
     }},
    {"Ring", [] { return quickstart(42, fabric::ReductionScheme::ring); }},
    {"RingTwoUsers", [] { return with_users(quickstart(9, fabric::ReductionScheme::ring), 2, 6); }},
    {"KTreeGpt2",
     [] { return with_reduction(with_model("tiny-gpt2", 9), fabric::ReductionScheme::k_tree); }},
    {"ShortPath", [] { return with_strategy("short-path", 5); }},
    {"SramBalanced", [] { return with_strategy("sram-balanced", 6); }},
    {"Anneal", [] { return with_strategy("anneal", 8); }},
    {"PerMatrixOverrides",
     [] {
       Scenario sc = with_strategy("short-path", 12);
       sc.placement.matrices[MatrixKind::down] =
           MatrixOverride{0, 3, fabric::ReductionScheme::tree};
       sc.placement.matrices[MatrixKind::gate_up] =
           MatrixOverride{5, 0, fabric::ReductionScheme::chain};
       sc.placement.matrices[MatrixKind::lm_head] =
           MatrixOverride{0, 0, fabric::ReductionScheme::two_level};
       return sc;
     }},
    // Defects.DeadCoresAndTheHaloHoldNothing checks where its tiles went.
    {"DeadCoresAndHalo", with_dead_cores_and_halo},
    {"TwoWafers", [] { return on_wafers(quickstart(8), 2); }},
    {"WholeRegionOneGroup", [] { return whole_region(quickstart(4), 1); }},
    {"WholeRegionTwoGroupsChain",
     [] { return whole_region(quickstart(5), 2, fabric::ReductionScheme::chain); }},
    {"WholeRegionLayerPerGroupTree",
     [] { return whole_region(quickstart(6), 4, fabric::ReductionScheme::tree); }},
    // The k-tree on the matrices and norms, one group per line (its root at
    // the line's centre), attention chaining: what fits the small wafer's 24
    // colors (Colors.AKTreeEverywhereInOneRegion... below).
    {"WholeRegionKTree",
     [] {
       Scenario sc = whole_region(quickstart(14), 1, fabric::ReductionScheme::k_tree);
       sc.placement.reduction_groups = 1;
       sc.placement.matrices[MatrixKind::attention] =
           MatrixOverride{0, 0, fabric::ReductionScheme::chain};
       return sc;
     }},
    {"WholeRegionRing",
     [] { return whole_region(quickstart(15), 2, fabric::ReductionScheme::ring); }},
    {"WholeRegionTwoUsersPrefillBlocks",
     [] {
       Scenario sc = whole_region(with_users(quickstart(10), 2, 6), 1);
       sc.workload.prefill_block = 3;
       return sc;
     }},
    {"WholeRegionGpt2", [] { return whole_region(with_model("tiny-gpt2", 2), 1); }},
    {"WholeRegionQwen3", [] { return whole_region(with_model("tiny-qwen3", 3), 2); }},
    {"WholeRegionMistralWindow", [] { return whole_region(with_model("tiny-mistral", 4), 1); }},
    {"WholeRegionTwoWafers", [] { return on_wafers(whole_region(quickstart(11), 1), 2); }},
    {"WholeRegionDeadCores",
     [] {
       Scenario sc = whole_region(quickstart(12), 2);
       sc.hardware.defect_cores = {{20, 5}, {9, 30}};
       return sc;
     }},
    // Mixtures of experts on the whole region: the router and every expert
    // span it, the chosen experts' GEMVs one after another on its cores.
    {"WholeRegionMixtral", [] { return whole_region(with_model("tiny-mixtral", 3), 1); }},
    {"WholeRegionQwen3MoeTwoGroupsTree",
     [] {
       return whole_region(with_model("tiny-qwen3-moe", 8), 2, fabric::ReductionScheme::tree);
     }},
    {"WholeRegionMixtralDecodeBatchPrefillBlocks",
     [] {
       Scenario sc = whole_region(with_users(with_model("tiny-mixtral", 38), 3, 5), 1);
       sc.workload.prefill_block = 3;
       return with_decode_batch(sc, 3);
     }},
    // Other architectures. Mixtral: router GEMV, real top-2 of 4 experts per
    // token and layer, each expert on its own rectangle, outputs combined in
    // chosen order.
    {"MixtralSeed1", [] { return with_model("tiny-mixtral", 1); }},
    {"MixtralSeed7", [] { return with_model("tiny-mixtral", 7); }},
    {"MixtralSeed42Tree",
     [] { return with_reduction(with_model("tiny-mixtral", 42), fabric::ReductionScheme::tree); }},
    {"MixtralTwoUsersOnTwoWafers",
     [] { return on_wafers(with_users(with_model("tiny-mixtral", 5), 2, 8), 2); }},
    // Qwen3-MoE: qk-norm, then the real top 4 of 12 small experts per token
    // and layer (renormalised), each expert on its own rectangle.
    {"Qwen3MoeSeed1", [] { return with_model("tiny-qwen3-moe", 1); }},
    {"Qwen3MoeSeed7Tree",
     [] { return with_reduction(with_model("tiny-qwen3-moe", 7), fabric::ReductionScheme::tree); }},
    {"Qwen3MoeTwoUsersOnTwoWafers",
     [] { return on_wafers(with_users(with_model("tiny-qwen3-moe", 5), 2, 8), 2); }},
    // GPT-2: LayerNorm with bias, biases on every GEMV, GELU MLP, learned
    // positions, tied lm_head.
    {"Gpt2Seed1", [] { return with_model("tiny-gpt2", 1); }},
    {"Gpt2Seed9Tree",
     [] { return with_reduction(with_model("tiny-gpt2", 9), fabric::ReductionScheme::tree); }},
    {"Gpt2TwoUsers", [] { return with_users(with_model("tiny-gpt2", 13), 2, 8); }},
    // Qwen3: qk-norm before RoPE.
    {"Qwen3Seed1", [] { return with_model("tiny-qwen3", 1); }},
    {"Qwen3Seed7", [] { return with_model("tiny-qwen3", 7); }},
    // Mistral: a window of 8 positions; 8 prompt + 16 generated tokens go well
    // past it.
    {"MistralSlidingWindowSeed1", [] { return with_model("tiny-mistral", 1); }},
    {"MistralSlidingWindowSeed7Tree",
     [] { return with_reduction(with_model("tiny-mistral", 7), fabric::ReductionScheme::tree); }},
    // Qwen2-style q/k/v biases on a llama (attention_bias).
    {"AttentionBias",
     [] {
       Scenario sc = with_model("tiny-llama", 3);
       sc.model.attention_bias = true;
       return sc;
     }},
    // Prefill in blocks of 3 (8 = 3 + 3 + 2) and of the whole prompt, with a
    // sliding window that the block crosses (tiny-mistral, window 8), experts
    // chosen per token of the block (tiny-mixtral), LayerNorm and position
    // rows per token (tiny-gpt2).
    {"PrefillBlocksOf3Llama", [] { return with_prefill_blocks("tiny-llama", 3); }},
    {"PrefillBlockOfThePromptLlama", [] { return with_prefill_blocks("tiny-llama", 8); }},
    {"PrefillBlocksOf3Mixtral", [] { return with_prefill_blocks("tiny-mixtral", 3); }},
    {"PrefillBlockOfThePromptMixtral", [] { return with_prefill_blocks("tiny-mixtral", 8); }},
    {"PrefillBlocksOf3Gpt2", [] { return with_prefill_blocks("tiny-gpt2", 3); }},
    {"PrefillBlocksOf3Qwen3", [] { return with_prefill_blocks("tiny-qwen3", 3); }},
    {"PrefillBlocksOf3Qwen3Moe", [] { return with_prefill_blocks("tiny-qwen3-moe", 3); }},
    {"PrefillBlocksOf3Mistral", [] { return with_prefill_blocks("tiny-mistral", 3); }},
    {"PrefillBlocksOfTwoUsersOnTwoWafers",
     [] {
       Scenario sc = with_model("tiny-mistral", 23);
       sc.workload.prompt_ids.resize(12, 5);  // 12 prompt tokens: blocks of 5, 5, 2
       sc.workload.prefill_block = 5;
       return on_wafers(with_users(sc, 2, 6), 2);
     }},
    // Decode batches (workload.decode_batch): the users' next tokens through
    // every matrix as one GEMM, attention per row over its own user's cache;
    // a batch of every user, batches of two (the last of one user), with
    // experts chosen per row, a sliding window, learned positions, the
    // whole-region dataflow and two wafers.
    {"DecodeBatchOfThreeLlama",
     [] { return with_decode_batch(with_users(quickstart(31), 3, 6), 3); }},
    {"DecodeBatchesOfTwoForThreeUsersLlama",
     [] { return with_decode_batch(with_users(quickstart(32), 3, 6), 2); }},
    {"DecodeBatchMixtral",
     [] { return with_decode_batch(with_users(with_model("tiny-mixtral", 33), 3, 5), 3); }},
    {"DecodeBatchMistralWindow",
     [] {
       Scenario sc = with_users(with_model("tiny-mistral", 34), 2, 8);  // crosses the window
       return with_decode_batch(sc, 2);
     }},
    {"DecodeBatchGpt2",
     [] { return with_decode_batch(with_users(with_model("tiny-gpt2", 35), 2, 5), 2); }},
    {"DecodeBatchWholeRegionPrefillBlocks",
     [] {
       Scenario sc = whole_region(with_users(quickstart(36), 4, 5), 1);
       sc.workload.prefill_block = 4;
       return with_decode_batch(sc, 4);
     }},
    {"DecodeBatchOnTwoWafers",
     [] { return on_wafers(with_decode_batch(with_users(quickstart(37), 2, 6), 2), 2); }},
    // A decode batch's prompts together (workload.batch_prompts): five
    // users in batches of 3 and 2 with their own prompt and output lengths
    // and arrivals, prompt blocks of 2 (a message holds rows of several
    // users and positions; the head takes each member's last prompt token
    // where its prompt ends).
    {"BatchedPrompts", [] { return batched_prompts(quickstart(38)); }},
    {"BatchedPromptsWholeRegion", [] { return whole_region(batched_prompts(quickstart(39)), 1); }},
};

class Tokens : public ::testing::TestWithParam<FunctionalCase> {};

TEST_P(Tokens, MatchTheReference) {
  expect_tokens_match_reference(GetParam().scenario());
}

INSTANTIATE_TEST_SUITE_P(Functional, Tokens, ::testing::ValuesIn(kFunctionalCases),
                         [](const ::testing::TestParamInfo<FunctionalCase>& info) {
                           return std::string(info.param.name);
                         });

// The dead cores (listed and drawn at random) hold nothing (placement only:
// the run is the functional case DeadCoresAndHalo above).
TEST(Defects, DeadCoresAndTheHaloHoldNothing) {
  const Scenario sc = with_dead_cores_and_halo();
  const std::unique_ptr<PlacedSystem> sys = place_system(sc);
  const fabric::Fabric& fab = *sys->wafers.front();
  ASSERT_GE(fab.defects().dead_count(), 2u);
  for (const Coord& c : fab.defects().dead_cores())
    EXPECT_EQ(fab.sram().used(fab.mesh().id(c)).value, 0u) << c.x << ", " << c.y;
}

// With spares, each wafer of a pipeline draws its own defects (wafer 0 the
// scenario's seed), repairs them, and the placement is the same on all.
TEST(Defects, EachSparedWaferOfAPipelineHasItsOwnRepairedMap) {
  Scenario sc = on_wafers(quickstart(8), 2);
  sc.hardware.redundancy = fabric::Redundancy{8, 1, Cycles{1}};
  sc.hardware.defect_rate = 0.003;
  // The first seed whose two wafers both repair (checked apart from the engine).
  auto repairs = [&](int w) {
    const fabric::WaferSpec s = fabric::wafer_instance(sc.hardware, w);
    return !fabric::first_unrepairable(s.redundancy, s.mesh_width, fabric::physical_defects(s));
  };
  while (!(repairs(0) && repairs(1))) ++sc.hardware.defect_seed;
  EXPECT_EQ(fabric::wafer_instance(sc.hardware, 0).defect_seed, sc.hardware.defect_seed);
  const std::unique_ptr<PlacedSystem> sys = place_system(sc);
  ASSERT_EQ(sys->wafers.size(), 2u);
  std::array<std::vector<Coord>, 2> maps;
  for (int w = 0; w < 2; ++w) {
    const fabric::DefectMap drawn =
        fabric::physical_defects(fabric::wafer_instance(sc.hardware, w));
    maps[static_cast<std::size_t>(w)] = drawn.dead_cores();
    ASSERT_NE(sys->wafers[static_cast<std::size_t>(w)]->repair(), nullptr);
    EXPECT_EQ(sys->wafers[static_cast<std::size_t>(w)]->repair()->dead_cores(), drawn.dead_count());
  }
  EXPECT_NE(maps[0], maps[1]);
  // Timing runs through both repaired wafers; the dead cores are summed.
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  EXPECT_EQ(static_cast<std::size_t>(r.dead_cores), maps[0].size() + maps[1].size());
}

// A token crosses to the next wafer over the east edge in its row and enters
// over the west edge in its destination's row; where those edge cores are
// dead, at the nearest live ones (until this test, an internal error: no
// route to a dead core). Every edge core dead but one on each side, outside
// the placement (a halo column), and the tokens are still the reference's.
TEST(Defects, TokensCrossToTheNextWaferPastDeadEdgeCores) {
  Scenario sc = on_wafers(whole_region(quickstart(5), 1), 2);
  sc.placement.halo.columns = 1;
  const int w = sc.hardware.mesh_width, h = sc.hardware.mesh_height;
  for (int y = 0; y + 1 < h; ++y) sc.hardware.defect_cores.push_back({0, y});  // (0, h-1) lives
  for (int y = 1; y < h; ++y) sc.hardware.defect_cores.push_back({w - 1, y});  // (w-1, 0) lives
  expect_tokens_match_reference(sc);
}

// A wall of dead cores down the middle of the wafer leaves no route between
// the whole region's two halves: a fit error that names the cut, before any
// simulation (until this test, an internal error when the first message
// tried to cross it).
TEST(Defects, AWaferCutInTwoByDeadCoresDoesNotFit) {
  Scenario sc = whole_region(quickstart(5), 1);
  for (int y = 0; y < sc.hardware.mesh_height; ++y) sc.hardware.defect_cores.push_back({16, y});
  try {
    (void)place_system(sc);
    FAIL() << "a placement split by dead cores fitted";
  } catch (const fabric::FitError& e) {
    EXPECT_NE(std::string(e.what()).find("wafer 0: dead cores cut core (17, "), std::string::npos)
        << e.what();
  }
}

TEST(Functional, EveryUserGetsItsOwnReferenceTokens) {
  Scenario sc = quickstart(11);
  sc.workload.users = 3;
  sc.workload.generate_tokens = 6;
  RunOptions opt;
  const analysis::RunResult r = run_scenario(sc, opt);
  ASSERT_EQ(r.tokens.size(), 18u);
  EXPECT_EQ(r.tokens, r.reference_tokens);
  // Different prompts give different continuations (the caches are separate).
  EXPECT_NE(std::vector<std::int32_t>(r.tokens.begin(), r.tokens.begin() + 6),
            std::vector<std::int32_t>(r.tokens.begin() + 6, r.tokens.begin() + 12));
}

// Four sequences in flight share the pipeline: the aggregate is the sum of
// the users' rates, and no user's step beats the fastest single pass through
// the pipeline (a pass with nothing else in flight). That the aggregate beats
// a one-user run is Cli.UsersInFlightRaiseAggregateThroughput (one
// simulation per process: the one-user run is a process of its own).
TEST(Timing, UsersInFlightShareThePipeline) {
  Scenario sc = quickstart(4);
  sc.workload.users = 4;
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  const analysis::Metrics m = analysis::compute_metrics(r);
  ASSERT_EQ(r.user_decode_cycles_per_token.size(), 4u);
  double sum = 0.0;
  for (Cycles c : r.user_decode_cycles_per_token) sum += r.clock_hz / static_cast<double>(c.value);
  EXPECT_DOUBLE_EQ(m.aggregate_tokens_per_s, sum);
  Cycles fastest_pass{UINT64_MAX};
  for (const auto& t : r.token_records)
    if (!t.prefill) fastest_pass = std::min(fastest_pass, t.end_cycle - t.start_cycle);
  for (Cycles c : r.user_decode_cycles_per_token) EXPECT_GE(c, fastest_pass);
}

// The progress report: a call as the simulation starts (nothing done), one
// after every stage pass and one per token back, so that a report can show
// time passing while a token is on the wafer (seconds of host time at 1
// group). One user and the prompt one block, so messages cross the stages
// one at a time: S stages, T tokens back: 1 + T * (S + 1) calls, the passes
// S per token and short of their total until the last token is back.
TEST(Timing, ProgressIsReportedAtTheStartAndAfterEveryStagePass) {
  Scenario sc = quickstart(4);
  sc.workload.users = 1;
  sc.workload.prefill_block = 8;  // the whole prompt
  const auto stages = static_cast<long long>(place_system(sc)->program.stages.size());
  std::vector<RunProgress> calls;
  RunOptions opt;
  opt.functional = false;
  opt.progress = [&](const RunProgress& p) { calls.push_back(p); };
  const analysis::RunResult r = run_scenario(sc, opt);
  const int tokens = static_cast<int>(r.token_records.size());
  ASSERT_GT(stages, 1);
  ASSERT_EQ(calls.size(), static_cast<std::size_t>(1 + tokens * (stages + 1)));
  for (const RunProgress& p : calls) {
    EXPECT_EQ(p.tokens_total, tokens);
    EXPECT_EQ(p.passes_total, tokens * stages);
  }
  EXPECT_EQ(calls.front().tokens_done, 0);
  EXPECT_EQ(calls.front().passes_done, 0);
  EXPECT_EQ(calls.back().tokens_done, tokens);
  EXPECT_EQ(calls.back().passes_done, tokens * stages);
  for (int t = 0; t < tokens; ++t) {
    const auto base = static_cast<std::size_t>(1 + t * (stages + 1));
    // Token t's stage passes, with t tokens back.
    for (long long s = 0; s < stages; ++s) {
      const RunProgress& p = calls[base + static_cast<std::size_t>(s)];
      EXPECT_EQ(p.tokens_done, t);
      EXPECT_EQ(p.passes_done, std::min(t * stages + s + 1, tokens * stages - 1));
    }
    EXPECT_EQ(calls[base + static_cast<std::size_t>(stages)].tokens_done, t + 1);
  }
}

// A decode batch of every user (workload.decode_batch = users): the users'
// tokens leave the pipeline together, step after step. Each decode step is
// one record per row (its own user and position), the rows of a step
// sharing its start, end and critical path, and each step starts when the
// previous one ended. The prompts go one after another, so the batch waits
// for the last user's first token: an earlier user's mean step (first token
// to last) is the longer.
TEST(Timing, ADecodeBatchMovesItsUsersInLockstep) {
  Scenario sc = with_decode_batch(with_users(quickstart(8), 4, 5), 4);
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  ASSERT_EQ(r.user_decode_cycles_per_token.size(), 4u);
  for (std::size_t u = 1; u < 4; ++u)
    EXPECT_GT(r.user_decode_cycles_per_token[u - 1], r.user_decode_cycles_per_token[u]);
  const std::size_t prompt = sc.workload.prompt_ids.size();
  std::vector<const analysis::TokenRecord*> decode;
  for (const analysis::TokenRecord& t : r.token_records) {
    EXPECT_EQ(t.critical_path.total(), t.end_cycle - t.start_cycle) << "position " << t.position;
    if (!t.prefill) decode.push_back(&t);
  }
  EXPECT_EQ(r.token_records.size() - decode.size(), 4u * prompt);
  ASSERT_EQ(decode.size(), 4u * 4u);  // 4 steps after each user's first token
  for (std::size_t step = 0; step < 4; ++step)
    for (std::size_t row = 0; row < 4; ++row) {
      const analysis::TokenRecord& t = *decode[4 * step + row];
      EXPECT_EQ(t.user, static_cast<int>(row));
      EXPECT_EQ(t.position, static_cast<int>(prompt + step));
      EXPECT_EQ(t.start_cycle, decode[4 * step]->start_cycle);
      EXPECT_EQ(t.end_cycle, decode[4 * step]->end_cycle);
      if (step > 0) {
        EXPECT_EQ(t.start_cycle, decode[4 * step - 1]->end_cycle);
      }
    }
}

// Users whose prompts arrive at different times (workload.arrivals_s).
Scenario with_arrivals(Scenario sc, std::vector<double> arrivals_s) {
  sc.workload.users = static_cast<int>(arrivals_s.size());
  sc.workload.arrivals_s = std::move(arrivals_s);
  return sc;
}

// Each user's records in the order they were made.
std::vector<std::vector<analysis::TokenRecord>> records_by_user(const analysis::RunResult& r) {
  std::vector<std::vector<analysis::TokenRecord>> out(static_cast<std::size_t>(r.users));
  for (const analysis::TokenRecord& t : r.token_records)
    out[static_cast<std::size_t>(t.user)].push_back(t);
  return out;
}

// A decode batch's prompts together (workload.batch_prompts), prompts of 5,
// 3 and 4 tokens in blocks of 2, the last user arriving 3,000 cycles after
// the others: block i of every member whose prompt has one goes in one
// message, once the last member's ids are on the wafer. So each block is
// one record per member, the records of a block share their start (the last
// arrival) and end, the blocks end one after another, and users 1 and 2
// have their first token with block 1, user 0 with block 2, where the first
// decode step of all three starts. Every record is explained by its
// critical path (the io of the last member's ids, then the wafer).
TEST(Timing, BatchedPromptsGoBlockByBlockOnceTheBatchHasArrived) {
  const double clock = quickstart(8).hardware.clock_hz;
  Scenario sc = with_decode_batch(with_arrivals(quickstart(8), {0.0, 0.0, 3000.0 / clock}), 3);
  sc.workload.batch_prompts = true;
  sc.workload.generate_tokens = 4;
  sc.workload.prompt_ids.resize(5);
  sc.workload.prompt_tokens_by_user = {5, 3, 4};
  sc.workload.prefill_block = 2;
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  const auto users = records_by_user(r);
  const std::vector<std::vector<int>> blocks = {{0, 2, 4}, {0, 2}, {0, 2}};
  for (std::size_t u = 0; u < 3; ++u) {
    ASSERT_EQ(users[u].size(), blocks[u].size() + 3) << "user " << u;  // 3 decode steps
    for (std::size_t b = 0; b < blocks[u].size(); ++b) {
      const analysis::TokenRecord& t = users[u][b];
      EXPECT_TRUE(t.prefill);
      EXPECT_EQ(t.position, blocks[u][b]);
      EXPECT_EQ(t.start_cycle, Cycles{3000});
      EXPECT_EQ(t.end_cycle, users[0][b].end_cycle) << "user " << u << " block " << b;
    }
    for (const analysis::TokenRecord& t : users[u])
      EXPECT_EQ(t.critical_path.total(), t.end_cycle - t.start_cycle)
          << "user " << u << " position " << t.position;
  }
  EXPECT_LT(users[0][0].end_cycle, users[0][1].end_cycle);
  EXPECT_LT(users[0][1].end_cycle, users[0][2].end_cycle);
  const analysis::TokenRecord& first_step = users[0][3];
  EXPECT_FALSE(first_step.prefill);
  EXPECT_EQ(first_step.position, 5);
  EXPECT_EQ(first_step.start_cycle, users[0][2].end_cycle);
  EXPECT_EQ(users[1][2].start_cycle, first_step.start_cycle);
  EXPECT_EQ(users[1][2].position, 3);
  EXPECT_EQ(users[2][2].position, 4);
}

// A later user's prompt enters the pipeline at its arrival, behind nothing
// but ahead of the decode tokens the host sends after it: the first user's
// next token waits behind every block of it at every stage, so it leaves
// only after the later prompt's last block, and that step takes several
// free steps (the stages are first in, first out).
TEST(Timing, ADecodeTokenSentAfterALaterPromptWaitsBehindItsBlocks) {
  // User 0's 8-token prompt (4 blocks) is through by ~10K cycles and its
  // steps take ~5K; user 1 arrives at 33,000 cycles, inside user 0's decode.
  const double clock = quickstart(8).hardware.clock_hz;
  Scenario sc = with_arrivals(quickstart(8), {0.0, 33000.0 / clock});
  sc.workload.generate_tokens = 12;
  sc.workload.prefill_block = 2;
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  const auto users = records_by_user(r);
  const Cycles arrival{33000};
  ASSERT_EQ(users[1].front().start_cycle, arrival);
  Cycles last_block{0};
  for (const analysis::TokenRecord& t : users[1])
    if (t.prefill) last_block = std::max(last_block, t.end_cycle);
  Cycles free_step{0};
  const analysis::TokenRecord* behind = nullptr;
  for (const analysis::TokenRecord& t : users[0]) {
    if (t.prefill) continue;
    if (t.end_cycle < arrival) free_step = std::max(free_step, t.end_cycle - t.start_cycle);
    if (t.start_cycle >= arrival && !behind) behind = &t;
  }
  ASSERT_NE(behind, nullptr) << "user 0 finished before user 1 arrived";
  ASSERT_GT(free_step, Cycles{0}) << "user 1 arrived before user 0 decoded";
  EXPECT_LT(behind->start_cycle, last_block);  // sent while the prompt was in flight
  EXPECT_GT(behind->end_cycle, last_block);
  EXPECT_GT((behind->end_cycle - behind->start_cycle).value, free_step.value * 13 / 10);
  EXPECT_EQ(behind->critical_path.total(), behind->end_cycle - behind->start_cycle);
}

// Staggered prompts change no number: every user's tokens are the
// reference's.
TEST(Functional, UsersArrivingAtDifferentTimesGetTheReferenceTokens) {
  const double clock = quickstart(8).hardware.clock_hz;
  Scenario sc = with_arrivals(quickstart(8), {0.0, 20000.0 / clock, 1000.0 / clock});
  sc.workload.generate_tokens = 6;
  sc.workload.prefill_block = 3;
  expect_tokens_match_reference(sc);
}

// Users with prompts and outputs of their own lengths (workload.prompt_tokens
// and generate_tokens per user), arriving at different times, in prompt
// blocks: each user's tokens are the reference's for its own prompt.
TEST(Functional, UsersWithTheirOwnPromptAndOutputLengthsGetTheReferenceTokens) {
  const double clock = quickstart(8).hardware.clock_hz;
  Scenario sc = with_arrivals(quickstart(8), {0.0, 15000.0 / clock, 0.0});
  sc.workload.prompt_tokens_by_user = {3, 8, 5};
  sc.workload.generate_tokens_by_user = {6, 1, 4};
  sc.workload.generate_tokens = 6;
  sc.workload.prefill_block = 2;
  expect_tokens_match_reference(sc);
}

// Per-user lengths in timing: each user's prompt records start at its own
// cached position, and its records count its own prompt tokens and decode
// steps; every record is explained by its critical path.
TEST(Timing, EachUserDecodesFromItsOwnCachedPositionForItsOwnLengths) {
  Scenario sc = with_users(quickstart(8), 2, 12);
  sc.workload.prompt_ids.resize(4);
  sc.workload.prompt_tokens_by_user = {4, 2};
  sc.workload.generate_tokens_by_user = {10, 12};  // user 0 decodes beside user 1 throughout
  sc.workload.cached_tokens_by_user = {0, 100};
  sc.workload.cached_tokens = 100;
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  const auto users = records_by_user(r);
  ASSERT_EQ(users[0].size(), 4u + 9u);
  ASSERT_EQ(users[1].size(), 2u + 11u);
  EXPECT_EQ(users[0].front().position, 0);
  EXPECT_EQ(users[1].front().position, 100);
  EXPECT_EQ(users[1].back().position, 100 + 2 + 12 - 2);
  for (const auto& records : users)
    for (std::size_t i = 0; i < records.size(); ++i) {
      EXPECT_EQ(records[i].position, records.front().position + static_cast<int>(i));
      EXPECT_EQ(records[i].prefill, i < (&records == &users[0] ? 4u : 2u));
      EXPECT_EQ(records[i].critical_path.total(), records[i].end_cycle - records[i].start_cycle);
    }
  // The user at context 100 takes longer steps than the one near 0.
  ASSERT_EQ(r.user_decode_cycles_per_token.size(), 2u);
  EXPECT_GT(r.user_decode_cycles_per_token[1], r.user_decode_cycles_per_token[0]);
}

// One record per block; every record's latency is explained by its critical
// path; a prompt of 8 in blocks of 3 is 3 prefill records.
TEST(Timing, PrefillBlocksAreOneRecordEachAndExplained) {
  Scenario sc = quickstart(5);
  sc.workload.prefill_block = 3;
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  std::size_t prefill = 0;
  for (const analysis::TokenRecord& t : r.token_records) {
    prefill += t.prefill ? 1 : 0;
    EXPECT_EQ(t.critical_path.total(), t.end_cycle - t.start_cycle) << "position " << t.position;
  }
  EXPECT_EQ(prefill, 3u);
  EXPECT_EQ(r.token_records.size(), 3u + sc.workload.generate_tokens - 1);
}

// (Two runs give the same results: Cli.MixtralTimingOnlyIsDeterministic, one
// simulation per process.)
TEST(Timing, MixtralTimingOnlyTokensAreExplainedByTheirCriticalPaths) {
  Scenario sc = with_model("tiny-mixtral", 4);
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult a = run_scenario(sc, opt);
  EXPECT_GT(a.total_cycles, Cycles{0});
  for (const analysis::TokenRecord& t : a.token_records)
    EXPECT_EQ(t.critical_path.total(), t.end_cycle - t.start_cycle) << "position " << t.position;
}

TEST(Timing, CrossingWafersCostsIoOnTheCriticalPath) {
  // With two wafers every decode step crosses the wafer I/O twice (layers of
  // wafer 0 -> wafer 1, and the head on wafer 1 -> layer 0 for the next
  // token), each crossing at least the I/O latency.
  Scenario sc = quickstart(6);
  sc.wafers = 2;
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  EXPECT_EQ(r.wafers, 2);
  const auto latency =
      static_cast<std::uint64_t>(std::ceil(sc.hardware.io_latency_s * sc.hardware.clock_hz));
  for (const auto& t : r.token_records) {
    if (!t.prefill) {
      EXPECT_GE(t.critical_path.io.value, 2 * latency) << "position " << t.position;
    }
  }
  EXPECT_EQ(r.core_sram_bytes.size(), 2u * sc.hardware.mesh_width * sc.hardware.mesh_height);
}

TEST(Timing, AutoUsesTheFewestWafersThatFit) {
  Scenario sc = quickstart(6);
  sc.wafers_auto = true;
  RunOptions opt;
  opt.functional = false;
  EXPECT_EQ(run_scenario(sc, opt).wafers, 1);
}

// Every token's latency is its critical path; under the block and the
// whole-region dataflows (one simulation per process: one TEST each).
void expect_latencies_explained(const Scenario& sc) {
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  ASSERT_EQ(r.token_records.size(),
            sc.workload.prompt_ids.size() + sc.workload.generate_tokens - 1);
  for (const analysis::TokenRecord& t : r.token_records) {
    EXPECT_EQ(t.critical_path.total(), t.end_cycle - t.start_cycle) << "position " << t.position;
    EXPECT_GE(t.end_cycle, t.start_cycle);
  }
  // Decode tokens follow one another: each starts when the previous one ended.
  for (std::size_t i = 1; i < r.token_records.size(); ++i) {
    if (!r.token_records[i].prefill) {
      EXPECT_EQ(r.token_records[i].start_cycle, r.token_records[i - 1].end_cycle);
    }
  }
  // The per-token latency is the mean decode step.
  EXPECT_GT(r.decode_cycles_per_token, Cycles{0});
  EXPECT_GT(r.ttft_cycles, r.decode_cycles_per_token);  // the prompt takes longer than one step
}

TEST(Timing, EveryTokensLatencyIsExplainedByItsCriticalPath) {
  expect_latencies_explained(quickstart(5));
}

TEST(Timing, EveryWholeRegionTokensLatencyIsExplainedByItsCriticalPath) {
  expect_latencies_explained(whole_region(quickstart(5), 2));
}

void expect_within_bandwidth_and_sram(const Scenario& sc) {
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(sc, opt);
  const analysis::Metrics m = analysis::compute_metrics(r);  // throws on a link above its bandwidth
  ASSERT_TRUE(m.busiest_link.has_value());
  EXPECT_LE(m.busiest_link->load, 1.0);
  for (std::uint64_t b : r.core_sram_bytes) EXPECT_LE(b, sc.hardware.sram_per_core.value);
  for (std::uint64_t busy : r.core_busy_cycles) EXPECT_LE(busy, r.total_cycles.value);
}

TEST(Timing, NoLinkCarriesMoreThanItsBandwidthAndNoCoreIsOverfull) {
  expect_within_bandwidth_and_sram(quickstart(9));
}

// Two users' tokens in one whole-region group (every core shared by every
// layer): the shared links still carry at most one wavelet per cycle.
TEST(Timing, WholeRegionSharedByUsersStaysWithinBandwidthAndSram) {
  expect_within_bandwidth_and_sram(whole_region(with_users(quickstart(9), 2, 6), 1));
}

TEST(Timing, TimingOnlyRunComputesNoTokens) {
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(quickstart(2), opt);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_TRUE(r.reference_tokens.empty());
  EXPECT_GT(r.total_cycles, Cycles{0});
}

// ---- Speculative decoding on the wafer ----------------------------------------
// The draft is placed on wafers of its own and proposes; the target verifies
// the round's tokens. Greedy speculative decoding is lossless: the tokens must
// be the target's reference tokens whatever the draft proposes. Every
// verification yields its accepted proposals plus one token of the target's
// own, so generated = 1 (from the prompt) + rounds + accepted, for every user.
// (One simulation per process: one TEST per case.)

// The target's own config with fewer layers (other weights), or itself.
models::ModelConfig draft_of(const models::ModelConfig& target, int layers) {
  models::ModelConfig d = target;
  if (layers != target.num_layers) {
    d.name = target.name + "-" + std::to_string(layers) + "-layers";
    d.num_layers = layers;
  }
  return d;
}

// Runs `sc` with a draft of `draft_layers` layers and checks what holds for
// any draft: the tokens (functional) and the conservation laws.
analysis::RunResult run_speculative(Scenario sc, int draft_layers, int gamma, double alpha,
                                    bool functional = true) {
  SpeculativeOptions o;
  o.draft_preset = "inline";
  o.decoding.draft = draft_of(sc.model, draft_layers);
  o.decoding.draft_tokens = gamma;
  o.decoding.acceptance_rate = alpha;
  sc.speculative = o;
  RunOptions opt;
  opt.functional = functional;
  const analysis::RunResult r = run_scenario(sc, opt);
  if (functional) {
    EXPECT_EQ(r.tokens, r.reference_tokens);
    EXPECT_LT(r.max_logit_abs_error, 1e-3);
  }
  EXPECT_TRUE(r.speculative);
  if (!r.speculative) return r;
  const analysis::SpeculativeRun& s = *r.speculative;
  EXPECT_EQ(static_cast<std::uint64_t>(sc.workload.users) * (sc.workload.generate_tokens - 1),
            s.rounds + s.accepted);
  EXPECT_LE(s.accepted, s.proposed);
  EXPECT_LE(s.rejected, s.rounds);
  EXPECT_LE(s.accepted + s.rejected, s.proposed);  // proposals after a rejection go unexamined
  // A round is its proposals, then its verification.
  EXPECT_EQ(s.round_cycles, s.draft_cycles + s.verify_cycles);
  EXPECT_GE(s.draft_wafers, 1);
  EXPECT_EQ(r.wafers, 1 + s.draft_wafers);  // the target's wafer, then the draft's
  return r;
}

TEST(Speculative, TheTargetAsItsOwnDraftHasEveryProposalAccepted) {
  // 16 tokens, gamma 3: the first from the prompt, then rounds of 3 + 1,
  // 3 + 1, 3 + 1 and, with 3 tokens to go, 2 + 1.
  const analysis::RunResult r = run_speculative(quickstart(42), 4, 3, 0.5);
  EXPECT_EQ(r.speculative->rounds, 4u);
  EXPECT_EQ(r.speculative->proposed, 11u);
  EXPECT_EQ(r.speculative->accepted, 11u);
  EXPECT_TRUE(r.speculative->accepted_by_comparison);
}

TEST(Speculative, ADifferentDraftStillGivesTheTargetsTokens) {
  const analysis::RunResult r = run_speculative(quickstart(7), 1, 4, 0.9);
  EXPECT_LT(r.speculative->accepted, r.speculative->proposed);  // rejections were rolled back
}

// Speculative rounds verify tokens they do not keep, so the messages back
// are not known ahead: the progress counts the tokens kept (the prompt's 8
// blocks, then every generated token but the first), never past its total,
// and ends at it. (A draft of one layer rejects some proposals.)
TEST(Speculative, ProgressCountsTheTokensKeptAndEndsAtItsTotal) {
  Scenario sc = quickstart(7);
  SpeculativeOptions o;
  o.draft_preset = "inline";
  o.decoding.draft = draft_of(sc.model, 1);
  o.decoding.draft_tokens = 4;
  o.decoding.acceptance_rate = 0.9;
  sc.speculative = o;
  std::vector<RunProgress> calls;
  RunOptions opt;
  opt.functional = false;
  opt.progress = [&](const RunProgress& p) { calls.push_back(p); };
  const analysis::RunResult r = run_scenario(sc, opt);
  ASSERT_TRUE(r.speculative);
  EXPECT_GT(r.speculative->rounds, 1u);
  ASSERT_FALSE(calls.empty());
  const int total = 8 + sc.workload.generate_tokens - 1;
  int last = 0;
  for (const RunProgress& p : calls) {
    EXPECT_EQ(p.tokens_total, total);
    EXPECT_GE(p.tokens_done, last);
    EXPECT_LE(p.tokens_done, total);
    EXPECT_LE(p.passes_done, p.passes_total);
    last = p.tokens_done;
  }
  EXPECT_EQ(calls.back().tokens_done, total);
  EXPECT_EQ(calls.back().passes_done, calls.back().passes_total);
}

TEST(Speculative, TwoUsersEachGetTheirReferenceTokens) {
  Scenario sc = quickstart(3);
  sc.workload.users = 2;
  run_speculative(sc, 2, 2, 0.9);
}

TEST(Speculative, MixtralVerifiesWithRealExpertChoices) {
  Scenario sc = with_model("tiny-mixtral", 5);
  sc.workload.generate_tokens = 9;
  const analysis::RunResult r = run_speculative(sc, sc.model.num_layers, 2, 0.5);
  EXPECT_EQ(r.speculative->accepted, r.speculative->proposed);
}

TEST(Speculative, Gpt2VerifiesWithPositionRows) {
  Scenario sc = with_model("tiny-gpt2", 9);
  sc.workload.generate_tokens = 7;
  run_speculative(sc, 1, 3, 0.5);
}

// Colors: a whole-region layer with the k-tree on every matrix, the norms
// and attention has, at router (12, 0) of the small wafer, the routes of
// qkv's (32 cores down the column), o's (28 along the row) and attention's
// (14 along the row) k-trees, 8 colors each, and 6 broadcasts: 30 of 24. The
// placement fails before anything runs, saying where and why. With one
// group per line (4 colors each) and attention chaining, the most any router
// needs is 18 (at the west column: qkv's and the norms' k-tree 4, o's 4,
// attention's two chains 2 + 2, and six broadcasts).
TEST(Colors, AKTreeEverywhereInOneRegionNeedsMoreColorsThanARouterHas) {
  const Scenario sc = whole_region(quickstart(3), 1, fabric::ReductionScheme::k_tree);
  try {
    (void)place_system(sc);
    ADD_FAILURE() << "no FitError";
  } catch (const fabric::FitError& e) {
    const std::string what = e.what();
    for (const char* part : {"router (12, 0) needs 30 colors", "small has 24 (virtual_channels)",
                             "layer 0 qkv: k-tree (K = 6) over 32 cores 8",
                             "layer 0 o: k-tree (K = 5) over 28 cores 8", "reduction_groups"})
      EXPECT_NE(what.find(part), std::string::npos) << part << "\n" << what;
  }
  // With attention chaining and the rest a k-tree, the most any router
  // needs fits, and the run's results say how many.
  Scenario ok = sc;
  ok.placement.reduction_groups = 1;
  ok.placement.matrices[MatrixKind::attention] =
      MatrixOverride{0, 0, fabric::ReductionScheme::chain};
  const std::unique_ptr<PlacedSystem> sys = place_system(ok);
  EXPECT_EQ(sys->routes.max_colors, 18);
  EXPECT_EQ(sys->routes.available, 24);
}

TEST(Speculative, ADraftThatDoesNotFitSaysItIsTheDraft) {
  Scenario sc = quickstart(42);
  SpeculativeOptions o;
  o.draft_preset = "inline";
  o.decoding.draft = sc.model;
  o.decoding.draft.name = "huge-draft";
  o.decoding.draft.intermediate_size = 1 << 20;  // one layer alone exceeds a small wafer
  sc.speculative = o;
  RunOptions opt;
  opt.functional = false;
  try {
    run_scenario(sc, opt);
    ADD_FAILURE() << "no FitError";
  } catch (const fabric::FitError& e) {
    EXPECT_NE(std::string(e.what()).find("speculative draft huge-draft"), std::string::npos)
        << e.what();
  }
}

// Timing only: each proposal is accepted with the scenario's rate. At rate 1
// every proposal is accepted; at rate 0 none is, and every verification
// yields the target's one token. A user's decode time is its rounds.
TEST(Speculative, TimingOnlyAtRateOneAcceptsEveryProposal) {
  const analysis::RunResult r = run_speculative(quickstart(42), 1, 4, 1.0, false);
  EXPECT_EQ(r.speculative->accepted, r.speculative->proposed);
  EXPECT_EQ(r.speculative->rejected, 0u);
  EXPECT_DOUBLE_EQ(r.speculative->measured_acceptance(), 1.0);
  EXPECT_EQ(r.speculative->rounds, 3u);  // 15 tokens after the first: 5 + 5 + 5
  EXPECT_EQ(r.decode_cycles_per_token.value, r.speculative->round_cycles.value / 15);
}

TEST(Speculative, TimingOnlyAtRateZeroAcceptsNothing) {
  const analysis::RunResult r = run_speculative(quickstart(42), 1, 2, 0.0, false);
  EXPECT_EQ(r.speculative->accepted, 0u);
  EXPECT_EQ(r.speculative->rounds, 15u);
  // Every round but the last (one token to go: nothing proposed) rejects.
  EXPECT_EQ(r.speculative->rejected, 14u);
  EXPECT_DOUBLE_EQ(r.speculative->measured_acceptance(), 0.0);
  EXPECT_EQ(r.decode_cycles_per_token.value, r.speculative->round_cycles.value / 15);
}

}  // namespace
}  // namespace wafersim::sim
