#include "sim/exec/phase_values.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace wafersim::sim {

using fabric::reduction_order;
using fabric::ReductionScheme;

std::pair<std::size_t, std::size_t> pieces_of_range(const Layout& l, int begin, int end) {
  std::size_t a = 0;
  while (l[a].end <= begin) ++a;
  std::size_t b = a;
  while (b + 1 < l.size() && l[b + 1].begin < end) ++b;
  return {a, b};
}

namespace {

// `v` as a core holding activations in `held` keeps it.
float held_value(float v, models::DType held) {
  return held == models::DType::fp32 ? v : models::round_to_dtype(v, held);
}

}  // namespace

models::DType held_dtype(int value_bytes, models::DType weights) {
  if (value_bytes == 4) return models::DType::fp32;
  if (value_bytes != 2)
    throw std::invalid_argument("held_dtype: values on the fabric are 4 or 2 bytes");
  const models::DType v = models::vector_dtype(weights);
  return v == models::DType::fp16 ? v : models::DType::bf16;
}

PhaseValues::PhaseValues(const models::ModelConfig& model, const Placement& pl,
                         const models::Weights& w)
    : model_(model),
      pl_(pl),
      w_(w),
      kv_(pl, model.head_dim),
      held_(held_dtype(pl.value_bytes, w.dtype)) {}

void PhaseValues::hold(std::span<float> v) const {
  if (held_ == models::DType::fp32) return;
  for (float& x : v) x = held_value(x, held_);
}

float PhaseValues::sent(float v) const {
  return held_value(v, held_);
}

PhaseValues::~PhaseValues() = default;

void PhaseValues::set_threads(int threads, std::function<void()> guest) {
  team_ = std::make_unique<models::WorkTeam>(threads, guest ? 1 : 0);
  if (guest) team_->on_start(std::move(guest));
  scratch_.resize(static_cast<std::size_t>(team_->slots()));
}

bool PhaseValues::assist() {
  return team_ && team_->slots() > team_->threads() && team_->assist(0);
}

models::WorkTeam& PhaseValues::team() {
  if (!team_) set_threads(1);
  return *team_;
}

const std::vector<float>& PhaseValues::gamma(Phase::Gamma g, int layer) const {
  static const std::vector<float> none;
  switch (g) {
    case Phase::Gamma::attn_norm:
      return w_.layers[static_cast<std::size_t>(layer)].attn_norm;
    case Phase::Gamma::ffn_norm:
      return w_.layers[static_cast<std::size_t>(layer)].ffn_norm;
    case Phase::Gamma::final_norm:
      return w_.final_norm;
  }
  return none;
}

const std::vector<float>& PhaseValues::beta(Phase::Gamma g, int layer) const {
  static const std::vector<float> none;
  switch (g) {
    case Phase::Gamma::attn_norm:
      return w_.layers[static_cast<std::size_t>(layer)].attn_norm_bias;
    case Phase::Gamma::ffn_norm:
      return w_.layers[static_cast<std::size_t>(layer)].ffn_norm_bias;
    case Phase::Gamma::final_norm:
      return w_.final_norm_bias;
  }
  return none;
}

void PhaseValues::embedding_row(std::int32_t token, std::vector<float>& out) const {
  out.resize(static_cast<std::size_t>(w_.embedding.cols()));
  w_.embedding.row_values(token, out);
  hold(out);
}

void PhaseValues::position_row(int position, std::vector<float>& out) const {
  out.resize(static_cast<std::size_t>(w_.position_embedding.cols()));
  w_.position_embedding.row_values(position, out);
  hold(out);
}

