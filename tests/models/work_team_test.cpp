// models::WorkTeam: every item exactly once, per-thread scratch, errors
// carried back to the caller, batch after batch.
#include "models/work_team.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace wafersim::models {
namespace {

TEST(WorkTeam, EveryBandRunsExactlyOnceForAnyThreadCount) {
  for (int threads : {0, 1, 2, 5}) {
    WorkTeam team(threads);
    EXPECT_EQ(team.threads(), threads < 1 ? 1 : threads);
    for (int bands : {0, 1, 3, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(bands));
      std::atomic<bool> thread_in_range{true};
      team.start(bands, [&](int b, int t) {
        runs[static_cast<std::size_t>(b)].fetch_add(1);
        if (t < 0 || t >= team.threads()) thread_in_range = false;
      });
      team.finish();
      for (int b = 0; b < bands; ++b) EXPECT_EQ(runs[static_cast<std::size_t>(b)].load(), 1);
      EXPECT_TRUE(thread_in_range.load());
    }
  }
}

TEST(WorkTeam, CallerAloneRunsTheBandsInOrderInFinish) {
  WorkTeam team(1);
  std::vector<int> seen;
  team.start(4, [&](int b, int t) {
    EXPECT_EQ(t, 0);
    seen.push_back(b);
  });
  EXPECT_TRUE(seen.empty());  // nothing before finish() without helpers
  team.finish();
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3}));
}

TEST(WorkTeam, ABandsExceptionReachesTheCallerAndTheTeamGoesOn) {
  WorkTeam team(2);
  team.start(100, [](int b, int) {
    if (b == 37) throw std::invalid_argument("band 37");
  });
  EXPECT_THROW(team.finish(), std::invalid_argument);
  std::atomic<int> n{0};
  team.start(10, [&](int, int) { n.fetch_add(1); });
  team.finish();
  EXPECT_EQ(n.load(), 10);
}

TEST(WorkTeam, MisuseIsALogicError) {
  WorkTeam team(2);
  EXPECT_THROW(team.finish(), std::logic_error);
  team.start(1, [](int, int) {});
  EXPECT_THROW(team.start(1, [](int, int) {}), std::logic_error);
  team.finish();
}

TEST(WorkTeam, AGuestTakesItemsOfTheOpenBatchAsItsOwnThreadNumber) {
  // One team thread (the caller) and one guest: the caller opens a batch and
  // lets the guest, told by on_start, take every item before it finishes;
  // the guest's items see thread number threads() (its scratch slot).
  WorkTeam team(1, 1);
  EXPECT_EQ(team.slots(), 2);
  EXPECT_FALSE(team.assist(0));  // no batch open
  std::atomic<int> rung{0};
  team.on_start([&] { rung.fetch_add(1); });
  std::vector<int> by(50, -1);
  team.start(50, [&](int item, int thread) { by[static_cast<std::size_t>(item)] = thread; });
  EXPECT_EQ(rung.load(), 1);
  std::thread guest([&] { EXPECT_TRUE(team.assist(0)); });
  guest.join();
  EXPECT_FALSE(team.assist(0));  // every item taken
  team.finish();
  for (int t : by) EXPECT_EQ(t, 1);
  EXPECT_THROW(team.assist(1), std::logic_error);  // only one guest
}

TEST(WorkTeam, FinishWaitsForAGuestStillInsideItsItem) {
  WorkTeam team(1, 1);
  std::atomic<bool> guest_in{false}, release{false}, guest_done{false};
  team.start(2, [&](int item, int thread) {
    if (thread == 1) {
      guest_in = true;
      while (!release) std::this_thread::yield();
      guest_done = true;
    }
    (void)item;
  });
  std::thread guest([&] { team.assist(0); });
  while (!guest_in) std::this_thread::yield();
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    release = true;
  });
  team.finish();  // takes the other item, then waits for the guest's
  EXPECT_TRUE(guest_done.load());
  guest.join();
  releaser.join();
}

TEST(WorkTeam, HostThreadsIsAtLeastOne) {
  EXPECT_GE(WorkTeam::host_threads(), 1);
}

}  // namespace
}  // namespace wafersim::models
