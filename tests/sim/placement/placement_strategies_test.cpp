// Placement strategies (short-path, sram-balanced, anneal), the closed-form
// hop-bytes estimate, defects and halo. No SystemC, no YAML.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "fabric/collectives.hpp"
#include "fabric/defects.hpp"
#include "sim/placement/placement.hpp"
#include "sim/placement/placement_cost.hpp"
#include "support/placement_requests.hpp"
#include "support/presets.hpp"
#include "support/test_spec.hpp"

namespace wafersim::sim {
namespace {

namespace fs = std::filesystem;

std::vector<fabric::Rect> all_rects(const Placement& pl) {
  std::vector<fabric::Rect> r;
  for (const LayerStage& st : pl.layers)
    for (const fabric::Rect& x :
         {st.qkv.rect, st.o.rect, st.gate_up.rect, st.down.rect, st.attention.rect})
      r.push_back(x);
  r.push_back(pl.head.lm_head.rect);
  if (!pl.head.tied) r.push_back(pl.head.embedding.rect);
  return r;
}

bool overlap(const fabric::Rect& a, const fabric::Rect& b) {
  return a.x0 < b.x0 + b.width && b.x0 < a.x0 + a.width && a.y0 < b.y0 + b.height &&
         b.y0 < a.y0 + a.height;
}

// Two rectangles share a stretch of edge (not just a corner).
bool adjacent(const fabric::Rect& a, const fabric::Rect& b) {
  const bool x_touch = a.x0 + a.width == b.x0 || b.x0 + b.width == a.x0;
  const bool y_touch = a.y0 + a.height == b.y0 || b.y0 + b.height == a.y0;
  const bool x_span = a.x0 < b.x0 + b.width && b.x0 < a.x0 + a.width;
  const bool y_span = a.y0 < b.y0 + b.height && b.y0 < a.y0 + a.height;
  return (x_touch && y_span) || (y_touch && x_span);
}

using testing::eight_layers;
using testing::request;

TEST(Strategies, EveryStrategyStoresEveryWeightOnceInDisjointRectangles) {
  const models::ModelConfig m = eight_layers();
  for (const std::string& s : placement_strategies()) {
    fabric::Fabric fab(fabric::testing::small_spec(48, 48));
    const Placement pl = place(m, fab, request(s));
    EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2) << s;
    const auto rects = all_rects(pl);
    // whole-region's matrices share their region by design (its own test below).
    const bool shared = s == "whole-region";
    for (std::size_t i = 0; i < rects.size(); ++i) {
      EXPECT_GE(rects[i].x0, 0);
      EXPECT_LE(rects[i].x0 + rects[i].width, 48) << s;
      EXPECT_LE(rects[i].y0 + rects[i].height, 48) << s;
      for (std::size_t j = i + 1; j < rects.size() && !shared; ++j)
        EXPECT_FALSE(overlap(rects[i], rects[j])) << s << " " << i << " " << j;
    }
    for (std::uint64_t used : fab.sram().all_used()) EXPECT_LE(used, 48u * 1024) << s;
  }
}

TEST(Strategies, ShortPathChainsLayersAndReturnsNextToTheHead) {
  const models::ModelConfig m = eight_layers();
  const Placement pl =
      plan_placement(m, fabric::testing::small_spec(48, 48), 1, request("short-path"));
  for (std::size_t l = 0; l + 1 < pl.layers.size(); ++l)
    EXPECT_TRUE(adjacent(pl.layers[l].strip, pl.layers[l + 1].strip)) << "layers " << l;
  EXPECT_TRUE(adjacent(pl.layers.front().strip, pl.head.strip));
  EXPECT_TRUE(adjacent(pl.layers.back().strip, pl.head.strip));
}

TEST(Strategies, SramBalancedLowersTheFullestCoreAtLongContext) {
  // A long context (KV cache near the wafer's limit): serpentine packs its
  // matrices' tiles and KV slots up to the capacity, sram-balanced spreads
  // them so that no core exceeds the smallest budget that fits.
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  std::uint64_t fullest[2] = {0, 0}, total[2] = {0, 0};
  int i = 0;
  for (const char* s : {"serpentine", "sram-balanced"}) {
    fabric::Fabric fab(spec);
    place(m, fab, request(s, 1500));
    for (std::uint64_t used : fab.sram().all_used()) fullest[i] = std::max(fullest[i], used);
    total[i] = fab.sram().total_used().value;
    ++i;
  }
  EXPECT_LT(fullest[1], fullest[0]);
  // Never below the average over the cores (a lower bound any layout obeys).
  EXPECT_GE(fullest[1], total[1] / (48u * 48u));
}

TEST(Strategies, AnnealIsDeterministicForASeedAndNoWorseThanSerpentine) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request("anneal");
  req.seed = 5;
  const Placement a = plan_placement(m, spec, 1, req);
  const Placement b = plan_placement(m, spec, 1, req);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) EXPECT_EQ(a.layers[l].strip, b.layers[l].strip);
  EXPECT_EQ(a.estimated_hop_bytes, b.estimated_hop_bytes);
  EXPECT_EQ(a.planner_note, b.planner_note);
  // The serpentine's 2-row grid is among the annealer's candidates, and 8
  // layers in 8 slots are few enough for the search to find its best order:
  // in the annealer's combined cost (hop-bytes + latency_weight x cycles)
  // it is no worse than serpentine.
  const Placement serp = plan_placement(m, spec, 1, request("serpentine"));
  const LatencyModel lm{spec, 16, 24};
  auto combined = [&](const Placement& p, double w) {
    return estimate_hop_bytes(m, p) + w * estimate_latency_cycles(lm, m, p);
  };
  const double w = req.anneal.latency_weight;
  EXPECT_GT(w, 0.0);  // the default is latency-aware
  EXPECT_LE(combined(a, w), combined(serp, w) * (1 + 1e-12));
  // With traffic alone (latency_weight 0) it is no worse in hop-bytes.
  req.anneal.latency_weight = 0.0;
  const Placement traffic = plan_placement(m, spec, 1, req);
  EXPECT_LE(traffic.estimated_hop_bytes, serp.estimated_hop_bytes);
  // ... and a heavy latency weight never buys a slower token estimate.
  req.anneal.latency_weight = 1e6;
  const Placement fast = plan_placement(m, spec, 1, req);
  EXPECT_LE(estimate_latency_cycles(lm, m, fast), estimate_latency_cycles(lm, m, traffic));
}

