// The executor's primitives timed by hand on a small wafer (no SystemC):
// a mesh GEMV, qk-norm, LayerNorm, the two reduction schemes; and a
// values-only executor (the functional lane's) that computes the same
// numbers without touching the fabric.
#include "sim/exec/executor.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "models/kernels.hpp"
#include "support/test_spec.hpp"
#include "support/timed_checks.hpp"

namespace wafersim::sim {
namespace {

// ---- Moves spread over waypoint columns -----------------------------------

// A move spread over waypoint columns: (0,0) -> (0,4) with spread 4 turns at
// column 1 (min x + 1). 8 elements (32 B, 8 cycles on 4 B links) along
// 1 + 4 + 1 hops: 6 + 8 = 14 cycles. When the turn (1,0) is a dead core the
// message cannot turn there: it goes straight down instead (4 hops: 12 cycles),
// never through the dead core.
TEST(Move, SpreadTurnsOnlyAtLiveCores) {
  for (const bool dead_turn : {false, true}) {
    fabric::WaferSpec spec = fabric::testing::small_spec(8, 8);
    if (dead_turn) spec.defect_cores = {{1, 0}};
    fabric::Fabric fab(spec);
    models::ModelConfig model;
    Placement pl;
    Program prog;
    Executor ex(fab, model, pl, prog, nullptr, 16);
    Vec x;
    x.layout = {Piece{{0, 0}, 0, 8, 0}};
    x.ready.assign(1, Timed{});
    const Vec y = ex.move(x, {Piece{{0, 4}, 0, 8, 0}}, 4);
    ASSERT_EQ(y.ready.size(), 1u);
    EXPECT_EQ(y.ready[0].at.value, dead_turn ? 12u : 14u) << "dead turn: " << dead_turn;
  }
}

// ---- A GEMV on a 2 x 2 region, timed by hand (no SystemC) -----------------

// W (4 x 8, bf16) on the 2 x 2 rectangle `rect` of `fab`, its input ready at
// cycle 0 where it enters.
Vec gemv_4x8(fabric::Fabric& fab, fabric::Rect rect, bool upward = false, bool transposed = false) {
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
  m.transposed = transposed;
  Vec x;
  x.layout = input_layout(m);
  x.ready.assign(2, Timed{});
  return ex.gemv(m, WeightRef::o, 0, x);
}

// Every orientation of gemv_4x8 gives the hand computation below: rows of
// cores done at 16 and 21, the whole 21 explained by the critical path.
void expect_hand_computed(const Vec& y) {
  ASSERT_EQ(y.ready.size(), 2u);
  EXPECT_EQ(y.ready[0].at.value, 16u);
  EXPECT_EQ(y.ready[1].at.value, 21u);
  EXPECT_EQ(y.ready[1].path.total().value, 21u);
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

// gemv_4x8's numbers with 16-bit values on the fabric (bf16 weights, so
// bf16 activations): the chain sends column 1's partial of each row to
// column 0, rounded to bf16, and the sum is held in bf16. x is all ones.
// Row 0 of W: (-2^-7, 0, 0, 0 | 1, 2^-8, 2^-10, 0): column 1's partial
// 1 + 2^-8 + 2^-10 is sent as 1 + 2^-7, so the sum is exactly 1, where fp32
// gives 1 - 3 * 2^-10 (and rounding only the sum, bf16's 1 - 2^-8). Row 1:
// (2^-9, 0, 0, 0 | 1, 0, 0, 0): 1 + 2^-9, held as 1.
TEST(MeshGemv, SixteenBitValuesSendEachPartialRounded) {
  auto y = [](int value_bytes) {
    models::ModelConfig model;
    model.hidden_size = 4;  // o's rows
    Placement pl;
    pl.value_bytes = value_bytes;
    Program prog;
    models::Weights w;
    w.dtype = models::DType::bf16;
    w.layers.resize(1);
    models::Matrix& wo = w.layers[0].wo;
    wo = models::Matrix(4, 8);
    wo(0, 0) = -0x1p-7f, wo(0, 4) = 1.0f, wo(0, 5) = 0x1p-8f, wo(0, 6) = 0x1p-10f;
    wo(1, 0) = 0x1p-9f, wo(1, 4) = 1.0f;
    fabric::Fabric fab(fabric::testing::small_spec(4, 4));
    Executor ex(fab, model, pl, prog, &w, 16);
    MatrixPlacement m;
    m.name = "w";
    m.out_features = 4;
    m.in_features = 8;
    m.rect = fabric::Rect{0, 0, 2, 2};
    Vec x;
    x.layout = input_layout(m);
    x.ready.assign(2, Timed{});
    x.values.assign(8, 1.0f);
    return ex.gemv(m, WeightRef::o, 0, x).values;
  };
  EXPECT_EQ(y(4), (std::vector<float>{1.0f - 3 * 0x1p-10f, 1.0f + 0x1p-9f, 0.0f, 0.0f}));
  EXPECT_EQ(y(2), (std::vector<float>{1.0f, 1.0f, 0.0f, 0.0f}));
}

// The same GEMV turned upside down (MatrixPlacement::upward, a layer stacked
// bottom to top) on rows 2..3: tile row 0 is the bottom row (y = 3), the
// input enters there and goes north, and every time is the hand computation
// above; the links used are the north ones, not the south ones.
TEST(MeshGemv, AnUpwardMatrixIsTheMirrorImage) {
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  const Vec y = gemv_4x8(fab, fabric::Rect{0, 2, 2, 2}, true);
  expect_hand_computed(y);
  EXPECT_EQ(y.layout[0].core, (Coord{0, 3}));
  EXPECT_EQ(y.layout[1].core, (Coord{0, 2}));
  // Rows of W: [0, 2) on the bottom row of cores, [2, 4) above it.
  EXPECT_EQ(y.layout[1].begin, 2);
  EXPECT_EQ(fab.cores().busy_cycles(fab.mesh().id({1, 2})), 11u);
  const fabric::Mesh& mesh = fab.mesh();
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{0, 3}, fabric::Direction::north)), 16u);
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{0, 2}, fabric::Direction::south)), 0u);
}

