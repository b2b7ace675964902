#include "sim/exec/layer_replay.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

#include "sim/exec/record_recycler.hpp"

namespace wafersim::sim {

namespace {

// Placed the same way (the name, which says the layer, aside).
bool same_matrix(const MatrixPlacement* a, const MatrixPlacement* b) {
  if (!a || !b) return a == b;
  MatrixPlacement x = *a;
  x.name = b->name;
  return x == *b;
}

bool same_attention(const AttentionPlacement* a, const AttentionPlacement* b) {
  if (!a || !b) return a == b;
  return *a == *b;
}

// Mixtures of experts placed alike, names aside, with every expert of both
// placed as the first of `a` (whole regions: each spans the region): the k
// experts one token chooses then time alike whichever they are, in either
// layer. (Several tokens are another matter: how many choose each expert
// changes the time; LayerReplay::enter keeps such messages out.)
bool same_experts(const LayerStage* a, const LayerStage* b) {
  if (!a || !b) return a == b;
  if (!same_matrix(&a->router, &b->router) || a->experts.empty() ||
      a->experts.size() != b->experts.size())
    return false;
  const ExpertPlacement& first = a->experts.front();
  for (const LayerStage* st : {a, b})
    for (const ExpertPlacement& e : st->experts)
      if (!same_matrix(&e.gate_up, &first.gate_up) || !same_matrix(&e.down, &first.down))
        return false;
  return true;
}

// Phases whose timing is the same (the layer's weights and labels aside).
bool same_timing(const Phase& a, const Phase& b) {
  return a.kind == b.kind && a.a == b.a && a.b == b.b && a.out == b.out && a.target == b.target &&
         a.spread == b.spread && same_matrix(a.matrix, b.matrix) && a.weights == b.weights &&
         same_attention(a.attention, b.attention) &&
         (a.kind == PhaseKind::moe ? same_experts(a.stage, b.stage)
                                   : a.stage == nullptr && b.stage == nullptr) &&
         a.gamma == b.gamma && a.statistic == b.statistic &&
         a.statistic_groups == b.statistic_groups;
}

bool same_timing(const StageProgram& a, const StageProgram& b) {
  if (a.continues_layer != b.continues_layer || a.ends_layer != b.ends_layer ||
      a.input_spread != b.input_spread || a.input != b.input || a.output != b.output ||
      a.phases.size() != b.phases.size())
    return false;
  for (std::size_t i = 0; i < a.phases.size(); ++i)
    if (!same_timing(a.phases[i], b.phases[i])) return false;
  return true;
}

bool same_header(const TokenMessage& a, const TokenMessage& b) {
  if (a.user != b.user || a.position != b.position || a.tokens != b.tokens ||
      a.prefill != b.prefill || a.needs_logits != b.needs_logits || a.verifies != b.verifies ||
      a.batch.size() != b.batch.size() || a.logit_rows != b.logit_rows)
    return false;
  for (std::size_t i = 0; i < a.batch.size(); ++i)
    if (a.batch[i].user != b.batch[i].user || a.batch[i].position != b.batch[i].position)
      return false;
  return true;
}

std::array<Vec, kSlots> timing_of(const std::array<Vec, kSlots>& slots) {
  std::array<Vec, kSlots> out;
  for (int s = 0; s < kSlots; ++s) out[s] = sim::timing_of(slots[s]);
  return out;
}

}  // namespace

bool stages_time_alike(const StageProgram& a, const StageProgram& b) {
  return same_timing(a, b);
}

std::vector<std::pair<std::size_t, std::size_t>> program_layers(const Program& program) {
  const auto& stages = program.stages;
  std::vector<std::pair<std::size_t, std::size_t>> layers;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].layer < 0 || stages[i].continues_layer) continue;
    std::size_t j = i;
    while (j + 1 < stages.size() && !stages[j].ends_layer && stages[j + 1].continues_layer) ++j;
    if (stages[j].ends_layer) layers.emplace_back(i, j);
  }
  return layers;
}

