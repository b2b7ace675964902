#include "sim/placement/placement.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "sim/program/program.hpp"
#include "support/presets.hpp"
#include "support/test_spec.hpp"

namespace wafersim::sim {
namespace {

models::ModelConfig tiny() {
  return testing::preset_model("tiny-llama");
}

std::vector<const MatrixPlacement*> matrices(const Placement& pl) {
  std::vector<const MatrixPlacement*> all;
  for (const LayerStage& st : pl.layers)
    for (const MatrixPlacement* m : {&st.qkv, &st.o, &st.gate_up, &st.down}) all.push_back(m);
  all.push_back(&pl.head.lm_head);
  if (!pl.head.tied) all.push_back(&pl.head.embedding);
  return all;
}

bool overlap(const fabric::Rect& a, const fabric::Rect& b) {
  return a.x0 < b.x0 + b.width && b.x0 < a.x0 + a.width && a.y0 < b.y0 + b.height &&
         b.y0 < a.y0 + a.height;
}

TEST(MatrixPlacement, AnUpwardMatrixCountsItsTileRowsFromTheBottom) {
  MatrixPlacement m;
  m.out_features = 6;
  m.in_features = 4;
  m.rect = fabric::Rect{5, 10, 2, 3};
  EXPECT_EQ(m.core(0, 1), (Coord{6, 10}));
  EXPECT_EQ(m.multicast_direction(), fabric::Direction::south);
  m.upward = true;
  EXPECT_EQ(m.core(0, 1), (Coord{6, 12}));
  EXPECT_EQ(m.root(2), (Coord{5, 10}));
  EXPECT_EQ(m.multicast_direction(), fabric::Direction::north);
}

// Llama-3.1-8B's shapes (32 query heads over 8 kv heads, head_dim 128: g = 4,
// a group of 6 x 128 = 768 rows), row by row as the two orders put them.
TEST(QkvRows, GroupedByKvHeadEachKvHeadsQueryKeyAndValueAreOneRun) {
  models::ModelConfig m;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  const QkvRows plain(m, false), grouped(m, true);
  // The checkpoint's order: q 0..4095, k 4096..5119, v 5120..6143.
  EXPECT_EQ(plain.q(5), 640);
  EXPECT_EQ(plain.k(3), 4096 + 384);
  EXPECT_EQ(plain.v(3), 5120 + 384);
  EXPECT_EQ(plain.rotary(32 + 2), 4096 + 256);  // the third key head
  // Grouped: kv head 3 is rows 2304..3071: query heads 12..15, key, value.
  EXPECT_EQ(grouped.q(12), 2304);
  EXPECT_EQ(grouped.q(15), 2304 + 384);
  EXPECT_EQ(grouped.k(3), 2304 + 512);
  EXPECT_EQ(grouped.v(3), 2304 + 640);
  EXPECT_EQ(grouped.q(5), 768 + 128);  // kv head 1's second query head
  EXPECT_EQ(grouped.rotary(32 + 7), 7 * 768 + 512);
  // Query and key rows (the ones RoPE and qk-norm touch) in a range.
  EXPECT_EQ(plain.qk_rows_in(0, 6144), 5120);
  EXPECT_EQ(plain.qk_rows_in(5000, 5200), 120);
  EXPECT_EQ(grouped.qk_rows_in(0, 6144), 5120);
  EXPECT_EQ(grouped.qk_rows_in(600, 800), 40 + 32);  // k 600..639, then kv head 1's q
  EXPECT_EQ(grouped.qk_rows_in(640, 768), 0);        // kv head 0's value
  EXPECT_EQ(grouped.qk_rows_in(700, 700), 0);
  // Every row is named once in either order.
  for (const QkvRows* o : {&plain, &grouped}) {
    std::vector<int> seen(6144, 0);
    for (int h = 0; h < 32; ++h)
      for (int d = 0; d < 128; ++d) ++seen[static_cast<std::size_t>(o->q(h) + d)];
    for (int h = 0; h < 8; ++h)
      for (int d = 0; d < 128; ++d) {
        ++seen[static_cast<std::size_t>(o->k(h) + d)];
        ++seen[static_cast<std::size_t>(o->v(h) + d)];
      }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 6144);
  }
}

// layer-rectangles turns every other layer over: layer 2i top-down (qkv,
// attention, o, gate_up, down from the top of its strip), layer 2i + 1 the
// mirror image, every matrix upward. So a layer's output (down's roots) and
// the next layer's input (o's roots) are in the same half of the strips, and
// the move between them is short, both ways.
TEST(Placement, LayerRectanglesStacksEveryOtherLayerBottomUp) {
  const models::ModelConfig model = tiny();
  fabric::Fabric fab(fabric::testing::small_spec(32, 32));
  PlacementRequest req;
  req.context_tokens = 24;
  const Placement pl = place(model, fab, req);
  ASSERT_GE(pl.layers.size(), 4u);
  const LayerStage& even = pl.layers[2];
  const LayerStage& odd = pl.layers[3];
  EXPECT_FALSE(even.upward());
  EXPECT_TRUE(odd.upward());
  EXPECT_LT(even.qkv.rect.y0, even.o.rect.y0);
  EXPECT_LT(even.o.rect.y0, even.down.rect.y0);
  EXPECT_GT(odd.qkv.rect.y0, odd.o.rect.y0);
  EXPECT_GT(odd.o.rect.y0, odd.down.rect.y0);
  // Mirror images of each other in their strips.
  const fabric::Rect& s = even.strip;
  ASSERT_EQ(odd.strip.y0, s.y0);
  ASSERT_EQ(odd.strip.height, s.height);
  auto mirrored = [&](const fabric::Rect& a, const fabric::Rect& b) {
    return a.height == b.height && b.y0 - s.y0 == s.height - (a.y0 - s.y0) - a.height;
  };
  for (const auto& [a, b] :
       {std::pair{&even.qkv, &odd.qkv}, std::pair{&even.o, &odd.o},
        std::pair{&even.gate_up, &odd.gate_up}, std::pair{&even.down, &odd.down}}) {
    EXPECT_TRUE(mirrored(a->rect, b->rect)) << a->name;
    EXPECT_FALSE(a->upward);
    EXPECT_TRUE(b->upward) << b->name;
  }
  EXPECT_TRUE(mirrored(even.attention.rect, odd.attention.rect));
  // The input of an upward matrix enters at its bottom row.
  for (const Piece& p : input_layout(odd.qkv))
    EXPECT_EQ(p.core.y, odd.qkv.rect.y0 + odd.qkv.rect.height - 1);
  // Down's roots of layer 1 (bottom-up: at the top) to o's roots of layer 2
  // (top-down: high in the strip), and of layer 2 (at the bottom) to layer
  // 3's (low): each vertical trip shorter than from a top-down layer's
  // down roots to its own o roots, the trip to the next layer when every
  // layer was top-down.
  auto farthest = [](const Layout& from, const Layout& to) {
    int far = 0;
    for (const Piece& a : from)
      for (const Piece& b : to) far = std::max(far, std::abs(a.core.y - b.core.y));
    return far;
  };
  const int all_top_down = farthest(output_layout(even.down), output_layout(even.o));
  for (std::size_t l : {1u, 2u})
    EXPECT_LT(farthest(output_layout(pl.layers[l].down), output_layout(pl.layers[l + 1].o)),
              all_top_down / 2)
        << "layer " << l << " to " << l + 1;
  // A mixture of experts' layers hand the residual on from o's roots to o's
  // roots, in the same rows while no layer is turned: none is.
  fabric::Fabric moe_fab(fabric::testing::small_spec(32, 32));
  const Placement moe = place(testing::preset_model("tiny-mixtral"), moe_fab, req);
  for (const LayerStage& st : moe.layers) {
    EXPECT_FALSE(st.upward()) << "layer " << st.layer;
    EXPECT_FALSE(st.router.upward);
  }
}

TEST(Placement, WeightBytesOnTheWaferEqualTheModelsParameterBytes) {
  // Conservation: every parameter is stored exactly once, at 2 bytes (bf16).
  for (bool tied : {false, true}) {
    models::ModelConfig m = tiny();
    m.tie_embeddings = tied;
    fabric::Fabric fab(fabric::testing::small_spec(32, 32));
    PlacementRequest req;
    req.context_tokens = 24;
    place(m, fab, req);
    EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2)
        << "tied=" << tied;
    // KV cache: each layer reserves whole slots per core, at least the context.
    const std::uint64_t kv_min = static_cast<std::uint64_t>(m.num_layers) * 24 * 2 * m.kv_dim() * 2;
    EXPECT_GE(fab.sram().used_for(fabric::SramUse::kv_cache).value, kv_min);
  }
}

