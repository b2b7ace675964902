// Placement: where every weight tile, KV-cache slice and activation buffer of
// the model sits on the mesh. Pure C++ (no SystemC): placement is computed,
// checked against per-core SRAM, and then lowered to a program.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fabric/collectives.hpp"
#include "fabric/fabric.hpp"
#include "models/model_config.hpp"
#include "sim/placement/request.hpp"

namespace wafersim::sim {

// Balanced split of n items into k blocks: block i is [begin(i), begin(i+1)).
inline int block_begin(int n, int k, int i) {
  return static_cast<int>(static_cast<std::int64_t>(n) * i / k);
}

// A weight matrix W [out][in] tiled over rect: core (x0+q, y0+p) holds the
// tile of out rows block p and in columns block q. Input chunk q is multicast
// down column q; partial sums of row p are reduced west to the root (x0, y0+p).
// An `upward` matrix is the same turned upside down: tile row p is the p-th
// row of cores from the bottom of rect, input chunks enter at the bottom row
// and are multicast north (a layer stacked bottom to top, see
// LayerStage::upward).
// A `transposed` matrix is turned a quarter: tile (p, q) sits on core
// (x0+p, y0+q), input chunk q enters at the west core of row q and is
// multicast east, and the partial sums of column p are reduced north to the
// root (x0+p, y0). Its input then lies where a plain matrix's output does
// (down the west column) and its output where a plain matrix's input does
// (along the top row): in a region shared by every matrix of a layer, plain
// and transposed matrices alternate with no move between them (WaferLLM's
// MeshGEMV, He et al., OSDI 2025).
struct MatrixPlacement {
  std::string name;  // e.g. "layer 3 qkv"
  int wafer = 0;
  int out_features = 0;
  int in_features = 0;
  fabric::Rect rect;  // P = rect.height, Q = rect.width (transposed: the other way)
  fabric::ReductionScheme reduction = fabric::ReductionScheme::chain;
  int reduction_groups = 0;  // k-tree: K groups (0: k_tree_groups' default); else 0
  // Output rows are split in whole groups of this many rows (2 for the
  // interleaved gate/up matrix, so each root holds whole gate/up pairs).
  int row_granule = 1;
  bool upward = false;
  bool transposed = false;

  int p() const { return transposed ? rect.width : rect.height; }
  int q() const { return transposed ? rect.height : rect.width; }
  int row_begin(int pi) const {
    return row_granule * block_begin(out_features / row_granule, p(), pi);
  }
  int col_begin(int qi) const { return block_begin(in_features, q(), qi); }
  Coord core(int pi, int qi) const {
    if (transposed) return Coord{rect.x0 + pi, rect.y0 + qi};
    return Coord{rect.x0 + qi, upward ? rect.y0 + rect.height - 1 - pi : rect.y0 + pi};
  }
  // The way input chunks travel from tile row 0 (south, or north when
  // upward; east when transposed).
  fabric::Direction multicast_direction() const {
    if (transposed) return fabric::Direction::east;
    return upward ? fabric::Direction::north : fabric::Direction::south;
  }
  // The way the partial sums of a tile row lie from its root (east; south
  // when transposed).
  fabric::Direction reduction_direction() const {
    return transposed ? fabric::Direction::south : fabric::Direction::east;
  }
  Coord root(int pi) const { return core(pi, 0); }
  // The largest tile's rows (row_begin's blocks differ by at most one
  // granule), and its elements.
  std::uint64_t max_tile_rows() const;
  std::uint64_t max_tile_elements() const;
  bool operator==(const MatrixPlacement&) const = default;
};

// The KV cache of every kv head of one layer: kv head h owns a vertical
// segment of `segment_length` cores. Each user has `context` slots; slot
// s = user * context + position is cached on core (s mod segment_length), so
// one user's positions go round-robin over the segment. Partial attention
// results are reduced up the segment to its first core.
//
// With `columns_per_head` c > 1 (the whole-region dataflow), kv head h owns
// a block of c columns of `segment_length` cores instead: a position is
// cached on one row of the block, its head dimensions split over the c
// columns (column j holds dims dim_begin(j) .. dim_begin(j + 1) of every
// key and value of its row), so attention is two distributed GEMVs: the
// scores of each row all-reduced along the row, the weighted values
// reduced up each column (sequence on one axis, head dimension on the
// other, as WaferLLM spreads its KV cache; He et al., OSDI 2025).
struct AttentionPlacement {
  int wafer = 0;
  fabric::Rect rect;
  int num_kv_heads = 0;
  int segment_length = 0;       // cores per kv head (rows of its block)
  int segments_per_column = 0;  // kv heads stacked in one column (1 when c > 1)
  int columns_per_head = 1;     // c: columns of a kv head's block
  int head_dim = 0;             // the model's, to split it over the c columns
  fabric::ReductionScheme reduction = fabric::ReductionScheme::chain;
  int reduction_groups = 0;        // k-tree: K groups (0: k_tree_groups' default); else 0
  int max_positions_per_core = 0;  // KV slots reserved per core
  int context = 0;                 // slots per user
  int users = 1;

