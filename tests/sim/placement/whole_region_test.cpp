// The whole-region dataflow (strategy whole-region): layer groups sharing
// regions, every matrix spanning its region, each GEMV's output where the
// next one reads it, the KV cache spread over the region's columns, and
// the fit rules. No SystemC, no YAML.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "fabric/defects.hpp"
#include "fabric/fabric.hpp"
#include "sim/placement/layout.hpp"
#include "sim/placement/placement.hpp"
#include "sim/placement/stage_planner.hpp"
#include "support/placement_requests.hpp"
#include "support/presets.hpp"
#include "support/test_spec.hpp"

namespace wafersim::sim {
namespace {

using testing::eight_layers;
using testing::request;

PlacementRequest groups(int g, int context = 24) {
  PlacementRequest req = request("whole-region", context);
  req.layer_groups = g;
  return req;
}

bool same(const Layout& a, const Layout& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].core != b[i].core || a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  return true;
}

TEST(WholeRegion, OneGroupSpansTheWholeRegionWithEveryMatrixOfEveryLayer) {
  const models::ModelConfig m = eight_layers();
  fabric::Fabric fab(fabric::testing::small_spec(48, 48));
  const Placement pl = place(m, fab, groups(1));
  ASSERT_EQ(pl.layers.size(), 8u);
  const fabric::Rect region = pl.layers.front().strip;
  // The head's strip on the west, the region the rest of the area.
  EXPECT_EQ(pl.head.strip.x0, 0);
  EXPECT_EQ(region.x0, pl.head.strip.width);
  EXPECT_EQ(region.x0 + region.width, 48);
  EXPECT_EQ(region.height, 48);
  for (const LayerStage& st : pl.layers) {
    EXPECT_EQ(st.strip, region);
    EXPECT_TRUE(st.whole_region);
    // qkv and gate_up transposed, o and down plain, all from the region's corner.
    EXPECT_TRUE(st.qkv.transposed);
    EXPECT_FALSE(st.o.transposed);
    EXPECT_TRUE(st.gate_up.transposed);
    EXPECT_FALSE(st.down.transposed);
    for (const MatrixPlacement* mp : st.matrices()) {
      EXPECT_EQ(mp->rect.x0, region.x0) << mp->name;
      EXPECT_EQ(mp->rect.y0, region.y0) << mp->name;
      EXPECT_LE(mp->rect.width, region.width) << mp->name;
      EXPECT_LE(mp->rect.height, region.height) << mp->name;
    }
    // tiny-llama: hidden 64 over the 48 rows; qkv's 64 + 2 x 32 outputs
    // over the region's columns.
    EXPECT_EQ(st.qkv.q(), 48);
    EXPECT_EQ(st.qkv.p(), std::min(region.width, m.q_dim() + 2 * m.kv_dim()));
    EXPECT_EQ(st.o.p(), 48);
  }
  // The region's corner holds a tile of all four matrices of all 8 layers.
  std::map<std::tuple<int, int>, int> tiles;
  for_each_allocation(m, pl, groups(1), [&](const CoreAllocation& a) {
    if (a.use == fabric::SramUse::weights && a.what.ends_with("weight tile"))
      ++tiles[{a.core.x, a.core.y}];
  });
  EXPECT_EQ((tiles[{region.x0, region.y0}]), 4 * 8);
  // Every weight once; no core over its SRAM.
  EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2);
  for (std::uint64_t used : fab.sram().all_used()) EXPECT_LE(used, 48u * 1024);
}