Vec timing_of(const Vec& v) {
  Vec out;
  out.layout = v.layout;
  out.ready = v.ready;
  out.tokens = v.tokens;
  return out;
}

bool moved_by(const Vec& a, const Vec& b, std::uint64_t shift, CycleBreakdown& dpath, bool& have) {
  if (a.tokens != b.tokens || a.ready.size() != b.ready.size() || a.layout != b.layout)
    return false;
  for (std::size_t i = 0; i < a.ready.size(); ++i) {
    if (b.ready[i].at.value - a.ready[i].at.value != shift) return false;
    const CycleBreakdown d = b.ready[i].path - a.ready[i].path;
    if (!have) {
      dpath = d;
      have = true;
    } else if (d != dpath) {
      return false;
    }
  }
  return true;
}

bool LayerReplay::usable(Executor& ex) {
  if (ex.computes_values()) return false;
  for (int w = 0; w < ex.wafer_count(); ++w) {
    const fabric::FlowModel& f = ex.fab(w).flow();
    if (f.repaired() || f.sharing() != fabric::LinkSharing::interleave) return false;
  }
  return true;
}

LayerReplay::LayerReplay(Executor& ex, const Program& program, int users, bool always, int threads)
    : ex_(ex), program_(program), users_(users), records_(threads), always_(always) {
  // Until one is measured: ~10 ns a record (4 links, a ramp, a core timeline per core).
  scan_s_per_core_ = 60e-9;
  const auto& stages = program.stages;
  cycle_of_stage_.assign(stages.size(), -1);
  // The layers (their stages [first, last]) and the runs of layers in a row
  // whose stages time alike (a run named by its first layer).
  const std::vector<std::pair<std::size_t, std::size_t>> layers = program_layers(program);
  std::vector<std::size_t> run_of(layers.size());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const auto [first, last] = layers[l];
    bool same = l > 0 && layers[l - 1].second + 1 == first &&
                layers[l - 1].second - layers[l - 1].first == last - first;
    for (std::size_t k = 0; same && k <= last - first; ++k)
      same = same_timing(stages[layers[l - 1].first + k], stages[first + k]);
    run_of[l] = same ? run_of[l - 1] : l;
  }
  // The cycles: a run of layers of two or more stages each is split (see
  // the header), other runs take a cycle per layer.
  const auto add = [&](std::size_t first, std::size_t last, int run, bool split, bool partial) {
    Cycle c;
    c.first = first, c.last = last, c.run = run, c.split = split, c.partial = partial;
    bool several = false;
    for (std::size_t k = first; k <= last; ++k)
      for (const Phase& ph : stages[k].phases) {
        if (ph.kind == PhaseKind::moe) c.experts = true;
        if (!ph.matrix) continue;
        if (c.wafer < 0) c.wafer = ph.matrix->wafer;
        several = several || ph.matrix->wafer != c.wafer;
      }
    if (several) c.wafer = -1;
    if (split) classify_slots(c);
    for (std::size_t k = first; split && !partial && k < last; ++k)
      if (stages[k].ends_layer) c.layer_end = static_cast<int>(k - first);
    for (std::size_t k = first; k <= last; ++k)
      cycle_of_stage_[k] = static_cast<int>(cycles_.size());
    cycles_.push_back(std::move(c));
  };
  for (std::size_t l = 0; l < layers.size();) {
    std::size_t e = l;  // the run is layers [l, e]
    while (e + 1 < layers.size() && run_of[e + 1] == l) ++e;
    bool split = e > l;
    for (std::size_t k = l; k <= e; ++k) split = split && layers[k].second > layers[k].first;
    const int run = static_cast<int>(cycles_.size());
    if (split) {
      for (std::size_t k = l; k < e; ++k)
        add(layers[k].first + 1, layers[k + 1].first, run, true, false);
      add(layers[e].first + 1, layers[e].second, run, true, true);
    } else {
      for (std::size_t k = l; k <= e; ++k)
        add(layers[k].first, layers[k].second, run, false, false);
    }
    l = e + 1;
  }
  for (std::size_t c = cycles_.size(); c-- > 0;)
    cycles_[c].run_left = c + 1 < cycles_.size() && cycles_[c + 1].run == cycles_[c].run
                              ? cycles_[c + 1].run_left + 1
                              : 1;
  run_s_.assign(cycles_.size(), 0.0);
}

