// sim::PhaseValues on hand-made vectors: sums spread over pieces added in
// the chain's order, the gate/up interleaving of SwiGLU, biases, the pieces
// of a head, the weighted sum of experts in chosen order, and activations
// held in 16 bits (placement.fabric_bits: 16).
#include "sim/exec/phase_values.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "models/dtype.hpp"
#include "models/kernels.hpp"

namespace wafersim::sim {
namespace {

Vec on_pieces(std::vector<float> values, Layout layout, int tokens = 1) {
  Vec v;
  v.layout = std::move(layout);
  v.ready.assign(v.layout.size(), Timed{});
  v.values = std::move(values);
  v.tokens = tokens;
  return v;
}

TEST(PhaseValues, PiecesOfARange) {
  // head_dim 4: pieces [0, 6), [6, 8), [8, 12).
  const Layout l = {Piece{Coord{0, 0}, 0, 6, 0}, Piece{Coord{0, 1}, 6, 8, 0},
                    Piece{Coord{0, 2}, 8, 12, 0}};
  EXPECT_EQ(pieces_of_range(l, 0, 4), (std::pair<std::size_t, std::size_t>{0, 0}));
  EXPECT_EQ(pieces_of_range(l, 4, 8), (std::pair<std::size_t, std::size_t>{0, 1}));
  EXPECT_EQ(pieces_of_range(l, 8, 12), (std::pair<std::size_t, std::size_t>{2, 2}));
  EXPECT_EQ(pieces_of_range(l, 5, 9), (std::pair<std::size_t, std::size_t>{0, 2}));
}

// The sum of squares of a vector on two pieces is the chain's: piece 1's
// partial added to piece 0's (fabric::reduction_order). Float addition is
// not associative: x = (4096, 1 x 8) gives 2^24 + 8 that way, but 2^24 if
// the squares are added one by one from the first (each 1 is lost at 2^24,
// where fp32's spacing is 2), and a different normalisation.
TEST(PhaseValues, RmsNormAddsThePiecesInTheChainsOrder) {
  models::ModelConfig model;
  model.rms_norm_eps = 0.0;
  Placement pl;
  const models::Weights w;
  const PhaseValues values(model, pl, w);
  const Layout l = {Piece{Coord{0, 0}, 0, 1, 0}, Piece{Coord{0, 1}, 1, 9, 0}};
  std::vector<float> xs(9, 1.0f);
  xs[0] = 4096.0f;
  const Vec x = on_pieces(xs, l);
  const std::vector<float> g(9, 1.0f);
  Vec out = on_pieces({}, l);
  values.rmsnorm(x, g, fabric::ReductionScheme::chain, out);
  std::vector<float> expected(9), one_by_one(9);
  models::rmsnorm_apply(xs, 16777224.0f, 9, g, 0.0f, expected);
  EXPECT_EQ(out.values, expected);
  ASSERT_EQ(models::sum_of_squares(xs), 16777216.0f);
  models::rmsnorm_apply(xs, models::sum_of_squares(xs), 9, g, 0.0f, one_by_one);
  EXPECT_NE(out.values, one_by_one);
}

TEST(PhaseValues, SiluMulTakesInterleavedGateAndUpRows) {
  models::ModelConfig model;
  Placement pl;
  const models::Weights w;
  const PhaseValues values(model, pl, w);
  // [g0, u0, g1, u1] of two tokens.
  const Vec gu = on_pieces({1.0f, 2.0f, -1.0f, 3.0f, 0.5f, 4.0f, 2.0f, -1.0f},
                           {Piece{Coord{0, 0}, 0, 4, 0}}, 2);
  Vec out = on_pieces({}, {Piece{Coord{0, 0}, 0, 2, 0}}, 2);
  values.silu_mul(gu, out);
  const std::vector<float> g = {1.0f, -1.0f, 0.5f, 2.0f}, u = {2.0f, 3.0f, 4.0f, -1.0f};
  std::vector<float> expected(4);
  models::silu_mul(g, u, expected);
  EXPECT_EQ(out.values, expected);
}

TEST(PhaseValues, ExpertsAreSummedInChosenOrderWithTheirWeights) {
  models::ModelConfig model;
  model.hidden_size = 2;
  Placement pl;
  const models::Weights w;
  const PhaseValues values(model, pl, w);
  // Two tokens; token 0 chose experts 1 then 0, token 1 chose expert 1 only.
  const std::vector<std::vector<models::ExpertChoice>> chosen = {{{1, 0.25f}, {0, 0.75f}},
                                                                 {{1, 1.0f}}};
  const std::vector<std::vector<int>> users_of = {{0}, {0, 1}};
  std::vector<Vec> outputs(2);
  outputs[0] = on_pieces({4.0f, 8.0f}, {Piece{Coord{0, 0}, 0, 2, 0}});
  outputs[1] = on_pieces({1.0f, 2.0f, 10.0f, 20.0f}, {Piece{Coord{0, 0}, 0, 2, 0}}, 2);
  Vec out = on_pieces({}, {Piece{Coord{0, 0}, 0, 2, 0}}, 2);
  values.combine_experts(chosen, users_of, outputs, out);
  // Token 0: 0.25 * (1, 2) + 0.75 * (4, 8) = (3.25, 6.5); token 1: (10, 20).
  EXPECT_EQ(out.values, (std::vector<float>{3.25f, 6.5f, 10.0f, 20.0f}));
}

// placement.fabric_bits: 16 holds activations in the 16-bit float the
// weights' vectors are stored in: fp16 for fp16 weights, else bf16.
TEST(PhaseValues, SixteenBitValuesAreHeldInTheWeightsVectorFormat) {
  using models::DType;
  for (DType t : {DType::fp32, DType::fp16, DType::bf16, DType::fp8_e4m3, DType::int8})
    EXPECT_EQ(held_dtype(4, t), DType::fp32);
  EXPECT_EQ(held_dtype(2, DType::fp16), DType::fp16);
  for (DType t : {DType::fp32, DType::bf16, DType::fp8_e4m3, DType::int8})
    EXPECT_EQ(held_dtype(2, t), DType::bf16);
  EXPECT_THROW(held_dtype(1, DType::bf16), std::invalid_argument);
}

// What a phase writes is rounded to the held format: 1 + 2^-9 is bf16's 1
// (its spacing at 1 is 2^-7) but exact in fp16 (2^-10); 1 + 2^-12 is fp16's 1.
TEST(PhaseValues, SixteenBitActivationsAreRoundedWhereTheyAreWritten) {
  models::ModelConfig model;
  const Layout l = {Piece{Coord{0, 0}, 0, 2, 0}};
  const Vec a = on_pieces({1.0f, 1.0f}, l), b = on_pieces({0x1p-9f, 0x1p-12f}, l);
  auto add = [&](int value_bytes, models::DType weights) {
    Placement pl;
    pl.value_bytes = value_bytes;
    models::Weights w;
    w.dtype = weights;
    const PhaseValues values(model, pl, w);
    Vec out = on_pieces({}, l);
    values.add(a, b, out);
    return out.values;
  };
  EXPECT_EQ(add(4, models::DType::bf16), (std::vector<float>{1.0f + 0x1p-9f, 1.0f + 0x1p-12f}));
  EXPECT_EQ(add(2, models::DType::bf16), (std::vector<float>{1.0f, 1.0f}));
  EXPECT_EQ(add(2, models::DType::fp16), (std::vector<float>{1.0f + 0x1p-9f, 1.0f}));
}

// A ring of two cores: core 1's partial goes to core 0, which adds its own
// and sends the sum back. With 16-bit values each is rounded as it is sent,
// not only the sum: in bf16, 1 + 2^-8 + 2^-10 is sent as 1 + 2^-7, so core 0
// gets -2^-7 + (1 + 2^-7) = 1 exactly; rounding only the sum would give
// bf16(1 - 3 * 2^-10) = 1 - 2^-8. fp16 holds the partial exactly, and the
// sum, 1 - 3 * 2^-10 (a multiple of its spacing 2^-11 below 1), too.
TEST(PhaseValues, ARingSendsEachPartialRoundedToSixteenBits) {
  auto ring = [](models::DType held) {
    std::vector<float> partials = {-0x1p-7f, 1.0f + 0x1p-8f + 0x1p-10f};
    std::vector<float> out(1);
    PhaseValues::ring_band(2, 1, 0, 1, partials, out, held);
    return out[0];
  };
  EXPECT_EQ(ring(models::DType::fp32), 1.0f - 3 * 0x1p-10f);
  EXPECT_EQ(ring(models::DType::bf16), 1.0f);
  EXPECT_EQ(models::round_to_dtype(1.0f - 3 * 0x1p-10f, models::DType::bf16), 1.0f - 0x1p-8f);
  EXPECT_EQ(ring(models::DType::fp16), 1.0f - 3 * 0x1p-10f);
}

}  // namespace
}  // namespace wafersim::sim
