#include "sim/placement/stage_planner.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace wafersim::sim {

using fabric::FitError;
using fabric::Rect;

std::string human_bytes(Bytes b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b.value);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

int min_rows(const MatrixShape& m, int width, Bytes capacity_bytes, int weight_bits) {
  const std::uint64_t capacity = capacity_bytes.value;
  const std::uint64_t q = static_cast<std::uint64_t>(std::min(width, m.in));
  const std::uint64_t cols = ceil_div(static_cast<std::uint64_t>(m.in), q);
  const std::uint64_t row_bytes = ceil_div(cols * static_cast<std::uint64_t>(weight_bits), 8) + 4 +
                                  static_cast<std::uint64_t>(m.root_bytes_per_row);  // + partial
  if (capacity <= cols * 4 + row_bytes) return -1;  // not even one row fits
  const std::uint64_t granule = static_cast<std::uint64_t>(m.granule);
  const std::uint64_t groups_per_core = (capacity - cols * 4) / row_bytes / granule;
  if (groups_per_core == 0) return -1;
  return static_cast<int>(ceil_div(static_cast<std::uint64_t>(m.out) / granule, groups_per_core));
}

namespace {

MatrixPlacement make_matrix(const MatrixShape& m, int x0, int y0, int width, int rows,
                            fabric::ReductionScheme reduction, int groups) {
  MatrixPlacement mp;
  mp.name = m.name;
  mp.out_features = m.out;
  mp.in_features = m.in;
  mp.rect = Rect{x0, y0, std::min(width, m.in), std::min(rows, m.out / m.granule)};
  mp.reduction = reduction;
  mp.reduction_groups = reduction == fabric::ReductionScheme::k_tree ? groups : 0;
  mp.row_granule = m.granule;
  return mp;
}

// Splits `extra` rows among matrices in proportion to their weights, never
// giving a matrix more rows of cores than it has output rows.
void share_rows(std::vector<int>& rows, const std::vector<MatrixShape>& shapes, int extra) {
  std::uint64_t total = 0;
  for (const auto& s : shapes) total += static_cast<std::uint64_t>(s.out) * s.in;
  for (std::size_t i = 0; i < shapes.size() && total > 0; ++i) {
    const auto share =
        static_cast<int>(static_cast<std::uint64_t>(extra) * shapes[i].out * shapes[i].in / total);
    rows[i] = std::min(rows[i] + share, shapes[i].out);
  }
}

// Stacks rectangles of the given heights top to bottom in `block`, each on
// a contiguous run of rows that hold no dead core (a row of the block with a
// dead core in any of its columns holds nothing: the defect rule). Returns
// the first row of each, or the overflow (rows past the block's end) of the
// first one that does not fit.
struct StackResult {
  std::vector<int> y;
  int overflow = 0;
  int failed = -1;  // index of the first height that did not fit
};

StackResult stack_rows(const Rect& block, const std::vector<char>& dead_row,
                       const std::vector<int>& heights) {
  StackResult r;
  int y = 0;  // relative to block.y0
  for (std::size_t i = 0; i < heights.size(); ++i) {
    const int h = heights[i];
    // First start >= y with h clear rows.
    int start = y, run = 0;
    for (int yy = y; yy < block.height && run < h; ++yy) {
      if (dead_row[static_cast<std::size_t>(yy)]) {
        run = 0;
        start = yy + 1;
      } else {
        ++run;
      }
    }
    if (run < h) {
      r.failed = static_cast<int>(i);
      r.overflow = std::max(1, start + h - block.height);
      return r;
    }
    r.y.push_back(block.y0 + start);
    y = start + h;
  }
  return r;
}

// Stacks the heights, shrinking the one furthest above its minimum when the
// dead rows leave too little room, until they fit; throws FitError with
// `what` when even the minimum heights do not.
std::vector<int> stack_shrinking(const Rect& block, const std::vector<char>& dead_row,
                                 std::vector<int>& heights, const std::vector<int>& mins,
                                 const std::vector<int>& steps, const std::string& what) {
  for (;;) {
    StackResult r = stack_rows(block, dead_row, heights);
    if (r.failed < 0) return r.y;
    int best = -1, slack = 0;
    for (std::size_t i = 0; i < heights.size(); ++i)
      if (heights[i] - mins[i] >= steps[i] && heights[i] - mins[i] > slack)
        best = static_cast<int>(i), slack = heights[i] - mins[i];
    if (best < 0) throw FitError(what);
    const auto b = static_cast<std::size_t>(best);
    const int cut = std::min(heights[b] - mins[b], std::max(r.overflow, steps[b]));
    heights[b] -= cut / steps[b] * steps[b];
  }
}

}  // namespace

