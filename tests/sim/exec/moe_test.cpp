// A mixture of experts on the executor (no SystemC): the router's choice
// decides which experts' cores work, and timing-only runs choose experts
// seeded, uniformly and distinctly.
#include <gtest/gtest.h>

#include <array>

#include "models/kernels.hpp"
#include "models/weights.hpp"
#include "sim/exec/executor.hpp"
#include "sim/program/program.hpp"
#include "support/presets.hpp"
#include "support/test_spec.hpp"

namespace wafersim::sim {
namespace {

// The router's choice drives which expert rectangles work: one token through
// layer 0 of tiny-mixtral, and exactly the cores of the two experts that an
// independent computation (RMSNorm of the embedding row, router GEMV, top 2
// by the reference kernels) picks have been busy; the other experts' cores
// never ran.
TEST(Moe, OnlyTheChosenExpertsRegionsWork) {
  const models::ModelConfig model = testing::preset_model("tiny-mixtral");
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
  const models::ModelConfig model = testing::preset_model("tiny-mixtral");  // 4 experts, top 2
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

}  // namespace
}  // namespace wafersim::sim
