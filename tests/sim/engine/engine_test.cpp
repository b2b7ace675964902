// Engine tests. Each TEST runs in its own process (gtest_discover_tests), as a
// SystemC simulation can run only once per process.
#include "sim/engine/engine.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "support/test_spec.hpp"
#include "analysis/metrics.hpp"
#include "sim/exec/executor.hpp"
#include "sim/engine/system.hpp"

namespace wafersim::sim {
namespace {

// ---- A GEMV on a 2 x 2 region, timed by hand (no SystemC) -----------------

// W (4 x 8, bf16) on the 2 x 2 rectangle `rect` of `fab`, its input ready at
// cycle 0 where it enters.
Vec gemv_4x8(fabric::Fabric& fab, fabric::Rect rect, bool upward = false) {
  models::ModelConfig model;
  Placement pl;
  Program prog;
  Executor ex(fab, model, pl, prog, nullptr, 16);
  MatrixPlacement m;
  m.name = "w";
  m.out_features = 4;
  m.in_features = 8;
  m.rect = rect;
  m.upward = upward;
  Vec x;
  x.layout = input_layout(m);
  x.ready.assign(2, Timed{});
  return ex.gemv(m, WeightRef::o, 0, x);
}

TEST(MeshGemv, CyclesMatchAHandComputation) {
  // W is 4 x 8 bf16 on a 2 x 2 region at (0,0): core (q,p) holds rows
  // [2p, 2p+2) x cols [4q, 4q+4). Spec: 1 cycle/hop, 4 B/cycle links,
  // 8 lanes at 16 bit, 16 B/cycle SRAM, 10 cycles task overhead, 2 cycles
  // per reduction add.
  //  - multicast of 4 fp32 (16 B = 4 cycles) down each column: row 0 has it
  //    at 0, row 1 at 0 + 1 hop + 4 = 5;
  //  - each tile: 8 MACs / 8 lanes = 1 cycle (16 B / 16 B/cycle = 1) + 10 = 11:
  //    row 0 done at 11, row 1 at 16;
  //  - chain reduction of 2 fp32 (8 B = 2 cycles) west over 1 hop, plus the
  //    root's add: row 0 = 11 + 1 + 2 + 2 = 16, row 1 = 16 + 1 + 2 + 2 = 21.
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  const Vec y = gemv_4x8(fab, fabric::Rect{0, 0, 2, 2});
  ASSERT_EQ(y.ready.size(), 2u);
  EXPECT_EQ(y.ready[0].at.value, 16u);
  EXPECT_EQ(y.ready[1].at.value, 21u);
  // The critical path of row 1 explains all 21 cycles.
  EXPECT_EQ(y.ready[1].path.compute.value, 11u);
  EXPECT_EQ(y.ready[1].path.serialization.value, 4u + 2u);
  EXPECT_EQ(y.ready[1].path.hops.value, 1u + 1u + 2u);
  EXPECT_EQ(y.ready[1].path.total().value, 21u);
  EXPECT_EQ(y.layout[1].core, (Coord{0, 1}));
  EXPECT_EQ(fab.cores().busy_cycles(fab.mesh().id({1, 1})), 11u);
}

// The same GEMV turned upside down (MatrixPlacement::upward, a layer stacked
// bottom to top) on rows 2..3: tile row 0 is the bottom row (y = 3), the
// input enters there and goes north, and every time is the hand computation
// above; the links used are the north ones, not the south ones.
TEST(MeshGemv, AnUpwardMatrixIsTheMirrorImage) {
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  const Vec y = gemv_4x8(fab, fabric::Rect{0, 2, 2, 2}, true);
  ASSERT_EQ(y.ready.size(), 2u);
  EXPECT_EQ(y.ready[0].at.value, 16u);
  EXPECT_EQ(y.ready[1].at.value, 21u);
  EXPECT_EQ(y.ready[1].path.total().value, 21u);
  EXPECT_EQ(y.layout[0].core, (Coord{0, 3}));
  EXPECT_EQ(y.layout[1].core, (Coord{0, 2}));
  // Rows of W: [0, 2) on the bottom row of cores, [2, 4) above it.
  EXPECT_EQ(y.layout[1].begin, 2);
  EXPECT_EQ(fab.cores().busy_cycles(fab.mesh().id({1, 2})), 11u);
  const fabric::Mesh& mesh = fab.mesh();
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{0, 3}, fabric::Direction::north)), 16u);
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{0, 2}, fabric::Direction::south)), 0u);
}

