#include "sim/studies/sweep_mpi.hpp"

#include <cstdlib>
#include <stdexcept>

#ifdef WAFERSIM_HAVE_MPI
// The C API only: Open MPI's deprecated C++ bindings need a library we do not link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#endif

namespace wafersim::sim {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    const char* s = std::getenv(v);
    if (s && *s) return true;
  }
  return false;
}

#ifndef WAFERSIM_HAVE_MPI

bool built_with_mpi() { return false; }
MpiWorld::MpiWorld() {
  throw std::runtime_error(
      "this wafersim was built without MPI (install libopenmpi-dev and reconfigure), so it "
      "cannot share a sweep's points between ranks; run it without mpirun, or split the sweep "
      "with --shard K/N and merge the journals");
}
MpiWorld::~MpiWorld() = default;
bool MpiWorld::agree(bool go) const { return go; }
void run_sweep_mpi(const MpiWorld&, const std::vector<SweepPoint>&, const std::vector<int>&,
                   const SweepOptions&, const std::function<void(const SweepRecord&)>&) {
  throw std::runtime_error("this wafersim was built without MPI");
}

#else

namespace {

enum Tag : int { kRequest = 1, kAssign, kResult, kFinished, kCancel, kBye };

constexpr auto kPoll = std::chrono::milliseconds(2);

void send_int(int value, int to, Tag tag) { MPI_Send(&value, 1, MPI_INT, to, tag, MPI_COMM_WORLD); }

int recv_int(int from, Tag tag) {
  int v = 0;
  MPI_Recv(&v, 1, MPI_INT, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return v;
}

std::string recv_text(const MPI_Status& probed) {
  int n = 0;
  MPI_Get_count(&probed, MPI_CHAR, &n);
  std::string s(static_cast<std::size_t>(n), '\0');
  MPI_Recv(s.data(), n, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  return s;
}

// Points running on this rank's threads; what they finished waits for the
// main thread (the only one that talks MPI) to collect it.
class LocalRuns {
 public:
  explicit LocalRuns(const SweepOptions& options) : options_(options) {}
  ~LocalRuns() {
    for (auto& [serial, t] : threads_) t.join();
  }
  void start(const SweepPoint& point) {
    ++running_;
    const int serial = serial_++;
    threads_.emplace(serial, std::thread([this, point, serial] {
      std::optional<SweepRecord> r;
      std::exception_ptr error;
      try {
        r = run_sweep_point(options_, point);
      } catch (...) {
        error = std::current_exception();
      }
      const std::lock_guard<std::mutex> lock(mutex_);
      done_.push_back({serial, std::move(r), error});
    }));
  }
  // Records finished since the last call (cancelled points are dropped).
  std::vector<SweepRecord> collect() {
    std::deque<Done> d;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      d.swap(done_);
    }
    std::vector<SweepRecord> out;
    for (Done& x : d) {
      --running_;
      const auto t = threads_.find(x.serial);
      t->second.join();
      threads_.erase(t);
      if (x.error) std::rethrow_exception(x.error);
      if (x.record) out.push_back(std::move(*x.record));
    }
    return out;
  }
  int running() const { return running_; }

 private:
  struct Done {
    int serial = 0;
    std::optional<SweepRecord> record;
    std::exception_ptr error;
  };
  const SweepOptions& options_;
  std::map<int, std::thread> threads_;
  int serial_ = 0;
  std::mutex mutex_;
  std::deque<Done> done_;
  int running_ = 0;
};

void coordinate(const MpiWorld& world, const std::vector<SweepPoint>& grid,
                const std::vector<int>& todo, const SweepOptions& options,
                const std::function<void(const SweepRecord&)>& finished) {
  std::deque<int> queue(todo.begin(), todo.end());
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };
  auto next_point = [&]() -> int {
    if (cancelled() || queue.empty()) return -1;
    const int i = queue.front();
    queue.pop_front();
    return i;
  };
  LocalRuns local(options);
  const int jobs = std::max(1, options.jobs);
  std::vector<bool> working(static_cast<std::size_t>(world.size()), true);
  int workers = world.size() - 1;
  bool cancel_sent = false;
  for (;;) {
    for (const SweepRecord& r : local.collect()) finished(r);
    while (local.running() < jobs) {
      const int i = next_point();
      if (i < 0) break;
      local.start(grid.at(static_cast<std::size_t>(i)));
    }
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
      const int from = st.MPI_SOURCE;
      if (st.MPI_TAG == kRequest) {
        (void)recv_int(from, kRequest);
        send_int(next_point(), from, kAssign);
      } else if (st.MPI_TAG == kResult) {
        finished(SweepRecord::parse(recv_text(st)));
      } else if (st.MPI_TAG == kFinished) {
        (void)recv_int(from, kFinished);
        working[static_cast<std::size_t>(from)] = false;
        --workers;
        send_int(0, from, kBye);
      } else {
        (void)recv_text(st);  // nothing else is sent to rank 0
      }
      continue;
    }
    if (cancelled() && !cancel_sent) {
      for (int r = 1; r < world.size(); ++r)
        if (working[static_cast<std::size_t>(r)]) send_int(0, r, kCancel);
      cancel_sent = true;
    }
    if (workers == 0 && local.running() == 0 && (queue.empty() || cancelled())) break;
    std::this_thread::sleep_for(kPoll);
  }
}

void work(const std::vector<SweepPoint>& grid, const SweepOptions& options) {
  // This rank's points stop on its own signal or on rank 0's word.
  std::atomic<bool> stop{false};
  SweepOptions mine = options;
  mine.cancel = &stop;
  LocalRuns local(mine);
  const int jobs = std::max(1, options.jobs);
  int asked = 0;
  bool no_more = false;
  for (;;) {
    if (options.cancel && options.cancel->load()) stop = true;
    while (!no_more && !stop && local.running() + asked < jobs) {
      send_int(0, 0, kRequest);
      ++asked;
    }
    for (const SweepRecord& r : local.collect()) {
      const std::string text = r.dump();
      MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, 0, kResult, MPI_COMM_WORLD);
    }
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (flag) {
      if (st.MPI_TAG == kAssign) {
        const int i = recv_int(0, kAssign);
        --asked;
        if (i < 0)
          no_more = true;
        else if (!stop)  // a point handed out as we stopped is left to a resume
          local.start(grid.at(static_cast<std::size_t>(i)));
      } else if (st.MPI_TAG == kCancel) {
        (void)recv_int(0, kCancel);
        stop = true;
      } else {
        (void)recv_text(st);
      }
      continue;
    }
    if ((no_more || stop) && asked == 0 && local.running() == 0) break;
    std::this_thread::sleep_for(kPoll);
  }
  send_int(0, 0, kFinished);
  // A cancel may cross the goodbye: take whatever comes until it.
  for (;;) {
    MPI_Status st;
    MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
    (void)recv_text(st);
    if (st.MPI_TAG == kBye) return;
  }
}

}  // namespace

bool built_with_mpi() { return true; }

MpiWorld::MpiWorld() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiWorld::~MpiWorld() { MPI_Finalize(); }

bool MpiWorld::agree(bool go) const {
  int v = go ? 1 : 0;
  MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return v != 0;
}

void run_sweep_mpi(const MpiWorld& world, const std::vector<SweepPoint>& grid,
                   const std::vector<int>& todo, const SweepOptions& options,
                   const std::function<void(const SweepRecord&)>& finished) {
  if (world.rank() == 0)
    coordinate(world, grid, todo, options, finished);
  else
    work(grid, options);
}

#endif

}  // namespace wafersim::sim
