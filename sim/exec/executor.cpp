#include "sim/exec/executor.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <stdexcept>

#include "fabric/line_reductions.hpp"
#include "fabric/parallel_multicast.hpp"
#include "models/rng.hpp"

namespace wafersim::sim {

Executor::Executor(std::vector<fabric::Fabric*> wafers, fabric::WaferIo* io,
                   const models::ModelConfig& model, const Placement& pl, const Program& prog,
                   const models::Weights* weights, int weight_bits)
    : fabs_(std::move(wafers)), io_(io), model_(model), pl_(pl), prog_(prog), bits_(weight_bits) {
  if (!io_) {
    own_io_ =
        std::make_unique<fabric::WaferIo>(fabs_.front()->spec(), static_cast<int>(fabs_.size()));
    io_ = own_io_.get();
  }
  if (weights) values_ = std::make_unique<PhaseValues>(model, pl, *weights);
}

Executor::~Executor() = default;

void Executor::set_values_only() {
  if (!functional()) throw std::logic_error("a values-only executor needs weights");
  timing_ = false;
}

void Executor::set_threads(int threads, std::function<void()> guest) {
  if (!functional()) throw std::logic_error("host threads for the GEMVs need weights");
  values_->set_threads(threads, std::move(guest));
}

void Executor::set_timing_helper(TimingHelper mode) {
  helper_mode_ = mode;
  timing_team_ = mode == TimingHelper::off ? nullptr : std::make_unique<models::WorkTeam>(2);
}

Executor::HelperUse::HelperUse(Executor& ex, bool can, std::uint64_t shape)
    : two(can && (ex.helper_mode_ == TimingHelper::always || ex.thread_choice_.two_threads())) {
  if (can && ex.helper_mode_ == TimingHelper::measured) timer.emplace(ex.thread_choice_, shape);
}

Executor::Touched Executor::take_touched() {
  Touched t;
  if (touched_x0_ <= touched_x1_) {
    t.wafer = touched_wafer_;
    t.rect = {touched_x0_, touched_y0_, touched_x1_ - touched_x0_ + 1,
              touched_y1_ - touched_y0_ + 1};
  }
  touched_x0_ = touched_y0_ = 1;
  touched_x1_ = touched_y1_ = 0;
  touched_wafer_ = -1;
  return t;
}

void Executor::check_not_frozen() const {
  if (frozen_)
    throw std::logic_error("executor: work reached the fabric while replayed layers were pending");
}

void Executor::run(const Phase& ph, TokenMessage& m, int layer) {
  check_not_frozen();
  static const std::vector<float> none;  // timing only: no gains
  const auto gamma = [&]() -> const std::vector<float>& {
    return values_ ? values_->gamma(ph.gamma, layer) : none;
  };
  const auto beta = [&]() -> const std::vector<float>& {
    return values_ ? values_->beta(ph.gamma, layer) : none;
  };
  switch (ph.kind) {
    case PhaseKind::move:
      slot(m, ph.out) = move(slot(m, ph.a), ph.target, ph.spread);
      break;
    case PhaseKind::rmsnorm:
      slot(m, ph.out) = rmsnorm(slot(m, ph.a), gamma(), ph.statistic, ph.statistic_groups);
      break;
    case PhaseKind::layernorm:
      slot(m, ph.out) =
          layernorm(slot(m, ph.a), gamma(), beta(), ph.statistic, ph.statistic_groups);
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
      rope(slot(m, ph.a), layer, m.rows());
      break;
    case PhaseKind::attention:
      slot(m, ph.out) = attention(*ph.attention, layer, slot(m, ph.a), m.rows());
      break;
    case PhaseKind::silu_mul:
      slot(m, ph.out) = silu_mul(slot(m, ph.a));
      break;
    case PhaseKind::gelu:
      gelu(slot(m, ph.a));
      break;
    case PhaseKind::moe:
      slot(m, ph.out) =
          moe(*ph.stage, layer, slot(m, ph.a), slot(m, ph.b), ph.target, ph.spread, m.rows());
      break;
    case PhaseKind::add:
      slot(m, ph.out) = add(slot(m, ph.a), slot(m, ph.b));
      break;
    case PhaseKind::argmax:
      argmax(slot(m, ph.a), m);
      break;
  }
}

// ---- Fabric ------------------------------------------------------------------

Timed Executor::run_core(int wafer, Coord c, const Timed& ready, const fabric::CoreCost& cost) {
  if (!timing_) return ready;
  fabric::Fabric& f = fab(wafer);
  touch(wafer, c);
  return f.cores().run(c, ready, cost);
}

Timed Executor::transfer(const Piece& src, const Piece& dst, Bytes bytes, const Timed& ready,
                         int waypoint_x) {
  if (!timing_) return ready;
  route_.clear();
  touch(src.wafer, src.core);
  touch(dst.wafer, dst.core);
  if (src.wafer == dst.wafer) {
    // Around dead routers when there are any (XY otherwise).
    fabric::Fabric& f = fab(src.wafer);
    const Coord a{waypoint_x, src.core.y}, b{waypoint_x, dst.core.y};
    // Spread over a waypoint column when both of its turns are live cores
    // (a dead one cannot turn a message; the route then detours as it must).
    if (waypoint_x >= 0 && waypoint_x < f.mesh().width() && src.core.y != dst.core.y &&
        f.defects().alive(a) && f.defects().alive(b)) {
      touch(src.wafer, a);
      touch(src.wafer, b);
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
  // Out over the east edge in the source's row, in over the west edge in the
  // destination's (the nearest edge cores that reach them past dead ones).
  a.route(src.core, a.edge_port(true, src.core), route_);
  const Timed at_edge = a.flow().send(route_, bytes, ready);
  const Timed across = io_->transfer(src.wafer, dst.wafer, bytes, at_edge);
  route_.clear();
  b.route(b.edge_port(false, dst.core), dst.core, route_);
  return b.flow().send(route_, bytes, across);
}

void Executor::multicast(int wafer, const Line& line, Bytes bytes, const Timed& ready,
                         std::vector<Timed>& arrivals) {
  if (!timing_) return arrivals.assign(static_cast<std::size_t>(line.length), ready);
  touch(wafer, line);
  fabric::multicast_line(fab(wafer).mesh(), fab(wafer).flow(), line, bytes, ready, arrivals);
}

Timed Executor::reduce(int wafer, ReductionScheme scheme, const Line& line, Bytes bytes,
                       std::span<const Timed> ready, int groups) {
  if (!timing_) return ready.front();
  touch(wafer, line);
  return fabric::reduce_line(fab(wafer).mesh(), fab(wafer).flow(), scheme, line, bytes, ready,
                             groups);
}

void Executor::all_reduce(int wafer, ReductionScheme scheme, const Line& line, Bytes bytes,
                          std::span<const Timed> ready, std::vector<Timed>& arrivals, int groups) {
  if (!timing_) return arrivals.assign(ready.size(), ready.front());
  touch(wafer, line);
  fabric::all_reduce_line(fab(wafer).mesh(), fab(wafer).flow(), scheme, line, bytes, ready,
                          arrivals, groups);
}

Line Executor::layout_line(const Layout& l, std::size_t a, std::size_t b) {
  b = std::min(b, l.size() - 1);
  // Down (or up) a column, or along a row (a transposed matrix's roots).
  const bool row = b > a && l[a + 1].core.y == l[a].core.y;
  const int step =
      b > a && (row ? l[a + 1].core.x < l[a].core.x : l[a + 1].core.y < l[a].core.y) ? -1 : 1;
  for (std::size_t i = a + 1; i <= b; ++i) {
    const int k = step * static_cast<int>(i - a);
    if (row ? l[i].core.y != l[a].core.y || l[i].core.x != l[a].core.x + k
            : l[i].core.x != l[a].core.x || l[i].core.y != l[a].core.y + k)
      throw std::logic_error("layout is not a line of consecutive cores");
  }
  const fabric::Direction along =
      row ? (step > 0 ? fabric::Direction::east : fabric::Direction::west)
          : (step > 0 ? fabric::Direction::south : fabric::Direction::north);
  return Line{l[a].core, along, static_cast<int>(b - a + 1)};
}

// ---- Vectors: embedding, moves, blocks ----------------------------------------

Vec Executor::embedding_row(const MatrixPlacement& e, int row, const Timed& at_root) {
  int p = 0;
  while (p + 1 < e.p() && e.row_begin(p + 1) <= row) ++p;
  Vec v;
  std::vector<Timed> arrivals;
  multicast(e.wafer, Line{e.root(p), e.reduction_direction(), e.q()}, Bytes{4}, at_root, arrivals);
  for (int q = 0; q < e.q(); ++q) {
    v.layout.push_back(Piece{e.core(p, q), e.col_begin(q), e.col_begin(q + 1), e.wafer});
    v.ready.push_back(arrivals[static_cast<std::size_t>(q)]);
  }
  return v;
}

Vec Executor::embed(std::int32_t token, int position, const Timed& id_ready, bool from_host) {
  check_not_frozen();
  const MatrixPlacement& e = pl_.head.embedding;
  int p = 0;
  while (p + 1 < e.p() && e.row_begin(p + 1) <= token) ++p;
  Timed at_row = id_ready;
  if (!from_host && timing_) {
    route_.clear();
    touch(e.wafer, pl_.head.lm_head.root(0));
    touch(e.wafer, e.root(p));
    fab(e.wafer).route(pl_.head.lm_head.root(0), e.root(p), route_);
    at_row = fab(e.wafer).flow().send(route_, Bytes{4}, id_ready);
  }
  Vec v = embedding_row(e, token, at_row);
  if (values_) values_->embedding_row(token, v.values);
  const MatrixPlacement& pe = pl_.head.position_embedding;
  if (!model_.is_gpt2() || pe.p() == 0) return v;
  // The position index travels with the token id to the position block.
  int pp = 0;
  while (pp + 1 < pe.p() && pe.row_begin(pp + 1) <= position) ++pp;
  Timed at_pos = from_host ? at_row : id_ready;
  if (timing_) {
    route_.clear();
    touch(pe.wafer, from_host ? e.root(p) : pl_.head.lm_head.root(0));
    touch(pe.wafer, pe.root(pp));
    fab(pe.wafer).route(from_host ? e.root(p) : pl_.head.lm_head.root(0), pe.root(pp), route_);
    at_pos = fab(pe.wafer).flow().send(route_, Bytes{4}, at_pos);
  }
  Vec pos = move(embedding_row(pe, position, at_pos), v.layout);
  if (values_) values_->position_row(position, pos.values);
  return add(v, pos);
}

Vec Executor::move(const Vec& v, const Layout& target, int spread) {
  check_not_frozen();
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
      const Timed arrival = transfer(src, t,
                                     Bytes{static_cast<std::uint64_t>(n) * value_bytes() *
                                           static_cast<std::uint64_t>(v.tokens)},
                                     v.ready[k], waypoint);
      ready = ready ? later(*ready, arrival) : arrival;
    }
    if (!ready) throw std::logic_error("move: target piece not covered by the source vector");
    out.ready.push_back(*ready);
  }
  return out;
}

Vec Executor::stack(const std::vector<Vec>& parts) {
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

Vec Executor::some_tokens(const Vec& v, const std::vector<int>& rows) {
  Vec out;
  out.layout = v.layout;
  out.ready = v.ready;
  out.tokens = static_cast<int>(rows.size());
  if (!v.values.empty())
    for (const int t : rows) {
      const auto r = v.row(t);
      out.values.insert(out.values.end(), r.begin(), r.end());
    }
  return out;
}

namespace {

// A band count written by one thread and read by the other, on a cache line of its own.
struct alignas(64) BandCount {
  static constexpr int kStop = std::numeric_limits<int>::max();  // the writer failed
  std::atomic<int> n{0};

  void post(int v) {
    n.store(v, std::memory_order_release);
    n.notify_one();
  }
  // Waits until at least `at_least` (or kStop); returns the count. Spins a
  // while first: the other thread is usually a band away, and waking from
  // a sleep costs more than a band takes.
  int wait_for(int at_least, double& waited_s) const {
    int v = n.load(std::memory_order_acquire);
    if (v >= at_least) return v;
    const auto t0 = std::chrono::steady_clock::now();
    for (int spin = 0; v < at_least && spin < (1 << 16); ++spin) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      v = n.load(std::memory_order_acquire);
    }
    while (v < at_least) {
      n.wait(v, std::memory_order_acquire);
      v = n.load(std::memory_order_acquire);
    }
    waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return v;
  }
};

// Runs `here` on this thread beside the work the helper was started on,
// then waits for the helper. When `here` throws, the helper is told to stop
// (every count in `stops` set to kStop) and this thread's error is the one
// reported; otherwise the helper's, if any, is rethrown.
template <class F>
void beside_helper(models::WorkTeam& team, std::initializer_list<BandCount*> stops, F&& here) {
  try {
    here();
  } catch (...) {
    for (BandCount* c : stops) c->post(BandCount::kStop);
    try {
      team.finish();
    } catch (...) {
      // This thread's error is the one to report.
    }
    throw;
  }
  team.finish();  // rethrows the helper's error
}

struct alignas(64) HeldCounts {
  fabric::ParallelLineMulticast::Counts counts;
};

// Reductions of lines (LineReductions::keep_lines_apart) with their counts
// held for the length of this object, on a model shared by two threads
// while `shared`; when this ends, however it ends, their counts are in the
// model and the model is one thread's again.
class HeldReductions {
 public:
  HeldReductions(fabric::FlowModel& flow, std::initializer_list<fabric::LineReductions*> lines,
                 bool shared)
      : flow_(flow), shared_(shared) {
    for (fabric::LineReductions* l : lines)
      if (l) lines_.push_back(l);  // (null: none)
    if (shared_) flow_.set_concurrent(true);
    for (fabric::LineReductions* l : lines_) l->hold_counts(true);
  }
  ~HeldReductions() {
    if (shared_) flow_.set_concurrent(false);
    for (fabric::LineReductions* l : lines_) {
      l->hold_counts(false);
      l->publish_counts();
    }
  }
  HeldReductions(const HeldReductions&) = delete;
  HeldReductions& operator=(const HeldReductions&) = delete;

 private:
  fabric::FlowModel& flow_;
  std::vector<fabric::LineReductions*> lines_;
  bool shared_;
};

// A flow model shared by this thread and the timing helper for one piece
// of work (FlowModel::set_concurrent): each thread's multicast counts kept
// apart, and the row reductions' when given (this thread's and the
// helper's: HeldReductions); when this ends, however it ends, all of them
// are in the model and the model is one thread's again.
class SharedModel {
 public:
  SharedModel(fabric::FlowModel& flow, fabric::ParallelLineMulticast& lines,
              fabric::LineReductions* rows = nullptr, fabric::LineReductions* helper_rows = nullptr)
      : lines_(lines), held_(flow, {rows, helper_rows}, true) {}
  ~SharedModel() {
    lines_.publish(mine_.counts);
    lines_.publish(helpers_.counts);
  }
  SharedModel(const SharedModel&) = delete;
  SharedModel& operator=(const SharedModel&) = delete;
  fabric::ParallelLineMulticast::Counts& mine() { return mine_.counts; }
  fabric::ParallelLineMulticast::Counts& helpers() { return helpers_.counts; }

 private:
  fabric::ParallelLineMulticast& lines_;
  HeldReductions held_;
  HeldCounts mine_, helpers_;
};

}  // namespace

// ---- GEMV --------------------------------------------------------------------

Vec Executor::gemv(const MatrixPlacement& m, WeightRef ref, int layer, const Vec& x, int expert) {
  const int P = m.p(), Q = m.q();
  if (static_cast<int>(x.layout.size()) != Q)
    throw std::logic_error(m.name + ": input is not on its columns");
  Vec y;
  y.tokens = x.tokens;
  // The host threads compute y.values while this thread times the GEMV.
  std::optional<PhaseValues::Gemv> values;
  if (values_) values.emplace(*values_, m, ref, layer, x, y, expert);
  const auto T = static_cast<std::uint64_t>(x.tokens);
  auto cols_of = [&](int qi) {
    return static_cast<std::uint64_t>(m.col_begin(qi + 1) - m.col_begin(qi));
  };
  auto rows_of = [&](int pi) {
    return static_cast<std::uint64_t>(m.row_begin(pi + 1) - m.row_begin(pi));
  };
  y.layout = output_layout(m);
  if (!timing_) {
    // Timing skipped: every tile and sum as soon as its input.
    y.ready.assign(static_cast<std::size_t>(P), x.ready.front());
  } else {
    // Every column's multicast at once (fabric/parallel_multicast.hpp: the
    // same arrivals and records as one multicast after another), walked in
    // tiles of kTileColumns columns by kTileRows rows of cores; once a band
    // of kTileRows rows has its copies, each core's tile of the matrix runs
    // and the band's rows are reduced. All exact: core timelines are
    // independent of one another, and a row's reduction uses the links
    // along its row (the multicasts only those across it) and the ramps of
    // its own cores, which no later hop of a multicast reaches; each row's
    // reduction keeps the `now` the reductions started with, raised by its
    // own messages (lines apart). For the same reasons the timing helper
    // (set_timing_helper) can work out the tiles and rows of one band while
    // this thread hops the next, and the other way round
    // (alternate_bands): the two share no record, core or `now` (the
    // multicast's hops keep each line's own), and the sums and maxima they
    // both add to are held apart until the GEMV ends.
    constexpr int kTileColumns = 16, kTileRows = 16;
    fabric::Fabric& f = fab(m.wafer);
    touch(m.wafer, Coord{m.rect.x0, m.rect.y0});
    touch(m.wafer, Coord{m.rect.x0 + m.rect.width - 1, m.rect.y0 + m.rect.height - 1});
    std::vector<std::uint64_t> line_cols;
    std::vector<Bytes> line_bytes;
    line_cols.reserve(static_cast<std::size_t>(Q));
    line_bytes.reserve(static_cast<std::size_t>(Q));
    for (int qi = 0; qi < Q; ++qi) {
      line_cols.push_back(cols_of(qi));
      line_bytes.push_back(Bytes{line_cols.back() * value_bytes() * T});
    }
    fabric::ParallelLineMulticast lines(
        f.mesh(), f.flow(), m.core(0, 0), m.multicast_direction(), P,
        m.transposed ? fabric::Direction::south : fabric::Direction::east, line_bytes,
        std::span<const Timed>(x.ready).first(static_cast<std::size_t>(Q)));
    // The rows' reductions with one plan (fabric/line_reductions.hpp: exactly reduce_line's).
    fabric::LineReductions rows(f.mesh(), f.flow(), m.reduction, m.reduction_groups,
                                m.reduction_direction(), Q);
    // Each row's reduction sees the `now` the GEMV's reductions started
    // with, raised by its own messages (LineReductions::keep_lines_apart,
    // as attention's rows): the rows time alike in any order, on either
    // thread.
    rows.keep_lines_apart(true);
    // Band b's multicast hops, their arrivals into `done` (a row of Q after
    // another, from column 0); then its tiles, run in place, their cycles
    // into `at`; then its rows' reductions. Hops touch the lines' links and
    // the ramps of the band's cores, tiles the band's core timelines, a
    // row's reduction its row's links and ramps: the three can follow one
    // another in any interleaving that keeps each line's hops in order.
    const int bands = (P + kTileRows - 1) / kTileRows;
    auto band_rows = [&](int b) {
      return std::pair{b * kTileRows, std::min(P, (b + 1) * kTileRows)};
    };
    const BandHops hop_band = [&](int b, std::span<Timed> band_done,
                                  fabric::ParallelLineMulticast::Counts& counts) {
      const auto [p0, p1] = band_rows(b);
      for (int q0 = 0; q0 < Q; q0 += kTileColumns) {
        const int n = std::min(kTileColumns, Q - q0);
        for (int pi = p0; pi < p1; ++pi)
          lines.next_hop(q0, n,
                         band_done.subspan(static_cast<std::size_t>(pi - p0) * Q + q0,
                                           static_cast<std::size_t>(n)),
                         counts);
      }
    };
    const BandSums tiles_and_sums = [&](int b, fabric::LineReductions& by,
                                        std::span<Timed> band_done,
                                        std::span<std::uint64_t> band_at) {
      const auto [p0, p1] = band_rows(b);
      for (int pi = p0; pi < p1; ++pi) {
        const std::size_t first = static_cast<std::size_t>(pi - p0) * Q;
        const std::uint64_t rows = rows_of(pi);
        // A balanced split has two tile widths: cost each once per row.
        fabric::CoreCost cost[2];
        std::uint64_t cost_cols[2] = {~std::uint64_t{0}, ~std::uint64_t{0}};
        for (int qi = 0; qi < Q; ++qi) {
          const std::uint64_t cols = line_cols[static_cast<std::size_t>(qi)];
          int c = cols == cost_cols[0] ? 0 : cols == cost_cols[1] ? 1 : -1;
          if (c < 0) {
            c = cost_cols[0] == ~std::uint64_t{0} ? 0 : 1;
            cost[c] = f.cost().gemm_tile(rows, cols, T, bits_), cost_cols[c] = cols;
          }
          Timed& d = band_done[first + static_cast<std::size_t>(qi)];
          f.cores().run_in_place(m.core(pi, qi), d, cost[c]);
          band_at[first + static_cast<std::size_t>(qi)] = d.at.value;
        }
      }
      for (int pi = p0; pi < p1; ++pi) {
        const auto first = static_cast<std::size_t>(pi - p0) * Q;
        if (pi + 1 < P) by.next_line(m.root(pi + 1));
        y.ready[static_cast<std::size_t>(pi)] =
            by.reduce(m.root(pi), Bytes{rows_of(pi) * value_bytes() * T},
                      band_done.subspan(first, Q), band_at.subspan(first, Q));
      }
    };
    y.ready.resize(static_cast<std::size_t>(P));
    const std::size_t band_size = static_cast<std::size_t>(kTileRows) * Q;
    const HelperUse use(
        *this, timing_team_ && bands > 1 && lines.hop_by_hop() && rows.own_loop(),
        work_shape(P, Q, x.tokens, m.transposed ? Work::gemv_transposed : Work::gemv));
    if (use.two) {
      // Two threads reduce rows at once: no line record on their runs.
      for (int pi = 0; pi < P; ++pi) rows.settle_line_record(m.root(pi));
      alternate_bands(bands, band_size, f.flow(), lines, rows, hop_band, tiles_and_sums);
    } else {
      done_.resize(band_size);
      done_at_.resize(band_size);
      fabric::ParallelLineMulticast::Counts counts;
      std::optional<HeldReductions> held;
      if (rows.own_loop()) held.emplace(f.flow(), std::initializer_list{&rows}, false);
      for (int b = 0; b < bands; ++b) {
        hop_band(b, done_, counts);
        lines.publish(counts);
        tiles_and_sums(b, rows, done_, done_at_);
      }
    }
  }
  if (values) values->finish();
  return y;
}

Executor::BandWaits Executor::on_two_threads(int bands, const std::function<void(int)>& helper,
                                             const std::function<void(int)>& first,
                                             const std::function<void(int)>& second,
                                             const std::function<void(int)>& helper_after) {
  BandCount helped, firsts;
  BandWaits w;
  // The helper takes this item as soon as it wakes (nothing else waits for
  // it), so this thread may wait for its bands.
  timing_team_->start(1, [&](int, int) {
    try {
      for (int b = 0; b < bands; ++b) {
        helper(b);
        helped.post(b + 1);
        if (helper_after) {
          if (firsts.wait_for(b + 1, w.there) == BandCount::kStop) return;
          helper_after(b);
        }
      }
    } catch (...) {
      helped.post(BandCount::kStop);
      throw;
    }
  });
  beside_helper(*timing_team_, {&firsts}, [&] {
    for (int b = 0; b < bands; ++b) {
      if (first) first(b);
      firsts.post(b + 1);
      if (helped.wait_for(b + 1, w.here) == BandCount::kStop) break;
      second(b);
    }
  });
  return w;
}

std::uint64_t Executor::work_shape(int rows, int columns, int tokens, Work work) {
  return static_cast<std::uint64_t>(rows) << 42 | static_cast<std::uint64_t>(columns) << 18 |
         (static_cast<std::uint64_t>(tokens) & 0xffff) << 2 | static_cast<std::uint64_t>(work);
}

double Executor::share_of(std::uint64_t shape, double first) const {
  const auto it = own_shares_.find(shape);
  return it == own_shares_.end() ? first : it->second;
}

int Executor::own_columns(std::uint64_t shape, int columns, int tile) const {
  const double share = share_of(shape, kFirstShare);
  return std::min(columns, static_cast<int>(std::lround(share * columns / tile)) * tile);
}

Executor::OwnWork Executor::own_work(std::uint64_t shape, int columns, int band_rows) const {
  const double share = share_of(shape, kFirstWorkShare);
  OwnWork w;
  w.rows = static_cast<int>(std::lround(std::min(share, 1.0) * band_rows));
  w.columns =
      std::min(columns, static_cast<int>(std::lround(std::max(0.0, share - 1.0) * columns)));
  return w;
}

void Executor::balance(std::uint64_t shape, const BandWaits& waits, double first, double most) {
  constexpr double kStep = 0.02;
  double& share = own_shares_.try_emplace(shape, first).first->second;
  share = waits.here > waits.there ? std::min(most, share + kStep) : std::max(0.0, share - kStep);
}

void Executor::alternate_bands(int bands, std::size_t band_size, fabric::FlowModel& flow,
                               fabric::ParallelLineMulticast& lines, fabric::LineReductions& rows,
                               const BandHops& hops, const BandSums& rest) {
  handed_.resize(band_size);
  handed_at_.resize(band_size);
  done_.resize(band_size);
  done_at_.resize(band_size);
  fabric::LineReductions theirs(rows);  // the same plan, lines apart
  SharedModel shared(flow, lines, &rows, &theirs);
  // hopped.n: the bands whose hops are done. Band b is this thread's for
  // even b, the helper's for odd b; each waits for the other's hops of the
  // band before, then hops its own, then works out its tiles and rows
  // while the other hops the next.
  BandCount hopped;
  timing_team_->start(1, [&](int, int) {
    double waited = 0;
    try {
      for (int b = 1; b < bands; b += 2) {
        if (hopped.wait_for(b, waited) == BandCount::kStop) return;
        hops(b, handed_, shared.helpers());
        hopped.post(b + 1);
        rest(b, theirs, handed_, handed_at_);
      }
    } catch (...) {
      hopped.post(BandCount::kStop);
      throw;
    }
  });
  beside_helper(*timing_team_, {&hopped}, [&] {
    double waited = 0;
    for (int b = 0; b < bands; b += 2) {
      if (b > 0 && hopped.wait_for(b, waited) == BandCount::kStop) break;
      hops(b, done_, shared.mine());
      hopped.post(b + 1);
      rest(b, rows, done_, done_at_);
    }
  });
}

// ---- Norms and elementwise work ------------------------------------------------

std::vector<Timed> Executor::line_statistic(const Vec& x, const std::vector<Timed>& ready,
                                            std::uint64_t ops_per_element, ReductionScheme scheme,
                                            int groups) {
  const Line line = layout_line(x.layout);
  fabric::Fabric& f = fab(x.layout.front().wafer);
  const auto T = static_cast<std::uint64_t>(x.tokens);
  std::vector<Timed> partial(x.layout.size());
  for (std::size_t i = 0; i < x.layout.size(); ++i)
    partial[i] = run_core(x.layout[i].wafer, x.layout[i].core, ready[i],
                          f.cost().vector_op(x.layout[i].size() * T, ops_per_element));
  std::vector<Timed> back;
  all_reduce(x.layout.front().wafer, scheme, line, Bytes{4 * T}, partial, back, groups);
  return back;
}

Vec Executor::normalised(const Vec& x, const std::vector<Timed>& ready,
                         std::uint64_t ops_per_element) {
  fabric::Fabric& f = fab(x.layout.front().wafer);
  const auto T = static_cast<std::uint64_t>(x.tokens);
  Vec out;
  out.layout = x.layout;
  out.tokens = x.tokens;
  for (std::size_t i = 0; i < x.layout.size(); ++i)
    out.ready.push_back(run_core(x.layout[i].wafer, x.layout[i].core, ready[i],
                                 f.cost().vector_op(x.layout[i].size() * T, ops_per_element)));
  return out;
}

Vec Executor::rmsnorm(const Vec& x, const std::vector<float>& g, ReductionScheme scheme,
                      int groups) {
  Vec out = normalised(x, line_statistic(x, x.ready, 2, scheme, groups), 2);
  if (values_) values_->rmsnorm(x, g, scheme, out, groups);
  return out;
}

Vec Executor::layernorm(const Vec& x, const std::vector<float>& g, const std::vector<float>& b,
                        ReductionScheme scheme, int groups) {
  const std::vector<Timed> mean_ready = line_statistic(x, x.ready, 1, scheme, groups);
  Vec out = normalised(x, line_statistic(x, mean_ready, 3, scheme, groups), 4);
  if (values_) values_->layernorm(x, g, b, scheme, out, groups);
  return out;
}

void Executor::qk_norm(Vec& qkv, int layer) {
  const Layout& l = qkv.layout;
  const int hd = model_.head_dim;
  const int heads = model_.num_heads + model_.num_kv_heads;
  const QkvRows rows = pl_.qkv_rows(model_, layer);
  const auto T = static_cast<std::uint64_t>(qkv.tokens);
  // The query and key elements of piece i (the value heads are not normed).
  auto qk_of = [&](std::size_t i) { return rows.qk_rows_in(l[i].begin, l[i].end); };
  fabric::Fabric& f = fab(l.front().wafer);
  std::vector<Timed> partial(l.size()), normed(l.size());
  for (std::size_t i = 0; i < l.size(); ++i) {
    const auto n = static_cast<std::uint64_t>(qk_of(i));
    partial[i] = n == 0
                     ? qkv.ready[i]
                     : run_core(l[i].wafer, l[i].core, qkv.ready[i], f.cost().vector_op(n * T, 2));
    normed[i] = partial[i];
  }
  std::vector<Timed> back;
  for (int h = 0; h < heads; ++h) {
    const auto [a, b] = pieces_of_range(l, rows.rotary(h), rows.rotary(h) + hd);
    if (a == b) continue;
    const Line line = layout_line(l, a, b);
    all_reduce(l.front().wafer, ReductionScheme::chain, line, Bytes{4 * T},
               std::span(partial).subspan(a, b - a + 1), back);
    for (std::size_t k = a; k <= b; ++k) normed[k] = later(normed[k], back[k - a]);
  }
  for (std::size_t i = 0; i < l.size(); ++i) {
    const auto n = static_cast<std::uint64_t>(qk_of(i));
    qkv.ready[i] = n == 0
                       ? qkv.ready[i]
                       : run_core(l[i].wafer, l[i].core, normed[i], f.cost().vector_op(n * T, 2));
  }
  if (values_) values_->qk_norm(qkv, layer);
}

void Executor::elementwise(Vec& v, std::uint64_t ops_per_element) {
  for (std::size_t i = 0; i < v.layout.size(); ++i)
    v.ready[i] = run_core(
        v.layout[i].wafer, v.layout[i].core, v.ready[i],
        fab(v.layout[i].wafer)
            .cost()
            .vector_op(v.layout[i].size() * static_cast<std::uint64_t>(v.tokens), ops_per_element));
}

void Executor::bias(Vec& v, WeightRef ref, int layer) {
  elementwise(v, 1);
  if (values_) values_->bias(v, ref, layer);
}

void Executor::rope(Vec& qkv, int layer, std::span<const RowTag> rows) {
  elementwise(qkv, 4);  // ~4 flops per element (two products and a sum, table lookup)
  if (values_) values_->rope(qkv, layer, rows);
}

Vec Executor::silu_mul(const Vec& gu) {
  Vec out;
  out.layout = swiglu_output_layout(gu.layout);
  out.ready = gu.ready;
  out.tokens = gu.tokens;  // [T][2n] interleaved rows give [T][n] outputs elementwise
  elementwise(out, 6);     // sigmoid (exp, add, div) and two products per output
  if (values_) values_->silu_mul(gu, out);
  return out;
}

void Executor::gelu(Vec& v) {
  elementwise(v, 8);
  if (values_) values_->gelu(v);
}

Vec Executor::add(const Vec& a, const Vec& b) {
  if (a.layout.size() != b.layout.size())
    throw std::logic_error("add: operands on different layouts");
  Vec out;
  out.layout = a.layout;
  out.tokens = a.tokens;
  for (std::size_t i = 0; i < a.layout.size(); ++i)
    out.ready.push_back(later(a.ready[i], b.ready[i]));
  elementwise(out, 1);
  if (values_) values_->add(a, b, out);
  return out;
}

// ---- Attention and the head ------------------------------------------------------

std::uint64_t Executor::visible_positions(const AttentionPlacement& a, std::span<const RowTag> rows,
                                          int i) const {
  std::uint64_t n = 0;
  for (const RowTag& r : rows)
    n += static_cast<std::uint64_t>(
        a.positions_on_core(r.user, r.position + 1, i) -
        a.positions_on_core(r.user, first_visible_position(model_, r.position), i));
  return n;
}

Vec Executor::attention(const AttentionPlacement& a, int layer, const Vec& qkv,
                        std::span<const RowTag> rows) {
  if (static_cast<int>(rows.size()) != qkv.tokens)
    throw std::logic_error("attention: a row tag per row of the message");
  if (a.columns_per_head > 1) return block_attention(a, layer, qkv, rows);
  const int hd = model_.head_dim, g = model_.num_heads / model_.num_kv_heads;
  const QkvRows order = pl_.qkv_rows(model_, layer);
  const int L = a.segment_length;
  const int T = qkv.tokens;
  const auto T64 = static_cast<std::uint64_t>(T);
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
    const int q0 = order.q(h * g);
    const Vec q = move(qkv, Layout{Piece{top, q0, q0 + g * hd, w}});
    for (auto& r : kv_ready) r.clear();
    for (const RowTag& r : rows) {
      const int i_owner = a.slot_core(r.user, r.position);
      const Coord owner = a.segment_core(h, i_owner);
      const Vec k = move(one, Layout{Piece{owner, order.k(h), order.k(h) + hd, w}});
      const Vec v = move(one, Layout{Piece{owner, order.v(h), order.v(h) + hd, w}});
      kv_ready[static_cast<std::size_t>(i_owner)].push_back(k.ready[0]);
      kv_ready[static_cast<std::size_t>(i_owner)].push_back(v.ready[0]);
    }
    multicast(w, Line{top, fabric::Direction::south, L},
              Bytes{static_cast<std::uint64_t>(g * hd) * value_bytes() * T64}, q.ready[0],
              arrivals);
    for (int i = 0; i < L; ++i) {
      const std::uint64_t mine = visible_positions(a, rows, i);
      Timed ready = arrivals[static_cast<std::size_t>(i)];
      for (const Timed& r : kv_ready[static_cast<std::size_t>(i)]) ready = later(ready, r);
      done[static_cast<std::size_t>(i)] =
          mine == 0 ? ready
                    : run_core(w, a.segment_core(h, i), ready,
                               fab(w).cost().attention(mine, hd, g, bits_));
    }
    const Timed reduced =
        reduce(w, a.reduction, Line{top, fabric::Direction::south, L},
               Bytes{static_cast<std::uint64_t>(g) * (hd * value_bytes() + 2 * 4) * T64}, done,
               a.reduction_groups);
    out.layout.push_back(Piece{top, h * g * hd, (h + 1) * g * hd, w});
    out.ready.push_back(run_core(
        w, top, reduced, fab(w).cost().vector_op(static_cast<std::uint64_t>(g * hd) * T64, 1)));
  }
  if (values_) values_->attention(a, layer, qkv, rows, out);
  return out;
}