  Coord segment_core(int kv_head, int i) const {
    return Coord{rect.x0 + kv_head / segments_per_column * columns_per_head,
                 rect.y0 + (kv_head % segments_per_column) * segment_length + i};
  }
  // Core (row i, column j) of kv head h's block.
  Coord block_core(int kv_head, int i, int j) const {
    const Coord c = segment_core(kv_head, i);
    return Coord{c.x + j, c.y};
  }
  // The first head dimension column j of a block holds.
  int dim_begin(int j) const { return block_begin(head_dim, columns_per_head, j); }
  // Index (within the segment) of the core caching `position` of `user`.
  int slot_core(int user, int position) const {
    return static_cast<int>((static_cast<std::int64_t>(user) * context + position) %
                            segment_length);
  }
  // How many of positions [0, positions) of `user` core i caches.
  int positions_on_core(int user, int positions, int i) const {
    const int offset = slot_core(user, 0);
    const int rel = (i - offset + segment_length) % segment_length;
    return positions / segment_length + (rel < positions % segment_length ? 1 : 0);
  }
  bool operator==(const AttentionPlacement&) const = default;
};

// One expert of a mixture-of-experts MLP: its own gate/up (interleaved, as
// the dense gate_up) and down matrices, each on its own rectangle of cores.
struct ExpertPlacement {
  MatrixPlacement gate_up, down;
  bool operator==(const ExpertPlacement&) const = default;
};

// Where the query, key and value rows of a layer's fused qkv matrix lie, and
// so the elements of the qkv vector its GEMV gives. By default in the
// checkpoint's order: every query head, then every key head, then every value
// head. `by_kv_head` groups them by kv head: kv head h's g = num_heads /
// num_kv_heads query heads, then its key, then its value ((g + 2) x head_dim
// rows). The whole-region dataflow groups them (LayerStage::qkv_rows): its
// transposed qkv leaves its output along the region's top row, in row order
// over the columns, and kv head h's KV cache lies on its own block of
// columns, so grouped rows land each kv head's query, key and value over its
// own block, and the hand-over to attention stays inside the block instead
// of every kv head's slices crossing the top row at once (docs/modelling.md).
// In both orders a kv head's query heads are contiguous rows.
class QkvRows {
 public:
  QkvRows(const models::ModelConfig& m, bool by_kv_head)
      : hd_(m.head_dim),
        heads_(m.num_heads),
        g_(m.num_heads / m.num_kv_heads),
        kv_dim_(m.kv_dim()),
        q_dim_(m.q_dim()),
        by_kv_head_(by_kv_head) {}
  bool by_kv_head() const { return by_kv_head_; }
  // The first row of query head `head`, key head and value head `kv_head`.
  int q(int head) const { return by_kv_head_ ? head / g_ * group() + head % g_ * hd_ : head * hd_; }
  int k(int kv_head) const {
    return by_kv_head_ ? kv_head * group() + g_ * hd_ : q_dim_ + kv_head * hd_;
  }
  int v(int kv_head) const { return by_kv_head_ ? k(kv_head) + hd_ : k(kv_head) + kv_dim_; }
  // The first row of the i-th head that RoPE rotates and qk-norm normalises:
  // the query heads 0 .. num_heads - 1, then the key heads.
  int rotary(int i) const { return i < heads_ ? q(i) : k(i - heads_); }
  // How many of rows [lo, hi) are query or key rows.
  int qk_rows_in(int lo, int hi) const;

