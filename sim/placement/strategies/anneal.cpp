// anneal: simulated annealing of the assignment of layers to the slots of a
// grid (every grid of 1..16 block rows or columns, head on the west or the
// north, and KV-segment floors when latency counts), minimising the
// closed-form hop-bytes per token: the cost inside each slot (it depends on
// the slot's shape) plus, per edge of the dataflow graph, its bytes x the
// per-byte hop distance between the two slots' ports (output of one stage to
// input of the next), plus latency_weight x the closed-form critical-path
// cycles. The best over grids wins.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>

#include "sim/placement/placement_cost.hpp"
#include "sim/placement/strategies/strategies.hpp"

namespace wafersim::sim::strategies {
namespace {

using fabric::Rect;

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

// One candidate grid: its slots (then the head as slot S), and what each
// costs: inside it, its critical-path cycles, its ports, its legs to other
// wafers, and the distance from every slot's output to every slot's input.
struct GridPrices {
  int S = 0;  // layer slots
  int N = 0;  // slots + the head
  std::vector<double> intra, latency;
  std::vector<Layout> in, out;
  std::vector<double> entry, exit;  // per layer slot: from the west edge, to the east edge
  std::vector<double> dist;         // [a * N + b]: per byte of the edge, a's output to b's input
  Bytes core_max;                   // largest per-core weight bytes of the grid's stages
};

class Annealer {
 public:
  Annealer(PlanningContext& ctx, const WaferTask& task)
      : ctx_(ctx),
        task_(task),
        k_(task.layers),
        graph_(
            layer_dataflow(task.layers, task.has_head, ctx.n_wafers == 1, ctx.model.hidden_size)),
        weight_(boost::get(boost::edge_weight, graph_)),
        lat_model_{ctx.spec, ctx.req.weight_bits, std::max(1, ctx.req.context_tokens),
                   static_cast<double>(ctx.req.value_bytes())},
        lw_(ctx.req.anneal.latency_weight) {}

  RegionPlan run() {
    // KV segment floors tried per grid: the matrices first (0), then
    // segments of 2, 4, 8 and 16 cores when latency counts (traffic alone
    // never gains from them: a longer segment only adds multicast and
    // reduction hops).
    const std::vector<int> kv_segments =
        lw_ > 0 ? std::vector<int>{0, 2, 4, 8, 16} : std::vector<int>{0};
    const AnnealOptions& opt = ctx_.req.anneal;
    RegionPlan best_plan;
    best_plan.turn_layers = false;  // its slots are priced top-down
    double best_cost = std::numeric_limits<double>::infinity();
    // Every candidate grid, enumerated once: its count is the search's progress.
    struct Candidate {
      bool by_columns;
      int rows, cols, kv_segment;
    };
    std::vector<Candidate> candidates;
    for (const bool by_columns : {false, true})
      for (int rows = 1; rows <= std::min(k_, 16); ++rows)
        for (int cols = static_cast<int>(ceil_div(k_, rows));
             cols == static_cast<int>(ceil_div(k_, rows)) ||
             rows * cols <= k_ + static_cast<int>(opt.spare_slots * k_);
             ++cols)
          for (const int kv_segment : kv_segments)
            candidates.push_back({by_columns, rows, cols, kv_segment});
    candidates_ = candidates.size();
    report_search(0);
    std::uint64_t candidate = 0;
    for (const Candidate& c : candidates) {
      const bool by_columns = c.by_columns;
      const int rows = c.rows, cols = c.cols, kv_segment = c.kv_segment;
      ++candidate;
      const RegionPlan base = ctx_.snake_plan(k_, task_.has_head, rows, by_columns);
      const std::vector<Rect> slots = grid_slots(base.rest, rows, cols, by_columns);
      GridPrices g;
      const std::uint64_t done_before =
          (candidate - 1) * static_cast<std::uint64_t>(std::max(1, opt.iterations));
      report_search(done_before);
      if (slots.empty() || !price(base, slots, kv_segment, g)) continue;
      double best_here = 0.0;
      const std::vector<int> best_slots = anneal(g, candidate, best_here);
      const double total = best_here + opt.sram_weight * static_cast<double>(g.core_max.value);
      if (total < best_cost) {
        best_cost = total;
        best_plan.head = base.head;
        best_plan.rest = base.rest;
        best_plan.kv_segment = kv_segment;
        best_plan.blocks.clear();
        for (int l = 0; l < k_; ++l)
          best_plan.blocks.push_back(
              slots[static_cast<std::size_t>(best_slots[static_cast<std::size_t>(l)])]);
        const auto [hb, cyc] = split(g, best_slots);
        best_plan.note = fmt::format(
            "{} x {} slots ({}){}{}, closed-form {:.4g} hop-bytes/token, {:.4g} cycles/token "
            "critical path{}",
            rows, cols, by_columns ? "snake columns" : "snake rows",
            task_.has_head ? (by_columns ? ", head north" : ", head west") : "",
            kv_segment > 0 ? fmt::format(", KV segments >= {} cores", kv_segment) : std::string(),
            hb, cyc,
            opt.sram_weight > 0 || lw_ > 0 ? fmt::format(", cost {:.4g}", total) : std::string());
      }
    }
    report_search(candidates_ * static_cast<std::uint64_t>(std::max(1, opt.iterations)));
    if (best_plan.blocks.empty())
      throw fabric::FitError(fmt::format("anneal: no grid of {} layer slots fits {}; the last: {}",
                                         k_, ctx_.spec.name, ctx_.last_fit_error));
    return best_plan;
  }