// A long anneal says how far it is: every percent from 0 to 100 once, in
// order, and the search finds the same placement as without a listener.
TEST(Strategies, AnnealReportsItsSearchFromZeroToAHundredPercent) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request("anneal");
  req.anneal.iterations = 200000;  // several reports inside each candidate grid
  std::vector<int> seen;
  req.search_progress = [&](int percent, int total) {
    EXPECT_EQ(total, 100);
    seen.push_back(percent);
  };
  const Placement watched = plan_placement(m, spec, 1, req);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), 0);
  EXPECT_EQ(seen.back(), 100);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end());  // each percent once
  EXPECT_GT(seen.size(), 10u);
  req.search_progress = nullptr;
  EXPECT_EQ(plan_placement(m, spec, 1, req).estimated_hop_bytes, watched.estimated_hop_bytes);
}

TEST(Strategies, PerMatrixOverridesSetShapeAndReduction) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request("serpentine");
  req.matrices[MatrixKind::gate_up] = MatrixOverride{6, 3, fabric::ReductionScheme::two_level};
  req.matrices[MatrixKind::attention] = MatrixOverride{0, 0, fabric::ReductionScheme::tree};
  fabric::Fabric fab(spec);
  const Placement pl = place(m, fab, req);
  for (const LayerStage& st : pl.layers) {
    EXPECT_EQ(st.gate_up.rect.width, 3);
    EXPECT_EQ(st.gate_up.rect.height, 6);
    EXPECT_EQ(st.gate_up.reduction, fabric::ReductionScheme::two_level);
    EXPECT_EQ(st.attention.reduction, fabric::ReductionScheme::tree);
    EXPECT_EQ(st.qkv.reduction, fabric::ReductionScheme::chain);
    EXPECT_EQ(st.qkv.rect.width, st.strip.width);
  }
  EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2);
  // Fewer rows than the tiles need is a FitError that says so.
  req.matrices[MatrixKind::gate_up] = MatrixOverride{1, 1, std::nullopt};
  try {
    plan_placement(m, spec, 1, req);
    ADD_FAILURE() << "no FitError";
  } catch (const fabric::FitError& e) {
    EXPECT_NE(std::string(e.what()).find("placement.matrices.gate_up.rows is 1"), std::string::npos)
        << e.what();
  }
}

// ---- Closed-form hop-bytes, against hand computation ----------------------

