#include "sim/engine/step_clock.hpp"

namespace wafersim::sim {

StepClock::StepClock(sc_core::sc_module_name name) : sc_module(name) {
  SC_METHOD(tick);
  sensitive << added_;
  dont_initialize();
}

void StepClock::add(Cycles at, std::uint64_t rank, sc_core::sc_event& wake) {
  // tick() sleeps until the earliest waiter is due (or for the next waiter
  // when there is none): woken only for one due before that, it runs in this
  // evaluation phase and sleeps anew. A waiter due then or later is woken by
  // the sleep already asked for.
  const bool sooner = due_.empty() || at.value < due_.top().at;
  due_.push(Waiter{at.value, rank, &wake});
  if (sooner) added_.notify();
}

void StepClock::wait_until(Cycles at, std::uint64_t rank, sc_core::sc_event& wake) {
  add(at, rank, wake);
  sc_core::wait(wake);
}

void StepClock::wait_until_or(Cycles at, std::uint64_t rank, sc_core::sc_event& wake,
                              const sc_core::sc_event& other) {
  add(at, rank, wake);
  sc_core::wait(wake | other);
}

void StepClock::tick() {
  const std::uint64_t now = now_cycles().value;
  // Immediate notifications: each woken thread is made runnable now, behind
  // the one woken before it (SystemC runs runnable threads first in, first
  // out).
  while (!due_.empty() && due_.top().at <= now) {
    due_.top().wake->notify();
    due_.pop();
  }
  if (due_.empty())
    next_trigger(added_);
  else
    next_trigger(to_sc(Cycles{due_.top().at - now}), added_);
}

}  // namespace wafersim::sim