StagePlanner::StagePlanner(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                           const PlacementRequest& req)
    : model_(model), spec_(spec), req_(req), defects_(spec) {
  bits_ = req.weight_bits;
  capacity_ = spec.sram_per_core.value;
  users_ = std::max(1, req.users);
  ctx_ = std::max(1, req.context_tokens);
  slots_ = static_cast<std::int64_t>(ctx_) * users_;
  // The matrices of a layer, top to bottom (the attention segments sit
  // between qkv and o):
  //   SwiGLU (llama family)     qkv, o, gate_up (interleaved pairs), down
  //   GELU (gpt2)               qkv, o, up, down
  //   MoE (mixtral, qwen3_moe)  qkv, o, router, then gate_up and down of each expert
  shapes_ = {
      {"qkv", model.q_dim() + 2 * model.kv_dim(), model.hidden_size, 1, 0, MatrixKind::qkv},
      // O's roots hold the residual stream and the norms' gains (and gpt2's
      // LayerNorm biases) of their rows.
      {"o", model.hidden_size, model.q_dim(), 1,
       2 * (model.is_gpt2() ? 2 : 1) * req.weight_bits / 8, MatrixKind::o},
  };
  if (model.is_moe()) {
    shapes_.push_back({"router", model.num_experts, model.hidden_size});
    for (int e = 0; e < model.num_experts; ++e) {
      shapes_.push_back(
          {fmt::format("expert {} gate_up", e), 2 * model.intermediate_size, model.hidden_size, 2});
      shapes_.push_back(
          {fmt::format("expert {} down", e), model.hidden_size, model.intermediate_size});
    }
  } else if (model.is_gpt2()) {
    shapes_.push_back({"up", model.intermediate_size, model.hidden_size});
    shapes_.push_back({"down", model.hidden_size, model.intermediate_size, 1, 0, MatrixKind::down});
  } else {
    shapes_.push_back(
        {"gate_up", 2 * model.intermediate_size, model.hidden_size, 2, 0, MatrixKind::gate_up});
    shapes_.push_back({"down", model.hidden_size, model.intermediate_size, 1, 0, MatrixKind::down});
  }
  const int hd = model.head_dim;
  group_ = model.num_heads / model.num_kv_heads;
  slot_bytes_ = 2 * static_cast<std::uint64_t>(hd) * bits_ / 8;
  att_buffers_ = static_cast<std::uint64_t>(group_) * (2 * hd + 2) * 4;
  // A segment layout keeps a kv head's whole position on one core; a
  // whole-region layer splits it over the head's columns (check_region_fit).
  if (req.strategy != StrategyKind::whole_region && capacity_ <= att_buffers_ + slot_bytes_)
    throw FitError(
        fmt::format("one core ({}) cannot hold a single KV position of {} plus attention buffers",
                    human_bytes(capacity()), model.name));
}

StagePlanner::MatrixRows StagePlanner::matrix_rows(int bw, Bytes budget) const {
  MatrixRows m;
  m.rows.resize(shapes_.size());
  m.width.resize(shapes_.size());
  m.fixed.assign(shapes_.size(), 0);
  for (std::size_t i = 0; i < shapes_.size(); ++i) {
    const MatrixOverride ov = override_of(shapes_[i].kind);
    m.width[i] = ov.columns > 0 ? std::min(ov.columns, bw) : bw;
    m.rows[i] = min_rows(shapes_[i], m.width[i], budget, bits_);
    if (m.rows[i] < 0)
      throw FitError(fmt::format(
          "a {}-column block cannot hold even one row of the {} matrix of {} on {}; use more "
          "wafers or fewer block rows",
          m.width[i], shapes_[i].name, model_.name, spec_.name));
    if (ov.rows > 0) {
      if (ov.rows < m.rows[i])
        throw FitError(fmt::format(
            "placement.matrices.{}.rows is {}, but its tiles need at least {} rows of {} cores "
            "to fit a core's SRAM",
            shapes_[i].name, ov.rows, m.rows[i], m.width[i]));
      m.fixed[i] = m.rows[i] = std::min(ov.rows, shapes_[i].out / shapes_[i].granule);
    }
  }
  return m;
}

