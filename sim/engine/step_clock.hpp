// Wakes the engine's threads that wait for a later cycle; those due in the
// same cycle in one fixed order, by a rank each waiter gives (lowest first).
//
// Why not SystemC's own timed waits: a step's link and core reservations
// are made when it starts, in the order steps start (issue order is
// priority: fabric/link_timing.hpp), so two steps that start in one cycle
// time differently in one order than in the other. SystemC wakes threads
// that wait for the same moment in the order its timed-event heap yields
// them, which depends on the heap's history (which other events were queued
// before, and when), not on the moment and the waiters alone. The same
// situation one layer later, every time shifted alike, could then run its
// steps in another order and end differently: a drawn scenario did
// (analysis/replay_sweep.py --pipelined --seed 7: three users' prompts token
// by token through 16 layers of a small mixture of experts, replayed and
// simulated 26 cycles apart). With this clock the order is a function of
// the waiters and their ranks, so a situation shifted in time runs as it
// did, which the pipeline replay relies on (sim/exec/pipeline_replay.hpp),
// and results do not depend on SystemC's queue.
//
// Threads woken by other threads (a message handed on through a fifo) run
// after those the clock wakes in that cycle, in the next delta cycle, in an
// order that follows from the order the messages were handed on (SystemC's
// channel updates), so from the clock's order too.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include <systemc>

#include "fabric/units.hpp"

namespace wafersim::sim {

// SystemC time base: one fabric clock cycle is represented as 1 ns of
// sc_time, so cycle counts stay exact integers; seconds come from clock_hz.
inline sc_core::sc_time to_sc(Cycles c) {
  return sc_core::sc_time(static_cast<double>(c.value), sc_core::SC_NS);
}
inline Cycles now_cycles() {
  return Cycles{static_cast<std::uint64_t>(sc_core::sc_time_stamp().to_seconds() * 1e9 + 0.5)};
}

SC_MODULE(StepClock) {
 public:
  explicit StepClock(sc_core::sc_module_name name);

  // From a thread: waits until cycle `at` (after the current one), woken
  // among the waiters due then in the order of `rank` (lowest first; each
  // waiter's rank its own). `wake` is the caller's own event.
  void wait_until(Cycles at, std::uint64_t rank, sc_core::sc_event & wake);
  // The same, or until `other` is notified, whichever comes first (a thread
  // woken by `other` may be woken once more at `at` by this registration:
  // callers that wait this way check why they woke).
  void wait_until_or(Cycles at, std::uint64_t rank, sc_core::sc_event & wake,
                     const sc_core::sc_event& other);

  SC_HAS_PROCESS(StepClock);

 private:
  struct Waiter {
    std::uint64_t at = 0;
    std::uint64_t rank = 0;
    sc_core::sc_event* wake = nullptr;
    // The waiter due first on top.
    bool operator>(const Waiter& o) const { return at != o.at ? at > o.at : rank > o.rank; }
  };

  void add(Cycles at, std::uint64_t rank, sc_core::sc_event & wake);
  // Wakes every waiter due now, in rank order, and sleeps until the next is
  // due or another waiter comes.
  void tick();

  std::priority_queue<Waiter, std::vector<Waiter>, std::greater<Waiter>> due_;
  sc_core::sc_event added_;
};

}  // namespace wafersim::sim
