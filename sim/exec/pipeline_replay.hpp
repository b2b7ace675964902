// Replaying several messages' layers at once, exactly.
//
// LayerReplay (sim/exec/layer_replay.hpp) replays the layers of one message
// crossing a run of equal layers alone. Users pipelined without a decode
// batch put several messages on one region at once: at one layer group, 4
// users' tokens cross the 32 layers as a convoy, each a stage or two behind
// the other, their phases interleaved on the same cores. No single message's
// layer repeats the one before it, but the whole convoy's does: measured
// (docs/performance.md, "Several messages on one region: do they repeat?"),
// from the 4th layer to the 29th every pass enters and leaves at the same
// offsets from the convoy's entry into its layer, one period later.
//
// - The unit replayed is a step (the move onto a stage, or one of its
//   phases), not a stage pass: when a step starts, the executor reserves
//   every link and core it uses at once, so at any moment the fabric holds
//   exactly what the steps started so far reserved, whichever messages are
//   part way through their stages.
// - A checkpoint: one message (the tracked one) is about to start a layer's
//   first step, and every message in flight is inside the same run of
//   equal layers (LayerReplay's runs). Taken there: a fingerprint of the
//   run's wafer (every link, ramp and core record busy after the earliest
//   ready time of any message's vectors, relative to it; the model's `now`),
//   and every message's place (its stage relative to the tracked one's,
//   its next step, when it wakes for it) and vectors.
// - When a checkpoint equals the tracked message's checkpoint one layer
//   earlier, moved by the time between them (a period P: same fingerprint,
//   every message one layer on, waking P later, every vector ready P later
//   with its critical path moved by one breakdown per message), the
//   simulation from here repeats the steps started since that checkpoint,
//   moved by P: nothing in the fabric's timing reads a moment except against
//   another, and steps that start in one cycle start in the same order one
//   period on (the engine's clock wakes the threads due in a cycle in the
//   order of their stages, which moving every message one layer on keeps:
//   sim/engine/step_clock.hpp). Each step started from then on is replayed: its message's
//   vectors are set to the learned step's, P (and the message's breakdown)
//   later, the step's output is complete P after the learned one's, and the
//   fabric is not touched (the executor is frozen: any work reaching it is
//   a logic error). The stage threads wait as the learned steps' did, so
//   SystemC hands messages between stages at the same moments, P later; no
//   thread is moved between stages.
// - A replay stops where the tracked message begins a period (its first
//   learned step again, whether or not that is still in the run) and any
//   message would step past the run's last stage in that period, or (a
//   prompt block that needs no logits, which goes back to the host from
//   the model's last layer without a step in the head) into that stage. There
//   the fabric's state is the replay's first checkpoint's moved by the
//   periods replayed: the records that checkpoint found busy are moved
//   (FlowModel::shift_some_records, CoreTimeline::shift_cores, the model's
//   clock), and the links' bytes and cores' busy cycles get the learned
//   period's, once per replayed period. Then the simulation goes on.
// - When: timing only, or the functional lane beside it, on a fabric
//   without repairs (LayerReplay::usable),
//   no trace, no speculative decoding, every user's prompt already sent (a
//   later arrival would send a message into the replayed periods), and at
//   least two messages in flight (one is LayerReplay's). A mixture of
//   experts where every message is one token: the run's experts are placed
//   alike, so the k a token chooses time alike whichever they are (the
//   functional lane's choices for a replayed phase are taken and dropped).
//
// Exact, not an estimate: `run --json` is byte for byte the same with and
// without (--layer-replay off; the tests compare both).
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fabric/state_hash.hpp"
#include "sim/exec/executor.hpp"
#include "sim/exec/region_records.hpp"
#include "sim/exec/token_message.hpp"
#include "sim/program/program.hpp"

namespace wafersim::sim {

class PipelineReplay {
 public:
  // For `ex`'s stages in `program`; `threads`: host threads for the
  // fingerprints and the writing out (the same results for any count).
  PipelineReplay(Executor& ex, const Program& program, int threads = 1);

  // The host sent a message into the pipeline / took `m` back.
  void sent();
  void returned(const TokenMessage& m);
  // Whether prompts wait to be sent at later arrivals (no replay then).
  void prompts_pending(bool pending) { prompts_pending_ = pending; }

  // Step `step` of stage `sp` (0: its move, if it has one; then its phases)
  // is about to start for `m` at simulated time `now`. True: replayed, m's
  // vectors are set and its output is complete at `done`. False: the stage
  // runs it and calls stepped().
  bool replayed(const StageProgram& sp, int step, TokenMessage& m, Cycles now, Cycles& done);
  void stepped(const StageProgram& sp, int step, const TokenMessage& m, Cycles now, Cycles done);

