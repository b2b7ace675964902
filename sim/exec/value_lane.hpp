// The functional lane: a functional run computes its numbers on a thread of
// their own, behind the simulation. The simulation thread runs a
// timing-only Executor in simulated time and posts each stage a token goes
// through to the lane, where a values-only Executor (Executor::
// set_values_only) computes the same stage's numbers, stage after stage in
// the order they were posted (the order the simulation ran them, so the KV
// cache sees the positions in the same order). The simulation waits for the
// lane only where timing needs a number: the token a step chose (the host
// reads it before it feeds the token back) and a mixture-of-experts layer's
// choice of experts (ExpertExchange). A token then costs about the longer
// of its timing and its arithmetic instead of their sum. Plain C++ (no
// SystemC): the lane never touches the simulation.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "models/kernels.hpp"

namespace wafersim::sim {

class ValueLane {
 public:
  ValueLane();
  // stop().
  ~ValueLane();
  ValueLane(const ValueLane&) = delete;
  ValueLane& operator=(const ValueLane&) = delete;

  // Queues `work`; returns its ticket (1, 2, ... in posting order).
  std::uint64_t post(std::function<void()> work);
  // Waits until the work of `ticket` (and all before it) has run. Rethrows
  // the first exception a work threw if that work was `ticket` or one before
  // it (every work after it is skipped). While it waits, the caller lends a
  // hand (add_helper).
  void wait(std::uint64_t ticket);
  // Waits for everything posted so far.
  void drain();
  // Drops the work not started, waits for the running one and joins the
  // thread (again: nothing). Waits that have not returned stay waiting: call
  // it when nothing waits.
  void stop();
  // Called on the lane when a work throws (before waiters are woken), so
  // that whatever waits on the lane's results elsewhere can give up.
  // (Each call adds one; set them before posting.)
  void on_error(std::function<void()> f) { on_error_.push_back(std::move(f)); }
  // Work a waiting thread can do for the lane: `help` takes part in a batch
  // the lane's work has open (a values executor's GEMV row bands,
  // Executor::assist) and returns whether it found one. The batch's owner
  // calls ring() when it opens one. (Set before posting.) So a simulation
  // that waits for a step's token computes part of the lm_head instead of
  // idling.
  void add_helper(std::function<bool()> help) { helpers_.push_back(std::move(help)); }
  // Wakes a waiter to try the helpers (any thread).
  void ring();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;  // the lane: work, or stop
  std::condition_variable done_;  // waiters: a work finished
  std::deque<std::function<void()>> queue_;
  std::uint64_t posted_ = 0;
  std::uint64_t finished_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::uint64_t error_ticket_ = 0;  // the work that threw error_
  std::vector<std::function<void()>> on_error_;
  std::vector<std::function<bool()>> helpers_;
  bool rung_ = false;  // ring() since a waiter last looked
  std::thread thread_;
};

// The experts a mixture-of-experts layer chose for a token, from the values
// executor (publish) to the timing executor (take, which waits for it).
// Keyed by (layer, user, position); a key can come back (speculative
// decoding verifies a position again after a rollback): each take gets the
// oldest choice not taken yet.
class ExpertExchange {
 public:
  void publish(int layer, int user, int position, std::vector<models::ExpertChoice> choice);
  // Waits for the choice; std::runtime_error once abandon() was called.
  std::vector<models::ExpertChoice> take(int layer, int user, int position);
  // The values executor stopped (an error): takes no longer wait.
  void abandon();

 private:
  using Key = std::tuple<int, int, int>;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::map<Key, std::deque<std::vector<models::ExpertChoice>>> choices_;
  bool abandoned_ = false;
};

}  // namespace wafersim::sim