Vec Executor::block_inputs(const AttentionPlacement& a, const QkvRows& order, const Vec& qkv,
                           int h) {
  const int hd = model_.head_dim, g = model_.num_heads / model_.num_kv_heads;
  const int C = a.columns_per_head, w = a.wafer;
  // Column j's share of the group to the block's top row: dims dim_begin(j)
  // .. dim_begin(j + 1) of each of the g query heads (the piece names them as
  // one range of the same size, of the group's rows in the layer's order),
  // and the same dims of the block's new keys and values. The result then
  // names the query slices as the attention's output does (query head i at
  // i x head_dim), which is where o reads them; each top core is ready once
  // all three of its slices are there.
  const int q0 = order.q(h * g), k0 = order.k(h), v0 = order.v(h);
  Layout top;
  for (int j = 0; j < C; ++j)
    top.push_back(
        Piece{a.block_core(h, 0, j), q0 + g * a.dim_begin(j), q0 + g * a.dim_begin(j + 1), w});
  for (const int r0 : {k0, v0})
    for (int j = 0; j < C; ++j)
      top.push_back(Piece{a.block_core(h, 0, j), r0 + a.dim_begin(j), r0 + a.dim_begin(j + 1), w});
  Vec q = move(qkv, top);
  for (int j = 0; j < C; ++j) {
    const auto sj = static_cast<std::size_t>(j), C_ = static_cast<std::size_t>(C);
    q.ready[sj] = later(q.ready[sj], later(q.ready[C_ + sj], q.ready[2 * C_ + sj]));
    Piece& p = q.layout[sj];
    p.begin += h * g * hd - q0, p.end += h * g * hd - q0;
  }
  q.layout.resize(static_cast<std::size_t>(C));
  q.ready.resize(static_cast<std::size_t>(C));
  return q;
}