  // Stage passes of layers (a message's pass through a layer's first
  // stage) replayed so far, and the periods they came in.
  std::uint64_t replayed_layers() const { return replayed_layers_; }
  std::uint64_t replayed_periods() const { return replayed_periods_; }

 private:
  // Where a message in flight is: its stage, its next step there, and when
  // it wakes for it (after its last step: when it was handed on).
  struct Place {
    int stage = 0;
    int step = 0;
    std::uint64_t at = 0;
  };
  // A step a message took: its place, when it started and its output was
  // complete, and the vectors it left (every slot after a stage's first
  // step, which follows the stage's queueing and the previous stage's end;
  // else the slots the phase writes).
  struct Step {
    int stage = 0;
    int step = 0;
    std::uint64_t start = 0, done = 0;
    std::vector<std::pair<int, Vec>> slots;
  };
  struct MessageMark {
    Place place;
    std::array<Vec, kSlots> slots;
  };
  // A checkpoint of the tracked message (see the header).
  struct Mark {
    bool valid = false;
    int run = -1;
    int stage = 0;  // the tracked message's, about to take its first step
    std::uint64_t now = 0, from = 0, cutoff = 0;
    fabric::StateHash state;
    std::unordered_map<const TokenMessage*, MessageMark> messages;
  };
  // A replayed message: the next of its learned steps, the period it is in
  // (from 1), its critical paths' move per period and their move so far
  // (period times that).
  struct Cursor {
    std::size_t next = 0;
    std::uint64_t period = 1;
    CycleBreakdown dpath, moved;
  };

  int index_of(const StageProgram& sp) const {
    return static_cast<int>(&sp - program_.stages.data());
  }
  bool layer_start(int stage, int step) const {
    return step == 0 && first_of_layer_[static_cast<std::size_t>(stage)];
  }
  // A checkpoint at m's step 0 of `stage`: true when a replay starts there.
  bool checkpoint(int stage, const TokenMessage& m, Cycles now);
  // The checkpoint's fingerprint and places, or false where none is taken.
  bool mark(int run, int stage, Cycles now, Mark& out);
  // Whether `now` repeats `before` one layer on; the period and each
  // message's path move.
  bool repeats(const Mark& before, const Mark& now, std::uint64_t& period,
               std::unordered_map<const TokenMessage*, CycleBreakdown>& dpath) const;
  // Whether m (replayed) is about to take the first of its learned steps again.
  bool begins_period(const TokenMessage& m) const;
  // Whether every learned step stays inside the run `periods` periods on.
  bool inside(std::uint64_t periods) const;
  void apply(int stage, int step, TokenMessage& m, Cycles now, Cycles& done);
  // Starts recording from checkpoint `m` (byte and busy counters taken).
  void begin_recording(Mark m);
  void forget();
  // The fabric moves on by the periods replayed (see the header).
  void settle(std::uint64_t periods);
  fabric::Rect wafer_rect(int wafer);

  Executor& ex_;
  const Program& program_;
  std::vector<int> run_of_stage_;  // -1: not in a run of equal layers
  std::vector<int> run_last_;      // per run: its last stage
  std::vector<bool> run_ends_layers_;  // per run: its last layer is the model's
  std::vector<int> run_wafer_;     // per run: the wafer its matrices are on (-1: several)
  std::vector<int> run_stride_;    // per run: stages per layer
  std::vector<bool> first_of_layer_;
  std::vector<bool> experts_;  // per run: a mixture of experts (messages of one token only)

  int in_flight_ = 0;
  bool prompts_pending_ = true;
  std::unordered_map<const TokenMessage*, Place> places_;
  const TokenMessage* tracked_ = nullptr;

  // The last checkpoint and the steps taken since.
  Mark mark_;
  std::unordered_map<const TokenMessage*, std::vector<Step>> steps_;
  // Fingerprints, counts and writing out, in parts on the run's host
  // threads; what the replay's first checkpoint found busy is held for the
  // write-out.
  RegionRecords records_;

  // Replaying: the learned steps, the period, each message's cursor, and
  // the periods finished; the fabric holds the replay's first checkpoint's
  // state (busy after settled_from_), and what a period added to the links'
  // bytes and the cores' busy cycles.
  bool replaying_ = false;
  int replay_run_ = -1;
  std::unordered_map<const TokenMessage*, std::vector<Step>> learned_;
  std::unordered_map<const TokenMessage*, Cursor> cursors_;
  std::uint64_t period_ = 0;
  std::uint64_t periods_ = 0;
  std::uint64_t settled_from_ = 0;
  RegionRecords::Counts period_counts_;

  std::uint64_t replayed_layers_ = 0;
  std::uint64_t replayed_periods_ = 0;
};

}  // namespace wafersim::sim