// Which slots a split cycle reads before it writes them (those compared at
// its start), which of those only as a relaxable operand of an add, and
// from which stage's exit on each slot holds what the cycle wrote. The
// reads and writes are run_stage's: the move of the residual (x) onto a
// stage's input, each phase's operands and result, and the residual taken
// from `out` where a layer ends.
void LayerReplay::classify_slots(Cycle& cy) const {
  const auto bit = [](Slot s) { return std::uint32_t{1} << static_cast<int>(s); };
  struct Candidate {
    Slot slot;
    int stage, phase;
    Slot other;
  };
  std::vector<Candidate> candidates;
  std::uint32_t written = 0, live = 0, fixed = 0;
  cy.first_write.fill(kNever);
  for (std::size_t k = cy.first; k <= cy.last; ++k) {
    const StageProgram& sp = program_.stages[k];
    const int stage = static_cast<int>(k - cy.first);
    std::array<int, kSlots> last_write;
    last_write.fill(-2);
    int phase = -1;  // the move onto the stage's input
    const auto read = [&](Slot s, const Phase* add, Slot other) {
      if (written & bit(s)) return;
      live |= bit(s);
      if (add && (written & bit(other)))
        candidates.push_back({s, stage, phase, other});
      else
        fixed |= bit(s);
    };
    const auto write = [&](Slot s) {
      last_write[static_cast<std::size_t>(s)] = phase;
      if (written & bit(s)) return;
      written |= bit(s);
      cy.first_write[static_cast<std::size_t>(s)] = stage;
    };
    if (!sp.continues_layer) {
      read(Slot::x, nullptr, Slot::x);
      write(Slot::x);
    }
    for (const Phase& ph : sp.phases) {
      ++phase;
      switch (ph.kind) {
        case PhaseKind::add:
          read(ph.a, &ph, ph.b);
          read(ph.b, &ph, ph.a);
          write(ph.out);
          break;
        case PhaseKind::moe:
          read(ph.a, nullptr, ph.a);
          read(ph.b, nullptr, ph.b);
          write(ph.out);
          break;
        case PhaseKind::bias:
        case PhaseKind::qk_norm:
        case PhaseKind::rope:
        case PhaseKind::gelu:
          read(ph.a, nullptr, ph.a);
          write(ph.a);
          break;
        case PhaseKind::argmax:
          read(ph.a, nullptr, ph.a);
          break;
        default:
          read(ph.a, nullptr, ph.a);
          write(ph.out);
          break;
      }
    }
    ++phase;
    if (sp.ends_layer && sp.layer >= 0) {
      read(Slot::out, nullptr, Slot::out);
      write(Slot::x);
    }
    // The add's other operand must still be in the stage's exit.
    for (const Candidate& c : candidates)
      if (c.stage == stage && last_write[static_cast<std::size_t>(c.other)] > c.phase)
        fixed |= bit(c.slot);
  }
  std::uint32_t relaxed = 0;
  for (const Candidate& c : candidates)
    if (!(fixed & bit(c.slot))) {
      cy.relaxed.push_back({static_cast<int>(c.slot), c.stage, static_cast<int>(c.other)});
      relaxed |= bit(c.slot);
    }
  cy.strict = live & ~relaxed;
  if (cy.strict == 0) {  // nothing to take the state relative to: compare all exactly
    cy.strict = live;
    cy.relaxed.clear();
  }
}

