// The engine's clock (sim/engine/step_clock.hpp). One SystemC simulation per
// process: each TEST runs in its own (gtest_discover_tests).
#include "sim/engine/step_clock.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wafersim::sim {
namespace {

struct Wake {
  std::string who;
  std::uint64_t at;
};

// A thread that waits through the clock for each of its (cycle, rank) in
// turn and logs when it woke.
SC_MODULE(Sleeper) {
  Sleeper(sc_core::sc_module_name name, StepClock & clock,
          std::vector<std::pair<std::uint64_t, std::uint64_t>> waits, std::vector<Wake> & log)
      : sc_module(name), clock_(clock), waits_(std::move(waits)), log_(log) {
    SC_THREAD(run);
  }
  SC_HAS_PROCESS(Sleeper);

 private:
  void run() {
    for (const auto& [at, rank] : waits_) {
      clock_.wait_until(Cycles{at}, rank, wake_);
      log_.push_back({basename(), now_cycles().value});
    }
  }
  StepClock& clock_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> waits_;
  std::vector<Wake>& log_;
  sc_core::sc_event wake_;
};

// Threads due in the same cycle wake in the order of their ranks, whatever
// order they began waiting in; threads due earlier wake earlier; a thread
// that waits again after waking takes its place among those due then.
// (SystemC's own timed waits order equal times by its event heap: the
// construction order here is not the ranks' order.)
TEST(StepClock, WakesByTimeThenRankWhateverTheOrderOfWaiting) {
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  std::vector<Wake> log;
  StepClock clock("clock");
  std::vector<std::unique_ptr<Sleeper>> sleepers;
  auto add = [&](const char* name, std::vector<std::pair<std::uint64_t, std::uint64_t>> waits) {
    sleepers.push_back(std::make_unique<Sleeper>(name, clock, std::move(waits), log));
  };
  add("a", {{10, 3}});
  add("b", {{10, 1}});
  add("c", {{5, 9}, {10, 5}});
  add("d", {{10, 2}, {12, 0}});
  add("e", {{10, 0}});
  add("f", {{12, 7}});
  sc_core::sc_start();
  const std::vector<std::pair<std::string, std::uint64_t>> expected = {
      {"c", 5}, {"e", 10}, {"b", 10}, {"d", 10}, {"a", 10}, {"c", 10}, {"d", 12}, {"f", 12}};
  ASSERT_EQ(log.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(log[i].who, expected[i].first) << "wake " << i;
    EXPECT_EQ(log[i].at, expected[i].second) << "wake " << i;
  }
}

}  // namespace
}  // namespace wafersim::sim
