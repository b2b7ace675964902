// Step models: the wafer's grid interpolation reproduces any function linear
// in each coordinate exactly (on and off the grid), clamps users to the grid,
// extrapolates the context linearly, and refuses an incomplete grid.
#include "sim/serving/step_model.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace wafersim::sim::serving {
namespace {

// step = 1 ms + 20 us per user + 10 ns per position + 1 ns per user x position.
double decode_law(double users, double context) {
  return 1e-3 + 20e-6 * users + 10e-9 * context + 1e-9 * users * context;
}
// prefill = 0.2 ms + 3 us per token + 0.5 ns per token x cached position.
double prefill_law(double tokens, double context) {
  return 0.2e-3 + 3e-6 * tokens + 0.5e-9 * tokens * context;
}

WaferSteps grid_model() {
  std::vector<GridPoint> decode, prefill;
  for (int u : {1, 4, 16})
    for (long long c : {0LL, 1024LL, 4096LL}) decode.push_back({u, c, 0, decode_law(u, c)});
  for (long long n : {128LL, 1024LL})
    for (long long c : {0LL, 4096LL}) prefill.push_back({1, c, n, prefill_law(n, c)});
  return WaferSteps(decode, prefill, KvCapacity{16, 8192, 0}, 1000.0, 1e9);
}

TEST(WaferSteps, BilinearIsExactForBilinearLaws) {
  const WaferSteps m = grid_model();
  for (double u : {1.0, 2.0, 7.0, 16.0})
    for (double c : {0.0, 100.0, 3000.0, 4096.0})
      EXPECT_NEAR(m.decode_step_s(u, c), decode_law(u, c), 1e-15) << u << " " << c;
  for (double n : {128.0, 500.0, 1024.0})
    for (double c : {0.0, 2048.0})
      EXPECT_NEAR(m.prefill_s(n, c), prefill_law(n, c), 1e-15) << n << " " << c;
}

TEST(WaferSteps, ContextExtrapolatesUsersClamp) {
  const WaferSteps m = grid_model();
  EXPECT_NEAR(m.decode_step_s(4, 8192), decode_law(4, 8192), 1e-15);  // linear past the end
  EXPECT_DOUBLE_EQ(m.decode_step_s(64, 1024), decode_law(16, 1024));  // clamped to 16 users
  EXPECT_NEAR(m.prefill_s(4096, 0), prefill_law(4096, 0), 1e-15);
}

TEST(WaferSteps, MixedIterationIsDecodePlusPrefillOccupancy) {
  const WaferSteps m = grid_model();
  Iteration it;
  it.decode_sequences = 4;
  it.decode_context = 4 * 1024;
  it.prefill_sequences = 1;
  it.prefill_tokens = 500;
  it.prefill_context = 2048 + 500;  // 2048 cached
  // The prompt costs the iteration its occupancy: its prefill less the fill
  // latency (the law at 0 tokens, 0.2 ms), which its first token pays after.
  EXPECT_NEAR(m.fill_latency_s(2048), 0.2e-3, 1e-15);
  EXPECT_NEAR(m.iteration_s(it), decode_law(4, 1024) + prefill_law(500, 2048) - 0.2e-3, 1e-15);
  EXPECT_DOUBLE_EQ(m.iteration_s(Iteration{}), 0.0);
  // 1000 tokens x 1000 B at 1 GB/s.
  EXPECT_DOUBLE_EQ(m.kv_transfer_s(1000), 1e-3);
}

TEST(WaferSteps, RefusesAnIncompleteGrid) {
  std::vector<GridPoint> decode = {{1, 0, 0, 1e-3}, {2, 0, 0, 1e-3}, {1, 100, 0, 1e-3}};
  std::vector<GridPoint> prefill = {{1, 0, 128, 1e-3}};
  EXPECT_THROW(WaferSteps(decode, prefill, {}, 0.0, 0.0), std::invalid_argument);
}

}  // namespace
}  // namespace wafersim::sim::serving

