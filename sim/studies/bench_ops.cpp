#include "sim/studies/bench_ops.hpp"

#include <algorithm>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fabric/fabric.hpp"
#include "sim/config/scenario.hpp"
#include "sim/exec/executor.hpp"
#include "sim/placement/layout.hpp"
#include "sim/placement/route_budget.hpp"
#include "sim/placement/stage_planner.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {
namespace {

// One timed step of an operation: when its output was complete and why.
struct Step {
  std::string what;
  Timed done;
  // Timed alone from cycle 0 on an idle fabric, not after the step before:
  // its cycles are its own end, not the time since the step before's.
  bool alone = false;
};

nlohmann::json breakdown_json(const CycleBreakdown& b) {
  return {{"compute", b.compute.value},
          {"sram", b.sram.value},
          {"hops", b.hops.value},
          {"serialization", b.serialization.value},
          {"contention", b.contention.value},
          {"io", b.io.value},
          {"queueing", b.queueing.value}};
}

std::string breakdown_text(const CycleBreakdown& b) {
  return fmt::format(
      "compute {} | sram {} | hops {} | serialization {} | contention {} | queueing {}",
      b.compute.value, b.sram.value, b.hops.value, b.serialization.value, b.contention.value,
      b.queueing.value);
}

fabric::WaferSpec region_spec(const BenchOpOptions& o) {
  fabric::WaferSpec spec = load_hardware_preset(o.hardware, o.preset_dir);
  if (o.instruction_overhead) spec.instruction_overhead = Cycles{*o.instruction_overhead};
  if (o.width < 1 || o.height < 1 || o.width > spec.mesh_width || o.height > spec.mesh_height)
    throw std::invalid_argument(
        fmt::format("--region {}x{}: must be at least 1x1 and fit {}'s {} x {} mesh", o.width,
                    o.height, spec.name, spec.mesh_width, spec.mesh_height));
  return spec;
}

std::vector<Step> gemv_steps(const BenchOpOptions& o, const fabric::WaferSpec& spec) {
  if (o.out < 1 || o.in < 1) throw std::invalid_argument("--matrix: rows and columns >= 1");
  fabric::Fabric fab(spec);
  const models::ModelConfig none;
  PlacementChoices values;
  values.fabric_bits = o.fabric_bits;
  Placement pl;
  pl.value_bytes = values.value_bytes();
  const Program prog;
  Executor ex(fab, none, pl, prog, nullptr, o.bits);
  MatrixPlacement m;
  m.name = "w";
  m.out_features = o.out;
  m.in_features = o.in;
  m.transposed = o.transposed;
  m.reduction = o.reduction;
  m.reduction_groups = o.reduction_groups;
  // At most one core per output row and input column.
  const int out_cores = std::min(o.transposed ? o.width : o.height, o.out);
  const int in_cores = std::min(o.transposed ? o.height : o.width, o.in);
  m.rect = o.transposed ? fabric::Rect{0, 0, out_cores, in_cores}
                        : fabric::Rect{0, 0, in_cores, out_cores};
  Vec x;
  x.layout = input_layout(m);
  x.ready.assign(x.layout.size(), Timed{});
  return {{"gemv", ex.gemv(m, WeightRef::o, 0, x).latest()}};
}

std::vector<Step> allreduce_steps(const BenchOpOptions& o, const fabric::WaferSpec& spec) {
  fabric::Fabric fab(spec);
  const std::vector<Timed> ready(static_cast<std::size_t>(o.width));
  std::vector<Timed> arrivals;
  const fabric::Line line{Coord{0, 0}, fabric::Direction::east, o.width};
  const Timed reduced = fabric::reduce_line(fab.mesh(), fab.flow(), o.reduction, line,
                                            Bytes{o.bytes}, ready, o.reduction_groups);
  fabric::Fabric again(spec);
  fabric::all_reduce_line(again.mesh(), again.flow(), o.reduction, line, Bytes{o.bytes}, ready,
                          arrivals, o.reduction_groups);
  Timed all = arrivals.front();
  for (const Timed& t : arrivals) all = later(all, t);
  // Two operations, each alone on its own idle fabric (a k-tree's or a
  // ring's all-reduce does not start from the reduction to the first core).
  return {{"reduce to the first core", reduced, true},
          {o.reduction == fabric::ReductionScheme::ring ? "all-reduce (reduce-scatter + all-gather)"
           : o.reduction == fabric::ReductionScheme::k_tree
               ? "all-reduce (into its root, multicast both ways)"
               : "all-reduce (reduce + multicast back)",
           all, true}};
}

// One whole-region layer of `model` on the region's corner.
Placement region_layer(const BenchOpOptions& o, const fabric::WaferSpec& spec,
                       const models::ModelConfig& model) {
  PlacementRequest req;
  req.strategy = StrategyKind::whole_region;
  req.reduction = o.reduction;
  req.reduction_groups = o.reduction_groups;
  if (o.attention_reduction)
    req.matrices[MatrixKind::attention] = MatrixOverride{0, 0, *o.attention_reduction};
  req.context_tokens = o.context + 1;
  req.weight_bits = o.bits;
  req.fabric_bits = o.fabric_bits;
  StagePlanner planner(model, spec, req);
  Placement pl;
  pl.strategy = "whole-region";
  pl.context_tokens = req.context_tokens;
  pl.value_bytes = req.value_bytes();
  pl.layers.push_back(planner.region_layer(0, 0, fabric::Rect{0, 0, o.width, o.height}, 1,
                                           spec.sram_per_core, "bench op"));
  return pl;
}

// That layer lowered, with an executor on an idle fabric.
struct LayerBench {
  LayerBench(const BenchOpOptions& o, const fabric::WaferSpec& spec,
             const models::ModelConfig& model)
      : pl(region_layer(o, spec, model)),
        prog(lower(model, pl)),
        fab(spec),
        ex(fab, model, pl, prog, nullptr, o.bits) {}
  const Placement pl;
  const Program prog;
  fabric::Fabric fab;
  Executor ex;
};

// Attention alone: the qkv vector on its roots at cycle 0, one decode token
// at position `context` over the KV cache spread over the region.
std::vector<Step> attention_steps(const BenchOpOptions& o, const fabric::WaferSpec& spec,
                                  const models::ModelConfig& model) {
  LayerBench b(o, spec, model);
  const LayerStage& st = b.pl.layers.front();
  Vec qkv;
  qkv.layout = output_layout(st.qkv);
  qkv.ready.assign(qkv.layout.size(), Timed{});
  return {{"attention", b.ex.attention(st.attention, 0, qkv, block_rows(0, o.context, qkv.tokens)).latest()}};
}

// One decode token through one whole-region layer: the layer's stages,
// phase by phase, on an idle fabric.
std::vector<Step> layer_steps(const BenchOpOptions& o, const fabric::WaferSpec& spec,
                              const models::ModelConfig& model) {
  LayerBench b(o, spec, model);
  TokenMessage m;
  m.position = o.context;
  std::vector<Step> steps;
  bool first = true;
  for (const StageProgram& sp : b.prog.stages) {
    if (sp.layer != 0) continue;
    if (first) {
      Vec& x = slot(m, Slot::x);
      x.layout = sp.input;
      x.ready.assign(sp.input.size(), Timed{});
      first = false;
    }
    run_stage(b.ex, sp, m, [&](const std::string& label, const Timed& t) {
      steps.push_back({label, t});
    });
  }
  return steps;
}

}  // namespace

