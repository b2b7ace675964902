#include "sim/placement/placement.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "fabric/connectivity.hpp"
#include "fabric/defects.hpp"
#include "sim/placement/placement_cost.hpp"
#include "sim/placement/stage_planner.hpp"
#include "sim/placement/strategy.hpp"

namespace wafersim::sim {

using fabric::FitError;
using fabric::Rect;
using fabric::SramUse;

namespace {

// The largest tile's columns of a matrix (every tile fits them).
std::uint64_t max_cols(const MatrixPlacement& m) {
  return ceil_div(static_cast<std::uint64_t>(m.in_features), static_cast<std::uint64_t>(m.q()));
}

}  // namespace

std::uint64_t MatrixPlacement::max_tile_rows() const {
  return static_cast<std::uint64_t>(row_granule) *
         ceil_div(static_cast<std::uint64_t>(out_features / row_granule),
                  static_cast<std::uint64_t>(p()));
}

std::uint64_t MatrixPlacement::max_tile_elements() const {
  return max_tile_rows() * max_cols(*this);
}

Bytes region_scratch_bytes(const models::ModelConfig& model, const LayerStage& st) {
  std::uint64_t most = 0;
  for (const MatrixPlacement* m : st.matrices())
    most = std::max(most, (m->max_tile_rows() + max_cols(*m)) * 4);
  const AttentionPlacement& a = st.attention;
  const std::uint64_t dims = ceil_div(static_cast<std::uint64_t>(model.head_dim),
                                      static_cast<std::uint64_t>(a.columns_per_head));
  const auto group = static_cast<std::uint64_t>(model.num_heads / model.num_kv_heads);
  return Bytes{std::max(most, group * (2 * dims + 2) * 4)};
}

int QkvRows::qk_rows_in(int lo, int hi) const {
  if (hi <= lo) return 0;
  if (!by_kv_head_) return std::max(0, std::min(hi, q_dim_ + kv_dim_) - lo);
  // Each group's first (g + 1) x head_dim rows are its queries and key.
  const int qk = (g_ + 1) * hd_, G = group();
  const auto upto = [&](int r) {  // query and key rows in [0, r)
    return r / G * qk + std::min(r % G, qk);
  };
  return upto(hi) - upto(lo);
}

std::vector<const MatrixPlacement*> LayerStage::matrices() const {
  std::vector<const MatrixPlacement*> all;
  for (const MatrixPlacement* m : {&qkv, &o, &gate_up, &down, &router})
    if (m->p() > 0) all.push_back(m);
  for (const ExpertPlacement& e : experts) all.push_back(&e.gate_up), all.push_back(&e.down);
  return all;
}

namespace {

// Every core of a matrix: its weight tile and its buffers (the input chunk
// and the partial sums, fp32), to `matrices` at once when given, else core
// by core to `visit`.
void visit_matrix(int wafer, const MatrixPlacement& mp, int weight_bits,
                  const std::function<void(const CoreAllocation&)>& visit,
                  const std::function<void(const MatrixAllocation&)>& matrices,
                  bool buffers_too = true) {
  const std::string tile = mp.name + " weight tile", buffers = mp.name + " buffers";
  // Each tile row's height and column's width once (a whole-region matrix
  // has ~10^5 cores, and a layer group hundreds of matrices: no divisions
  // per core).
  std::vector<std::uint64_t> heights(static_cast<std::size_t>(mp.p()));
  for (int pi = 0; pi < mp.p(); ++pi)
    heights[static_cast<std::size_t>(pi)] =
        static_cast<std::uint64_t>(mp.row_begin(pi + 1) - mp.row_begin(pi));
  std::vector<std::uint64_t> widths(static_cast<std::size_t>(mp.q()));
  for (int qi = 0; qi < mp.q(); ++qi)
    widths[static_cast<std::size_t>(qi)] =
        static_cast<std::uint64_t>(mp.col_begin(qi + 1) - mp.col_begin(qi));
  const MatrixAllocation m{wafer, mp, heights, widths, weight_bits, buffers_too, tile, buffers};
  if (matrices)
    matrices(m);
  else
    m.for_each_core(visit);
}

}  // namespace

void MatrixAllocation::for_each_core(
    const std::function<void(const CoreAllocation&)>& visit) const {
  for_each_tile([&](int pi, int qi) {
    const Coord core = matrix.core(pi, qi);
    visit({wafer, core, Bytes{weight_bytes(pi, qi)}, fabric::SramUse::weights, weights_what});
    if (buffers)
      visit({wafer, core, Bytes{buffer_bytes(pi, qi)}, fabric::SramUse::activations, buffers_what});
  });
}

Placement place(const models::ModelConfig& model, fabric::Fabric& fab,
                const PlacementRequest& req) {
  fabric::Fabric* one = &fab;
  return place(model, std::span<fabric::Fabric* const>(&one, 1), req);
}

fabric::Rect usable_area(const fabric::WaferSpec& spec, const Halo& halo) {
  const int west = (halo.columns + 1) / 2, north = (halo.rows + 1) / 2;
  return Rect{west, north, spec.mesh_width - halo.columns, spec.mesh_height - halo.rows};
}

Bytes kv_cache_bytes(const models::ModelConfig& model, const PlacementRequest& req) {
  const int users = std::max(1, req.users);
  return Bytes{static_cast<std::uint64_t>(model.num_layers) *
               static_cast<std::uint64_t>(req.context_tokens) * users * 2 *
               static_cast<std::uint64_t>(model.kv_dim()) * req.weight_bits / 8};
}

namespace {

// The whole-model checks, before any strategy runs, so the common failures
// read in model terms.
void check_fits(const models::ModelConfig& model, const fabric::WaferSpec& spec, int n_wafers,
                const PlacementRequest& req) {
  if (n_wafers < 1) throw std::invalid_argument("place: no wafers");
  const std::uint64_t capacity = spec.sram_per_core.value;
  const int bits = req.weight_bits;
  const Rect area = usable_area(spec, req.halo);
  if (area.width < 2 || area.height < 1)
    throw FitError(fmt::format("the halo ({} columns, {} rows) leaves no room on {} ({} x {})",
                               req.halo.columns, req.halo.rows, spec.name, spec.mesh_width,
                               spec.mesh_height));
  const std::uint64_t weight_bytes =
      ceil_div(model.parameter_count() * static_cast<std::uint64_t>(bits), 8);
  const int users = std::max(1, req.users);
  const std::uint64_t kv_bytes = kv_cache_bytes(model, req).value;
  const std::uint64_t system_capacity =
      spec.sram_capacity().value * static_cast<std::uint64_t>(n_wafers);
  if (weight_bytes + kv_bytes > system_capacity)
    throw FitError(fmt::format(
        "{} needs {} of SRAM ({} of weights for {} parameters at {} bits + {} of KV cache for {} "
        "tokens x {} users), but {} x {} has {} ({} cores x {} each); use a larger wafer or more "
        "wafers (at least {})",
        model.name, human_bytes(Bytes{weight_bytes + kv_bytes}), human_bytes(Bytes{weight_bytes}),
        model.parameter_count(), bits, human_bytes(Bytes{kv_bytes}), req.context_tokens, users,
        n_wafers, spec.name, human_bytes(Bytes{system_capacity}), spec.core_count(),
        human_bytes(Bytes{capacity}),
        ceil_div(weight_bytes + kv_bytes, spec.sram_capacity().value)));
  // A wafer with fewer layers than groups has a group per layer.
  if (req.strategy == StrategyKind::whole_region && req.layer_groups > model.num_layers)
    throw FitError(fmt::format(
        "placement.layer_groups is {}, but {} has {} layers; use 1 (every layer of a wafer on "
        "the whole wafer) to {} (one layer per region)",
        req.layer_groups, model.name, model.num_layers, model.num_layers));
  if (n_wafers > model.num_layers)
    throw FitError(
        fmt::format("{} wafers for {} layers: {} puts at least one layer on every wafer; use "
                    "at most {} wafers",
                    n_wafers, model.num_layers, strategy_name(req.strategy), model.num_layers));
}

}  // namespace

Placement plan_placement(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                         int n_wafers, const PlacementRequest& req) {
  check_fits(model, spec, n_wafers, req);
  Placement pl;
  pl.strategy = strategy_name(req.strategy);
  pl.context_tokens = req.context_tokens;
  pl.users = std::max(1, req.users);
  pl.value_bytes = req.value_bytes();
  pl.wafers = n_wafers;
  pl.max_context_tokens = model.max_position;
  PlanningContext ctx(model, spec, n_wafers, req, pl);
  const std::unique_ptr<PlacementStrategy> strategy = make_strategy(req.strategy);
  int final_context = INT_MAX;
  for (int w = 0; w < n_wafers; ++w) {
    if (req.progress) req.progress(n_wafers, w);
    WaferTask task;
    task.wafer = w;
    task.first_layer = block_begin(model.num_layers, n_wafers, w);
    task.layers = block_begin(model.num_layers, n_wafers, w + 1) - task.first_layer;
    task.has_head = w == n_wafers - 1;
    const RegionPlan plan = strategy->plan(ctx, task);
    // The searches planned many candidates; the longest context is the final plan's.
    ctx.planner.reset_max_context();
    ctx.build(plan, task, plan.budget > Bytes{0} ? plan.budget : ctx.capacity, pl);
    final_context = std::min(final_context, ctx.planner.max_context());
    if (!plan.note.empty())
      pl.planner_note += (pl.planner_note.empty() ? "" : "; ") +
                         (n_wafers > 1 ? fmt::format("wafer {}: ", w) : std::string()) + plan.note;
  }
  pl.max_context_tokens = std::min(pl.max_context_tokens, final_context);
  // A whole-region layout does not change with the context: its longest is
  // what its cores hold to the byte (the planner's figure is a bound).
  if (req.strategy == StrategyKind::whole_region)
    pl.max_context_tokens = layout_max_context(model, pl, req, spec);
  pl.estimated_hop_bytes = estimate_hop_bytes(model, pl, spec.mesh_width);
  if (req.progress) req.progress(n_wafers, n_wafers);
  return pl;
}

RegionLayerBytes region_layer_bytes(const models::ModelConfig& model, const LayerStage& st,
                                    const PlacementRequest& req) {
  if (st.attention_apart())
    throw std::logic_error("region_layer_bytes: the layer's KV cache lies outside its region");
  Placement one;
  one.layers.push_back(st);
  one.head.tied = model.tie_embeddings;
  const fabric::Rect& r = st.strip;
  const std::size_t cores = static_cast<std::size_t>(r.width) * static_cast<std::size_t>(r.height);
  RegionLayerBytes b{std::vector<std::uint64_t>(cores, 0), std::vector<std::uint64_t>(cores, 0)};
  const auto at = [&](Coord c) {
    return static_cast<std::size_t>(c.y - r.y0) * static_cast<std::size_t>(r.width) +
           static_cast<std::size_t>(c.x - r.x0);
  };
  for_each_allocation(
      model, one, req,
      [&](const CoreAllocation& a) {
        (a.use == SramUse::kv_cache ? b.kv : b.own)[at(a.core)] += a.bytes.value;
      },
      [&](const MatrixAllocation& m) {
        m.for_each_tile(
            [&](int pi, int qi) { b.own[at(m.matrix.core(pi, qi))] += m.tile_bytes(pi, qi); });
      });
  // The one layer of `one` starts its run: every core of the region got the
  // scratch area, which a group holds once.
  const std::uint64_t scratch = region_scratch_bytes(model, st).value;
  for (std::uint64_t& own : b.own) own -= scratch;
  return b;
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
  // Whole-region layers: one layer's bytes per size of region, added at each
  // layer's region, and the scratch area once per group. The other layers
  // and the head are counted allocation by allocation.
  // (A layer whose KV cache lies apart from its region is counted with the
  // rest, and then so are all: its group's scratch is counted once that way.)
  const bool apart = std::any_of(pl.layers.begin(), pl.layers.end(),
                                 [](const LayerStage& st) { return st.attention_apart(); });
  Placement rest = pl;
  rest.layers.clear();
  std::map<std::pair<int, int>, std::vector<std::uint64_t>> own_by_size;
  // The layers of a group share one region: each region's cores get its
  // layers' bytes once, times how many there are (the same sums as adding
  // them layer by layer, in a pass over the region instead of one a layer).
  struct RegionLayers {
    int wafer;
    fabric::Rect strip;
    std::uint64_t layers = 0, scratch = 0;
  };
  std::vector<RegionLayers> regions;
  for (std::size_t l = 0; l < pl.layers.size(); ++l) {
    const LayerStage& st = pl.layers[l];
    if (!st.whole_region || apart) {
      rest.layers.push_back(st);
      continue;
    }
    const bool joins = l > 0 && st.joins_group_of(pl.layers[l - 1]);
    const std::uint64_t scratch = joins ? 0 : region_scratch_bytes(model, st).value;
    auto it = std::find_if(regions.begin(), regions.end(), [&](const RegionLayers& g) {
      return g.wafer == st.wafer && g.strip == st.strip;
    });
    if (it == regions.end()) it = regions.insert(regions.end(), RegionLayers{st.wafer, st.strip});
    ++it->layers;
    it->scratch += scratch;
    std::vector<std::uint64_t>& own = own_by_size[{st.strip.width, st.strip.height}];
    if (own.empty()) own = region_layer_bytes(model, st, req).own;
  }
  for (const RegionLayers& g : regions) {
    const fabric::Rect& r = g.strip;
    const std::vector<std::uint64_t>& own = own_by_size[{r.width, r.height}];
    for (int y = 0; y < r.height; ++y)
      for (int x = 0; x < r.width; ++x)
        other[index(g.wafer, Coord{r.x0 + x, r.y0 + y})] +=
            own[static_cast<std::size_t>(y) * static_cast<std::size_t>(r.width) +
                static_cast<std::size_t>(x)] *
                g.layers +
            g.scratch;
  }
  for_each_allocation(
      model, rest, req,
      [&](const CoreAllocation& a) {
        if (a.use != SramUse::kv_cache) other[index(a.wafer, a.core)] += a.bytes.value;
      },
      [&](const MatrixAllocation& m) {
        m.for_each_tile([&](int pi, int qi) {
          other[index(m.wafer, m.matrix.core(pi, qi))] += m.tile_bytes(pi, qi);
        });
      });
  // Bytes per KV slot on each core, summed over the layers caching there: a
  // core of a whole-region layer group keeps a slot of every layer of the
  // group per position it caches (the group's layers have the same blocks).
  const auto slot_bytes = [&](const AttentionPlacement& a, int j) {
    // A core of column j keeps its dims of each key and value.
    const auto dims = static_cast<std::uint64_t>(
        a.columns_per_head > 1 ? a.dim_begin(j + 1) - a.dim_begin(j) : model.head_dim);
    return 2 * dims * static_cast<std::uint64_t>(req.weight_bits) / 8;
  };
  // Layers with the same attention placement (a group's, on one region)
  // count once, times how many there are; the context they allow is the same
  // for each.
  struct Blocks {
    int wafer;  // the layer's (the cores are indexed on it)
    const AttentionPlacement* a;
    std::uint64_t layers;
  };
  std::vector<Blocks> blocks;
  for (const LayerStage& st : pl.layers) {
    auto it = std::find_if(blocks.begin(), blocks.end(), [&](const Blocks& b) {
      return b.wafer == st.wafer && *b.a == st.attention;
    });
    if (it == blocks.end())
      blocks.push_back(Blocks{st.wafer, &st.attention, 1});
    else
      ++it->layers;
  }
  std::vector<std::uint64_t> slots(other.size(), 0);
  for (const auto& [wafer, a, layers] : blocks)
    for (int h = 0; h < a->num_kv_heads; ++h)
      for (int i = 0; i < a->segment_length; ++i)
        for (int j = 0; j < a->columns_per_head; ++j)
          slots[index(wafer, a->block_core(h, i, j))] += slot_bytes(*a, j) * layers;
  const std::uint64_t capacity = spec.sram_per_core.value;
  const auto users = static_cast<std::uint64_t>(std::max(1, req.users));
  std::uint64_t context = static_cast<std::uint64_t>(model.max_position);
  for (const auto& [wafer, a, layers] : blocks) {
    for (int h = 0; h < a->num_kv_heads; ++h) {
      std::uint64_t fewest = UINT64_MAX;
      for (int i = 0; i < a->segment_length; ++i)
        for (int j = 0; j < a->columns_per_head; ++j) {
          const std::size_t c = index(wafer, a->block_core(h, i, j));
          fewest = std::min(fewest, (capacity > other[c] ? capacity - other[c] : 0) / slots[c]);
        }
      context = std::min(context, fewest * static_cast<std::uint64_t>(a->segment_length) / users);
    }
  }
  return static_cast<int>(context);
}

void for_each_allocation(const models::ModelConfig& model, const Placement& pl,
                         const PlacementRequest& req,
                         const std::function<void(const CoreAllocation&)>& visit,
                         const std::function<void(const MatrixAllocation&)>& matrices) {
  const int bits = req.weight_bits;
  const int kv_bits = req.weight_bits;
  const bool tied = model.tie_embeddings;
  const int group = model.num_heads / model.num_kv_heads;
  for (const LayerStage& st : pl.layers) {
    // A whole-region layer's input chunks, partial sums and attention
    // buffers are scratch its region's cores share (below).
    for (const MatrixPlacement* mp : st.matrices())
      visit_matrix(st.wafer, *mp, bits, visit, matrices, !st.whole_region);
    const AttentionPlacement& a = st.attention;
    const std::string kv = fmt::format("layer {} KV cache", st.layer);
    const std::string buffers = fmt::format("layer {} attention buffers", st.layer);
    for (int j = 0; j < a.columns_per_head; ++j) {
      // Column j of a kv head's block keeps its dims of each key and value
      // (all of them in a one-column segment).
      const auto dims = static_cast<std::uint64_t>(
          a.columns_per_head > 1 ? a.dim_begin(j + 1) - a.dim_begin(j) : model.head_dim);
      const std::uint64_t slot_bytes = 2 * dims * static_cast<std::uint64_t>(kv_bits) / 8;
      const std::uint64_t att_buffers = static_cast<std::uint64_t>(group) * (2 * dims + 2) * 4;
      for (int h = 0; h < a.num_kv_heads; ++h)
        for (int i = 0; i < a.segment_length; ++i) {
          const Coord core = a.block_core(h, i, j);
          visit({st.wafer, core,
                 Bytes{slot_bytes * static_cast<std::uint64_t>(a.max_positions_per_core)},
                 SramUse::kv_cache, kv});
          if (!st.whole_region || st.attention_apart())
            visit({st.wafer, core, Bytes{att_buffers}, SramUse::activations, buffers});
        }
    }
  }
  // Whole-region layers run one phase at a time on their region's cores:
  // each core keeps one scratch area for them all, as large as the largest
  // buffers any of their GEMVs or attention needs there.
  for (std::size_t l = 0; l < pl.layers.size(); ++l) {
    const LayerStage& st = pl.layers[l];
    if (!st.whole_region || (l > 0 && st.joins_group_of(pl.layers[l - 1]))) continue;
    const Bytes scratch = region_scratch_bytes(model, st);
    const std::string what = fmt::format("layer {} region scratch", st.layer);
    for (int y = st.strip.y0; y < st.strip.y0 + st.strip.height; ++y)
      for (int x = st.strip.x0; x < st.strip.x0 + st.strip.width; ++x)
        visit({st.wafer, Coord{x, y}, scratch, SramUse::activations, what});
  }
  const HeadStage& head = pl.head;
  visit_matrix(head.wafer, head.lm_head, bits, visit, matrices);
  if (!tied) visit_matrix(head.wafer, head.embedding, bits, visit, matrices);
  if (head.position_embedding.p() > 0)
    visit_matrix(head.wafer, head.position_embedding, bits, visit, matrices);
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
    if (model.has_o_bias()) biases(st.wafer, st.o, fmt::format("layer {} o bias", st.layer));
    if (model.is_gpt2()) {
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

void check_reachable(const models::ModelConfig& model, const Placement& pl,
                     const PlacementRequest& req, const fabric::WaferSpec& spec) {
  // No dead cores, or spares that leave the logical mesh whole.
  if ((spec.defect_probability() == 0.0 && spec.defect_cores.empty() &&
       spec.defect_file_cores.empty()) ||
      spec.redundancy.enabled())
    return;
  // Each wafer with dead cores: a flag per core the plan keeps data on.
  std::vector<std::unique_ptr<fabric::DefectMap>> defects;
  std::vector<std::vector<std::uint8_t>> used(static_cast<std::size_t>(pl.wafers));
  bool any = false;
  for (int w = 0; w < pl.wafers; ++w) {
    defects.push_back(std::make_unique<fabric::DefectMap>(fabric::wafer_instance(spec, w)));
    if (defects.back()->dead_count() == 0) continue;
    used[static_cast<std::size_t>(w)].assign(
        static_cast<std::size_t>(spec.mesh_width) * static_cast<std::size_t>(spec.mesh_height), 0);
    any = true;
  }
  if (!any) return;
  auto mark = [&](int wafer, Coord c, int n) {
    std::vector<std::uint8_t>& u = used[static_cast<std::size_t>(wafer)];
    if (u.empty()) return;
    const std::size_t at =
        static_cast<std::size_t>(c.y) * static_cast<std::size_t>(spec.mesh_width) +
        static_cast<std::size_t>(c.x);
    std::fill_n(u.begin() + static_cast<std::ptrdiff_t>(at), n, std::uint8_t{1});
  };
  for_each_allocation(
      model, pl, req, [&](const CoreAllocation& a) { mark(a.wafer, a.core, 1); },
      [&](const MatrixAllocation& m) {
        m.for_each_run([&](int, Coord first, int n) { mark(m.wafer, first, n); });
      });
  for (int w = 0; w < pl.wafers; ++w)
    if (!used[static_cast<std::size_t>(w)].empty())
      fabric::check_connected(fabric::LiveComponents(*defects[static_cast<std::size_t>(w)]),
                              used[static_cast<std::size_t>(w)], w, pl.wafers > 1, pl.wafers > 1);
}

void allocate_placement(const models::ModelConfig& model, const Placement& pl,
                        std::span<fabric::SramMap* const> srams, const PlacementRequest& req) {
  if (static_cast<int>(srams.size()) != pl.wafers)
    throw std::invalid_argument("allocate_placement: one SRAM map per wafer of the placement");
  // The allocator is the final word on fit.
  for_each_allocation(
      model, pl, req,
      [&](const CoreAllocation& a) {
        fabric::SramMap& sram = *srams[static_cast<std::size_t>(a.wafer)];
        sram.allocate(sram.mesh().id(a.core), a.bytes, a.use, a.what);
      },
      [&](const MatrixAllocation& m) {
        // Run by run along the mesh's rows (weights, then buffers, per run).
        fabric::SramMap& sram = *srams[static_cast<std::size_t>(m.wafer)];
        const MatrixPlacement& mp = m.matrix;
        m.for_each_run([&](int r, Coord first, int n) {
          if (n > 1) {
            const MatrixAllocation::Tile t1 = m.tile_of_run(r, 1);
            if (mp.core(t1.pi, t1.qi) != Coord{first.x + 1, first.y})
              throw std::logic_error("a matrix's tiles do not run along the mesh's rows");
          }
          const CoreId at = sram.mesh().id(first);
          sram.allocate_run(
              at, n,
              [&](int i) {
                const MatrixAllocation::Tile t = m.tile_of_run(r, i);
                return m.weight_bytes(t.pi, t.qi);
              },
              SramUse::weights, m.weights_what);
          if (m.buffers)
            sram.allocate_run(
                at, n,
                [&](int i) {
                  const MatrixAllocation::Tile t = m.tile_of_run(r, i);
                  return m.buffer_bytes(t.pi, t.qi);
                },
                SramUse::activations, m.buffers_what);
        });
      });
}

void allocate_placement(const models::ModelConfig& model, const Placement& pl,
                        std::span<fabric::Fabric* const> wafers, const PlacementRequest& req) {
  std::vector<fabric::SramMap*> srams;
  for (fabric::Fabric* f : wafers) srams.push_back(&f->sram());
  allocate_placement(model, pl, srams, req);
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
