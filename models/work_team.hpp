// A team of host threads for work split into independent items: the calling
// thread and up to threads - 1 helpers, each taking the next item until none
// is left. Used for a functional GEMV's values (an item is a row band of
// cores) and for synthetic weights (an item is a matrix). An item is done by
// one thread with the same float operations in the same order whichever
// thread it is and whenever it runs, so results are bit-identical for any
// thread count and any interleaving; only which thread did an item varies
// (nothing reads that).
//
// start() hands a batch to the helpers and returns at once, so the caller can
// do other work meanwhile (time the same GEMV on the fabric model); finish()
// then has the caller take the items still left and wait for the helpers'
// last ones. Plain C++ (no SystemC): the helpers never touch the simulation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace wafersim::models {

class WorkTeam {
 public:
  // `threads` in all, the caller included; values < 1 count as 1 (the caller
  // alone: start() does nothing, finish() runs every item). `guests` other
  // threads may join a batch with assist() (thread numbers threads() ..
  // slots() - 1, for their scratch).
  explicit WorkTeam(int threads, int guests = 0);
  ~WorkTeam();
  WorkTeam(const WorkTeam&) = delete;
  WorkTeam& operator=(const WorkTeam&) = delete;

  int threads() const { return threads_; }
  // Thread numbers work() may see: the team's threads and the guests.
  int slots() const { return threads_ + guests_; }

  // The number of threads worth using on this host: the hardware threads
  // (std::thread::hardware_concurrency, 1 when unknown).
  static int host_threads();

  // work(item, thread) for every item in [0, items), each exactly once;
  // `thread` in [0, threads()) names the thread (0 the caller), so `work` can
  // keep per-thread scratch. Helpers start now (started on first use). One
  // batch at a time: a start() without finish() is a std::logic_error.
  void start(int items, std::function<void(int item, int thread)> work);

  // The caller works through the items not taken yet, then waits for the
  // helpers (and guests). Rethrows the first exception an item threw (the
  // items not started by then are skipped).
  void finish();

  // Guest `guest` (0 .. guests - 1) takes items of the open batch, as
  // thread threads() + guest, until none is left; false when no batch is
  // open or every item is taken (a thread with nothing else to do, waiting
  // for what the batch's caller will produce, can lend a hand). One thread
  // per guest number at a time.
  bool assist(int guest);
  // Called (outside the team's lock) each time start() opens a batch, so
  // that a guest waiting elsewhere can come and assist. Set before use.
  void on_start(std::function<void()> f) { on_start_ = std::move(f); }

 private:
  void helper_loop(int thread);
  // Takes items until none is left (or one threw: its error kept in error_).
  void take_items(int thread);

  int threads_ = 1;
  int guests_ = 0;
  std::function<void()> on_start_;
  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;  // helpers: a new batch, or stop
  std::condition_variable idle_;  // caller: a helper finished the batch
  std::uint64_t batch_ = 0;       // increases with every start()
  bool stop_ = false;
  bool open_ = false;  // between start() and finish()
  int busy_ = 0;       // helpers and guests still inside the current batch
  int items_ = 0;
  std::atomic<int> next_{0};  // the next item to take
  std::function<void(int, int)> work_;
  std::exception_ptr error_;
};

}  // namespace wafersim::models
