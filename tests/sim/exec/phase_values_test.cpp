// sim::PhaseValues on hand-made vectors: sums spread over pieces added in
// the chain's order, the gate/up interleaving of SwiGLU, biases, the pieces
// of a head, and the weighted sum of experts in chosen order.
#include "sim/exec/phase_values.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

}  // namespace
}  // namespace wafersim::sim
