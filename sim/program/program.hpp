// Lowering: a placement becomes a program, per pipeline stage an ordered list
// of phases (move a vector between cores, mesh GEMV, RMSNorm, elementwise
// work, attention over the distributed KV cache, argmax). The engine
// interprets the phases in simulated time; functional mode also computes
// their numbers.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "models/model_config.hpp"
#include "sim/placement/layout.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// Thrown when the wafer side (placement, lowering, executor) cannot run a
// model the models/ side accepts: names the model, its architecture and what
// the wafer supports.
class UnsupportedModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks that lower() and the executor implement every feature of `model`'s
// architecture; throws UnsupportedModelError otherwise. Called before
// placement (sim::place_system) and by `wafersim validate`.
void check_wafer_supports(const models::ModelConfig& model);

// Named activation vectors of one token as it flows through a stage.
enum class Slot : int {
  x,
  normed,
  qkv,
  attn,
  proj,
  h,
  gate_up,
  act,
  ffn,
  out,
  logits,
  router,
  count
};

enum class PhaseKind {
  move,       // redistribute slot `a` to layout `target` (point-to-point transfers)
  rmsnorm,    // out = RMSNorm(a) with gains `gamma` (on a's layout, a line of cores)
  layernorm,  // out = LayerNorm(a) with gains and biases `gamma` (gpt2; a line of cores)
  gemv,       // out = matrix * a; `a` must sit on the matrix's input layout
  bias,       // a += the bias of `weights` in place (on the matrix's output roots)
  qk_norm,    // RMSNorm of each q and k head of `a` (qkv) in place (qwen3)
  rope,       // rotate the q and k parts of `a` in place
  attention,  // out = attention of `a` (qkv) over the layer's KV cache (appending k, v)
  silu_mul,   // out = silu(gate) * up of interleaved `a`
  gelu,       // a = gelu_tanh(a) in place (gpt2)
  moe,        // out = mixture of experts of `a` (normed, on the router's input)
              // chosen by `b` (router logits); see Executor::moe
  add,        // out = a + b (same layout)
  argmax,     // the next token from `a` (logits)
};
const char* phase_name(PhaseKind k);

// What a fused weight matrix is made of, for functional mode. up: gpt2's
// plain up matrix; expert_*: expert `Phase::expert`'s interleaved gate/up and
// down.
enum class WeightRef { qkv, o, gate_up, up, down, lm_head, router, expert_gate_up, expert_down };

struct Phase {
  PhaseKind kind = PhaseKind::move;
  std::string label;  // for traces and errors, e.g. "layer 3 qkv gemv"
  Slot a = Slot::x;
  Slot b = Slot::x;
  Slot out = Slot::x;
  Layout target;  // move: where the vector goes
  // move: 0 routes transfers dimension-ordered (XY); > 0 routes them through
  // that many waypoint columns (see Executor::move).
  int spread = 0;
  const MatrixPlacement* matrix = nullptr;
  WeightRef weights = WeightRef::qkv;
  const AttentionPlacement* attention = nullptr;
  const LayerStage* stage = nullptr;  // moe: the router and experts
  // Which norm's gains (and, for LayerNorm, biases).
  enum class Gamma { attn_norm, ffn_norm, final_norm } gamma = Gamma::attn_norm;
  // rmsnorm, layernorm: how the per-root statistics are reduced along the
  // line (a chain, or the whole-region layer's scheme).
  fabric::ReductionScheme statistic = fabric::ReductionScheme::chain;
  int statistic_groups = 0;  // k-tree groups of `statistic`
};

// A pipeline stage: a group of phases that runs on its own cores, taking one
// token at a time. A layer is cut into several stages at the boundaries of
// its regions (see lower()), so that while one token is in a layer's MLP the
// next can be in the same layer's attention.
struct StageProgram {
  std::string name;  // "layer 3", "layer 3 attention", ..., or "head"
  int layer = -1;    // -1 for the head
  // This stage picks up a layer where the previous stage left it (no move
  // onto `input` at entry); the last stage of a layer ends it (its `out`
  // becomes the next layer's x).
  bool continues_layer = false;
  bool ends_layer = true;
  std::vector<Phase> phases;
  Layout input;          // where the stage expects its input (slot x)
  int input_spread = 0;  // waypoint columns for the move onto `input`
  Layout output;         // where its output lands (slot out / x for the next stage)
};

struct Program {
  std::vector<StageProgram> stages;  // layers in order, then the head
  Layout
      embedding_output;  // pieces of an embedding row, per token (cores of row block 0; see engine)
};

// Each layer becomes five stages, cut where the work moves to another
// region: [norm, QKV GEMV, biases, qk-norm, RoPE] | [attention] | [O GEMV,
// residual, MLP norm] | [gate/up GEMV and activation, or router GEMV] |
// [down GEMV, residual] (MoE: [experts, residual]); then the head.
Program lower(const models::ModelConfig& model, const Placement& placement);

}  // namespace wafersim::sim