TEST(WholeRegion, EveryOutputLiesWhereTheNextMatrixReadsIt) {
  // The alternation that needs no move between matrices: the residual (o's
  // and down's roots, down the west column) is qkv's and gate_up's input;
  // qkv's and gate_up's roots run along the top row, where o and down
  // read their inputs.
  const Placement pl =
      plan_placement(eight_layers(), fabric::testing::small_spec(48, 48), 1, groups(1));
  for (const LayerStage& st : pl.layers) {
    EXPECT_TRUE(same(input_layout(st.qkv), output_layout(st.o)));
    EXPECT_TRUE(same(input_layout(st.gate_up), output_layout(st.o)));
    EXPECT_TRUE(same(output_layout(st.down), output_layout(st.o)));
    EXPECT_TRUE(same(swiglu_output_layout(output_layout(st.gate_up)), input_layout(st.down)));
    for (const Piece& p : output_layout(st.qkv)) EXPECT_EQ(p.core.y, st.strip.y0);
    for (const Piece& p : output_layout(st.o)) EXPECT_EQ(p.core.x, st.strip.x0);
  }
}

TEST(WholeRegion, TheKvCacheSpreadsOverTheRegionsColumns) {
  const models::ModelConfig m = eight_layers();  // 2 kv heads of 16 dims
  const Placement pl = plan_placement(m, fabric::testing::small_spec(48, 48), 1, groups(1, 100));
  const AttentionPlacement& a = pl.layers.front().attention;
  const fabric::Rect region = pl.layers.front().strip;
  // Each kv head on width / 2 columns (at most its 16 dims), every row.
  EXPECT_EQ(a.columns_per_head, std::min(16, region.width / 2));
  EXPECT_EQ(a.segment_length, 48);
  EXPECT_EQ(a.segments_per_column, 1);
  // 100 positions round-robin over 48 rows: at most 3 per core.
  EXPECT_EQ(a.max_positions_per_core, 3);
  // The dims of a head split over its columns, in order, none left out.
  EXPECT_EQ(a.dim_begin(0), 0);
  EXPECT_EQ(a.dim_begin(a.columns_per_head), m.head_dim);
  // Head 1's block starts where head 0's ends.
  EXPECT_EQ(a.block_core(1, 0, 0).x, a.block_core(0, 0, a.columns_per_head - 1).x + 1);
}

// One head as wide as WaferLLM's timed kernel folds its heads into (4,200
// dimensions: one cached position is 16.8 KB of 16-bit keys and values plus
// 33.6 KB of attention buffers, more than a 48 KiB core): a block strategy,
// which keeps a position on one core, refuses it, while a whole-region layer
// splits the head's dimensions over the region's columns (10 a core on 420)
// and places it.
TEST(WholeRegion, AHeadWiderThanACoreIsSplitOverTheRegionsColumns) {
  models::ModelConfig m = testing::preset_model("llama-3.1-8b");
  m.hidden_size = 4200;
  m.intermediate_size = 14700;
  m.num_heads = m.num_kv_heads = 1;
  m.head_dim = 4200;
  m.num_layers = 1;
  const fabric::WaferSpec spec = fabric::testing::small_spec(420, 420);  // 48 KiB cores
  try {
    (void)plan_placement(m, spec, 1, request("layer-rectangles", 4200));
    ADD_FAILURE() << "a block strategy placed a position wider than a core";
  } catch (const fabric::FitError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold a single KV position"), std::string::npos)
        << e.what();
  }
  const Placement pl = plan_placement(m, spec, 1, groups(1, 4200));
  const AttentionPlacement& a = pl.layers.front().attention;
  EXPECT_EQ(a.columns_per_head, pl.layers.front().strip.width);
  EXPECT_LE(a.dim_begin(1) - a.dim_begin(0), 4200 / a.columns_per_head + 1);
  EXPECT_EQ(a.dim_begin(a.columns_per_head), 4200);
}

