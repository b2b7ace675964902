#include "sim/placement/placement_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "fabric/core_cost.hpp"

namespace wafersim::sim {

namespace {

constexpr double kActivationBytes = 4.0;  // an fp32 value: norm statistics, and the hop-byte terms

int manhattan(Coord a, Coord b) {
  return std::abs(a.x - b.x) + std::abs(a.y - b.y);
}

// Hops of a reduction over n cores of a line into its first, per byte of
// the partial: its combine steps' links (a k-tree's pass-through routes
// included) and a k-tree's move from its root to the first core. A ring
// moves chunks, not the whole partial: each of its two phases takes every
// chunk over n - 1 of the ring's n edges, 2 (n - 1) links in all, so
// 2 x 2 (n - 1) (n - 1) / n links per byte.
double reduction_hops(fabric::ReductionScheme scheme, int n, int groups = 0) {
  if (n <= 1) return 0.0;
  if (scheme == fabric::ReductionScheme::ring)
    return 4.0 * (n - 1) * (n - 1) / static_cast<double>(n);
  double hops = 0.0;
  for (const fabric::CombineStep& s : fabric::reduction_order(scheme, n, groups))
    hops += std::abs(s.from - s.into);
  return hops + fabric::reduction_root(scheme, n, groups);
}

// Reduction up a column of n cores of a 4 B value and its broadcast back.
double norm_hop_bytes(int n) {
  return 2.0 * kActivationBytes * std::max(0, n - 1);
}

// Cycles to put `bytes` on a link (whole wavelets).
double serialization_cycles(const fabric::WaferSpec& spec, double bytes) {
  const double per_cycle =
      static_cast<double>(std::max<std::uint64_t>(1, spec.link_bytes_per_cycle.value));
  return std::ceil(bytes / per_cycle);
}

// Critical path of reducing one `bytes` partial per core of a line of n
// cores into its first: n - 1 hops, each a hop plus an add-and-forward, and
// the partial's serialization once per store-and-forward level.
// The k-tree (fabric/collectives.hpp) into its root: the longest half-group
// chain (each hop + add, the partial's serialization once), then the longer
// side of the roots' pass-through streams (their links at hop latency, an
// add per root, the serialization once).
double k_tree_into_root_latency(const fabric::WaferSpec& spec, int n, int groups, double bytes) {
  const int k = fabric::k_tree_groups(n, groups);
  const double hop = static_cast<double>(spec.hop_latency.value);
  const double add = static_cast<double>(spec.reduce_hop_overhead.value);
  const double ser = serialization_cycles(spec, bytes);
  int half = 0;
  std::vector<int> roots;
  for (int g = 0; g < k; ++g) {
    const int a = fabric::k_tree_group_begin(n, k, g), b = fabric::k_tree_group_begin(n, k, g + 1);
    const int c = a + (b - a) / 2;
    roots.push_back(c);
    half = std::max({half, c - a, b - 1 - c});
  }
  const double first = half > 0 ? half * (hop + add) + ser : 0.0;
  const int m = k / 2;
  // Each side streams: its links at hop latency, an add per root, one
  // serialization.
  const double near =
      m > 0 ? (roots[static_cast<std::size_t>(m)] - roots.front()) * hop + m * add + ser : 0.0;
  const double far = m < k - 1 ? (roots.back() - roots[static_cast<std::size_t>(m)]) * hop +
                                     (k - 1 - m) * add + ser
                               : 0.0;
  return first + std::max(near, far);
}

// The folded ring: n - 1 reduce-scatter steps (an edge of 2 (n - 1) / n
// links on average, a chunk's serialization, an add) and n - 1 all-gather
// steps (the same without the add).
double ring_latency(const fabric::WaferSpec& spec, int n, double bytes) {
  const double hop = static_cast<double>(spec.hop_latency.value);
  const double add = static_cast<double>(spec.reduce_hop_overhead.value);
  const int k = fabric::ring_chunks(n, Bytes{static_cast<std::uint64_t>(std::ceil(bytes))});
  const double ser = serialization_cycles(spec, std::ceil(bytes / k));
  const double edge = 2.0 * (n - 1) / n * hop;
  return (n - 1) * (edge + ser + add) + (n - 1) * (edge + ser);
}

double reduction_latency(const fabric::WaferSpec& spec, fabric::ReductionScheme scheme, int n,
                         double bytes, int groups = 0) {
  if (n <= 1) return 0.0;
  if (scheme == fabric::ReductionScheme::ring) return ring_latency(spec, n, bytes);
  if (scheme == fabric::ReductionScheme::k_tree) {
    // Into the root, then moved to the first core.
    const int root = fabric::k_tree_root(n, groups);
    return k_tree_into_root_latency(spec, n, groups, bytes) +
           (root > 0 ? root * static_cast<double>(spec.hop_latency.value) +
                           serialization_cycles(spec, bytes)
                     : 0.0);
  }
  const double levels = scheme == fabric::ReductionScheme::chain ? 1.0
                        : scheme == fabric::ReductionScheme::tree
                            ? std::ceil(std::log2(static_cast<double>(n)))
                            : (fabric::two_level_group(n) < n ? 2.0 : 1.0);
  return (n - 1) * static_cast<double>(spec.hop_latency.value + spec.reduce_hop_overhead.value) +
         levels * serialization_cycles(spec, bytes);
}

// Critical path of multicasting `bytes` down a line of n cores.
double multicast_latency(const fabric::WaferSpec& spec, int n, double bytes) {
  if (n <= 1) return 0.0;
  return (n - 1) * static_cast<double>(spec.hop_latency.value) + serialization_cycles(spec, bytes);
}

// An all-reduce along a line of n cores: the reduction into the first core
// and the multicast back; a k-tree's into its root and from there both
// ways; a ring's reduce-scatter and all-gather.
double all_reduce_latency(const fabric::WaferSpec& spec, fabric::ReductionScheme scheme, int n,
                          double bytes, int groups = 0) {
  if (n <= 1) return 0.0;
  if (scheme == fabric::ReductionScheme::ring) return ring_latency(spec, n, bytes);
  if (scheme == fabric::ReductionScheme::k_tree) {
    const int root = fabric::k_tree_root(n, groups);
    return k_tree_into_root_latency(spec, n, groups, bytes) +
           std::max(root, n - 1 - root) * static_cast<double>(spec.hop_latency.value) +
           serialization_cycles(spec, bytes);
  }
  return reduction_latency(spec, scheme, n, bytes) + multicast_latency(spec, n, bytes);
}

}  // namespace

double from_west_edge_hop_bytes(const Layout& to) {
  double total = 0.0;
  for (const Piece& p : to) total += static_cast<double>(p.size()) * kActivationBytes * p.core.x;
  return total;
}

double to_east_edge_hop_bytes(const Layout& from, int mesh_width) {
  double total = 0.0;
  for (const Piece& p : from)
    total += static_cast<double>(p.size()) * kActivationBytes * (mesh_width - 1 - p.core.x);
  return total;
}

double move_hop_bytes(const Layout& from, const Layout& to, int mesh_width) {
  // Both layouts cover the vector in increasing element order (as lower()
  // builds them), so the overlaps are found by a merge.
  double total = 0.0;
  std::size_t i = 0, j = 0;
  while (i < from.size() && j < to.size()) {
    const int lo = std::max(from[i].begin, to[j].begin);
    const int hi = std::min(from[i].end, to[j].end);
    if (hi > lo) {
      // Across wafers: along the row to the east edge, over the I/O, from the
      // west edge in the same row to the target.
      const int hops = from[i].wafer == to[j].wafer ? manhattan(from[i].core, to[j].core)
                       : mesh_width > 0 ? (mesh_width - 1 - from[i].core.x) + to[j].core.x +
                                              std::abs(to[j].core.y - from[i].core.y)
                                        : 0;
      total += static_cast<double>(hi - lo) * kActivationBytes * hops;
    }
    if (from[i].end < to[j].end)
      ++i;
    else
      ++j;
  }
  return total;
}

double gemv_hop_bytes(const MatrixPlacement& m) {
  const int P = m.p(), Q = m.q();
  // Column chunks: in_features elements in all, each going down P - 1 links.
  const double multicast = static_cast<double>(m.in_features) * kActivationBytes * (P - 1);
  // Row reductions: out_features partial sums in all, each over the scheme's hops.
  const double reduce = static_cast<double>(m.out_features) * kActivationBytes *
                        reduction_hops(m.reduction, Q, m.reduction_groups);
  return multicast + reduce;
}

Layout layer_input_layout(const LayerStage& st) {
  return output_layout(st.o);
}
// A dense layer's output lands on down's roots; a mixture of experts combines
// the chosen experts' outputs back onto the residual (o's roots).
Layout layer_output_layout(const LayerStage& st) {
  return st.experts.empty() ? output_layout(st.down) : output_layout(st.o);
}

Layout head_input_layout(const models::ModelConfig& model, const HeadStage& head) {
  const int k = std::min(head.lm_head.p(), model.hidden_size);
  const Coord r = head.lm_head.root(0);
  Layout l;
  for (int i = 0; i < k; ++i)
    l.push_back(Piece{Coord{r.x, r.y + i}, block_begin(model.hidden_size, k, i),
                      block_begin(model.hidden_size, k, i + 1), head.wafer});
  return l;
}

Layout embedding_row_layout(const HeadStage& head) {
  const MatrixPlacement& e = head.embedding;
  const int p = e.p() / 2;
  Layout l;
  for (int q = 0; q < e.q(); ++q)
    l.push_back(Piece{e.core(p, q), e.col_begin(q), e.col_begin(q + 1), e.wafer});
  return l;
}

double layer_hop_bytes(const models::ModelConfig& model, const LayerStage& st) {
  const Layout residual = output_layout(st.o);
  double t = 0.0;
  // attn rmsnorm, move to qkv, qkv gemv.
  t += norm_hop_bytes(st.o.p());
  t += move_hop_bytes(residual, input_layout(st.qkv));
  t += gemv_hop_bytes(st.qkv);
  // Attention of user 0 at position 0: q to each segment top, k and v to the
  // core caching position 0 (also the top), q multicast, partials reduced.
  const AttentionPlacement& a = st.attention;
  const int hd = model.head_dim, g = model.num_heads / model.num_kv_heads;
  const QkvRows order = st.qkv_rows(model);
  const Layout qkv_out = output_layout(st.qkv);
  // q_from: the query groups as qkv's rows hold them; q_to: the same cores,
  // named as attention's output (query head i at i x head_dim).
  Layout q_from, q_to, k_to, v_to;
  for (int h = 0; h < a.num_kv_heads; ++h) {
    const Coord top = a.segment_core(h, 0);
    const Coord owner = a.segment_core(h, a.slot_core(0, 0));
    q_from.push_back(Piece{top, order.q(h * g), order.q(h * g) + g * hd, a.wafer});
    q_to.push_back(Piece{top, h * g * hd, (h + 1) * g * hd, a.wafer});
    k_to.push_back(Piece{owner, order.k(h), order.k(h) + hd, a.wafer});
    v_to.push_back(Piece{owner, order.v(h), order.v(h) + hd, a.wafer});
  }
  t += move_hop_bytes(qkv_out, q_from) + move_hop_bytes(qkv_out, k_to) +
       move_hop_bytes(qkv_out, v_to);
  const int L = a.segment_length;
  t += a.num_kv_heads * (static_cast<double>(g) * hd * kActivationBytes * (L - 1) +
                         static_cast<double>(g) * (hd + 2) * kActivationBytes *
                             reduction_hops(a.reduction, L, a.reduction_groups));
  // Attention output (at the segment tops, q layout) to o; o gemv.
  t += move_hop_bytes(q_to, input_layout(st.o));
  t += gemv_hop_bytes(st.o);
  // ffn rmsnorm, gate/up, SwiGLU (in place), down, residual to down's roots.
  t += norm_hop_bytes(st.o.p());
  // The feed-forward block of a dense layer (gate_up interleaved for SwiGLU,
  // plain up for gpt2's GELU) or of one expert.
  auto ffn = [&](const MatrixPlacement& up, const MatrixPlacement& down) {
    const Layout up_out =
        up.row_granule == 2 ? swiglu_output_layout(output_layout(up)) : output_layout(up);
    return move_hop_bytes(residual, input_layout(up)) + gemv_hop_bytes(up) +
           move_hop_bytes(up_out, input_layout(down)) + gemv_hop_bytes(down);
  };
  if (st.experts.empty()) {
    // The residual joins down's output on down's roots.
    t += ffn(st.gate_up, st.down) + move_hop_bytes(residual, output_layout(st.down));
    return t;
  }
  // Mixture of experts: the router GEMV, then k of E experts per token; the
  // estimate charges the mean expert k times (which experts a token picks is
  // only known at run time).
  t += move_hop_bytes(residual, input_layout(st.router)) + gemv_hop_bytes(st.router);
  double experts = 0.0;
  for (const ExpertPlacement& e : st.experts)
    experts += ffn(e.gate_up, e.down) + move_hop_bytes(output_layout(e.down), residual);
  t += experts * model.experts_per_token / static_cast<double>(st.experts.size());
  return t;
}

double head_hop_bytes(const models::ModelConfig& model, const HeadStage& head) {
  const Layout in = head_input_layout(model, head);
  double t = norm_hop_bytes(static_cast<int>(in.size()));
  t += move_hop_bytes(in, input_layout(head.lm_head));
  t += gemv_hop_bytes(head.lm_head);
  t += 8.0 * std::max(0, head.lm_head.p() - 1);  // argmax (value, index) up the roots
  return t;
}

double estimate_hop_bytes(const models::ModelConfig& model, const Placement& pl, int mesh_width) {
  double t = 0.0;
  for (std::size_t i = 0; i < pl.layers.size(); ++i) {
    const LayerStage& st = pl.layers[i];
    t += layer_hop_bytes(model, st);
    const Layout out = layer_output_layout(st);
    t += move_hop_bytes(out,
                        i + 1 < pl.layers.size() ? layer_input_layout(pl.layers[i + 1])
                                                 : head_input_layout(model, pl.head),
                        mesh_width);
  }
  t += head_hop_bytes(model, pl.head);
  if (!pl.layers.empty())
    t += move_hop_bytes(embedding_row_layout(pl.head), layer_input_layout(pl.layers.front()),
                        mesh_width);
  // The terms above count fp32 values, so at another width they scale (the
  // few that stay 32-bit, the norms' statistics and the argmax's pairs, are
  // scaled too: a few bytes a token of an estimate).
  return t * pl.value_bytes / kActivationBytes;
}

double move_latency_cycles(const LatencyModel& lm, const Layout& from, const Layout& to) {
  int hops = 0, largest = 0;
  std::size_t i = 0, j = 0;
  while (i < from.size() && j < to.size()) {
    const int lo = std::max(from[i].begin, to[j].begin);
    const int hi = std::min(from[i].end, to[j].end);
    if (hi > lo) {
      const int h = from[i].wafer == to[j].wafer
                        ? manhattan(from[i].core, to[j].core)
                        : (lm.spec.mesh_width - 1 - from[i].core.x) + to[j].core.x;
      hops = std::max(hops, h);
      if (h > 0) largest = std::max(largest, hi - lo);
    }
    if (from[i].end < to[j].end)
      ++i;
    else
      ++j;
  }
  if (hops == 0) return 0.0;
  return hops * static_cast<double>(lm.spec.hop_latency.value) +
         serialization_cycles(lm.spec, largest * lm.value_bytes);
}

double gemv_latency_cycles(const LatencyModel& lm, const MatrixPlacement& m) {
  const int P = m.p(), Q = m.q();
  if (P < 1 || Q < 1) return 0.0;
  const std::uint64_t cols =
      ceil_div(static_cast<std::uint64_t>(m.in_features), static_cast<std::uint64_t>(Q));
  const std::uint64_t rows = m.max_tile_elements() / std::max<std::uint64_t>(1, cols);
  const fabric::CoreCostModel cost(lm.spec);
  const double tile = static_cast<double>(cost.gemv_tile(rows, cols, lm.weight_bits).cycles.value);
  return multicast_latency(lm.spec, P, static_cast<double>(cols) * lm.value_bytes) + tile +
         reduction_latency(lm.spec, m.reduction, Q, static_cast<double>(rows) * lm.value_bytes,
                           m.reduction_groups);
}

double attention_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                                const AttentionPlacement& a) {
  const int L = std::max(1, a.segment_length);
  const int hd = model.head_dim, g = model.num_heads / model.num_kv_heads;
  const int visible =
      model.sliding_window > 0 ? std::min(lm.context, model.sliding_window) : lm.context;
  const auto positions = static_cast<std::uint64_t>((std::max(1, visible) + L - 1) / L);
  // A block of c columns per kv head: each column its share of the dims,
  // the scores all-reduced along the row between the two halves.
  const int C = std::max(1, a.columns_per_head);
  const int dims = (hd + C - 1) / C;
  const fabric::CoreCostModel cost(lm.spec);
  const double core =
      static_cast<double>(cost.attention(positions, static_cast<std::uint64_t>(dims),
                                         static_cast<std::uint64_t>(g), lm.weight_bits)
                              .cycles.value);
  const double scores = static_cast<double>(g) * static_cast<double>(positions) * lm.value_bytes;
  const double row =
      C > 1 ? all_reduce_latency(lm.spec, a.reduction, C, scores, a.reduction_groups) : 0.0;
  const double normalise =
      static_cast<double>(cost.vector_op(static_cast<std::uint64_t>(g) * dims, 1).cycles.value);
  return multicast_latency(lm.spec, L, static_cast<double>(g) * dims * lm.value_bytes) + core +
         row +
         reduction_latency(lm.spec, a.reduction, L,
                           static_cast<double>(g) * (dims * lm.value_bytes + 2 * kActivationBytes),
                           a.reduction_groups) +
         normalise;
}