 private:
  int group() const { return (g_ + 2) * hd_; }
  int hd_, heads_, g_, kv_dim_, q_dim_;
  bool by_kv_head_;
};

// One pipeline stage: a decoder layer, or the head (embedding + final norm +
// lm_head) that turns the last hidden state into the next token.
struct LayerStage {
  int layer = 0;
  int wafer = 0;
  fabric::Rect strip;
  // gate_up holds the interleaved gate/up rows of a SwiGLU MLP, or (gpt2,
  // row_granule 1) the plain up matrix of the GELU MLP. A mixture of experts
  // leaves gate_up and down empty (0 x 0) and has router + experts instead.
  MatrixPlacement qkv, o, gate_up, down;
  MatrixPlacement router;                // [num_experts][hidden]: MoE only
  std::vector<ExpertPlacement> experts;  // [num_experts]: MoE only
  AttentionPlacement attention;
  // The whole-region dataflow: every matrix spans `strip` (shared with the
  // other layers of its group), qkv and gate_up transposed, o and down
  // plain, the KV cache spread over the region (columns_per_head > 1), the
  // norms' statistics reduced with the matrices' scheme.
  bool whole_region = false;

  // Every matrix with cores (qkv, o, then gate_up/down or router and the
  // experts' gate_up/down in order).
  std::vector<const MatrixPlacement*> matrices() const;
  // Stacked bottom to top (qkv at the bottom, down at the top, every matrix
  // upward). The strategies (all but anneal) turn a layer over when that
  // brings its input (o's roots) nearer the previous layer's output: in
  // layer-rectangles' strips every other dense layer, so that a top-down
  // layer's output (down's roots, at its bottom) is next to the next layer's
  // input (low in a bottom-up one), and back (docs/modelling.md).
  bool upward() const { return qkv.upward; }
  // A whole-region layer whose KV cache lies on a region of its own (a
  // placement file may put it on cores the layer's region leaves free): its
  // attention buffers are then on those cores, not in the region's scratch.
  bool attention_apart() const { return whole_region && !strip.encloses(attention.rect); }
  // Whether this layer is of the layer group of `before` (the layer before
  // it): both whole-region on the same region of the same wafer, so that
  // the region's cores hold one scratch area for them both.
  bool joins_group_of(const LayerStage& before) const {
    return whole_region && before.whole_region && strip == before.strip && wafer == before.wafer;
  }
  // The order of its qkv rows: grouped by kv head in the whole-region
  // dataflow (QkvRows).
  QkvRows qkv_rows(const models::ModelConfig& m) const { return QkvRows(m, whole_region); }
  bool operator==(const LayerStage&) const = default;
};

struct HeadStage {
  int wafer = 0;
  fabric::Rect strip;
  MatrixPlacement embedding;  // [vocab][hidden]; the same placement as lm_head when tied
  MatrixPlacement lm_head;    // [vocab][hidden]
  // [max_position][hidden]: gpt2's learned position embeddings, below the
  // embedding; 0 x 0 for the other architectures.
  MatrixPlacement position_embedding;
  bool tied = false;
  bool operator==(const HeadStage&) const = default;
};

struct Placement {
  std::string strategy;
  // How the strategy chose its regions (grid, cost), for reports.
  std::string planner_note;
  // The closed-form hop-bytes per token of the chosen layout (placement_cost.hpp).
  double estimated_hop_bytes = 0.0;
  int context_tokens = 0;  // KV slots reserved per sequence
  int users = 1;           // sequences with their own KV cache
  int wafers = 1;          // wafers in the pipeline (layers split in contiguous runs)
  // Bytes of a value on the fabric (PlacementChoices::value_bytes).
  int value_bytes = 4;
  // Longest context per user this layout could hold with the same matrices
  // (every row of cores the matrices leave given to the KV cache).
  int max_context_tokens = 0;
  std::vector<LayerStage> layers;
  HeadStage head;

