#include "sim/engine/candidate_timing.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "fabric/defects.hpp"
#include "fabric/fabric.hpp"
#include "sim/exec/executor.hpp"
#include "sim/placement/route_budget.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

namespace {

// The program's stages of one layer, in order.
std::vector<const StageProgram*> layer_stages(const Program& prog, int layer) {
  std::vector<const StageProgram*> out;
  for (const StageProgram& sp : prog.stages)
    if (sp.layer == layer) out.push_back(&sp);
  return out;
}

const StageProgram* head_stage(const Program& prog) {
  for (const StageProgram& sp : prog.stages)
    if (sp.layer < 0) return &sp;
  return nullptr;
}

// A decode token of `user` at `position` whose x is ready on `input` at `at`.
TokenMessage decode_token(int user, int position, const Layout& input, Cycles at) {
  TokenMessage m;
  m.user = user;
  m.position = position;
  m.needs_logits = true;
  Vec& x = slot(m, Slot::x);
  x.layout = input;
  x.ready.assign(input.size(), Timed{at, {}});
  return m;
}

std::uint64_t minus(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

// Where a candidate is timed: the wafer that holds the head (a one-wafer
// plan's only wafer), the first layer on it, how many layers its first group
// has (those on that layer's region), the first layer of its next group (-1:
// none), and the hand-overs between groups on all the plan's wafers (each
// wafer's regions less one). The wafers of a plan hold balanced runs of
// layers in the same grid of groups, so one wafer's layer, hand-over and
// crossing from the wafer before, and the head, stand for all.
struct TimedWafer {
  int wafer = 0;
  int first = 0;
  int in_group = 0;
  int next_group = -1;
  int handovers = 0;
};

TimedWafer timed_wafer(const Placement& pl) {
  TimedWafer t;
  t.wafer = pl.head.wafer;
  const int layers = static_cast<int>(pl.layers.size());
  auto at = [&](int i) -> const LayerStage& { return pl.layers[static_cast<std::size_t>(i)]; };
  while (t.first < layers && at(t.first).wafer != t.wafer) ++t.first;
  if (t.first == layers)
    throw std::logic_error("a whole-region plan without layers on its head's wafer");
  int i = t.first;
  while (i < layers && at(i).wafer == t.wafer && at(i).strip == at(t.first).strip) ++i;
  t.in_group = i - t.first;
  if (i < layers && at(i).wafer == t.wafer) t.next_group = i;
  for (int l = 1; l < layers; ++l)
    if (at(l).wafer == at(l - 1).wafer && !(at(l).strip == at(l - 1).strip)) ++t.handovers;
  return t;
}

// An executor for the stages of wafer `t.wafer` only, on `fab`: every wafer
// slot of the plan is that fabric, and nothing runs on the others.
Executor timed_wafer_executor(fabric::Fabric& fab, const models::ModelConfig& model,
                              const Placement& pl, const Program& prog, int weight_bits) {
  return Executor(std::vector<fabric::Fabric*>(static_cast<std::size_t>(pl.wafers), &fab), nullptr,
                  model, pl, prog, nullptr, weight_bits);
}

// A token through every layer of the plan, each taking `layer` cycles: the
// layers, each wafer's hand-overs between groups, the crossings between
// wafers, the next token's embedding back to the first wafer, the head.
std::uint64_t token_with(std::uint64_t layer, const TimedCandidate& c, const TimedWafer& tw,
                         const Placement& pl) {
  return static_cast<std::uint64_t>(pl.layers.size()) * layer +
         static_cast<std::uint64_t>(tw.handovers) * c.handover_cycles +
         static_cast<std::uint64_t>(pl.wafers - 1) * c.crossing_cycles + c.return_cycles +
         c.head_cycles;
}

// The step between a user's tokens: the token, or the users' turns at the
// longest stage; and the rates it gives.
void set_step(const Scenario& sc, const PlacementRequest& req, std::uint64_t token,
              TimedCandidate& c) {
  const int users = std::max(1, req.users);
  c.step_cycles = std::max(token, static_cast<std::uint64_t>(users) * c.longest_stage_cycles);
  c.tokens_per_s_per_user =
      sc.hardware.clock_hz / static_cast<double>(std::max<std::uint64_t>(1, c.step_cycles));
  c.aggregate_tokens_per_s = c.tokens_per_s_per_user * users;
}

// A token of the stream: its layer's stages, where it is in them and when.
struct StreamToken {
  TokenMessage m;
  std::vector<const StageProgram*> stages;
  std::size_t stage = 0;
  std::size_t phase = 0;
  bool in_stage = false;
  std::uint64_t arrived = 0;  // when it was ready before its first stage
  std::uint64_t now = 0;      // when its latest output was complete
};

// A stream of tokens through one group's region, as its users' tokens pass
// it in steady state: token i (user i mod users) arrives at start + i x spacing and
// runs the stages of layer layers[i] (each stage one token at a time, as the
// engine's stage modules take them), all run phase by phase in the order of
// their ready times, sharing the fabric's links and cores. Returns each
// token's cycles from its arrival to the end of its layer.
std::vector<std::uint64_t> run_stream(Executor& ex, const Program& prog,
                                      const std::vector<int>& layers, int users, int position,
                                      std::uint64_t start, std::uint64_t spacing) {
  constexpr std::uint64_t kBusy = UINT64_MAX;
  std::map<const StageProgram*, std::uint64_t> stage_free;
  std::vector<StreamToken> ts(layers.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    StreamToken& t = ts[i];
    t.stages = layer_stages(prog, layers[i]);
    t.arrived = t.now = start + i * spacing;
    // The placement's KV cache has `users` sequences (a user's tokens take
    // turns through them; the timing does not depend on which).
    t.m =
        decode_token(static_cast<int>(i) % users, position, t.stages.front()->input, Cycles{t.now});
    for (const StageProgram* sp : t.stages) stage_free.emplace(sp, start);
  }
  std::size_t left = ts.size();
  while (left > 0) {
    // The token whose next step is earliest (ties: the lower user).
    StreamToken* next = nullptr;
    std::uint64_t next_at = kBusy;
    for (StreamToken& t : ts) {
      if (t.stage == t.stages.size()) continue;
      const std::uint64_t at = t.in_stage ? t.now : std::max(t.now, stage_free[t.stages[t.stage]]);
      if (at < next_at) next = &t, next_at = at;
    }
    StreamToken& t = *next;
    const StageProgram& sp = *t.stages[t.stage];
    Vec& x = slot(t.m, Slot::x);
    if (!t.in_stage) {
      // Taken from the stage's queue: nothing of it is usable before.
      if (next_at > t.now)
        for (Vec& v : t.m.slots)
          for (Timed& r : v.ready) r = r.not_before(Cycles{next_at}, Resource::queueing);
      t.now = next_at;
      t.in_stage = true;
      stage_free[&sp] = kBusy;
      if (!sp.continues_layer) {
        x = ex.move(x, sp.input, sp.input_spread);
        t.now = std::max(t.now, x.latest().at.value);
      }
      t.phase = 0;
    } else {
      const Phase& ph = sp.phases[t.phase];
      ex.run(ph, t.m, sp.layer);
      t.now = std::max(t.now, slot(t.m, ph.out).latest().at.value);
      ++t.phase;
    }
    if (t.in_stage && t.phase == sp.phases.size()) {
      if (sp.ends_layer) x = slot(t.m, Slot::out);
      stage_free[&sp] = t.now;
      t.in_stage = false;
      if (++t.stage == t.stages.size()) --left;
    }
  }
  std::vector<std::uint64_t> took;
  for (const StreamToken& t : ts) took.push_back(t.now - t.arrived);
  return took;
}

}  // namespace

void time_candidate(const Scenario& sc, const PlacementRequest& req, const Placement& pl,
                    TimedCandidate& c) {
  c.fits = true;
  c.grid = pl.planner_note;
  c.wafers = pl.wafers;
  const models::ModelConfig& model = sc.model;
  const TimedWafer tw = timed_wafer(pl);
  const LayerStage& first = pl.layers[static_cast<std::size_t>(tw.first)];
  c.region_width = first.strip.width;
  c.region_height = first.strip.height;

  // Timed without allocating (the timing does not read SRAM addresses; the
  // chosen count is allocated before it is taken: choose_layer_groups).
  fabric::Fabric fab(fabric::wafer_instance(sc.hardware, tw.wafer));
  const Program prog = lower(model, pl);
  Executor ex = timed_wafer_executor(fab, model, pl, prog, req.weight_bits);
  const int position = std::max(0, req.context_tokens - 1);

  // One token alone: the timed wafer's first layer (its stages' spans), its
  // next group's first layer (entered from the first group's region), the
  // head.
  const std::vector<const StageProgram*> first_stages = layer_stages(prog, tw.first);
  TokenMessage m = decode_token(0, position, first_stages.front()->input, Cycles{0});
  std::uint64_t from = 0;
  for (const StageProgram* sp : first_stages) {
    std::uint64_t end = from;
    run_stage(ex, *sp, m,
              [&](const std::string&, const Timed& t) { end = std::max(end, t.at.value); });
    c.longest_stage_cycles = std::max(c.longest_stage_cycles, end - from);
    from = end;
  }
  c.layer_cycles = slot(m, Slot::x).latest().at.value;
  std::uint64_t after_next = c.layer_cycles;
  if (tw.next_group >= 0) {
    for (const StageProgram* sp : layer_stages(prog, tw.next_group))
      run_stage(ex, *sp, m, [](const std::string&, const Timed&) {});
    after_next = slot(m, Slot::x).latest().at.value;
    c.handover_cycles = minus(after_next - c.layer_cycles, c.layer_cycles);
  }
  if (const StageProgram* head = head_stage(prog)) {
    run_stage(ex, *head, m, [](const std::string&, const Timed&) {});
    c.head_cycles = minus(m.done.at.value, after_next);
  }
  // On several wafers, each on the two wafers' own fabrics: the crossing
  // onto this wafer, what its first layer takes beyond its own time when it
  // follows the previous wafer's last layer (to that wafer's east edge, over
  // the wafers' I/O, from this one's west edge: as the hand-over, measured
  // with the layer before, so the move overlaps that layer's tail as it does
  // in a run), counted once per crossing; and, after it, the next token's
  // embedding row, read on this wafer (the head's), back onto the first
  // wafer's layer 0.
  if (pl.wafers > 1 && tw.first > 0) {
    const int before = tw.first - 1;
    const int prev = pl.layers[static_cast<std::size_t>(before)].wafer;
    const int w0 = pl.layers.front().wafer;
    std::vector<std::unique_ptr<fabric::Fabric>> others;
    std::vector<fabric::Fabric*> slots(static_cast<std::size_t>(pl.wafers), &fab);
    for (const int w : {prev, w0})
      if (slots[static_cast<std::size_t>(w)] == &fab && w != tw.wafer) {
        others.push_back(std::make_unique<fabric::Fabric>(fabric::wafer_instance(sc.hardware, w)));
        slots[static_cast<std::size_t>(w)] = others.back().get();
      }
    Executor cross(slots, nullptr, model, pl, prog, nullptr, req.weight_bits);
    const std::vector<const StageProgram*> before_stages = layer_stages(prog, before);
    // After everything timed above (this wafer's fabric holds it).
    const std::uint64_t start = std::max(after_next, m.done.at.value);
    TokenMessage t = decode_token(0, position, before_stages.front()->input, Cycles{start});
    for (const StageProgram* sp : before_stages)
      run_stage(cross, *sp, t, [](const std::string&, const Timed&) {});
    const std::uint64_t before_done = slot(t, Slot::x).latest().at.value;
    for (const StageProgram* sp : first_stages)
      run_stage(cross, *sp, t, [](const std::string&, const Timed&) {});
    const std::uint64_t crossed = slot(t, Slot::x).latest().at.value;
    c.crossing_cycles = minus(crossed - before_done, c.layer_cycles);
    const StageProgram& entry = *layer_stages(prog, 0).front();
    const Timed at{Cycles{crossed}, {}};
    c.return_cycles =
        minus(cross.move(cross.embed(0, position, at, false), entry.input, entry.input_spread)
                  .latest()
                  .at.value,
              crossed);
  }
  c.token_cycles = token_with(c.layer_cycles, c, tw, pl);
  // Until the users' tokens are timed together: the bound that one user's
  // token and the stages' turns put on the step.
  set_step(sc, req, c.token_cycles, c);
}

void time_candidate_loaded(const Scenario& sc, const PlacementRequest& req, const Placement& pl,
                           TimedCandidate& c) {
  const int users = std::max(1, req.users);
  const TimedWafer tw = timed_wafer(pl);
  const int in_group = tw.in_group;
  // In steady state every user's token passes every group once a step, the
  // users spread over the step (each a step / users after the one before):
  // a group's region takes in_group layers of work every step / users. One
  // layer per token, entering every step / (users x in_group), puts as many
  // tokens on the region at once (its layers share every core and route).
  // The step is not known yet: the one-user token stands for it (the densest
  // the stream can be; at least a longest stage apart on one layer).
  c.loaded_layers = in_group;
  c.loaded_tokens = std::min(kMaxStreamTokens, users * in_group);
  c.loaded_spacing_cycles =
      std::max<std::uint64_t>(1, c.token_cycles / static_cast<std::uint64_t>(users * in_group));
  fabric::Fabric fab(fabric::wafer_instance(sc.hardware, tw.wafer));
  const Program prog = lower(sc.model, pl);
  Executor ex = timed_wafer_executor(fab, sc.model, pl, prog, req.weight_bits);
  std::vector<int> which;
  for (int i = 0; i < c.loaded_tokens; ++i) which.push_back(tw.first + i % in_group);
  const std::vector<std::uint64_t> took = run_stream(
      ex, prog, which, users, std::max(0, req.context_tokens - 1), 0, c.loaded_spacing_cycles);
  // The later half: the region has filled by then.
  std::uint64_t sum = 0;
  const std::size_t from = took.size() / 2;
  for (std::size_t i = from; i < took.size(); ++i) sum += took[i];
  c.loaded_layer_cycles = sum / (took.size() - from);
  set_step(sc, req, token_with(c.loaded_layer_cycles, c, tw, pl), c);
}

int best_candidate(const std::vector<const TimedCandidate*>& cs, int users) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(cs.size()); ++i) {
    const TimedCandidate& c = *cs[static_cast<std::size_t>(i)];
    if (!c.fits) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const TimedCandidate& b = *cs[static_cast<std::size_t>(best)];
    bool better = false;
    if (users <= 1) {
      better = c.token_cycles < b.token_cycles;
    } else {
      const double hi = std::max(c.aggregate_tokens_per_s, b.aggregate_tokens_per_s);
      const bool tie = hi <= 0.0 || std::abs(c.aggregate_tokens_per_s - b.aggregate_tokens_per_s) <=
                                        kThroughputTie * hi;
      better = tie ? c.token_cycles < b.token_cycles
                   : c.aggregate_tokens_per_s > b.aggregate_tokens_per_s;
    }
    if (better) best = i;
  }
  return best;
}

