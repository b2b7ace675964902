// Interprets a lowered program's phases on the fabric model: timing through
// the flow-level links and core timelines, and (functional mode) the real
// numbers, with partial sums added in the order the simulated reductions add
// them. Plain C++: no SystemC here, so it can be tested on its own; the
// engine's SystemC modules call it phase by phase in simulated time.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric/wafer_io.hpp"
#include "models/kernels.hpp"
#include "models/rng.hpp"
#include "models/weights.hpp"
#include "models/work_team.hpp"
#include "sim/placement/placement.hpp"
#include "sim/program/program.hpp"
#include "sim/exec/token_message.hpp"
#include "sim/exec/value_lane.hpp"

namespace wafersim::sim {

using fabric::Line;
using fabric::reduction_order;
using fabric::ReductionScheme;
// Interprets phases: timing through the fabric model, numbers when functional.
class Executor {
 public:
  // One wafer (tests).
  Executor(fabric::Fabric& fab, const models::ModelConfig& model, const Placement& pl,
           const Program& prog, const models::Weights* weights, int weight_bits)
      : Executor(std::vector<fabric::Fabric*>{&fab}, nullptr, model, pl, prog, weights,
                 weight_bits) {}
  // Several wafers joined by their edge I/O (`io` may be null for one wafer).
  Executor(std::vector<fabric::Fabric*> wafers, fabric::WaferIo* io,
           const models::ModelConfig& model, const Placement& pl, const Program& prog,
           const models::Weights* weights, int weight_bits)
      : fabs_(std::move(wafers)),
        io_(io),
        model_(model),
        pl_(pl),
        prog_(prog),
        w_(weights),
        bits_(weight_bits) {
    if (!io_) {
      own_io_ =
          std::make_unique<fabric::WaferIo>(fabs_.front()->spec(), static_cast<int>(fabs_.size()));
      io_ = own_io_.get();
    }
    if (w_ && !pl.layers.empty()) {
      const auto& a = pl.layers.front().attention;
      slices_per_layer_ = static_cast<std::size_t>(a.num_kv_heads) * a.segment_length;
      const std::size_t n =
          static_cast<std::size_t>(pl.users) * pl.layers.size() * slices_per_layer_;
      kv_k_.assign(n, {});
      kv_v_.assign(n, {});
    }
  }

  bool functional() const { return w_ != nullptr; }

  // A values-only executor (the functional lane, sim/exec/value_lane.hpp):
  // computes the numbers and the layouts only, never touching the fabric;
  // every time it returns is the ready time it was given and means nothing.
  // Needs weights. Its fabrics may be in use by a timing executor on
  // another thread at the same time.
  void set_values_only() {
    if (!functional()) throw std::logic_error("a values-only executor needs weights");
    timing_ = false;
  }

  // Mixture-of-experts choices: a functional executor publishes the experts
  // each token chose to `x`; a timing-only one with an exchange takes them
  // from it (waiting) instead of drawing them (timing_route).
  void set_expert_exchange(ExpertExchange* x) { experts_ = x; }

  // Seed of the expert choice in timing-only runs (see timing_route()).
  void set_routing_seed(std::uint64_t seed) { routing_seed_ = seed; }

  // Row `row` of an embedding-like matrix (embedding or gpt2's position
  // embeddings), read from the cores of the row block holding it once the
  // index has reached that block's root (`at_root`): the index is multicast
  // east along the row block, every core sends its piece of the row.
  Vec embedding_row(const MatrixPlacement& e, int row, const Timed& at_root) {
    int p = 0;
    while (p + 1 < e.p() && e.row_begin(p + 1) <= row) ++p;
    Vec v;
    std::vector<Timed> arrivals;
    multicast(e.wafer, Line{e.root(p), fabric::Direction::east, e.q()}, Bytes{4}, at_root,
              arrivals);
    for (int q = 0; q < e.q(); ++q) {
      v.layout.push_back(Piece{e.core(p, q), e.col_begin(q), e.col_begin(q + 1), e.wafer});
      v.ready.push_back(arrivals[static_cast<std::size_t>(q)]);
    }
    return v;
  }

  // The embedding row of `token`, read from the cores holding it once the
  // token id has reached them (`id_ready`, at the lm_head/embedding root).
  // gpt2 adds the position embedding row of `position`: its pieces are sent
  // to the token row's cores and added there (x = embedding + position, in
  // that order, as the reference does).
  Vec embed(std::int32_t token, int position, const Timed& id_ready, bool from_host) {
    const MatrixPlacement& e = pl_.head.embedding;
    int p = 0;
    while (p + 1 < e.p() && e.row_begin(p + 1) <= token) ++p;
    Timed at_row = id_ready;
    if (!from_host && timing_) {
      route_.clear();
      fab(e.wafer).route(pl_.head.lm_head.root(0), e.root(p), route_);
      at_row = fab(e.wafer).flow().send(route_, Bytes{4}, id_ready);
    }
    Vec v = embedding_row(e, token, at_row);
    if (functional()) {
      v.values.resize(static_cast<std::size_t>(w_->embedding.cols()));
      w_->embedding.row_values(token, v.values);
    }
    const MatrixPlacement& pe = pl_.head.position_embedding;
    if (model_.is_gpt2() && pe.p() > 0) {
      // The position index travels with the token id to the position block.
      int pp = 0;
      while (pp + 1 < pe.p() && pe.row_begin(pp + 1) <= position) ++pp;
      Timed at_pos = from_host ? at_row : id_ready;
      if (timing_) {
        route_.clear();
        fab(pe.wafer).mesh().xy_route(from_host ? e.root(p) : pl_.head.lm_head.root(0), pe.root(pp),
                                      route_);
        at_pos = fab(pe.wafer).flow().send(route_, Bytes{4}, at_pos);
      }
      Vec pos = move(embedding_row(pe, position, at_pos), v.layout);
      if (functional()) {
        pos.values.resize(static_cast<std::size_t>(w_->position_embedding.cols()));
        w_->position_embedding.row_values(position, pos.values);
      }
      return add(v, pos);
    }
    return v;
  }

