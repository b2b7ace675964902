#include "sim/program/program.hpp"

#include <fmt/format.h>

namespace wafersim::sim {

void check_wafer_supports(const models::ModelConfig& model) {
  using models::Architecture;
  const char* what = nullptr;
  switch (model.architecture) {
    case Architecture::llama:
    case Architecture::mistral:
    case Architecture::qwen2:
    case Architecture::qwen3:
    case Architecture::mixtral:
    case Architecture::qwen3_moe:
      break;
    case Architecture::gpt2:
      // gpt2 lowers a dense GELU MLP; a gpt2 with experts is no model we know.
      if (model.is_moe()) what = "a mixture of GELU experts";
      break;
    default:
      what = "an architecture lower() does not know";
  }
  if (what == nullptr) return;
  throw UnsupportedModelError(fmt::format(
      "model {} (architecture {}) needs {}, which the wafer cannot run; the wafer runs the "
      "llama, mistral (sliding window), qwen2 (qkv biases), qwen3 (qk-norm), mixtral (mixture "
      "of SwiGLU experts), qwen3_moe (qk-norm and a mixture of SwiGLU experts) and gpt2 "
      "(LayerNorm, biases, GELU MLP, learned positions) "
      "architectures",
      model.name, models::architecture_name(model.architecture), what));
}

const char* phase_name(PhaseKind k) {
  switch (k) {
    case PhaseKind::move:
      return "move";
    case PhaseKind::rmsnorm:
      return "rmsnorm";
    case PhaseKind::gemv:
      return "gemv";
    case PhaseKind::rope:
      return "rope";
    case PhaseKind::attention:
      return "attention";
    case PhaseKind::silu_mul:
      return "silu_mul";
    case PhaseKind::add:
      return "add";
    case PhaseKind::argmax:
      return "argmax";
    case PhaseKind::layernorm:
      return "layernorm";
    case PhaseKind::bias:
      return "bias";
    case PhaseKind::qk_norm:
      return "qk_norm";
    case PhaseKind::gelu:
      return "gelu";
    case PhaseKind::moe:
      return "moe";
  }
  return "?";
}

namespace {

// A vector of n elements split evenly over the first k cores of column x0,
// from row y0 down: where the head keeps the final hidden state.
Layout column_layout(int wafer, int x0, int y0, int k, int n) {
  Layout l;
  for (int i = 0; i < k; ++i)
    l.push_back(Piece{Coord{x0, y0 + i}, block_begin(n, k, i), block_begin(n, k, i + 1), wafer});
  return l;
}

Phase move(Slot s, Layout target, std::string label) {
  Phase p;
  p.kind = PhaseKind::move;
  p.a = s;
  p.out = s;
  p.target = std::move(target);
  p.label = std::move(label);
  return p;
}

Phase gemv(const MatrixPlacement& m, WeightRef w, Slot in, Slot out) {
  Phase p;
  p.kind = PhaseKind::gemv;
  p.matrix = &m;
  p.weights = w;
  p.a = in;
  p.out = out;
  p.label = m.name + " gemv";
  return p;
}

// Appends a layer's phases as several stages, cut before the phases that
// `cuts` names: the first stage keeps the layer's input, the last its output.
void push_layer(Program& prog, StageProgram whole,
                const std::vector<std::pair<std::size_t, std::string>>& cuts) {
  std::size_t begin = 0;
  for (std::size_t c = 0; c <= cuts.size(); ++c) {
    const std::size_t end = c < cuts.size() ? cuts[c].first : whole.phases.size();
    StageProgram part;
    part.layer = whole.layer;
    part.name = c == 0 ? whole.name : cuts[c - 1].second;
    part.continues_layer = c > 0;
    part.ends_layer = c == cuts.size();
    if (c == 0) {
      part.input = whole.input;
      part.input_spread = whole.input_spread;
    }
    if (part.ends_layer) part.output = whole.output;
    part.phases.assign(whole.phases.begin() + static_cast<std::ptrdiff_t>(begin),
                       whole.phases.begin() + static_cast<std::ptrdiff_t>(end));
    prog.stages.push_back(std::move(part));
    begin = end;
  }
}

Phase unary(PhaseKind k, Slot a, Slot out, std::string label) {
  Phase p;
  p.kind = k;
  p.a = a;
  p.out = out;
  p.label = std::move(label);
  return p;
}

}  // namespace

Program lower(const models::ModelConfig& model, const Placement& pl) {
  Program prog;
  const bool gpt2 = model.is_gpt2();
  // RMSNorm, or LayerNorm (gpt2), of slot `a` into `out`.
  auto norm = [&](Slot a, Slot out, Phase::Gamma g, std::string label) {
    Phase p = unary(gpt2 ? PhaseKind::layernorm : PhaseKind::rmsnorm, a, out,
                    std::move(label) + (gpt2 ? " layernorm" : " rmsnorm"));
    p.gamma = g;
    return p;
  };
  auto bias = [](const MatrixPlacement& m, WeightRef w, Slot s) {
    Phase p = unary(PhaseKind::bias, s, s, m.name + " bias");
    p.matrix = &m;
    p.weights = w;
    return p;
  };
  for (const LayerStage& st : pl.layers) {
    StageProgram sp;
    sp.layer = st.layer;
    sp.name = fmt::format("layer {}", st.layer);
    const std::string L = sp.name;
    const Layout residual = output_layout(st.o);  // the residual stream lives at o's roots
    sp.input = residual;
    sp.input_spread = st.strip.width - 1;
    auto& ph = sp.phases;
    // Where the layer is cut into stages: (index of the first phase, name).
    std::vector<std::pair<std::size_t, std::string>> cuts;
    auto cut = [&](const char* part) { cuts.emplace_back(ph.size(), L + " " + part); };
    // A whole-region layer's norms reduce their statistics along the
    // residual's line (the region's west column) as its matrices reduce.
    auto layer_norm = [&](Slot a, Slot out, Phase::Gamma g, std::string label) {
      Phase p = norm(a, out, g, std::move(label));
      if (st.whole_region) {
        p.statistic = st.o.reduction;
        p.statistic_groups = st.o.reduction_groups;
      }
      return p;
    };
    ph.push_back(layer_norm(Slot::x, Slot::normed, Phase::Gamma::attn_norm, L + " attn"));
    ph.push_back(move(Slot::normed, input_layout(st.qkv), L + " move to qkv"));
    ph.push_back(gemv(st.qkv, WeightRef::qkv, Slot::normed, Slot::qkv));
    if (model.has_qkv_bias()) ph.push_back(bias(st.qkv, WeightRef::qkv, Slot::qkv));
    if (model.has_qk_norm())
      ph.push_back(unary(PhaseKind::qk_norm, Slot::qkv, Slot::qkv, L + " qk-norm"));
    if (!gpt2) ph.push_back(unary(PhaseKind::rope, Slot::qkv, Slot::qkv, L + " rope"));
    Phase att = unary(PhaseKind::attention, Slot::qkv, Slot::attn, L + " attention");
    att.attention = &st.attention;
    cut("attention");
    ph.push_back(att);
    cut("o");
    ph.push_back(move(Slot::attn, input_layout(st.o), L + " move to o"));
    ph.push_back(gemv(st.o, WeightRef::o, Slot::attn, Slot::proj));
    if (model.has_o_bias()) ph.push_back(bias(st.o, WeightRef::o, Slot::proj));
    Phase add1 = unary(PhaseKind::add, Slot::x, Slot::h, L + " residual");
    add1.b = Slot::proj;
    ph.push_back(add1);
    ph.push_back(layer_norm(Slot::h, Slot::normed, Phase::Gamma::ffn_norm, L + " ffn"));
    if (model.is_moe()) {
      // Router GEMV, then the chosen experts (Executor::moe), whose weighted
      // outputs are combined on the residual cores (o's roots).
      cut("router");
      ph.push_back(move(Slot::normed, input_layout(st.router), L + " move to router"));
      ph.push_back(gemv(st.router, WeightRef::router, Slot::normed, Slot::router));
      cut("experts");
      Phase moe = unary(PhaseKind::moe, Slot::normed, Slot::ffn, L + " experts");
      moe.b = Slot::router;
      moe.stage = &st;
      moe.target = residual;
      moe.spread = st.strip.width - 1;
      ph.push_back(moe);
      Phase add2 = unary(PhaseKind::add, Slot::h, Slot::out, L + " residual");
      add2.b = Slot::ffn;
      ph.push_back(add2);
      sp.output = residual;
      push_layer(prog, std::move(sp), cuts);
      continue;
    }
    cut(gpt2 ? "up" : "gate_up");
    ph.push_back(move(Slot::normed, input_layout(st.gate_up),
                      L + (gpt2 ? " move to up" : " move to gate_up")));
    if (gpt2) {
      ph.push_back(gemv(st.gate_up, WeightRef::up, Slot::normed, Slot::act));
      ph.push_back(bias(st.gate_up, WeightRef::up, Slot::act));
      ph.push_back(unary(PhaseKind::gelu, Slot::act, Slot::act, L + " gelu"));
    } else {
      ph.push_back(gemv(st.gate_up, WeightRef::gate_up, Slot::normed, Slot::gate_up));
      ph.push_back(unary(PhaseKind::silu_mul, Slot::gate_up, Slot::act, L + " silu*up"));
    }
    cut("down");
    ph.push_back(move(Slot::act, input_layout(st.down), L + " move to down"));
    ph.push_back(gemv(st.down, WeightRef::down, Slot::act, Slot::ffn));
    if (gpt2) ph.push_back(bias(st.down, WeightRef::down, Slot::ffn));
    ph.push_back(move(Slot::h, output_layout(st.down), L + " move residual"));
    ph.back().spread = st.strip.width - 1;  // o roots -> down roots: one column to another
    Phase add2 = unary(PhaseKind::add, Slot::h, Slot::out, L + " residual");
    add2.b = Slot::ffn;
    ph.push_back(add2);
    sp.output = output_layout(st.down);
    push_layer(prog, std::move(sp), cuts);
  }
  // Between stages the engine moves `out` to the next stage's input layout.
  const HeadStage& head = pl.head;
  StageProgram hp;
  hp.name = "head";
  const int home_cores = std::min(head.lm_head.p(), model.hidden_size);
  hp.input = column_layout(head.wafer, head.lm_head.root(0).x, head.lm_head.root(0).y, home_cores,
                           model.hidden_size);
  const Phase fnorm = norm(Slot::x, Slot::normed, Phase::Gamma::final_norm, "final");
  hp.input_spread = head.strip.width - 1;
  hp.phases.push_back(fnorm);
  hp.phases.push_back(move(Slot::normed, input_layout(head.lm_head), "move to lm_head"));
  hp.phases.push_back(gemv(head.lm_head, WeightRef::lm_head, Slot::normed, Slot::logits));
  hp.phases.push_back(unary(PhaseKind::argmax, Slot::logits, Slot::logits, "argmax"));
  hp.output = output_layout(head.lm_head);
  prog.stages.push_back(std::move(hp));
  return prog;
}

}  // namespace wafersim::sim