int LayerReplay::cycle_at(const StageProgram& sp, bool& first) const {
  const auto i = static_cast<std::size_t>(&sp - program_.stages.data());
  if (i >= program_.stages.size())
    throw std::logic_error("LayerReplay: a stage of another program");
  const int c = cycle_of_stage_[i];
  first = c >= 0 && cycles_[static_cast<std::size_t>(c)].first == i;
  return c;
}

void LayerReplay::sent() {
  ++in_flight_;
  // A layer being learned must have run alone (the eligibility says no
  // message can come meanwhile; this keeps the memo honest if one does).
  if (learning_) forget();
  if (replaying_ >= 0 || pending_ > 0)
    throw std::logic_error("LayerReplay: a message was sent while replayed layers were pending");
}

bool LayerReplay::eligible(const TokenMessage& m) const {
  // One user: the host sends nothing while its last message is out. A
  // decode batch of every user (or a batch of every user's prompt blocks):
  // nothing either until it is back.
  if (in_flight_ != 1 || m.verifies) return false;
  return users_ == 1 || (m.is_batch() && m.batch_users() == users_);
}

std::uint64_t LayerReplay::from_of(const TokenMessage& m, const Cycle& cy) {
  std::uint64_t t = std::numeric_limits<std::uint64_t>::max();
  for (int s = 0; s < kSlots; ++s)
    if (cy.strict >> s & 1)
      for (const Timed& r : m.slots[static_cast<std::size_t>(s)].ready) t = std::min(t, r.at.value);
  return t == std::numeric_limits<std::uint64_t>::max() ? RecordRecycler::earliest_ready(m) : t;
}

LayerReplay::Entry LayerReplay::entry_of(const TokenMessage& m, const Cycle& cy, Cycles now,
                                         bool with_state, bool with_records, const Area& region) {
  Entry e;
  e.from = from_of(m, cy);
  e.now_rel = now.value - e.from;
  if (with_state) {
    const auto t0 = Clock::now();
    e.cutoff = std::min(e.from, fab(region.wafer).flow().model_now());
    records_.fingerprint(fab(region.wafer), e.from, e.cutoff, region.rect, with_records, e.state);
    scan_s_per_core_ =
        std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, region.rect.cores());
  }
  e.slots = timing_of(m.slots);
  m.copy_header_to(e.header);
  return e;
}

bool LayerReplay::same_start(const Entry& e, const Cycle& cy, std::uint64_t shift,
                             CycleBreakdown& dpath) const {
  bool have_path = false;
  dpath = CycleBreakdown{};
  // Slot s exactly: the same layout, every ready time `shift` later, every
  // path moved by one breakdown.
  const auto exact = [&](int s) {
    return moved_by(memo_.entry.slots[static_cast<std::size_t>(s)],
                    e.slots[static_cast<std::size_t>(s)], shift, dpath, have_path);
  };
  for (int s = 0; s < kSlots; ++s)
    if ((cy.strict >> s & 1) && !exact(s)) return false;
  // A relaxed slot: where the memo's add took the other operand for every
  // piece, this one need only be strictly earlier than the other operand
  // (shifted) piece by piece, so that the add takes it again (ties keep
  // the first operand, so strictly); else exactly.
  const std::vector<Relaxed>& learned = cycles_[static_cast<std::size_t>(memo_.cycle)].relaxed;
  const bool same_relaxed =
      learned.size() == cy.relaxed.size() && memo_.dominated.size() == cy.relaxed.size() &&
      std::equal(learned.begin(), learned.end(), cy.relaxed.begin(),
                 [](const Relaxed& a, const Relaxed& b) {
                   return a.slot == b.slot && a.stage == b.stage && a.other == b.other;
                 });
  for (std::size_t k = 0; k < cy.relaxed.size(); ++k) {
    const Relaxed& r = cy.relaxed[k];
    if (!same_relaxed || !memo_.dominated[k]) {
      if (!exact(r.slot)) return false;
      continue;
    }
    const Vec& a = memo_.entry.slots[static_cast<std::size_t>(r.slot)];
    const Vec& b = e.slots[static_cast<std::size_t>(r.slot)];
    const Vec& other =
        memo_.exits[static_cast<std::size_t>(r.stage)][static_cast<std::size_t>(r.other)];
    if (a.tokens != b.tokens || a.layout != b.layout || b.ready.size() != other.ready.size())
      return false;
    for (std::size_t i = 0; i < b.ready.size(); ++i)
      if (b.ready[i].at.value >= other.ready[i].at.value + shift) return false;
  }
  return e.now_rel == memo_.entry.now_rel && same_header(e.header, memo_.entry.header);
}