// qkv's output lies along the region's top row, its rows in order over the
// columns; grouped by kv head (QkvRows), each kv head's query, key and value
// land over (within a few columns of) its own KV block, so the hand-over to
// attention stays inside the block. Llama-3.1-8B on a WSE-3 region of
// 331 x 168 (8 groups): 6,144 rows over 331 columns, 768 a kv head, blocks
// of 41 columns. In the checkpoint's order kv head 0's key and value would
// be ~220 columns east of its block.
TEST(WholeRegion, EachKvHeadsQueryKeyAndValueLieOverItsOwnBlock) {
  const models::ModelConfig m = testing::preset_model("llama-3.1-8b");
  PlacementRequest req = groups(8, 4096);
  req.weight_bits = 16;
  const StagePlanner planner(m, testing::preset_hardware("wse3"), req);
  const LayerStage st = planner.region_stage(0, 0, fabric::Rect{0, 0, 331, 168}, "whole-region");
  ASSERT_TRUE(st.whole_region);
  const AttentionPlacement& a = st.attention;
  ASSERT_EQ(a.columns_per_head, 41);
  const Layout out = output_layout(st.qkv);
  const int g = m.num_heads / m.num_kv_heads, hd = m.head_dim;
  // The farthest column holding one of kv head h's rows is from its block.
  const auto farthest = [&](const QkvRows& order, int h) {
    const int lo = a.block_core(h, 0, 0).x, hi = a.block_core(h, 0, a.columns_per_head - 1).x;
    int worst = 0;
    const auto rows = [&](int begin, int end) {
      for (const Piece& p : out)
        if (p.begin < end && begin < p.end)
          worst = std::max(worst, std::max(lo - p.core.x, p.core.x - hi));
    };
    rows(order.q(h * g), order.q(h * g) + g * hd);
    rows(order.k(h), order.k(h) + hd);
    rows(order.v(h), order.v(h) + hd);
    return worst;
  };
  const QkvRows order = st.qkv_rows(m);
  ASSERT_TRUE(order.by_kv_head());
  for (int h = 0; h < m.num_kv_heads; ++h) EXPECT_LE(farthest(order, h), 3) << "kv head " << h;
  EXPECT_GT(farthest(QkvRows(m, false), 0), 200);
}

TEST(WholeRegion, LayerGroupsCutTheAreaIntoDisjointRegions) {
  const models::ModelConfig m = eight_layers();
  const fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  for (int g : {2, 3, 8}) {
    const Placement pl = plan_placement(m, spec, 1, groups(g));
    std::set<fabric::Rect> regions;
    for (const LayerStage& st : pl.layers) regions.insert(st.strip);
    ASSERT_EQ(static_cast<int>(regions.size()), g);
    // Contiguous groups, balanced: layers [8i/g, 8(i+1)/g) share region i.
    for (int i = 0; i < g; ++i)
      for (int l = block_begin(8, g, i); l < block_begin(8, g, i + 1); ++l)
        EXPECT_EQ(pl.layers[static_cast<std::size_t>(l)].strip,
                  pl.layers[static_cast<std::size_t>(block_begin(8, g, i))].strip)
            << g << " groups, layer " << l;
    for (auto a = regions.begin(); a != regions.end(); ++a) {
      EXPECT_FALSE(a->x0 < pl.head.strip.x0 + pl.head.strip.width) << "overlaps the head";
      for (auto b = std::next(a); b != regions.end(); ++b)
        EXPECT_FALSE(a->x0 < b->x0 + b->width && b->x0 < a->x0 + a->width &&
                     a->y0 < b->y0 + b->height && b->y0 < a->y0 + a->height);
    }
  }
}

TEST(WholeRegion, ARegionWithDeadCoresShrinksToItsLargestClearRectangle) {
  fabric::WaferSpec spec = fabric::testing::small_spec(48, 48);
  spec.defect_cores = {{30, 40}};
  const Placement pl = plan_placement(eight_layers(), spec, 1, groups(1));
  const fabric::Rect r = pl.layers.front().strip;
  // The dead core at row 40: the largest clear rectangle is rows 0..39 of
  // the full-width region (more cores than the columns either side of x 30).
  EXPECT_EQ(r.height, 40);
  EXPECT_EQ(r.y0, 0);
  EXPECT_NE(pl.planner_note.find("shrunk"), std::string::npos) << pl.planner_note;
}

