// models::WorkTeam: every item exactly once, per-thread scratch, errors
// carried back to the caller, batch after batch.
#include "models/work_team.hpp"

#include <atomic>
#include <stdexcept>
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

TEST(WorkTeam, HostThreadsIsAtLeastOne) {
  EXPECT_GE(WorkTeam::host_threads(), 1);
}

}  // namespace
}  // namespace wafersim::models