// The same conservation for the other architectures: every expert and the
// router (mixtral, qwen3_moe), biases, LayerNorm biases and position
// embeddings (gpt2), qk-norm gains (qwen3, qwen3_moe), q/k/v biases
// (attention_bias).
TEST(Placement, EveryArchitecturesWeightBytesEqualItsParameterBytes) {
  for (const char* name :
       {"tiny-mixtral", "tiny-gpt2", "tiny-qwen3", "tiny-mistral", "tiny-qwen3-moe"}) {
    for (bool bias : {false, true}) {
      models::ModelConfig m = testing::preset_model(name);
      if (bias && m.is_gpt2()) continue;  // gpt2 has them anyway
      m.attention_bias = bias;
      fabric::Fabric fab(fabric::testing::small_spec(32, 32));
      PlacementRequest req;
      req.context_tokens = 24;
      const Placement pl = place(m, fab, req);
      EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2)
          << name << " bias=" << bias;
      if (m.is_moe()) {
        ASSERT_EQ(pl.layers[0].experts.size(), static_cast<std::size_t>(m.num_experts));
        EXPECT_EQ(pl.layers[0].router.out_features, m.num_experts);
        EXPECT_EQ(pl.layers[0].gate_up.p(), 0);  // no dense MLP
      }
      if (m.is_gpt2()) {
        EXPECT_EQ(pl.head.position_embedding.out_features, m.max_position);
        EXPECT_EQ(pl.layers[0].gate_up.out_features, m.intermediate_size);  // plain up
        EXPECT_EQ(pl.layers[0].gate_up.row_granule, 1);
      }
    }
  }
}

