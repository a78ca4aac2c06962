// The thread pool: every index runs exactly once per call, no more threads
// than asked take part, each thread starts with its own block, callers on
// several threads all run (one with the workers, the others on their own
// thread while the workers are busy), and workers that went to sleep
// wake for the next call; a worker late for one job takes nothing of the
// next.
#include "backends/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace accy::cpu {
namespace {

// Counts change from one call to the next, as a program's kernels follow
// each other (a worker that mixed up two calls' counts would show here).
TEST(ThreadPool, EveryIndexRunsOnceOverManyCalls) {
  ThreadPool pool(3);
  const int64_t counts[] = {2, 1000, 3, 64, 7};
  for (int call = 0; call < 1000; ++call) {
    const int64_t count = counts[call % 5];
    std::vector<std::atomic<int>> runs(count);
    pool.parallelFor(count, 4, [&](int64_t i) { runs[i].fetch_add(1); });
    for (int64_t i = 0; i < count; ++i) ASSERT_EQ(runs[i].load(), 1) << "call " << call << " index " << i;
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

// One caller's long loop (a launch that runs for seconds) does not hold up
// another caller: the second runs its loop on its own thread at once.
TEST(ThreadPool, ACallerFindingTheWorkersBusyRunsItsLoopOnItsThread) {
  ThreadPool pool(2);
  std::atomic<bool> release{false}, first_running{false};
  std::thread first([&] {
    pool.parallelFor(3, 3, [&](int64_t) {
      first_running = true;
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (!first_running.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::thread::id me = std::this_thread::get_id();
  std::atomic<int> on_me{0}, ran{0};
  pool.parallelFor(8, 3, [&](int64_t) {
    ran.fetch_add(1);
    if (std::this_thread::get_id() == me) on_me.fetch_add(1);
  });
  EXPECT_EQ(ran.load(), 8);
  EXPECT_EQ(on_me.load(), 8) << "the second caller's loop ran on the busy workers";
  release = true;
  first.join();
}

// A worker stopped between seeing a job's ticket and reading the job, while
// the caller runs that job alone and writes a larger next one. When the
// worker reads on, it finds the next job's function and count but the
// finished job's cursors; taking them together it would claim indices past
// the finished job's blocks and run the next job's indices before their
// blocks open, so they would run twice and the count of finished indices
// would overshoot the job's, which the caller then waits for forever (a
// launch that never returns). The worker must drop what it read.
TEST(ThreadPool, AWorkerLateForOneJobTakesNothingOfTheNext) {
  using std::chrono::seconds;
  std::mutex mu;
  std::condition_variable cv;
  int saw = 0, left = 0;
  bool release = false, second = false;
  ThreadPool::Hooks hooks;
  hooks.worker_saw_job = [&] {
    std::unique_lock<std::mutex> lock(mu);
    ++saw;
    cv.notify_all();
    if (saw == 1) cv.wait_for(lock, seconds(10), [&] { return release; });
  };
  hooks.worker_left_job = [&] {
    std::lock_guard<std::mutex> lock(mu);
    ++left;
    cv.notify_all();
  };
  hooks.caller_wrote_job = [&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!second) return;
    // The second job is written, its blocks not yet open: let the worker
    // read on, and wait until it is out of the first job.
    release = true;
    cv.notify_all();
    cv.wait_for(lock, seconds(10), [&] { return left >= 1; });
  };
  ThreadPool pool(1);
  pool.setHooksForTest(&hooks);

  // The first job: the caller runs both indices once the worker is held.
  std::atomic<int> first_runs{0};
  pool.parallelFor(2, 2, [&](int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, seconds(10), [&] { return saw >= 1; });
    first_runs.fetch_add(1);
  });
  ASSERT_EQ(first_runs.load(), 2);
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(saw, 1) << "the worker was not held in the first job";
    second = true;
  }

  // The second, larger job, on a thread of its own: a launch that never
  // returns fails the test instead of hanging it.
  constexpr int64_t kCount = 64;
  std::vector<std::atomic<int>> runs(kCount);
  std::atomic<bool> done{false};
  std::thread caller([&] {
    pool.parallelFor(kCount, 2, [&](int64_t i) { runs[i].fetch_add(1); });
    done.store(true);
  });
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (!done.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!done.load()) {
    int twice = 0;
    for (int64_t i = 0; i < kCount; ++i) twice += runs[i].load() > 1;
    std::fprintf(stderr, "FAILED: the second launch did not return in 20 s (%d of its %lld indices ran twice)\n", twice,
                 static_cast<long long>(kCount));
    std::fflush(stderr);
    std::_Exit(1);  // the pool's threads are stuck; nothing can be joined
  }
  caller.join();
  for (int64_t i = 0; i < kCount; ++i) EXPECT_EQ(runs[i].load(), 1) << "index " << i;
  // The worker goes on to the second job (whatever it finds left of it).
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, seconds(10), [&] { return left >= 2; })) << "the worker left " << left << " jobs";
}

TEST(ThreadPool, InlineWithoutWorkers) {
  ThreadPool pool(0);
  std::vector<int> order;
  pool.parallelFor(5, 4, [&](int64_t i) { order.push_back(static_cast<int>(i)); });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace accy::cpu