TEST(PlacementCost, GemvHopBytesByHand) {
  MatrixPlacement m;
  m.out_features = 6;
  m.in_features = 8;
  m.rect = fabric::Rect{0, 0, 4, 3};  // P = 3, Q = 4
  // Chain: 8 inputs x 4 B down 2 links = 64; 6 outputs x 4 B over 3 links = 72.
  EXPECT_DOUBLE_EQ(gemv_hop_bytes(m), 136.0);
  // Tree over 4: steps 1->0, 3->2 (1 hop each), 2->0 (2 hops): 4 hops x 24 B = 96.
  m.reduction = fabric::ReductionScheme::tree;
  EXPECT_DOUBLE_EQ(gemv_hop_bytes(m), 64.0 + 96.0);
  // Two-level over 4 (groups of 2): 1->0, 3->2, then root 2->0: 4 hops as well.
  m.reduction = fabric::ReductionScheme::two_level;
  EXPECT_DOUBLE_EQ(gemv_hop_bytes(m), 64.0 + 96.0);
  // K-tree over 4, K = 2: groups {0,1} {2,3} into their centres 1 and 3
  // (1 hop each), root 1 -> 3 over a pass-through route (2 hops), then the
  // sum moved from 3 to the row's root 0 (3 hops): 7 hops x 24 B.
  m.reduction = fabric::ReductionScheme::k_tree;
  m.reduction_groups = 2;
  EXPECT_DOUBLE_EQ(gemv_hop_bytes(m), 64.0 + 7 * 24.0);
  // Ring over 4: each byte over 2 x 2 (4 - 1) (4 - 1) / 4 = 9 links.
  m.reduction = fabric::ReductionScheme::ring;
  m.reduction_groups = 0;
  EXPECT_DOUBLE_EQ(gemv_hop_bytes(m), 64.0 + 9 * 24.0);
}

TEST(PlacementCost, MoveHopBytesByHand) {
  // Elements 0..3 on (0,0); targets: 0..1 on (2,1) (3 hops), 2..3 on (0,3) (3 hops).
  const Layout from{Piece{{0, 0}, 0, 4, 0}};
  const Layout to{Piece{{2, 1}, 0, 2, 0}, Piece{{0, 3}, 2, 4, 0}};
  EXPECT_DOUBLE_EQ(move_hop_bytes(from, to), 2 * 4 * 3 + 2 * 4 * 3);
  // To another wafer of a 10-wide mesh: along row 0 to the east edge (9
  // hops), over the I/O, from the west edge to (2, 1) (2 hops) and down the
  // row it differs by (1 hop); to (0, 3): 9 + 0 + 3.
  const Layout away{Piece{{2, 1}, 0, 2, 1}, Piece{{0, 3}, 2, 4, 1}};
  EXPECT_DOUBLE_EQ(move_hop_bytes(from, away, 10), 2 * 4 * (9 + 2 + 1) + 2 * 4 * (9 + 0 + 3));
}

// ---- Closed-form critical-path latency, against hand computation ----------
// small_spec: hop latency 1, reduce-hop overhead 2, 4 B per link cycle,
// 8 16-bit / 4 32-bit lanes, 16 B SRAM reads per cycle, task overhead 10.

TEST(PlacementLatency, GemvLatencyByHand) {
  const fabric::WaferSpec spec = fabric::testing::small_spec(8, 8);
  const LatencyModel lm{spec, 16, 1};
  MatrixPlacement m;
  m.out_features = 6;
  m.in_features = 8;
  m.rect = fabric::Rect{0, 0, 4, 3};  // P = 3, Q = 4: tiles of 2 rows x 2 columns
  // Multicast: 2 hops + 8 B / 4 B per cycle = 4. Tile: 4 MACs / 8 lanes -> 1
  // (8 B / 16 B per cycle -> 1) + 10 = 11. Chain over 4: 3 x (1 + 2) + the
  // 8 B partial once = 11. Total 26.
  EXPECT_DOUBLE_EQ(gemv_latency_cycles(lm, m), 26.0);
  // Tree: ceil(log2 4) = 2 store-and-forward levels: 9 + 2 x 2 = 13.
  m.reduction = fabric::ReductionScheme::tree;
  EXPECT_DOUBLE_EQ(gemv_latency_cycles(lm, m), 28.0);
  // Two-level (groups of 2 < 4): two levels as well.
  m.reduction = fabric::ReductionScheme::two_level;
  EXPECT_DOUBLE_EQ(gemv_latency_cycles(lm, m), 28.0);
  // K-tree, K = 2 (groups {0,1} {2,3}, centres 1 and 3, root 3): the half
  // groups 1 x (1 + 2) + 2 = 5; root 1 -> 3: 2 hops + 2 + 2 = 6; the move
  // 3 -> 0: 3 + 2 = 5: 16, what reduce_line times on an idle fabric.
  m.reduction = fabric::ReductionScheme::k_tree;
  m.reduction_groups = 2;
  EXPECT_DOUBLE_EQ(gemv_latency_cycles(lm, m), 4.0 + 11.0 + 16.0);
  fabric::Mesh mesh(spec.mesh_width, spec.mesh_height);
  fabric::FlowModel flow(mesh, spec);
  const std::vector<Timed> ready(4);
  EXPECT_EQ(
      fabric::reduce_line(mesh, flow, fabric::ReductionScheme::k_tree,
                          fabric::Line{{0, 0}, fabric::Direction::east, 4}, Bytes{8}, ready, 2)
          .at.value,
      16u);
  // Ring: 2 chunks of 4 B (1 cycle), edges of 1.5 links on average: 3 x
  // (1.5 + 1 + 2) + 3 x (1.5 + 1) = 21.
  m.reduction = fabric::ReductionScheme::ring;
  m.reduction_groups = 0;
  EXPECT_DOUBLE_EQ(gemv_latency_cycles(lm, m), 4.0 + 11.0 + 21.0);
}