// Every matrix of a mixture of experts, each expert's own, lies inside its
// layer's strip, and no two overlap (each expert has its own region).
TEST(Placement, ProgressReportsEveryWaferOfThePlanThenItsEnd) {
  // Three wafers, every strategy: (3, 0), (3, 1), (3, 2), then (3, 3), in
  // order; the plan does not depend on whether anyone listens.
  for (const std::string& strategy : placement_strategies()) {
    PlacementRequest req;
    req.strategy = *parse_strategy(strategy);
    std::vector<std::pair<int, int>> calls;
    req.progress = [&](int wafers, int wafer) { calls.emplace_back(wafers, wafer); };
    const fabric::WaferSpec spec = fabric::testing::small_spec(32, 32);
    const Placement with = plan_placement(tiny(), spec, 3, req);
    EXPECT_EQ(calls, (std::vector<std::pair<int, int>>{{3, 0}, {3, 1}, {3, 2}, {3, 3}}))
        << strategy;
    req.progress = {};
    const Placement without = plan_placement(tiny(), spec, 3, req);
    EXPECT_EQ(with.planner_note, without.planner_note) << strategy;
    EXPECT_EQ(with.estimated_hop_bytes, without.estimated_hop_bytes) << strategy;
  }
}

TEST(Placement, ExpertsHaveDisjointRegionsInsideTheirLayer) {
  const models::ModelConfig m = testing::preset_model("tiny-mixtral");
  fabric::Fabric fab(fabric::testing::small_spec(32, 32));
  PlacementRequest req;
  req.context_tokens = 24;
  const Placement pl = place(m, fab, req);
  for (const LayerStage& st : pl.layers) {
    const auto all = st.matrices();
    ASSERT_EQ(all.size(), 2u + 1u + 2u * static_cast<std::size_t>(m.num_experts));
    for (std::size_t i = 0; i < all.size(); ++i) {
      const fabric::Rect& r = all[i]->rect;
      EXPECT_GE(r.x0, st.strip.x0);
      EXPECT_LE(r.x0 + r.width, st.strip.x0 + st.strip.width);
      EXPECT_GE(r.y0, st.strip.y0);
      EXPECT_LE(r.y0 + r.height, st.strip.y0 + st.strip.height);
      EXPECT_FALSE(overlap(r, st.attention.rect)) << all[i]->name;
      for (std::size_t j = i + 1; j < all.size(); ++j)
        EXPECT_FALSE(overlap(r, all[j]->rect)) << all[i]->name << " / " << all[j]->name;
    }
  }
}

