// A client process for the chaos tests (tests/accyd_e2e_test.cc): it works
// against accyd until it is killed with SIGKILL in the middle of its work.
//
//   accyd_chaos_client unix:/path/accyd.sock MODE
//
// MODE channel: invokes through the invoke channel, inputs and outputs in
// shared buffers; grpc: invokes through gRPC with inline bytes; upload:
// uploads memfds to the region socket, registering some and leaving others
// unclaimed, and drops them again. Each invoke computes for milliseconds, so
// a kill lands in the middle of one. Prints "ready" once it has a session,
// a program and its regions, then works until killed.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "client/remote_session.h"

namespace {

namespace tensor = accy::tensor;

// Sends a sealed memfd to the region socket and leaves its token unclaimed.
void uploadUnclaimed(const std::string& socket_path) {
  const int fd = memfd_create("accy-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, 65536) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    std::perror("memfd");
    _exit(3);
  }
  (void)accy::client::sendMemfd(socket_path, fd);  // the token is never claimed
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: accyd_chaos_client unix:PATH channel|grpc|upload\n");
    return 2;
  }
  const std::string target = argv[1], mode = argv[2];
  accy::client::RemoteOptions options;
  options.cpu_in_process = false;
  options.invoke_channel = mode == "channel";
  auto s = accy::client::RemoteSession::connect(target, options);
  if (!s.ok()) {
    std::fprintf(stderr, "connect: %s\n", std::string(s.status().message()).c_str());
    return 1;
  }
  constexpr int64_t kN = 1024;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}}),
                                tensor::spec(tensor::DType::f32, {{"j", kN}})};
  auto h = (*s)->compile(accy::wire::encode(*tensor::define("chaos", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0] * a[1]).sin().cos().exp().sum({"j"});
  })));
  if (!h.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(h.status().message()).c_str());
    return 1;
  }
  auto buffer = (*s)->allocateShared(3 * kN * sizeof(float));
  if (!buffer.ok()) {
    std::fprintf(stderr, "allocateShared: %s\n", std::string(buffer.status().message()).c_str());
    return 1;
  }
  float* x = reinterpret_cast<float*>((*buffer)->bytes().data());
  for (int64_t i = 0; i < 2 * kN; ++i) x[i] = 0.001f * static_cast<float>(i % 1000);
  std::vector<float> inline_in(2 * kN, 0.5f), inline_out(kN);
  std::printf("ready\n");
  std::fflush(stdout);
  const std::string region_socket = target.substr(5) + ".fd";
  for (int n = 0;; ++n) {
    absl::Status st;
    if (mode == "upload") {
      auto extra = (*s)->allocateShared(65536);  // registered, then dropped
      // A few uploads left unclaimed (the daemon caps them per user; the
      // other clients of the test are the same user).
      if (n % 16 == 0 && n < 128) uploadUnclaimed(region_socket);
      st = extra.status();
    } else if (mode == "channel") {
      st = (*s)->invoke(*h, {accy::bytes(std::span(x, kN)), accy::bytes(std::span(x + kN, kN))},
                        {accy::writableBytes(std::span(x + 2 * kN, kN))});
    } else {
      st = (*s)->invoke(*h, {accy::bytes(std::span(inline_in.data(), kN)), accy::bytes(std::span(inline_in.data() + kN, kN))},
                        {accy::writableBytes(inline_out)});
    }
    if (!st.ok()) {
      std::fprintf(stderr, "call %d: %s\n", n, std::string(st.message()).c_str());
      return 1;
    }
  }
}
