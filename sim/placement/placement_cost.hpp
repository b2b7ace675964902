// Closed-form mesh traffic of a placement: hop-bytes (bytes x hops summed over
// every link) of one decode token, computed from the placement's geometry
// alone, without the flow model. Cheap enough to sit inside a search loop
// (a full Llama-3.1-8B wafer in well under a millisecond); `wafersim place`
// then confirms a chosen placement with the real per-link evaluation.
//
// What it counts, per stage, phase by phase as sim/program/program.cpp lowers them:
//  - a move of a vector from one layout to another: every overlap of a
//    source piece and a target piece is elements x 4 B x Manhattan distance
//    (dimension-ordered routes; the waypoint spreading of Executor::move makes
//    some routes longer, which this ignores);
//  - a mesh GEMV: column q's input chunk goes down P - 1 links; each row of
//    cores' partial sums travel sum over the reduction's combine steps of
//    |from - into| links (the exact hops of chain, tree, two-level and
//    k-tree, whose pass-through routes count at every link they cross, and
//    the k-tree's move from its root to the row's root); a ring moves
//    chunks: 4 (Q - 1)^2 / Q links per byte of the partial;
//  - RMSNorm: a 4 B partial reduced up the root column and broadcast back;
//  - attention (user 0, position 0 as `wafersim place` evaluates): q, k, v
//    moved to each kv head's segment top, q multicast down the segment,
//    partials reduced up it;
//  - between stages: the layer output to the next stage's input, the head's
//    embedding row (its middle row block, the token being unknown) to layer 0.
// A hand-over between wafers goes, as Executor::move routes it, along the
// source row to the east edge, over wafer I/O, then from the west edge along
// the target row: (mesh_width - 1 - x_src) + x_dst hops (I/O links are not
// mesh links). With mesh_width 0 such transfers count no hops.
//
// Critical-path latency estimate (cycles of one decode token for one user,
// what tokens/s per user is the inverse of): the same stages, timed as the
// executor would time them alone on an idle fabric, with no contention:
//  - a mesh GEMV: the input chunk down P - 1 hops (hop latency each, plus its
//    serialization), the largest tile's cycles (fabric/core_cost.hpp), then
//    the row reduction: Q - 1 hops of hop latency + reduce_hop_overhead and
//    the partial row's serialization once per store-and-forward level
//    (1 for chain, ceil(log2 Q) for tree, 2 for two-level); a k-tree: its
//    longest half-group chain (hop + add per core, one serialization), the
//    longer side of its roots' pass-through steps (hop latency per link, a
//    serialization and an add per root), the move to the row's root; a
//    ring: Q - 1 reduce-scatter steps (an edge of 2 (Q - 1) / Q links on
//    average, a chunk's serialization, an add) and Q - 1 all-gather steps;
//    an all-reduce adds the multicast back (a k-tree's from its root both
//    ways, a ring's none);
//  - attention at the full context (the last token, the slowest): per kv head
//    ceil(context / segment_length) positions on the busiest core of its
//    segment, plus the query multicast down and the partials reduced up the
//    segment (as a GEMV's multicast and reduction); kv heads run in parallel;
//  - a move: the longest hop distance between overlapping pieces x hop
//    latency plus the largest overlap's serialization;
//  - RMSNorm: its partials up the root column and the broadcast back.
// It ignores link contention and queueing (the engine has them), so it is a
// lower bound that ranks layouts; the engine is the measurement.
#pragma once

#include "fabric/wafer_spec.hpp"
#include "models/model_config.hpp"
#include "sim/placement/layout.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// Hop-bytes of moving a vector laid out as `from` to `to` (fp32 elements).
double move_hop_bytes(const Layout& from, const Layout& to, int mesh_width = 0);
// Hop-bytes of one mesh GEMV over `m` (input multicast and row reductions).
double gemv_hop_bytes(const MatrixPlacement& m);
// Hop-bytes of one decode token inside a layer stage (input already on o's roots).
double layer_hop_bytes(const models::ModelConfig& model, const LayerStage& st);
// Inside the head stage (input already on its input layout).
double head_hop_bytes(const models::ModelConfig& model, const HeadStage& head);
// Where a stage takes its input and leaves its output (as lower() lays them out).
Layout layer_input_layout(const LayerStage& st);
Layout layer_output_layout(const LayerStage& st);
Layout head_input_layout(const models::ModelConfig& model, const HeadStage& head);
// The embedding row of a token from the middle row block of the embedding.
Layout embedding_row_layout(const HeadStage& head);
// The whole token: every stage plus every hand-over between stages.
double estimate_hop_bytes(const models::ModelConfig& model, const Placement& placement,
                          int mesh_width = 0);
// The on-wafer legs of a stage's input arriving from the previous wafer (from
// the west edge) and of its output leaving for the next (to the east edge).
double from_west_edge_hop_bytes(const Layout& to);
double to_east_edge_hop_bytes(const Layout& from, int mesh_width);

// Critical-path latency estimates (cycles; see the header comment).
struct LatencyModel {
  const fabric::WaferSpec& spec;
  int weight_bits = 16;  // weights and KV cache
  int context = 1;       // positions attended by the last token
  double value_bytes = 4.0;  // a value on the fabric (Placement::value_bytes)
};
double move_latency_cycles(const LatencyModel& lm, const Layout& from, const Layout& to);
double gemv_latency_cycles(const LatencyModel& lm, const MatrixPlacement& m);
double attention_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                                const AttentionPlacement& a);
double layer_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                            const LayerStage& st);
double head_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                           const HeadStage& head);
// The whole token on one wafer: every stage plus every hand-over (as estimate_hop_bytes).
double estimate_latency_cycles(const LatencyModel& lm, const models::ModelConfig& model,
                               const Placement& placement);

}  // namespace wafersim::sim