int bench_op(const BenchOpOptions& o) {
  const fabric::WaferSpec spec = region_spec(o);
  std::vector<Step> steps;
  models::ModelConfig model;
  // layer, attention: the colors the layer's routes need (what a run checks).
  std::optional<RouteBudget> routes;
  std::string routes_over;
  if (o.op == "gemv") {
    steps = gemv_steps(o, spec);
  } else if (o.op == "allreduce") {
    steps = allreduce_steps(o, spec);
  } else if (o.op == "layer" || o.op == "attention") {
    model = load_model_preset(o.model, o.preset_dir);
    if (model.is_moe())
      throw std::invalid_argument("bench op " + o.op + ": " + model.name +
                                  " is a mixture of experts; the whole-region layer is dense");
    steps = o.op == "layer" ? layer_steps(o, spec, model) : attention_steps(o, spec, model);
    try {
      routes = check_route_colors(region_layer(o, spec, model), spec);
    } catch (const fabric::FitError& e) {
      routes_over = e.what();
    }
  } else {
    throw std::invalid_argument("bench op: unknown operation '" + o.op +
                                "'; valid: gemv, allreduce, attention, layer");
  }
  const Timed& last = steps.back().done;
  const double clock = spec.clock_hz;
  if (o.json) {
    nlohmann::json j = {{"op", o.op},
                        {"hardware", spec.name},
                        {"region", {{"width", o.width}, {"height", o.height}}},
                        {"reduction", reduction_name(o.reduction)},
                        {"reduction_groups", o.reduction_groups},
                        {"instruction_overhead", spec.instruction_overhead.value},
                        {"fabric_bits", o.fabric_bits},
                        {"cycles", last.at.value},
                        {"breakdown", breakdown_json(last.path)}};
    nlohmann::json js = nlohmann::json::array();
    for (const Step& s : steps) js.push_back({{"step", s.what}, {"done_at", s.done.at.value}});
    j["steps"] = js;
    if (o.op == "layer") {
      j["model"] = model.name;
      j["context"] = o.context;
      j["tokens_per_s_if_every_layer"] =
          clock / (static_cast<double>(last.at.value) * model.num_layers);
    }
    if (routes) j["max_route_colors"] = routes->max_colors;
    if (!routes_over.empty()) j["route_colors_over_budget"] = routes_over;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print(
      "bench op {} on {} ({:.2f} GHz), region {} x {} cores, {} reduction{}{}\n", o.op, spec.name,
      clock / 1e9, o.width, o.height, reduction_name(o.reduction),
      o.reduction == fabric::ReductionScheme::k_tree && o.reduction_groups > 0
          ? fmt::format(" (K = {})", o.reduction_groups)
          : std::string(),
      (spec.instruction_overhead.value > 0
           ? fmt::format(", {} cycles per vector instruction", spec.instruction_overhead.value)
           : std::string()) +
          (o.fabric_bits != 32 ? fmt::format(", {}-bit values on the fabric", o.fabric_bits)
                               : std::string()));
  if (o.op == "layer" || o.op == "attention")
    fmt::print("  {} layer 0, one decode token at position {} (KV cache of {} positions)\n",
               model.name, o.context, o.context);
  fmt::print("  {:<48} {:>10} {:>10}\n", "step", "cycles", "done at");
  std::uint64_t before = 0;
  for (const Step& s : steps) {
    const std::uint64_t at = s.done.at.value;
    fmt::print("  {:<48} {:>10} {:>10}\n", s.what,
               s.alone        ? at
               : at >= before ? at - before
                              : 0,
               at);
    before = std::max(before, at);
  }
  if (std::all_of(steps.begin(), steps.end(), [](const Step& s) { return s.alone; }))
    fmt::print("  (each timed alone from cycle 0 on an idle fabric)\n");
  fmt::print("  total {} cycles ({:.2f} us): {}\n", last.at.value,
             static_cast<double>(last.at.value) / clock * 1e6, breakdown_text(last.path));
  if (routes)
    fmt::print("  routes: at most {} of the {} colors per router\n", routes->max_colors,
               routes->available);
  if (!routes_over.empty())
    fmt::print("  routes do not fit the routers' colors (a run would fail): {}\n", routes_over);
  if (o.op == "layer")
    fmt::print("  x {} layers = {:.0f} tokens/s per user (layers alone: no head, no hand-over)\n",
               model.num_layers, clock / (static_cast<double>(last.at.value) * model.num_layers));
  return 0;
}

}  // namespace wafersim::sim