  // Moves `v` to `target`: every overlap between a source piece and a target
  // piece is one point-to-point transfer along the XY route.
  //
  // With `spread` > 0, transfer k is routed through a waypoint column
  // (min(x_src, x_dst) + 1 + k mod spread): along its row to that column,
  // vertically there, then along the target's row. Moving a whole vector
  // between two columns of cores then uses `spread` columns of vertical links
  // in parallel instead of funnelling every byte through one column (XY
  // routing's worst case; the same idea as Valiant/ROMM routing in NoCs).
  Vec move(const Vec& v, const Layout& target, int spread = 0) {
    Vec out;
    out.layout = target;
    out.values = v.values;
    out.tokens = v.tokens;
    out.ready.reserve(target.size());
    std::size_t s = 0;
    int transfers = 0;
    for (const Piece& t : target) {
      while (s > 0 && v.layout[s].begin > t.begin) --s;
      while (s < v.layout.size() && v.layout[s].end <= t.begin) ++s;
      std::optional<Timed> ready;
      for (std::size_t k = s; k < v.layout.size() && v.layout[k].begin < t.end; ++k) {
        const Piece& src = v.layout[k];
        const int n = std::min(src.end, t.end) - std::max(src.begin, t.begin);
        if (n <= 0) continue;
        const int waypoint =
            spread > 0 ? std::min(src.core.x, t.core.x) + 1 + transfers % spread : -1;
        ++transfers;
        const Timed arrival = transfer(
            src, t, Bytes{static_cast<std::uint64_t>(n) * 4 * static_cast<std::uint64_t>(v.tokens)},
            v.ready[k], waypoint);
        ready = ready ? later(*ready, arrival) : arrival;
      }
      if (!ready) throw std::logic_error("move: target piece not covered by the source vector");
      out.ready.push_back(*ready);
    }
    return out;
  }

  void run(const Phase& ph, TokenMessage& m, int layer) {
    switch (ph.kind) {
      case PhaseKind::move:
        slot(m, ph.out) = move(slot(m, ph.a), ph.target, ph.spread);
        break;
      case PhaseKind::rmsnorm:
        slot(m, ph.out) = rmsnorm(slot(m, ph.a), gamma(ph, layer));
        break;
      case PhaseKind::layernorm:
        slot(m, ph.out) = layernorm(slot(m, ph.a), gamma(ph, layer), beta(ph, layer));
        break;
      case PhaseKind::gemv:
        slot(m, ph.out) = gemv(*ph.matrix, ph.weights, layer, slot(m, ph.a));
        break;
      case PhaseKind::bias:
        bias(slot(m, ph.a), ph.weights, layer);
        break;
      case PhaseKind::qk_norm:
        qk_norm(slot(m, ph.a), layer);
        break;
      case PhaseKind::rope:
        rope(slot(m, ph.a), m.position);
        break;
      case PhaseKind::attention:
        slot(m, ph.out) = attention(*ph.attention, layer, slot(m, ph.a), m.user, m.position);
        break;
      case PhaseKind::silu_mul:
        slot(m, ph.out) = silu_mul(slot(m, ph.a));
        break;
      case PhaseKind::gelu:
        gelu(slot(m, ph.a));
        break;
      case PhaseKind::moe:
        slot(m, ph.out) = moe(*ph.stage, layer, slot(m, ph.a), slot(m, ph.b), ph.target, ph.spread,
                              m.user, m.position);
        break;
      case PhaseKind::add:
        slot(m, ph.out) = add(slot(m, ph.a), slot(m, ph.b));
        break;
      case PhaseKind::argmax:
        argmax(slot(m, ph.a), m);
        break;
    }
  }

  // Phase primitives (public so tests can time them in isolation).
  const std::vector<float>& gamma(const Phase& ph, int layer) const {
    static const std::vector<float> none;
    if (!w_) return none;
    switch (ph.gamma) {
      case Phase::Gamma::attn_norm:
        return w_->layers[static_cast<std::size_t>(layer)].attn_norm;
      case Phase::Gamma::ffn_norm:
        return w_->layers[static_cast<std::size_t>(layer)].ffn_norm;
      case Phase::Gamma::final_norm:
        return w_->final_norm;
    }
    return none;
  }
  // LayerNorm biases beside the gains of gamma().
  const std::vector<float>& beta(const Phase& ph, int layer) const {
    static const std::vector<float> none;
    if (!w_) return none;
    switch (ph.gamma) {
      case Phase::Gamma::attn_norm:
        return w_->layers[static_cast<std::size_t>(layer)].attn_norm_bias;
      case Phase::Gamma::ffn_norm:
        return w_->layers[static_cast<std::size_t>(layer)].ffn_norm_bias;
      case Phase::Gamma::final_norm:
        return w_->final_norm_bias;
    }
    return none;
  }

  fabric::Fabric& fab(int wafer) { return *fabs_[static_cast<std::size_t>(wafer)]; }
  Timed run_core(int wafer, Coord c, const Timed& ready, const fabric::CoreCost& cost) {
    if (!timing_) return ready;
    fabric::Fabric& f = fab(wafer);
    return f.cores().run(c, ready, cost);
  }

  // One point-to-point message between two cores, on one wafer along its XY
  // route, or between wafers: to the source wafer's east edge (same row),
  // over the wafers' I/O, then from the target wafer's west edge.
  // On one wafer, `waypoint_x` >= 0 routes through that column (see move()).
  Timed transfer(const Piece& src, const Piece& dst, Bytes bytes, const Timed& ready,
                 int waypoint_x = -1) {
    if (!timing_) return ready;
    route_.clear();
    if (src.wafer == dst.wafer) {
      // Around dead routers when there are any (XY otherwise).
      fabric::Fabric& f = fab(src.wafer);
      if (waypoint_x >= 0 && waypoint_x < f.mesh().width() && src.core.y != dst.core.y) {
        const Coord a{waypoint_x, src.core.y}, b{waypoint_x, dst.core.y};
        f.route(src.core, a, route_);
        f.route(a, b, route_);
        f.route(b, dst.core, route_);
      } else {
        f.route(src.core, dst.core, route_);
      }
      return fab(src.wafer).flow().send(route_, bytes, ready);
    }
    fabric::Fabric& a = fab(src.wafer);
    fabric::Fabric& b = fab(dst.wafer);
    a.route(src.core, Coord{a.mesh().width() - 1, src.core.y}, route_);
    const Timed at_edge = a.flow().send(route_, bytes, ready);
    const Timed across = io_->transfer(src.wafer, dst.wafer, bytes, at_edge);
    route_.clear();
    b.route(Coord{0, dst.core.y}, dst.core, route_);
    return b.flow().send(route_, bytes, across);
  }

  // The collectives on wafer `wafer`'s fabric (fabric/collectives.hpp).
  void multicast(int wafer, const Line& line, Bytes bytes, const Timed& ready,
                 std::vector<Timed>& arrivals) {
    if (!timing_) return arrivals.assign(static_cast<std::size_t>(line.length), ready);
    fabric::multicast_line(fab(wafer).mesh(), fab(wafer).flow(), line, bytes, ready, arrivals);
  }
  Timed reduce(int wafer, ReductionScheme scheme, const Line& line, Bytes bytes,
               std::span<const Timed> ready) {
    if (!timing_) return ready.front();
    return fabric::reduce_line(fab(wafer).mesh(), fab(wafer).flow(), scheme, line, bytes, ready);
  }
  void all_reduce(int wafer, ReductionScheme scheme, const Line& line, Bytes bytes,
                  std::span<const Timed> ready, std::vector<Timed>& arrivals) {
    if (!timing_) return arrivals.assign(ready.size(), ready.front());
    fabric::all_reduce_line(fab(wafer).mesh(), fab(wafer).flow(), scheme, line, bytes, ready,
                            arrivals);
  }