TEST(QkNorm, AHeadSplitOverTwoRootsReducesItsSumOfSquaresByHand) {
  // qkv of head_dim 4, one q head and one kv head: 12 values on two roots,
  // (0,0) holds [0, 6) (q and half of k), (0,1) holds [6, 12) (the other
  // half of k, and v). Spec: 4 fp32 lanes, 16 B/cycle SRAM, 10 cycles task
  // overhead, 1 cycle/hop, 4 B/cycle links, 2 cycles per reduction add.
  //  - squares: root 0 has 6 q/k elements x 2 ops = 12 / 4 lanes = 3 (+10) -> 13;
  //    root 1 has 2 (k) x 2 = 4 / 4 = 1 (+10) -> 11 (v is not normed);
  //  - k spans both roots: root 1's partial (4 B = 1 cycle) chains to root 0:
  //    11 + 1 hop + 1 + 2 add = 15; multicast back: root 0 at 15, root 1 at
  //    15 + 1 + 1 = 17;
  //  - scaling: root 0 from 15: 13 more -> 28; root 1 from 17: 11 more -> 28.
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  models::ModelConfig model;
  model.architecture = models::Architecture::qwen3;
  model.head_dim = 4;
  model.num_heads = 1;
  model.num_kv_heads = 1;
  Placement pl;
  Program prog;
  Executor ex(fab, model, pl, prog, nullptr, 16);
  Vec qkv;
  qkv.layout = {Piece{Coord{0, 0}, 0, 6, 0}, Piece{Coord{0, 1}, 6, 12, 0}};
  qkv.ready.assign(2, Timed{});
  ex.qk_norm(qkv, 0);
  EXPECT_EQ(qkv.ready[0].at.value, 28u);
  EXPECT_EQ(qkv.ready[1].at.value, 28u);
  EXPECT_EQ(qkv.ready[1].path.total().value, 28u);
}

TEST(LayerNorm, TwoStatisticsOneAfterTheOtherByHand) {
  // A 16-element vector on two roots of a column, (0,0) [0, 8) and (0,1)
  // [8, 16). Spec as above (4 fp32 lanes, 16 B/cycle SRAM, 10 cycles
  // overhead, 1 cycle/hop, 4 B/cycle links, 2 cycles per reduction add).
  //  - sums (1 op/element): 8/4 = 2 (+10) = 12 on both; root 1's partial
  //    (4 B = 1 cycle) chains up: 12 + 1 hop + 1 + 2 add = 16; multicast
  //    back: 16 and 16 + 1 + 1 = 18;
  //  - squared deviations (3 ops): 24/4 = 6 (+10) = 16: 32 and 34; chain:
  //    34 + 1 + 1 + 2 = 38; back: 38 and 40;
  //  - apply (4 ops): 32/4 = 8 (+10) = 18: 56 and 58.
  // Values: small integers, so every sum is exact and the result equals
  // models::layernorm bit for bit.
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  models::ModelConfig model;
  model.rms_norm_eps = 1e-5;
  Placement pl;
  Program prog;
  models::Weights w;  // functional: only the values below are read
  Executor ex(fab, model, pl, prog, &w, 16);
  Vec x;
  x.layout = {Piece{Coord{0, 0}, 0, 8, 0}, Piece{Coord{0, 1}, 8, 16, 0}};
  x.ready.assign(2, Timed{});
  std::vector<float> gain(16), bias(16);
  for (int i = 0; i < 16; ++i) {
    x.values.push_back(static_cast<float>((i * 7) % 11) - 5.0f);
    gain[static_cast<std::size_t>(i)] = 1.0f + 0.125f * static_cast<float>(i % 3);
    bias[static_cast<std::size_t>(i)] = 0.25f * static_cast<float>(i % 4);
  }
  const Vec y = ex.layernorm(x, gain, bias);
  EXPECT_EQ(y.ready[0].at.value, 56u);
  EXPECT_EQ(y.ready[1].at.value, 58u);
  EXPECT_EQ(y.ready[1].path.total().value, 58u);
  std::vector<float> expected(16);
  models::layernorm(x.values, gain, bias, 1e-5f, expected);
  EXPECT_EQ(y.values, expected);
}