// `model` at bf16 does not fit `fewest - 1` WSE-3s; on `fewest` every
// expert of every layer is placed and the weight bytes on the wafers are the
// parameter bytes exactly. The placement, for more checks.
Placement expect_fewest_wse3_store_every_expert_once(const models::ModelConfig& m, int fewest) {
  const fabric::WaferSpec wse3 = testing::preset_hardware("wse3");
  PlacementRequest req;
  req.context_tokens = 64;
  req.strategy = StrategyKind::layer_rectangles;
  EXPECT_THROW(plan_placement(m, wse3, fewest - 1, req), fabric::FitError);
  std::vector<std::unique_ptr<fabric::Fabric>> fabs;
  std::vector<fabric::Fabric*> ptrs;
  for (int w = 0; w < fewest; ++w) {
    fabs.push_back(std::make_unique<fabric::Fabric>(wse3));
    ptrs.push_back(fabs.back().get());
  }
  Placement pl = place(m, ptrs, req);
  std::uint64_t weights = 0;
  for (const auto& f : fabs) weights += f->sram().used_for(fabric::SramUse::weights).value;
  EXPECT_EQ(weights, m.parameter_count() * 2);
  EXPECT_EQ(pl.layers.size(), static_cast<std::size_t>(m.num_layers));
  for (const LayerStage& st : pl.layers)
    EXPECT_EQ(st.experts.size(), static_cast<std::size_t>(m.num_experts));
  return pl;
}

// Mixtral 8x7B at bf16 (46.7B parameters, 87 GiB: more than the 41 GiB of
// SRAM of two WSE-3s) needs three.
TEST(Placement, Mixtral8x7bNeedsThreeWse3AndStoresEveryExpertOnce) {
  expect_fewest_wse3_store_every_expert_once(testing::preset_model("mixtral-8x7b"), 3);
}

// Qwen3-235B-A22B at bf16 (235B parameters, 438 GiB), many small experts
// (128 per layer, each 1536 wide): each expert's two matrices on rectangles
// of their own in the layer's strip, six layers to a wafer at most, so 16
// WSE-3s and not 15.
TEST(Placement, Qwen3_235bA22bPlacesItsManySmallExpertsOnSixteenWse3) {
  const Placement pl =
      expect_fewest_wse3_store_every_expert_once(testing::preset_model("qwen3-235b-a22b"), 16);
  for (const LayerStage& st : pl.layers) {
    ASSERT_EQ(st.experts.size(), 128u);
    EXPECT_EQ(st.router.out_features, 128);
    EXPECT_EQ(st.experts[0].gate_up.out_features, 2 * 1536);
    EXPECT_EQ(st.experts[0].down.in_features, 1536);
  }
}

// lower() cuts every layer into five stages at its region boundaries; only
// the first moves the layer's input in, only the last hands `out` on.
TEST(Lowering, EveryLayerIsFiveStagesCutAtItsRegions) {
  for (const char* name : {"tiny-llama", "tiny-mixtral", "tiny-gpt2", "tiny-qwen3-moe"}) {
    const models::ModelConfig m = testing::preset_model(name);
    fabric::Fabric fab(fabric::testing::small_spec(32, 32));
    PlacementRequest req;
    req.context_tokens = 24;
    const Placement pl = place(m, fab, req);
    const Program prog = lower(m, pl);
    ASSERT_EQ(prog.stages.size(), 5u * static_cast<std::size_t>(m.num_layers) + 1u) << name;
    for (std::size_t i = 0; i + 1 < prog.stages.size(); ++i) {
      const StageProgram& sp = prog.stages[i];
      EXPECT_EQ(sp.layer, static_cast<int>(i / 5)) << name;
      EXPECT_EQ(sp.continues_layer, i % 5 != 0) << sp.name;
      EXPECT_EQ(sp.ends_layer, i % 5 == 4) << sp.name;
      EXPECT_FALSE(sp.phases.empty()) << sp.name;
    }
    // The attention stage is the attention phase alone.
    ASSERT_EQ(prog.stages[1].phases.size(), 1u);
    EXPECT_EQ(prog.stages[1].phases[0].kind, PhaseKind::attention);
    EXPECT_EQ(prog.stages.back().layer, -1);
  }
}

