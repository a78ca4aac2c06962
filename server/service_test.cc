// The service in process: sessions are freed (their regions unmapped,
// their programs unloaded) after the global lock is released, both when a
// client closes one and when its lease lapses.
#include "server/service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/gate.h"

namespace accy::server {
namespace {

TEST(AccydService, SessionsAreFreedOutsideTheGlobalLock) {
  CompileCache cache(CacheOptions{}, executable::BuildRecord{});
  RegionSocket regions("/tmp/accyd-service-test-unused.sock", 4096);
  Limits limits;
  limits.lease_seconds = 1;
  AccydService service(cache, regions, limits, {});
  std::mutex mu;
  std::vector<bool> held;
  service.setSessionFreedHook([&](bool global_lock_held) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(global_lock_held);
  });
  // One closed by its client.
  grpc::ServerContext open_ctx;
  accy::v1::OpenSessionRequest open;
  accy::v1::OpenSessionReply opened;
  ASSERT_TRUE(service.OpenSession(&open_ctx, &open, &opened).ok());
  grpc::ServerContext close_ctx;
  accy::v1::CloseSessionRequest close;
  close.set_session_id(opened.session_id());
  accy::v1::CloseSessionReply closed;
  ASSERT_TRUE(service.CloseSession(&close_ctx, &close, &closed).ok());
  // One whose lease lapses.
  grpc::ServerContext open_ctx2;
  ASSERT_TRUE(service.OpenSession(&open_ctx2, &open, &opened).ok());
  for (int i = 0; i < 100 && service.sessionCount() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_FALSE(held[0]) << "a closed session was freed under the global lock";
  EXPECT_FALSE(held[1]) << "an expired session was freed under the global lock";
}

// A gate hands a freed place to the ticket queued first, without the place
// being free in between; a withdrawn ticket leaves the queue; a thread
// waiting in take() is served in the same order and leaves when its check
// says stop.
TEST(Gate, HandsPlacesToTicketsInTheOrderTheyCame) {
  Gate gate(1);
  ASSERT_TRUE(gate.tryTake());
  std::vector<int> order;
  auto ticket = [&](int k) {
    auto t = std::make_shared<Gate::Ticket>();
    t->granted = [&order, k] { order.push_back(k); };
    return t;
  };
  auto first = ticket(1), second = ticket(2), third = ticket(3);
  EXPECT_FALSE(gate.takeOrQueue(first));
  EXPECT_FALSE(gate.takeOrQueue(second));
  EXPECT_FALSE(gate.takeOrQueue(third));
  EXPECT_FALSE(gate.tryTake()) << "a newcomer went before the queue";
  EXPECT_TRUE(gate.withdraw(second));
  EXPECT_FALSE(gate.withdraw(second));
  gate.give();
  EXPECT_EQ(order, std::vector<int>({1}));
  EXPECT_EQ(gate.held(), 1);
  EXPECT_FALSE(gate.withdraw(first)) << "a granted ticket holds its place";
  gate.give();
  EXPECT_EQ(order, std::vector<int>({1, 3}));
  gate.give();
  EXPECT_EQ(gate.held(), 0);
  EXPECT_EQ(gate.queued(), 0);
}

TEST(Gate, AThreadWaitingInTakeLeavesWhenItsCheckSaysStop) {
  Gate gate(2);
  ASSERT_TRUE(gate.tryTake());
  ASSERT_TRUE(gate.tryTake());
  std::atomic<bool> stop{false};
  absl::Status waited;
  std::thread t([&] {
    waited = gate.take(
        [&]() -> absl::Status { return stop.load() ? absl::CancelledError("stopped") : absl::OkStatus(); },
        [] { return std::chrono::steady_clock::now() + std::chrono::seconds(30); });
  });
  while (gate.queued() == 0) std::this_thread::yield();
  stop = true;
  gate.poke();  // asked at once, not in 30 s
  t.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(gate.queued(), 0);
  EXPECT_EQ(gate.held(), 2);
  // Served in turn when a place is freed.
  std::thread u([&] {
    waited = gate.take([] { return absl::OkStatus(); },
                       [] { return std::chrono::steady_clock::now() + std::chrono::seconds(30); });
  });
  while (gate.queued() == 0) std::this_thread::yield();
  gate.give();
  u.join();
  EXPECT_TRUE(waited.ok());
  EXPECT_EQ(gate.held(), 2);
}

// The pool reuses an idle thread, starts one when none is idle, and its
// threads end once idle for their time.
TEST(WorkerPool, StartsThreadsOnDemandAndLetsIdleOnesGo) {
  WorkerPool pool(std::chrono::milliseconds(50));
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  bool release = false;
  for (int k = 0; k < 3; ++k) {
    pool.run([&] {
      std::unique_lock<std::mutex> g(mu);
      cv.wait(g, [&] { return release; });
      ++done;
      cv.notify_all();
    });
  }
  EXPECT_EQ(pool.threads(), 3) << "three blocked pieces of work need three threads";
  {
    std::lock_guard<std::mutex> g(mu);
    release = true;
  }
  cv.notify_all();
  {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return done == 3; });
  }
  for (int i = 0; i < 200 && pool.threads() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(pool.threads(), 0);
}

}  // namespace
}  // namespace accy::server
