// The thread pool: every index runs exactly once per call, no more threads
// than asked take part, each thread starts with its own block, callers on
// several threads are served one at a time, and workers that went to sleep
// wake for the next call.
#include "backends/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace accy::cpu {
namespace {

TEST(ThreadPool, EveryIndexRunsOnceOverManyCalls) {
  ThreadPool pool(3);
  for (int64_t count : {2, 3, 7, 64, 1000}) {
    for (int call = 0; call < 200; ++call) {
      std::vector<std::atomic<int>> runs(count);
      pool.parallelFor(count, 4, [&](int64_t i) { runs[i].fetch_add(1); });
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(runs[i].load(), 1) << "count " << count << " index " << i;
    }
  }
}

TEST(ThreadPool, NoMoreThreadsThanAsked) {
  ThreadPool pool(3);
  for (int parallelism : {1, 2, 3}) {
    for (int call = 0; call < 50; ++call) {
      std::atomic<int> inside{0}, most{0};
      std::mutex mu;
      std::set<std::thread::id> threads;
      pool.parallelFor(32, parallelism, [&](int64_t) {
        const int now = inside.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          threads.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        inside.fetch_sub(1);
      });
      ASSERT_LE(most.load(), parallelism);
      ASSERT_LE(static_cast<int>(threads.size()), parallelism);
    }
  }
}

// Two indices, each waiting (up to 5 s) until the other has started, so
// both run at once: the caller must hold index 0 (its block) and a worker
// index 1, call after call, whichever thread reaches the job first.
TEST(ThreadPool, EachThreadStartsWithItsOwnBlock) {
  ThreadPool pool(1);
  const std::thread::id caller = std::this_thread::get_id();
  for (int call = 0; call < 50; ++call) {
    std::atomic<bool> started[2] = {false, false};
    std::thread::id ran[2];
    bool met[2] = {false, false};
    pool.parallelFor(2, 2, [&](int64_t i) {
      ran[i] = std::this_thread::get_id();
      started[i].store(true);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!started[1 - i].load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      met[i] = started[1 - i].load();
    });
    ASSERT_TRUE(met[0] && met[1]) << "call " << call << ": the two indices did not run at once";
    EXPECT_EQ(ran[0], caller) << "call " << call;
    EXPECT_NE(ran[1], caller) << "call " << call;
  }
}

TEST(ThreadPool, UsesTheWorkers) {
  ThreadPool pool(1);
  std::set<std::thread::id> threads;
  std::mutex mu;
  // Indices that wait for each other can only finish on two threads.
  std::atomic<int> arrived{0};
  pool.parallelFor(2, 2, [&](int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
  });
  EXPECT_EQ(threads.size(), 2u);
}

TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(2);
  for (int call = 0; call < 5; ++call) {
    // Longer than the spin: the workers are asleep when the call comes.
    std::this_thread::sleep_for(std::chrono::microseconds(ThreadPool::kSpinMicros * 3));
    std::atomic<int> arrived{0};
    pool.parallelFor(3, 3, [&](int64_t) {
      arrived.fetch_add(1);
      while (arrived.load() < 3) std::this_thread::yield();
    });
    EXPECT_EQ(arrived.load(), 3);
  }
}

TEST(ThreadPool, CallersOnSeveralThreads) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int call = 0; call < 100; ++call) pool.parallelFor(16, 3, [&](int64_t i) { total.fetch_add(i + 1); });
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), int64_t{4} * 100 * (16 * 17 / 2));
}

TEST(ThreadPool, InlineWithoutWorkers) {
  ThreadPool pool(0);
  std::vector<int> order;
  pool.parallelFor(5, 4, [&](int64_t i) { order.push_back(static_cast<int>(i)); });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace accy::cpu
