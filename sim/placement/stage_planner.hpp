// The layout of one stage inside the region a strategy gives it: a decoder
// layer's matrices and KV segments stacked in a block of cores, or the head's
// embedding / lm_head in a strip. Every strategy places through it; they
// differ only in the regions (sim/placement/strategy.hpp).
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fabric/defects.hpp"
#include "fabric/wafer_spec.hpp"
#include "models/model_config.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// "1.5 MiB": byte counts in fit errors and planner notes.
std::string human_bytes(Bytes bytes);

// What one stage needs of a matrix: its shape, and how its rows split.
struct MatrixShape {
  std::string name;
  int out = 0, in = 0;
  int granule = 1;  // output rows are split in whole groups of this many
  // Bytes per output row its root core holds besides the tile (O's roots
  // keep both RMSNorm gains of their rows, where the residual stream lives).
  int root_bytes_per_row = 0;
  // The placement.matrices override that applies to it (none: an expert's,
  // the router, gpt2's up matrix).
  std::optional<MatrixKind> kind = std::nullopt;
};

// Fewest rows of cores (with q = min(width, in) columns) so that every tile,
// its fp32 input chunk and its fp32 partial sums fit `capacity` bytes; -1
// when not even one row fits.
int min_rows(const MatrixShape& m, int width, Bytes capacity, int weight_bits);

// Plans one wafer's (or one candidate's) stages: the layout of a layer in a
// block and of the head in a strip, for a per-core byte budget.
class StagePlanner {
 public:
  StagePlanner(const models::ModelConfig& model, const fabric::WaferSpec& spec,
               const PlacementRequest& req);

  Bytes capacity() const { return Bytes{capacity_}; }
  // The smallest budget worth trying: one KV slot plus attention buffers.
  Bytes min_budget() const { return Bytes{att_buffers_ + slot_bytes_ + 1}; }

  // Layer l of wafer w in `block` at `budget` bytes per core. kv_segment > 0:
  // the KV segments get at least this many cores per kv head (as far as the
  // block's spare rows allow) before the matrices share the spare rows
  // (anneal searches over it: longer segments, less attention per core,
  // fewer rows per matrix). upward: stacked bottom to top
  // (LayerStage::upward). `strategy` names the block in fit errors.
  LayerStage layer(int l, int w, const fabric::Rect& block, Bytes budget,
                   const std::string& strategy, int kv_segment = 0, bool upward = false);
  // Layer l of wafer w in the whole-region dataflow: every matrix spans
  // `region` (qkv and gate_up transposed, o and down plain, so each GEMV's
  // output lies where the next one reads it), the KV cache spread over the
  // region's columns (AttentionPlacement::columns_per_head). `sharing`
  // layers share the region, so the layer gets budget / sharing per core.
  LayerStage region_layer(int l, int w, const fabric::Rect& region, int sharing, Bytes budget,
                          const std::string& strategy);
  // The same layer's layout alone, with no check of its SRAM or of dead
  // cores in `region` (a placement file checks both its own way). Throws
  // FitError only when the region is too short for the kv heads.
  LayerStage region_stage(int l, int w, const fabric::Rect& region,
                          const std::string& strategy) const;
  // The KV cache of layer l spread over `region` as region_stage spreads it
  // (kv heads side by side, each over its columns and every row).
  AttentionPlacement region_attention(int l, int w, const fabric::Rect& region,
                                      const std::string& strategy) const;
  // Fewest rows of cores the head needs in a strip `width` wide at `budget`.
  int head_min_rows(int width, Bytes budget) const;
  HeadStage head(int w, const fabric::Rect& strip, Bytes budget);

  // The longest context per user the layers planned since the last reset
  // could hold at full capacity (each layer() lowers it).
  int max_context() const { return max_context_; }
  void reset_max_context() { max_context_ = INT_MAX; }

 private:
  // Rows of cores per matrix of a layer in a block `block_width` wide.
  struct MatrixRows {
    std::vector<int> rows;   // fewest that fit the budget
    std::vector<int> width;  // columns of cores
    std::vector<int> fixed;  // rows a placement.matrices override asks for (0: none)
  };
  MatrixRows matrix_rows(int block_width, Bytes budget) const;
  // Lowers max_context_ to what this layout could cache at full capacity.
  void note_max_context(const MatrixRows& m, int clear_rows, int per_column);
  LayerStage assemble_layer(int l, int w, const fabric::Rect& block, const MatrixRows& m,
                            const std::vector<int>& y, const std::vector<int>& heights,
                            int per_column, bool upward) const;
  MatrixOverride override_of(std::optional<MatrixKind> kind) const;
  // K-tree groups for a kind: its override's reduction_groups, else the
  // scenario's (0: the default per line).
  int groups_of(std::optional<MatrixKind> kind) const {
    const int own = override_of(kind).reduction_groups;
    return own > 0 ? own : req_.reduction_groups;
  }
  // Where a layer's shapes are (shapes_): qkv, o, then the MLP's or the
  // experts' (the stacking order of a top-down layer).
  static constexpr std::size_t kQkv = 0, kO = 1, kFirstMlp = 2;
  // The parts of region_layer (stage_planner.cpp).
  MatrixPlacement region_matrix(std::size_t shape, int l, int w, const fabric::Rect& region,
                                bool transposed) const;
  void check_region_fit(const LayerStage& st, int sharing, Bytes budget,
                        const std::string& strategy);
  std::uint64_t region_fullest_core(const LayerStage& st, int sharing);
  // Per row of `r`: 1 when a core of that row (within r's columns) is dead.
  std::vector<char> dead_rows(const fabric::Rect& r) const;

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
  int max_context_ = INT_MAX;
  // region_fullest_core's figures by region width, height and sharing.
  std::map<std::tuple<int, int, int>, std::uint64_t> fullest_;
};

}  // namespace wafersim::sim