  // The pieces [a, b] of a layout that sits on consecutive cores of one
  // column, down it or (an upward matrix's roots) up it, from piece a on.
  static Line column_line(const Layout& l, std::size_t a = 0, std::size_t b = SIZE_MAX) {
    b = std::min(b, l.size() - 1);
    const int step = b > a && l[a + 1].core.y < l[a].core.y ? -1 : 1;
    for (std::size_t i = a + 1; i <= b; ++i)
      if (l[i].core.x != l[a].core.x || l[i].core.y != l[a].core.y + step * static_cast<int>(i - a))
        throw std::logic_error("layout is not a column of consecutive cores");
    return Line{l[a].core, step > 0 ? fabric::Direction::south : fabric::Direction::north,
                static_cast<int>(b - a + 1)};
  }

  // Blocks of prompt tokens: `tokens` equal layouts stacked into one block
  // (ready when every part is), and the last token of a block.
  static Vec stack(const std::vector<Vec>& parts) {
    Vec out = parts.front();
    out.tokens = 0;
    out.values.clear();
    for (const Vec& p : parts) {
      if (p.layout.size() != out.layout.size())
        throw std::logic_error("stack: parts on different layouts");
      for (std::size_t i = 0; i < out.ready.size(); ++i)
        out.ready[i] = later(out.ready[i], p.ready[i]);
      out.values.insert(out.values.end(), p.values.begin(), p.values.end());
      out.tokens += p.tokens;
    }
    return out;
  }
  static Vec last_token(const Vec& v) {
    Vec out;
    out.layout = v.layout;
    out.ready = v.ready;
    if (!v.values.empty()) {
      const auto r = v.row(v.tokens - 1);
      out.values.assign(r.begin(), r.end());
    }
    return out;
  }

  Vec rmsnorm(const Vec& x, const std::vector<float>& g) {
    const std::vector<Timed> back = column_statistic(x, x.ready, 2);
    fabric::Fabric& f = fab(x.layout.front().wafer);
    const auto T = static_cast<std::uint64_t>(x.tokens);
    Vec out;
    out.layout = x.layout;
    out.tokens = x.tokens;
    for (std::size_t i = 0; i < x.layout.size(); ++i)
      out.ready.push_back(run_core(x.layout[i].wafer, x.layout[i].core, back[i],
                                   f.cost().vector_op(x.layout[i].size() * T, 2)));
    if (functional()) {
      // Sum of squares per piece, combined in the order the chain adds them.
      out.values.resize(x.values.size());
      const int n = static_cast<int>(x.width());
      for (int t = 0; t < x.tokens; ++t)
        models::rmsnorm_apply(x.row(t), chain_sum(x, t, models::sum_of_squares), n, g,
                              static_cast<float>(model_.rms_norm_eps), out.row(t));
    }
    return out;
  }

  // A statistic of the whole vector (of every token of a block) from
  // per-piece partials: each root computes its partial (ops_per_element per
  // element), and the partials (4 B per token) are all-reduced along the
  // column (a chain up to the first root, the sum multicast back down).
  std::vector<Timed> column_statistic(const Vec& x, const std::vector<Timed>& ready,
                                      std::uint64_t ops_per_element) {
    const Line line = column_line(x.layout);
    fabric::Fabric& f = fab(x.layout.front().wafer);
    const auto T = static_cast<std::uint64_t>(x.tokens);
    std::vector<Timed> partial(x.layout.size());
    for (std::size_t i = 0; i < x.layout.size(); ++i)
      partial[i] = run_core(x.layout[i].wafer, x.layout[i].core, ready[i],
                            f.cost().vector_op(x.layout[i].size() * T, ops_per_element));
    std::vector<Timed> back;
    all_reduce(x.layout.front().wafer, ReductionScheme::chain, line, Bytes{4 * T}, partial, back);
    return back;
  }
  // Per-piece partials of token t of a column vector combined in the
  // chain's order.
  template <class PieceSum>
  float chain_sum(const Vec& x, int t, PieceSum&& piece_sum) const {
    const std::span<const float> r = x.row(t);
    std::vector<float> sums(x.layout.size());
    for (std::size_t i = 0; i < x.layout.size(); ++i)
      sums[i] = piece_sum(r.subspan(static_cast<std::size_t>(x.layout[i].begin),
                                    static_cast<std::size_t>(x.layout[i].size())));
    for (const auto& step : reduction_order(ReductionScheme::chain, static_cast<int>(sums.size())))
      sums[static_cast<std::size_t>(step.into)] += sums[static_cast<std::size_t>(step.from)];
    return sums[0];
  }

  // LayerNorm (gpt2) over a column of roots: two statistics one after the
  // other (the sum, then the sum of squared deviations from the mean, each a
  // chain reduction and a multicast back, as models::layernorm_apply
  // specifies: two passes, not E[x^2] - mean^2), then (x - mean) * inv *
  // gain + bias on every root.
  Vec layernorm(const Vec& x, const std::vector<float>& g, const std::vector<float>& b) {
    fabric::Fabric& f = fab(x.layout.front().wafer);
    const auto T = static_cast<std::uint64_t>(x.tokens);
    const std::vector<Timed> mean_ready = column_statistic(x, x.ready, 1);
    const std::vector<Timed> var_ready = column_statistic(x, mean_ready, 3);
    Vec out;
    out.layout = x.layout;
    out.tokens = x.tokens;
    for (std::size_t i = 0; i < x.layout.size(); ++i)
      out.ready.push_back(run_core(x.layout[i].wafer, x.layout[i].core, var_ready[i],
                                   f.cost().vector_op(x.layout[i].size() * T, 4)));
    if (functional()) {
      out.values.resize(x.values.size());
      const auto n = static_cast<float>(x.width());
      for (int t = 0; t < x.tokens; ++t) {
        const float mean = chain_sum(x, t, models::sum_of) / n;
        const float var = chain_sum(x, t,
                                    [&](std::span<const float> piece) {
                                      return models::sum_of_squared_deviations(piece, mean);
                                    }) /
                          n;
        models::layernorm_apply(x.row(t), mean, var, g, b, static_cast<float>(model_.rms_norm_eps),
                                out.row(t));
      }
    }
    return out;
  }

