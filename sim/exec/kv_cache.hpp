// The functional KV cache: the keys and values every attention core holds
// for its cached positions. One slice per (user, layer, kv head, segment
// core): rows of head_dim values in position order, a row per position that
// core caches (AttentionPlacement::slot_core). Only the numbers: where the
// slots sit and what reading them costs is the placement's and the
// executor's business.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "models/model_config.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// Sliding window (models::ModelConfig::sliding_window): the token at
// `position` attends to [first_visible_position, position]; the cache keeps
// every position (KV slots are reserved for the whole context).
inline int first_visible_position(const models::ModelConfig& model, int position) {
  return model.sliding_window > 0 && position >= model.sliding_window
             ? position - model.sliding_window + 1
             : 0;
}

class KvCache {
 public:
  // Empty (every call an error) for a placement without layers.
  KvCache(const Placement& pl, int head_dim);

  // Appends one position's k and v (head_dim values each) to a slice.
  void append(int user, int layer, int kv_head, int core, std::span<const float> k,
              std::span<const float> v);
  // The rows of a slice, in position order.
  const std::vector<float>& keys(int user, int layer, int kv_head, int core) const {
    return k_[slice(user, layer, kv_head, core)];
  }
  const std::vector<float>& values(int user, int layer, int kv_head, int core) const {
    return v_[slice(user, layer, kv_head, core)];
  }

  // `user` keeps its first `positions` positions and forgets the rest
  // (speculative decoding's rejected draft tokens).
  void truncate(int user, int positions);

 private:
  std::size_t slice(int user, int layer, int kv_head, int core) const;

  const Placement& pl_;
  int head_dim_;
  // Where each layer's slices begin among one user's (layers may have
  // segments of different lengths), and the slices of one user.
  std::vector<std::size_t> layer_first_;
  std::size_t slices_per_user_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace wafersim::sim