double layer_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                            const LayerStage& st) {
  const Layout residual = output_layout(st.o);
  // The norms' statistics: a chain up the residual's roots, or (whole
  // region) the matrices' scheme.
  const double norm =
      all_reduce_latency(lm.spec, st.whole_region ? st.o.reduction : fabric::ReductionScheme::chain,
                         st.o.p(), kActivationBytes, st.whole_region ? st.o.reduction_groups : 0);
  double t = norm + move_latency_cycles(lm, residual, input_layout(st.qkv)) +
             gemv_latency_cycles(lm, st.qkv);
  // q, k and v to the segments (the longest of the three moves), attention,
  // the result to o, o.
  const AttentionPlacement& a = st.attention;
  const int hd = model.head_dim, g = model.num_heads / model.num_kv_heads;
  const QkvRows order = st.qkv_rows(model);
  // q_from as qkv's rows hold the query groups, q_to as attention's output
  // names them (layer_hop_bytes).
  Layout q_from, q_to, kv_to;
  for (int h = 0; h < a.num_kv_heads; ++h) {
    const Coord top = a.segment_core(h, 0);
    const Coord owner = a.segment_core(h, a.slot_core(0, std::max(0, lm.context - 1)));
    q_from.push_back(Piece{top, order.q(h * g), order.q(h * g) + g * hd, a.wafer});
    q_to.push_back(Piece{top, h * g * hd, (h + 1) * g * hd, a.wafer});
    kv_to.push_back(Piece{owner, order.k(h), order.k(h) + hd, a.wafer});
  }
  for (int h = 0; h < a.num_kv_heads; ++h) {
    Piece v = kv_to[static_cast<std::size_t>(h)];
    v.begin = order.v(h), v.end = order.v(h) + hd;
    kv_to.push_back(v);
  }
  const Layout qkv_out = output_layout(st.qkv);
  t += std::max(move_latency_cycles(lm, qkv_out, q_from), move_latency_cycles(lm, qkv_out, kv_to));
  t += attention_latency_cycles(lm, model, a);
  t += move_latency_cycles(lm, q_to, input_layout(st.o)) + gemv_latency_cycles(lm, st.o);
  t += norm;
  auto ffn = [&](const MatrixPlacement& up, const MatrixPlacement& down) {
    const Layout up_out =
        up.row_granule == 2 ? swiglu_output_layout(output_layout(up)) : output_layout(up);
    return move_latency_cycles(lm, residual, input_layout(up)) + gemv_latency_cycles(lm, up) +
           move_latency_cycles(lm, up_out, input_layout(down)) + gemv_latency_cycles(lm, down);
  };
  if (st.experts.empty())
    return t + ffn(st.gate_up, st.down) + move_latency_cycles(lm, residual, output_layout(st.down));
  // Mixture of experts: the router, then the chosen experts side by side
  // (the slowest expert bounds the step); on a whole region they share its
  // cores, so the chosen ones run one after another.
  t += move_latency_cycles(lm, residual, input_layout(st.router)) +
       gemv_latency_cycles(lm, st.router);
  double slowest = 0.0;
  for (const ExpertPlacement& e : st.experts)
    slowest = std::max(
        slowest, ffn(e.gate_up, e.down) + move_latency_cycles(lm, output_layout(e.down), residual));
  return t + (st.whole_region ? model.experts_per_token : 1) * slowest;
}

