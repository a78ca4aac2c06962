// The service in process: sessions are freed (their regions unmapped,
// their programs unloaded) after the global lock is released, both when a
// client closes one and when its lease lapses.
#include "server/service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace accy::server