template <class PieceSum>
float PhaseValues::line_sum(const Vec& x, int t, ReductionScheme scheme, int groups,
                            PieceSum&& piece_sum) const {
  const std::span<const float> r = x.row(t);
  std::vector<float> sums(x.layout.size());
  for (std::size_t i = 0; i < x.layout.size(); ++i)
    sums[i] = piece_sum(r.subspan(static_cast<std::size_t>(x.layout[i].begin),
                                  static_cast<std::size_t>(x.layout[i].size())));
  // One value: the first chunk of a ring (every scheme's order otherwise).
  const int n = static_cast<int>(sums.size());
  for (const auto& step : reduction_order(scheme, n, groups))
    sums[static_cast<std::size_t>(step.into)] += sums[static_cast<std::size_t>(step.from)];
  return sums[static_cast<std::size_t>(reduction_root(scheme, n, groups))];
}

// Sum of squares per piece, combined in the order the reduction adds them.
void PhaseValues::rmsnorm(const Vec& x, const std::vector<float>& g, ReductionScheme scheme,
                          Vec& out, int groups) const {
  out.values.resize(x.values.size());
  const int n = static_cast<int>(x.width());
  for (int t = 0; t < x.tokens; ++t)
    models::rmsnorm_apply(x.row(t), line_sum(x, t, scheme, groups, models::sum_of_squares), n, g,
                          static_cast<float>(model_.rms_norm_eps), out.row(t));
  hold(out.values);
}

// Two passes, as models::layernorm_apply specifies (not E[x^2] - mean^2):
// the mean, then the variance around it, each a reduction of per-piece sums.
void PhaseValues::layernorm(const Vec& x, const std::vector<float>& g, const std::vector<float>& b,
                            ReductionScheme scheme, Vec& out, int groups) const {
  out.values.resize(x.values.size());
  const auto n = static_cast<float>(x.width());
  for (int t = 0; t < x.tokens; ++t) {
    const float mean = line_sum(x, t, scheme, groups, models::sum_of) / n;
    const float var = line_sum(x, t, scheme, groups,
                               [&](std::span<const float> piece) {
                                 return models::sum_of_squared_deviations(piece, mean);
                               }) /
                      n;
    models::layernorm_apply(x.row(t), mean, var, g, b, static_cast<float>(model_.rms_norm_eps),
                            out.row(t));
  }
  hold(out.values);
}

