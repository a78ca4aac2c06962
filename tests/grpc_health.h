// The gRPC health check as a test asks it, without the health proto's
// generated code: the status of `service` ("" for the whole server) at
// `target`: 1 SERVING, 2 NOT_SERVING (0 UNKNOWN when the reply leaves it
// out); -1 when the call failed (an unknown service fails with NOT_FOUND).
#ifndef ACCY_TESTS_GRPC_HEALTH_H_
#define ACCY_TESTS_GRPC_HEALTH_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

namespace accy::testing {

inline int healthStatus(const std::string& target, const std::string& service = "") {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx.set_wait_for_ready(true);
  // HealthCheckRequest{service}: field 1, length-delimited (empty: nothing).
  const std::string bytes = service.empty() ? std::string() : std::string("\x0a") + static_cast<char>(service.size()) + service;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status st) { done.set_value(st); });
  const grpc::Status st = done.get_future().get();
  if (!st.ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return -1;
  std::string reply;
  for (auto& s : slices) reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (reply.empty()) return 0;  // status 0 (UNKNOWN) is the default, so not sent
  if (reply.size() != 2 || reply[0] != '\x08') return -1;  // field 1, varint
  return static_cast<unsigned char>(reply[1]);
}

}  // namespace accy::testing

#endif  // ACCY_TESTS_GRPC_HEALTH_H_
