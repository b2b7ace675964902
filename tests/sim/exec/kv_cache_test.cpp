// sim::KvCache: rows appended to the core caching each position (round
// robin over the segment, from the user's offset), read back in position
// order, forgotten past a rollback; and the sliding window's first visible
// position.
#include "sim/exec/kv_cache.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace wafersim::sim {
namespace {

// Two users, two layers, two kv heads of a 3-core segment each, 4 slots per
// user: user 1's positions 0, 1, 2, 3 sit on cores 1, 2, 0, 1 (slot 4 + p
// mod 3).
Placement three_core_segments() {
  Placement pl;
  pl.users = 2;
  pl.layers.resize(2);
  for (LayerStage& st : pl.layers) {
    st.attention.num_kv_heads = 2;
    st.attention.segment_length = 3;
    st.attention.context = 4;
    st.attention.users = 2;
  }
  return pl;
}

// k of position p: {p, p + 0.5}; v: {-p, -p - 0.5}.
std::vector<float> k_of(int p) {
  return {static_cast<float>(p), static_cast<float>(p) + 0.5f};
}
std::vector<float> v_of(int p) {
  return {-static_cast<float>(p), -static_cast<float>(p) - 0.5f};
}

TEST(KvCache, RowsGoToTheCoreCachingTheirPositionInPositionOrder) {
  const Placement pl = three_core_segments();
  const AttentionPlacement& a = pl.layers[0].attention;
  KvCache kv(pl, 2);
  for (int p = 0; p < 4; ++p) kv.append(1, 1, 1, a.slot_core(1, p), k_of(p), v_of(p));
  EXPECT_EQ(kv.keys(1, 1, 1, 1), (std::vector<float>{0.0f, 0.5f, 3.0f, 3.5f}));
  EXPECT_EQ(kv.keys(1, 1, 1, 2), (std::vector<float>{1.0f, 1.5f}));
  EXPECT_EQ(kv.keys(1, 1, 1, 0), (std::vector<float>{2.0f, 2.5f}));
  EXPECT_EQ(kv.values(1, 1, 1, 1), (std::vector<float>{-0.0f, -0.5f, -3.0f, -3.5f}));
  // Every other slice is still empty: other users, layers and kv heads.
  for (int u = 0; u < 2; ++u)
    for (int l = 0; l < 2; ++l)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 3; ++i) {
          if (u == 1 && l == 1 && h == 1) continue;
          EXPECT_TRUE(kv.keys(u, l, h, i).empty()) << u << l << h << i;
        }
}

TEST(KvCache, TruncateKeepsTheFirstPositionsOfOneUserOnly) {
  const Placement pl = three_core_segments();
  const AttentionPlacement& a = pl.layers[0].attention;
  KvCache kv(pl, 2);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 4; ++p) {
        kv.append(0, l, h, a.slot_core(0, p), k_of(p), v_of(p));
        kv.append(1, l, h, a.slot_core(1, p), k_of(p), v_of(p));
      }
  kv.truncate(1, 2);  // user 1 keeps positions 0 (core 1) and 1 (core 2)
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(kv.keys(1, l, h, 1), (std::vector<float>{0.0f, 0.5f}));
      EXPECT_EQ(kv.values(1, l, h, 2), (std::vector<float>{-1.0f, -1.5f}));
      EXPECT_TRUE(kv.keys(1, l, h, 0).empty());
      EXPECT_TRUE(kv.values(1, l, h, 0).empty());
      // User 0 (positions 0..3 on cores 0, 1, 2, 0) is untouched.
      EXPECT_EQ(kv.keys(0, l, h, 0), (std::vector<float>{0.0f, 0.5f, 3.0f, 3.5f}));
    }
  // Truncating past what is cached changes nothing.
  kv.truncate(1, 4);
  EXPECT_EQ(kv.keys(1, 0, 0, 1), (std::vector<float>{0.0f, 0.5f}));
}

TEST(KvCache, FirstVisiblePositionOfASlidingWindow) {
  models::ModelConfig model;
  EXPECT_EQ(first_visible_position(model, 100), 0);  // no window: everything
  model.sliding_window = 4;
  EXPECT_EQ(first_visible_position(model, 3), 0);
  EXPECT_EQ(first_visible_position(model, 4), 1);  // sees 1, 2, 3, 4
  EXPECT_EQ(first_visible_position(model, 10), 7);
}

}  // namespace
}  // namespace wafersim::sim
