#include "fabric/core_cost.hpp"

#include <gtest/gtest.h>

#include "test_spec.hpp"

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

TEST(CoreTimeline, ACoreRunsOneTaskAtATime) {
  const WaferSpec spec = testing::small_spec();
  CoreCostModel cost(spec);
  CoreTimeline cores(4);
  const CoreCost c = cost.gemv_tile(8, 8, 16);  // 8 + 10 = 18 cycles
  const Timed a = cores.run(CoreId{1}, Timed{}, c);
  const Timed b = cores.run(CoreId{1}, Timed{Cycles{5}, {}}, c);
  EXPECT_EQ(a.at.value, 18u);
  EXPECT_EQ(b.at.value, 36u);
  EXPECT_EQ(b.path.queueing, 13u);
  EXPECT_EQ(cores.busy_cycles(CoreId{1}), 36u);
  EXPECT_EQ(cores.busy_cycles(CoreId{0}), 0u);
}

}  // namespace
}  // namespace wafersim::fabric
