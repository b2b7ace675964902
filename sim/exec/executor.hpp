// Interprets a lowered program's phases on the fabric model: the timing of
// every transfer and tile through the flow-level links and core timelines,
// and (functional mode) the real numbers, which PhaseValues
// (sim/exec/phase_values.hpp) computes beside the timing of each phase.
// Plain C++: no SystemC here, so it can be tested on its own; the engine's
// SystemC modules call it phase by phase in simulated time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric/fabric.hpp"
#include "fabric/parallel_multicast.hpp"
#include "fabric/wafer_io.hpp"
#include "models/kernels.hpp"
#include "models/weights.hpp"
#include "models/work_team.hpp"
#include "sim/exec/phase_values.hpp"
#include "sim/exec/thread_choice.hpp"
#include "sim/exec/token_message.hpp"
#include "sim/exec/value_lane.hpp"
#include "sim/placement/placement.hpp"
#include "sim/program/program.hpp"

namespace wafersim::fabric {
class LineReductions;
}  // namespace wafersim::fabric

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
  // With `weights` the executor is functional: it computes the numbers too.
  Executor(std::vector<fabric::Fabric*> wafers, fabric::WaferIo* io,
           const models::ModelConfig& model, const Placement& pl, const Program& prog,
           const models::Weights* weights, int weight_bits);
  ~Executor();

  bool functional() const { return values_ != nullptr; }

  // A values-only executor (the functional lane, sim/exec/value_lane.hpp):
  // computes the numbers and the layouts only, never touching the fabric;
  // every time it returns is the ready time it was given and means nothing.
  // Needs weights. Its fabrics may be in use by a timing executor on
  // another thread at the same time.
  void set_values_only();
  // How many wafers it runs on, and whether it computes numbers as well as
  // times (a functional run without the lane).
  int wafer_count() const { return static_cast<int>(fabs_.size()); }
  bool computes_values() const { return values_ != nullptr; }
  // While frozen (replayed layers not yet written into the fabric, see
  // sim/exec/layer_replay.hpp) any work is a logic error.
  void set_frozen(bool frozen) { frozen_ = frozen; }
  // The smallest rectangle holding every core, and both ends of every line
  // and route, this executor's work has used since the last call (width 0:
  // none), and its wafer (-1: none; kSeveralWafers: work on more than one);
  // then starts afresh. XY routes and straight lines stay in the rectangle
  // of their ends, so on a wafer without dead cores no link or ramp outside
  // it was met (sim/exec/layer_replay.hpp).
  struct Touched {
    int wafer = -1;
    fabric::Rect rect;
  };
  static constexpr int kSeveralWafers = -2;
  Touched take_touched();

  // Mixture-of-experts choices: a functional executor publishes the experts
  // each token chose to `x`; a timing-only one with an exchange takes them
  // from it (waiting) instead of drawing them (timing_route).
  void set_expert_exchange(ExpertExchange* x) { experts_ = x; }
  // A layer replayed instead of run (sim/exec/layer_replay.hpp): with an
  // exchange, the choices published for its mixture of experts are taken
  // and dropped, as run() would take them.
  void skip_expert_choices(int layer, const TokenMessage& m);

  // Seed of the expert choice in timing-only runs (see timing_route()).
  void set_routing_seed(std::uint64_t seed) { routing_seed_ = seed; }

  // Host threads for the functional GEMVs: `threads` in all, this one
  // included (models::WorkTeam); 1 = this thread alone, the default. Results do
  // not depend on it. Needs weights.
  // `guest`, when given, is called each time a GEMV's bands are handed out:
  // one other thread may then take some of them with assist() (the
  // simulation, waiting for the functional lane: sim/exec/value_lane.hpp).
  void set_threads(int threads, std::function<void()> guest = nullptr);
  // A second host thread for the timing itself (the engine gives one to
  // timing-only runs with more than one host thread): it times most of a
  // GEMV's multicasts and tiles, band by band of rows, while this thread
  // times the rest and reduces each band's rows once the helper is done
  // with it (gemv); in attention it takes most of the q multicast's hops.
  // Each touches records the other does not, with the same calls in the
  // same order per record, so results are the same byte for byte with or
  // without it. `measured`: works take the helper while the host times
  // measured say it pays (sim/exec/thread_choice.hpp); `always`: every work
  // that can.
  enum class TimingHelper { off, measured, always };
  void set_timing_helper(TimingHelper mode);
  // The choice of `measured`, with how many works ran on two threads and on
  // one so far.
  const ThreadChoice& thread_choice() const { return thread_choice_; }
  // The guest thread computes row bands of the GEMV being computed, if
  // any (set_threads); whether it found one.
  bool assist() { return values_ && values_->assist(); }

  // Runs one phase of a stage of layer `layer` (-1: the head) on token `m`.
  void run(const Phase& ph, TokenMessage& m, int layer);

  // ---- Phase primitives (public so tests can time them in isolation) ----

  // Row `row` of an embedding-like matrix (embedding or gpt2's position
  // embeddings), read from the cores of the row block holding it once the
  // index has reached that block's root (`at_root`): the index is multicast
  // east along the row block, every core sends its piece of the row. Timing
  // and layout only.
  Vec embedding_row(const MatrixPlacement& e, int row, const Timed& at_root);

  // The embedding row of `token`, read from the cores holding it once the
  // token id has reached them (`id_ready`, at the lm_head/embedding root).
  // gpt2 adds the position embedding row of `position`: its pieces are sent
  // to the token row's cores and added there (x = embedding + position, in
  // that order, as the reference does).
  Vec embed(std::int32_t token, int position, const Timed& id_ready, bool from_host);

  // Moves `v` to `target`: every overlap between a source piece and a target
  // piece is one point-to-point transfer along the XY route.
  //
  // With `spread` > 0, transfer k is routed through a waypoint column
  // (min(x_src, x_dst) + 1 + k mod spread): along its row to that column,
  // vertically there, then along the target's row. Moving a whole vector
  // between two columns of cores then uses `spread` columns of vertical links
  // in parallel instead of funnelling every byte through one column (XY
  // routing's worst case; the same idea as Valiant/ROMM routing in NoCs).
  Vec move(const Vec& v, const Layout& target, int spread = 0);

  // Mesh GEMV: input chunk q multicast down column q; every core multiplies
  // its tile; partial sums of each row of cores reduced west to its root.
  // A block of T prompt tokens is a GEMM: T input chunks down each column
  // (one message of T chunks), each core streams its tile once and
  // multiplies it by all T (fabric::CoreCostModel::gemm_tile), T partial
  // sums per row reduced together. Functional: the host threads
  // (set_threads) compute the values, row band by row band, while this
  // thread times the GEMV on the fabric model; it then takes the bands left.
  Vec gemv(const MatrixPlacement& m, WeightRef ref, int layer, const Vec& x, int expert = -1);

  // RMSNorm over a line of roots: every root's partial sum of squares,
  // all-reduced along the line (line_statistic, `scheme`), then 2 ops per
  // element.
  Vec rmsnorm(const Vec& x, const std::vector<float>& g,
              ReductionScheme scheme = ReductionScheme::chain, int groups = 0);
  // LayerNorm (gpt2) over a column of roots: two statistics one after the
  // other (the sum, then the sum of squared deviations from the mean, each a
  // chain reduction and a multicast back, as models::layernorm_apply
  // specifies: two passes, not E[x^2] - mean^2), then (x - mean) * inv *
  // gain + bias on every root.
  Vec layernorm(const Vec& x, const std::vector<float>& g, const std::vector<float>& b,
                ReductionScheme scheme = ReductionScheme::chain, int groups = 0);
  // A statistic of the whole vector (of every token of a block) from
  // per-piece partials: each root computes its partial (ops_per_element per
  // element), and the partials (4 B per token) are all-reduced along the
  // line of roots (reduced to the first root with `scheme`, the sum
  // multicast back).
  std::vector<Timed> line_statistic(const Vec& x, const std::vector<Timed>& ready,
                                    std::uint64_t ops_per_element, ReductionScheme scheme,
                                    int groups = 0);

  // The bias of a matrix's output, added on the roots that hold each slice.
  void bias(Vec& v, WeightRef ref, int layer);
  // qwen3's qk-norm: each q and k head RMSNorm'd with the layer's q_norm /
  // k_norm gains, on the qkv roots (a column of consecutive cores). Every
  // root squares and sums its q/k elements per head (2 ops per element);
  // a head held by one root is normed there; a head spread over several
  // consecutive roots has their partial sums (4 B per token) chain-reduced
  // to its first root and multicast back; then every root scales its
  // elements (2 ops per element).
  void qk_norm(Vec& qkv, int layer);
  // Row t of `qkv` at rows[t].position.
  void rope(Vec& qkv, int layer, std::span<const RowTag> rows);
  Vec silu_mul(const Vec& gu);
  // GELU (tanh) in place on the up matrix's roots (gpt2): about 8 operations
  // per element (cube, tanh, products).
  void gelu(Vec& v);
  Vec add(const Vec& a, const Vec& b);
  // `ops_per_element` on every piece of `v`, where it is.
  void elementwise(Vec& v, std::uint64_t ops_per_element);

  // Decode attention over the KV cache held in the layer's segments. For
  // kv head h: its query group goes to the segment's first core and is
  // multicast down the segment; the new k, v go to the core that caches this
  // position; every core computes a partial over its positions; partials are
  // reduced up the segment and normalised at its first core.
  //
  // A message of T rows (a block of prompt tokens, or a decode batch of T
  // users; row t is rows[t]: its user and position): the T query groups
  // travel as one message, each row's k and v go to the core caching that
  // row's position of that row's user, and every core computes, for each
  // row, its partial over that user's positions it caches up to the row's
  // (causal) inside its window; the T partials are reduced together.
  Vec attention(const AttentionPlacement& a, int layer, const Vec& qkv,
                std::span<const RowTag> rows);
  // The same over a KV cache spread over blocks of c > 1 columns
  // (AttentionPlacement::columns_per_head): for kv head h, the query
  // group's slices go to the block's top row (column j: dims
  // dim_begin(j)..dim_begin(j+1) of each of the g heads) and are
  // multicast down the columns; the new k, v go, split the same way, to
  // the row caching this position. Every core computes its partial
  // scores (its keys slice times the g query slices: a GEMM tile), the
  // scores are all-reduced along the row (g per position, 4 B each), each
  // core computes the softmax terms (4 ops per score) and weights its
  // values slice by them (a GEMM tile); every column's partials (g x
  // (dims + 2) floats per token) are reduced up to the top row and
  // normalised there. The output is on the top row, column j holding
  // g x its dims (the pieces name them as one range of that size).
  Vec block_attention(const AttentionPlacement& a, int layer, const Vec& qkv,
                      std::span<const RowTag> rows);

  // Local argmax on every root, then the (value, index) pairs are reduced up
  // the root column; ties keep the lower index, as the reference does. A
  // decode batch's rows each have theirs (8 B per row reduced together).
  void argmax(const Vec& logits, TokenMessage& m);

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
          int spread, std::span<const RowTag> rows);

  // Timing-only runs compute no router logits; the experts a token uses are
  // then drawn uniformly without replacement (k of num_experts, every subset
  // equally likely) from a generator seeded by (routing seed, layer, user,
  // position): the same scenario gives the same choices on every run. The
  // weights (1/k each) do not matter for timing.
  std::vector<models::ExpertChoice> timing_route(int layer, int user, int position) const;

  // Speculative decoding rolls back: the functional KV cache of `user`
  // keeps its first `positions` positions and forgets the rest (the
  // rejected draft tokens). Timing needs nothing: a slot's timing depends
  // on its position only, and the next token writes it again.
  void truncate_kv(int user, int positions) {
    if (values_) values_->truncate_kv(user, positions);
  }

  // ---- The fabric: cores, point-to-point messages, collectives ----

  fabric::Fabric& fab(int wafer) { return *fabs_[static_cast<std::size_t>(wafer)]; }
  Timed run_core(int wafer, Coord c, const Timed& ready, const fabric::CoreCost& cost);
  // One point-to-point message between two cores, on one wafer along its XY
  // route, or between wafers: to the source wafer's east edge (same row),
  // over the wafers' I/O, then from the target wafer's west edge.
  // On one wafer, `waypoint_x` >= 0 routes through that column (see move()).
  Timed transfer(const Piece& src, const Piece& dst, Bytes bytes, const Timed& ready,
                 int waypoint_x = -1);
  // The collectives on wafer `wafer`'s fabric (fabric/collectives.hpp).
  void multicast(int wafer, const Line& line, Bytes bytes, const Timed& ready,
                 std::vector<Timed>& arrivals);
  // `groups`: a k-tree's K (0: its default).
  Timed reduce(int wafer, ReductionScheme scheme, const Line& line, Bytes bytes,
               std::span<const Timed> ready, int groups = 0);
  void all_reduce(int wafer, ReductionScheme scheme, const Line& line, Bytes bytes,
                  std::span<const Timed> ready, std::vector<Timed>& arrivals, int groups = 0);

  // The pieces [a, b] of a layout that sits on consecutive cores of one
  // column, down it or (an upward matrix's roots) up it, or of one row (a
  // transposed matrix's roots), from piece a on.
  static Line layout_line(const Layout& l, std::size_t a = 0, std::size_t b = SIZE_MAX);

  // Blocks of prompt tokens: `tokens` equal layouts stacked into one block
  // (ready when every part is), and some of a block's tokens (the head
  // takes a block's last, or each member's last prompt token of a batch).
  static Vec stack(const std::vector<Vec>& parts);
  // The rows `rows` of v (of its tokens), in that order, where v's pieces are.
  static Vec some_tokens(const Vec& v, const std::vector<int>& rows);

 private:
  // A norm's last step: once its statistic is back on each root (`ready`),
  // every root scales its piece (`ops_per_element`); the timing of `x`'s
  // normalised copy, without values.
  Vec normalised(const Vec& x, const std::vector<Timed>& ready, std::uint64_t ops_per_element);
  // Cached positions row (segment core) i of `a` attends to for the rows
  // `rows` (each row its own user's positions, its own window, causal),
  // summed over the rows.
  std::uint64_t visible_positions(const AttentionPlacement& a, std::span<const RowTag> rows,
                                  int i) const;
  // block_attention's parts: kv head h's query slices, with the block's
  // new keys and values, on its block's top row (returned: the query
  // slices, each ready once its column's three slices are there); and row
  // i's scores, their all-reduce along the row and its weighted values (`n`
  // visible positions), into `partial` [column][row].
  Vec block_inputs(const AttentionPlacement& a, const QkvRows& order, const Vec& qkv, int h);
  // With `apart` (timing only, a reduction of its own hop loop), the row's
  // all-reduce keeps its line apart (LineReductions::keep_lines_apart, its
  // sum multicast back with the row's own `now`) and the cores are run
  // without touch(): rows of a block may then be worked out on two threads.
  struct RowsApart {
    fabric::LineReductions* rows = nullptr;  // along the block's rows, counts held
    fabric::ParallelLineMulticast::Counts* counts = nullptr;
  };
  void block_row(const AttentionPlacement& a, int h, int i, std::uint64_t n,
                 const std::vector<std::vector<Timed>>& down,
                 std::vector<std::vector<Timed>>& partial, const RowsApart& apart);
  // The experts each row of a message uses: the top k of its router logits
  // (functional, published to the exchange), else the functional lane's
  // choice (taken from the exchange) or timing_route()'s.
  std::vector<std::vector<models::ExpertChoice>> choose_experts(int layer, const Vec& logits,
                                                                std::span<const RowTag> rows);

  std::vector<fabric::Fabric*> fabs_;
  fabric::WaferIo* io_ = nullptr;
  std::unique_ptr<fabric::WaferIo> own_io_;
  const models::ModelConfig& model_;
  const Placement& pl_;
  const Program& prog_;
  int bits_;
  // Bytes of a value on the fabric: activations, partial sums, attention's
  // queries, scores and partials (Placement::value_bytes).
  std::uint64_t value_bytes() const { return static_cast<std::uint64_t>(pl_.value_bytes); }
  std::vector<fabric::LinkId> route_;
  // A GEMV band's tile results, and their cycles apart (gemv).
  std::vector<Timed> done_;
  std::vector<std::uint64_t> done_at_;
  // set_timing_helper: the helper (a team of two), and its GEMV band's
  // arrivals and tile results (alternate_bands).
  std::unique_ptr<models::WorkTeam> timing_team_;
  TimingHelper helper_mode_ = TimingHelper::off;
  ThreadChoice thread_choice_;
  // A work of `shape` that `can` take the helper: whether it does
  // (helper_mode_), and, under `measured`, its host time taken for the
  // choice while this lives.
  struct HelperUse {
    HelperUse(Executor& ex, bool can, std::uint64_t shape);
    bool two = false;
    std::optional<ThreadChoice::Timer> timer;
  };
  std::vector<Timed> handed_;
  std::vector<std::uint64_t> handed_at_;
  // Band b's multicast hops, their arrivals into `done`.
  using BandHops = std::function<void(int b, std::span<Timed> done,
                                      fabric::ParallelLineMulticast::Counts& counts)>;
  // Band b's tiles, run in place in `done`, their cycles into `at`; then its
  // rows reduced by `by`.
  using BandSums = std::function<void(int b, fabric::LineReductions& by, std::span<Timed> done,
                                      std::span<std::uint64_t> at)>;
  // A GEMV's bands b = 0 .. bands - 1 on both threads, each band's hops,
  // tiles and rows on one: this thread's the even bands, the helper's the
  // odd ones. The lines' hops go band after band, handed from one thread
  // to the other; each thread then works out its band's tiles and rows
  // (with `rows` here, a copy of it on the helper: lines apart, counts
  // held) while the other hops the next band.
  void alternate_bands(int bands, std::size_t band_size, fabric::FlowModel& flow,
                       fabric::ParallelLineMulticast& lines, fabric::LineReductions& rows,
                       const BandHops& hops, const BandSums& rest);
  // Bands b = 0 .. bands - 1 on both threads: helper(b) on the timing
  // helper; on this thread first(b) (if given) beside it, then second(b)
  // once helper(b) is done. Returns how long each side waited for the
  // other, in seconds.
  struct BandWaits {
    double here = 0, there = 0;
  };
  // With helper_after, the helper also runs it for band b, once first(b)
  // and helper(b) are done (and before helper(b + 1)).
  BandWaits on_two_threads(int bands, const std::function<void(int)>& helper,
                           const std::function<void(int)>& first,
                           const std::function<void(int)>& second,
                           const std::function<void(int)>& helper_after = {});
  // Rows of an attention block handed over at once (block_attention).
  static constexpr int kAttentionBand = 16;
  // Columns of an attention block the helper reduces at least, when it
  // takes half of them (block_attention): below that, handing them over
  // costs more than it spares.
  static constexpr int kHelperColumns = 2;
  // The columns of `columns` this thread takes beside the helper in work
  // of shape `shape` (an attention block's), in whole tiles of
  // `tile`: a share per shape, moved after each such work toward the split
  // where neither thread waits for the other (balance). Host time only: any
  // split gives the same results.
  int own_columns(std::uint64_t shape, int columns, int tile) const;
  // An attention block's share of work on this thread, when the helper can
  // take rows too: below 1, the share of each band's rows worked out here
  // (the helper's hops all columns); from 1 on, every row and (share - 1)
  // of the columns' hops. Moved as own_columns' share is (balance).
  struct OwnWork {
    int columns = 0;  // [0, columns) hopped here
    int rows = 0;     // the first `rows` of a band of band_rows worked out here
  };
  OwnWork own_work(std::uint64_t shape, int columns, int band_rows) const;
  // The first share: a quarter of each band's rows on the helper, which
  // hops every column (long contexts: the rows' all-reduces outweigh the
  // hops; short ones move it up).
  static constexpr double kFirstWorkShare = 0.75;
  // A shape of work: rows and columns of cores, tokens, and what work it is.
  enum class Work { gemv, gemv_transposed, attention_rows, attention_columns };
  static std::uint64_t work_shape(int rows, int columns, int tokens, Work work);
  static constexpr double kFirstShare = 0.1;
  // The columns' share reaches at most kMostColumns.
  static constexpr double kMostColumns = 0.5;
  // A shape's share (`first` until balanced once), and moving it by 0.02
  // toward the side that waited less, within [0, most].
  double share_of(std::uint64_t shape, double first) const;
  void balance(std::uint64_t shape, const BandWaits& waits, double first, double most);
  std::unordered_map<std::uint64_t, double> own_shares_;
  std::uint64_t routing_seed_ = 0;
  bool timing_ = true;  // false: values only (set_values_only)
  bool frozen_ = false;
  // What take_touched() returns, as inclusive bounds (x0 > x1: none).
  int touched_x0_ = 1, touched_y0_ = 1, touched_x1_ = 0, touched_y1_ = 0;
  int touched_wafer_ = -1;
  void touch(int wafer, Coord c) {
    if (touched_x0_ > touched_x1_) {
      touched_x0_ = touched_x1_ = c.x, touched_y0_ = touched_y1_ = c.y;
      touched_wafer_ = wafer;
      return;
    }
    if (wafer != touched_wafer_) touched_wafer_ = kSeveralWafers;
    touched_x0_ = std::min(touched_x0_, c.x), touched_x1_ = std::max(touched_x1_, c.x);
    touched_y0_ = std::min(touched_y0_, c.y), touched_y1_ = std::max(touched_y1_, c.y);
  }
  void touch(int wafer, const Line& line) {
    touch(wafer, line.first);
    touch(wafer, line.at(line.length - 1));
  }
  void check_not_frozen() const;
  ExpertExchange* experts_ = nullptr;
  std::unique_ptr<PhaseValues> values_;  // functional runs: the numbers
};