  // The bias of a matrix's output, added on the roots that hold each slice.
  void bias(Vec& v, WeightRef ref, int layer) {
    elementwise(v, 1);
    if (!functional()) return;
    const models::LayerWeights& lw = w_->layers[static_cast<std::size_t>(layer)];
    for (int t = 0; t < v.tokens; ++t) bias_row(v.row(t), ref, lw);
  }
  void bias_row(std::span<float> all, WeightRef ref, const models::LayerWeights& lw) const {
    switch (ref) {
      case WeightRef::qkv: {
        const auto q = static_cast<std::size_t>(model_.q_dim());
        const auto kv = static_cast<std::size_t>(model_.kv_dim());
        models::add_inplace(all.subspan(0, q), lw.bq);
        models::add_inplace(all.subspan(q, kv), lw.bk);
        models::add_inplace(all.subspan(q + kv, kv), lw.bv);
        break;
      }
      case WeightRef::o:
        models::add_inplace(all, lw.bo);
        break;
      case WeightRef::up:
        models::add_inplace(all, lw.b_up);
        break;
      case WeightRef::down:
        models::add_inplace(all, lw.b_down);
        break;
      default:
        throw std::logic_error("bias: this matrix has no bias");
    }
  }

  // qwen3's qk-norm: each q and k head RMSNorm'd with the layer's q_norm /
  // k_norm gains, on the qkv roots (a column of consecutive cores). Every
  // root squares and sums its q/k elements per head (2 ops per element);
  // a head held by one root is normed there; a head spread over several
  // consecutive roots has their partial sums (4 B per token) chain-reduced
  // to its first root and multicast back; then every root scales its
  // elements (2 ops per element). Functional: per head, the partial sums
  // of squares of its pieces combined in that chain's order (for a head on
  // one root exactly the reference's sum), then models::rmsnorm_apply.
  void qk_norm(Vec& qkv, int layer) {
    const Layout& l = qkv.layout;
    const int hd = model_.head_dim;
    const int heads = model_.num_heads + model_.num_kv_heads;
    const int qk_end = heads * hd;
    const auto T = static_cast<std::uint64_t>(qkv.tokens);
    auto overlap = [&](std::size_t i, int lo, int hi) {
      return std::max(0, std::min(l[i].end, hi) - std::max(l[i].begin, lo));
    };
    fabric::Fabric& f = fab(l.front().wafer);
    std::vector<Timed> partial(l.size()), normed(l.size());
    for (std::size_t i = 0; i < l.size(); ++i) {
      const auto n = static_cast<std::uint64_t>(overlap(i, 0, qk_end));
      partial[i] =
          n == 0 ? qkv.ready[i]
                 : run_core(l[i].wafer, l[i].core, qkv.ready[i], f.cost().vector_op(n * T, 2));
      normed[i] = partial[i];
    }
    // Pieces [first, last] holding head h.
    auto span_of = [&](int h) {
      std::size_t a = 0;
      while (l[a].end <= h * hd) ++a;
      std::size_t b = a;
      while (b + 1 < l.size() && l[b + 1].begin < (h + 1) * hd) ++b;
      return std::pair{a, b};
    };
    std::vector<Timed> back;
    for (int h = 0; h < heads; ++h) {
      const auto [a, b] = span_of(h);
      if (a == b) continue;
      const Line line = column_line(l, a, b);
      all_reduce(l.front().wafer, ReductionScheme::chain, line, Bytes{4 * T},
                 std::span(partial).subspan(a, b - a + 1), back);
      for (std::size_t k = a; k <= b; ++k) normed[k] = later(normed[k], back[k - a]);
    }
    for (std::size_t i = 0; i < l.size(); ++i) {
      const auto n = static_cast<std::uint64_t>(overlap(i, 0, qk_end));
      qkv.ready[i] = n == 0
                         ? qkv.ready[i]
                         : run_core(l[i].wafer, l[i].core, normed[i], f.cost().vector_op(n * T, 2));
    }
    if (!functional()) return;
    const models::LayerWeights& lw = w_->layers[static_cast<std::size_t>(layer)];
    const float eps = static_cast<float>(model_.rms_norm_eps);
    const auto hds = static_cast<std::size_t>(hd);
    for (int h = 0; h < heads; ++h) {
      const auto [a, b] = span_of(h);
      const int n = static_cast<int>(b - a + 1);
      for (int t = 0; t < qkv.tokens; ++t) {
        const std::span<float> head = qkv.row(t).subspan(static_cast<std::size_t>(h) * hds, hds);
        std::vector<float> sums(static_cast<std::size_t>(n));
        for (std::size_t k = a; k <= b; ++k) {
          const int lo = std::max(l[k].begin, h * hd), hi = std::min(l[k].end, (h + 1) * hd);
          sums[k - a] = models::sum_of_squares(head.subspan(static_cast<std::size_t>(lo - h * hd),
                                                            static_cast<std::size_t>(hi - lo)));
        }
        for (const auto& step : reduction_order(ReductionScheme::chain, n))
          sums[static_cast<std::size_t>(step.into)] += sums[static_cast<std::size_t>(step.from)];
        models::rmsnorm_apply(head, sums[0], hd, h < model_.num_heads ? lw.q_norm : lw.k_norm, eps,
                              head);
      }
    }
  }

  // GELU (tanh) in place on the up matrix's roots (gpt2): about 8 operations
  // per element (cube, tanh, products).
  void gelu(Vec& v) {
    elementwise(v, 8);
    if (functional()) models::gelu_tanh(v.values, v.values);
  }

  // Timing-only runs compute no router logits; the experts a token uses are
  // then drawn uniformly without replacement (k of num_experts, every subset
  // equally likely) from a generator seeded by (routing seed, layer, user,
  // position): the same scenario gives the same choices on every run. The
  // weights (1/k each) do not matter for timing.
  std::vector<models::ExpertChoice> timing_route(int layer, int user, int position) const {
    const std::uint64_t key = (static_cast<std::uint64_t>(layer) << 48) ^
                              (static_cast<std::uint64_t>(user) << 32) ^
                              static_cast<std::uint64_t>(position);
    models::Xoshiro256StarStar rng(models::stream_seed(routing_seed_, key));
    std::vector<int> experts(static_cast<std::size_t>(model_.num_experts));
    for (int e = 0; e < model_.num_experts; ++e) experts[static_cast<std::size_t>(e)] = e;
    std::vector<models::ExpertChoice> chosen;
    for (int j = 0; j < model_.experts_per_token; ++j) {
      const auto left = static_cast<std::uint64_t>(model_.num_experts - j);
      const auto pick = static_cast<std::size_t>(j) + static_cast<std::size_t>(rng.next() % left);
      std::swap(experts[static_cast<std::size_t>(j)], experts[pick]);
      chosen.push_back({experts[static_cast<std::size_t>(j)],
                        1.0f / static_cast<float>(model_.experts_per_token)});
    }
    return chosen;
  }