void LayerReplay::apply(const StageProgram& sp, TokenMessage& m, std::size_t stage,
                        Cycles& until) const {
  // A functional run's numbers chose the experts of this layer (sp's) too:
  // their choice is taken (and dropped) as the simulated layer would take it.
  for (const Phase& ph : sp.phases)
    if (ph.kind == PhaseKind::moe) ex_.skip_expert_choices(sp.layer, m);
  // From the replayed layer's first stage on, the wafer's records are not
  // the layer's yet: the recycler must not take them (see the header).
  ex_.fab(memo_.region.wafer).flow().keep_records(true);
  const std::array<Vec, kSlots>& exit = memo_.exits[stage];
  const Cycle& cy = cycles_[static_cast<std::size_t>(replaying_)];
  for (int s = 0; s < kSlots; ++s) {
    // A slot the cycle has not written by this stage holds what it held.
    if (cy.first_write[static_cast<std::size_t>(s)] > static_cast<int>(stage)) continue;
    Vec& v = m.slots[s];
    v.layout = exit[s].layout;
    v.tokens = exit[s].tokens;
    v.ready = exit[s].ready;
    for (Timed& t : v.ready) {
      t.at = Cycles{t.at.value + shift_};
      t.path += dpath_;  // modulo 2^64, as operator- took it
    }
  }
  until = Cycles{memo_.exit_at[stage] + shift_};
}

void LayerReplay::forget() {
  mid_pages_.reset();
  memo_.reset();
  learning_ = false;
}

// Empty, keeping the memory of its vectors (a full wafer's counts are tens of MB).
void LayerReplay::Memo::reset() {
  cycle = -1;
  entry = Entry{};
  exits.clear();
  exit_at.clear();
  counts.clear();
  complete = false;
  period = 0;
  region = {};
  dominated.clear();
  mid = false;
}

void LayerReplay::begin_learning(int cycle, Entry e, const Area& region) {
  memo_.reset();
  memo_.cycle = cycle;
  memo_.entry = std::move(e);
  memo_.region = region;
  learning_ = true;
  stage_ = 0;
  records_.count_from(fab(region.wafer), region.rect);
  if (cycles_[static_cast<std::size_t>(cycle)].layer_end >= 0) make_room_for_mid();
}

void LayerReplay::make_room_for_mid() {
  mid_pages_.reset();
  const fabric::FlowModel& flow = fab(memo_.region.wafer).flow();
  const fabric::Rect& r = memo_.region.rect;
  std::vector<fabric::PageRange> fresh;
  // A vector's room, where it had to grow: memory never touched.
  const auto room = [&fresh](auto& v, std::size_t n) {
    if (v.capacity() >= n) return;
    v.clear();  // the last memo's: not worth moving
    v.reserve(n);
    fresh.push_back({v.data(), v.capacity() * sizeof(v[0])});
  };
  memo_.mid_links.resize(kParts);
  for (int k = 0; k < kParts; ++k)
    room(memo_.mid_links[static_cast<std::size_t>(k)].records, flow.region_part_size(r, k, kParts));
  room(memo_.mid_cores, static_cast<std::size_t>(r.width) * static_cast<std::size_t>(r.height));
  // Only where the run has a host thread to spare.
  if (!fresh.empty() && records_.team().threads() > 1)
    mid_pages_ = std::make_unique<fabric::PagePrefaulter>(std::move(fresh));
}