// Runs one token through one stage: the move of its input onto the stage,
// then every phase. `after(label, t)` is called when each step's output is
// complete (the SystemC engine waits there; other callers just observe).
// `replayed(t)` is asked before each step (the move, if the stage has one,
// is step 0): true when it has set the step's outcome on m itself, without
// the executor (PipelineReplay), with `t` when its output is complete.
// The head skips prompt tokens that need no logits.
template <class AfterStep, class Replayed>
void run_stage(Executor& ex, const StageProgram& sp, TokenMessage& m, AfterStep&& after,
               Replayed&& replayed) {
  Vec& x = slot(m, Slot::x);
  const bool head = sp.layer < 0;
  if (head && !m.needs_logits) {
    m.done = x.latest();
    return;
  }
  // Of a block of prompt tokens the head needs the last one only (a decode
  // batch: every row; a batch of prompt blocks: each member's last prompt
  // token it holds).
  if (head && x.tokens > 1 && !m.is_batch()) x = Executor::some_tokens(x, {x.tokens - 1});
  if (head && !m.logit_rows.empty()) x = Executor::some_tokens(x, m.logit_rows);
  Timed t;
  if (!sp.continues_layer) {
    if (!replayed(t)) {
      x = ex.move(x, sp.input, sp.input_spread);
      t = x.latest();
    }
    after("enter " + sp.name, t);
  }
  for (const Phase& ph : sp.phases) {
    if (!replayed(t)) {
      ex.run(ph, m, sp.layer);
      t = ph.kind == PhaseKind::argmax ? m.done : slot(m, ph.out).latest();
    }
    after(ph.label, t);
  }
  if (!head && sp.ends_layer) x = slot(m, Slot::out);
}

template <class AfterStep>
void run_stage(Executor& ex, const StageProgram& sp, TokenMessage& m, AfterStep&& after) {
  run_stage(ex, sp, m, std::forward<AfterStep>(after), [](Timed&) { return false; });
}

}  // namespace wafersim::sim