  // Mixture of experts (Mixtral) for one token. `normed` sits on the
  // router's input layout (the top cores of the router's columns), `logits`
  // on the router's roots.
  //  1. Choice: every router root picks its local top k (1 op per logit);
  //     the (value, index) pairs (8 B each) are chain-reduced up the root
  //     column; the first root computes the k weights (softmax over the k
  //     chosen logits, models::route_top_k; 4 ops each) and multicasts the
  //     choice (8 B per expert) east along the router's top row, where the
  //     normed pieces wait.
  //  2. Each chosen expert (in chosen order) runs as a dense SwiGLU MLP on
  //     its own rectangle: move to its gate_up's columns, GEMV, silu*up, move
  //     to its down's columns, GEMV; its output moves to `home` (the
  //     residual cores) through `spread` waypoint columns.
  //  3. Combine on `home`: once all k outputs are there, each core computes
  //     out = 0; out += weight_j * y_j in chosen order (models::axpy_inplace,
  //     fp32, 2 ops per element per expert) -- the reference's order.
  // Functional runs use the real top k of the router logits; timing-only
  // runs timing_route()'s seeded uniform choice.
  Vec moe(const LayerStage& st, int layer, const Vec& normed, const Vec& logits, const Layout& home,
          int spread, int user, int position) {
    const int k = model_.experts_per_token;
    const int T = normed.tokens;
    const auto T64 = static_cast<std::uint64_t>(T);
    // The choice of every token of the block.
    std::vector<std::vector<models::ExpertChoice>> chosen;
    for (int t = 0; t < T; ++t) {
      if (functional()) {
        chosen.push_back(models::route_top_k(logits.row(t), k));
        if (experts_) experts_->publish(layer, user, position + t, chosen.back());
      } else {
        chosen.push_back(experts_ ? experts_->take(layer, user, position + t)
                                  : timing_route(layer, user, position + t));
      }
    }
    const MatrixPlacement& r = st.router;
    const int w = r.wafer;
    std::vector<Timed> local(logits.layout.size());
    for (std::size_t i = 0; i < logits.layout.size(); ++i)
      local[i] = run_core(w, logits.layout[i].core, logits.ready[i],
                          fab(w).cost().vector_op(logits.layout[i].size() * T64, 1));
    const auto pair_bytes = Bytes{static_cast<std::uint64_t>(k) * 8 * T64};
    Timed choice = reduce(w, ReductionScheme::chain, column_line(logits.layout), pair_bytes, local);
    choice = run_core(w, r.root(0), choice,
                      fab(w).cost().vector_op(static_cast<std::uint64_t>(k) * T64, 4));
    std::vector<Timed> told;
    multicast(w, Line{r.core(0, 0), fabric::Direction::east, r.q()}, pair_bytes, choice, told);
    Vec x = normed;
    if (x.layout.size() != told.size())
      throw std::logic_error(r.name + ": the normed vector is not on the router's columns");
    for (std::size_t i = 0; i < x.ready.size(); ++i) x.ready[i] = later(x.ready[i], told[i]);

    // Experts in order of first use (for one token: its chosen order); each
    // runs once on the block of the tokens that chose it.
    std::vector<int> order;
    std::vector<std::vector<int>> users_of(static_cast<std::size_t>(model_.num_experts));
    for (int t = 0; t < T; ++t)
      for (const models::ExpertChoice& c : chosen[static_cast<std::size_t>(t)]) {
        auto& u = users_of[static_cast<std::size_t>(c.expert)];
        if (u.empty()) order.push_back(c.expert);
        u.push_back(t);
      }
    std::vector<Vec> outputs(static_cast<std::size_t>(model_.num_experts));
    for (int e_id : order) {
      const ExpertPlacement& e = st.experts[static_cast<std::size_t>(e_id)];
      const std::vector<int>& rows = users_of[static_cast<std::size_t>(e_id)];
      Vec sub;
      sub.layout = x.layout;
      sub.ready = x.ready;
      sub.tokens = static_cast<int>(rows.size());
      if (functional())
        for (int t : rows) {
          const auto src = x.row(t);
          sub.values.insert(sub.values.end(), src.begin(), src.end());
        }
      const Vec gu = gemv(e.gate_up, WeightRef::expert_gate_up, layer,
                          move(sub, input_layout(e.gate_up)), e_id);
      const Vec act = silu_mul(gu);
      const Vec y =
          gemv(e.down, WeightRef::expert_down, layer, move(act, input_layout(e.down)), e_id);
      outputs[static_cast<std::size_t>(e_id)] = move(y, home, spread);
    }
    Vec out;
    out.layout = home;
    out.tokens = T;
    for (std::size_t i = 0; i < home.size(); ++i) {
      Timed t = outputs[static_cast<std::size_t>(order.front())].ready[i];
      for (int e_id : order) t = later(t, outputs[static_cast<std::size_t>(e_id)].ready[i]);
      out.ready.push_back(
          run_core(home[i].wafer, home[i].core, t,
                   fab(home[i].wafer).cost().vector_op(home[i].size() * T64, 2 * k)));
    }
    if (functional()) {
      out.values.assign(static_cast<std::size_t>(model_.hidden_size) * T64, 0.0f);
      for (int t = 0; t < T; ++t)
        for (const models::ExpertChoice& c : chosen[static_cast<std::size_t>(t)]) {
          const std::vector<int>& rows = users_of[static_cast<std::size_t>(c.expert)];
          const auto at = std::find(rows.begin(), rows.end(), t) - rows.begin();
          models::axpy_inplace(
              c.weight, outputs[static_cast<std::size_t>(c.expert)].row(static_cast<int>(at)),
              out.row(t));
        }
    }
    return out;
  }

  // What one host thread needs while it computes a row band of a GEMV.
  struct BandScratch {
    std::vector<float> partials, gate, up;
  };