void StagePlanner::note_max_context(const MatrixRows& m, int clear, int per_column) {
  std::vector<int> full(shapes_.size());
  for (std::size_t i = 0; i < shapes_.size(); ++i)
    full[i] = m.fixed[i] > 0 ? m.fixed[i] : min_rows(shapes_[i], m.width[i], capacity(), bits_);
  const int spc_full = static_cast<int>((capacity_ - att_buffers_) / slot_bytes_);
  const int most_rows = (clear - std::accumulate(full.begin(), full.end(), 0)) / per_column;
  max_context_ = static_cast<int>(std::min<std::int64_t>(
      max_context_, static_cast<std::int64_t>(std::max(0, most_rows)) * spc_full / users_));
}

LayerStage StagePlanner::layer(int l, int w, const Rect& block, Bytes budget_bytes,
                               const std::string& strategy, int kv_segment, bool upward) {
  const int bw = block.width, bh = block.height;
  const int att_width = std::min(bw, model_.num_kv_heads);
  const int per_column = static_cast<int>(ceil_div(model_.num_kv_heads, att_width));
  const MatrixRows m = matrix_rows(bw, budget_bytes);
  const std::uint64_t budget = budget_bytes.value;
  if (budget <= att_buffers_ + slot_bytes_)
    throw FitError("per-core budget below one KV slot and the attention buffers");
  const int spc = static_cast<int>((budget - att_buffers_) / slot_bytes_);
  const int min_segment = static_cast<int>(
      ceil_div(static_cast<std::uint64_t>(slots_), static_cast<std::uint64_t>(spc)));
  const std::vector<char> dead = dead_rows(block);
  const int clear = bh - static_cast<int>(std::count(dead.begin(), dead.end(), 1));
  const int att_rows_min = per_column * min_segment;
  const int needed = std::accumulate(m.rows.begin(), m.rows.end(), 0) + att_rows_min;
  if (needed > clear)
    throw FitError(fmt::format(
        "layer {} of {} needs {} rows of a {}-core-wide block for its weights and a KV cache "
        "of {} tokens x {} users, but its block ({}) has {} rows{}; use more wafers, fewer "
        "tokens or fewer block rows",
        l, model_.name, needed, bw, ctx_, users_, strategy, clear,
        clear < bh ? fmt::format(" free of defects (of {})", bh) : std::string()));
  std::vector<int> target = m.rows;
  const int kv_reserve = std::min(
      clear - needed,
      per_column *
          std::max(0, static_cast<int>(std::min<std::int64_t>(kv_segment, slots_)) - min_segment));
  share_rows(target, shapes_, clear - needed - kv_reserve);
  for (std::size_t i = 0; i < shapes_.size(); ++i)
    if (m.fixed[i] > 0) target[i] = m.fixed[i];  // overridden: exactly the rows asked for
  const int used_by_matrices = std::accumulate(target.begin(), target.end(), 0);
  const int segment = std::max(min_segment, static_cast<int>(std::min<std::int64_t>(
                                                slots_, (clear - used_by_matrices) / per_column)));
  note_max_context(m, clear, per_column);
  // Stack qkv, attention, o and the rest of the layer's matrices, each at
  // most one row of cores per output row (per gate/up pair when interleaved).
  auto cap = [&](std::size_t i, int r) { return std::min(r, shapes_[i].out / shapes_[i].granule); };
  // The stack: qkv, the attention segments, o, then shape i >= kFirstMlp.
  std::vector<int> heights{cap(kQkv, target[kQkv]), per_column * segment, cap(kO, target[kO])};
  std::vector<int> mins{cap(kQkv, m.rows[kQkv]), att_rows_min, cap(kO, m.rows[kO])};
  std::vector<int> steps{1, per_column, 1};
  for (std::size_t i = kFirstMlp; i < shapes_.size(); ++i) {
    heights.push_back(cap(i, target[i]));
    mins.push_back(cap(i, m.rows[i]));
    steps.push_back(1);
  }
  // Bottom to top: the same stack in reverse order from the top.
  if (upward)
    for (std::vector<int>* v : {&heights, &mins, &steps}) std::reverse(v->begin(), v->end());
  std::vector<int> y = stack_shrinking(
      block, dead, heights, mins, steps,
      fmt::format("layer {} of {}: the dead cores in its block ({} x {} at ({}, {})) leave no "
                  "contiguous rows for its matrices and KV cache",
                  l, model_.name, bw, bh, block.x0, block.y0));
  if (upward)
    for (std::vector<int>* v : {&heights, &y}) std::reverse(v->begin(), v->end());
  return assemble_layer(l, w, block, m, y, heights, per_column, upward);
}