namespace wafersim::sim::serving {
namespace {

// u prompts sent together have the last first token at prefill(n) +
// occupancy(n) x r(u) x (u - 1): a grid measuring r = 0.5 with 2 prompts in
// flight and r = 1.5 with 8 makes an iteration of 5 equal chunks (halfway in
// the number of prompts) cost the occupancy of one x (1 + 1.0 x 4).
TEST(WaferSteps, PromptsInFlightCostTheShareMeasuredWithAsMany) {
  std::vector<GridPoint> decode = {{1, 0, 0, 1e-3}, {1, 100, 0, 1e-3}};
  const double fill = 0.2e-3, per_token = 3e-6;
  std::vector<GridPoint> prefill;
  for (long long n : {128LL, 1024LL}) {
    prefill.push_back({1, 0, n, fill + per_token * n});
    prefill.push_back({1, 4096, n, fill + per_token * n});
    prefill.push_back({2, 0, n, fill + per_token * n * (1.0 + 0.5 * 1.0)});
    prefill.push_back({8, 0, n, fill + per_token * n * (1.0 + 1.5 * 7.0)});
  }
  const WaferSteps m(decode, prefill, KvCapacity{8, 8192, 0}, 1000.0, 1e9);
  EXPECT_NEAR(m.stream_share(2, 500), 0.5, 1e-12);
  EXPECT_NEAR(m.stream_share(8, 500), 1.5, 1e-12);
  EXPECT_NEAR(m.stream_share(5, 500), 1.0, 1e-12);
  EXPECT_NEAR(m.stream_share(16, 500), 1.5, 1e-12);  // clamped beyond the grid
  Iteration it;
  it.prefill_sequences = 5;
  it.prefill_tokens = 5 * 500;
  it.prefill_context = 5 * 500;
  EXPECT_NEAR(m.iteration_s(it), per_token * 500 * (1.0 + 1.0 * 4), 1e-12);
  it.prefill_sequences = 1;
  it.prefill_tokens = 500;
  it.prefill_context = 500;
  EXPECT_NEAR(m.iteration_s(it), per_token * 500, 1e-12);
  // 1024 tokens measured with 2 prompts only (the calibration's token
  // budget): with more, the share with 2.
  prefill.pop_back();
  prefill.back().step_s = fill + per_token * 1024 * (1.0 + 0.25 * 1.0);
  const WaferSteps b(decode, prefill, KvCapacity{8, 8192, 0}, 1000.0, 1e9);
  EXPECT_NEAR(b.stream_share(8, 1024), 0.25, 1e-12);
  EXPECT_NEAR(b.stream_share(8, 128), 1.5, 1e-12);
}

// The first of several prompts sent together passes after its occupancy
// times (1 + h), h measured on the same runs (the others' arrival delays
// it); the later ones share the rest of the iteration evenly, the last at
// its end exactly. Measured h: 0.25 with 2 prompts, 2.0 with 8; r as above.
TEST(WaferSteps, PromptsOfAnIterationPassOneAfterAnother) {
  std::vector<GridPoint> decode = {{1, 0, 0, 1e-3}, {1, 100, 0, 1e-3}};
  const double fill = 0.2e-3, per_token = 3e-6;
  std::vector<GridPoint> prefill;
  for (long long n : {128LL, 1024LL}) {
    const double occupancy = per_token * n;
    prefill.push_back({1, 0, n, fill + occupancy});
    prefill.push_back({1, 4096, n, fill + occupancy});
    prefill.push_back(
        {2, 0, n, fill + occupancy * (1.0 + 0.5 * 1.0), fill + occupancy * (1.0 + 0.25)});
    prefill.push_back(
        {8, 0, n, fill + occupancy * (1.0 + 1.5 * 7.0), fill + occupancy * (1.0 + 2.0)});
  }
  const WaferSteps m(decode, prefill, KvCapacity{8, 8192, 0}, 1000.0, 1e9);
  EXPECT_NEAR(m.head_share(2, 500), 0.25, 1e-12);
  EXPECT_NEAR(m.head_share(8, 500), 2.0, 1e-12);
  EXPECT_NEAR(m.head_share(5, 500), 1.125, 1e-12);
  EXPECT_DOUBLE_EQ(m.head_share(1, 500), 0.0);
  // 5 equal chunks of 500: one = 1.5 ms; r = 1, h = 1.125, each later one
  // (1 x 4 - 1.125) / 4 = 0.71875 of one.
  const double one = per_token * 500;
  Iteration it;
  it.prefill_sequences = 5;
  it.prefill_tokens = 5 * 500;
  it.prefill_context = 5 * 500;
  const std::vector<PromptChunk> five(5, PromptChunk{500, 0});
  std::vector<double> ends = m.chunk_ends_s(it, five);
  ASSERT_EQ(ends.size(), 5u);
  for (int k = 0; k < 4; ++k)
    EXPECT_NEAR(ends[static_cast<std::size_t>(k)], one * (2.125 + 0.71875 * k), 1e-12) << k;
  EXPECT_EQ(ends[4], m.iteration_s(it));
  EXPECT_NEAR(m.stream_prefill_s(5, 500, 0), fill + one * 2.125, 1e-12);
  EXPECT_NEAR(m.stream_prefill_s(5, 500, 4), fill + one * 5.0, 1e-12);
  // Decode tokens in the iteration go first: every chunk passes a step later.
  it.decode_sequences = 1;
  it.decode_context = 50;
  ends = m.chunk_ends_s(it, five);
  EXPECT_NEAR(ends[0], 1e-3 + one * 2.125, 1e-12);
  EXPECT_EQ(ends[4], m.iteration_s(it));
  // Unequal chunks share the iteration by their own occupancies: 200 and 800
  // tokens (mean 500, r = 0.5, h = 0.25): weights 0.6 ms x 1.25 and 2.4 ms x
  // 0.25 of the iteration's 2.25 ms.
  Iteration two;
  two.prefill_sequences = 2;
  two.prefill_tokens = 1000;
  two.prefill_context = 1000;
  ends = m.chunk_ends_s(two, {PromptChunk{200, 0}, PromptChunk{800, 0}});
  EXPECT_NEAR(ends[0], 2.25e-3 * 0.75 / 1.35, 1e-12);
  EXPECT_EQ(ends[1], m.iteration_s(two));
  // Without first-prompt measurements (h = 0): the brief's even sharing, the
  // first after its occupancy alone.
  for (GridPoint& p : prefill) p.first_s = 0.0;
  const WaferSteps plain(decode, prefill, KvCapacity{8, 8192, 0}, 1000.0, 1e9);
  it.decode_sequences = 0;
  it.decode_context = 0;
  EXPECT_NEAR(plain.chunk_ends_s(it, five)[0], one, 1e-12);
  EXPECT_NEAR(plain.chunk_ends_s(it, five)[2], one * 3.0, 1e-12);
}

}  // namespace
}  // namespace wafersim::sim::serving
