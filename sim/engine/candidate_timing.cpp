#include "sim/engine/candidate_timing.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

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

// Group 0's layers: those on the first layer's region.
int first_group_layers(const Placement& pl) {
  int n = 0;
  while (n < static_cast<int>(pl.layers.size()) &&
         pl.layers[static_cast<std::size_t>(n)].strip == pl.layers.front().strip)
    ++n;
  return n;
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
                    int groups, TimedCandidate& c) {
  c.fits = true;
  c.grid = pl.planner_note;
  const models::ModelConfig& model = sc.model;
  const int layers = static_cast<int>(pl.layers.size());
  c.region_width = pl.layers.front().strip.width;
  c.region_height = pl.layers.front().strip.height;
  const int in_group = first_group_layers(pl);
  const int next_group = in_group < layers ? in_group : -1;

  // Timed without allocating (the timing does not read SRAM addresses; the
  // chosen count is allocated before it is taken: choose_layer_groups).
  fabric::Fabric fab(fabric::wafer_instance(sc.hardware, 0));
  const Program prog = lower(model, pl);
  Executor ex(fab, model, pl, prog, nullptr, req.weight_bits);
  const int position = std::max(0, req.context_tokens - 1);

  // One token alone: layer 0 (its stages' spans), the next group's first
  // layer (entered from group 0's region), the head.
  const std::vector<const StageProgram*> first_stages = layer_stages(prog, 0);
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
  if (next_group >= 0) {
    for (const StageProgram* sp : layer_stages(prog, next_group))
      run_stage(ex, *sp, m, [](const std::string&, const Timed&) {});
    after_next = slot(m, Slot::x).latest().at.value;
    c.handover_cycles = minus(after_next - c.layer_cycles, c.layer_cycles);
  }
  if (const StageProgram* head = head_stage(prog)) {
    run_stage(ex, *head, m, [](const std::string&, const Timed&) {});
    c.head_cycles = minus(m.done.at.value, after_next);
  }
  c.token_cycles = static_cast<std::uint64_t>(layers) * c.layer_cycles +
                   static_cast<std::uint64_t>(groups - 1) * c.handover_cycles + c.head_cycles;
  // Until the users' tokens are timed together: the bound that one user's
  // token and the stages' turns put on the step.
  const int users = std::max(1, req.users);
  c.step_cycles =
      std::max(c.token_cycles, static_cast<std::uint64_t>(users) * c.longest_stage_cycles);
  const double clock = sc.hardware.clock_hz;
  c.tokens_per_s_per_user = clock / static_cast<double>(std::max<std::uint64_t>(1, c.step_cycles));
  c.aggregate_tokens_per_s = c.tokens_per_s_per_user * users;
}

void time_candidate_loaded(const Scenario& sc, const PlacementRequest& req, const Placement& pl,
                           int groups, TimedCandidate& c) {
  const int users = std::max(1, req.users);
  const int layers = static_cast<int>(pl.layers.size());
  const int in_group = first_group_layers(pl);
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
  fabric::Fabric fab(fabric::wafer_instance(sc.hardware, 0));
  const Program prog = lower(sc.model, pl);
  Executor ex(fab, sc.model, pl, prog, nullptr, req.weight_bits);
  std::vector<int> which;
  for (int i = 0; i < c.loaded_tokens; ++i) which.push_back(i % in_group);
  const std::vector<std::uint64_t> took = run_stream(
      ex, prog, which, users, std::max(0, req.context_tokens - 1), 0, c.loaded_spacing_cycles);
  // The later half: the region has filled by then.
  std::uint64_t sum = 0;
  const std::size_t from = took.size() / 2;
  for (std::size_t i = from; i < took.size(); ++i) sum += took[i];
  c.loaded_layer_cycles = sum / (took.size() - from);
  const std::uint64_t loaded_token = static_cast<std::uint64_t>(layers) * c.loaded_layer_cycles +
                                     static_cast<std::uint64_t>(groups - 1) * c.handover_cycles +
                                     c.head_cycles;
  c.step_cycles =
      std::max(loaded_token, static_cast<std::uint64_t>(users) * c.longest_stage_cycles);
  const double clock = sc.hardware.clock_hz;
  c.tokens_per_s_per_user = clock / static_cast<double>(std::max<std::uint64_t>(1, c.step_cycles));
  c.aggregate_tokens_per_s = c.tokens_per_s_per_user * users;
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

void plan_and_time(const Scenario& sc, CandidatePlan& cand, const std::string& key,
                   const std::string& what,
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
    if (pl.wafers > 1)
      throw fabric::FitError(fmt::format(
          "placement.{}: auto times its candidates on one wafer, and {} of {} need {} wafers; "
          "give {} a value",
          key, what, sc.model.name, pl.wafers, key));
    (void)check_route_colors(pl, sc.hardware);
    time_candidate(sc, cand.request, pl, cand.request.layer_groups, c);
  } catch (const fabric::FitError& e) {
    if (pl.wafers > 1) throw;
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
        time_candidate_loaded(sc, cs[i].request, cs[i].plan, cs[i].request.layer_groups, c);
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
      fabric::Fabric fab(fabric::wafer_instance(sc.hardware, 0));
      fabric::Fabric* const wafers[] = {&fab};
      allocate_placement(sc.model, cand.plan, wafers, cand.request);
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
