// Replaying a layer instead of simulating it again, exactly.
//
// Layers that share their cores (a whole-region layer group: every layer of
// the group spans the same region the same way) do the same work on the
// same cores, one after another. When one token crosses them alone, layer
// L + 1 often starts from what layer L started from, only later: the same
// vectors ready at the same offsets from the earliest of them, the fabric's
// records busy the same way after it, the same cores still at work. Then
// layer L + 1 *is* layer L moved in time: every reservation, every arrival
// and every critical path (up to what its input had already gathered) is
// layer L's shifted by the same cycles, because no timing rule of the
// fabric reads a moment except against another. The replay simulates layer
// L, checks that layer L + 1 starts from layer L's state shifted, and then
// writes layer L's results shifted for L + 1, L + 2, ... without simulating
// them, as long as the token goes on through equal layers alone.
//
// Exact, not an estimate: `run --json` is byte for byte the same with and
// without (RunOptions::layer_replay; the tests compare both).
//
// - The unit replayed (a cycle): in a run of equal layers of two or more
//   stages each, from a layer's second stage through the next layer's
//   first. A layer's first stage takes its input, and that is where the
//   run's first layer differs from the others (its input comes from the
//   embedding or another group's region, its residual arrives in another
//   pattern): past the first norm the run's first layer is the others'
//   shifted. So the run's first stage stays out of every cycle, the run's
//   first cycle can be learned and the second replayed, and a token
//   simulates one cycle of each run instead of its first two layers. The
//   run's last layer ends with a partial cycle (the others' stages but the
//   last): where the learned cycle's layer ended, its region's records,
//   cores and clock were copied, and the partial cycle writes that copy
//   back, shifted (FlowModel::copy_region_part). Runs of one-stage layers:
//   a cycle per layer, the first of a run not learned.
// - What a cycle's start compares: the slots it reads before writing them
//   (classify_slots). Slots it writes first do not matter, and its
//   residual (read by the attention's residual add only) need only be
//   earlier, piece by piece, than the add's other operand was in the
//   learned cycle, where the add took that operand too: then the add
//   takes it again whatever the residual's own times are.
// - What "the same state" means: fabric::FlowModel::add_state_after and
//   fabric::CoreTimeline::add_state_after fingerprint every link, ramp and
//   core record that is still busy after the moment the token's earliest
//   vector the cycle compares is ready (every later piece of the cycle's
//   work waits for one of them; the recycled-records argument: a record whose every
//   reservation ends by then answers every message to come as a fresh one
//   does), relative to that moment, and the model's `now`.
// - The token: every vector's layout and ready times at the same offsets,
//   and every critical path moved by the same breakdown (later() picks by
//   time alone, so the outputs' paths move by it too).
// - While replayed layers are pending, the fabric's records still hold the
//   state the last simulated layer left; before anything else uses the
//   fabric (another stage, the host, the results) settle() moves every
//   record still busy after that moment by the replayed cycles and adds the
//   replayed layers' link bytes and core busy cycles, layer by layer the
//   same. Anything that reaches the executor while they are pending is a
//   logic error.
// - When: one message in flight (one user's, or a decode batch of every
//   user: the host sends nothing more until it is back), timing only, no repaired links, no
//   trace, and the layer's work on one wafer. A mixture of experts only where every expert is
//   placed alike (whole regions) and the message is one token: its k experts then time alike
//   whichever they are. Otherwise every layer is simulated, as before.
// - Several wafers: the fingerprints, counts and write-out take the wafer
//   the layer's work is on (Executor::take_touched). With recycled link
//   records (sim/exec/record_recycler.hpp) that wafer keeps its records
//   while replayed layers are pending (FlowModel::keep_records): the
//   latest reservation's end, by which the recycler judges, does not know
//   of them until they are written.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "fabric/state_hash.hpp"
#include "fabric/zeroed_array.hpp"
#include "sim/exec/executor.hpp"
#include "sim/exec/region_records.hpp"
#include "sim/exec/token_message.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

// Whether two stages time alike: the same phases on the same cores, the
// layer's weights and names aside (the test for a run of equal layers).
bool stages_time_alike(const StageProgram& a, const StageProgram& b);
// The layers of `program`, each as its stages [first, last]: a stage that
// does not continue another, through the one that ends the layer.
std::vector<std::pair<std::size_t, std::size_t>> program_layers(const Program& program);
// A vector's timing (layout, ready times, tokens), without its values.
Vec timing_of(const Vec& v);
// Whether `b` is `a` moved `shift` cycles later: the same layout, every
// ready time `shift` later, every piece's critical path moved by one
// breakdown (`dpath`; the first piece sets it where `have` is false).
bool moved_by(const Vec& a, const Vec& b, std::uint64_t shift, CycleBreakdown& dpath, bool& have);

