// Interprets a lowered program's phases on the fabric model: timing through
// the flow-level links and core timelines, and (functional mode) the real
// numbers, with partial sums added in the order the simulated reductions add
// them. Plain C++: no SystemC here, so it can be tested on its own; the
// engine's SystemC modules call it phase by phase in simulated time.
#pragma once

#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric/wafer_io.hpp"
#include "models/kernels.hpp"
#include "models/weights.hpp"
#include "sim/placement.hpp"
#include "sim/program.hpp"

namespace wafersim::sim {

using fabric::Line;
using fabric::reduction_order;
using fabric::ReductionScheme;
inline constexpr int kSlots = static_cast<int>(Slot::count);

// An activation vector of one token: where its pieces are, when each piece
// is ready, and (functional mode) its values.
struct Vec {
  Layout layout;
  std::vector<Timed> ready;
  std::vector<float> values;
  Timed latest() const {
    Timed t = ready.front();
    for (const Timed& r : ready) t = later(t, r);
    return t;
  }
};

// One token on its way through the pipeline.
struct TokenMessage {
  int user = 0;
  int position = 0;
  std::int32_t token = 0;
  bool prefill = false;
  bool needs_logits = false;  // the last prompt token and generated tokens
  std::uint64_t start_cycle = 0;
  std::array<Vec, kSlots> slots;
  std::int32_t next_token = 0;
  Timed done;
  std::vector<float> logits;
};

inline Vec& slot(TokenMessage& m, Slot s) {
  return m.slots[static_cast<int>(s)];
}

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