bool LayerReplay::enter(const StageProgram& sp, TokenMessage& m, Cycles now, Cycles& until) {
  bool first = false;
  const int c = cycle_at(sp, first);
  if (replaying_ >= 0) {
    const Cycle& cy = cycles_[static_cast<std::size_t>(replaying_)];
    const auto i = static_cast<std::size_t>(&sp - program_.stages.data());
    if (c != replaying_ || i != cy.first + stage_)
      throw std::logic_error("LayerReplay: a stage ran in the middle of a replayed layer");
    apply(sp, m, stage_, until);
    return true;
  }
  if (!first || !eligible(m) || (cycles_[static_cast<std::size_t>(c)].experts && m.tokens != 1)) {
    if (first && in_flight_ > 1 && cycles_[static_cast<std::size_t>(c)].run_left >= kLearnAhead)
      ++crowded_;
    settle();
    if (learning_) {
      const Cycle& cy = cycles_[static_cast<std::size_t>(memo_.cycle)];
      const auto i = static_cast<std::size_t>(&sp - program_.stages.data());
      if (c != memo_.cycle || i != cy.first + stage_) forget();
    }
    last_cycle_ = -1;
    if (first) timed_cycle_ = -1;
    return false;
  }
  const Cycle& cy = cycles_[static_cast<std::size_t>(c)];
  const bool next_in_run = memo_.complete && last_cycle_ >= 0 && c == last_cycle_ + 1 &&
                           cycles_[static_cast<std::size_t>(memo_.cycle)].run == cy.run;
  // A run's partial last cycle is replayed only where the memo's state
  // where its layer ended was copied.
  const bool replayable = !cy.partial || memo_.mid;
  // Right after a replay of the memo: the records are the memo's last
  // state, the replayed layers pending_shift_ cycles after it, so the token
  // alone tells whether this layer is one more.
  if (next_in_run && last_replayed_ && replayable) {
    Entry e = entry_of(m, cy, now, false);
    const std::uint64_t shift = e.from - memo_.entry.from;
    if (shift == pending_shift_ + memo_.period && same_start(e, cy, shift, dpath_)) {
      replaying_ = c, shift_ = shift, stage_ = 0;
      apply(sp, m, 0, until);
      return true;
    }
  }
  // Right after the memo's layer ran (the records hold just what it left):
  // does this layer start from the state it started from, shifted?
  const bool just_learned = next_in_run && !last_replayed_ && last_cycle_ == memo_.cycle;
  settle();
  learning_ = false;
  last_cycle_ = c, last_replayed_ = false;
  // Where the layer's work lies: the learned layer's region for the check;
  // for learning, the region it used when last simulated, or the previous
  // layer of the run used (its equal: the same routes), checked again when
  // the learned layer is done.
  const Area region = just_learned ? memo_.region : region_for(cy);
  if (region.wafer >= 0 && (just_learned ? checking_pays(cy, region) : learning_pays(c, region))) {
    Entry e = entry_of(m, cy, now, true, just_learned, region);
    if (just_learned && replayable) {
      const std::uint64_t shift = e.from - memo_.entry.from;
      if (e.state == memo_.entry.state && same_start(e, cy, shift, dpath_)) {
        memo_.period = shift;
        settled_from_ = e.cutoff;
        records_.hold_scan();
        pending_shift_ = 0;
        replaying_ = c, shift_ = shift, stage_ = 0;
        apply(sp, m, 0, until);
        return true;
      }
    }
    if (learning_pays(c, region)) {
      begin_learning(c, std::move(e), region);
      start_timing(c);
      return false;
    }
  }
  forget();
  start_timing(c);
  return false;
}