LayerStage StagePlanner::assemble_layer(int l, int w, const Rect& block, const MatrixRows& m,
                                        const std::vector<int>& y, const std::vector<int>& heights,
                                        int per_column, bool upward) const {
  const int segment = heights[1] / per_column;
  LayerStage st;
  st.layer = l;
  st.wafer = w;
  st.strip = block;
  auto matrix = [&](std::size_t shape, int y0, int h) {
    MatrixShape sh = shapes_[shape];
    sh.name = fmt::format("layer {} {}", l, sh.name);
    MatrixPlacement mp =
        make_matrix(sh, block.x0, y0, m.width[shape], h,
                    override_of(shapes_[shape].kind).reduction.value_or(req_.reduction),
                    groups_of(shapes_[shape].kind));
    mp.wafer = w;
    mp.upward = upward;
    return mp;
  };
  // Stack position 0 is qkv, 1 the attention segments, 2 o, i + 1 shape i.
  st.qkv = matrix(kQkv, y[0], heights[0]);
  st.attention.wafer = w;
  // Its columns: per_column kv heads a column (as a placement file says them).
  st.attention.rect =
      Rect{block.x0, y[1], static_cast<int>(ceil_div(model_.num_kv_heads, per_column)),
           per_column * segment};
  st.attention.num_kv_heads = model_.num_kv_heads;
  st.attention.segment_length = segment;
  st.attention.segments_per_column = per_column;
  st.attention.head_dim = model_.head_dim;
  st.attention.reduction = override_of(MatrixKind::attention).reduction.value_or(req_.reduction);
  st.attention.reduction_groups = st.attention.reduction == fabric::ReductionScheme::k_tree
                                      ? groups_of(MatrixKind::attention)
                                      : 0;
  st.attention.max_positions_per_core = static_cast<int>(
      ceil_div(static_cast<std::uint64_t>(slots_), static_cast<std::uint64_t>(segment)));
  st.attention.context = ctx_;
  st.attention.users = users_;
  st.o = matrix(kO, y[2], heights[2]);
  auto rest = [&](std::size_t i) { return matrix(i, y[i + 1], heights[i + 1]); };
  if (model_.is_moe()) {
    st.router = rest(kFirstMlp);
    for (int e = 0; e < model_.num_experts; ++e) {
      ExpertPlacement ep;
      // Rows interleave gate and up: 2i = gate i, 2i+1 = up i (granule 2).
      ep.gate_up = rest(kFirstMlp + 1 + 2 * static_cast<std::size_t>(e));
      ep.down = rest(kFirstMlp + 2 + 2 * static_cast<std::size_t>(e));
      st.experts.push_back(std::move(ep));
    }
  } else {
    // SwiGLU: rows interleave gate and up (granule 2); gpt2: plain up rows.
    st.gate_up = rest(kFirstMlp);
    st.down = rest(kFirstMlp + 1);
  }
  return st;
}

// A matrix over the region's corner: a transposed one has its output rows
// along the columns, a plain one along the rows; never more cores in a
// direction than the matrix has rows (or granules) and columns there.
MatrixPlacement StagePlanner::region_matrix(std::size_t shape, int l, int w, const Rect& region,
                                            bool transposed) const {
  const MatrixShape& sh = shapes_[shape];
  MatrixPlacement mp;
  mp.name = fmt::format("layer {} {}", l, sh.name);
  mp.wafer = w;
  mp.out_features = sh.out;
  mp.in_features = sh.in;
  mp.row_granule = sh.granule;
  mp.transposed = transposed;
  mp.reduction = override_of(sh.kind).reduction.value_or(req_.reduction);
  mp.reduction_groups = mp.reduction == fabric::ReductionScheme::k_tree ? groups_of(sh.kind) : 0;
  const int out_cores = std::min(transposed ? region.width : region.height, sh.out / sh.granule);
  const int in_cores = std::min(transposed ? region.height : region.width, sh.in);
  mp.rect = transposed ? Rect{region.x0, region.y0, out_cores, in_cores}
                       : Rect{region.x0, region.y0, in_cores, out_cores};
  return mp;
}

