// sim::ValueLane and sim::ExpertExchange: work in posting order on the
// lane's thread, waits by ticket, errors carried back and the rest skipped,
// stopping with work queued, and the expert choices handed from the values
// side to the timing side (also when the lane gave up).
#include "sim/exec/value_lane.hpp"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace wafersim::sim {
namespace {

TEST(ValueLane, RunsWorkInPostingOrderOffTheCallersThread) {
  ValueLane lane;
  std::vector<int> order;  // written by the lane only, read after wait()
  std::atomic<bool> on_caller{false};
  const auto caller = std::this_thread::get_id();
  std::uint64_t last = 0;
  for (int i = 0; i < 100; ++i)
    last = lane.post([&, i] {
      if (std::this_thread::get_id() == caller) on_caller = true;
      order.push_back(i);
    });
  EXPECT_EQ(last, 100u);
  lane.wait(last);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_FALSE(on_caller.load());
}

TEST(ValueLane, WaitReturnsOnceItsTicketHasRun) {
  ValueLane lane;
  std::atomic<int> done{0};
  const std::uint64_t first = lane.post([&] { done = 1; });
  lane.post([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done = 2;
  });
  lane.wait(first);
  EXPECT_GE(done.load(), 1);
  lane.drain();
  EXPECT_EQ(done.load(), 2);
}

TEST(ValueLane, AWaiterRunsTheHelpersWhenRungAndReturnsWhenItsTicketHasRun) {
  // The lane's work opens "batches" (ring) and waits until the waiter has
  // helped with each; the waiter only helps while it waits.
  ValueLane lane;
  std::atomic<int> open{0}, helped{0};
  lane.add_helper([&] {
    if (open.load() == 0) return false;
    open.fetch_sub(1);
    helped.fetch_add(1);
    return true;
  });
  const std::uint64_t ticket = lane.post([&] {
    for (int i = 0; i < 3; ++i) {
      open.fetch_add(1);
      lane.ring();
      while (open.load() > 0) std::this_thread::yield();  // the waiter takes it
    }
  });
  lane.wait(ticket);
  EXPECT_EQ(helped.load(), 3);
}

TEST(ValueLane, AnErrorReachesEveryLaterWaitAndSkipsTheRest) {
  ValueLane lane;
  int errors_seen = 0;
  lane.on_error([&] { ++errors_seen; });
  std::atomic<bool> ran_after{false};
  const std::uint64_t ok = lane.post([] {});
  const std::uint64_t bad = lane.post([] { throw std::runtime_error("no weights for that"); });
  const std::uint64_t after = lane.post([&] { ran_after = true; });
  lane.wait(ok);  // before the error: fine
  try {
    lane.wait(bad);
    FAIL() << "the error did not come back";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "no weights for that");
  }
  EXPECT_THROW(lane.wait(after), std::runtime_error);
  EXPECT_THROW(lane.drain(), std::runtime_error);
  EXPECT_FALSE(ran_after.load());
  EXPECT_EQ(errors_seen, 1);
}

TEST(ValueLane, StoppingWithWorkQueuedDropsItAndReturns) {
  std::atomic<int> ran{0};
  {
    ValueLane lane;
    lane.post([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++ran;
    });
    for (int i = 0; i < 1000; ++i) lane.post([&] { ++ran; });
    lane.stop();
    lane.stop();  // again: nothing
  }               // and the destructor
  EXPECT_LT(ran.load(), 1001);
}

TEST(ExpertExchange, TakeWaitsForThePublishedChoiceOldestFirst) {
  ExpertExchange x;
  std::vector<models::ExpertChoice> got;
  std::thread taker([&] { got = x.take(3, 1, 7); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  x.publish(3, 1, 8, {{9, 1.0f}});  // another position: not this one
  x.publish(3, 1, 7, {{2, 0.5f}, {5, 0.5f}});
  taker.join();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].expert, 2);
  EXPECT_EQ(got[1].expert, 5);
  // A position verified again after a rollback: each take gets the next.
  x.publish(0, 0, 1, {{1, 1.0f}});
  x.publish(0, 0, 1, {{3, 1.0f}});
  EXPECT_EQ(x.take(0, 0, 1).front().expert, 1);
  EXPECT_EQ(x.take(0, 0, 1).front().expert, 3);
  EXPECT_EQ(x.take(3, 1, 8).front().expert, 9);
}

TEST(ExpertExchange, AbandonUnblocksATakeWithAnError) {
  ExpertExchange x;
  std::atomic<bool> threw{false};
  std::thread taker([&] {
    try {
      x.take(0, 0, 0);
    } catch (const std::runtime_error&) {
      threw = true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  x.abandon();
  taker.join();
  EXPECT_TRUE(threw.load());
}

}  // namespace
}  // namespace wafersim::sim