double head_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                           const HeadStage& head) {
  const Layout in = head_input_layout(model, head);
  const int n = static_cast<int>(in.size());
  double t = reduction_latency(lm.spec, fabric::ReductionScheme::chain, n, kActivationBytes) +
             multicast_latency(lm.spec, n, kActivationBytes);
  t += move_latency_cycles(lm, in, input_layout(head.lm_head)) +
       gemv_latency_cycles(lm, head.lm_head);
  // argmax: (value, index) pairs chain-reduced up the roots.
  t += reduction_latency(lm.spec, fabric::ReductionScheme::chain, head.lm_head.p(), 8.0);
  return t;
}

double estimate_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                               const Placement& pl) {
  double t = 0.0;
  for (std::size_t i = 0; i < pl.layers.size(); ++i) {
    const LayerStage& st = pl.layers[i];
    t += layer_latency_cycles(lm, model, st);
    t += move_latency_cycles(lm, layer_output_layout(st),
                             i + 1 < pl.layers.size() ? layer_input_layout(pl.layers[i + 1])
                                                      : head_input_layout(model, pl.head));
  }
  t += head_latency_cycles(lm, model, pl.head);
  if (!pl.layers.empty())
    t += move_latency_cycles(lm, embedding_row_layout(pl.head),
                             layer_input_layout(pl.layers.front()));
  return t;
}

}  // namespace wafersim::sim