// [T][2n] interleaved gate and up rows give [T][n] outputs elementwise.
void PhaseValues::silu_mul(const Vec& gu, Vec& out) const {
  const std::size_t n = gu.values.size() / 2;
  std::vector<float> g(n), u(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = gu.values[2 * i], u[i] = gu.values[2 * i + 1];
  out.values.resize(n);
  models::silu_mul(g, u, out.values);
  hold(out.values);
}

void PhaseValues::add(const Vec& a, const Vec& b, Vec& out) const {
  out.values = a.values;
  models::add_inplace(out.values, b.values);
  hold(out.values);
}

void PhaseValues::bias(Vec& v, WeightRef ref, int layer) const {
  for (int t = 0; t < v.tokens; ++t) bias_row(v.row(t), ref, layer);
  hold(v.values);
}

void PhaseValues::bias_row(std::span<float> all, WeightRef ref, int layer) const {
  const models::LayerWeights& lw = w_.layers[static_cast<std::size_t>(layer)];
  switch (ref) {
    case WeightRef::qkv: {
      // Head by head, where the layer's order puts it.
      const QkvRows rows = pl_.qkv_rows(model_, layer);
      const auto hd = static_cast<std::size_t>(model_.head_dim);
      const auto head = [&](int at, const std::vector<float>& b, int i) {
        models::add_inplace(all.subspan(static_cast<std::size_t>(at), hd),
                            std::span(b).subspan(static_cast<std::size_t>(i) * hd, hd));
      };
      for (int h = 0; h < model_.num_heads; ++h) head(rows.q(h), lw.bq, h);
      for (int h = 0; h < model_.num_kv_heads; ++h) {
        head(rows.k(h), lw.bk, h);
        head(rows.v(h), lw.bv, h);
      }
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

// Per head, the partial sums of squares of its pieces combined in the
// chain's order (for a head on one root exactly the reference's sum), then
// models::rmsnorm_apply with the layer's q_norm / k_norm gains.
void PhaseValues::qk_norm(Vec& qkv, int layer) const {
  const Layout& l = qkv.layout;
  const int hd = model_.head_dim;
  const int heads = model_.num_heads + model_.num_kv_heads;
  const models::LayerWeights& lw = w_.layers[static_cast<std::size_t>(layer)];
  const float eps = static_cast<float>(model_.rms_norm_eps);
  const auto hds = static_cast<std::size_t>(hd);
  const QkvRows rows = pl_.qkv_rows(model_, layer);
  for (int h = 0; h < heads; ++h) {
    const int at = rows.rotary(h);
    const auto [a, b] = pieces_of_range(l, at, at + hd);
    const int n = static_cast<int>(b - a + 1);
    for (int t = 0; t < qkv.tokens; ++t) {
      const std::span<float> head = qkv.row(t).subspan(static_cast<std::size_t>(at), hds);
      std::vector<float> sums(static_cast<std::size_t>(n));
      for (std::size_t k = a; k <= b; ++k) {
        const int lo = std::max(l[k].begin, at), hi = std::min(l[k].end, at + hd);
        sums[k - a] = models::sum_of_squares(
            head.subspan(static_cast<std::size_t>(lo - at), static_cast<std::size_t>(hi - lo)));
      }
      for (const auto& step : reduction_order(ReductionScheme::chain, n))
        sums[static_cast<std::size_t>(step.into)] += sums[static_cast<std::size_t>(step.from)];
      models::rmsnorm_apply(head, sums[0], hd, h < model_.num_heads ? lw.q_norm : lw.k_norm, eps,
                            head);
    }
  }
  hold(qkv.values);
}

void PhaseValues::rope(Vec& qkv, int layer, std::span<const RowTag> rows) const {
  const int hd = model_.head_dim;
  const QkvRows order = pl_.qkv_rows(model_, layer);
  for (int t = 0; t < qkv.tokens; ++t)
    for (int h = 0; h < model_.num_heads + model_.num_kv_heads; ++h)
      models::rope_apply(qkv.row(t).subspan(static_cast<std::size_t>(order.rotary(h)),
                                            static_cast<std::size_t>(hd)),
                         rows[static_cast<std::size_t>(t)].position, model_.rope_theta,
                         model_.rope_scaling);
  hold(qkv.values);
}

void PhaseValues::gelu(Vec& v) const {
  models::gelu_tanh(v.values, v.values);
  hold(v.values);
}

// A block row's partial when its head dimensions are split over c columns
// (AttentionPlacement::columns_per_head): each column's dot product over
// its dims (in increasing index from 0.0f), the c of them combined in the
// order the row's all-reduce adds them, then scaled; the softmax terms and
// the weighted values as models::attention_partial computes them (every
// dimension's sum is over the same positions in the same order, whichever
// column holds it).
models::AttentionPartial PhaseValues::split_partial(const AttentionPlacement& a,
                                                    std::span<const float> q, const float* k_rows,
                                                    const float* v_rows, std::size_t n,
                                                    float scale) const {
  const auto hd = static_cast<std::size_t>(a.head_dim);
  const int C = a.columns_per_head;
  const std::vector<fabric::CombineStep> order =
      reduction_order(a.reduction, C, a.reduction_groups);
  const auto root = static_cast<std::size_t>(reduction_root(a.reduction, C, a.reduction_groups));
  std::vector<float> scores(n), dots(static_cast<std::size_t>(C));
  for (std::size_t p = 0; p < n; ++p) {
    const float* k = k_rows + p * hd;
    for (int j = 0; j < C; ++j) {
      float dot = 0.0f;
      for (auto d = static_cast<std::size_t>(a.dim_begin(j));
           d < static_cast<std::size_t>(a.dim_begin(j + 1)); ++d)
        dot += q[d] * k[d];
      dots[static_cast<std::size_t>(j)] = dot;
    }
    // Each column sends its sum on; the row's sum comes back from the root.
    for (const auto& step : order)
      dots[static_cast<std::size_t>(step.into)] += sent(dots[static_cast<std::size_t>(step.from)]);
    scores[p] = scale * sent(dots[root]);
  }
  return models::attention_partial_from_scores(scores, v_rows, a.head_dim);
}

// Per query head of kv head h: a partial over every segment core's cached
// positions inside the token's window (causal), combined in the reduction's
// order, then normalised.
void PhaseValues::attention(const AttentionPlacement& a, int layer, const Vec& qkv,
                            std::span<const RowTag> rows, Vec& out) {
  const int hd = model_.head_dim, g = model_.num_heads / model_.num_kv_heads;
  const int q_dim = model_.q_dim();
  const QkvRows order = pl_.qkv_rows(model_, layer);
  const int L = a.segment_length;
  const int T = qkv.tokens;
  const auto hd_sz = static_cast<std::size_t>(hd);
  out.values.assign(static_cast<std::size_t>(q_dim) * static_cast<std::size_t>(T), 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int h = 0; h < a.num_kv_heads; ++h) {
    // Append every row's k and v, row by row, to the owning cores' cache
    // slices of its user.
    for (int t = 0; t < T; ++t) {
      const auto row = qkv.row(t);
      const RowTag& r = rows[static_cast<std::size_t>(t)];
      kv_.append(r.user, layer, h, a.slot_core(r.user, r.position),
                 row.subspan(static_cast<std::size_t>(order.k(h)), hd_sz),
                 row.subspan(static_cast<std::size_t>(order.v(h)), hd_sz));
    }
    for (int t = 0; t < T; ++t) {
      const int user = rows[static_cast<std::size_t>(t)].user;
      const int p = rows[static_cast<std::size_t>(t)].position;
      for (int j = 0; j < g; ++j) {
        const int head = h * g + j;
        const auto qs = qkv.row(t).subspan(static_cast<std::size_t>(order.q(head)), hd_sz);
        std::vector<models::AttentionPartial> parts;
        parts.reserve(static_cast<std::size_t>(L));
        for (int i = 0; i < L; ++i) {
          const auto& kci = kv_.keys(user, layer, h, i);
          const auto& vci = kv_.values(user, layer, h, i);
          // Core i's rows are its positions in increasing order: the
          // first `skip` fall before the window, and the token sees the
          // first `count` (positions up to its own).
          const auto skip = static_cast<std::size_t>(
              a.positions_on_core(user, first_visible_position(model_, p), i));
          const auto count = static_cast<std::size_t>(a.positions_on_core(user, p + 1, i));
          parts.push_back(a.columns_per_head > 1
                              ? split_partial(a, qs, kci.data() + skip * hd_sz,
                                              vci.data() + skip * hd_sz, count - skip, scale)
                              : models::attention_partial(
                                    qs, kci.data() + skip * hd_sz, vci.data() + skip * hd_sz,
                                    static_cast<int>(count - skip), hd, scale));
        }
        // A core sends its weighted values as activations, its max and sum
        // in fp32.
        for (const auto& step : reduction_order(a.reduction, L, a.reduction_groups)) {
          models::AttentionPartial& from = parts[static_cast<std::size_t>(step.from)];
          hold(from.acc);
          parts[static_cast<std::size_t>(step.into)] =
              models::combine(parts[static_cast<std::size_t>(step.into)], from);
        }
        models::attention_finalize(
            parts[static_cast<std::size_t>(reduction_root(a.reduction, L, a.reduction_groups))],
            out.row(t).subspan(static_cast<std::size_t>(head * hd), hd_sz));
      }
    }
  }
  hold(out.values);
}

void PhaseValues::argmax(const Vec& logits, TokenMessage& m) const {
  m.next_tokens.clear();
  for (int t = 0; t < logits.tokens; ++t) m.next_tokens.push_back(models::argmax(logits.row(t)));
  m.logits = logits.values;
}

std::vector<models::ExpertChoice> PhaseValues::route(const Vec& logits, int t) const {
  return models::route_top_k(logits.row(t), model_.experts_per_token);
}

void PhaseValues::select_tokens(const Vec& x, const std::vector<int>& rows, Vec& out) const {
  for (int t : rows) {
    const auto src = x.row(t);
    out.values.insert(out.values.end(), src.begin(), src.end());
  }
}

// out = 0; out += weight_j * y_j in chosen order (models::axpy_inplace, fp32):
// the reference's order.
void PhaseValues::combine_experts(const std::vector<std::vector<models::ExpertChoice>>& chosen,
                                  const std::vector<std::vector<int>>& users_of,
                                  const std::vector<Vec>& outputs, Vec& out) const {
  const auto T = static_cast<std::size_t>(out.tokens);
  out.values.assign(static_cast<std::size_t>(model_.hidden_size) * T, 0.0f);
  for (int t = 0; t < out.tokens; ++t)
    for (const models::ExpertChoice& c : chosen[static_cast<std::size_t>(t)]) {
      const std::vector<int>& rows = users_of[static_cast<std::size_t>(c.expert)];
      const auto at = std::find(rows.begin(), rows.end(), t) - rows.begin();
      models::axpy_inplace(c.weight,
                           outputs[static_cast<std::size_t>(c.expert)].row(static_cast<int>(at)),
                           out.row(t));
    }
  hold(out.values);
}

void PhaseValues::band_product(WeightRef ref, int layer, int r0, int r1, int c0,
                               std::span<const int> cuts, std::span<const float> x,
                               std::span<float> y, BandScratch& scratch, int expert) const {
  const auto n = static_cast<std::size_t>(r1 - r0);
  const int nc = cuts.back();
  const auto xs = x.subspan(static_cast<std::size_t>(c0), static_cast<std::size_t>(nc));
  auto part = [&](const models::Matrix& m, int row_offset, int lo, int hi) {
    const int a = std::max(r0, lo), b = std::min(r1, hi);
    if (a >= b) return;
    models::gemv_tiles(m.view(a - row_offset, b - a, c0, nc), cuts, xs,
                       y.subspan(static_cast<std::size_t>(a - r0)), n);
  };
  if (ref == WeightRef::lm_head) return part(w_.lm_head_matrix(), 0, 0, model_.vocab_size);
  const models::LayerWeights& lw = w_.layers[static_cast<std::size_t>(layer)];
  switch (ref) {
    case WeightRef::qkv: {
      // Each run of rows from one matrix where the layer's order puts it
      // (QkvRows): in the checkpoint's order one run per matrix, grouped by
      // kv head a kv head's query heads, its key and its value.
      const QkvRows order = pl_.qkv_rows(model_, layer);
      if (!order.by_kv_head()) {
        const int q = model_.q_dim(), kv = model_.kv_dim();
        part(lw.wq, 0, 0, q);
        part(lw.wk, q, q, q + kv);
        part(lw.wv, q + kv, q + kv, q + 2 * kv);
        break;
      }
      const int hd = model_.head_dim, g = model_.num_heads / model_.num_kv_heads;
      for (int h = 0; h < model_.num_kv_heads; ++h) {
        const int q0 = order.q(h * g), k0 = order.k(h), v0 = order.v(h);
        part(lw.wq, q0 - h * g * hd, q0, q0 + g * hd);
        part(lw.wk, k0 - h * hd, k0, k0 + hd);
        part(lw.wv, v0 - h * hd, v0, v0 + hd);
      }
      break;
    }
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

// A band's partial sums combined as the folded ring adds them: its n x
// tokens elements (token-major, as the executor's message is n * T values
// of 4 bytes, or 2 when `held` is a 16-bit format) cut into
// ring_chunks(Q, bytes) chunks of ceil(n * T / chunks) elements;
// chunk c is added around the ring from position c+1 to c
// (fabric::reduction_order for that chunk), so every element is summed in
// the order its chunk's reduce-scatter adds it.
void PhaseValues::ring_band(int Q, std::size_t n, int t, int tokens, std::vector<float>& partials,
                            std::span<float> out, models::DType held) {
  const auto sent = [held](float v) { return held_value(v, held); };
  const std::size_t total = n * static_cast<std::size_t>(tokens);
  const auto value_bytes = static_cast<std::size_t>(models::dtype_bits(held) / 8);
  const auto k = static_cast<std::size_t>(fabric::ring_chunks(Q, Bytes{value_bytes * total}));
  const std::size_t per_chunk = (total + k - 1) / k;
  const std::vector<int> seq = fabric::ring_sequence(Q);
  const auto q = static_cast<std::size_t>(Q);
  const std::size_t first = static_cast<std::size_t>(t) * n;  // token t's first element
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = (first + i) / per_chunk;
    float* p = partials.data() + i;
    for (std::size_t j = 0; j + 1 < q; ++j) {
      const auto from = static_cast<std::size_t>(seq[(c + 1 + j) % q]);
      const auto into = static_cast<std::size_t>(seq[(c + 2 + j) % q]);
      p[into * n] += sent(p[from * n]);
    }
    out[i] = sent(p[static_cast<std::size_t>(seq[c % q]) * n]);  // all-gathered
  }
}

void PhaseValues::band_values(const MatrixPlacement& m, WeightRef ref, int layer,
                              std::span<const fabric::CombineStep> order, std::span<const int> cuts,
                              int pi, const Vec& x, Vec& y, int expert,
                              BandScratch& scratch) const {
  const int Q = m.q();
  const int r0 = m.row_begin(pi), r1 = m.row_begin(pi + 1);
  const auto n = static_cast<std::size_t>(r1 - r0);
  std::vector<float>& partials = scratch.partials;
  for (int t = 0; t < x.tokens; ++t) {
    partials.assign(static_cast<std::size_t>(Q) * n, 0.0f);
    band_product(ref, layer, r0, r1, m.col_begin(0), cuts, x.row(t), partials, scratch, expert);
    if (m.reduction == ReductionScheme::ring && Q > 1) {
      ring_band(Q, n, t, x.tokens, partials, y.row(t).subspan(static_cast<std::size_t>(r0), n),
                held_);
      continue;
    }
    for (const auto& step : order) {
      const std::span<float> from =
          std::span(partials).subspan(static_cast<std::size_t>(step.from) * n, n);
      hold(from);  // sent to step.into
      models::add_inplace(std::span(partials).subspan(static_cast<std::size_t>(step.into) * n, n),
                          from);
    }
    const auto root = static_cast<std::ptrdiff_t>(
        static_cast<std::size_t>(reduction_root(m.reduction, Q, m.reduction_groups)) * n);
    std::copy(partials.begin() + root, partials.begin() + root + static_cast<std::ptrdiff_t>(n),
              y.row(t).begin() + r0);
    hold(y.row(t).subspan(static_cast<std::size_t>(r0), n));
  }
}

PhaseValues::Gemv::Gemv(PhaseValues& v, const MatrixPlacement& m, WeightRef ref, int layer,
                        const Vec& x, Vec& y, int expert) {
  const int Q = m.q();
  y.values.assign(static_cast<std::size_t>(m.out_features) * static_cast<std::size_t>(x.tokens),
                  0.0f);
  order_ = reduction_order(m.reduction, Q, m.reduction_groups);
  for (int qi = 0; qi <= Q; ++qi) cuts_.push_back(m.col_begin(qi) - m.col_begin(0));
  v.team().start(m.p(), [&v, &m, ref, layer, &x, &y, expert, this](int pi, int thread) {
    v.band_values(m, ref, layer, order_, cuts_, pi, x, y, expert,
                  v.scratch_[static_cast<std::size_t>(thread)]);
  });
  team_ = v.team_.get();
}

void PhaseValues::Gemv::finish() {
  models::WorkTeam* team = std::exchange(team_, nullptr);
  team->finish();
}

PhaseValues::Gemv::~Gemv() {
  if (!team_) return;
  try {
    team_->finish();
  } catch (...) {  // the timing's exception is the one that propagates
  }
}

}  // namespace wafersim::sim
