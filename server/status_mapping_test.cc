// The gRPC code of every session status, as the proto's comment and
// docs/ACCYD.md state them: retry policies read these codes.
#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "server/service.h"

namespace accy::server {
namespace {

TEST(StatusMapping, EveryStatusHasItsDocumentedCode) {
  using session::Status;
  EXPECT_EQ(grpcCodeOf(Status::ok), grpc::StatusCode::OK);
  EXPECT_EQ(grpcCodeOf(Status::invalid_program), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpcCodeOf(Status::unsupported_version), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(grpcCodeOf(Status::invalid_handle), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(grpcCodeOf(Status::invalid_buffer), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(grpcCodeOf(Status::too_many_programs), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Not UNAVAILABLE, which clients retry as a passing fault.
  EXPECT_EQ(grpcCodeOf(Status::out_of_memory), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(grpcCodeOf(Status::compile_failed), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(grpcCodeOf(Status::launch_failed), grpc::StatusCode::ABORTED);
}

}  // namespace
}  // namespace accy::server