class LayerReplay {
 public:
  // For `ex`'s stages in `program`; `users`: the workload's. Call usable()
  // to know whether the run qualifies at all. `always`: learn and check a
  // layer wherever a replay could follow, even where the fingerprints cost
  // more host time than the replay spares (tests); otherwise only where the
  // host times measured so far say it pays. `threads`: host threads for the
  // fingerprints and the writing out (the records cut into parts; the same
  // results for any count).
  LayerReplay(Executor& ex, const Program& program, int users, bool always = false,
              int threads = 1);

  static bool usable(Executor& ex);
  // Where a layer's work lies: a wafer and a rectangle of it (wafer < 0:
  // unknown, or several wafers).
  using Area = Executor::Touched;

  // The host sent a token into the pipeline / took one back.
  void sent();
  void returned() { --in_flight_; }

  // A stage is about to run `sp` for `m` at simulated time `now` (after its
  // queueing wait). True: the stage is replayed, m's vectors are set, and the
  // stage hands m on at `until`. False: the stage runs it (and calls left()).
  bool enter(const StageProgram& sp, TokenMessage& m, Cycles now, Cycles& until);
  // The stage handed `m` on at `handed_at` (after a run or a replay).
  void left(const StageProgram& sp, const TokenMessage& m, Cycles handed_at);
  // Writes the pending replayed layers into the fabric (see the header).
  void settle();

  // Layer passes (one layer, one token) replayed and simulated so far.
  std::uint64_t replayed() const { return replayed_; }
  // Layer passes that could have been learned or replayed but were
  // simulated because other messages were in flight (users pipelined
  // without a decode batch of every user, a prompt in several blocks).
  std::uint64_t crowded() const { return crowded_; }

 private:
  // A layer is learned (simulated with its state kept) only with at least
  // this many equal layers from it on: it, the next (checked against it) and
  // one more to replay.
  static constexpr int kLearnAhead = 3;
  static constexpr int kNever = 1 << 30;
  // A slot the cycle reads, before writing it, only as an operand of an
  // `add` in stage `stage` (of the cycle) whose other operand `other` the
  // cycle has written by then and does not write again in that stage: the
  // residual stream entering a split cycle. If it is earlier, piece by
  // piece, than the other operand, the add takes the other operand and its
  // own ready times do not matter (see same_start).
  struct Relaxed {
    int slot = 0, stage = 0, other = 0;
  };
  struct Cycle {  // stages [first, last]: one layer's, or a split run's (below)
    std::size_t first = 0, last = 0;
    bool experts = false;  // a mixture of experts: one token at a time only
    int run = 0;           // cycles in a row with equal stages share a run
    int run_left = 0;      // this cycle and those after it in its run
    int wafer = -1;        // the wafer of its matrices (-1: none, or several)
    Area box;              // where it worked when last simulated (wafer -1: not yet)
    // A split run (see the constructor): the cycle runs from a layer's
    // second stage through the next layer's first; `partial`, the run's
    // last: its layer's stages from the second on, the other cycles' first
    // stages. Its slots: those compared exactly at its start (a bit per
    // slot; every slot unless split), the relaxed ones, and the stage
    // (0: the cycle's first) from whose exit on each slot holds what the
    // cycle wrote into it (before it, what it held when the cycle began).
    bool split = false, partial = false;
    // A split cycle but a partial one: the stage (of the cycle) whose exit
    // ends its layer, where the learned cycle's state is copied (-1: none).
    int layer_end = -1;
    std::uint32_t strict = ~std::uint32_t{0};
    std::vector<Relaxed> relaxed;
    std::array<int, kSlots> first_write{};
  };
  struct Entry {                // what a layer started from
    std::uint64_t from = 0;     // the token's earliest ready time
    std::uint64_t cutoff = 0;   // min(from, the flow model's now): see add_state_after
    std::uint64_t now_rel = 0;  // simulated time - from
    fabric::StateHash state;
    std::array<Vec, kSlots> slots;
    TokenMessage header;  // user, position, tokens, flags, batch
  };
  struct Memo {  // a simulated layer
    int cycle = -1;
    Entry entry;
    std::vector<std::array<Vec, kSlots>> exits;  // per stage
    std::vector<std::uint64_t> exit_at;
    // What the layer added to the links' byte counters and the cores' busy
    // cycles.
    RegionRecords::Counts counts;
    bool complete = false;
    // The next layer started from its state shifted by this many cycles.
    std::uint64_t period = 0;
    // Where its work lies (Executor::take_touched): its fingerprints take
    // this region's records only.
    Area region;
    // Per relaxed slot of its cycle: whether the add took the other operand
    // for every piece (else the slot is compared exactly).
    std::vector<bool> dominated;
    // A split cycle: its region's records, cores and clock where its layer
    // ended (the exit of its cycle's `layer_end`), and what it had added to
    // the byte and busy counters by then; `mid`: taken, so that a run's
    // partial last cycle can be replayed.
    bool mid = false;
    std::vector<fabric::FlowModel::RegionCopy> mid_links;  // per part
    std::vector<std::uint64_t> mid_cores;
    std::pair<std::uint64_t, std::uint64_t> mid_clock;
    RegionRecords::Counts mid_counts;
    void reset();
  };