  // Partial products of a row band's tiles: rows [r0, r1) of the fused
  // matrix, the tile of core column qi on input columns [c0 + cuts[qi],
  // c0 + cuts[qi + 1]) (cuts[0] = 0), into y[qi * (r1 - r0) ...]
  // (models::gemv_tiles: the same bits as each tile on its own); `expert`
  // for the expert matrices. Reads the weights only, so host threads may run
  // it at once (each with its own scratch).
  void band_product(WeightRef ref, int layer, int r0, int r1, int c0, std::span<const int> cuts,
                    std::span<const float> x, std::span<float> y, BandScratch& scratch,
                    int expert = -1) const {
    const auto n = static_cast<std::size_t>(r1 - r0);
    const int nc = cuts.back();
    const auto xs = x.subspan(static_cast<std::size_t>(c0), static_cast<std::size_t>(nc));
    auto part = [&](const models::Matrix& m, int row_offset, int lo, int hi) {
      const int a = std::max(r0, lo), b = std::min(r1, hi);
      if (a >= b) return;
      models::gemv_tiles(m.view(a - row_offset, b - a, c0, nc), cuts, xs,
                         y.subspan(static_cast<std::size_t>(a - r0)), n);
    };
    if (ref == WeightRef::lm_head) return part(w_->lm_head_matrix(), 0, 0, model_.vocab_size);
    const models::LayerWeights& lw = w_->layers[static_cast<std::size_t>(layer)];
    const int q = model_.q_dim(), kv = model_.kv_dim();
    switch (ref) {
      case WeightRef::qkv:
        part(lw.wq, 0, 0, q);
        part(lw.wk, q, q, q + kv);
        part(lw.wv, q + kv, q + kv, q + 2 * kv);
        break;
      case WeightRef::o:
        part(lw.wo, 0, 0, model_.hidden_size);
        break;
      case WeightRef::down:
        part(lw.w_down, 0, 0, model_.hidden_size);
        break;
      case WeightRef::up:
        part(lw.w_up, 0, 0, model_.intermediate_size);
        break;
      case WeightRef::router:
        part(lw.router, 0, 0, model_.num_experts);
        break;
      case WeightRef::expert_down:
        part(lw.experts.at(static_cast<std::size_t>(expert)).w_down, 0, 0, model_.hidden_size);
        break;
      case WeightRef::gate_up:
      case WeightRef::expert_gate_up: {
        const models::Matrix& wg = ref == WeightRef::gate_up
                                       ? lw.w_gate
                                       : lw.experts.at(static_cast<std::size_t>(expert)).w_gate;
        const models::Matrix& wu = ref == WeightRef::gate_up
                                       ? lw.w_up
                                       : lw.experts.at(static_cast<std::size_t>(expert)).w_up;
        // Interleaved rows: 2i is gate row i, 2i+1 is up row i (r0, r1 even).
        const std::size_t half = n / 2, tiles = cuts.size() - 1;
        scratch.gate.resize(tiles * half);
        scratch.up.resize(tiles * half);
        const int g0 = r0 / 2, gn = static_cast<int>(half);
        models::gemv_tiles(wg.view(g0, gn, c0, nc), cuts, xs, scratch.gate, half);
        models::gemv_tiles(wu.view(g0, gn, c0, nc), cuts, xs, scratch.up, half);
        for (std::size_t t = 0; t < tiles; ++t)
          for (std::size_t i = 0; i < half; ++i) {
            y[t * n + 2 * i] = scratch.gate[t * half + i];
            y[t * n + 2 * i + 1] = scratch.up[t * half + i];
          }
        break;
      }
      case WeightRef::lm_head:
        break;
    }
  }

  // Mesh GEMV: input chunk q multicast down column q; every core multiplies
  // its tile; partial sums of each row of cores reduced west to its root.
  // Functional: the host threads (set_threads) compute the values, row band
  // by row band, while this thread times the GEMV on the fabric model; it
  // then takes the bands left.
  Vec gemv(const MatrixPlacement& m, WeightRef ref, int layer, const Vec& x, int expert = -1) {
    const int P = m.p(), Q = m.q();
    if (static_cast<int>(x.layout.size()) != Q)
      throw std::logic_error(m.name + ": input is not on its columns");
    Vec y;
    y.tokens = x.tokens;
    std::vector<fabric::CombineStep> order;
    std::vector<int> cuts;  // the tiles' columns, from the first column's
    // Until finish(), the helpers read x, order and cuts and write y.values: if
    // the timing below throws, they are waited for before those go.
    struct JoinOnThrow {
      models::WorkTeam* team = nullptr;
      ~JoinOnThrow() {
        if (!team) return;
        try {
          team->finish();
        } catch (...) {  // the timing's exception is the one that propagates
        }
      }
    } join_on_throw;
    if (functional()) {
      y.values.assign(static_cast<std::size_t>(m.out_features) * static_cast<std::size_t>(x.tokens),
                      0.0f);
      order = reduction_order(m.reduction, Q);
      for (int qi = 0; qi <= Q; ++qi) cuts.push_back(m.col_begin(qi) - m.col_begin(0));
      team().start(P, [&](int pi, int thread) {
        band_values(m, ref, layer, order, cuts, pi, x, y, expert,
                    scratch_[static_cast<std::size_t>(thread)]);
      });
      join_on_throw.team = team_.get();
    }
    // A block of T prompt tokens is a GEMM: T input chunks down each column
    // (one message of T chunks), each core streams its tile once and
    // multiplies it by all T (fabric::CoreCostModel::gemm_tile), T partial
    // sums per row reduced together.
    const auto T = static_cast<std::uint64_t>(x.tokens);
    done_.resize(static_cast<std::size_t>(P) * Q);
    std::vector<Timed> arrivals;
    for (int qi = 0; qi < Q; ++qi) {
      const auto cols = static_cast<std::uint64_t>(m.col_begin(qi + 1) - m.col_begin(qi));
      multicast(m.wafer, Line{m.core(0, qi), m.multicast_direction(), P}, Bytes{cols * 4 * T},
                x.ready[static_cast<std::size_t>(qi)], arrivals);
      for (int pi = 0; pi < P; ++pi) {
        const auto rows = static_cast<std::uint64_t>(m.row_begin(pi + 1) - m.row_begin(pi));
        done_[static_cast<std::size_t>(pi) * Q + qi] =
            run_core(m.wafer, m.core(pi, qi), arrivals[static_cast<std::size_t>(pi)],
                     fab(m.wafer).cost().gemm_tile(rows, cols, T, bits_));
      }
    }
    y.layout = output_layout(m);
    for (int pi = 0; pi < P; ++pi) {
      const auto rows = static_cast<std::uint64_t>(m.row_begin(pi + 1) - m.row_begin(pi));
      y.ready.push_back(reduce(m.wafer, m.reduction, Line{m.root(pi), fabric::Direction::east, Q},
                               Bytes{rows * 4 * T},
                               std::span(done_).subspan(static_cast<std::size_t>(pi) * Q, Q)));
    }
    if (functional()) {
      join_on_throw.team = nullptr;
      team().finish();
    }
    return y;
  }

  // The values of row band `pi` of a GEMV (rows [row_begin(pi),
  // row_begin(pi + 1)) of every token of the block): the tile products of
  // the band's Q cores (`cuts`: their columns from the first's, as
  // band_product takes them), added in the reduction's `order`. Writes those
  // rows of y only, and reads nothing another band writes.
  void band_values(const MatrixPlacement& m, WeightRef ref, int layer,
                   std::span<const fabric::CombineStep> order, std::span<const int> cuts, int pi,
                   const Vec& x, Vec& y, int expert, BandScratch& scratch) const {
    const int Q = m.q();
    const int r0 = m.row_begin(pi), r1 = m.row_begin(pi + 1);
    const auto n = static_cast<std::size_t>(r1 - r0);
    std::vector<float>& partials = scratch.partials;
    for (int t = 0; t < x.tokens; ++t) {
      partials.assign(static_cast<std::size_t>(Q) * n, 0.0f);
      band_product(ref, layer, r0, r1, m.col_begin(0), cuts, x.row(t), partials, scratch, expert);
      for (const auto& step : order)
        models::add_inplace(
            std::span(partials).subspan(static_cast<std::size_t>(step.into) * n, n),
            std::span(partials).subspan(static_cast<std::size_t>(step.from) * n, n));
      std::copy(partials.begin(), partials.begin() + static_cast<std::ptrdiff_t>(n),
                y.row(t).begin() + r0);
    }
  }

