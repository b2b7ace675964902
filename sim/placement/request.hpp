// What placement is asked for: the strategy and its parameters as a
// scenario chooses them, and the workload's needs (context, users, bits).
// Parsed once, by sim/config; plain values here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fabric/collectives.hpp"

namespace wafersim::sim {

// The placement strategies (sim/placement/strategies/, one file each).
enum class StrategyKind {
  layer_rectangles,
  serpentine,
  short_path,
  sram_balanced,
  anneal,
  whole_region
};
// Its name in scenarios, placement files and results ("layer-rectangles", ...).
const char* strategy_name(StrategyKind kind);
// The strategy of that name, if there is one.
std::optional<StrategyKind> parse_strategy(const std::string& name);
// Every strategy's name, in StrategyKind order.
std::vector<std::string> placement_strategies();

// anneal's default latency_weight: measured on Llama-3.1-8B / WSE-3
// (docs/modelling.md, placement section).
inline constexpr double kDefaultAnnealLatencyWeight = 1000.0;

// Simulated annealing over the assignment of layers to region slots
// (strategy `anneal`). Temperatures are fractions of the mean per-layer cost
// of the random starting assignment; the temperature falls geometrically
// from initial to final over `iterations` moves per candidate slot grid.
struct AnnealOptions {
  int iterations = 200000;
  double initial_temperature = 0.1;
  double final_temperature = 1e-4;
  // Cost = hop-bytes per token + sram_weight x the largest per-core SRAM
  // bytes of the grid (hop-bytes per byte; 0 = hop-bytes alone).
  double sram_weight = 0.0;
  // Cost += latency_weight x the closed-form critical-path latency of one
  // token (placement_cost.hpp: per stage its largest tiles, attention at the
  // context over its KV segment, multicast/reduction hops; per hand-over its
  // distance), in hop-bytes per cycle; 0 = traffic alone. The default is
  // the measured choice on Llama-3.1-8B / WSE-3 (docs/modelling.md).
  double latency_weight = kDefaultAnnealLatencyWeight;
  // Grids may have up to this fraction of k more slots than the k layers
  // (spare slots stay empty: smaller blocks, fewer hop-bytes, fuller cores).
  double spare_slots = 0.0;
  bool operator==(const AnnealOptions&) const = default;
};

// Cores kept free for I/O around the programmable area (the Cerebras SDK
// leaves 7 columns and 2 rows): ceil(columns/2) on the west, floor on the
// east, ceil(rows/2) on the north, floor on the south.
struct Halo {
  int columns = 0;
  int rows = 0;
  bool operator==(const Halo&) const = default;
};

// The kinds of matrix a scenario can override in every layer (or the head):
// the four matrices of a dense layer by rows and columns of cores and
// reduction, attention and lm_head (also the embedding's) by reduction only.
enum class MatrixKind { qkv, o, gate_up, down, attention, lm_head };
// Its name in scenarios ("qkv", "gate_up", ...).
const char* matrix_kind_name(MatrixKind kind);
// Every kind, in MatrixKind order.
std::vector<MatrixKind> matrix_kinds();
// Whether rows and columns of cores can be overridden (not attention, lm_head).
bool has_shape(MatrixKind kind);

// A scenario's override of one matrix kind's tiling: rows (P) and/or
// columns (Q) of cores, and the reduction scheme; 0 = the strategy's choice.
struct MatrixOverride {
  int rows = 0;
  int columns = 0;
  std::optional<fabric::ReductionScheme> reduction;
  int reduction_groups = 0;  // k-tree groups; 0 = the scenario's reduction_groups
  bool operator==(const MatrixOverride&) const = default;
};

// What a scenario chooses about placement (its `placement:` keys; a
// placement file aside): the strategy and its parameters.
struct PlacementChoices {
  StrategyKind strategy = StrategyKind::layer_rectangles;
  fabric::ReductionScheme reduction = fabric::ReductionScheme::chain;
  int reduction_groups = 0;  // k-tree: K groups (0: round(sqrt n) per line)
  int block_rows = 2;        // serpentine, sram-balanced: rows of layer blocks per wafer
  // whole-region: each wafer's layers in this many contiguous groups, each
  // group's layers sharing one region (1: every layer on the whole wafer,
  // tensor parallel; = layers: one layer per region, pipelined).
  int layer_groups = 1;
  std::uint64_t seed = 1;  // anneal
  AnnealOptions anneal;
  Halo halo;
  std::map<MatrixKind, MatrixOverride> matrices;
  // KV cache reserved for at least this many sequences of at least this many
  // positions each, whatever the workload needs (0: the workload's): a serving
  // deployment's placement, which every calibration run shares.
  int reserve_users = 0;
  int reserve_context_tokens = 0;
  // Bits of each value cores send one another (activations, partial sums,
  // attention's queries, scores and partials): 32 (fp32, what the cores
  // compute) or 16 (fp16/bf16, two to a 32-bit wavelet). Norm statistics,
  // token ids and (value, index) pairs stay 32-bit.
  int fabric_bits = 32;
  // Bytes of one such value (Placement::value_bytes, LatencyModel::value_bytes).
  int value_bytes() const { return fabric_bits / 8; }
  bool operator==(const PlacementChoices&) const = default;
};

// What place() is asked: the choices, and what the workload needs of them.
struct PlacementRequest : PlacementChoices {
  int context_tokens = 0;  // prompt + generated tokens to reserve KV for, per user
  int users = 1;
  int weight_bits = 16;
  // Not part of the placement: called with (wafers, w) as planning on
  // `wafers` wafers starts wafer w, and with (wafers, wafers) when that plan
  // is complete (a progress bar for long searches: anneal on many wafers).
  std::function<void(int, int)> progress;
  // Called with (percent done, 100) as a long search inside one wafer's plan
  // advances (anneal's iterations over its candidate grids), from 0 to 100.
  std::function<void(int, int)> search_progress;
};

}  // namespace wafersim::sim