// The same GEMV turned a quarter (MatrixPlacement::transposed, the
// whole-region dataflow): tile (p, q) on core (p, q), input chunk q enters
// at the west core of row q and goes east, the partial sums of tile row p
// are reduced north up column p to its root on the top row. Every time is
// the hand computation above, on the east and north links.
TEST(MeshGemv, ATransposedMatrixIsTheQuarterTurn) {
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  const Vec y = gemv_4x8(fab, fabric::Rect{0, 0, 2, 2}, false, true);
  expect_hand_computed(y);
  // Outputs along the top row: rows [0, 2) of W at (0, 0), [2, 4) at (1, 0).
  EXPECT_EQ(y.layout[0].core, (Coord{0, 0}));
  EXPECT_EQ(y.layout[1].core, (Coord{1, 0}));
  EXPECT_EQ(y.layout[1].begin, 2);
  // Tile (p 1, q 1): rows [2, 4) x cols [4, 8) on core (1, 1), 11 cycles.
  EXPECT_EQ(fab.cores().busy_cycles(fab.mesh().id({1, 1})), 11u);
  const fabric::Mesh& mesh = fab.mesh();
  // Input chunks (4 fp32) east along each row; partial sums (2 fp32) north.
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{0, 1}, fabric::Direction::east)), 16u);
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{1, 1}, fabric::Direction::north)), 8u);
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{0, 0}, fabric::Direction::south)), 0u);
  EXPECT_EQ(fab.flow().link_bytes(mesh.link(Coord{1, 0}, fabric::Direction::west)), 0u);
}