// The KV cache over a region: kv heads side by side, each on c columns (its
// head dimensions split over them) and every row (its positions
// round-robin); on a region narrower than the kv heads, heads stack in the
// columns.
AttentionPlacement StagePlanner::region_attention(int l, int w, const Rect& region,
                                                  const std::string& strategy) const {
  const int W = region.width, H = region.height;
  const int kvh = model_.num_kv_heads, hd = model_.head_dim;
  AttentionPlacement a;
  a.wafer = w;
  a.num_kv_heads = kvh;
  a.head_dim = hd;
  a.columns_per_head = W >= kvh ? std::min(hd, W / kvh) : 1;
  a.segments_per_column = W >= kvh ? 1 : static_cast<int>(ceil_div(kvh, W));
  a.segment_length = H / a.segments_per_column;
  if (a.segment_length < 1)
    throw FitError(fmt::format("layer {} of {}: its {} x {} region ({}) cannot hold {} kv heads", l,
                               model_.name, W, H, strategy, kvh));
  a.rect = Rect{region.x0, region.y0,
                static_cast<int>(ceil_div(kvh, a.segments_per_column)) * a.columns_per_head,
                a.segments_per_column * a.segment_length};
  a.reduction = override_of(MatrixKind::attention).reduction.value_or(req_.reduction);
  a.reduction_groups =
      a.reduction == fabric::ReductionScheme::k_tree ? groups_of(MatrixKind::attention) : 0;
  a.max_positions_per_core = static_cast<int>(
      ceil_div(static_cast<std::uint64_t>(slots_), static_cast<std::uint64_t>(a.segment_length)));
  a.context = ctx_;
  a.users = users_;
  return a;
}

// The fullest core's bytes for a whole-region layer against the budget:
// first a bound (the largest tile of every matrix, the largest KV share,
// the largest root's gains and biases of every matrix, per layer sharing the
// region, and one scratch area), which errs high and
// so passes most layers at once; where it fails, every core of the region
// counted as the allocator counts it decides (region_fullest_core). (A
// whole-region placement's longest context is its final layout's exact
// figure: plan_placement, layout_max_context.)
void StagePlanner::check_region_fit(const LayerStage& st, int sharing, Bytes budget,
                                    const std::string& strategy) {
  const AttentionPlacement& a = st.attention;
  std::uint64_t matrices = 0;
  for (const MatrixPlacement* m : st.matrices())
    matrices += ceil_div(m->max_tile_elements() * static_cast<std::uint64_t>(bits_), 8);
  // What the roots hold besides their tiles (for_each_allocation): the
  // norms' gains on O's, each matrix's bias on its own, qwen3's qk-norm gains
  // on qkv's first; counted as if every matrix's fullest root were one core.
  // Each allocation rounds up to whole bytes on its own.
  const auto root_bytes = [&](const MatrixPlacement& m, int per_row) {
    return ceil_div(m.max_tile_rows() * static_cast<std::uint64_t>(per_row * bits_), 8);
  };
  matrices += root_bytes(st.o, 2 * (model_.is_gpt2() ? 2 : 1));
  if (model_.has_o_bias()) matrices += root_bytes(st.o, 1);
  if (model_.has_qkv_bias()) matrices += root_bytes(st.qkv, 1);
  if (model_.is_gpt2()) matrices += root_bytes(st.gate_up, 1) + root_bytes(st.down, 1);
  if (model_.has_qk_norm())
    matrices += ceil_div(2 * static_cast<std::uint64_t>(model_.head_dim * bits_), 8);
  const std::uint64_t dims = ceil_div(static_cast<std::uint64_t>(model_.head_dim),
                                      static_cast<std::uint64_t>(a.columns_per_head));
  const std::uint64_t slot = 2 * dims * static_cast<std::uint64_t>(bits_) / 8;
  const std::uint64_t kv = slot * static_cast<std::uint64_t>(a.max_positions_per_core);
  const std::uint64_t scratch = region_scratch_bytes(model_, st).value;
  const auto n = static_cast<std::uint64_t>(sharing);
  if ((matrices + kv) * n + scratch > budget.value) {
    const std::uint64_t fullest = region_fullest_core(st, sharing);
    if (fullest > budget.value)
      throw FitError(fmt::format(
          "layer {} of {} {} {} x {} region ({}){}: the fullest core would hold {} ({} of "
          "tiles, gains and KV cache ({} tokens x {} users) per layer{} and {} of scratch), "
          "but has {}; use more wafers, fewer tokens or users, or fewer weight bits",
          st.layer, model_.name, sharing > 1 ? "shares its" : "on its", st.strip.width,
          st.strip.height, strategy,
          sharing > 1 ? fmt::format(" with {} other layers", sharing - 1) : std::string(),
          human_bytes(Bytes{fullest}), human_bytes(Bytes{(fullest - scratch) / n}), ctx_, users_,
          sharing > 1 ? fmt::format(" x {} layers", sharing) : std::string(),
          human_bytes(Bytes{scratch}), human_bytes(budget)));
  }
}

