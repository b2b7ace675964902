// The host threads that compute a functional GEMV's values: the calling
// thread and up to threads - 1 helpers, each taking the next row band of cores
// until none is left. A band's rows are computed by one thread with the same
// float operations in the same order whichever thread it is and whenever it
// runs, so results are bit-identical for any thread count and any
// interleaving; only which thread did a band varies (nothing reads that).
//
// start() hands a batch to the helpers and returns at once, so the caller can
// time the same GEMV on the fabric model while they compute; finish() then
// has the caller take the bands still left and wait for the helpers' last
// ones. Plain C++ (no SystemC): the helpers never touch the simulation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace wafersim::sim {

class RowBandTeam {
 public:
  // `threads` in all, the caller included; values < 1 count as 1 (the caller
  // alone: start() does nothing, finish() runs every band).
  explicit RowBandTeam(int threads);
  ~RowBandTeam();
  RowBandTeam(const RowBandTeam&) = delete;
  RowBandTeam& operator=(const RowBandTeam&) = delete;

  int threads() const { return threads_; }

  // The number of threads worth using on this host: the hardware threads
  // (std::thread::hardware_concurrency, 1 when unknown).
  static int host_threads();

  // work(band, thread) for every band in [0, bands), each exactly once;
  // `thread` in [0, threads()) names the thread (0 the caller), so `work` can
  // keep per-thread scratch. Helpers start now (started on first use). One
  // batch at a time: a start() without finish() is a std::logic_error.
  void start(int bands, std::function<void(int band, int thread)> work);

  // The caller works through the bands not taken yet, then waits for the
  // helpers. Rethrows the first exception a band threw (the bands not started
  // by then are skipped).
  void finish();

 private:
  void helper_loop(int thread);
  // Takes bands until none is left (or one threw: its error kept in error_).
  void take_bands(int thread);

  int threads_ = 1;
  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;  // helpers: a new batch, or stop
  std::condition_variable idle_;  // caller: a helper finished the batch
  std::uint64_t batch_ = 0;       // increases with every start()
  bool stop_ = false;
  bool open_ = false;  // between start() and finish()
  int busy_ = 0;       // helpers still inside the current batch
  int bands_ = 0;
  std::atomic<int> next_{0};  // the next band to take
  std::function<void(int, int)> work_;
  std::exception_ptr error_;
};

}  // namespace wafersim::sim