// The timing helper (Executor::set_timing_helper: a GEMV's bands shared
// between two threads, the rows reduced on this one) leaves everything as
// one thread does: every output's time and explanation, every link and ramp
// record, byte counter and core, after GEMVs of every orientation and
// reduction scheme one after another on the same cores (each meets the
// reservations of those before), the input ready unevenly. k-tree and ring
// keep to one thread; their GEMVs sit between the others.
TEST(MeshGemv, OnTwoThreadsIsTheSameAsOnOne) {
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 80);
  fabric::Fabric one(spec), two(spec);
  models::ModelConfig model;
  Placement pl;
  Program prog;
  Executor ex_one(one, model, pl, prog, nullptr, 16), ex_two(two, model, pl, prog, nullptr, 16);
  ex_two.set_timing_helper(Executor::TimingHelper::always);
  struct Shape {
    fabric::Rect rect;
    bool upward, transposed;
    fabric::ReductionScheme reduction;
  };
  const std::vector<Shape> shapes = {
      {{2, 3, 40, 70}, false, false, fabric::ReductionScheme::two_level},
      {{2, 3, 40, 70}, false, true, fabric::ReductionScheme::chain},
      {{5, 1, 33, 75}, true, false, fabric::ReductionScheme::tree},
      {{2, 3, 40, 70}, false, false, fabric::ReductionScheme::k_tree},
      {{0, 0, 48, 80}, false, true, fabric::ReductionScheme::two_level},
      {{2, 3, 40, 70}, false, true, fabric::ReductionScheme::ring},
      {{1, 2, 45, 77}, false, false, fabric::ReductionScheme::chain},
  };
  std::uint64_t start = 0;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    MatrixPlacement m;
    m.name = "w";  // (not "w" + std::to_string(k): GCC 12's -Wrestrict misfires on it at -O2)
    m.name += std::to_string(k);
    m.out_features = 4 * shapes[k].rect.height + 7;
    m.in_features = 8 * shapes[k].rect.width - 3;
    if (shapes[k].transposed) std::swap(m.out_features, m.in_features);
    m.rect = shapes[k].rect;
    m.upward = shapes[k].upward;
    m.transposed = shapes[k].transposed;
    m.reduction = shapes[k].reduction;
    Vec x;
    x.layout = input_layout(m);
    for (std::size_t i = 0; i < x.layout.size(); ++i) {
      Timed t{Cycles{start + (i * 37) % 101}, {}};
      t.path.compute = Cycles{i % 13};
      x.ready.push_back(t);
    }
    const Vec a = ex_one.gemv(m, WeightRef::o, 0, x), b = ex_two.gemv(m, WeightRef::o, 0, x);
    ASSERT_EQ(a.ready.size(), b.ready.size()) << m.name;
    for (std::size_t i = 0; i < a.ready.size(); ++i)
      fabric::testing::expect_same(b.ready[i], a.ready[i], m.name + " row " + std::to_string(i));
    start = a.ready.front().at.value / 2;  // the next one's input while this one is still busy
  }
  fabric::testing::expect_same_records(one.mesh(), one.flow(), two.flow(), "after the GEMVs");
  EXPECT_EQ(two.flow().model_now(), one.flow().model_now());
  EXPECT_EQ(two.cores().busy_cycles_by_core(), one.cores().busy_cycles_by_core());
  // Every core busy until the same cycle (the timelines' whole state).
  fabric::StateHash core_one, core_two;
  one.cores().add_state_after(0, 0, core_one);
  two.cores().add_state_after(0, 0, core_two);
  EXPECT_TRUE(core_one == core_two);
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
  pl.layers.resize(1);  // layer 0: its qkv rows in the checkpoint's order
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

// ---- Attention over a decode batch of two users, timed by hand -------------