void LayerReplay::start_timing(int c) {
  timed_cycle_ = c;
  cycle_began_ = Clock::now();
  ex_.take_touched();  // from here on: this layer's
}

// Where the layer worked when an earlier token's pass simulated it (the same
// routes), else where the layer before it in its run worked. The first
// layer of a run also brings the run's input from elsewhere (the
// embedding, another group's region), so its box can be much larger than
// the layers after it need (2 layer groups: each the height of the wafer).
LayerReplay::Area LayerReplay::region_for(const Cycle& cy) {
  const bool own = cy.box.wafer >= 0;
  const Area& seen = own ? cy.box : last_box_;
  const bool known = own || (box_run_ == cy.run && last_box_.wafer >= 0);
  const int wafer = known ? seen.wafer : cy.wafer;
  if (wafer < 0) return {};
  fabric::Fabric& f = fab(wafer);
  if (!known || f.defects().dead_count() > 0)
    return {wafer, fabric::Rect{0, 0, f.mesh().width(), f.mesh().height()}};
  return seen;
}

double LayerReplay::scan_estimate(const Area& region) const {
  return scan_s_per_core_ * region.rect.cores();
}

// The first layer of a run starts from other work (the embedding, another
// group's layers), the second from a layer like itself: learning starts
// there, with at least one more layer after the next to replay, and (unless
// always) where the layers it could spare (every one after it in the run)
// take longer to simulate than the state's two fingerprints and the
// counting and writing out (about one more fingerprint's time) take.
bool LayerReplay::learning_pays(int c, const Area& region) const {
  const Cycle& cy = cycles_[static_cast<std::size_t>(c)];
  const bool first_of_run = c == 0 || cycles_[static_cast<std::size_t>(c - 1)].run != cy.run;
  if ((first_of_run && !cy.split) || cy.run_left < kLearnAhead) return false;
  if (always_) return true;
  const double layer_s = run_s_[static_cast<std::size_t>(cy.run)];
  return layer_s > 0 && (cy.run_left - 1) * layer_s > 3 * scan_estimate(region);
}

bool LayerReplay::checking_pays(const Cycle& cy, const Area& region) const {
  const double layer_s = run_s_[static_cast<std::size_t>(cy.run)];
  return always_ || (layer_s > 0 && cy.run_left * layer_s > scan_estimate(region));
}

void LayerReplay::left(const StageProgram& sp, const TokenMessage& m, Cycles handed_at) {
  if (replaying_ >= 0) {
    const Cycle& cy = cycles_[static_cast<std::size_t>(replaying_)];
    if (cy.first + ++stage_ <= cy.last) return;
    ++replayed_;
    if (cy.partial) {
      pending_partial_ = true;
      partial_shift_ = shift_;
    } else {
      ++pending_;
      pending_shift_ = shift_;
    }
    last_cycle_ = replaying_;
    last_replayed_ = true;
    replaying_ = -1;
    ex_.set_frozen(true);
    return;
  }
  if (timed_cycle_ >= 0) {
    Cycle& cy = cycles_[static_cast<std::size_t>(timed_cycle_)];
    if (&sp == &program_.stages[cy.last]) {
      run_s_[static_cast<std::size_t>(cy.run)] =
          std::chrono::duration<double>(Clock::now() - cycle_began_).count();
      last_box_ = ex_.take_touched();
      cy.box = last_box_;
      box_run_ = cy.run;
      timed_cycle_ = -1;
    }
  }
  if (!learning_) return;
  const Cycle& cy = cycles_[static_cast<std::size_t>(memo_.cycle)];
  const auto i = static_cast<std::size_t>(&sp - program_.stages.data());
  if (i != cy.first + stage_) {
    forget();
    return;
  }
  memo_.exits.push_back(timing_of(m.slots));
  memo_.exit_at.push_back(handed_at.value);
  if (static_cast<int>(stage_) == cy.layer_end) take_mid();
  if (cy.first + ++stage_ <= cy.last) return;
  learning_ = false;
  // Its fingerprint took the region the layer before it used: a layer that
  // went outside it cannot be replayed from it.
  const fabric::Rect& r = memo_.region.rect;
  if (last_box_.wafer != memo_.region.wafer || last_box_.rect.width == 0 ||
      !r.encloses(last_box_.rect)) {
    forget();
    return;
  }
  records_.counts_since(fab(memo_.region.wafer), r, memo_.counts);
  memo_.dominated.clear();
  for (const Relaxed& r : cy.relaxed) {
    const Vec& a = memo_.entry.slots[static_cast<std::size_t>(r.slot)];
    const Vec& other =
        memo_.exits[static_cast<std::size_t>(r.stage)][static_cast<std::size_t>(r.other)];
    bool earlier = a.ready.size() == other.ready.size();
    for (std::size_t i = 0; earlier && i < a.ready.size(); ++i)
      earlier = a.ready[i].at < other.ready[i].at;
    memo_.dominated.push_back(earlier);
  }
  memo_.complete = true;
  last_cycle_ = memo_.cycle;
  last_replayed_ = false;
}