// A mixture of experts on the whole region: the router and every expert's
// two matrices span it too (tiles of all of them on its cores), the router
// and each gate_up reading the residual's column as qkv does, each down
// writing where o writes (so the chosen experts' outputs combine with no
// move), and the bytes of all experts counted against each core's SRAM.
TEST(WholeRegion, EveryExpertSpansTheRegionAndReadsAndWritesTheResidualsColumn) {
  const models::ModelConfig m = testing::preset_model("tiny-mixtral");
  ASSERT_TRUE(m.is_moe());
  fabric::Fabric fab(fabric::testing::small_spec(48, 48));
  const Placement pl = place(m, fab, groups(1));
  for (const LayerStage& st : pl.layers) {
    ASSERT_EQ(st.experts.size(), static_cast<std::size_t>(m.num_experts));
    EXPECT_TRUE(st.router.transposed);
    EXPECT_EQ(st.router.p(), m.num_experts);  // one router output per column
    EXPECT_TRUE(same(input_layout(st.router), output_layout(st.o)));
    for (const ExpertPlacement& e : st.experts) {
      EXPECT_TRUE(e.gate_up.transposed);
      EXPECT_FALSE(e.down.transposed);
      EXPECT_EQ(e.gate_up.rect.x0, st.strip.x0);
      EXPECT_EQ(e.gate_up.rect.y0, st.strip.y0);
      EXPECT_TRUE(same(input_layout(e.gate_up), output_layout(st.o))) << e.gate_up.name;
      EXPECT_TRUE(same(swiglu_output_layout(output_layout(e.gate_up)), input_layout(e.down)))
          << e.down.name;
      EXPECT_TRUE(same(output_layout(e.down), output_layout(st.o))) << e.down.name;
    }
  }
  // The region's corner holds a tile of qkv, o, the router and 2 per expert
  // in each of the 2 layers; every weight once.
  std::map<std::tuple<int, int>, int> tiles;
  const fabric::Rect region = pl.layers.front().strip;
  for_each_allocation(m, pl, groups(1), [&](const CoreAllocation& a) {
    if (a.use == fabric::SramUse::weights && a.what.ends_with("weight tile"))
      ++tiles[{a.core.x, a.core.y}];
  });
  EXPECT_EQ((tiles[{region.x0, region.y0}]), (3 + 2 * m.num_experts) * m.num_layers);
  EXPECT_EQ(fab.sram().used_for(fabric::SramUse::weights).value, m.parameter_count() * 2);
}

// All of a layer's experts must fit its region's cores, not just the ones
// a token chooses: the fit error counts every expert's tile.
TEST(WholeRegion, ARegionThatCannotHoldEveryExpertSaysSo) {
  models::ModelConfig m = testing::preset_model("tiny-mixtral");
  m.num_layers = 8;
  // 8 layers x 4 experts x 3 x 64 x 4000 x 2 B = 47 MiB of experts: within the
  // wafer's 48 MiB, beyond what the 31 x 32 region beside the head strip holds
  // (50.0 KiB on its fullest core).
  m.intermediate_size = 4000;
  try {
    plan_placement(m, fabric::testing::small_spec(32, 32), 1, groups(1));
    FAIL() << "expected a FitError";
  } catch (const fabric::FitError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shares its 31 x 32 region"), std::string::npos) << what;
    EXPECT_NE(what.find("would hold 50.0 KiB ("), std::string::npos) << what;
    EXPECT_NE(what.find("but has 48.0 KiB"), std::string::npos) << what;
    EXPECT_NE(what.find("use more wafers"), std::string::npos) << what;
  }
}