// One kv head (head_dim 4, one query head, bf16 cache) on a segment of 4
// cores at column 1, 6 slots per user: user u's position p is cached on core
// (6u + p) mod 4. A decode batch of two rows, user 0 at position 2 and user 1
// at position 4: each core attends, for each row, to that row's user's
// positions up to the row's own.
//   user 0, positions 0..2 -> cores 0, 1, 2;
//   user 1, positions 0..4 -> cores 2, 3, 0, 1, 2;
// so cores 0..3 attend to 2, 2, 3 and 1 positions. Per position: 12 MACs
// (2 x head_dim + 4) at 8 lanes and 16 B of k and v at 16 B per cycle, plus
// the 10-cycle task: 1 position 12 cycles, 2 -> 13, 3 -> 15. The top core
// also normalises the two rows' 8 outputs (8 fp32 ops at 4 lanes, 32 B: 2
// cycles + 10). Read as one user's block (positions 2 and 3 of user 0), the
// cores would attend to 2, 2, 2 and 1 positions instead.
TEST(Attention, ADecodeBatchAttendsEachRowToItsOwnUsersCache) {
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  models::ModelConfig model;
  model.head_dim = 4;
  model.num_heads = 1;
  model.num_kv_heads = 1;
  Placement pl;
  pl.layers.resize(1);  // layer 0: its qkv rows in the checkpoint's order
  Program prog;
  Executor ex(fab, model, pl, prog, nullptr, 16);
  AttentionPlacement a;
  a.rect = fabric::Rect{1, 0, 1, 4};
  a.num_kv_heads = 1;
  a.segment_length = 4;
  a.segments_per_column = 1;
  a.head_dim = 4;
  a.max_positions_per_core = 3;
  a.context = 6;
  a.users = 2;
  Vec qkv;  // q, k, v of both rows on core (0, 0)
  qkv.layout = {Piece{Coord{0, 0}, 0, 12, 0}};
  qkv.ready.assign(1, Timed{});
  qkv.tokens = 2;
  const std::vector<RowTag> rows = {{0, 2, 0}, {1, 4, 0}};
  const Vec out = ex.attention(a, 0, qkv, rows);
  ASSERT_EQ(out.layout.size(), 1u);
  EXPECT_EQ(out.tokens, 2);
  EXPECT_EQ(out.layout[0].core, (Coord{1, 0}));
  EXPECT_EQ(fab.cores().busy_cycles(Coord{1, 0}), 13u + 12u);
  EXPECT_EQ(fab.cores().busy_cycles(Coord{1, 1}), 13u);
  EXPECT_EQ(fab.cores().busy_cycles(Coord{1, 2}), 15u);
  EXPECT_EQ(fab.cores().busy_cycles(Coord{1, 3}), 12u);
  // A row tag per row of the message, or the message is malformed.
  EXPECT_THROW(ex.attention(a, 0, qkv, std::span(rows).first(1)), std::logic_error);
}

// A values-only executor (Executor::set_values_only) computes the numbers
// of a functional one and the same layout, but its times are the ready
// times it was given and the fabric stays idle.
TEST(ValuesOnly, SameNumbersNoTiming) {
  models::ModelConfig model;
  model.rms_norm_eps = 1e-5;
  Placement pl;
  Program prog;
  models::Weights w;
  Vec x;
  x.layout = {Piece{Coord{0, 0}, 0, 8, 0}, Piece{Coord{0, 1}, 8, 16, 0}};
  x.ready.assign(2, Timed{}.plus(Resource::io, Cycles{7}));
  std::vector<float> gain(16, 1.0f), bias(16, 0.5f);
  for (int i = 0; i < 16; ++i) x.values.push_back(static_cast<float>(i % 5) - 2.0f);

  fabric::Fabric timed_fab(fabric::testing::small_spec(4, 4));
  Executor timed(timed_fab, model, pl, prog, &w, 16);
  const Vec a = timed.layernorm(x, gain, bias);

  fabric::Fabric idle_fab(fabric::testing::small_spec(4, 4));
  Executor values(idle_fab, model, pl, prog, &w, 16);
  values.set_values_only();
  const Vec b = values.layernorm(x, gain, bias);

  EXPECT_EQ(a.values, b.values);
  ASSERT_EQ(b.layout.size(), a.layout.size());
  EXPECT_EQ(b.layout[1].core, a.layout[1].core);
  EXPECT_EQ(a.ready[1].at.value, 7u + 58u);  // the hand computation of the LayerNorm test
  for (const Timed& t : b.ready) EXPECT_EQ(t.at.value, 7u);
  for (std::uint64_t busy : idle_fab.cores().busy_cycles_by_core()) EXPECT_EQ(busy, 0u);
  EXPECT_GT(timed_fab.cores().busy_cycles(Coord{0, 1}), 0u);
}

TEST(ValuesOnly, NeedsWeights) {
  fabric::Fabric fab(fabric::testing::small_spec(4, 4));
  models::ModelConfig model;
  Placement pl;
  Program prog;
  Executor ex(fab, model, pl, prog, nullptr, 16);
  EXPECT_FALSE(ex.functional());
  EXPECT_THROW(ex.set_values_only(), std::logic_error);
  EXPECT_THROW(ex.set_threads(2), std::logic_error);
}

}  // namespace
}  // namespace wafersim::sim