std::string objective_name(int users) {
  return users <= 1 ? "lowest token latency (1 user)" : "highest aggregate tokens/s";
}

namespace {

// What a request chooses of a whole-region plan within one plan_system call.
std::string memo_key(const PlacementRequest& r) {
  std::string k =
      fmt::format("{}/{}/{}", r.layer_groups, static_cast<int>(r.reduction), r.reduction_groups);
  for (const auto& [kind, ov] : r.matrices)
    k += fmt::format("/{}:{}:{}:{}:{}", static_cast<int>(kind), ov.rows, ov.columns,
                     ov.reduction ? static_cast<int>(*ov.reduction) : -1, ov.reduction_groups);
  return k;
}

}  // namespace

const std::pair<TimedCandidate, Placement>* CandidateMemo::find(const PlacementRequest& r) const {
  const auto it = entries_.find(memo_key(r));
  return it == entries_.end() ? nullptr : &it->second;
}

void CandidateMemo::store(const PlacementRequest& r, const TimedCandidate& figures,
                          const Placement& plan) {
  entries_[memo_key(r)] = {figures, plan};
}

void plan_and_time(const Scenario& sc, CandidatePlan& cand,
                   const std::function<Placement(const PlacementRequest&)>& plan,
                   CandidateMemo* memo) {
  TimedCandidate& c = *cand.figures;
  if (memo)
    if (const auto* hit = memo->find(cand.request)) {
      c = hit->first;
      cand.plan = hit->second;
      return;
    }
  Placement pl;
  try {
    pl = plan(cand.request);
    (void)check_route_colors(pl, sc.hardware);
    check_reachable(sc.model, pl, cand.request, sc.hardware);
    time_candidate(sc, cand.request, pl, c);
  } catch (const fabric::FitError& e) {
    c.fits = false;
    c.why_not = e.what();
    if (memo) memo->store(cand.request, c, Placement{});
    return;
  }
  if (memo) memo->store(cand.request, c, pl);
  cand.plan = std::move(pl);
}