 private:
  static std::size_t at(int i) { return static_cast<std::size_t>(i); }

  // Iterations done over all candidate grids, as a percentage, each
  // percent once (a grid that does not fit counts as annealed).
  void report_search(std::uint64_t iterations_done) {
    if (!ctx_.req.search_progress || candidates_ == 0) return;
    const std::uint64_t total =
        candidates_ * static_cast<std::uint64_t>(std::max(1, ctx_.req.anneal.iterations));
    const int percent = static_cast<int>(100 * std::min(iterations_done, total) / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    ctx_.req.search_progress(percent, 100);
  }

  // Plans a stage in every slot (and the head) and prices them; false (and
  // ctx.last_fit_error) when one does not fit.
  bool price(const RegionPlan& base, const std::vector<Rect>& slots, int kv_segment,
             GridPrices& g) {
    const models::ModelConfig& model = ctx_.model;
    g.S = static_cast<int>(slots.size());
    g.N = g.S + (task_.has_head ? 1 : 0);
    std::vector<LayerStage> stage(at(g.S));
    HeadStage head;
    try {
      for (int i = 0; i < g.S; ++i)
        stage[at(i)] =
            ctx_.planner.layer(task_.first_layer, task_.wafer, slots[at(i)], ctx_.capacity,
                               strategy_name(ctx_.req.strategy), kv_segment);
      if (task_.has_head) head = ctx_.planner.head(task_.wafer, base.head, ctx_.capacity);
    } catch (const fabric::FitError& e) {
      ctx_.last_fit_error = e.what();
      return false;
    }
    const int bits = ctx_.req.weight_bits;
    g.intra.assign(at(g.N), 0.0);
    g.in.assign(at(g.N), Layout{});
    g.out.assign(at(g.N), Layout{});
    for (int i = 0; i < g.S; ++i) {
      const LayerStage& st = stage[at(i)];
      g.intra[at(i)] = layer_hop_bytes(model, st);
      g.in[at(i)] = layer_input_layout(st);
      g.out[at(i)] = layer_output_layout(st);
      for (const MatrixPlacement* m : st.matrices())
        g.core_max = std::max(g.core_max, Bytes{ceil_div(m->max_tile_elements() * bits, 8)});
    }
    if (task_.has_head) {
      g.intra[at(g.S)] = head_hop_bytes(model, head);
      g.in[at(g.S)] = head_input_layout(model, head);
      g.out[at(g.S)] = embedding_row_layout(head);
    }
    // Latency-aware cost: every slot's and every hand-over's critical-path
    // cycles, weighted into hop-bytes.
    g.latency.assign(at(g.N), 0.0);
    for (int i = 0; i < g.S; ++i)
      g.latency[at(i)] = layer_latency_cycles(lat_model_, model, stage[at(i)]);
    if (task_.has_head) g.latency[at(g.S)] = head_latency_cycles(lat_model_, model, head);
    for (int i = 0; i < g.N; ++i) g.intra[at(i)] += lw_ * g.latency[at(i)];
    // Per edge: hop-bytes per byte moved, plus (weighted) the move's latency
    // per byte of the edge's weight (every edge carries the same hidden-state
    // bytes).
    const double edge_bytes = 4.0 * model.hidden_size;
    g.dist.assign(at(g.N) * at(g.N), 0.0);
    for (int a = 0; a < g.N; ++a)
      for (int b = 0; b < g.N; ++b)
        g.dist[at(a) * at(g.N) + at(b)] =
            (move_hop_bytes(g.out[at(a)], g.in[at(b)]) +
             (lw_ > 0.0 ? lw_ * move_latency_cycles(lat_model_, g.out[at(a)], g.in[at(b)]) : 0.0)) /
            edge_bytes;
    // Legs to and from other wafers: the first layer's input comes from the
    // west edge (previous wafer, or the head on the last), the last layer's
    // output leaves by the east edge (no head here).
    g.entry.assign(at(g.S), 0.0);
    g.exit.assign(at(g.S), 0.0);
    for (int i = 0; i < g.S; ++i) {
      if (ctx_.n_wafers > 1) g.entry[at(i)] = from_west_edge_hop_bytes(g.in[at(i)]);
      if (!task_.has_head)
        g.exit[at(i)] = to_east_edge_hop_bytes(g.out[at(i)], ctx_.spec.mesh_width);
    }
    return true;
  }

  // Random start (seeded), then Metropolis moves: a layer to another slot,
  // swapping with its occupant if there is one. Returns the best slot per
  // stage found (the head's is S) and its cost in `best_cost`.
  std::vector<int> anneal(const GridPrices& g, std::uint64_t candidate, double& best_cost) {
    const int S = g.S, N = g.N, k = k_;
    const bool has_head = task_.has_head;
    const AnnealOptions& opt = ctx_.req.anneal;
    SeededDraws rng{ctx_.req.seed * 0x9E3779B97F4A7C15ull + candidate};
    std::vector<int> perm(at(S));
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = S - 1; i > 0; --i) std::swap(perm[at(i)], perm[at(rng.below(i + 1))]);
    std::vector<int> slot_of(at(k + (has_head ? 1 : 0)));
    std::vector<int> occupant(at(S), -1);
    for (int l = 0; l < k; ++l) {
      slot_of[at(l)] = perm[at(l)];
      occupant[at(perm[at(l)])] = l;
    }
    if (has_head) slot_of[at(k)] = S;
    auto edge_cost = [&](const Dataflow::edge_descriptor& e) {
      const auto u = boost::source(e, graph_), v = boost::target(e, graph_);
      return weight_[e] * g.dist[static_cast<std::size_t>(slot_of[u]) * at(N) + at(slot_of[v])];
    };
    // A layer's own cost in its slot: inside the slot, plus the cross-wafer
    // legs when it is the wafer's first or last layer.
    auto vertex_cost = [&](int v) {
      const auto slot = at(slot_of[at(v)]);
      return g.intra[slot] + (v == 0 ? g.entry[slot] : 0.0) + (v == k - 1 ? g.exit[slot] : 0.0);
    };
    // Cost of the vertices v (and u) and their edges, each edge once.
    auto local = [&](int v, int u) {
      double c = vertex_cost(v);
      if (u >= 0) c += vertex_cost(u);
      for (auto [e, end] = boost::out_edges(v, graph_); e != end; ++e) c += edge_cost(*e);
      for (auto [e, end] = boost::in_edges(v, graph_); e != end; ++e) c += edge_cost(*e);
      if (u >= 0) {
        for (auto [e, end] = boost::out_edges(u, graph_); e != end; ++e)
          if (static_cast<int>(boost::target(*e, graph_)) != v) c += edge_cost(*e);
        for (auto [e, end] = boost::in_edges(u, graph_); e != end; ++e)
          if (static_cast<int>(boost::source(*e, graph_)) != v) c += edge_cost(*e);
      }
      return c;
    };
    double cost = has_head ? g.intra[at(S)] : 0.0;
    if (has_head && ctx_.n_wafers > 1)
      cost += to_east_edge_hop_bytes(g.out[at(S)], ctx_.spec.mesh_width);
    for (int l = 0; l < k; ++l) cost += vertex_cost(l);
    for (auto [e, end] = boost::edges(graph_); e != end; ++e) cost += edge_cost(*e);
    double best_here = cost;
    std::vector<int> best_slots = slot_of;
    const double scale = cost / k;
    double T = opt.initial_temperature * scale;
    const int iters = opt.iterations;
    const double cool =
        std::pow(opt.final_temperature / opt.initial_temperature, 1.0 / std::max(1, iters));
    const std::uint64_t done_before =
        (candidate - 1) * static_cast<std::uint64_t>(std::max(1, iters));
    for (int it = 0; it < iters; ++it, T *= cool) {
      if ((it & 0xFFFF) == 0) report_search(done_before + static_cast<std::uint64_t>(it));
      const int v = rng.below(k);
      const int s = rng.below(S);
      const int from = slot_of[at(v)];
      if (s == from) continue;
      const int u = occupant[at(s)];
      const double before = local(v, u);
      slot_of[at(v)] = s;
      occupant[at(s)] = v;
      occupant[at(from)] = u;
      if (u >= 0) slot_of[at(u)] = from;
      const double delta = local(v, u) - before;
      if (delta <= 0.0 || rng.unit() < std::exp(-delta / T)) {
        cost += delta;
        if (cost < best_here - 1e-9 * scale) best_here = cost, best_slots = slot_of;
      } else {  // undo
        slot_of[at(v)] = from;
        occupant[at(from)] = v;
        occupant[at(s)] = u;
        if (u >= 0) slot_of[at(u)] = s;
      }
    }
    best_cost = best_here;
    return best_slots;
  }