  // The embedding row of `token`, read from the cores holding it once the
  // token id has reached them (`id_ready`, at the lm_head/embedding root).
  Vec embed(std::int32_t token, const Timed& id_ready, bool from_host) {
    const MatrixPlacement& e = pl_.head.embedding;
    int p = 0;
    while (p + 1 < e.p() && e.row_begin(p + 1) <= token) ++p;
    Vec v;
    std::vector<Timed> arrivals;
    Timed at_row = id_ready;
    if (!from_host) {
      route_.clear();
      fab(e.wafer).route(pl_.head.lm_head.root(0), e.root(p), route_);
      at_row = fab(e.wafer).flow().send(route_, Bytes{4}, id_ready);
    }
    fabric::multicast_line(fab(e.wafer).mesh(), fab(e.wafer).flow(),
                           Line{e.root(p), fabric::Direction::east, e.q()}, Bytes{4}, at_row,
                           arrivals);
    for (int q = 0; q < e.q(); ++q) {
      v.layout.push_back(Piece{e.core(p, q), e.col_begin(q), e.col_begin(q + 1), e.wafer});
      v.ready.push_back(arrivals[static_cast<std::size_t>(q)]);
    }
    if (functional()) {
      const auto row = w_->embedding.row(token);
      v.values.assign(row.begin(), row.end());
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
        const Timed arrival =
            transfer(src, t, Bytes{static_cast<std::uint64_t>(n) * 4}, v.ready[k], waypoint);
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
      case PhaseKind::gemv:
        slot(m, ph.out) = gemv(*ph.matrix, ph.weights, layer, slot(m, ph.a));
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

  fabric::Fabric& fab(int wafer) { return *fabs_[static_cast<std::size_t>(wafer)]; }
  Timed run_core(int wafer, Coord c, const Timed& ready, const fabric::CoreCost& cost) {
    fabric::Fabric& f = fab(wafer);
    return f.cores().run(f.mesh().id(c), ready, cost);
  }

  // One point-to-point message between two cores, on one wafer along its XY
  // route, or between wafers: to the source wafer's east edge (same row),
  // over the wafers' I/O, then from the target wafer's west edge.
  // On one wafer, `waypoint_x` >= 0 routes through that column (see move()).
  Timed transfer(const Piece& src, const Piece& dst, Bytes bytes, const Timed& ready,
                 int waypoint_x = -1) {
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

  // The pieces of a layout that sits on consecutive cores of one column.
  static Line column_line(const Layout& l) {
    for (std::size_t i = 1; i < l.size(); ++i)
      if (l[i].core.x != l[0].core.x || l[i].core.y != l[0].core.y + static_cast<int>(i))
        throw std::logic_error("layout is not a column of consecutive cores");
    return Line{l[0].core, fabric::Direction::south, static_cast<int>(l.size())};
  }

  Vec rmsnorm(const Vec& x, const std::vector<float>& g) {
    const Line line = column_line(x.layout);
    fabric::Fabric& f = fab(x.layout.front().wafer);
    std::vector<Timed> partial(x.layout.size());
    for (std::size_t i = 0; i < x.layout.size(); ++i)
      partial[i] = run_core(x.layout[i].wafer, x.layout[i].core, x.ready[i],
                            f.cost().vector_op(x.layout[i].size(), 2));
    const Timed sum =
        fabric::reduce_line(f.mesh(), f.flow(), ReductionScheme::chain, line, Bytes{4}, partial);
    std::vector<Timed> back;
    fabric::multicast_line(f.mesh(), f.flow(), line, Bytes{4}, sum, back);
    Vec out;
    out.layout = x.layout;
    for (std::size_t i = 0; i < x.layout.size(); ++i)
      out.ready.push_back(run_core(x.layout[i].wafer, x.layout[i].core, back[i],
                                   f.cost().vector_op(x.layout[i].size(), 2)));
    if (functional()) {
      // Sum of squares per piece, combined in the order the chain adds them.
      std::vector<float> sums(x.layout.size());
      for (std::size_t i = 0; i < x.layout.size(); ++i)
        sums[i] = models::sum_of_squares(
            std::span(x.values).subspan(static_cast<std::size_t>(x.layout[i].begin),
                                        static_cast<std::size_t>(x.layout[i].size())));
      for (const auto& step :
           reduction_order(ReductionScheme::chain, static_cast<int>(sums.size())))
        sums[static_cast<std::size_t>(step.into)] += sums[static_cast<std::size_t>(step.from)];
      out.values.resize(x.values.size());
      models::rmsnorm_apply(x.values, sums[0], static_cast<int>(x.values.size()), g,
                            static_cast<float>(model_.rms_norm_eps), out.values);
    }
    return out;
  }

  // Partial products of one core's tile: rows [r0, r1) of the fused matrix,
  // input columns [c0, c1).
  void tile_product(WeightRef ref, int layer, int r0, int r1, int c0, int c1,
                    std::span<const float> x, std::span<float> y) {
    const int nc = c1 - c0;
    const auto xs = x.subspan(static_cast<std::size_t>(c0), static_cast<std::size_t>(nc));
    auto part = [&](const models::Matrix& m, int row_offset, int lo, int hi) {
      const int a = std::max(r0, lo), b = std::min(r1, hi);
      if (a >= b) return;
      models::gemv_tile(
          m.view(a - row_offset, b - a, c0, nc), xs,
          y.subspan(static_cast<std::size_t>(a - r0), static_cast<std::size_t>(b - a)));
    };
    if (ref == WeightRef::lm_head) return part(w_->lm_head, 0, 0, model_.vocab_size);
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
      case WeightRef::gate_up: {
        // Interleaved rows: 2i is gate row i, 2i+1 is up row i (r0, r1 even).
        const int n = (r1 - r0) / 2;
        scratch_g_.resize(static_cast<std::size_t>(n));
        scratch_u_.resize(static_cast<std::size_t>(n));
        models::gemv_tile(lw.w_gate.view(r0 / 2, n, c0, nc), xs, scratch_g_);
        models::gemv_tile(lw.w_up.view(r0 / 2, n, c0, nc), xs, scratch_u_);
        for (int i = 0; i < n; ++i) {
          y[static_cast<std::size_t>(2 * i)] = scratch_g_[static_cast<std::size_t>(i)];
          y[static_cast<std::size_t>(2 * i + 1)] = scratch_u_[static_cast<std::size_t>(i)];
        }
        break;
      }
      case WeightRef::lm_head:
        break;
    }
  }

  // Mesh GEMV: input chunk q multicast down column q; every core multiplies
  // its tile; partial sums of each row of cores reduced west to its root.
  Vec gemv(const MatrixPlacement& m, WeightRef ref, int layer, const Vec& x) {
    const int P = m.p(), Q = m.q();
    if (static_cast<int>(x.layout.size()) != Q)
      throw std::logic_error(m.name + ": input is not on its columns");
    done_.resize(static_cast<std::size_t>(P) * Q);
    std::vector<Timed> arrivals;
    for (int qi = 0; qi < Q; ++qi) {
      const auto cols = static_cast<std::uint64_t>(m.col_begin(qi + 1) - m.col_begin(qi));
      fabric::multicast_line(fab(m.wafer).mesh(), fab(m.wafer).flow(),
                             Line{m.core(0, qi), fabric::Direction::south, P}, Bytes{cols * 4},
                             x.ready[static_cast<std::size_t>(qi)], arrivals);
      for (int pi = 0; pi < P; ++pi) {
        const auto rows = static_cast<std::uint64_t>(m.row_begin(pi + 1) - m.row_begin(pi));
        done_[static_cast<std::size_t>(pi) * Q + qi] =
            run_core(m.wafer, m.core(pi, qi), arrivals[static_cast<std::size_t>(pi)],
                     fab(m.wafer).cost().gemv_tile(rows, cols, bits_));
      }
    }
    Vec y;
    y.layout = output_layout(m);
    for (int pi = 0; pi < P; ++pi) {
      const auto rows = static_cast<std::uint64_t>(m.row_begin(pi + 1) - m.row_begin(pi));
      y.ready.push_back(
          fabric::reduce_line(fab(m.wafer).mesh(), fab(m.wafer).flow(), m.reduction,
                              Line{m.root(pi), fabric::Direction::east, Q}, Bytes{rows * 4},
                              std::span(done_).subspan(static_cast<std::size_t>(pi) * Q, Q)));
    }
    if (functional()) {
      y.values.assign(static_cast<std::size_t>(m.out_features), 0.0f);
      const auto order = reduction_order(m.reduction, Q);
      for (int pi = 0; pi < P; ++pi) {
        const int r0 = m.row_begin(pi), r1 = m.row_begin(pi + 1);
        const auto n = static_cast<std::size_t>(r1 - r0);
        partials_.assign(static_cast<std::size_t>(Q) * n, 0.0f);
        for (int qi = 0; qi < Q; ++qi)
          tile_product(ref, layer, r0, r1, m.col_begin(qi), m.col_begin(qi + 1), x.values,
                       std::span(partials_).subspan(static_cast<std::size_t>(qi) * n, n));
        for (const auto& step : order)
          models::add_inplace(
              std::span(partials_).subspan(static_cast<std::size_t>(step.into) * n, n),
              std::span(partials_).subspan(static_cast<std::size_t>(step.from) * n, n));
        std::copy(partials_.begin(), partials_.begin() + static_cast<std::ptrdiff_t>(n),
                  y.values.begin() + r0);
      }
    }
    return y;
  }

  void elementwise(Vec& v, std::uint64_t ops_per_element) {
    for (std::size_t i = 0; i < v.layout.size(); ++i)
      v.ready[i] =
          run_core(v.layout[i].wafer, v.layout[i].core, v.ready[i],
                   fab(v.layout[i].wafer).cost().vector_op(v.layout[i].size(), ops_per_element));
  }

  void rope(Vec& qkv, int position) {
    elementwise(qkv, 4);  // ~4 flops per element (two products and a sum, table lookup)
    if (!functional()) return;
    const int hd = model_.head_dim;
    for (int h = 0; h < model_.num_heads + model_.num_kv_heads; ++h)
      models::rope_apply(
          std::span(qkv.values)
              .subspan(static_cast<std::size_t>(h * hd), static_cast<std::size_t>(hd)),
          position, model_.rope_theta);
  }

  Vec silu_mul(const Vec& gu) {
    Vec out;
    out.layout = swiglu_output_layout(gu.layout);
    out.ready = gu.ready;
    elementwise(out, 6);  // sigmoid (exp, add, div) and two products per output
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
  Vec attention(const AttentionPlacement& a, int layer, const Vec& qkv, int user, int position) {
    const int hd = model_.head_dim, g = model_.num_heads / model_.num_kv_heads;
    const int q_dim = model_.q_dim(), kv = model_.kv_dim();
    const int L = a.segment_length;
    const int positions = position + 1;
    Vec out;
    std::vector<Timed> arrivals, done(static_cast<std::size_t>(L));
    for (int h = 0; h < a.num_kv_heads; ++h) {
      const Coord top = a.segment_core(h, 0);
      const Coord owner = a.segment_core(h, a.slot_core(user, position));
      const int w = a.wafer;
      const Vec q = move(qkv, Layout{Piece{top, h * g * hd, (h + 1) * g * hd, w}});
      const Vec k = move(qkv, Layout{Piece{owner, q_dim + h * hd, q_dim + (h + 1) * hd, w}});
      const Vec v =
          move(qkv, Layout{Piece{owner, q_dim + kv + h * hd, q_dim + kv + (h + 1) * hd, w}});
      fabric::multicast_line(fab(w).mesh(), fab(w).flow(), Line{top, fabric::Direction::south, L},
                             Bytes{static_cast<std::uint64_t>(g * hd) * 4}, q.ready[0], arrivals);
      for (int i = 0; i < L; ++i) {
        const int mine = a.positions_on_core(user, positions, i);
        Timed ready = arrivals[static_cast<std::size_t>(i)];
        if (a.segment_core(h, i) == owner) ready = later(later(ready, k.ready[0]), v.ready[0]);
        done[static_cast<std::size_t>(i)] =
            mine == 0
                ? ready
                : run_core(w, a.segment_core(h, i), ready,
                           fab(w).cost().attention(static_cast<std::uint64_t>(mine), hd, g, bits_));
      }
      const Timed reduced = fabric::reduce_line(
          fab(w).mesh(), fab(w).flow(), a.reduction, Line{top, fabric::Direction::south, L},
          Bytes{static_cast<std::uint64_t>(g) * (hd + 2) * 4}, done);
      out.layout.push_back(Piece{top, h * g * hd, (h + 1) * g * hd, w});
      out.ready.push_back(run_core(w, top, reduced,
                                   fab(w).cost().vector_op(static_cast<std::uint64_t>(g * hd), 1)));
    }
    if (functional()) {
      out.values.assign(static_cast<std::size_t>(q_dim), 0.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (int h = 0; h < a.num_kv_heads; ++h) {
        // Append this position's k and v to the owning core's cache slice.
        const std::size_t owner = slice(user, layer, h, a.slot_core(user, position));
        auto& kc = kv_k_[owner];
        auto& vc = kv_v_[owner];
        const auto* kp = qkv.values.data() + q_dim + h * hd;
        const auto* vp = qkv.values.data() + q_dim + kv + h * hd;
        kc.insert(kc.end(), kp, kp + hd);
        vc.insert(vc.end(), vp, vp + hd);
        for (int j = 0; j < g; ++j) {
          const int head = h * g + j;
          const auto qs =
              std::span(qkv.values)
                  .subspan(static_cast<std::size_t>(head * hd), static_cast<std::size_t>(hd));
          std::vector<models::AttentionPartial> parts;
          parts.reserve(static_cast<std::size_t>(L));
          for (int i = 0; i < L; ++i) {
            const auto& kci = kv_k_[slice(user, layer, h, i)];
            const auto& vci = kv_v_[slice(user, layer, h, i)];
            parts.push_back(models::attention_partial(
                qs, kci.data(), vci.data(), static_cast<int>(kci.size()) / hd, hd, scale));
          }
          for (const auto& step : reduction_order(a.reduction, L))
            parts[static_cast<std::size_t>(step.into)] =
                models::combine(parts[static_cast<std::size_t>(step.into)],
                                parts[static_cast<std::size_t>(step.from)]);
          models::attention_finalize(parts[0], std::span(out.values)
                                                   .subspan(static_cast<std::size_t>(head * hd),
                                                            static_cast<std::size_t>(hd)));
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
    fabric::Fabric& f = fab(logits.layout.front().wafer);
    m.done = fabric::reduce_line(f.mesh(), f.flow(), ReductionScheme::chain,
                                 column_line(logits.layout), Bytes{8}, local);
    if (functional()) {
      m.next_token = models::argmax(logits.values);
      m.logits = logits.values;
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
  std::vector<float> partials_, scratch_g_, scratch_u_;
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
  x = ex.move(x, sp.input, sp.input_spread);
  after("enter " + sp.name, x.latest());
  for (const Phase& ph : sp.phases) {
    ex.run(ph, m, sp.layer);
    after(ph.label, ph.kind == PhaseKind::argmax ? m.done : slot(m, ph.out).latest());
  }
  if (!head) x = slot(m, Slot::out);
}

}  // namespace wafersim::sim