TEST(WholeRegion, AGroupThatCannotHoldItsLayersSaysWhatEachCoreWouldHold) {
  // 8 layers on a 16 x 16 mesh: the weights alone fit (a tiny model), a
  // 10,000-token KV cache (10 MiB) fits the wafer (12 MiB) but not the
  // region the head strip leaves.
  try {
    plan_placement(eight_layers(), fabric::testing::small_spec(16, 16), 1, groups(1, 10000));
    FAIL() << "expected a FitError";
  } catch (const fabric::FitError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shares its"), std::string::npos) << what;
    EXPECT_NE(what.find("of tiles, gains and KV cache (10000 tokens x 1 users) per layer x 8"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("use more wafers"), std::string::npos) << what;
  }
}

// A group's fit is the allocator's to the byte: cores of exactly the
// fullest core's bytes hold the placement, one byte fewer do not. (The bound
// the planner tries first errs high; for a mixture of experts it adds every
// expert's largest tile, and alone it would refuse the first of these.)
TEST(WholeRegion, AGroupFitsExactlyWhenItsBytesDo) {
  models::ModelConfig m = testing::preset_model("tiny-mixtral");
  m.num_layers = 8;
  m.intermediate_size = 3800;
  fabric::WaferSpec spec = fabric::testing::small_spec(32, 32);
  fabric::Fabric fab(spec);
  const Placement pl = place(m, fab, groups(1));
  const std::vector<std::uint64_t>& used = fab.sram().all_used();
  const auto fullest = std::max_element(used.begin(), used.end());
  const auto at = static_cast<int>(fullest - used.begin());
  // The fullest core is one of the group's region, not of the head.
  ASSERT_TRUE(pl.layers[0].strip.contains(Coord{at % spec.mesh_width, at / spec.mesh_width}));
  spec.sram_per_core = Bytes{*fullest};
  EXPECT_NO_THROW(plan_placement(m, spec, 1, groups(1)));
  spec.sram_per_core = Bytes{*fullest - 1};
  EXPECT_THROW(plan_placement(m, spec, 1, groups(1)), fabric::FitError);
}

// Planning is the allocator's account: at the edge of fit (users just
// below and above the most the small wafer holds), plan_placement accepts a
// whole-region layout exactly when its allocation fits, for every tiny
// architecture (biases, qk-norm, sliding windows, experts). Until s20 the
// planner's quick bound left out the biases on the roots of qkv, up and down
// (and qwen3's qk-norm gains), so for tiny-gpt2 it accepted 522 users of 62
// positions where the allocator holds 521: `serve`'s plan-only batch search
// then failed while calibrating.
TEST(WholeRegion, PlanningAcceptsExactlyWhatTheAllocatorHolds) {
  const fabric::WaferSpec spec = fabric::testing::small_spec(32, 32);
  for (const char* name : {"tiny-gpt2", "tiny-qwen3", "tiny-llama", "tiny-mistral", "tiny-mixtral",
                           "tiny-qwen3-moe"}) {
    models::ModelConfig m = testing::preset_model(name);
    m.num_layers = 4;
    // The most users the plan accepts, by bisection.
    auto plans = [&](int users) {
      PlacementRequest req = groups(1, 62);
      req.users = users;
      try {
        (void)plan_placement(m, spec, 1, req);
        return true;
      } catch (const fabric::FitError&) {
        return false;
      }
    };
    int lo = 1, hi = 4096;
    ASSERT_TRUE(plans(lo)) << name;
    ASSERT_FALSE(plans(hi)) << name;
    while (hi - lo > 1) ((plans((lo + hi) / 2)) ? lo : hi) = (lo + hi) / 2;
    for (const int users : {lo, lo + 1}) {
      PlacementRequest req = groups(1, 62);
      req.users = users;
      fabric::Fabric fab(spec);
      bool allocated = true;
      try {
        (void)place(m, fab, req);
      } catch (const fabric::FitError&) {
        allocated = false;
      }
      EXPECT_EQ(allocated, plans(users)) << name << " at " << users << " users";
    }
  }
}

}  // namespace
}  // namespace wafersim::sim