void Executor::block_row(const AttentionPlacement& a, int h, int i, std::uint64_t n,
                         const std::vector<std::vector<Timed>>& down,
                         std::vector<std::vector<Timed>>& partial, const RowsApart& apart) {
  const int C = a.columns_per_head, w = a.wafer;
  const auto g = static_cast<std::uint64_t>(model_.num_heads / model_.num_kv_heads);
  fabric::Fabric& f = fab(w);
  auto dims = [&](int j) {
    return static_cast<std::uint64_t>(a.dim_begin(j + 1) - a.dim_begin(j));
  };
  // Scores: each core's keys slice times the g query slices (a GEMM tile of
  // n rows); the partial scores all-reduced along the row.
  // Apart: the block's extent is touched already (block_attention).
  const auto run = [&](Coord c, const Timed& ready, const fabric::CoreCost& cost) {
    return apart.rows ? f.cores().run(c, ready, cost) : run_core(w, c, ready, cost);
  };
  std::vector<Timed> scored(static_cast<std::size_t>(C)), back;
  for (int j = 0; j < C; ++j) {
    const Timed& ready = down[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)];
    scored[static_cast<std::size_t>(j)] =
        n == 0 ? ready
               : run(a.block_core(h, i, j), ready, f.cost().gemm_tile(n, dims(j), g, bits_));
  }
  const Line row{a.block_core(h, i, 0), fabric::Direction::east, C};
  const Bytes bytes{g * n * value_bytes()};
  if (n == 0) {
    back = scored;
  } else if (apart.rows) {
    // As all_reduce_line: reduced into the row's first core, multicast back
    // along the row, with the row's own `now`.
    const Timed sum = apart.rows->reduce(row.first, bytes, scored);
    const std::uint64_t now = std::max(apart.rows->held_now(), sum.at.value);
    apart.rows->raise_held_now(now);
    fabric::ParallelLineMulticast cast(f.mesh(), f.flow(), row.first, row.along, C,
                                       fabric::Direction::south, std::span(&bytes, 1),
                                       std::span(&sum, 1), &now);
    back.resize(static_cast<std::size_t>(C));
    for (int j = 0; j < C; ++j)
      cast.next_hop(0, 1, std::span(back).subspan(static_cast<std::size_t>(j), 1), *apart.counts);
  } else {
    all_reduce(w, a.reduction, row, bytes, scored, back, a.reduction_groups);
  }
  // Softmax terms of the row's scores, then the values slice weighted by
  // them (a GEMM tile of dims rows over the n positions).
  for (int j = 0; j < C; ++j) {
    Timed& p = partial[static_cast<std::size_t>(j)][static_cast<std::size_t>(i)];
    p = back[static_cast<std::size_t>(j)];
    if (n == 0) continue;
    p = run(a.block_core(h, i, j), p, f.cost().vector_op(g * n, 4));
    p = run(a.block_core(h, i, j), p, f.cost().gemm_tile(dims(j), n, g, bits_));
  }
}