// Every core of the layer's region counted as the allocator counts it
// (region_layer_bytes): `sharing` copies of the layer's own bytes and KV
// slots and the one scratch area; the most any core holds. The layers of
// every group on regions of one size give the same figure: it is kept.
std::uint64_t StagePlanner::region_fullest_core(const LayerStage& st, int sharing) {
  const std::tuple<int, int, int> key{st.strip.width, st.strip.height, sharing};
  if (const auto it = fullest_.find(key); it != fullest_.end()) return it->second;
  const RegionLayerBytes b = region_layer_bytes(model_, st, req_);
  const std::uint64_t scratch = region_scratch_bytes(model_, st).value;
  std::uint64_t most = 0;
  for (std::size_t c = 0; c < b.own.size(); ++c) most = std::max(most, b.own[c] + b.kv[c]);
  const std::uint64_t fullest = scratch + static_cast<std::uint64_t>(sharing) * most;
  fullest_.emplace(key, fullest);
  return fullest;
}

LayerStage StagePlanner::region_layer(int l, int w, const Rect& region, int sharing, Bytes budget,
                                      const std::string& strategy) {
  if (!defects_.clear(region))
    throw FitError(fmt::format(
        "{} spans every GEMV over its whole region, but layer {}'s region ({} x {} at ({}, {})) "
        "holds dead cores; the strategy shrinks regions to their largest defect-free rectangle "
        "before planning them",
        strategy, l, region.width, region.height, region.x0, region.y0));
  LayerStage st = region_stage(l, w, region, strategy);
  check_region_fit(st, sharing, budget, strategy);
  return st;
}

LayerStage StagePlanner::region_stage(int l, int w, const Rect& region,
                                      const std::string& strategy) const {
  LayerStage st;
  st.layer = l;
  st.wafer = w;
  st.strip = region;
  st.whole_region = true;
  st.qkv = region_matrix(kQkv, l, w, region, true);
  st.o = region_matrix(kO, l, w, region, false);
  if (model_.is_moe()) {
    // The router and every expert over the whole region too (their tiles
    // share its cores' SRAM): the router and each expert's gate_up
    // transposed, reading the residual's column as qkv does; each down plain,
    // writing its output down that column, where the outputs are combined.
    st.router = region_matrix(kFirstMlp, l, w, region, true);
    for (int e = 0; e < model_.num_experts; ++e) {
      ExpertPlacement ep;
      ep.gate_up =
          region_matrix(kFirstMlp + 1 + 2 * static_cast<std::size_t>(e), l, w, region, true);
      ep.down = region_matrix(kFirstMlp + 2 + 2 * static_cast<std::size_t>(e), l, w, region, false);
      st.experts.push_back(std::move(ep));
    }
  } else {
    st.gate_up = region_matrix(kFirstMlp, l, w, region, true);
    st.down = region_matrix(kFirstMlp + 1, l, w, region, false);
  }
  st.attention = region_attention(l, w, region, strategy);
  return st;
}

