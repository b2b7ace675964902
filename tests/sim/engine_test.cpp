// Engine tests. Each TEST runs in its own process (gtest_discover_tests), as a
// SystemC simulation can run only once per process.
#include "sim/engine.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "../fabric/test_spec.hpp"
#include "analysis/metrics.hpp"
#include "sim/executor.hpp"
#include "sim/system.hpp"

namespace wafersim::sim {
namespace {

// ---- A GEMV on a 2 x 2 region, timed by hand (no SystemC) -----------------

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
  models::ModelConfig model;
  Placement pl;
  Program prog;
  Executor ex(fab, model, pl, prog, nullptr, 16);
  MatrixPlacement m;
  m.name = "w";
  m.out_features = 4;
  m.in_features = 8;
  m.rect = fabric::Rect{0, 0, 2, 2};
  Vec x;
  x.layout = input_layout(m);
  x.ready.assign(2, Timed{});
  const Vec y = ex.gemv(m, WeightRef::o, 0, x);
  ASSERT_EQ(y.ready.size(), 2u);
  EXPECT_EQ(y.ready[0].at.value, 16u);
  EXPECT_EQ(y.ready[1].at.value, 21u);
  // The critical path of row 1 explains all 21 cycles.
  EXPECT_EQ(y.ready[1].path.compute, 11u);
  EXPECT_EQ(y.ready[1].path.serialization, 4u + 2u);
  EXPECT_EQ(y.ready[1].path.hops, 1u + 1u + 2u);
  EXPECT_EQ(y.ready[1].path.total(), 21u);
  EXPECT_EQ(y.layout[1].core, (Coord{0, 1}));
  EXPECT_EQ(fab.cores().busy_cycles(fab.mesh().id({1, 1})), 11u);
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
  ASSERT_EQ(r.tokens.size(), static_cast<std::size_t>(sc.workload.generate_tokens));
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
  for (auto c : r.user_decode_cycles_per_token) sum += r.clock_hz / static_cast<double>(c);
  EXPECT_DOUBLE_EQ(m.aggregate_tokens_per_s, sum);
  // Four sequences share a 5-stage pipeline: throughput is well above one
  // user's, but no user's step can beat the fastest single pass through the
  // pipeline (a pass with nothing else in flight).
  EXPECT_GT(m.aggregate_tokens_per_s, 3.0 * m.decode_tokens_per_s_per_user);
  std::uint64_t fastest_pass = UINT64_MAX;
  for (const auto& t : r.token_records)
    if (!t.prefill) fastest_pass = std::min(fastest_pass, t.end_cycle - t.start_cycle);
  for (auto c : r.user_decode_cycles_per_token) EXPECT_GE(c, fastest_pass);
}

TEST(Functional, TwoWafersGiveTheReferenceTokens) {
  Scenario sc = quickstart(8);
  sc.wafers = 2;
  expect_tokens_match_reference(sc);
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
  for (const auto& t : r.token_records)
    if (!t.prefill) EXPECT_GE(t.critical_path.io, 2 * latency) << "position " << t.position;
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
  for (std::size_t i = 1; i < r.token_records.size(); ++i)
    if (!r.token_records[i].prefill)
      EXPECT_EQ(r.token_records[i].start_cycle, r.token_records[i - 1].end_cycle);
  // The per-token latency is the mean decode step.
  EXPECT_GT(r.decode_cycles_per_token, 0u);
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
  for (std::uint64_t busy : r.core_busy_cycles) EXPECT_LE(busy, r.total_cycles);
}

TEST(Timing, TimingOnlyRunComputesNoTokens) {
  RunOptions opt;
  opt.functional = false;
  const analysis::RunResult r = run_scenario(quickstart(2), opt);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_TRUE(r.reference_tokens.empty());
  EXPECT_GT(r.total_cycles, 0u);
}

}  // namespace
}  // namespace wafersim::sim