  // The parts of an assignment's cost, for the note: hop-bytes and cycles.
  std::pair<double, double> split(const GridPrices& g, const std::vector<int>& slots_of) const {
    const int S = g.S, k = k_;
    const bool has_head = task_.has_head;
    double hb = has_head ? g.intra[at(S)] - lw_ * g.latency[at(S)] : 0.0,
           cyc = has_head ? g.latency[at(S)] : 0.0;
    if (has_head && ctx_.n_wafers > 1)
      hb += to_east_edge_hop_bytes(g.out[at(S)], ctx_.spec.mesh_width);
    for (int l = 0; l < k; ++l) {
      const auto sl = at(slots_of[at(l)]);
      hb += g.intra[sl] - lw_ * g.latency[sl] + (l == 0 ? g.entry[sl] : 0.0) +
            (l == k - 1 ? g.exit[sl] : 0.0);
      cyc += g.latency[sl];
    }
    for (auto [e, end] = boost::edges(graph_); e != end; ++e) {
      const auto a = at(slots_of[boost::source(*e, graph_)]);
      const auto b = at(slots_of[boost::target(*e, graph_)]);
      hb += move_hop_bytes(g.out[a], g.in[b]);
      cyc += move_latency_cycles(lat_model_, g.out[a], g.in[b]);
    }
    return {hb, cyc};
  }

  PlanningContext& ctx_;
  const WaferTask& task_;
  const int k_;
  const Dataflow graph_;
  boost::property_map<Dataflow, boost::edge_weight_t>::const_type weight_;
  const LatencyModel lat_model_;
  const double lw_;
  std::uint64_t candidates_ = 0;
  int last_percent_ = -1;
};

class Anneal : public PlacementStrategy {
 public:
  RegionPlan plan(PlanningContext& ctx, const WaferTask& task) const override {
    return Annealer(ctx, task).run();
  }
};

}  // namespace

std::unique_ptr<PlacementStrategy> anneal() {
  return std::make_unique<Anneal>();
}

}  // namespace wafersim::sim::strategies
