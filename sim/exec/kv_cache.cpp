#include "sim/exec/kv_cache.hpp"

namespace wafersim::sim {

KvCache::KvCache(const Placement& pl, int head_dim) : pl_(pl), head_dim_(head_dim) {
  for (const LayerStage& st : pl.layers) {
    layer_first_.push_back(slices_per_user_);
    slices_per_user_ +=
        static_cast<std::size_t>(st.attention.num_kv_heads) * st.attention.segment_length;
  }
  const std::size_t n = static_cast<std::size_t>(pl.users) * slices_per_user_;
  k_.assign(n, {});
  v_.assign(n, {});
}

std::size_t KvCache::slice(int user, int layer, int kv_head, int core) const {
  const auto l = static_cast<std::size_t>(layer);
  const auto L = static_cast<std::size_t>(pl_.layers[l].attention.segment_length);
  return static_cast<std::size_t>(user) * slices_per_user_ + layer_first_[l] +
         static_cast<std::size_t>(kv_head) * L + static_cast<std::size_t>(core);
}

void KvCache::append(int user, int layer, int kv_head, int core, std::span<const float> k,
                     std::span<const float> v) {
  const std::size_t s = slice(user, layer, kv_head, core);
  k_[s].insert(k_[s].end(), k.begin(), k.end());
  v_[s].insert(v_[s].end(), v.begin(), v.end());
}

void KvCache::truncate(int user, int positions) {
  for (std::size_t l = 0; l < pl_.layers.size(); ++l) {
    const AttentionPlacement& a = pl_.layers[l].attention;
    for (int h = 0; h < a.num_kv_heads; ++h)
      for (int i = 0; i < a.segment_length; ++i) {
        const std::size_t s = slice(user, static_cast<int>(l), h, i);
        const auto keep = static_cast<std::size_t>(a.positions_on_core(user, positions, i)) *
                          static_cast<std::size_t>(head_dim_);
        if (k_[s].size() > keep) k_[s].resize(keep);
        if (v_[s].size() > keep) v_[s].resize(keep);
      }
  }
}

}  // namespace wafersim::sim