TEST(PlacementLatency, AttentionLatencyByHand) {
  const fabric::WaferSpec spec = fabric::testing::small_spec(8, 8);
  models::ModelConfig model;
  model.head_dim = 4;
  model.num_heads = 4;
  model.num_kv_heads = 2;  // 2 query heads per kv head
  AttentionPlacement a;
  a.rect = fabric::Rect{0, 0, 1, 6};
  a.num_kv_heads = 2;
  a.segment_length = 3;
  a.segments_per_column = 2;
  // Context 7 over 3 cores: the busiest holds 3 positions.
  // Multicast of 2 x 4 x 4 B: 2 hops + 8 = 10. Core: 2 x 3 x (2 x 4 + 4) = 72
  // MACs / 8 lanes = 9 (48 B of cache / 16 -> 3) + 10 = 19. Chain reduction
  // of 2 x (4 + 2) x 4 B: 2 x 3 + 12 = 18. Normalise 8 fp32 elements: 2 + 10 = 12.
  EXPECT_DOUBLE_EQ(attention_latency_cycles(LatencyModel{spec, 16, 7}, model, a), 59.0);
  // One core: all 7 positions on it, no multicast or reduction:
  // 2 x 7 x 12 = 168 MACs / 8 = 21 (112 B / 16 = 7) + 10 = 31, + 12.
  a.segment_length = 1;
  EXPECT_DOUBLE_EQ(attention_latency_cycles(LatencyModel{spec, 16, 7}, model, a), 43.0);
  // A longer context makes the one-core segment the slower one.
  a.segment_length = 1;
  const double one = attention_latency_cycles(LatencyModel{spec, 16, 600}, model, a);
  a.segment_length = 3;
  EXPECT_LT(attention_latency_cycles(LatencyModel{spec, 16, 600}, model, a), one);
}

TEST(PlacementLatency, MoveLatencyByHand) {
  const fabric::WaferSpec spec = fabric::testing::small_spec(8, 8);
  const LatencyModel lm{spec, 16, 1};
  // Farthest overlap 3 hops; largest moving piece 2 elements x 4 B = 2 cycles.
  const Layout from{Piece{{0, 0}, 0, 4, 0}};
  const Layout to{Piece{{2, 1}, 0, 2, 0}, Piece{{0, 3}, 2, 4, 0}};
  EXPECT_DOUBLE_EQ(move_latency_cycles(lm, from, to), 5.0);
  EXPECT_DOUBLE_EQ(move_latency_cycles(lm, from, from), 0.0);
}

// ---- Defects and halo --------------------------------------------------------

TEST(Defects, NoByteIsAllocatedOnADeadCore) {
  const models::ModelConfig m = eight_layers();
  fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  spec.defect_rate = 0.002;
  spec.defect_seed = 3;
  spec.defect_cores = {{5, 5}, {20, 30}, {40, 2}, {1, 47}};
  for (const std::string& s : placement_strategies()) {
    fabric::Fabric fab(spec);
    ASSERT_GE(fab.defects().dead_count(), 4u);
    place(m, fab, request(s));
    for (const Coord& c : fab.defects().dead_cores())
      EXPECT_EQ(fab.sram().used(fab.mesh().id(c)).value, 0u)
          << s << " (" << c.x << ", " << c.y << ")";
    EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2) << s;
  }
}

TEST(Halo, NothingIsPlacedInTheHalo) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  PlacementRequest req = request("serpentine");
  req.halo = Halo{7, 2};
  // ceil(7/2) = 4 columns west, 3 east; 1 row north, 1 south.
  const fabric::Rect inner = usable_area(spec, req.halo);
  EXPECT_EQ(inner, (fabric::Rect{4, 1, 41, 46}));
  fabric::Fabric fab(spec);
  place(m, fab, req);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 48; ++x)
      if (!inner.contains({x, y})) {
        EXPECT_EQ(fab.sram().used(fab.mesh().id({x, y})).value, 0u) << x << ", " << y;
      }
}

}  // namespace
}  // namespace wafersim::sim