  using Clock = std::chrono::steady_clock;
  int cycle_at(const StageProgram& sp, bool& first) const;
  bool learning_pays(int cycle, const Area& region) const;
  bool checking_pays(const Cycle& cy, const Area& region) const;
  // The region a layer of cy's run uses (the whole wafer until one was
  // simulated, or with dead cores: detours leave the rectangle of a route's
  // ends), and the host time a fingerprint of it is expected to take.
  Area region_for(const Cycle& cy);
  double scan_estimate(const Area& region) const;
  fabric::Fabric& fab(int wafer) { return ex_.fab(wafer); }
  // A simulated layer starts: its host time and region are measured.
  void start_timing(int cycle);
  bool eligible(const TokenMessage& m) const;
  // The moment a cycle's state is taken relative to: the earliest ready
  // time of the slots it compares exactly.
  static std::uint64_t from_of(const TokenMessage& m, const Cycle& cy);
  // A split cycle's slots: which it reads before writing, and how.
  void classify_slots(Cycle& cy) const;
  // The memo's layer has ended inside its split cycle: its state is copied.
  void take_mid();
  // Learning a split cycle begins: the copy's room is made, and a thread
  // of its own faults its new pages in while the cycle is simulated (a
  // full wafer's copy is ~190 MB, whose page faults took 0.4 s of the
  // first token at 1 group on the 2-core box when left to the copy).
  void make_room_for_mid();
  // with_state: the fabric's fingerprint too; with_records: and the records
  // and cores it found busy kept (records_, held if the check matches).
  Entry entry_of(const TokenMessage& m, const Cycle& cy, Cycles now, bool with_state,
                 bool with_records = false, const Area& region = {});
  // m starts where the memo's layer started, `shift` cycles later: the
  // paths' common move into `dpath`.
  bool same_start(const Entry& e, const Cycle& cy, std::uint64_t shift,
                  CycleBreakdown& dpath) const;
  // m leaves the replayed stage `sp`, the memo's stage `stage` shifted.
  void apply(const StageProgram& sp, TokenMessage& m, std::size_t stage, Cycles& until) const;
  // The layer's byte and busy counters are taken over `region`, where its
  // fingerprint is.
  void begin_learning(int cycle, Entry e, const Area& region);
  void forget();

  Executor& ex_;
  const Program& program_;
  int users_;
  int in_flight_ = 0;
  std::vector<Cycle> cycles_;
  std::vector<int> cycle_of_stage_;
  Memo memo_;
  // Learning: the memo's layer is being simulated, its stage `stage_` next.
  bool learning_ = false;
  std::size_t stage_ = 0;
  // The fingerprints, counts and writing out, in parts on the run's host
  // threads; what the check found busy is held for the pending layers'
  // shift.
  static constexpr int kParts = RegionRecords::kParts;
  RegionRecords records_;
  // Replaying: cycle `replaying_` with `shift_` and `dpath_`, stage `stage_` next.
  int replaying_ = -1;
  std::uint64_t shift_ = 0;
  CycleBreakdown dpath_;
  // Pending: `pending_` layers replayed since the records were last
  // written, the last `pending_shift_` cycles after the memo's; the
  // records hold the state the memo's layer left, busy after `settled_from_`.
  int last_cycle_ = -1;  // the cycle that ran last (simulated or replayed)
  bool last_replayed_ = false;
  std::uint64_t pending_ = 0;
  std::uint64_t pending_shift_ = 0;
  // A partial cycle replayed after them, `partial_shift_` cycles after the
  // memo's: the records become the memo's mid copy, shifted.
  bool pending_partial_ = false;
  std::uint64_t partial_shift_ = 0;
  std::uint64_t settled_from_ = 0;
  std::uint64_t replayed_ = 0;
  std::uint64_t crowded_ = 0;
  // Host time: of the last simulated layer (of run layer_run_) and of the
  // last state fingerprint; which cycle is being timed, since when.
  bool always_ = false;
  double scan_s_per_core_ = 0.0;
  std::vector<double> run_s_;  // per run: its last simulated cycle's host time (0: none yet)
  // Where the last simulated layer worked (of run box_run_).
  Area last_box_;
  int box_run_ = -1;
  // Faulting in the mid copy's new pages (make_room_for_mid; stopped when
  // the copy is taken or the memo forgotten).
  std::unique_ptr<fabric::PagePrefaulter> mid_pages_;
  int timed_cycle_ = -1;
  Clock::time_point cycle_began_;
};

}  // namespace wafersim::sim