int StagePlanner::head_min_rows(int width, Bytes budget) const {
  const MatrixShape lm{"lm_head", model_.vocab_size, model_.hidden_size};
  const int r = min_rows(lm, width, budget, bits_);
  const MatrixShape pos{"position_embedding", model_.max_position, model_.hidden_size};
  const int p = model_.is_gpt2() ? min_rows(pos, width, budget, bits_) : 0;
  return r < 0 || p < 0 ? -1 : r * (model_.tie_embeddings ? 1 : 2) + p;
}

HeadStage StagePlanner::head(int w, const Rect& strip, Bytes budget) {
  HeadStage head;
  head.wafer = w;
  head.strip = strip;
  head.tied = model_.tie_embeddings;
  const MatrixShape lm{"lm_head", model_.vocab_size, model_.hidden_size};
  const MatrixShape emb{"embedding", model_.vocab_size, model_.hidden_size};
  const MatrixShape pos{"position_embedding", model_.max_position, model_.hidden_size};
  const int lm_min = min_rows(lm, strip.width, budget, bits_);
  // gpt2's learned position embeddings take the fewest rows they fit in,
  // below the lm_head (and the embedding).
  const int pos_rows = model_.is_gpt2() ? min_rows(pos, strip.width, budget, bits_) : 0;
  const std::vector<char> dead = dead_rows(strip);
  const int clear = strip.height - static_cast<int>(std::count(dead.begin(), dead.end(), 1));
  const int avail = clear - pos_rows;
  if (lm_min < 0 || pos_rows < 0 || lm_min * (head.tied ? 1 : 2) > avail)
    throw FitError(fmt::format(
        "the {}-column head strip of {} cannot hold the {}x{} embedding/lm_head{}; use more "
        "wafers",
        strip.width, spec_.name, model_.vocab_size, model_.hidden_size,
        model_.is_gpt2() ? " and the position embeddings" : ""));
  std::vector<int> heights, mins;
  if (head.tied) {
    heights = {std::min(avail, model_.vocab_size)};
    mins = {lm_min};
  } else {
    const int lm_rows = std::min(std::max(lm_min, avail - lm_min), model_.vocab_size);
    heights = {lm_rows, std::min(avail - lm_rows, model_.vocab_size)};
    mins = {lm_min, lm_min};
  }
  if (pos_rows > 0) {
    heights.push_back(pos_rows);
    mins.push_back(pos_rows);
  }
  const std::vector<int> y = stack_shrinking(
      strip, dead, heights, mins, std::vector<int>(heights.size(), 1),
      fmt::format("the dead cores in the head strip ({} x {} at ({}, {})) leave no {} "
                  "contiguous rows for the lm_head",
                  strip.width, strip.height, strip.x0, strip.y0, lm_min));
  const fabric::ReductionScheme head_reduction =
      override_of(MatrixKind::lm_head).reduction.value_or(req_.reduction);
  const int head_groups = groups_of(MatrixKind::lm_head);
  head.lm_head =
      make_matrix(lm, strip.x0, y[0], strip.width, heights[0], head_reduction, head_groups);
  head.lm_head.wafer = w;
  head.embedding = head.tied ? head.lm_head
                             : make_matrix(emb, strip.x0, y[1], strip.width, heights[1],
                                           head_reduction, head_groups);
  head.embedding.wafer = w;
  if (!head.tied) head.embedding.name = "embedding";
  if (pos_rows > 0) {
    const std::size_t i = heights.size() - 1;
    head.position_embedding = make_matrix(pos, strip.x0, y[i], strip.width, heights[i],
                                          req_.reduction, req_.reduction_groups);
    head.position_embedding.wafer = w;
  }
  return head;
}

MatrixOverride StagePlanner::override_of(std::optional<MatrixKind> kind) const {
  if (!kind) return MatrixOverride{};
  const auto it = req_.matrices.find(*kind);
  return it == req_.matrices.end() ? MatrixOverride{} : it->second;
}

std::vector<char> StagePlanner::dead_rows(const Rect& r) const {
  std::vector<char> dead(static_cast<std::size_t>(std::max(0, r.height)), 0);
  if (defects_.dead_count() == 0) return dead;
  for (int y = 0; y < r.height; ++y)
    for (int x = r.x0; x < r.x0 + r.width; ++x)
      if (defects_.dead(Coord{x, r.y0 + y})) {
        dead[static_cast<std::size_t>(y)] = 1;
        break;
      }
  return dead;
}

}  // namespace wafersim::sim
