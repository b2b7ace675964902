#include "sim/placement/placement.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>

#include "fabric/defects.hpp"
#include "sim/placement/placement_cost.hpp"

namespace wafersim::sim {

using fabric::FitError;
using fabric::Rect;
using fabric::SramUse;

// Measured on Llama-3.1-8B / WSE-3 (docs/modelling.md, placement section).
const double kDefaultAnnealLatencyWeight = 1000.0;

std::uint64_t MatrixPlacement::max_tile_elements() const {
  const std::uint64_t rows =
      row_granule * ceil_div(static_cast<std::uint64_t>(out_features / row_granule),
                             static_cast<std::uint64_t>(p()));
  const std::uint64_t cols =
      ceil_div(static_cast<std::uint64_t>(in_features), static_cast<std::uint64_t>(q()));
  return rows * cols;
}

std::vector<const MatrixPlacement*> LayerStage::matrices() const {
  std::vector<const MatrixPlacement*> all;
  for (const MatrixPlacement* m : {&qkv, &o, &gate_up, &down, &router})
    if (m->p() > 0) all.push_back(m);
  for (const ExpertPlacement& e : experts) all.push_back(&e.gate_up), all.push_back(&e.down);
  return all;
}

std::vector<std::string> placement_strategies() {
  return {"layer-rectangles", "serpentine", "short-path", "sram-balanced", "anneal"};
}

namespace {

std::string human_bytes(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

// What one strip needs: rows of cores for each of its blocks.
struct MatrixShape {
  std::string name;
  int out = 0, in = 0;
  int granule = 1;  // output rows are split in whole groups of this many
  // Bytes per output row its root core holds besides the tile (O's roots
  // keep both RMSNorm gains of their rows, where the residual stream lives).
  int root_bytes_per_row = 0;
};

// Fewest rows of cores (with q = min(width, in) columns) so that every tile,
// its fp32 input chunk and its fp32 partial sums fit one core's SRAM.
int min_rows(const MatrixShape& m, int width, std::uint64_t capacity, int weight_bits) {
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

MatrixPlacement make_matrix(const MatrixShape& m, int x0, int y0, int width, int rows,
                            fabric::ReductionScheme reduction) {
  MatrixPlacement mp;
  mp.name = m.name;
  mp.out_features = m.out;
  mp.in_features = m.in;
  mp.rect = Rect{x0, y0, std::min(width, m.in), std::min(rows, m.out / m.granule)};
  mp.reduction = reduction;
  mp.row_granule = m.granule;
  return mp;
}

// Every core of a matrix: its weight tile and its buffers (the input chunk
// and the partial sums, fp32).
void visit_matrix(int wafer, const MatrixPlacement& mp, int weight_bits,
                  const std::function<void(const CoreAllocation&)>& visit) {
  const std::string tile = mp.name + " weight tile", buffers = mp.name + " buffers";
  for (int pi = 0; pi < mp.p(); ++pi)
    for (int qi = 0; qi < mp.q(); ++qi) {
      const std::uint64_t rows =
          static_cast<std::uint64_t>(mp.row_begin(pi + 1) - mp.row_begin(pi));
      const std::uint64_t cols =
          static_cast<std::uint64_t>(mp.col_begin(qi + 1) - mp.col_begin(qi));
      const Coord core = mp.core(pi, qi);
      visit({wafer, core, Bytes{ceil_div(rows * cols * static_cast<std::uint64_t>(weight_bits), 8)},
             SramUse::weights, tile});
      visit({wafer, core, Bytes{(rows + cols) * 4}, SramUse::activations, buffers});
    }
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

}  // namespace

Placement place(const models::ModelConfig& model, fabric::Fabric& fab,
                const PlacementRequest& req) {
  fabric::Fabric* one = &fab;
  return place(model, std::span<fabric::Fabric* const>(&one, 1), req);
}

fabric::Rect usable_area(const fabric::WaferSpec& spec, const Halo& halo) {
  const int west = (halo.columns + 1) / 2, north = (halo.rows + 1) / 2;
  return Rect{west, north, spec.mesh_width - halo.columns, spec.mesh_height - halo.rows};
}

namespace {

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

// Plans one wafer's (or one candidate's) stages: the layout of a layer in a
// block and of the head in a strip, for a per-core byte budget.
class StagePlanner {
 public:
  StagePlanner(const models::ModelConfig& model, const fabric::WaferSpec& spec,
               const PlacementRequest& req)
      : model_(model), spec_(spec), req_(req), defects_(spec) {
    bits_ = req.weight_bits;
    capacity_ = spec.sram_per_core.value;
    users_ = std::max(1, req.users);
    ctx_ = std::max(1, req.context_tokens);
    slots_ = static_cast<std::int64_t>(ctx_) * users_;
    // The matrices of a layer, top to bottom (the attention segments sit
    // between qkv and o):
    //   SwiGLU (llama family)  qkv, o, gate_up (interleaved pairs), down
    //   GELU (gpt2)            qkv, o, up, down
    //   MoE (mixtral)          qkv, o, router, then gate_up and down of each expert
    shapes_ = {
        {"qkv", model.q_dim() + 2 * model.kv_dim(), model.hidden_size},
        // O's roots hold the residual stream and the norms' gains (and gpt2's
        // LayerNorm biases) of their rows.
        {"o", model.hidden_size, model.q_dim(), 1,
         2 * (model.is_gpt2() ? 2 : 1) * req.weight_bits / 8},
    };
    if (model.is_moe()) {
      shapes_.push_back({"router", model.num_experts, model.hidden_size});
      for (int e = 0; e < model.num_experts; ++e) {
        shapes_.push_back({fmt::format("expert {} gate_up", e), 2 * model.intermediate_size,
                           model.hidden_size, 2});
        shapes_.push_back(
            {fmt::format("expert {} down", e), model.hidden_size, model.intermediate_size});
      }
    } else if (model.is_gpt2()) {
      shapes_.push_back({"up", model.intermediate_size, model.hidden_size});
      shapes_.push_back({"down", model.hidden_size, model.intermediate_size});
    } else {
      shapes_.push_back({"gate_up", 2 * model.intermediate_size, model.hidden_size, 2});
      shapes_.push_back({"down", model.hidden_size, model.intermediate_size});
    }
    const int hd = model.head_dim;
    group_ = model.num_heads / model.num_kv_heads;
    slot_bytes_ = 2 * static_cast<std::uint64_t>(hd) * bits_ / 8;
    att_buffers_ = static_cast<std::uint64_t>(group_) * (2 * hd + 2) * 4;
    if (capacity_ <= att_buffers_ + slot_bytes_)
      throw FitError(
          fmt::format("one core ({}) cannot hold a single KV position of {} plus attention buffers",
                      human_bytes(capacity_), model.name));
  }

  std::uint64_t capacity() const { return capacity_; }
  // The smallest budget worth trying: one KV slot plus attention buffers.
  std::uint64_t min_budget() const { return att_buffers_ + slot_bytes_ + 1; }
  const fabric::DefectMap& defects() const { return defects_; }

  // Longest context per user the last planned layers could hold (at full capacity).
  int max_context = INT_MAX;

  // kv_segment > 0: the KV segments get at least this many cores per kv
  // head (as far as the block's spare rows allow) before the matrices share
  // the spare rows (anneal searches over it: longer segments, less attention
  // per core, fewer rows per matrix).
  // upward: stacked bottom to top (LayerStage::upward).
  LayerStage layer(int l, int w, const Rect& block, std::uint64_t budget,
                   const std::string& strategy, int kv_segment = 0, bool upward = false) {
    const int bw = block.width, bh = block.height;
    const int att_width = std::min(bw, model_.num_kv_heads);
    const int per_column = static_cast<int>(ceil_div(model_.num_kv_heads, att_width));
    std::vector<int> rows(shapes_.size()), width(shapes_.size()), fixed(shapes_.size(), 0);
    for (std::size_t i = 0; i < shapes_.size(); ++i) {
      const MatrixOverride ov = override_of(shapes_[i].name);
      width[i] = ov.columns > 0 ? std::min(ov.columns, bw) : bw;
      rows[i] = min_rows(shapes_[i], width[i], budget, bits_);
      if (rows[i] < 0)
        throw FitError(fmt::format(
            "a {}-column block cannot hold even one row of the {} matrix of {} on {}; use more "
            "wafers or fewer block rows",
            width[i], shapes_[i].name, model_.name, spec_.name));
      if (ov.rows > 0) {
        if (ov.rows < rows[i])
          throw FitError(fmt::format(
              "placement.matrices.{}.rows is {}, but its tiles need at least {} rows of {} cores "
              "to fit a core's SRAM",
              shapes_[i].name, ov.rows, rows[i], width[i]));
        fixed[i] = rows[i] = std::min(ov.rows, shapes_[i].out / shapes_[i].granule);
      }
    }
    if (budget <= att_buffers_ + slot_bytes_)
      throw FitError("per-core budget below one KV slot and the attention buffers");
    const int spc = static_cast<int>((budget - att_buffers_) / slot_bytes_);
    const int min_segment = static_cast<int>(
        ceil_div(static_cast<std::uint64_t>(slots_), static_cast<std::uint64_t>(spc)));
    const std::vector<char> dead = dead_rows(block);
    const int clear = bh - static_cast<int>(std::count(dead.begin(), dead.end(), 1));
    const int att_rows_min = per_column * min_segment;
    const int needed = std::accumulate(rows.begin(), rows.end(), 0) + att_rows_min;
    if (needed > clear)
      throw FitError(fmt::format(
          "layer {} of {} needs {} rows of a {}-core-wide block for its weights and a KV cache "
          "of {} tokens x {} users, but its block ({}) has {} rows{}; use more wafers, fewer "
          "tokens or fewer block rows",
          l, model_.name, needed, bw, ctx_, users_, strategy, clear,
          clear < bh ? fmt::format(" free of defects (of {})", bh) : std::string()));
    std::vector<int> target = rows;
    const int kv_reserve = std::min(
        clear - needed,
        per_column * std::max(0, static_cast<int>(std::min<std::int64_t>(kv_segment, slots_)) -
                                     min_segment));
    share_rows(target, shapes_, clear - needed - kv_reserve);
    for (std::size_t i = 0; i < shapes_.size(); ++i)
      if (fixed[i] > 0) target[i] = fixed[i];  // overridden: exactly the rows asked for
    const int used_by_matrices = std::accumulate(target.begin(), target.end(), 0);
    int segment = std::max(min_segment, static_cast<int>(std::min<std::int64_t>(
                                            slots_, (clear - used_by_matrices) / per_column)));
    // The longest context this layout could cache at full capacity.
    {
      std::vector<int> full(shapes_.size());
      for (std::size_t i = 0; i < shapes_.size(); ++i)
        full[i] = fixed[i] > 0 ? fixed[i] : min_rows(shapes_[i], width[i], capacity_, bits_);
      const int spc_full = static_cast<int>((capacity_ - att_buffers_) / slot_bytes_);
      const int most_rows = (clear - std::accumulate(full.begin(), full.end(), 0)) / per_column;
      max_context = static_cast<int>(std::min<std::int64_t>(
          max_context, static_cast<std::int64_t>(std::max(0, most_rows)) * spc_full / users_));
    }
    // Stack qkv, attention, o and the rest of the layer's matrices, each at
    // most one row of cores per output row (per gate/up pair when interleaved).
    auto cap = [&](std::size_t i, int r) {
      return std::min(r, shapes_[i].out / shapes_[i].granule);
    };
    std::vector<int> heights{cap(0, target[0]), per_column * segment, cap(1, target[1])};
    std::vector<int> mins{cap(0, rows[0]), att_rows_min, cap(1, rows[1])};
    std::vector<int> steps{1, per_column, 1};
    for (std::size_t i = 2; i < shapes_.size(); ++i) {
      heights.push_back(cap(i, target[i]));
      mins.push_back(cap(i, rows[i]));
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
    segment = heights[1] / per_column;

    LayerStage st;
    st.layer = l;
    st.wafer = w;
    st.strip = block;
    auto matrix = [&](std::size_t shape, int y0, int h) {
      MatrixShape sh = shapes_[shape];
      sh.name = fmt::format("layer {} {}", l, sh.name);
      MatrixPlacement mp =
          make_matrix(sh, block.x0, y0, width[shape], h,
                      override_of(shapes_[shape].name).reduction.value_or(req_.reduction));
      mp.wafer = w;
      mp.upward = upward;
      return mp;
    };
    st.qkv = matrix(0, y[0], heights[0]);
    st.attention.wafer = w;
    st.attention.rect = Rect{block.x0, y[1], att_width, per_column * segment};
    st.attention.num_kv_heads = model_.num_kv_heads;
    st.attention.segment_length = segment;
    st.attention.segments_per_column = per_column;
    st.attention.reduction = override_of("attention").reduction.value_or(req_.reduction);
    st.attention.max_positions_per_core = static_cast<int>(
        ceil_div(static_cast<std::uint64_t>(slots_), static_cast<std::uint64_t>(segment)));
    st.attention.context = ctx_;
    st.attention.users = users_;
    st.o = matrix(1, y[2], heights[2]);
    // Shape i >= 2 sits at y[i + 1] (the attention segments are element 1).
    auto rest = [&](std::size_t i) { return matrix(i, y[i + 1], heights[i + 1]); };
    if (model_.is_moe()) {
      st.router = rest(2);
      for (int e = 0; e < model_.num_experts; ++e) {
        ExpertPlacement ep;
        // Rows interleave gate and up: 2i = gate i, 2i+1 = up i (granule 2).
        ep.gate_up = rest(3 + 2 * static_cast<std::size_t>(e));
        ep.down = rest(4 + 2 * static_cast<std::size_t>(e));
        st.experts.push_back(std::move(ep));
      }
    } else {
      // SwiGLU: rows interleave gate and up (granule 2); gpt2: plain up rows.
      st.gate_up = rest(2);
      st.down = rest(3);
    }
    return st;
  }

  // Fewest rows of cores the head needs in a strip `width` wide at `budget`.
  int head_min_rows(int width, std::uint64_t budget) const {
    const MatrixShape lm{"lm_head", model_.vocab_size, model_.hidden_size};
    const int r = min_rows(lm, width, budget, bits_);
    const MatrixShape pos{"position_embedding", model_.max_position, model_.hidden_size};
    const int p = model_.is_gpt2() ? min_rows(pos, width, budget, bits_) : 0;
    return r < 0 || p < 0 ? -1 : r * (model_.tie_embeddings ? 1 : 2) + p;
  }

  HeadStage head(int w, const Rect& strip, std::uint64_t budget) {
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
        override_of("lm_head").reduction.value_or(req_.reduction);
    head.lm_head = make_matrix(lm, strip.x0, y[0], strip.width, heights[0], head_reduction);
    head.lm_head.wafer = w;
    head.embedding =
        head.tied ? head.lm_head
                  : make_matrix(emb, strip.x0, y[1], strip.width, heights[1], head_reduction);
    head.embedding.wafer = w;
    if (!head.tied) head.embedding.name = "embedding";
    if (pos_rows > 0) {
      const std::size_t i = heights.size() - 1;
      head.position_embedding =
          make_matrix(pos, strip.x0, y[i], strip.width, heights[i], req_.reduction);
      head.position_embedding.wafer = w;
    }
    return head;
  }

 private:
  MatrixOverride override_of(const std::string& kind) const {
    const auto it = req_.matrices.find(kind);
    return it == req_.matrices.end() ? MatrixOverride{} : it->second;
  }

  // Per row of `r`: 1 when a core of that row (within r's columns) is dead.
  std::vector<char> dead_rows(const Rect& r) const {
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

  const models::ModelConfig& model_;
  const fabric::WaferSpec& spec_;
  const PlacementRequest& req_;
  fabric::DefectMap defects_;
  int bits_ = 16;
  std::uint64_t capacity_ = 0;
  int users_ = 1, ctx_ = 1;
  std::int64_t slots_ = 1;
  std::vector<MatrixShape> shapes_;
  int group_ = 1;
  std::uint64_t slot_bytes_ = 0, att_buffers_ = 0;
};

// A region plan for one wafer: a block per layer (in layer order) and the head strip.
struct RegionPlan {
  std::vector<Rect> blocks;
  Rect head;
  Rect rest;  // the area left to the layers
  std::string note;
  int kv_segment = 0;  // StagePlanner::layer's KV segment floor (0: the matrices first)
  // Each layer stacked top-down or bottom-up, whichever brings its input
  // nearer the previous layer's output (all strategies but anneal, whose
  // search prices its slots top-down).
  bool turn_layers = true;
};

// Head strip width (a full-height strip on the west of `u`) as wide as its share of the bytes.
int head_share(int extent, std::uint64_t head_bytes, std::uint64_t layer_bytes, int k) {
  const double total = static_cast<double>(layer_bytes) * k + static_cast<double>(head_bytes);
  const int w =
      std::max(1, static_cast<int>(std::floor(extent * static_cast<double>(head_bytes) / total)));
  return std::min(w, extent - 1);
}

// A boustrophedon of k blocks: `rows` rows of ceil(k/rows) blocks inside
// `area`, snaking left to right then right to left; with `by_columns` the
// same transposed (down the first column, up the second, ...).
std::vector<Rect> snake_blocks(const Rect& area, int k, int rows, bool by_columns) {
  const int R = std::min(std::max(1, rows), k);
  const int C = static_cast<int>(ceil_div(k, R));
  std::vector<Rect> blocks;
  const int along = by_columns ? area.height : area.width;  // the snake's direction
  const int across = by_columns ? area.width : area.height;
  const int block_a = along / C, block_c = across / R;
  if (block_a < 1 || block_c < 1) return blocks;
  for (int i = 0; i < k; ++i) {
    const int r = i / C, c = i % C;
    const int pos = r % 2 == 0 ? c : C - 1 - c;
    const int ext_c = r == R - 1 ? across - r * block_c : block_c;
    if (by_columns)
      blocks.push_back(Rect{area.x0 + r * block_c, area.y0 + pos * block_a, ext_c, block_a});
    else
      blocks.push_back(Rect{area.x0 + pos * block_a, area.y0 + r * block_c, block_a, ext_c});
  }
  return blocks;
}

// All slots of a rows x cols grid (row-major), for annealing.
std::vector<Rect> grid_slots(const Rect& area, int rows, int cols, bool by_columns) {
  const int R = rows, C = cols;
  std::vector<Rect> slots;
  const int along = by_columns ? area.height : area.width;
  const int across = by_columns ? area.width : area.height;
  const int block_a = along / C, block_c = across / R;
  if (block_a < 1 || block_c < 1) return slots;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const int ext_c = r == R - 1 ? across - r * block_c : block_c;
      if (by_columns)
        slots.push_back(Rect{area.x0 + r * block_c, area.y0 + c * block_a, ext_c, block_a});
      else
        slots.push_back(Rect{area.x0 + c * block_a, area.y0 + r * block_c, block_a, ext_c});
    }
  return slots;
}

// A deterministic generator whose whole definition is here (SplitMix64), so
// annealing gives the same placement on every platform for one seed.
struct SeededDraws {
  std::uint64_t state;
  std::uint64_t next() {
    state += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

// The layer dataflow of one wafer as a graph: vertices are stages (its
// layers, then the head when it holds it), edges carry the bytes one token
// moves between them (the hidden state in fp32; the head's embedding row
// back to the first layer when both are on this wafer). Hand-overs to and
// from other wafers are costs of the first and last vertices (their legs to
// the east edge and from the west edge).
using Dataflow =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property,
                          boost::property<boost::edge_weight_t, double>>;

Dataflow layer_dataflow(int k, bool has_head, bool head_to_first, int hidden) {
  Dataflow g(static_cast<std::size_t>(k + (has_head ? 1 : 0)));
  const double bytes = 4.0 * hidden;
  for (int l = 0; l + 1 < k; ++l) boost::add_edge(l, l + 1, bytes, g);
  if (has_head && k > 0) {
    boost::add_edge(k - 1, k, bytes, g);
    if (head_to_first) boost::add_edge(k, 0, bytes, g);
  }
  return g;
}

}  // namespace

Placement plan_placement(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                         int n_wafers, const PlacementRequest& req) {
  const auto strategies = placement_strategies();
  if (std::find(strategies.begin(), strategies.end(), req.strategy) == strategies.end())
    throw std::invalid_argument("unknown placement strategy '" + req.strategy + "'");
  if (n_wafers < 1) throw std::invalid_argument("place: no wafers");
  const std::uint64_t capacity = spec.sram_per_core.value;
  const int bits = req.weight_bits;
  const int kv_bits = req.weight_bits;
  const Rect area = usable_area(spec, req.halo);
  if (area.width < 2 || area.height < 1)
    throw FitError(fmt::format("the halo ({} columns, {} rows) leaves no room on {} ({} x {})",
                               req.halo.columns, req.halo.rows, spec.name, spec.mesh_width,
                               spec.mesh_height));

  // Whole-model check first, so the common failure reads in model terms.
  const std::uint64_t weight_bytes =
      ceil_div(model.parameter_count() * static_cast<std::uint64_t>(bits), 8);
  const int users = std::max(1, req.users);
  const std::uint64_t kv_bytes = static_cast<std::uint64_t>(model.num_layers) *
                                 static_cast<std::uint64_t>(req.context_tokens) * users * 2 *
                                 static_cast<std::uint64_t>(model.kv_dim()) * kv_bits / 8;
  const std::uint64_t system_capacity =
      spec.sram_capacity().value * static_cast<std::uint64_t>(n_wafers);
  if (weight_bytes + kv_bytes > system_capacity)
    throw FitError(fmt::format(
        "{} needs {} of SRAM ({} of weights for {} parameters at {} bits + {} of KV cache for {} "
        "tokens x {} users), but {} x {} has {} ({} cores x {} each); use a larger wafer or more "
        "wafers (at least {})",
        model.name, human_bytes(weight_bytes + kv_bytes), human_bytes(weight_bytes),
        model.parameter_count(), bits, human_bytes(kv_bytes), req.context_tokens, users, n_wafers,
        spec.name, human_bytes(system_capacity), spec.core_count(), human_bytes(capacity),
        ceil_div(weight_bytes + kv_bytes, spec.sram_capacity().value)));
  if (n_wafers > model.num_layers)
    throw FitError(
        fmt::format("{} wafers for {} layers: layer-rectangles puts at least one layer "
                    "on every wafer; use at most {} wafers",
                    n_wafers, model.num_layers, model.num_layers));

  const bool tied = model.tie_embeddings;
  const std::uint64_t layer_bytes = ceil_div(model.layer_parameters() * bits, 8) +
                                    kv_bytes / static_cast<std::uint64_t>(model.num_layers);
  const std::uint64_t head_bytes = ceil_div(
      (tied ? 1u : 2u) * static_cast<std::uint64_t>(model.vocab_size) * model.hidden_size * bits,
      8);

  Placement pl;
  pl.strategy = req.strategy;
  pl.context_tokens = req.context_tokens;
  pl.users = users;
  pl.wafers = n_wafers;
  pl.max_context_tokens = model.max_position;
  StagePlanner planner(model, spec, req);

  std::string last_fit_error;  // why the last rejected candidate did not fit
  // Plans a wafer's stages from a region plan at a per-core budget.
  auto build = [&](const RegionPlan& plan, int w, int l_begin, bool has_head, std::uint64_t budget,
                   Placement& out) {
    for (std::size_t i = 0; i < plan.blocks.size(); ++i) {
      const int l = l_begin + static_cast<int>(i);
      LayerStage st =
          planner.layer(l, w, plan.blocks[i], budget, req.strategy, plan.kv_segment, false);
      // The layer before: this wafer's last, else the previous wafer's.
      const LayerStage* before = !out.layers.empty()  ? &out.layers.back()
                                 : !pl.layers.empty() ? &pl.layers.back()
                                                      : nullptr;
      if (plan.turn_layers && before) {
        try {
          LayerStage up =
              planner.layer(l, w, plan.blocks[i], budget, req.strategy, plan.kv_segment, true);
          const Layout from = layer_output_layout(*before);
          if (move_hop_bytes(from, layer_input_layout(up), spec.mesh_width) <
              move_hop_bytes(from, layer_input_layout(st), spec.mesh_width))
            st = std::move(up);
        } catch (const FitError&) {
          // Dead rows can leave room for the stack one way only: keep it top-down.
        }
      }
      out.layers.push_back(std::move(st));
    }
    if (has_head) out.head = planner.head(w, plan.head, budget);
  };
  // Closed-form cost of a candidate plan for one wafer (its stages alone).
  auto candidate_cost = [&](const RegionPlan& plan, int w, int l_begin, bool has_head,
                            double& cost) {
    Placement trial;
    try {
      build(plan, w, l_begin, has_head, capacity, trial);
    } catch (const FitError& e) {
      last_fit_error = e.what();
      return false;
    }
    cost = 0.0;
    for (std::size_t i = 0; i < trial.layers.size(); ++i) {
      cost += layer_hop_bytes(model, trial.layers[i]);
      if (i + 1 < trial.layers.size())
        cost += move_hop_bytes(layer_output_layout(trial.layers[i]),
                               layer_input_layout(trial.layers[i + 1]));
    }
    if (has_head) {
      cost += head_hop_bytes(model, trial.head);
      cost += move_hop_bytes(layer_output_layout(trial.layers.back()),
                             head_input_layout(model, trial.head));
      cost += n_wafers == 1
                  ? move_hop_bytes(embedding_row_layout(trial.head),
                                   layer_input_layout(trial.layers.front()))
                  : to_east_edge_hop_bytes(embedding_row_layout(trial.head), spec.mesh_width);
    } else {
      cost += to_east_edge_hop_bytes(layer_output_layout(trial.layers.back()), spec.mesh_width);
    }
    if (n_wafers > 1) cost += from_west_edge_hop_bytes(layer_input_layout(trial.layers.front()));
    return true;
  };
  // A snake candidate: the head strip on the west (row snakes) or across the
  // north (column snakes) of the area, layers in the rest.
  auto snake_plan = [&](int k, bool has_head, int rows, bool by_columns) {
    RegionPlan p;
    Rect rest = area;
    if (has_head) {
      if (by_columns) {
        const int hh = head_share(area.height, head_bytes, layer_bytes, k);
        p.head = Rect{area.x0, area.y0, area.width, hh};
        rest = Rect{area.x0, area.y0 + hh, area.width, area.height - hh};
      } else {
        const int hw = head_share(area.width, head_bytes, layer_bytes, k);
        p.head = Rect{area.x0, area.y0, hw, area.height};
        rest = Rect{area.x0 + hw, area.y0, area.width - hw, area.height};
      }
    }
    p.rest = rest;
    p.blocks = snake_blocks(rest, k, rows, by_columns);
    return p;
  };

  // Simulated annealing of the assignment of layers to the slots of a grid
  // (every grid of 1..16 block rows or columns, head on the west or the
  // north), minimising the closed-form hop-bytes per token: the cost inside
  // each slot (depends on the slot's shape) plus, per edge of the dataflow
  // graph, its bytes x the per-byte hop distance between the two slots'
  // ports (output of one stage to input of the next). The best over grids wins.
  const LatencyModel lat_model{spec, bits, std::max(1, req.context_tokens)};
  // KV segment floors tried per grid: the matrices first (0), then segments
  // of 2, 4, 8 and 16 cores when latency counts (traffic alone never gains
  // from them: a longer segment only adds multicast and reduction hops).
  const std::vector<int> kv_segments =
      req.anneal.latency_weight > 0 ? std::vector<int>{0, 2, 4, 8, 16} : std::vector<int>{0};
  auto anneal = [&](int k, bool has_head, int l_begin, int w) {
    const Dataflow graph = layer_dataflow(k, has_head, n_wafers == 1, model.hidden_size);
    const auto weight = boost::get(boost::edge_weight, graph);
    RegionPlan best_plan;
    best_plan.turn_layers = false;  // its slots are priced top-down
    double best_cost = std::numeric_limits<double>::infinity();
    std::uint64_t candidate = 0;
    for (const bool by_columns : {false, true})
      for (int rows = 1; rows <= std::min(k, 16); ++rows)
        for (int cols = static_cast<int>(ceil_div(k, rows));
             cols == static_cast<int>(ceil_div(k, rows)) ||
             rows * cols <= k + static_cast<int>(req.anneal.spare_slots * k);
             ++cols)
          for (const int kv_segment : kv_segments) {
            ++candidate;
            const RegionPlan base = snake_plan(k, has_head, rows, by_columns);
            const std::vector<Rect> slots = grid_slots(base.rest, rows, cols, by_columns);
            if (slots.empty()) continue;
            const int S = static_cast<int>(slots.size());
            std::vector<LayerStage> stage(static_cast<std::size_t>(S));
            HeadStage head;
            try {
              for (int i = 0; i < S; ++i)
                stage[static_cast<std::size_t>(i)] =
                    planner.layer(l_begin, w, slots[static_cast<std::size_t>(i)], capacity,
                                  req.strategy, kv_segment);
              if (has_head) head = planner.head(w, base.head, capacity);
            } catch (const FitError& e) {
              last_fit_error = e.what();
              continue;
            }
            const int N = S + (has_head ? 1 : 0);
            std::vector<double> intra(static_cast<std::size_t>(N), 0.0);
            std::vector<Layout> in(static_cast<std::size_t>(N)), out(static_cast<std::size_t>(N));
            std::uint64_t core_max = 0;  // largest per-core bytes of the grid's stages
            for (int i = 0; i < S; ++i) {
              const LayerStage& st = stage[static_cast<std::size_t>(i)];
              intra[static_cast<std::size_t>(i)] = layer_hop_bytes(model, st);
              in[static_cast<std::size_t>(i)] = layer_input_layout(st);
              out[static_cast<std::size_t>(i)] = layer_output_layout(st);
              for (const MatrixPlacement* m : st.matrices())
                core_max = std::max(core_max, ceil_div(m->max_tile_elements() * bits, 8));
            }
            if (has_head) {
              intra[static_cast<std::size_t>(S)] = head_hop_bytes(model, head);
              in[static_cast<std::size_t>(S)] = head_input_layout(model, head);
              out[static_cast<std::size_t>(S)] = embedding_row_layout(head);
            }
            // Latency-aware cost: every slot's and every hand-over's
            // critical-path cycles, weighted into hop-bytes.
            const double lw = req.anneal.latency_weight;
            std::vector<double> latency(static_cast<std::size_t>(N), 0.0);
            for (int i = 0; i < S; ++i)
              latency[static_cast<std::size_t>(i)] =
                  layer_latency_cycles(lat_model, model, stage[static_cast<std::size_t>(i)]);
            if (has_head)
              latency[static_cast<std::size_t>(S)] = head_latency_cycles(lat_model, model, head);
            for (int i = 0; i < N; ++i)
              intra[static_cast<std::size_t>(i)] += lw * latency[static_cast<std::size_t>(i)];
            // Per edge: hop-bytes per byte moved, plus (weighted) the move's
            // latency per byte of the edge's weight (every edge carries the
            // same hidden-state bytes).
            const double edge_bytes = 4.0 * model.hidden_size;
            std::vector<double> dist(static_cast<std::size_t>(N) * N);
            for (int a = 0; a < N; ++a)
              for (int b = 0; b < N; ++b)
                dist[static_cast<std::size_t>(a) * N + b] =
                    (move_hop_bytes(out[static_cast<std::size_t>(a)],
                                    in[static_cast<std::size_t>(b)]) +
                     (lw > 0.0
                          ? lw * move_latency_cycles(lat_model, out[static_cast<std::size_t>(a)],
                                                     in[static_cast<std::size_t>(b)])
                          : 0.0)) /
                    edge_bytes;
            // Legs to and from other wafers: the first layer's input comes
            // from the west edge (previous wafer, or the head on the last),
            // the last layer's output leaves by the east edge (no head here).
            std::vector<double> entry(static_cast<std::size_t>(S), 0.0), exit(entry);
            for (int i = 0; i < S; ++i) {
              if (n_wafers > 1)
                entry[static_cast<std::size_t>(i)] =
                    from_west_edge_hop_bytes(in[static_cast<std::size_t>(i)]);
              if (!has_head)
                exit[static_cast<std::size_t>(i)] =
                    to_east_edge_hop_bytes(out[static_cast<std::size_t>(i)], spec.mesh_width);
            }
            // Random start (seeded), then Metropolis moves: a layer to another
            // slot, swapping with its occupant if there is one.
            SeededDraws rng{req.seed * 0x9E3779B97F4A7C15ull + candidate};
            std::vector<int> perm(static_cast<std::size_t>(S));
            std::iota(perm.begin(), perm.end(), 0);
            for (int i = S - 1; i > 0; --i)
              std::swap(perm[static_cast<std::size_t>(i)],
                        perm[static_cast<std::size_t>(rng.below(i + 1))]);
            std::vector<int> slot_of(static_cast<std::size_t>(k + (has_head ? 1 : 0)));
            std::vector<int> occupant(static_cast<std::size_t>(S), -1);
            for (int l = 0; l < k; ++l) {
              slot_of[static_cast<std::size_t>(l)] = perm[static_cast<std::size_t>(l)];
              occupant[static_cast<std::size_t>(perm[static_cast<std::size_t>(l)])] = l;
            }
            if (has_head) slot_of[static_cast<std::size_t>(k)] = S;
            auto edge_cost = [&](const Dataflow::edge_descriptor& e) {
              const auto u = boost::source(e, graph), v = boost::target(e, graph);
              return weight[e] * dist[static_cast<std::size_t>(slot_of[u]) * N + slot_of[v]];
            };
            // A layer's own cost in its slot: inside the slot, plus the
            // cross-wafer legs when it is the wafer's first or last layer.
            auto vertex_cost = [&](int v) {
              const auto slot = static_cast<std::size_t>(slot_of[static_cast<std::size_t>(v)]);
              return intra[slot] + (v == 0 ? entry[slot] : 0.0) + (v == k - 1 ? exit[slot] : 0.0);
            };
            // Cost of the vertices v (and u) and their edges, each edge once.
            auto local = [&](int v, int u) {
              double c = vertex_cost(v);
              if (u >= 0) c += vertex_cost(u);
              for (auto [e, end] = boost::out_edges(v, graph); e != end; ++e) c += edge_cost(*e);
              for (auto [e, end] = boost::in_edges(v, graph); e != end; ++e) c += edge_cost(*e);
              if (u >= 0) {
                for (auto [e, end] = boost::out_edges(u, graph); e != end; ++e)
                  if (static_cast<int>(boost::target(*e, graph)) != v) c += edge_cost(*e);
                for (auto [e, end] = boost::in_edges(u, graph); e != end; ++e)
                  if (static_cast<int>(boost::source(*e, graph)) != v) c += edge_cost(*e);
              }
              return c;
            };
            double cost = has_head ? intra[static_cast<std::size_t>(S)] : 0.0;
            if (has_head && n_wafers > 1)
              cost += to_east_edge_hop_bytes(out[static_cast<std::size_t>(S)], spec.mesh_width);
            for (int l = 0; l < k; ++l) cost += vertex_cost(l);
            for (auto [e, end] = boost::edges(graph); e != end; ++e) cost += edge_cost(*e);
            double best_here = cost;
            std::vector<int> best_slots = slot_of;
            const double scale = cost / k;
            double T = req.anneal.initial_temperature * scale;
            const int iters = req.anneal.iterations;
            const double cool =
                std::pow(req.anneal.final_temperature / req.anneal.initial_temperature,
                         1.0 / std::max(1, iters));
            for (int it = 0; it < iters; ++it, T *= cool) {
              const int v = rng.below(k);
              const int s = rng.below(S);
              const int from = slot_of[static_cast<std::size_t>(v)];
              if (s == from) continue;
              const int u = occupant[static_cast<std::size_t>(s)];
              const double before = local(v, u);
              slot_of[static_cast<std::size_t>(v)] = s;
              occupant[static_cast<std::size_t>(s)] = v;
              occupant[static_cast<std::size_t>(from)] = u;
              if (u >= 0) slot_of[static_cast<std::size_t>(u)] = from;
              const double delta = local(v, u) - before;
              if (delta <= 0.0 || rng.unit() < std::exp(-delta / T)) {
                cost += delta;
                if (cost < best_here - 1e-9 * scale) best_here = cost, best_slots = slot_of;
              } else {  // undo
                slot_of[static_cast<std::size_t>(v)] = from;
                occupant[static_cast<std::size_t>(from)] = v;
                occupant[static_cast<std::size_t>(s)] = u;
                if (u >= 0) slot_of[static_cast<std::size_t>(u)] = s;
              }
            }
            const double total = best_here + req.anneal.sram_weight * static_cast<double>(core_max);
            // The parts of best_here, for the note: hop-bytes and cycles.
            auto split = [&](const std::vector<int>& slots_of) {
              double hb = has_head ? intra[static_cast<std::size_t>(S)] -
                                         lw * latency[static_cast<std::size_t>(S)]
                                   : 0.0,
                     cyc = has_head ? latency[static_cast<std::size_t>(S)] : 0.0;
              if (has_head && n_wafers > 1)
                hb += to_east_edge_hop_bytes(out[static_cast<std::size_t>(S)], spec.mesh_width);
              for (int l = 0; l < k; ++l) {
                const auto sl = static_cast<std::size_t>(slots_of[static_cast<std::size_t>(l)]);
                hb += intra[sl] - lw * latency[sl] + (l == 0 ? entry[sl] : 0.0) +
                      (l == k - 1 ? exit[sl] : 0.0);
                cyc += latency[sl];
              }
              for (auto [e, end] = boost::edges(graph); e != end; ++e) {
                const auto a = static_cast<std::size_t>(slots_of[boost::source(*e, graph)]);
                const auto b = static_cast<std::size_t>(slots_of[boost::target(*e, graph)]);
                hb += move_hop_bytes(out[a], in[b]);
                cyc += move_latency_cycles(lat_model, out[a], in[b]);
              }
              return std::pair{hb, cyc};
            };
            if (total < best_cost) {
              best_cost = total;
              best_plan.head = base.head;
              best_plan.rest = base.rest;
              best_plan.kv_segment = kv_segment;
              best_plan.blocks.clear();
              for (int l = 0; l < k; ++l)
                best_plan.blocks.push_back(
                    slots[static_cast<std::size_t>(best_slots[static_cast<std::size_t>(l)])]);
              const auto [hb, cyc] = split(best_slots);
              best_plan.note = fmt::format(
                  "{} x {} slots ({}){}{}, closed-form {:.4g} hop-bytes/token, {:.4g} cycles/token "
                  "critical path{}",
                  rows, cols, by_columns ? "snake columns" : "snake rows",
                  has_head ? (by_columns ? ", head north" : ", head west") : "",
                  kv_segment > 0 ? fmt::format(", KV segments >= {} cores", kv_segment)
                                 : std::string(),
                  hb, cyc,
                  req.anneal.sram_weight > 0 || lw > 0 ? fmt::format(", cost {:.4g}", total)
                                                       : std::string());
            }
          }
    if (best_plan.blocks.empty())
      throw FitError(fmt::format("anneal: no grid of {} layer slots fits {}; the last: {}", k,
                                 spec.name, last_fit_error));
    return best_plan;
  };

  int final_context = INT_MAX;
  for (int w = 0; w < n_wafers; ++w) {
    if (req.progress) req.progress(n_wafers, w);
    const int l_begin = block_begin(model.num_layers, n_wafers, w);
    const int l_end = block_begin(model.num_layers, n_wafers, w + 1);
    const int k = l_end - l_begin;
    const bool has_head = w == n_wafers - 1;
    const int stages = k + (has_head ? 1 : 0);
    RegionPlan plan;
    std::uint64_t budget = capacity;
    if (req.strategy == "layer-rectangles") {
      if (area.width < stages)
        throw FitError(fmt::format(
            "layer-rectangles gives each stage at least one column, but wafer {} holds {} stages "
            "({} layers{}) and {} is only {} columns wide; use more wafers or serpentine",
            w, stages, k, has_head ? " + head" : "", spec.name, area.width));
      // Full-height strips, layers left to right, the head on the right.
      const int head_width = has_head ? head_share(area.width, head_bytes, layer_bytes, k) : 0;
      const int layer_width = std::max(1, (area.width - head_width) / k);
      for (int i = 0; i < k; ++i)
        plan.blocks.push_back(Rect{area.x0 + i * layer_width, area.y0, layer_width, area.height});
      plan.head =
          Rect{area.x0 + k * layer_width, area.y0, area.width - k * layer_width, area.height};
    } else if (req.strategy == "serpentine") {
      // The head strip on the left; layers snake through R rows of blocks
      // (left to right, then right to left, ...) so that layer 0 starts next
      // to the embedding and, with an even R, the last layer ends next to
      // the lm_head.
      plan = snake_plan(k, has_head, req.block_rows, false);
      if (plan.blocks.empty())
        throw FitError(fmt::format("serpentine: {} block rows of {} layers do not fit {} ({} x {})",
                                   req.block_rows, k, spec.name, area.width, area.height));
    } else if (req.strategy == "short-path") {
      // Boustrophedons whose path returns next to the head (an even number
      // of snake rows, or of snake columns with the head across the top),
      // every such grid tried; the lowest closed-form hop-bytes wins.
      double best = std::numeric_limits<double>::infinity();
      for (const bool by_columns : {false, true})
        for (int rows = 2; rows <= k; rows += 2) {
          if (rows > 2 &&
              static_cast<int>(ceil_div(k, rows)) == static_cast<int>(ceil_div(k, rows - 2)))
            continue;  // same grid as a smaller even count
          RegionPlan p = snake_plan(k, has_head, rows, by_columns);
          double cost = 0.0;
          if (p.blocks.empty() || !candidate_cost(p, w, l_begin, has_head, cost)) continue;
          if (cost < best) {
            best = cost;
            plan = p;
            plan.note =
                fmt::format("{} {} of {} blocks, closed-form {:.4g} hop-bytes/token", rows,
                            by_columns ? "snake columns" : "snake rows", ceil_div(k, rows), cost);
          }
        }
      if (k == 1) plan = snake_plan(k, has_head, 1, false);
      if (plan.blocks.empty())
        throw FitError(
            fmt::format("short-path: no boustrophedon of {} layers fits {}; the last: {}", k,
                        spec.name, last_fit_error));
    } else if (req.strategy == "sram-balanced") {
      // The smallest per-core byte budget B (weights + KV + buffers) at
      // which the head fits a west strip and every layer its serpentine
      // block: each matrix then takes the rows its tiles need at B, the KV
      // cache the rows its slots need at B, so no core holds more than B.
      // The head strip starts at the narrowest width whose rows could hold
      // the head at b and widens (up to 64 columns more) when dead rows
      // break its runs.
      std::string why;
      auto plan_at = [&](std::uint64_t b, RegionPlan& p) {
        int first = 0;
        if (has_head) {
          for (first = 1; first < area.width; ++first) {
            const int r = planner.head_min_rows(first, b);
            if (r >= 0 && r <= area.height) break;
          }
          if (first >= area.width) return false;
        }
        const int last = has_head ? std::min(area.width - 1, first + 64) : 0;
        for (int hw = first; hw <= last; ++hw) {
          const Rect rest{area.x0 + hw, area.y0, area.width - hw, area.height};
          p.head = Rect{area.x0, area.y0, hw, area.height};
          p.blocks = snake_blocks(rest, k, req.block_rows, false);
          if (p.blocks.empty()) return false;
          Placement trial;
          try {
            build(p, w, l_begin, has_head, b, trial);
            return true;
          } catch (const FitError& e) {
            why = e.what();
          }
        }
        return false;
      };
      std::uint64_t lo = planner.min_budget(), hi = capacity;
      if (!plan_at(hi, plan))
        throw FitError(
            fmt::format("sram-balanced: {} layers{} do not fit {} even at full capacity: {}", k,
                        has_head ? " and the head" : "", spec.name, why));
      while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        RegionPlan p;
        if (plan_at(mid, p))
          hi = mid, plan = p;
        else
          lo = mid + 1;
      }
      plan_at(hi, plan);
      budget = hi;
      plan.note =
          fmt::format("per-core budget {} of {}", human_bytes(budget), human_bytes(capacity));
    } else {  // anneal
      plan = anneal(k, has_head, l_begin, w);
    }
    // The searches above planned many candidates; the longest context is the final plan's.
    planner.max_context = INT_MAX;
    build(plan, w, l_begin, has_head, budget, pl);
    final_context = std::min(final_context, planner.max_context);
    if (!plan.note.empty())
      pl.planner_note += (pl.planner_note.empty() ? "" : "; ") +
                         (n_wafers > 1 ? fmt::format("wafer {}: ", w) : std::string()) + plan.note;
  }
  pl.max_context_tokens = std::min(pl.max_context_tokens, final_context);
  pl.estimated_hop_bytes = estimate_hop_bytes(model, pl, spec.mesh_width);
  if (req.progress) req.progress(n_wafers, n_wafers);
  return pl;
}

int layout_max_context(const models::ModelConfig& model, const Placement& pl,
                       const PlacementRequest& req, const fabric::WaferSpec& spec) {
  // Bytes per (wafer, core) other than KV slots, in one flat array.
  const auto width = static_cast<std::size_t>(spec.mesh_width);
  const std::size_t cores = width * static_cast<std::size_t>(spec.mesh_height);
  auto index = [&](int wafer, Coord c) {
    return static_cast<std::size_t>(wafer) * cores + static_cast<std::size_t>(c.y) * width +
           static_cast<std::size_t>(c.x);
  };
  std::vector<std::uint64_t> other(static_cast<std::size_t>(pl.wafers) * cores, 0);
  for_each_allocation(model, pl, req, [&](const CoreAllocation& a) {
    if (a.use != SramUse::kv_cache) other[index(a.wafer, a.core)] += a.bytes.value;
  });
  const std::uint64_t capacity = spec.sram_per_core.value;
  const std::uint64_t slot_bytes = 2 * static_cast<std::uint64_t>(model.head_dim) *
                                   static_cast<std::uint64_t>(req.weight_bits) / 8;
  const auto users = static_cast<std::uint64_t>(std::max(1, req.users));
  std::uint64_t context = static_cast<std::uint64_t>(model.max_position);
  for (const LayerStage& st : pl.layers) {
    const AttentionPlacement& a = st.attention;
    for (int h = 0; h < a.num_kv_heads; ++h) {
      std::uint64_t fewest = UINT64_MAX;
      for (int i = 0; i < a.segment_length; ++i) {
        const std::uint64_t used = other[index(st.wafer, a.segment_core(h, i))];
        fewest = std::min(fewest, (capacity > used ? capacity - used : 0) / slot_bytes);
      }
      context = std::min(context, fewest * static_cast<std::uint64_t>(a.segment_length) / users);
    }
  }
  return static_cast<int>(context);
}

void for_each_allocation(const models::ModelConfig& model, const Placement& pl,
                         const PlacementRequest& req,
                         const std::function<void(const CoreAllocation&)>& visit) {
  const int bits = req.weight_bits;
  const int kv_bits = req.weight_bits;
  const bool tied = model.tie_embeddings;
  const int hd = model.head_dim;
  const int group = model.num_heads / model.num_kv_heads;
  const std::uint64_t slot_bytes = 2 * static_cast<std::uint64_t>(hd) * kv_bits / 8;
  const std::uint64_t att_buffers = static_cast<std::uint64_t>(group) * (2 * hd + 2) * 4;
  for (const LayerStage& st : pl.layers) {
    for (const MatrixPlacement* mp : st.matrices()) visit_matrix(st.wafer, *mp, bits, visit);
    const AttentionPlacement& a = st.attention;
    const std::string kv = fmt::format("layer {} KV cache", st.layer);
    const std::string buffers = fmt::format("layer {} attention buffers", st.layer);
    for (int h = 0; h < a.num_kv_heads; ++h)
      for (int i = 0; i < a.segment_length; ++i) {
        const Coord core = a.segment_core(h, i);
        visit({st.wafer, core,
               Bytes{slot_bytes * static_cast<std::uint64_t>(a.max_positions_per_core)},
               SramUse::kv_cache, kv});
        visit({st.wafer, core, Bytes{att_buffers}, SramUse::activations, buffers});
      }
  }
  const HeadStage& head = pl.head;
  visit_matrix(head.wafer, head.lm_head, bits, visit);
  if (!tied) visit_matrix(head.wafer, head.embedding, bits, visit);
  if (head.position_embedding.p() > 0)
    visit_matrix(head.wafer, head.position_embedding, bits, visit);
  // RMSNorm gains sit where their vectors are normalised: both of a layer's
  // on its residual cores (the o roots), the final one on the head's first
  // roots (the layout lower() uses for the final hidden state).
  auto gains = [&](int wafer, Coord c, int elements, const std::string& what) {
    visit({wafer, c, Bytes{ceil_div(static_cast<std::uint64_t>(elements) * 2 * bits, 16)},
           SramUse::weights, what});
  };
  // LayerNorm (gpt2) has a bias beside each gain.
  const int norm_vectors = model.is_gpt2() ? 2 : 1;
  // Biases sit on the roots of the matrix whose output they are added to.
  auto biases = [&](int wafer, const MatrixPlacement& m, const std::string& what) {
    for (int pi = 0; pi < m.p(); ++pi)
      gains(wafer, m.root(pi), m.row_begin(pi + 1) - m.row_begin(pi), what);
  };
  for (const LayerStage& st : pl.layers) {
    const std::string norms = fmt::format("layer {} norm gains", st.layer);
    for (int pi = 0; pi < st.o.p(); ++pi)
      gains(st.wafer, st.o.root(pi),
            2 * norm_vectors * (st.o.row_begin(pi + 1) - st.o.row_begin(pi)), norms);
    // q/k/v biases (qwen2, gpt2, attention_bias).
    if (model.has_qkv_bias()) biases(st.wafer, st.qkv, fmt::format("layer {} qkv bias", st.layer));
    if (model.is_gpt2()) {
      biases(st.wafer, st.o, fmt::format("layer {} o bias", st.layer));
      biases(st.wafer, st.gate_up, fmt::format("layer {} up bias", st.layer));
      biases(st.wafer, st.down, fmt::format("layer {} down bias", st.layer));
    }
    // qwen3's qk-norm gains (2 x head_dim values) on the qkv's first root.
    if (model.has_qk_norm())
      gains(st.wafer, st.qkv.root(0), 2 * model.head_dim,
            fmt::format("layer {} qk-norm gains", st.layer));
  }
  const int home = std::min(head.lm_head.p(), model.hidden_size);
  for (int i = 0; i < home; ++i)
    gains(head.wafer, head.lm_head.root(i),
          norm_vectors * (block_begin(model.hidden_size, home, i + 1) -
                          block_begin(model.hidden_size, home, i)),
          "final norm gains");
}

void allocate_placement(const models::ModelConfig& model, const Placement& pl,
                        std::span<fabric::Fabric* const> wafers, const PlacementRequest& req) {
  if (static_cast<int>(wafers.size()) != pl.wafers)
    throw std::invalid_argument("allocate_placement: one fabric per wafer of the placement");
  // The allocator is the final word on fit.
  for_each_allocation(model, pl, req, [&](const CoreAllocation& a) {
    fabric::Fabric& fab = *wafers[static_cast<std::size_t>(a.wafer)];
    fab.sram().allocate(fab.mesh().id(a.core), a.bytes, a.use, a.what);
  });
}

Placement place(const models::ModelConfig& model, std::span<fabric::Fabric* const> wafers,
                const PlacementRequest& req) {
  if (wafers.empty()) throw std::invalid_argument("place: no wafers");
  Placement pl =
      plan_placement(model, wafers.front()->spec(), static_cast<int>(wafers.size()), req);
  allocate_placement(model, pl, wafers, req);
  return pl;
}

}  // namespace wafersim::sim