// The wafer's support gate: every architecture preset passes; a model the
// wafer cannot lower (here a gpt2 with experts, which no scenario can
// declare since ModelConfig::validate refuses it) is an UnsupportedModelError
// naming the model, its architecture and what the wafer runs, not a crash.
TEST(Placement, WaferSupportGateNamesModelArchitectureAndWhatRuns) {
  for (const char* name : {"tiny-llama", "tiny-mixtral", "tiny-gpt2", "tiny-qwen3", "tiny-mistral",
                           "mixtral-8x7b", "tiny-qwen3-moe", "qwen3-235b-a22b"})
    EXPECT_NO_THROW(check_wafer_supports(testing::preset_model(name))) << name;
  models::ModelConfig m = testing::preset_model("tiny-gpt2");
  m.num_experts = 4;
  m.experts_per_token = 2;
  try {
    check_wafer_supports(m);
    FAIL() << "expected UnsupportedModelError";
  } catch (const UnsupportedModelError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tiny-gpt2"), std::string::npos) << what;
    EXPECT_NE(what.find("architecture gpt2"), std::string::npos) << what;
    EXPECT_NE(what.find("the wafer runs"), std::string::npos) << what;
  }
}

TEST(Placement, KvCacheGrowsWithUsers) {
  const models::ModelConfig m = tiny();
  std::uint64_t kv[2];
  for (int users : {1, 4}) {
    fabric::Fabric fab(fabric::testing::small_spec(32, 32));
    PlacementRequest req;
    req.context_tokens = 24;
    req.users = users;
    const Placement pl = place(m, fab, req);
    kv[users == 1 ? 0 : 1] = fab.sram().used_for(fabric::SramUse::kv_cache).value;
    // Each user's positions are spread over its kv head's segment.
    const AttentionPlacement& a = pl.layers[0].attention;
    int total = 0;
    for (int i = 0; i < a.segment_length; ++i) total += a.positions_on_core(users - 1, 24, i);
    EXPECT_EQ(total, 24);
  }
  EXPECT_GE(kv[1], 4 * static_cast<std::uint64_t>(m.num_layers) * 24 * 2 * m.kv_dim() * 2);
  EXPECT_GT(kv[1], kv[0]);
}

TEST(Placement, LayersSplitOverWafersAndEveryWeightIsStoredOnce) {
  const models::ModelConfig m = tiny();  // 4 layers
  fabric::Fabric a(fabric::testing::small_spec(32, 32)), b(fabric::testing::small_spec(32, 32)),
      c(fabric::testing::small_spec(32, 32));
  std::vector<fabric::Fabric*> wafers{&a, &b, &c};
  PlacementRequest req;
  req.context_tokens = 24;
  const Placement pl = place(m, wafers, req);
  EXPECT_EQ(pl.wafers, 3);
  // Balanced contiguous runs: layers {0}, {1}, {2, 3}; the head on the last.
  ASSERT_EQ(pl.layers.size(), 4u);
  EXPECT_EQ(pl.layers[0].wafer, 0);
  EXPECT_EQ(pl.layers[1].wafer, 1);
  EXPECT_EQ(pl.layers[2].wafer, 2);
  EXPECT_EQ(pl.layers[3].wafer, 2);
  EXPECT_EQ(pl.head.wafer, 2);
  EXPECT_EQ(pl.layers[3].o.wafer, 2);
  std::uint64_t weights = 0;
  for (auto* f : wafers) weights += f->sram().used_for(fabric::SramUse::weights).value;
  EXPECT_EQ(weights, m.parameter_count() * 2);
  EXPECT_GT(a.sram().used_for(fabric::SramUse::weights).value, 0u);
}