TEST(MeshGemv, TreeAndChainAgreeForTwoColumnsButDifferForMany) {
  // With Q = 2 both schemes are one hop; with Q = 8 and a short vector the
  // tree's log-depth wins (see fabric collectives tests for the arithmetic).
  auto time_of = [](fabric::ReductionScheme s, int q) {
    fabric::Fabric fab(fabric::testing::small_spec(8, 2));
    models::ModelConfig model;
    Placement pl;
    Program prog;
    Executor ex(fab, model, pl, prog, nullptr, 16);
    MatrixPlacement m;
    m.out_features = 2;
    m.in_features = 8 * q;
    m.rect = fabric::Rect{0, 0, q, 1};
    m.reduction = s;
    Vec x;
    x.layout = input_layout(m);
    x.ready.assign(static_cast<std::size_t>(q), Timed{});
    return ex.gemv(m, WeightRef::o, 0, x).ready[0].at.value;
  };
  EXPECT_EQ(time_of(fabric::ReductionScheme::chain, 2), time_of(fabric::ReductionScheme::tree, 2));
  EXPECT_LT(time_of(fabric::ReductionScheme::tree, 8), time_of(fabric::ReductionScheme::chain, 8));
}

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
  ASSERT_EQ(r.tokens.size(),
            static_cast<std::size_t>(sc.workload.generate_tokens * sc.workload.users));
  EXPECT_EQ(r.tokens, r.reference_tokens);
  EXPECT_LT(r.max_logit_abs_error, 1e-3);
}

TEST(Functional, TokensMatchReferenceSeed1) {
  expect_tokens_match_reference(quickstart(1));
}
TEST(Functional, TokensMatchReferenceSeed7) {
  expect_tokens_match_reference(quickstart(7));
}
TEST(Functional, TokensMatchReferenceSeed42Tree) {
  expect_tokens_match_reference(quickstart(42, fabric::ReductionScheme::tree));
}
TEST(Functional, TokensMatchReferenceFp32) {
  Scenario sc = quickstart(3);
  sc.precision = models::DType::fp32;
  expect_tokens_match_reference(sc);
}

TEST(Functional, TokensMatchReferenceTwoLevel) {
  expect_tokens_match_reference(quickstart(42, fabric::ReductionScheme::two_level));
}

// Every strategy changes where tiles sit and the order of nothing else: the
// tokens must still be the reference's.
Scenario with_strategy(const std::string& strategy, std::uint64_t seed) {
  Scenario sc = quickstart(seed, fabric::ReductionScheme::two_level);
  sc.placement.strategy = strategy;
  sc.placement.anneal_iterations = 5000;
  return sc;
}
TEST(Functional, TokensMatchReferenceShortPath) {
  expect_tokens_match_reference(with_strategy("short-path", 5));
}
TEST(Functional, TokensMatchReferenceSramBalanced) {
  expect_tokens_match_reference(with_strategy("sram-balanced", 6));
}
TEST(Functional, TokensMatchReferenceAnneal) {
  expect_tokens_match_reference(with_strategy("anneal", 8));
}
TEST(Functional, TokensMatchReferenceWithPerMatrixOverrides) {
  Scenario sc = with_strategy("short-path", 12);
  sc.placement.matrices["down"] = MatrixOverride{0, 3, fabric::ReductionScheme::tree};
  sc.placement.matrices["gate_up"] = MatrixOverride{5, 0, fabric::ReductionScheme::chain};
  sc.placement.matrices["lm_head"] = MatrixOverride{0, 0, fabric::ReductionScheme::two_level};
  expect_tokens_match_reference(sc);
}

