#include "models/work_team.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace wafersim::models {

WorkTeam::WorkTeam(int threads, int guests)
    : threads_(threads < 1 ? 1 : threads), guests_(guests < 0 ? 0 : guests) {}

WorkTeam::~WorkTeam() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

int WorkTeam::host_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void WorkTeam::start(int items, std::function<void(int, int)> work) {
  std::unique_lock lock(mutex_);
  if (open_) throw std::logic_error("WorkTeam::start: the previous batch is not finished");
  open_ = true;
  items_ = items;
  next_.store(0, std::memory_order_relaxed);
  work_ = std::move(work);
  error_ = nullptr;
  if (threads_ > 1) {
    if (helpers_.empty())
      for (int t = 1; t < threads_; ++t) helpers_.emplace_back([this, t] { helper_loop(t); });
    busy_ = threads_ - 1;  // no guest is inside: finish() waited for them all
    ++batch_;
  }
  lock.unlock();
  if (threads_ > 1) wake_.notify_all();
  if (on_start_ && guests_ > 0) on_start_();
}

bool WorkTeam::assist(int guest) {
  if (guest < 0 || guest >= guests_)
    throw std::logic_error("WorkTeam::assist: no guest " + std::to_string(guest));
  {
    std::lock_guard lock(mutex_);
    if (!open_ || next_.load(std::memory_order_relaxed) >= items_) return false;
    ++busy_;  // finish() waits for this guest too
  }
  take_items(threads_ + guest);
  {
    std::lock_guard lock(mutex_);
    --busy_;
  }
  idle_.notify_all();
  return true;
}

void WorkTeam::finish() {
  {
    std::lock_guard lock(mutex_);
    if (!open_) throw std::logic_error("WorkTeam::finish: no batch was started");
  }
  take_items(0);
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return busy_ == 0; });
  open_ = false;
  work_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void WorkTeam::take_items(int thread) {
  try {
    for (int i = next_.fetch_add(1, std::memory_order_relaxed); i < items_;
         i = next_.fetch_add(1, std::memory_order_relaxed))
      work_(i, thread);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
    next_.store(items_, std::memory_order_relaxed);  // the others stop after their item
  }
}

void WorkTeam::helper_loop(int thread) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || batch_ != seen; });
      if (stop_) return;
      seen = batch_;
    }
    take_items(thread);
    {
      std::lock_guard lock(mutex_);
      --busy_;
    }
    idle_.notify_all();
  }
}

}  // namespace wafersim::models
