#include "sim/exec/value_lane.hpp"

#include <stdexcept>
#include <utility>

namespace wafersim::sim {

ValueLane::ValueLane() : thread_([this] { loop(); }) {}

ValueLane::~ValueLane() {
  stop();
}

void ValueLane::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::uint64_t ValueLane::post(std::function<void()> work) {
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(work));
    ticket = ++posted_;
  }
  wake_.notify_one();
  return ticket;
}

void ValueLane::wait(std::uint64_t ticket) {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      // After an error the rest is quick.
      done_.wait(lock, [&] { return finished_ >= ticket || (rung_ && !helpers_.empty()); });
      rung_ = false;
      if (finished_ >= ticket) {
        if (error_ && error_ticket_ <= ticket) std::rethrow_exception(error_);
        return;
      }
    }
    for (const auto& help : helpers_)
      while (help()) {
      }
  }
}

void ValueLane::ring() {
  {
    std::lock_guard lock(mutex_);
    rung_ = true;
  }
  done_.notify_all();
}

void ValueLane::drain() {
  std::uint64_t last = 0;
  {
    std::lock_guard lock(mutex_);
    last = posted_;
  }
  wait(last);
}

void ValueLane::loop() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    if (!error_) {  // after an error the rest is skipped (only this thread sets it)
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (error)
      for (const auto& f : on_error_) f();
    {
      std::lock_guard lock(mutex_);
      ++finished_;
      if (error && !error_) error_ = error, error_ticket_ = finished_;
    }
    done_.notify_all();
  }
}

void ExpertExchange::publish(int layer, int user, int position,
                             std::vector<models::ExpertChoice> choice) {
  {
    std::lock_guard lock(mutex_);
    choices_[Key{layer, user, position}].push_back(std::move(choice));
  }
  ready_.notify_all();
}

std::vector<models::ExpertChoice> ExpertExchange::take(int layer, int user, int position) {
  std::unique_lock lock(mutex_);
  const Key key{layer, user, position};
  ready_.wait(lock, [&] {
    const auto it = choices_.find(key);
    return abandoned_ || (it != choices_.end() && !it->second.empty());
  });
  if (abandoned_) throw std::runtime_error("the functional lane stopped before a MoE choice");
  auto it = choices_.find(key);
  std::vector<models::ExpertChoice> choice = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) choices_.erase(it);
  return choice;
}

void ExpertExchange::abandon() {
  {
    std::lock_guard lock(mutex_);
    abandoned_ = true;
  }
  ready_.notify_all();
}

}  // namespace wafersim::sim