int settle_candidates(const Scenario& sc, int users, std::vector<CandidatePlan>& cs,
                      CandidateMemo* memo) {
  std::vector<const TimedCandidate*> figures;
  for (const CandidatePlan& c : cs) figures.push_back(c.figures);
  // Candidates on the same wafers: a plan that needs more wafers than the
  // fewest any candidate fits on (wafers: auto plans each on the fewest it
  // fits) is not compared with the others.
  int fewest = INT_MAX;
  for (const CandidatePlan& c : cs)
    if (c.figures->fits) fewest = std::min(fewest, c.plan.wafers);
  for (CandidatePlan& c : cs)
    if (c.figures->fits && c.plan.wafers > fewest) {
      *c.figures = TimedCandidate{};
      c.figures->why_not = fmt::format(
          "needs {} wafers where other candidates fit on {}: candidates are compared on the "
          "same wafers (give wafers a number to compare them on that many)",
          c.plan.wafers, fewest);
    }
  // More users: the stream timed for the candidates whose one-user bound
  // could still win, the highest bound first; a candidate whose bound is
  // below the best timed figure (by more than a tie) cannot win, and keeps
  // its bound.
  if (users > 1) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < cs.size(); ++i)
      if (cs[i].figures->fits) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return cs[a].figures->aggregate_tokens_per_s > cs[b].figures->aggregate_tokens_per_s;
    });
    double best_timed = 0.0;
    for (const std::size_t i : order) {
      TimedCandidate& c = *cs[i].figures;
      if (c.aggregate_tokens_per_s < best_timed * (1.0 - kThroughputTie)) continue;
      if (c.loaded_tokens == 0) {  // not timed loaded before (a memo's entry may be)
        time_candidate_loaded(sc, cs[i].request, cs[i].plan, c);
        if (memo) memo->store(cs[i].request, c, cs[i].plan);
      }
      best_timed = std::max(best_timed, c.aggregate_tokens_per_s);
    }
  }
  // The allocator has the last word on SRAM: the best is allocated (on a
  // fabric of its own) before it is taken; one that does not fit drops out
  // with the allocator's reason and the next best is tried.
  int best = best_candidate(figures, users);
  while (best >= 0) {
    CandidatePlan& cand = cs[static_cast<std::size_t>(best)];
    try {
      // Each wafer's SRAM map (and dead cores), without the rest of a fabric.
      std::vector<std::unique_ptr<fabric::Mesh>> meshes;
      std::vector<std::unique_ptr<fabric::DefectMap>> defects;
      std::vector<std::unique_ptr<fabric::SramMap>> srams;
      std::vector<fabric::SramMap*> maps;
      for (int w = 0; w < cand.plan.wafers; ++w) {
        const fabric::WaferSpec spec = fabric::wafer_instance(sc.hardware, w);
        meshes.push_back(std::make_unique<fabric::Mesh>(spec.mesh_width, spec.mesh_height));
        defects.push_back(std::make_unique<fabric::DefectMap>(spec));
        srams.push_back(std::make_unique<fabric::SramMap>(*meshes.back(), spec.sram_per_core,
                                                          defects.back().get()));
        maps.push_back(srams.back().get());
      }
      allocate_placement(sc.model, cand.plan, maps, cand.request);
      break;
    } catch (const fabric::FitError& e) {
      *cand.figures = TimedCandidate{};
      cand.figures->why_not = e.what();
      best = best_candidate(figures, users);
    }
  }
  return best;
}

}  // namespace wafersim::sim