  // Host threads for the functional GEMVs: `threads` in all, this one
  // included (models::WorkTeam); 1 = this thread alone, the default. Results do
  // not depend on it.
  // `guest`, when given, is called each time a GEMV's bands are handed out:
  // one other thread may then take some of them with assist() (the
  // simulation, waiting for the functional lane: sim/exec/value_lane.hpp).
  void set_threads(int threads, std::function<void()> guest = nullptr) {
    team_ = std::make_unique<models::WorkTeam>(threads, guest ? 1 : 0);
    if (guest) team_->on_start(std::move(guest));
    scratch_.resize(static_cast<std::size_t>(team_->slots()));
  }
  // The guest thread computes row bands of the GEMV being computed, if
  // any (set_threads); whether it found one.
  bool assist() { return team_ && team_->slots() > team_->threads() && team_->assist(0); }

  void elementwise(Vec& v, std::uint64_t ops_per_element) {
    for (std::size_t i = 0; i < v.layout.size(); ++i)
      v.ready[i] =
          run_core(v.layout[i].wafer, v.layout[i].core, v.ready[i],
                   fab(v.layout[i].wafer)
                       .cost()
                       .vector_op(v.layout[i].size() * static_cast<std::uint64_t>(v.tokens),
                                  ops_per_element));
  }

  void rope(Vec& qkv, int position) {
    elementwise(qkv, 4);  // ~4 flops per element (two products and a sum, table lookup)
    if (!functional()) return;
    const int hd = model_.head_dim;
    for (int t = 0; t < qkv.tokens; ++t)  // token t of a block is at position + t
      for (int h = 0; h < model_.num_heads + model_.num_kv_heads; ++h)
        models::rope_apply(
            qkv.row(t).subspan(static_cast<std::size_t>(h * hd), static_cast<std::size_t>(hd)),
            position + t, model_.rope_theta);
  }

  Vec silu_mul(const Vec& gu) {
    Vec out;
    out.layout = swiglu_output_layout(gu.layout);
    out.ready = gu.ready;
    out.tokens = gu.tokens;  // [T][2n] interleaved rows give [T][n] outputs elementwise
    elementwise(out, 6);     // sigmoid (exp, add, div) and two products per output
    if (functional()) {
      const std::size_t n = gu.values.size() / 2;
      std::vector<float> g(n), u(n);
      for (std::size_t i = 0; i < n; ++i) g[i] = gu.values[2 * i], u[i] = gu.values[2 * i + 1];
      out.values.resize(n);
      models::silu_mul(g, u, out.values);
    }
    return out;
  }

  Vec add(const Vec& a, const Vec& b) {
    if (a.layout.size() != b.layout.size())
      throw std::logic_error("add: operands on different layouts");
    Vec out;
    out.layout = a.layout;
    out.tokens = a.tokens;
    for (std::size_t i = 0; i < a.layout.size(); ++i)
      out.ready.push_back(later(a.ready[i], b.ready[i]));
    elementwise(out, 1);
    if (functional()) {
      out.values = a.values;
      models::add_inplace(out.values, b.values);
    }
    return out;
  }

