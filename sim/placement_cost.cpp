#include "sim/placement_cost.hpp"

#include <algorithm>
#include <cstdlib>

namespace wafersim::sim {

namespace {

constexpr double kActivationBytes = 4.0;  // activations move as fp32

int manhattan(Coord a, Coord b) {
  return std::abs(a.x - b.x) + std::abs(a.y - b.y);
}

// Hops of a reduction over n cores of a line, summed over its combine steps.
double reduction_hops(fabric::ReductionScheme scheme, int n) {
  double hops = 0.0;
  for (const fabric::CombineStep& s : fabric::reduction_order(scheme, n)) hops += s.from - s.into;
  return hops;
}

// Reduction up a column of n cores of a 4 B value and its broadcast back.
double norm_hop_bytes(int n) {
  return 2.0 * kActivationBytes * std::max(0, n - 1);
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
      const int hops = from[i].wafer == to[j].wafer ? manhattan(from[i].core, to[j].core)
                       : mesh_width > 0 ? (mesh_width - 1 - from[i].core.x) + to[j].core.x
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
  const double reduce =
      static_cast<double>(m.out_features) * kActivationBytes * reduction_hops(m.reduction, Q);
  return multicast + reduce;
}

Layout layer_input_layout(const LayerStage& st) { return output_layout(st.o); }
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
  const int q_dim = model.q_dim(), kv = model.kv_dim();
  const Layout qkv_out = output_layout(st.qkv);
  Layout q_to, k_to, v_to;
  for (int h = 0; h < a.num_kv_heads; ++h) {
    const Coord top = a.segment_core(h, 0);
    const Coord owner = a.segment_core(h, a.slot_core(0, 0));
    q_to.push_back(Piece{top, h * g * hd, (h + 1) * g * hd, a.wafer});
    k_to.push_back(Piece{owner, q_dim + h * hd, q_dim + (h + 1) * hd, a.wafer});
    v_to.push_back(Piece{owner, q_dim + kv + h * hd, q_dim + kv + (h + 1) * hd, a.wafer});
  }
  t +=
      move_hop_bytes(qkv_out, q_to) + move_hop_bytes(qkv_out, k_to) + move_hop_bytes(qkv_out, v_to);
  const int L = a.segment_length;
  t += a.num_kv_heads *
       (static_cast<double>(g) * hd * kActivationBytes * (L - 1) +
        static_cast<double>(g) * (hd + 2) * kActivationBytes * reduction_hops(a.reduction, L));
  // Attention output (at the segment tops, q layout) to o; o gemv.
  t += move_hop_bytes(q_to, input_layout(st.o));
  t += gemv_hop_bytes(st.o);
  // ffn rmsnorm, gate/up, SwiGLU (in place), down, residual to down's roots.
  t += norm_hop_bytes(st.o.p());
  // The feed-forward block of a dense layer (gate_up interleaved for SwiGLU,
  // plain up for gpt2's GELU) or of one expert.
  auto ffn = [&](const MatrixPlacement& up, const MatrixPlacement& down) {
    const Layout up_out = up.row_granule == 2 ? swiglu_output_layout(output_layout(up))
                                              : output_layout(up);
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
  return t;
}

}  // namespace wafersim::sim