TEST(Functional, TokensMatchReferenceWithDeadCoresAndHalo) {
  Scenario sc = with_strategy("serpentine", 9);
  sc.hardware.defect_rate = 0.003;
  sc.hardware.defect_seed = 11;
  sc.hardware.defect_cores = {{3, 3}, {10, 20}};
  sc.placement.halo_columns = 7;
  sc.placement.halo_rows = 2;
  const std::unique_ptr<PlacedSystem> sys = place_system(sc);
  const fabric::Fabric& fab = *sys->wafers.front();
  ASSERT_GE(fab.defects().dead_count(), 2u);
  for (const Coord& c : fab.defects().dead_cores())
    EXPECT_EQ(fab.sram().used(fab.mesh().id(c)).value, 0u) << c.x << ", " << c.y;
  expect_tokens_match_reference(sc);
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

TEST(Timing, UsersInFlightRaiseAggregateThroughput) {
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
  // Four sequences share a 5-stage pipeline: throughput is well above one
  // user's, but no user's step can beat the fastest single pass through the
  // pipeline (a pass with nothing else in flight).
  EXPECT_GT(m.aggregate_tokens_per_s, 3.0 * m.decode_tokens_per_s_per_user);
  Cycles fastest_pass{UINT64_MAX};
  for (const auto& t : r.token_records)
    if (!t.prefill) fastest_pass = std::min(fastest_pass, t.end_cycle - t.start_cycle);
  for (Cycles c : r.user_decode_cycles_per_token) EXPECT_GE(c, fastest_pass);
}

TEST(Functional, TwoWafersGiveTheReferenceTokens) {
  Scenario sc = quickstart(8);
  sc.wafers = 2;
  expect_tokens_match_reference(sc);
}

// ---- Other architectures: the same reference equality ------------------------

Scenario with_model(const char* preset, std::uint64_t seed) {
  Scenario sc = quickstart(seed);
  sc.model = load_model_preset(preset);
  return sc;
}

// Mixtral: router GEMV, real top-2 of 4 experts per token and layer, each
// expert on its own rectangle, outputs combined in chosen order.
TEST(Functional, MixtralTokensMatchReferenceSeed1) {
  expect_tokens_match_reference(with_model("tiny-mixtral", 1));
}
TEST(Functional, MixtralTokensMatchReferenceSeed7) {
  expect_tokens_match_reference(with_model("tiny-mixtral", 7));
}
TEST(Functional, MixtralTokensMatchReferenceSeed42Tree) {
  Scenario sc = with_model("tiny-mixtral", 42);
  sc.placement.reduction = fabric::ReductionScheme::tree;
  expect_tokens_match_reference(sc);
}
TEST(Functional, MixtralTwoUsersOnTwoWafersMatchReference) {
  Scenario sc = with_model("tiny-mixtral", 5);
  sc.wafers = 2;
  sc.workload.users = 2;
  sc.workload.generate_tokens = 8;
  expect_tokens_match_reference(sc);
}
// GPT-2: LayerNorm with bias, biases on every GEMV, GELU MLP, learned
// positions, tied lm_head.
TEST(Functional, Gpt2TokensMatchReferenceSeed1) {
  expect_tokens_match_reference(with_model("tiny-gpt2", 1));
}
TEST(Functional, Gpt2TokensMatchReferenceSeed9Tree) {
  Scenario sc = with_model("tiny-gpt2", 9);
  sc.placement.reduction = fabric::ReductionScheme::tree;
  expect_tokens_match_reference(sc);
}
TEST(Functional, Gpt2TwoUsersMatchReference) {
  Scenario sc = with_model("tiny-gpt2", 13);
  sc.workload.users = 2;
  sc.workload.generate_tokens = 8;
  expect_tokens_match_reference(sc);
}
// Qwen3: qk-norm before RoPE.
TEST(Functional, Qwen3TokensMatchReferenceSeed1) {
  expect_tokens_match_reference(with_model("tiny-qwen3", 1));
}
TEST(Functional, Qwen3TokensMatchReferenceSeed7) {
  expect_tokens_match_reference(with_model("tiny-qwen3", 7));
}
// Mistral: a window of 8 positions; 8 prompt + 16 generated tokens go well
// past it.
TEST(Functional, MistralSlidingWindowTokensMatchReferenceSeed1) {
  expect_tokens_match_reference(with_model("tiny-mistral", 1));
}
TEST(Functional, MistralSlidingWindowTokensMatchReferenceSeed7Tree) {
  Scenario sc = with_model("tiny-mistral", 7);
  sc.placement.reduction = fabric::ReductionScheme::tree;
  expect_tokens_match_reference(sc);
}
// Qwen2-style q/k/v biases on a llama (attention_bias).
TEST(Functional, AttentionBiasTokensMatchReference) {
  Scenario sc = with_model("tiny-llama", 3);
  sc.model.attention_bias = true;
  expect_tokens_match_reference(sc);
}

// Prefill in blocks (workload.prefill_block): the prompt goes through each
// stage as GEMMs over blocks of tokens; the tokens must not change. Blocks of
// 3 (8 = 3 + 3 + 2) and of the whole prompt, with a sliding window that the
// block crosses (tiny-mistral, window 8), experts chosen per token of the
// block (tiny-mixtral), LayerNorm and position rows per token (tiny-gpt2).
// (One simulation per process: one TEST per case.)
void expect_prefill_blocks_match_reference(const char* preset, int block) {
  Scenario sc = with_model(preset, 17);
  sc.workload.prefill_block = block;
  sc.workload.generate_tokens = 6;
  expect_tokens_match_reference(sc);
}
TEST(Functional, PrefillBlocksOf3LlamaMatchReference) {
  expect_prefill_blocks_match_reference("tiny-llama", 3);
}
TEST(Functional, PrefillBlockOfThePromptLlamaMatchesReference) {
  expect_prefill_blocks_match_reference("tiny-llama", 8);
}
TEST(Functional, PrefillBlocksOf3MixtralMatchReference) {
  expect_prefill_blocks_match_reference("tiny-mixtral", 3);
}
TEST(Functional, PrefillBlockOfThePromptMixtralMatchesReference) {
  expect_prefill_blocks_match_reference("tiny-mixtral", 8);
}
TEST(Functional, PrefillBlocksOf3Gpt2MatchReference) {
  expect_prefill_blocks_match_reference("tiny-gpt2", 3);
}
TEST(Functional, PrefillBlocksOf3Qwen3MatchReference) {
  expect_prefill_blocks_match_reference("tiny-qwen3", 3);
}
TEST(Functional, PrefillBlocksOf3MistralMatchReference) {
  expect_prefill_blocks_match_reference("tiny-mistral", 3);
}
TEST(Functional, PrefillBlocksOfTwoUsersOnTwoWafersGiveTheReferenceTokens) {
  Scenario sc = with_model("tiny-mistral", 23);
  sc.workload.prompt_ids.resize(12, 5);  // 12 prompt tokens: blocks of 5, 5, 2
  sc.workload.prefill_block = 5;
  sc.workload.users = 2;
  sc.workload.generate_tokens = 6;
  sc.wafers = 2;
  expect_tokens_match_reference(sc);
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

// The router's choice drives which expert rectangles work: one token through
// layer 0 of tiny-mixtral, and exactly the cores of the two experts that an
// independent computation (RMSNorm of the embedding row, router GEMV, top 2
// by the reference kernels) picks have been busy; the other experts' cores
// never ran.
TEST(Moe, OnlyTheChosenExpertsRegionsWork) {
  const models::ModelConfig model = load_model_preset("tiny-mixtral");
  const models::Weights w = models::Weights::synthetic(model, models::DType::bf16, 21);
  fabric::Fabric fab(fabric::testing::small_spec(32, 32));
  PlacementRequest req;
  req.context_tokens = 4;
  const Placement pl = place(model, fab, req);
  const Program prog = lower(model, pl);
  Executor ex(fab, model, pl, prog, &w, 16);
  const std::int32_t token = 17;
  TokenMessage m;
  m.token = token;
  slot(m, Slot::x) = ex.embed(token, 0, Timed{}, true);
  for (const StageProgram& sp : prog.stages)
    if (sp.layer == 0) run_stage(ex, sp, m, [](const std::string&, const Timed&) {});

  // Independent: h = x + Wo attn(x) with the reference kernels (at position
  // 0 a head attends to its own position only, so attn = v of its kv head),
  // then the router logits of RMSNorm(h) and their top 2.
  const models::LayerWeights& lw = w.layers[0];
  const auto emb = w.embedding.row(token);
  std::vector<float> x(emb.begin(), emb.end()), n(x.size());
  models::rmsnorm(x, lw.attn_norm, static_cast<float>(model.rms_norm_eps), n);
  std::vector<float> v(static_cast<std::size_t>(model.kv_dim()));
  models::gemv_tile(lw.wv.view(), n, v);
  std::vector<float> attn(static_cast<std::size_t>(model.q_dim()));
  const int group = model.num_heads / model.num_kv_heads, hd = model.head_dim;
  for (int h = 0; h < model.num_heads; ++h)
    for (int d = 0; d < hd; ++d)
      attn[static_cast<std::size_t>(h * hd + d)] = v[static_cast<std::size_t>(h / group * hd + d)];
  std::vector<float> proj(x.size());
  models::gemv_tile(lw.wo.view(), attn, proj);
  models::add_inplace(x, proj);
  models::rmsnorm(x, lw.ffn_norm, static_cast<float>(model.rms_norm_eps), n);
  std::vector<float> logits(static_cast<std::size_t>(model.num_experts));
  models::gemv_tile(lw.router.view(), n, logits);
  const auto chosen = models::route_top_k(logits, model.experts_per_token);
  ASSERT_EQ(chosen.size(), 2u);

  const LayerStage& st = pl.layers[0];
  ASSERT_EQ(st.experts.size(), 4u);
  for (int e = 0; e < 4; ++e) {
    const bool picked = chosen[0].expert == e || chosen[1].expert == e;
    std::uint64_t busy = 0;
    for (const MatrixPlacement* mp : {&st.experts[e].gate_up, &st.experts[e].down})
      for (int pi = 0; pi < mp->p(); ++pi)
        for (int qi = 0; qi < mp->q(); ++qi)
          busy += fab.cores().busy_cycles(fab.mesh().id(mp->core(pi, qi)));
    if (picked)
      EXPECT_GT(busy, 0u) << "expert " << e;
    else
      EXPECT_EQ(busy, 0u) << "expert " << e;
  }
}

// Timing-only runs draw k distinct experts uniformly from a seeded
// generator: the same (seed, layer, user, position) gives the same choice;
// over many tokens each expert is picked about k / E of the time.
TEST(Moe, TimingOnlyChoiceIsSeededUniformAndDistinct) {
  const models::ModelConfig model = load_model_preset("tiny-mixtral");  // 4 experts, top 2
  fabric::Fabric fab(fabric::testing::small_spec(32, 32));
  PlacementRequest req;
  req.context_tokens = 4;
  const Placement pl = place(model, fab, req);
  const Program prog = lower(model, pl);
  Executor ex(fab, model, pl, prog, nullptr, 16);
  ex.set_routing_seed(99);
  std::array<int, 4> count{};
  const int tokens = 4000;
  for (int t = 0; t < tokens; ++t) {
    const auto c = ex.timing_route(t % 2, 0, t);
    ASSERT_EQ(c.size(), 2u);
    EXPECT_NE(c[0].expert, c[1].expert);
    for (const auto& e : c) {
      ASSERT_GE(e.expert, 0);
      ASSERT_LT(e.expert, 4);
      ++count[static_cast<std::size_t>(e.expert)];
    }
    const auto again = ex.timing_route(t % 2, 0, t);
    EXPECT_EQ(again[0].expert, c[0].expert);
    EXPECT_EQ(again[1].expert, c[1].expert);
  }
  // Each expert: expected 2000 picks (k / E = 1/2 of 4000), binomial sd ~32.
  for (int e = 0; e < 4; ++e) EXPECT_NEAR(count[static_cast<std::size_t>(e)], 2000, 160) << e;
}

TEST(Timing, MixtralTimingOnlyRunsAndIsDeterministic) {
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

TEST(Timing, EveryTokensLatencyIsExplainedByItsCriticalPath) {
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(quickstart(5), opt);
  const Scenario sc = quickstart(5);
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

TEST(Timing, NoLinkCarriesMoreThanItsBandwidthAndNoCoreIsOverfull) {
  RunOptions opt;
  opt.functional = false;
  const Scenario sc = quickstart(9);
  const analysis::RunResult r = run_scenario(sc, opt);
  const analysis::Metrics m = analysis::compute_metrics(r);  // throws on a link above its bandwidth
  ASSERT_TRUE(m.busiest_link.has_value());
  EXPECT_LE(m.busiest_link->load, 1.0);
  for (std::uint64_t b : r.core_sram_bytes) EXPECT_LE(b, sc.hardware.sram_per_core.value);
  for (std::uint64_t busy : r.core_busy_cycles) EXPECT_LE(busy, r.total_cycles.value);
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