  // The order of layer `layer`'s qkv rows (LayerStage::qkv_rows).
  QkvRows qkv_rows(const models::ModelConfig& m, int layer) const {
    return layers.at(static_cast<std::size_t>(layer)).qkv_rows(m);
  }
};

// The scratch bytes every core of a whole-region layer's region keeps for
// the input chunks and partial sums of its GEMVs and its attention buffers:
// one area for every phase of every layer sharing the region (they run one
// at a time), as large as the largest of them.
Bytes region_scratch_bytes(const models::ModelConfig& model, const LayerStage& st);

// The rectangle of `spec`'s mesh that placement may use (the mesh less the halo).
fabric::Rect usable_area(const fabric::WaferSpec& spec, const Halo& halo);

// Bytes of every layer's KV cache: context_tokens x users (at least 1) slots
// of keys and values at the weights' bits.
Bytes kv_cache_bytes(const models::ModelConfig& model, const PlacementRequest& req);

// Places the model and allocates every byte in fabric.sram(). Throws
// fabric::FitError (with how much is needed and how much there is) when the
// model does not fit.
Placement place(const models::ModelConfig& model, fabric::Fabric& fabric,
                const PlacementRequest& request);
// Where everything goes on `n_wafers` wafers of `spec`, checking every fit
// rule, without allocating (cheap: used to search for the fewest wafers).
Placement plan_placement(const models::ModelConfig& model, const fabric::WaferSpec& spec,
                         int n_wafers, const PlacementRequest& request);
// One allocation a placement makes: `bytes` on `core` of wafer `wafer`, for
// `use`; `what` names it in a FitError.
struct CoreAllocation {
  int wafer = 0;
  Coord core;
  Bytes bytes;
  fabric::SramUse use = fabric::SramUse::weights;
  const std::string& what;
};
// A matrix's allocations at once: tile (pi, qi) on matrix.core(pi, qi)
// holds weight_bytes(pi, qi) of weights and, with buffers (its input chunk
// and partial sums), buffer_bytes(pi, qi) of activations. for_each_core
// visits them as for_each_allocation does core by core: the mesh's rows in
// turn, x fastest (the order the cores lie in memory), a core's weights
// before its buffers.
struct MatrixAllocation {
  int wafer = 0;
  const MatrixPlacement& matrix;
  std::span<const std::uint64_t> heights;  // rows of each tile row
  std::span<const std::uint64_t> widths;   // columns of each tile column
  int weight_bits = 16;
  bool buffers = true;
  const std::string& weights_what;
  const std::string& buffers_what;
  std::uint64_t weight_bytes(int pi, int qi) const {
    return (heights[static_cast<std::size_t>(pi)] * widths[static_cast<std::size_t>(qi)] *
                static_cast<std::uint64_t>(weight_bits) +
            7) /
           8;
  }
  std::uint64_t buffer_bytes(int pi, int qi) const {
    return (heights[static_cast<std::size_t>(pi)] + widths[static_cast<std::size_t>(qi)]) * 4;
  }
  // Everything tile (pi, qi) puts on its core: its weights, and its buffers
  // when it has them (what for_each_core visits there).
  std::uint64_t tile_bytes(int pi, int qi) const {
    return weight_bytes(pi, qi) + (buffers ? buffer_bytes(pi, qi) : 0);
  }
  // The tile row and column of tile i of run r (below).
  struct Tile {
    int pi, qi;
  };
  Tile tile_of_run(int r, int i) const { return matrix.transposed ? Tile{i, r} : Tile{r, i}; }
  // Calls f(r, first, n) for every run of tiles along a row of the mesh, in
  // that order: tile i of run r (tile_of_run) on the core i to the east of
  // `first`. A plain matrix's runs are its tile rows, a transposed one's its
  // tile columns (tile row pi on mesh column x0 + pi).
  template <class F>
  void for_each_run(F&& f) const {
    const int runs = matrix.transposed ? matrix.q() : matrix.p();
    const int n = matrix.transposed ? matrix.p() : matrix.q();
    for (int r = 0; r < runs; ++r) {
      const Tile t0 = tile_of_run(r, 0);
      f(r, matrix.core(t0.pi, t0.qi), n);
    }
  }
  // Calls f(pi, qi) for every tile in that order.
  template <class F>
  void for_each_tile(F&& f) const {
    for_each_run([&](int r, Coord, int n) {
      for (int i = 0; i < n; ++i) {
        const Tile t = tile_of_run(r, i);
        f(t.pi, t.qi);
      }
    });
  }
  void for_each_core(const std::function<void(const CoreAllocation&)>& visit) const;
};
// Every allocation of a planned placement (weight tiles and buffers, KV
// slots, norm gains and biases on their roots), in the order
// allocate_placement makes them: the one account of a placement's bytes,
// which placement files check their SRAM with too. With `matrices`, each
// matrix's tiles go to it as one MatrixAllocation instead of core by core
// to `visit` (for callers that add up billions of tiles: a large
// whole-region model).
void for_each_allocation(const models::ModelConfig& model, const Placement& placement,
                         const PlacementRequest& request,
                         const std::function<void(const CoreAllocation&)>& visit,
                         const std::function<void(const MatrixAllocation&)>& matrices = nullptr);

// Throws fabric::FitError when a wafer's dead cores cut some of the cores the
// plan keeps data on off from the others, or (with several wafers) cut a
// wafer's east or west edge off from them: no route could join them
// (fabric::check_connected). Nothing to check on wafers without dead cores.
void check_reachable(const models::ModelConfig& model, const Placement& placement,
                     const PlacementRequest& request, const fabric::WaferSpec& spec);

// One whole-region layer's bytes on each core of its region (row-major from
// the region's corner), as the allocator counts them (for_each_allocation),
// besides the region's one scratch area: `own` its tiles, norm gains and
// biases, `kv` its KV slots. Every layer of a group adds the same to each
// core, and layers of one shape on regions of one size the same pattern.
// For a layer whose KV cache is in its region (not attention_apart()).
struct RegionLayerBytes {
  std::vector<std::uint64_t> own, kv;
};
RegionLayerBytes region_layer_bytes(const models::ModelConfig& model, const LayerStage& st,
                                    const PlacementRequest& req);

// The longest context per user a fixed layout can cache: on every attention
// core, the SRAM left by everything but the KV cache holds whole KV slots;
// a kv head's positions go round its segment, so its context is the segment
// length x the fewest slots of its cores, divided among the users; the
// layout's is its shortest layer's, at most the model's max_position. (The
// strategies report the longest a re-plan of the same shape could reach.)
int layout_max_context(const models::ModelConfig& model, const Placement& placement,
                       const PlacementRequest& req, const fabric::WaferSpec& spec);
// Allocates a planned placement's bytes in the wafers' SRAM maps (one per
// wafer of the placement; FitError where a core cannot hold them).
void allocate_placement(const models::ModelConfig& model, const Placement& placement,
                        std::span<fabric::SramMap* const> srams, const PlacementRequest& request);
// The same on the wafers' fabrics.
void allocate_placement(const models::ModelConfig& model, const Placement& placement,
                        std::span<fabric::Fabric* const> wafers, const PlacementRequest& request);
// plan_placement + allocate_placement. Wafer w holds a contiguous run of
// layers (balanced counts), the last one also the head.
Placement place(const models::ModelConfig& model, std::span<fabric::Fabric* const> wafers,
                const PlacementRequest& request);

}  // namespace wafersim::sim