Vec Executor::block_attention(const AttentionPlacement& a, int layer, const Vec& qkv,
                              std::span<const RowTag> rows) {
  const int L = a.segment_length, C = a.columns_per_head, w = a.wafer;
  const QkvRows order = pl_.qkv_rows(model_, layer);
  const auto T = static_cast<std::uint64_t>(qkv.tokens);
  const auto g = static_cast<std::uint64_t>(model_.num_heads / model_.num_kv_heads);
  fabric::Fabric& f = fab(w);
  Vec out;
  out.tokens = qkv.tokens;
  std::vector<std::vector<Timed>> down(static_cast<std::size_t>(C));
  std::vector<std::vector<Timed>> partial(static_cast<std::size_t>(C),
                                          std::vector<Timed>(static_cast<std::size_t>(L)));
  const auto dims = [&](int j) {
    return static_cast<std::uint64_t>(a.dim_begin(j + 1) - a.dim_begin(j));
  };
  // The block's C columns side by side: their multicasts and reductions go
  // through the families of parallel lines a GEMV uses (exactly the
  // one-by-one multicast_line and reduce_line, in the same order).
  fabric::LineReductions columns(f.mesh(), f.flow(), a.reduction, a.reduction_groups,
                                 fabric::Direction::south, L);
  // Each column's reduction sees the `now` its head's reductions started
  // with, raised by its own messages: the columns time alike in any order,
  // on either thread.
  columns.keep_lines_apart(true);
  // The rows' all-reduces likewise, each row apart (block_row), so that the
  // helper can work out rows too.
  fabric::LineReductions row_lines(f.mesh(), f.flow(), a.reduction, a.reduction_groups,
                                   fabric::Direction::east, C);
  row_lines.keep_lines_apart(true);
  fabric::LineReductions helper_row_lines(row_lines);
  const bool rows_apart = timing_ && row_lines.own_loop();
  std::vector<Timed> reduced(static_cast<std::size_t>(C));
  std::vector<Bytes> column_bytes(static_cast<std::size_t>(C));
  for (int h = 0; h < a.num_kv_heads; ++h) {
    const Vec q = block_inputs(a, order, qkv, h);
    // Each column's stream down the block carries the query slices and the
    // block's new keys and values (every row reads the queries; the rows
    // caching a new position keep its key and value as they pass), so a
    // row works once the stream has reached it. One stream per column, not
    // one message per token and row: a prompt block's tokens go to as many
    // rows (positions go round-robin over them).
    // Rows [i0, i1) of the block, once the column streams have reached them.
    auto block_rows = [&](int i0, int i1, const RowsApart& apart) {
      for (int i = i0; i < i1; ++i)
        block_row(a, h, i, visible_positions(a, rows, i), down, partial, apart);
    };
    if (!timing_) {
      for (int j = 0; j < C; ++j)
        down[static_cast<std::size_t>(j)].assign(static_cast<std::size_t>(L),
                                                 q.ready[static_cast<std::size_t>(j)]);
      block_rows(0, L, {});
    } else {
      touch(w, Line{a.block_core(h, 0, 0), fabric::Direction::south, L});
      touch(w, Line{a.block_core(h, 0, C - 1), fabric::Direction::south, L});
      for (int j = 0; j < C; ++j)
        column_bytes[static_cast<std::size_t>(j)] = Bytes{(g + 2) * dims(j) * value_bytes() * T};
      fabric::ParallelLineMulticast lines(
          f.mesh(), f.flow(), a.block_core(h, 0, 0), fabric::Direction::south, L,
          fabric::Direction::east, column_bytes,
          std::span<const Timed>(q.ready).first(static_cast<std::size_t>(C)));
      for (int j = 0; j < C; ++j)
        down[static_cast<std::size_t>(j)].resize(static_cast<std::size_t>(L));
      // Rows apart reduce and multicast without line records: any on their
      // runs written out first (exact either way).
      if (rows_apart && C > 1)
        for (int i = 0; i < L; ++i) {
          row_lines.settle_line_record(a.block_core(h, i, 0));
          f.flow().settle_line_of(f.mesh().link(a.block_core(h, i, 0), fabric::Direction::east));
        }
      // Rows [i0, i1) of every line, each down its column: ramps and core
      // timelines are column-major, so that is their memory order.
      auto hops = [&](int i0, int i1, int j0, int j1,
                      fabric::ParallelLineMulticast::Counts& counts) {
        for (int j = j0; j < j1; ++j)
          for (int i = i0; i < i1; ++i)
            lines.next_hop(j, 1,
                           std::span(down[static_cast<std::size_t>(j)])
                               .subspan(static_cast<std::size_t>(i), 1),
                           counts);
      };
      const std::uint64_t shape = work_shape(L, C, qkv.tokens, Work::attention_rows);
      const HelperUse use(*this, timing_team_ && lines.hop_by_hop() && L > kAttentionBand, shape);
      if (use.two) {
        // The multicast's hops on the helper, a band of rows at a time,
        // while this thread works out the rows they have reached (exact,
        // as a GEMV's bands: the hops keep each line's own `now` and touch
        // the columns' links and the ramps of rows below; a row's work, its
        // row's links, ramps and cores).
        // This thread also takes the hops of the first columns (its share).
        // With the rows apart, the helper also works out each band's last
        // rows once this thread has hopped its columns (the rows' links,
        // ramps and cores are theirs alone; their counts held apart).
        SharedModel shared(f.flow(), lines, rows_apart ? &row_lines : nullptr,
                           rows_apart ? &helper_row_lines : nullptr);
        const int bands = (L + kAttentionBand - 1) / kAttentionBand;
        auto band_rows = [&](int b) {
          return std::pair{b * kAttentionBand, std::min(L, (b + 1) * kAttentionBand)};
        };
        const OwnWork mine = rows_apart ? own_work(shape, C, kAttentionBand)
                                        : OwnWork{own_columns(shape, C, 1), kAttentionBand};
        const int split = mine.columns;
        auto mid = [&](int b) {
          const auto [i0, i1] = band_rows(b);
          return std::min(i1, i0 + mine.rows);
        };
        const BandWaits waits = on_two_threads(
            bands,
            [&](int b) {
              const auto [i0, i1] = band_rows(b);
              hops(i0, i1, split, C, shared.helpers());
            },
            [&](int b) {
              const auto [i0, i1] = band_rows(b);
              hops(i0, i1, 0, split, shared.mine());
            },
            [&](int b) {
              block_rows(band_rows(b).first, mid(b),
                         rows_apart ? RowsApart{&row_lines, &shared.mine()} : RowsApart{});
            },
            rows_apart ? std::function<void(int)>([&](int b) {
              block_rows(mid(b), band_rows(b).second,
                         RowsApart{&helper_row_lines, &shared.helpers()});
            })
                       : std::function<void(int)>());
        if (rows_apart)
          balance(shape, waits, kFirstWorkShare, 1.0 + kMostColumns);
        else
          balance(shape, waits, kFirstShare, kMostColumns);
      } else {
        fabric::ParallelLineMulticast::Counts counts;
        hops(0, L, 0, C, counts);
        if (rows_apart) {
          HeldReductions held(f.flow(), {&row_lines}, false);
          block_rows(0, L, RowsApart{&row_lines, &counts});
        } else {
          block_rows(0, L, {});
        }
        lines.publish(counts);
      }
    }
    // Each column's partials (g x (dims + max + sum) per token) reduced up
    // to the top row, normalised there. The columns' reductions share no
    // link, ramp or `now` (lines apart), so with the timing helper it takes
    // the last half of them; each then normalises on its top core.
    auto reduce_columns = [&](fabric::LineReductions& by, int j0, int j1) {
      for (int j = j0; j < j1; ++j) {
        const Bytes bytes{g * (dims(j) * value_bytes() + 2 * 4) * T};
        reduced[static_cast<std::size_t>(j)] =
            by.reduce(a.block_core(h, 0, j), bytes, partial[static_cast<std::size_t>(j)]);
      }
    };
    if (!timing_) {
      for (int j = 0; j < C; ++j)
        reduced[static_cast<std::size_t>(j)] = partial[static_cast<std::size_t>(j)].front();
    } else if (!columns.own_loop()) {
      reduce_columns(columns, 0, C);
    } else {
      const HelperUse use(*this, timing_team_ && C >= 2 * kHelperColumns,
                          work_shape(L, C, qkv.tokens, Work::attention_columns));
      if (use.two) {
        // Two threads reduce at once: no line record on their runs.
        for (int j = 0; j < C; ++j) columns.settle_line_record(a.block_core(h, 0, j));
        fabric::LineReductions theirs(columns);  // the same plan, lines apart
        HeldReductions held(f.flow(), {&columns, &theirs}, true);
        on_two_threads(
            1, [&](int) { reduce_columns(theirs, C / 2, C); },
            [&](int) { reduce_columns(columns, 0, C / 2); }, [](int) {});
      } else {
        HeldReductions held(f.flow(), {&columns}, false);
        reduce_columns(columns, 0, C);
      }
    }
    for (int j = 0; j < C; ++j) {
      out.layout.push_back(q.layout[static_cast<std::size_t>(j)]);
      out.ready.push_back(run_core(w, a.block_core(h, 0, j), reduced[static_cast<std::size_t>(j)],
                                   f.cost().vector_op(g * dims(j) * T, 1)));
    }
  }
  if (values_) values_->attention(a, layer, qkv, rows, out);
  return out;
}