TEST(Placement, MoreWafersThanLayersIsAFitError) {
  const models::ModelConfig m = tiny();
  std::vector<std::unique_ptr<fabric::Fabric>> owned;
  std::vector<fabric::Fabric*> wafers;
  for (int i = 0; i < 5; ++i) {
    owned.push_back(std::make_unique<fabric::Fabric>(fabric::testing::small_spec(32, 32)));
    wafers.push_back(owned.back().get());
  }
  PlacementRequest req;
  req.context_tokens = 24;
  EXPECT_THROW(place(m, wafers, req), fabric::FitError);
  // The message names the strategy asked for.
  for (const StrategyKind kind : {StrategyKind::layer_rectangles, StrategyKind::whole_region}) {
    req.strategy = kind;
    try {
      place(m, wafers, req);
      ADD_FAILURE() << strategy_name(kind) << " placed " << m.num_layers << " layers on 5 wafers";
    } catch (const fabric::FitError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string(strategy_name(kind)) +
                                           " puts at least one layer on every wafer"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Placement, RegionsAreInsideTheMeshAndDisjoint) {
  const models::ModelConfig m = tiny();
  fabric::Fabric fab(fabric::testing::small_spec(32, 32));
  PlacementRequest req;
  req.context_tokens = 24;
  const Placement pl = place(m, fab, req);
  std::vector<fabric::Rect> rects;
  for (const MatrixPlacement* mp : matrices(pl)) rects.push_back(mp->rect);
  for (const LayerStage& st : pl.layers) rects.push_back(st.attention.rect);
  const fabric::Rect mesh{0, 0, 32, 32};
  for (std::size_t i = 0; i < rects.size(); ++i) {
    EXPECT_TRUE(mesh.contains({rects[i].x0, rects[i].y0}));
    EXPECT_TRUE(
        mesh.contains({rects[i].x0 + rects[i].width - 1, rects[i].y0 + rects[i].height - 1}));
    for (std::size_t j = i + 1; j < rects.size(); ++j)
      EXPECT_FALSE(overlap(rects[i], rects[j])) << i << " " << j;
  }
}

TEST(Placement, TilesCoverEveryWeightExactlyOnce) {
  const models::ModelConfig m = tiny();
  fabric::Fabric fab(fabric::testing::small_spec(32, 32));
  PlacementRequest req;
  req.context_tokens = 24;
  const Placement pl = place(m, fab, req);
  for (const MatrixPlacement* mp : matrices(pl)) {
    EXPECT_EQ(mp->row_begin(0), 0);
    EXPECT_EQ(mp->row_begin(mp->p()), mp->out_features) << mp->name;
    EXPECT_EQ(mp->col_begin(mp->q()), mp->in_features) << mp->name;
    for (int p = 0; p < mp->p(); ++p) EXPECT_LT(mp->row_begin(p), mp->row_begin(p + 1)) << mp->name;
    EXPECT_EQ(mp->row_begin(1) % mp->row_granule, 0);
  }
}

TEST(Placement, NoCoreHoldsMoreThanItsSram) {
  const models::ModelConfig m = tiny();
  fabric::WaferSpec spec = fabric::testing::small_spec(12, 16);
  spec.sram_per_core = Bytes{6 * 1024};  // tight: forces many rows of cores
  fabric::Fabric fab(spec);
  PlacementRequest req;
  req.context_tokens = 24;
  place(m, fab, req);
  for (std::uint64_t used : fab.sram().all_used()) EXPECT_LE(used, spec.sram_per_core.value);
}

TEST(Placement, ModelTooLargeForTheMeshSaysHowMuchItNeedsAndHas) {
  const models::ModelConfig m = testing::preset_model("llama-3.1-8b");
  fabric::Fabric fab(testing::preset_hardware("small"));
  PlacementRequest req;
  req.context_tokens = 256;
  try {
    place(m, fab, req);
    FAIL() << "an 8B model was placed on a 32x32 mesh";
  } catch (const fabric::FitError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("llama-3.1-8b needs 15."), std::string::npos)
        << msg;                                                 // 16.06e9 B = 15.0 GiB
    EXPECT_NE(msg.find("48.0 MiB"), std::string::npos) << msg;  // 1024 x 48 KiB
    EXPECT_NE(msg.find("1024 cores"), std::string::npos) << msg;
  }
}

TEST(Placement, ContextTooLongForTheKvCacheIsAFitError) {
  const models::ModelConfig m = tiny();
  fabric::WaferSpec spec = fabric::testing::small_spec(32, 32);
  spec.sram_per_core = Bytes{4 * 1024};
  fabric::Fabric fab(spec);
  PlacementRequest req;
  req.context_tokens = 100000;
  EXPECT_THROW(place(m, fab, req), fabric::FitError);
}

}  // namespace
}  // namespace wafersim::sim
