#include "fabric/core_cost.hpp"

#include <gtest/gtest.h>

#include "support/test_spec.hpp"

namespace wafersim::fabric {
namespace {

TEST(CoreCost, GemvTileIsSimdBoundAt16Bit) {
  const WaferSpec spec = testing::small_spec();
  CoreCostModel cost(spec);
  // 24 x 40 bf16 tile: 960 MACs / 8 lanes = 120 cycles; 1920 B / 16 B = 120 cycles (tie ->
  // compute).
  // + 10 task overhead = 130.
  const CoreCost c = cost.gemv_tile(24, 40, 16);
  EXPECT_EQ(c.cycles.value, 130u);
  EXPECT_EQ(c.bound, Resource::compute);
}

TEST(CoreCost, GemvTileIsSramBoundWhenReadsAreNarrow) {
  WaferSpec spec = testing::small_spec();
  spec.sram_read_bytes_per_cycle = Bytes{8};
  CoreCostModel cost(spec);
  // fp32 tile 10 x 10: 100 MACs / 4 lanes = 25; 400 B / 8 = 50 -> SRAM bound: 60.
  const CoreCost c = cost.gemv_tile(10, 10, 32);
  EXPECT_EQ(c.cycles.value, 60u);
  EXPECT_EQ(c.bound, Resource::sram);
}

TEST(CoreCost, GemmTileReadsTheTileOnceForTheWholeBlock) {
  WaferSpec spec = testing::small_spec();
  spec.sram_read_bytes_per_cycle = Bytes{4};
  CoreCostModel cost(spec);
  // 24 x 40 bf16 tile, narrow 4 B/cycle reads: one token is SRAM-bound
  // (1920 B / 4 = 480 > 960 / 8 = 120): 490. A block of 8 tokens reads the
  // tile once (480) but multiplies 8 x 960 = 7680 MACs / 8 lanes = 960
  // cycles: compute-bound, 970 -- less than 8 GEMVs (8 x 490 = 3920).
  EXPECT_EQ(cost.gemm_tile(24, 40, 1, 16).cycles.value, cost.gemv_tile(24, 40, 16).cycles.value);
  EXPECT_EQ(cost.gemm_tile(24, 40, 1, 16).cycles.value, 490u);
  EXPECT_EQ(cost.gemm_tile(24, 40, 1, 16).bound, Resource::sram);
  const CoreCost block = cost.gemm_tile(24, 40, 8, 16);
  EXPECT_EQ(block.cycles.value, 970u);
  EXPECT_EQ(block.bound, Resource::compute);
}

// Each vector instruction adds instruction_overhead: a GEMV tile issues one
// per input element (column), a block of tokens one per column per token, a
// vector operation one per operation, attention one per query element and
// one per position for each head plus its 4 softmax operations. The
// overhead is start-up (CoreCost::overhead), whatever bounds the rest.
TEST(CoreCost, EachVectorInstructionAddsItsOverhead) {
  WaferSpec spec = testing::small_spec();
  spec.instruction_overhead = Cycles{27};
  CoreCostModel cost(spec);
  // 24 x 40 bf16 tile: 120 (as above) + 10 task + 40 columns x 27 = 1,210.
  const CoreCost gemv = cost.gemv_tile(24, 40, 16);
  EXPECT_EQ(gemv.cycles.value, 120u + 10u + 40u * 27u);
  EXPECT_EQ(gemv.overhead.value, 10u + 40u * 27u);
  EXPECT_EQ(gemv.bound, Resource::compute);
  // 15 x 10 (WaferLLM's 8B qkv tile on 420 x 420, fp16): 150 / 8 lanes = 19,
  // 10 instructions: 19 + 10 + 270 = 299.
  EXPECT_EQ(cost.gemv_tile(15, 10, 16).cycles.value, 19u + 10u + 270u);
  // A block of 8 tokens: 960 + 10 + 8 x 40 x 27.
  EXPECT_EQ(cost.gemm_tile(24, 40, 8, 16).cycles.value, 960u + 10u + 8u * 40u * 27u);
  // An fp32 vector op of 3 operations on 100 elements: 300 / 4 = 75, 3 instructions.
  EXPECT_EQ(cost.vector_op(100, 3).cycles.value, 75u + 10u + 3u * 27u);
  // Attention, 4 heads over 10 positions of head_dim 8 (16-bit cache):
  // 4 x 10 x (2 x 8 + 4) = 800 MACs / 8 = 100 cycles; reads 2 x 10 x 8 x 2 B =
  // 320 B / 16 = 20; instructions 4 x (8 + 10 + 4) = 88.
  EXPECT_EQ(cost.attention(10, 8, 4, 16).cycles.value, 100u + 10u + 88u * 27u);
  // Without it (0, the default) the tile is as before.
  spec.instruction_overhead = Cycles{0};
  EXPECT_EQ(CoreCostModel(spec).gemv_tile(24, 40, 16).cycles.value, 130u);
}

TEST(CoreTimeline, ACoreRunsOneTaskAtATime) {
  const WaferSpec spec = testing::small_spec();
  CoreCostModel cost(spec);
  const Mesh mesh(3, 2);
  CoreTimeline cores(mesh);
  const CoreCost c = cost.gemv_tile(8, 8, 16);  // 8 + 10 = 18 cycles
  const Timed a = cores.run(Coord{1, 0}, Timed{}, c);
  const Timed b = cores.run(CoreId{1}, Timed{Cycles{5}, {}}, c);  // the same core by id
  EXPECT_EQ(a.at.value, 18u);
  EXPECT_EQ(b.at.value, 36u);
  EXPECT_EQ(b.path.queueing.value, 13u);
  EXPECT_EQ(cores.busy_cycles(CoreId{1}), 36u);
  EXPECT_EQ(cores.busy_cycles(CoreId{0}), 0u);
  // Another core, and the busy cycles by core id (row-major) as results
  // report them, whatever order the timeline keeps them in.
  cores.run(Coord{2, 1}, Timed{}, c);
  const std::vector<std::uint64_t> by_id = cores.busy_cycles_by_core();
  ASSERT_EQ(by_id.size(), 6u);
  EXPECT_EQ(by_id[1], 36u);
  EXPECT_EQ(by_id[mesh.id(Coord{2, 1}).value], 18u);
  EXPECT_EQ(by_id[mesh.id(Coord{1, 1}).value], 0u);
  EXPECT_EQ(cores.busy_cycles(Coord{2, 1}), 18u);
}

// A task's explanation is ready.not_before(free, queueing), then the
// start-up as compute, then the rest as the cost's bound, whatever the bound
// (run() writes these sums out field by field), and run_in_place the same.
TEST(CoreTimeline, ExplainsEachTaskAsTheTimedRulesDo) {
  const Mesh mesh(2, 2);
  CoreTimeline cores(mesh), in_place(mesh);
  Timed ready{Cycles{7}, {}};
  ready.path.hops = Cycles{3};
  ready.path.compute = Cycles{2};
  ready.path.sram = Cycles{1};
  ready.path.contention = Cycles{1};
  std::uint64_t free = 0;
  for (const Resource bound : {Resource::compute, Resource::sram, Resource::io, Resource::compute,
                               Resource::contention, Resource::sram}) {
    const CoreCost cost{Cycles{40}, Cycles{6}, bound};
    const Timed want = ready.not_before(Cycles{free}, Resource::queueing)
                           .plus(Resource::compute, cost.overhead)
                           .plus(bound, cost.cycles - cost.overhead);
    const Timed got = cores.run(Coord{1, 1}, ready, cost);
    EXPECT_EQ(got.at, want.at);
    for (const Resource r :
         {Resource::compute, Resource::sram, Resource::hops, Resource::serialization,
          Resource::contention, Resource::io, Resource::queueing})
      EXPECT_EQ(got.path[r], want.path[r]) << static_cast<int>(r);
    EXPECT_EQ(got.path.total(), got.at);
    // run_in_place: the same task on the same core, written over its input.
    Timed t = ready;
    in_place.run_in_place(Coord{1, 1}, t, cost);
    EXPECT_EQ(t.at, want.at);
    EXPECT_TRUE(t.path == want.path);
    EXPECT_EQ(in_place.busy_cycles(Coord{1, 1}), cores.busy_cycles(Coord{1, 1}));
    free = got.at.value;
    ready = ready.plus(Resource::hops, Cycles{11});  // before the core is free or not
  }
}

}  // namespace
}  // namespace wafersim::fabric