void LayerReplay::settle() {
  if (pending_ == 0 && !pending_partial_) return;
  ex_.set_frozen(false);
  fabric::Fabric& f = fab(memo_.region.wafer);
  fabric::FlowModel& flow = f.flow();
  fabric::CoreTimeline& cores = f.cores();
  flow.keep_records(false);
  flow.shift_clock(settled_from_, pending_shift_);
  if (!pending_partial_) {
    records_.shift_held(f, pending_shift_);
  } else {
    // The run ended with a partial cycle: its records, cores and clock are
    // the memo's where its layer ended, shifted (over the whole region, so
    // the full cycles' shift above needs no records moved). The parts
    // share the wide records' table, so they take it in turns.
    const fabric::Rect& r = memo_.region.rect;
    flow.set_concurrent(true);
    records_.team().start(kParts + 1, [&](int k, int) {
      if (k == kParts)
        cores.write_region(r, memo_.mid_cores, partial_shift_);
      else
        flow.write_region_part(r, k, kParts, memo_.mid_links[static_cast<std::size_t>(k)],
                               partial_shift_);
    });
    records_.team().finish();
    flow.set_concurrent(false);
    flow.write_clock(memo_.mid_clock, partial_shift_);
    RegionRecords::add(f, memo_.mid_counts, 1);
  }
  RegionRecords::add(f, memo_.counts, pending_);
  pending_ = 0;
  pending_shift_ = 0;
  pending_partial_ = false;
  partial_shift_ = 0;
  // The records hold the last replayed layer's state now, not the memo's:
  // a later layer is learned afresh.
  last_replayed_ = false;
}

// The memo's layer ended inside its split cycle: the region's records,
// cores and clock as they are, and what the cycle has added to the byte
// and busy counters so far, for a run's partial last cycle.
void LayerReplay::take_mid() {
  fabric::Fabric& f = fab(memo_.region.wafer);
  fabric::FlowModel& flow = f.flow();
  const fabric::Rect& r = memo_.region.rect;
  mid_pages_.reset();                             // what it has not faulted in, the copy does
  records_.counts_since(f, r, memo_.mid_counts);  // line records written out first
  memo_.mid_links.resize(kParts);
  records_.team().start(kParts + 1, [&](int k, int) {
    if (k == kParts)
      f.cores().copy_region(r, memo_.mid_cores);
    else
      flow.copy_region_part(r, k, kParts, memo_.mid_links[static_cast<std::size_t>(k)]);
  });
  records_.team().finish();
  memo_.mid_clock = flow.copy_clock();
  memo_.mid = true;
}

}  // namespace wafersim::sim
