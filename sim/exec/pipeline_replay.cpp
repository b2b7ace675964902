#include "sim/exec/pipeline_replay.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/exec/layer_replay.hpp"

namespace wafersim::sim {

namespace {

// The phase step `step` of `sp` runs (null: the stage's move onto its cores).
const Phase* phase_at(const StageProgram& sp, int step) {
  const int phase = step - (sp.continues_layer ? 0 : 1);
  return phase < 0 ? nullptr : &sp.phases[static_cast<std::size_t>(phase)];
}

}  // namespace

PipelineReplay::PipelineReplay(Executor& ex, const Program& program, int threads)
    : ex_(ex), program_(program), records_(threads) {
  const auto& stages = program.stages;
  run_of_stage_.assign(stages.size(), -1);
  first_of_layer_.assign(stages.size(), false);
  const std::vector<std::pair<std::size_t, std::size_t>> layers = program_layers(program);
  const auto alike = [&](std::size_t a, std::size_t b) {  // layers a and b
    const auto [fa, la] = layers[a];
    const auto [fb, lb] = layers[b];
    if (la + 1 != fb || la - fa != lb - fb) return false;
    for (std::size_t k = 0; k <= la - fa; ++k)
      if (!stages_time_alike(stages[fa + k], stages[fb + k])) return false;
    return true;
  };
  // Runs of two or more equal layers in a row.
  for (std::size_t l = 0; l < layers.size();) {
    std::size_t e = l;
    while (e + 1 < layers.size() && alike(e, e + 1)) ++e;
    if (e > l) {
      const int run = static_cast<int>(run_last_.size());
      int wafer = -2;  // none seen yet
      bool experts = false;
      for (std::size_t k = l; k <= e; ++k) {
        first_of_layer_[layers[k].first] = true;
        for (std::size_t s = layers[k].first; s <= layers[k].second; ++s) {
          run_of_stage_[s] = run;
          for (const Phase& ph : stages[s].phases) {
            if (ph.kind == PhaseKind::moe) experts = true;
            if (!ph.matrix) continue;
            wafer = wafer == -2 || wafer == ph.matrix->wafer ? ph.matrix->wafer : -1;
          }
        }
      }
      run_last_.push_back(static_cast<int>(layers[e].second));
      run_ends_layers_.push_back(e + 1 == layers.size());
      run_wafer_.push_back(wafer < 0 ? -1 : wafer);
      run_stride_.push_back(static_cast<int>(layers[l].second - layers[l].first + 1));
      experts_.push_back(experts);
    }
    l = e + 1;
  }
}

void PipelineReplay::sent() {
  if (replaying_)
    throw std::logic_error("PipelineReplay: a message was sent while steps were being replayed");
  ++in_flight_;
}

void PipelineReplay::returned(const TokenMessage& m) {
  if (replaying_)
    throw std::logic_error("PipelineReplay: a message came back while steps were being replayed");
  --in_flight_;
  places_.erase(&m);
  if (tracked_ == &m) {
    tracked_ = nullptr;
    forget();
  }
}

fabric::Rect PipelineReplay::wafer_rect(int wafer) {
  const fabric::Mesh& mesh = ex_.fab(wafer).mesh();
  return fabric::Rect{0, 0, mesh.width(), mesh.height()};
}

void PipelineReplay::forget() {
  mark_.valid = false;
  mark_.messages.clear();
  steps_.clear();
}

bool PipelineReplay::replayed(const StageProgram& sp, int step, TokenMessage& m, Cycles now,
                              Cycles& done) {
  const int stage = index_of(sp);
  if (replaying_) {
    // Each time the tracked message comes to its first learned step again a
    // period has ended: go on while the next stays inside the run, else
    // write the fabric's state out and simulate from here. (Not only at the
    // run's layer starts: the last period the run holds may end with the
    // tracked message stepping out of it, onto the head or the next group's
    // first layer.)
    if (&m == tracked_ && begins_period(m) && !inside(++periods_ + 1)) {
      settle(periods_);
    } else {
      apply(stage, step, m, now, done);
      return true;
    }
  }
  if (!layer_start(stage, step)) return false;
  if (!checkpoint(stage, m, now)) return false;
  apply(stage, step, m, now, done);
  return true;
}

void PipelineReplay::stepped(const StageProgram& sp, int step, const TokenMessage& m, Cycles now,
                             Cycles done) {
  const int stage = index_of(sp);
  places_[&m] = Place{stage, step + 1, done.value};
  if (!mark_.valid) return;
  Step s;
  s.stage = stage;
  s.step = step;
  s.start = now.value;
  s.done = done.value;
  if (step == 0) {
    for (int k = 0; k < kSlots; ++k) s.slots.emplace_back(k, timing_of(m.slots[k]));
  } else {
    const Phase& ph = *phase_at(sp, step);
    const int out = static_cast<int>(ph.out), a = static_cast<int>(ph.a);
    s.slots.emplace_back(out, timing_of(m.slots[out]));
    if (a != out) s.slots.emplace_back(a, timing_of(m.slots[a]));
  }
  steps_[&m].push_back(std::move(s));
}

bool PipelineReplay::mark(int run, int stage, Cycles now, Mark& out) {
  if (prompts_pending_ || in_flight_ < 2 || places_.size() != static_cast<std::size_t>(in_flight_))
    return false;
  const int stride = run_stride_[static_cast<std::size_t>(run)];
  const int last = run_last_[static_cast<std::size_t>(run)];
  const int wafer = run_wafer_[static_cast<std::size_t>(run)];
  if (wafer < 0) return false;
  const bool experts = experts_[static_cast<std::size_t>(run)];
  std::uint64_t from = now.value;
  for (const auto& [msg, place] : places_) {
    if (run_of_stage_[static_cast<std::size_t>(place.stage)] != run) return false;
    // A run's experts are placed alike (stages_time_alike), so the k experts
    // one token chooses time alike whichever they are; how many tokens of a
    // message choose each does not.
    if (experts && msg->tokens != 1) return false;
    // A replay needs a period learned and another after it inside the run
    // (host time only: no fingerprint where none could follow).
    if (place.stage + 2 * stride > last) return false;
    for (const Vec& v : msg->slots)
      for (const Timed& r : v.ready) from = std::min(from, r.at.value);
  }
  out = Mark{};
  out.valid = true;
  out.run = run;
  out.stage = stage;
  out.now = now.value;
  out.from = from;
  out.cutoff = std::min(from, ex_.fab(wafer).flow().model_now());
  records_.fingerprint(ex_.fab(wafer), from, out.cutoff, wafer_rect(wafer), true, out.state);
  for (const auto& [msg, place] : places_) {
    MessageMark& mm = out.messages[msg];
    mm.place = place;
    for (int k = 0; k < kSlots; ++k) mm.slots[k] = timing_of(msg->slots[k]);
  }
  return true;
}

bool PipelineReplay::repeats(const Mark& before, const Mark& now, std::uint64_t& period,
                             std::unordered_map<const TokenMessage*, CycleBreakdown>& dpath) const {
  if (!before.valid || before.run != now.run ||
      now.stage - before.stage != run_stride_[static_cast<std::size_t>(now.run)])
    return false;
  period = now.now - before.now;
  if (now.from - before.from != period || !(now.state == before.state) ||
      now.messages.size() != before.messages.size())
    return false;
  dpath.clear();
  for (const auto& [msg, b] : now.messages) {
    const auto it = before.messages.find(msg);
    if (it == before.messages.end()) return false;
    const MessageMark& a = it->second;
    if (b.place.stage - now.stage != a.place.stage - before.stage || b.place.step != a.place.step ||
        b.place.at - a.place.at != period)
      return false;
    CycleBreakdown d;
    bool have = false;
    for (int k = 0; k < kSlots; ++k)
      if (!moved_by(a.slots[k], b.slots[k], period, d, have)) return false;
    dpath[msg] = d;
  }
  return true;
}

bool PipelineReplay::inside(std::uint64_t periods) const {
  const auto run = static_cast<std::size_t>(replay_run_);
  const std::uint64_t last = static_cast<std::uint64_t>(run_last_[run]);
  const std::uint64_t stride = static_cast<std::uint64_t>(run_stride_[run]);
  for (const auto& [msg, steps] : learned_) {
    // A prompt block that needs no logits goes back to the host from the
    // model's last layer, the head taking no step of it (run_stage): no step
    // after the run would stop the replay before it is back, so none of its
    // steps may be in the run's last stage.
    const std::uint64_t end = run_ends_layers_[run] && !msg->needs_logits ? last - 1 : last;
    for (const Step& s : steps)
      if (static_cast<std::uint64_t>(s.stage) + periods * stride > end) return false;
  }
  return true;
}

void PipelineReplay::begin_recording(Mark m) {
  mark_ = std::move(m);
  steps_.clear();
  const int wafer = run_wafer_[static_cast<std::size_t>(mark_.run)];
  records_.count_from(ex_.fab(wafer), wafer_rect(wafer));
}

bool PipelineReplay::checkpoint(int stage, const TokenMessage& m, Cycles now) {
  places_[&m] = Place{stage, 0, now.value};
  if (tracked_ && tracked_ != &m) return false;
  const int run = run_of_stage_[static_cast<std::size_t>(stage)];
  Mark here;
  if (run < 0 || !mark(run, stage, now, here)) {
    tracked_ = nullptr;
    forget();
    return false;
  }
  tracked_ = &m;
  const int wafer = run_wafer_[static_cast<std::size_t>(run)];
  // Every message was inside the run at both checkpoints, so every step
  // between them was a step of the run's stages: on the run's wafer (only a
  // run's first layer takes its input from elsewhere, and a message whose
  // input still lay elsewhere would not have its vectors where the one a
  // layer on has them).
  std::uint64_t period = 0;
  std::unordered_map<const TokenMessage*, CycleBreakdown> dpath;
  const bool again = mark_.valid && repeats(mark_, here, period, dpath);
  if (!again) {
    begin_recording(std::move(here));
    return false;
  }
  // Every message stepped through one layer since the last checkpoint:
  // those steps are the learned period.
  replay_run_ = run;
  learned_ = std::move(steps_);
  steps_.clear();
  if (learned_.size() != here.messages.size() || !inside(1)) {
    learned_.clear();
    begin_recording(std::move(here));
    return false;
  }
  records_.counts_since(ex_.fab(wafer), wafer_rect(wafer), period_counts_);
  records_.hold_scan();  // the busy records the write-out moves
  cursors_.clear();
  for (const auto& [msg, d] : dpath) cursors_[msg] = Cursor{0, 1, d, d};
  period_ = period;
  periods_ = 0;
  settled_from_ = here.cutoff;
  forget();
  ex_.fab(wafer).flow().keep_records(
      true);  // the recycler judges by the latest reservation, not written yet
  ex_.set_frozen(true);
  replaying_ = true;
  return true;
}

bool PipelineReplay::begins_period(const TokenMessage& m) const {
  const auto c = cursors_.find(&m);
  return c != cursors_.end() && c->second.next == 0;
}

void PipelineReplay::apply(int stage, int step, TokenMessage& m, Cycles now, Cycles& done) {
  const auto c = cursors_.find(&m);
  const auto l = learned_.find(&m);
  if (c == cursors_.end() || l == learned_.end())
    throw std::logic_error("PipelineReplay: a message stepped that the learned period lacks");
  if (run_of_stage_[static_cast<std::size_t>(stage)] != replay_run_)
    throw std::logic_error("PipelineReplay: a replayed step left the run");
  Cursor& cur = c->second;
  const Step& s = l->second[cur.next];
  const std::uint64_t stride =
      static_cast<std::uint64_t>(run_stride_[static_cast<std::size_t>(replay_run_)]);
  const std::uint64_t shift = cur.period * period_;
  if (static_cast<std::uint64_t>(s.stage) + cur.period * stride !=
          static_cast<std::uint64_t>(stage) ||
      s.step != step || s.start + shift != now.value)
    throw std::logic_error("PipelineReplay: a replayed step left the learned period's order");
  for (const auto& [k, v] : s.slots) {
    Vec& d = m.slots[k];
    d.layout = v.layout;
    d.tokens = v.tokens;
    d.ready = v.ready;
    for (Timed& t : d.ready) {
      t.at = Cycles{t.at.value + shift};
      t.path += cur.moved;  // modulo 2^64, as operator- took it
    }
  }
  done = Cycles{s.done + shift};
  // A functional run's numbers chose this phase's experts too: their choice
  // is taken and dropped, as the simulated phase would take it.
  const StageProgram& sp = program_.stages[static_cast<std::size_t>(stage)];
  const Phase* ph = phase_at(sp, step);
  if (ph && ph->kind == PhaseKind::moe) ex_.skip_expert_choices(sp.layer, m);
  places_[&m] = Place{stage, step + 1, done.value};
  if (layer_start(stage, step)) ++replayed_layers_;
  if (++cur.next == l->second.size()) {
    cur.next = 0;
    ++cur.period;
    cur.moved += cur.dpath;
  }
}

void PipelineReplay::settle(std::uint64_t periods) {
  // Every message has finished exactly `periods` periods: the state is the
  // replay's first checkpoint's, periods * P later.
  for (const auto& [msg, cur] : cursors_)
    if (cur.next != 0 || cur.period != periods + 1)
      throw std::logic_error("PipelineReplay: a replay stopped part way through a period");
  fabric::Fabric& f = ex_.fab(run_wafer_[static_cast<std::size_t>(replay_run_)]);
  const std::uint64_t shift = periods * period_;
  ex_.set_frozen(false);
  f.flow().keep_records(false);
  f.flow().shift_clock(settled_from_, shift);
  records_.shift_held(f, shift);
  RegionRecords::add(f, period_counts_, periods);
  replayed_periods_ += periods;
  replaying_ = false;
  learned_.clear();
  cursors_.clear();
  tracked_ = nullptr;
  forget();
}

}  // namespace wafersim::sim