  // Decode attention over the KV cache held in the layer's segments. For
  // kv head h: its query group goes to the segment's first core and is
  // multicast down the segment; the new k, v go to the core that caches this
  // position; every core computes a partial over its positions; partials are
  // reduced up the segment and normalised at its first core.
  //
  // A block of T prompt tokens (positions position .. position + T - 1): the
  // T query groups travel as one message, each token's k and v go to the
  // core caching its position, and every core computes, for each token, its
  // partial over its cached positions up to that token's (causal) inside
  // its window; the T partials are reduced together.
  Vec attention(const AttentionPlacement& a, int layer, const Vec& qkv, int user, int position) {
    const int hd = model_.head_dim, g = model_.num_heads / model_.num_kv_heads;
    const int q_dim = model_.q_dim(), kv = model_.kv_dim();
    const int L = a.segment_length;
    const int T = qkv.tokens;
    const auto T64 = static_cast<std::uint64_t>(T);
    // Sliding window: token at position p attends to [first_visible(p), p];
    // the cache keeps them all (KV slots are reserved for the whole context).
    auto first_visible = [&](int p) {
      return model_.sliding_window > 0 && p >= model_.sliding_window ? p - model_.sliding_window + 1
                                                                     : 0;
    };
    Vec out;
    out.tokens = T;
    std::vector<Timed> arrivals, done(static_cast<std::size_t>(L));
    // Arrivals of k and v (in that order, token after token) per segment core.
    std::vector<std::vector<Timed>> kv_ready(static_cast<std::size_t>(L));
    Vec one;  // one token of the block, for its k and v (timing only)
    one.layout = qkv.layout;
    one.ready = qkv.ready;
    for (int h = 0; h < a.num_kv_heads; ++h) {
      const Coord top = a.segment_core(h, 0);
      const int w = a.wafer;
      const Vec q = move(qkv, Layout{Piece{top, h * g * hd, (h + 1) * g * hd, w}});
      for (auto& r : kv_ready) r.clear();
      for (int t = 0; t < T; ++t) {
        const int i_owner = a.slot_core(user, position + t);
        const Coord owner = a.segment_core(h, i_owner);
        const Vec k = move(one, Layout{Piece{owner, q_dim + h * hd, q_dim + (h + 1) * hd, w}});
        const Vec v =
            move(one, Layout{Piece{owner, q_dim + kv + h * hd, q_dim + kv + (h + 1) * hd, w}});
        kv_ready[static_cast<std::size_t>(i_owner)].push_back(k.ready[0]);
        kv_ready[static_cast<std::size_t>(i_owner)].push_back(v.ready[0]);
      }
      multicast(w, Line{top, fabric::Direction::south, L},
                Bytes{static_cast<std::uint64_t>(g * hd) * 4 * T64}, q.ready[0], arrivals);
      for (int i = 0; i < L; ++i) {
        std::uint64_t mine = 0;
        for (int t = 0; t < T; ++t)
          mine +=
              static_cast<std::uint64_t>(a.positions_on_core(user, position + t + 1, i) -
                                         a.positions_on_core(user, first_visible(position + t), i));
        Timed ready = arrivals[static_cast<std::size_t>(i)];
        for (const Timed& r : kv_ready[static_cast<std::size_t>(i)]) ready = later(ready, r);
        done[static_cast<std::size_t>(i)] =
            mine == 0 ? ready
                      : run_core(w, a.segment_core(h, i), ready,
                                 fab(w).cost().attention(mine, hd, g, bits_));
      }
      const Timed reduced = reduce(w, a.reduction, Line{top, fabric::Direction::south, L},
                                   Bytes{static_cast<std::uint64_t>(g) * (hd + 2) * 4 * T64}, done);
      out.layout.push_back(Piece{top, h * g * hd, (h + 1) * g * hd, w});
      out.ready.push_back(run_core(
          w, top, reduced, fab(w).cost().vector_op(static_cast<std::uint64_t>(g * hd) * T64, 1)));
    }
    if (functional()) {
      out.values.assign(static_cast<std::size_t>(q_dim) * T64, 0.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (int h = 0; h < a.num_kv_heads; ++h) {
        // Append the block's k and v, token by token, to the owning cores'
        // cache slices.
        for (int t = 0; t < T; ++t) {
          const std::size_t owner = slice(user, layer, h, a.slot_core(user, position + t));
          auto& kc = kv_k_[owner];
          auto& vc = kv_v_[owner];
          const auto* kp = qkv.row(t).data() + q_dim + h * hd;
          const auto* vp = qkv.row(t).data() + q_dim + kv + h * hd;
          kc.insert(kc.end(), kp, kp + hd);
          vc.insert(vc.end(), vp, vp + hd);
        }
        for (int t = 0; t < T; ++t) {
          const int p = position + t;
          for (int j = 0; j < g; ++j) {
            const int head = h * g + j;
            const auto qs = qkv.row(t).subspan(static_cast<std::size_t>(head * hd),
                                               static_cast<std::size_t>(hd));
            std::vector<models::AttentionPartial> parts;
            parts.reserve(static_cast<std::size_t>(L));
            for (int i = 0; i < L; ++i) {
              const auto& kci = kv_k_[slice(user, layer, h, i)];
              const auto& vci = kv_v_[slice(user, layer, h, i)];
              // Core i's rows are its positions in increasing order: the
              // first `skip` fall before the window, and the token sees
              // the first `count` (positions up to its own).
              const auto skip =
                  static_cast<std::size_t>(a.positions_on_core(user, first_visible(p), i));
              const auto count = static_cast<std::size_t>(a.positions_on_core(user, p + 1, i));
              const auto hd_sz = static_cast<std::size_t>(hd);
              parts.push_back(models::attention_partial(qs, kci.data() + skip * hd_sz,
                                                        vci.data() + skip * hd_sz,
                                                        static_cast<int>(count - skip), hd, scale));
            }
            for (const auto& step : reduction_order(a.reduction, L))
              parts[static_cast<std::size_t>(step.into)] =
                  models::combine(parts[static_cast<std::size_t>(step.into)],
                                  parts[static_cast<std::size_t>(step.from)]);
            models::attention_finalize(parts[0],
                                       out.row(t).subspan(static_cast<std::size_t>(head * hd),
                                                          static_cast<std::size_t>(hd)));
          }
        }
      }
    }
    return out;
  }

  // Local argmax on every root, then the (value, index) pairs are reduced up
  // the root column; ties keep the lower index, as the reference does.
  void argmax(const Vec& logits, TokenMessage& m) {
    std::vector<Timed> local(logits.layout.size());
    for (std::size_t i = 0; i < logits.layout.size(); ++i)
      local[i] = run_core(logits.layout[i].wafer, logits.layout[i].core, logits.ready[i],
                          fab(logits.layout[i].wafer).cost().vector_op(logits.layout[i].size(), 1));
    m.done = reduce(logits.layout.front().wafer, ReductionScheme::chain, column_line(logits.layout),
                    Bytes{8}, local);
    if (functional()) {
      m.next_token = models::argmax(logits.values);
      m.logits = logits.values;
    }
  }

  // Speculative decoding rolls back: the functional KV cache of `user`
  // keeps its first `positions` positions and forgets the rest (the
  // rejected draft tokens). Timing needs nothing: a slot's timing depends
  // on its position only, and the next token writes it again.
  void truncate_kv(int user, int positions) {
    if (!functional()) return;
    const int hd = model_.head_dim;
    for (std::size_t l = 0; l < pl_.layers.size(); ++l) {
      const AttentionPlacement& a = pl_.layers[l].attention;
      for (int h = 0; h < a.num_kv_heads; ++h)
        for (int i = 0; i < a.segment_length; ++i) {
          const std::size_t s = slice(user, static_cast<int>(l), h, i);
          const auto keep = static_cast<std::size_t>(a.positions_on_core(user, positions, i)) *
                            static_cast<std::size_t>(hd);
          if (kv_k_[s].size() > keep) kv_k_[s].resize(keep);
          if (kv_v_[s].size() > keep) kv_v_[s].resize(keep);
        }
    }
  }

 private:
  std::vector<fabric::Fabric*> fabs_;
  fabric::WaferIo* io_ = nullptr;
  std::unique_ptr<fabric::WaferIo> own_io_;
  const models::ModelConfig& model_;
  const Placement& pl_;
  const Program& prog_;
  const models::Weights* w_;
  int bits_;
  std::vector<fabric::LinkId> route_;
  std::vector<Timed> done_;
  models::WorkTeam& team() {
    if (!team_) set_threads(1);
    return *team_;
  }
  std::unique_ptr<models::WorkTeam> team_;
  std::vector<BandScratch> scratch_;  // one per thread of team_
  std::uint64_t routing_seed_ = 0;
  bool timing_ = true;  // false: values only (set_values_only)
  ExpertExchange* experts_ = nullptr;
  // Functional KV cache: one slice (rows of head_dim values, in position
  // order) per (user, layer, kv head, segment core).
  std::size_t slice(int user, int layer, int kv_head, int core) const {
    const int L = pl_.layers.front().attention.segment_length;
    return (static_cast<std::size_t>(user) * pl_.layers.size() + static_cast<std::size_t>(layer)) *
               slices_per_layer_ +
           static_cast<std::size_t>(kv_head) * L + static_cast<std::size_t>(core);
  }
  std::size_t slices_per_layer_ = 0;
  std::vector<std::vector<float>> kv_k_, kv_v_;
};

// Runs one token through one stage: the move of its input onto the stage,
// then every phase. `after(label, t)` is called when each step's output is
// complete (the SystemC engine waits there; other callers just observe).
// The head skips prompt tokens that need no logits.
template <class AfterStep>
void run_stage(Executor& ex, const StageProgram& sp, TokenMessage& m, AfterStep&& after) {
  Vec& x = slot(m, Slot::x);
  const bool head = sp.layer < 0;
  if (head && !m.needs_logits) {
    m.done = x.latest();
    return;
  }
  // Of a block of prompt tokens the head needs the last one only.
  if (head && x.tokens > 1) x = Executor::last_token(x);
  if (!sp.continues_layer) {
    x = ex.move(x, sp.input, sp.input_spread);
    after("enter " + sp.name, x.latest());
  }
  for (const Phase& ph : sp.phases) {
    ex.run(ph, m, sp.layer);
    after(ph.label, ph.kind == PhaseKind::argmax ? m.done : slot(m, ph.out).latest());
  }
  if (!head && sp.ends_layer) x = slot(m, Slot::out);
}

}  // namespace wafersim::sim