void Executor::argmax(const Vec& logits, TokenMessage& m) {
  const auto T = static_cast<std::uint64_t>(logits.tokens);
  std::vector<Timed> local(logits.layout.size());
  for (std::size_t i = 0; i < logits.layout.size(); ++i)
    local[i] =
        run_core(logits.layout[i].wafer, logits.layout[i].core, logits.ready[i],
                 fab(logits.layout[i].wafer).cost().vector_op(logits.layout[i].size() * T, 1));
  m.done = reduce(logits.layout.front().wafer, ReductionScheme::chain, layout_line(logits.layout),
                  Bytes{8 * T}, local);
  if (values_) values_->argmax(logits, m);
}

// ---- Mixture of experts ---------------------------------------------------------

void Executor::skip_expert_choices(int layer, const TokenMessage& m) {
  if (!experts_ || values_) return;
  for (const RowTag& r : m.rows()) experts_->take(layer, r.user, r.position);
}

std::vector<models::ExpertChoice> Executor::timing_route(int layer, int user, int position) const {
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

std::vector<std::vector<models::ExpertChoice>> Executor::choose_experts(
    int layer, const Vec& logits, std::span<const RowTag> rows) {
  std::vector<std::vector<models::ExpertChoice>> chosen;
  for (std::size_t t = 0; t < rows.size(); ++t) {
    const RowTag& r = rows[t];
    if (values_) {
      chosen.push_back(values_->route(logits, static_cast<int>(t)));
      if (experts_) experts_->publish(layer, r.user, r.position, chosen.back());
    } else {
      chosen.push_back(experts_ ? experts_->take(layer, r.user, r.position)
                                : timing_route(layer, r.user, r.position));
    }
  }
  return chosen;
}

Vec Executor::moe(const LayerStage& st, int layer, const Vec& normed, const Vec& logits,
                  const Layout& home, int spread, std::span<const RowTag> rows) {
  const int k = model_.experts_per_token;
  const int T = normed.tokens;
  const auto T64 = static_cast<std::uint64_t>(T);
  // The choice of every row of the message.
  const std::vector<std::vector<models::ExpertChoice>> chosen = choose_experts(layer, logits, rows);
  const MatrixPlacement& r = st.router;
  const int w = r.wafer;
  std::vector<Timed> local(logits.layout.size());
  for (std::size_t i = 0; i < logits.layout.size(); ++i)
    local[i] = run_core(w, logits.layout[i].core, logits.ready[i],
                        fab(w).cost().vector_op(logits.layout[i].size() * T64, 1));
  const auto pair_bytes = Bytes{static_cast<std::uint64_t>(k) * 8 * T64};
  Timed choice = reduce(w, ReductionScheme::chain, layout_line(logits.layout), pair_bytes, local);
  choice = run_core(w, r.root(0), choice,
                    fab(w).cost().vector_op(static_cast<std::uint64_t>(k) * T64, 4));
  // Told to every core holding a piece of the router's input: its tile row
  // 0, which lies the way its rows' partial sums do (east; south when the
  // router is transposed, as on a whole region).
  std::vector<Timed> told;
  multicast(w, Line{r.core(0, 0), r.reduction_direction(), r.q()}, pair_bytes, choice, told);
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
    if (values_) values_->select_tokens(x, rows, sub);
    const Vec gu =
        gemv(e.gate_up, WeightRef::expert_gate_up, layer, move(sub, input_layout(e.gate_up)), e_id);
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
    out.ready.push_back(run_core(home[i].wafer, home[i].core, t,
                                 fab(home[i].wafer).cost().vector_op(home[i].size() * T64, 2 * k)));
  }
  if (values_) values_->combine_experts(chosen, users_of, outputs, out);
  return out;
}

}  // namespace wafersim::sim
