#include "sim/placement.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

namespace wafersim::sim {

using fabric::FitError;
using fabric::Rect;
using fabric::SramUse;

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
  return {"layer-rectangles", "serpentine"};
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
};

// Fewest rows of cores (with q = min(width, in) columns) so that every tile,
// its fp32 input chunk and its fp32 partial sums fit one core's SRAM.
int min_rows(const MatrixShape& m, int width, std::uint64_t capacity, int weight_bits) {
  const std::uint64_t q = static_cast<std::uint64_t>(std::min(width, m.in));
  const std::uint64_t cols = ceil_div(static_cast<std::uint64_t>(m.in), q);
  const std::uint64_t row_bytes =
      ceil_div(cols * static_cast<std::uint64_t>(weight_bits), 8) + 4;  // + partial
  if (capacity <= cols * 4 + row_bytes) return -1;                      // not even one row fits
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

void allocate_matrix(fabric::Fabric& fab, const MatrixPlacement& mp, int weight_bits) {
  const fabric::Mesh& mesh = fab.mesh();
  for (int pi = 0; pi < mp.p(); ++pi)
    for (int qi = 0; qi < mp.q(); ++qi) {
      const std::uint64_t rows =
          static_cast<std::uint64_t>(mp.row_begin(pi + 1) - mp.row_begin(pi));
      const std::uint64_t cols =
          static_cast<std::uint64_t>(mp.col_begin(qi + 1) - mp.col_begin(qi));
      const CoreId core = mesh.id(mp.core(pi, qi));
      fab.sram().allocate(core,
                          Bytes{ceil_div(rows * cols * static_cast<std::uint64_t>(weight_bits), 8)},
                          SramUse::weights, mp.name + " weight tile");
      fab.sram().allocate(core, Bytes{(rows + cols) * 4}, SramUse::activations,
                          mp.name + " buffers");
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

Placement plan_placement(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                         int n_wafers, const PlacementRequest& req) {
  const auto strategies = placement_strategies();
  if (std::find(strategies.begin(), strategies.end(), req.strategy) == strategies.end())
    throw std::invalid_argument("unknown placement strategy '" + req.strategy + "'");
  if (n_wafers < 1) throw std::invalid_argument("place: no wafers");
  const std::uint64_t capacity = spec.sram_per_core.value;
  const int bits = req.weight_bits;
  const int kv_bits = req.weight_bits;
  const int W = spec.mesh_width, H = spec.mesh_height;

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

  const int hd = model.head_dim;
  const int ctx = std::max(1, req.context_tokens);
  const std::int64_t slots = static_cast<std::int64_t>(ctx) * users;  // KV slots per kv head
  Placement pl;
  pl.strategy = req.strategy;
  pl.context_tokens = req.context_tokens;
  pl.users = users;
  pl.wafers = n_wafers;
  pl.max_context_tokens = model.max_position;

  // The matrices of a layer, top to bottom after the attention segments:
  //   SwiGLU (llama family)  qkv, o, gate_up (interleaved pairs), down
  //   GELU (gpt2)            qkv, o, up, down
  //   MoE (mixtral)          qkv, o, router, then gate_up and down of each expert
  std::vector<MatrixShape> layer_shapes{
      {"qkv", model.q_dim() + 2 * model.kv_dim(), model.hidden_size},
      {"o", model.hidden_size, model.q_dim()},
  };
  if (model.is_moe()) {
    layer_shapes.push_back({"router", model.num_experts, model.hidden_size});
    for (int e = 0; e < model.num_experts; ++e) {
      layer_shapes.push_back(
          {fmt::format("expert {} gate_up", e), 2 * model.intermediate_size, model.hidden_size, 2});
      layer_shapes.push_back(
          {fmt::format("expert {} down", e), model.hidden_size, model.intermediate_size});
    }
  } else if (model.is_gpt2()) {
    layer_shapes.push_back({"up", model.intermediate_size, model.hidden_size});
    layer_shapes.push_back({"down", model.hidden_size, model.intermediate_size});
  } else {
    layer_shapes.push_back({"gate_up", 2 * model.intermediate_size, model.hidden_size, 2});
    layer_shapes.push_back({"down", model.hidden_size, model.intermediate_size});
  }
  // Attention: kv heads stacked in columns; each head's segment must hold the
  // context's K and V plus the query group and partial results.
  const int group = model.num_heads / model.num_kv_heads;
  const std::uint64_t slot_bytes = 2 * static_cast<std::uint64_t>(hd) * kv_bits / 8;
  const std::uint64_t att_buffers = static_cast<std::uint64_t>(group) * (2 * hd + 2) * 4;
  if (capacity <= att_buffers + slot_bytes)
    throw FitError(
        fmt::format("one core ({}) cannot hold a single KV position of {} plus attention buffers",
                    human_bytes(capacity), model.name));
  const int slots_per_core = static_cast<int>((capacity - att_buffers) / slot_bytes);
  const int min_segment =
      static_cast<int>(ceil_div(static_cast<std::uint64_t>(slots), slots_per_core));

  // Lays out one layer inside `block`, top to bottom: QKV, attention
  // segments, O, gate/up, down, each matrix Q = block width columns wide.
  auto place_layer = [&](int l, int w, const Rect& block) {
    const int bw = block.width, bh = block.height;
    const int att_width = std::min(bw, model.num_kv_heads);
    const int segments_per_column = static_cast<int>(ceil_div(model.num_kv_heads, att_width));
    std::vector<int> rows(layer_shapes.size());
    for (std::size_t i = 0; i < layer_shapes.size(); ++i) {
      rows[i] = min_rows(layer_shapes[i], bw, capacity, bits);
      if (rows[i] < 0)
        throw FitError(fmt::format(
            "a {}-column block cannot hold even one row of the {} matrix of {} on {}; use more "
            "wafers or fewer block rows",
            bw, layer_shapes[i].name, model.name, spec.name));
    }
    const int att_rows_min = segments_per_column * min_segment;
    const int needed = std::accumulate(rows.begin(), rows.end(), 0) + att_rows_min;
    if (needed > bh)
      throw FitError(fmt::format(
          "layer {} of {} needs {} rows of a {}-core-wide block for its weights and a KV cache "
          "of {} tokens x {} users, but its block ({}) has {} rows; use more wafers, fewer "
          "tokens or fewer block rows",
          l, model.name, needed, bw, ctx, users, pl.strategy, bh));
    // Spread what is left over the matrices (less work per core), and give
    // the attention segments any rows they can still use.
    share_rows(rows, layer_shapes, bh - needed);
    const int used_by_matrices = std::accumulate(rows.begin(), rows.end(), 0);
    const int segment =
        std::max(min_segment, static_cast<int>(std::min<std::int64_t>(
                                  slots, (bh - used_by_matrices) / segments_per_column)));
    // The longest context this layout could cache: matrices at their fewest
    // rows, every other row of the block holding KV slots.
    const int most_rows = (bh - needed + att_rows_min) / segments_per_column;
    pl.max_context_tokens = static_cast<int>(std::min<std::int64_t>(
        pl.max_context_tokens, static_cast<std::int64_t>(most_rows) * slots_per_core / users));

    LayerStage st;
    st.layer = l;
    st.wafer = w;
    st.strip = block;
    const int x0 = block.x0;
    int y = block.y0;
    auto next_matrix = [&](std::size_t i) {
      MatrixShape sh = layer_shapes[i];
      sh.name = fmt::format("layer {} {}", l, sh.name);
      MatrixPlacement mp = make_matrix(sh, x0, y, bw, rows[i], req.reduction);
      mp.wafer = w;
      y += mp.rect.height;
      return mp;
    };
    st.qkv = next_matrix(0);
    st.attention.wafer = w;
    st.attention.rect = Rect{x0, y, att_width, segments_per_column * segment};
    st.attention.num_kv_heads = model.num_kv_heads;
    st.attention.segment_length = segment;
    st.attention.segments_per_column = segments_per_column;
    st.attention.reduction = req.reduction;
    st.attention.max_positions_per_core = static_cast<int>(
        ceil_div(static_cast<std::uint64_t>(slots), static_cast<std::uint64_t>(segment)));
    st.attention.context = ctx;
    st.attention.users = users;
    y += st.attention.rect.height;
    st.o = next_matrix(1);
    if (model.is_moe()) {
      st.router = next_matrix(2);
      for (int e = 0; e < model.num_experts; ++e) {
        ExpertPlacement ep;
        // Rows interleave gate and up: 2i = gate i, 2i+1 = up i (granule 2).
        ep.gate_up = next_matrix(3 + 2 * static_cast<std::size_t>(e));
        ep.down = next_matrix(4 + 2 * static_cast<std::size_t>(e));
        st.experts.push_back(std::move(ep));
      }
    } else {
      // SwiGLU: rows interleave gate and up (granule 2); gpt2: plain up rows.
      st.gate_up = next_matrix(2);
      st.down = next_matrix(3);
    }
    pl.layers.push_back(std::move(st));
  };

  // Head: lm_head over all rows that fit; the embedding shares it when tied.
  auto place_head = [&](int w, const Rect& strip) {
    HeadStage& head = pl.head;
    head.wafer = w;
    head.strip = strip;
    head.tied = tied;
    const MatrixShape lm{"lm_head", model.vocab_size, model.hidden_size};
    const MatrixShape emb{"embedding", model.vocab_size, model.hidden_size};
    const MatrixShape pos{"position_embedding", model.max_position, model.hidden_size};
    const int lm_min = min_rows(lm, strip.width, capacity, bits);
    // gpt2's position embeddings take the fewest rows they fit in, at the bottom.
    const int pos_rows = model.is_gpt2() ? min_rows(pos, strip.width, capacity, bits) : 0;
    const int avail = strip.height - pos_rows;
    if (lm_min < 0 || pos_rows < 0 || lm_min * (tied ? 1 : 2) > avail)
      throw FitError(fmt::format(
          "the {}-column head strip of {} cannot hold the {}x{} embedding/lm_head{}; use more "
          "wafers",
          strip.width, spec.name, model.vocab_size, model.hidden_size,
          model.is_gpt2() ? " and the position embeddings" : ""));
    const int lm_rows = tied ? avail : std::max(lm_min, avail - lm_min);
    head.lm_head = make_matrix(lm, strip.x0, strip.y0, strip.width, lm_rows, req.reduction);
    head.lm_head.wafer = w;
    head.embedding =
        tied ? head.lm_head
             : make_matrix(emb, strip.x0, strip.y0 + head.lm_head.rect.height, strip.width,
                           avail - head.lm_head.rect.height, req.reduction);
    head.embedding.wafer = w;
    if (!tied) head.embedding.name = "embedding";
    if (model.is_gpt2()) {
      head.position_embedding =
          make_matrix(pos, strip.x0, strip.y0 + avail, strip.width, pos_rows, req.reduction);
      head.position_embedding.wafer = w;
    }
  };

  // Wafer w holds a contiguous run of layers (balanced counts); the last one
  // also holds the head, whose strip is as wide as its share of the bytes.
  for (int w = 0; w < n_wafers; ++w) {
    const int l_begin = block_begin(model.num_layers, n_wafers, w);
    const int l_end = block_begin(model.num_layers, n_wafers, w + 1);
    const int k = l_end - l_begin;
    const bool has_head = w == n_wafers - 1;
    const int stages = k + (has_head ? 1 : 0);
    if (W < stages && req.strategy == "layer-rectangles")
      throw FitError(fmt::format(
          "layer-rectangles gives each stage at least one column, but wafer {} holds {} stages "
          "({} layers{}) and {} is only {} columns wide; use more wafers or serpentine",
          w, stages, k, has_head ? " + head" : "", spec.name, W));
    int head_width = 0;
    if (has_head) {
      const double total = static_cast<double>(layer_bytes) * k + static_cast<double>(head_bytes);
      head_width =
          std::max(1, static_cast<int>(std::floor(W * static_cast<double>(head_bytes) / total)));
      head_width = std::min(head_width, W - 1);
    }
    if (req.strategy == "layer-rectangles") {
      // Full-height strips, layers left to right, the head on the right.
      const int layer_width = std::max(1, (W - head_width) / k);
      for (int l = l_begin; l < l_end; ++l)
        place_layer(l, w, Rect{(l - l_begin) * layer_width, 0, layer_width, H});
      if (has_head) place_head(w, Rect{k * layer_width, 0, W - k * layer_width, H});
    } else {
      // serpentine: the head strip on the left; layers snake through R rows
      // of blocks (left to right, then right to left, ...) so that layer 0
      // starts next to the embedding and, with an even R, the last layer
      // ends next to the lm_head.
      const int R = std::min(std::max(1, req.block_rows), k);
      const int C = static_cast<int>(ceil_div(k, R));
      const int x_start = head_width;
      const int block_w = (W - x_start) / C;
      const int block_h = H / R;
      if (block_w < 1 || block_h < 1)
        throw FitError(fmt::format("serpentine: {} x {} blocks do not fit {} ({} x {} cores)", R, C,
                                   spec.name, W, H));
      for (int i = 0; i < k; ++i) {
        const int r = i / C, c = i % C;
        const int col = r % 2 == 0 ? c : C - 1 - c;
        const int h = r == R - 1 ? H - r * block_h : block_h;
        place_layer(l_begin + i, w, Rect{x_start + col * block_w, r * block_h, block_w, h});
      }
      if (has_head) place_head(w, Rect{0, 0, head_width, H});
    }
  }

  return pl;
}

void allocate_placement(const models::ModelConfig& model, const Placement& pl,
                        std::span<fabric::Fabric* const> wafers, const PlacementRequest& req) {
  if (static_cast<int>(wafers.size()) != pl.wafers)
    throw std::invalid_argument("allocate_placement: one fabric per wafer of the placement");
  const int bits = req.weight_bits;
  const int kv_bits = req.weight_bits;
  const bool tied = model.tie_embeddings;
  const int hd = model.head_dim;
  const int group = model.num_heads / model.num_kv_heads;
  const std::uint64_t slot_bytes = 2 * static_cast<std::uint64_t>(hd) * kv_bits / 8;
  const std::uint64_t att_buffers = static_cast<std::uint64_t>(group) * (2 * hd + 2) * 4;
  // Allocate every byte; the allocator is the final word on fit.
  auto fab_of = [&](int w) -> fabric::Fabric& { return *wafers[static_cast<std::size_t>(w)]; };
  for (const LayerStage& st : pl.layers) {
    fabric::Fabric& fab = fab_of(st.wafer);
    for (const MatrixPlacement* mp : st.matrices()) allocate_matrix(fab, *mp, bits);
    const AttentionPlacement& a = st.attention;
    for (int h = 0; h < a.num_kv_heads; ++h)
      for (int i = 0; i < a.segment_length; ++i) {
        const CoreId core = fab.mesh().id(a.segment_core(h, i));
        fab.sram().allocate(
            core, Bytes{slot_bytes * static_cast<std::uint64_t>(a.max_positions_per_core)},
            SramUse::kv_cache, fmt::format("layer {} KV cache", st.layer));
        fab.sram().allocate(core, Bytes{att_buffers}, SramUse::activations,
                            fmt::format("layer {} attention buffers", st.layer));
      }
  }
  const HeadStage& head = pl.head;
  fabric::Fabric& head_fab = fab_of(head.wafer);
  allocate_matrix(head_fab, head.lm_head, bits);
  if (!tied) allocate_matrix(head_fab, head.embedding, bits);
  if (head.position_embedding.p() > 0) allocate_matrix(head_fab, head.position_embedding, bits);
  // RMSNorm gains sit where their vectors are normalised: both of a layer's
  // on its residual cores (the o roots), the final one on the head's first
  // roots (the layout lower() uses for the final hidden state).
  auto allocate_gains = [&](fabric::Fabric& fab, Coord c, int elements, const std::string& what) {
    fab.sram().allocate(fab.mesh().id(c),
                        Bytes{ceil_div(static_cast<std::uint64_t>(elements) * 2 * bits, 16)},
                        SramUse::weights, what);
  };
  // LayerNorm (gpt2) has a bias beside each gain.
  const int norm_vectors = model.is_gpt2() ? 2 : 1;
  // Biases sit on the roots of the matrix whose output they are added to.
  auto allocate_biases = [&](fabric::Fabric& fab, const MatrixPlacement& m,
                             const std::string& what) {
    for (int pi = 0; pi < m.p(); ++pi)
      allocate_gains(fab, m.root(pi), m.row_begin(pi + 1) - m.row_begin(pi), what);
  };
  for (const LayerStage& st : pl.layers) {
    fabric::Fabric& fab = fab_of(st.wafer);
    for (int pi = 0; pi < st.o.p(); ++pi)
      allocate_gains(fab, st.o.root(pi),
                     2 * norm_vectors * (st.o.row_begin(pi + 1) - st.o.row_begin(pi)),
                     fmt::format("layer {} norm gains", st.layer));
    // q/k/v biases (qwen2, gpt2, attention_bias).
    if (model.has_qkv_bias())
      allocate_biases(fab, st.qkv, fmt::format("layer {} qkv bias", st.layer));
    if (model.is_gpt2()) {
      allocate_biases(fab, st.o, fmt::format("layer {} o bias", st.layer));
      allocate_biases(fab, st.gate_up, fmt::format("layer {} up bias", st.layer));
      allocate_biases(fab, st.down, fmt::format("layer {} down bias", st.layer));
    }
    // qwen3's qk-norm gains (2 x head_dim values) on the qkv's first root.
    if (model.has_qk_norm())
      allocate_gains(fab, st.qkv.root(0), 2 * model.head_dim,
                     fmt::format("layer {} qk-norm gains", st.layer));
  }
  const int home = std::min(head.lm_head.p(), model.hidden_size);
  for (int i = 0; i < home; ++i)
    allocate_gains(head_fab, head.lm_head.root(i),
                   norm_vectors * (block_begin(model.hidden_size, home, i + 1) -
                                   block_begin(model.hidden_size, home, i)),
                   "final norm gains");
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
