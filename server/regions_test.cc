// The region socket under abuse: every descriptor a message carries beyond
// the one region is closed (counted in /proc/self/fd), a connection that
// sends nothing delays no other upload, unclaimed tokens are capped per
// peer, and the uploads that are refused say why.
#include "server/regions.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

int openDescriptors() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A sealed memfd of `bytes` bytes.
int sealedMemfd(size_t bytes = 4096) {
  const int fd = memfd_create("region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  return fd;
}

int connectTo(const std::string& path) {
  const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  return c;
}

// Sends one byte with `fds` attached on a new connection; returns the reply line.
std::string upload(const std::string& path, const std::vector<int>& fds) {
  const int c = connectTo(path);
  char byte = 'r';
  iovec iov{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<size_t>(fds.size(), 1)));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cm), fds.data(), sizeof(int) * fds.size());
  }
  EXPECT_EQ(sendmsg(c, &msg, 0), 1) << std::strerror(errno);
  std::string reply;
  char buf[512];
  ssize_t n;
  while ((n = read(c, buf, sizeof buf)) > 0) reply.append(buf, static_cast<size_t>(n));
  close(c);
  return reply;
}

// Under /tmp: a Unix socket's path must be short, and TEST_TMPDIR is long.
std::string socketPath(const char* name) { return "/tmp/accy-regions-" + std::to_string(getpid()) + "-" + name; }

TEST(RegionSocket, EveryExtraDescriptorIsClosed) {
  RegionSocket regions(socketPath("extra.fd"), 1 << 20);
  { const absl::Status started = regions.start(); ASSERT_TRUE(started.ok()) << started; }
  const int before = openDescriptors();
  for (int round = 0; round < 100; ++round) {
    for (int count : {2, 3}) {
      std::vector<int> fds;
      for (int i = 0; i < count; ++i) fds.push_back(sealedMemfd());
      EXPECT_THAT(upload(socketPath("extra.fd"), fds),
                  StartsWith("error send one byte with one file descriptor attached (got " + std::to_string(count)));
      for (int fd : fds) close(fd);
    }
  }
  // Twenty-three more would remain after one leaked descriptor per round.
  EXPECT_EQ(openDescriptors(), before);
  // Without any descriptor, the same refusal.
  EXPECT_THAT(upload(socketPath("extra.fd"), {}), StartsWith("error send one byte with one file descriptor attached (got 0"));
  EXPECT_EQ(openDescriptors(), before);
}

TEST(RegionSocket, RefusedRegionsAreClosedAndSayWhy) {
  RegionSocket regions(socketPath("refused.fd"), 8192);
  { const absl::Status started = regions.start(); ASSERT_TRUE(started.ok()) << started; }
  const int before = openDescriptors();
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_THAT(upload(socketPath("refused.fd"), {pipe_fds[0]}), HasSubstr("not a memfd"));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  const int unsealed = memfd_create("region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  EXPECT_THAT(upload(socketPath("refused.fd"), {unsealed}), HasSubstr("must be sealed"));
  close(unsealed);
  const int big = sealedMemfd(16384);
  EXPECT_THAT(upload(socketPath("refused.fd"), {big}), HasSubstr("above the limit of 8192"));
  close(big);
  EXPECT_EQ(openDescriptors(), before);
}

TEST(RegionSocket, AnIdleConnectionDelaysNoUpload) {
  RegionSocketLimits limits;
  limits.receive_timeout = std::chrono::milliseconds(2000);
  RegionSocket regions(socketPath("idle.fd"), 1 << 20, limits);
  { const absl::Status started = regions.start(); ASSERT_TRUE(started.ok()) << started; }
  // Three connections that send nothing: served one after another, each
  // would hold the socket for its whole timeout (6 s in all).
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(connectTo(socketPath("idle.fd")));
  const auto start = std::chrono::steady_clock::now();
  const int fd = sealedMemfd();
  const std::string reply = upload(socketPath("idle.fd"), {fd});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(fd);
  EXPECT_THAT(reply, StartsWith("ok "));
  EXPECT_LT(seconds, 1.5) << "the upload waited behind the idle connections";
  for (int c : idle) close(c);
  // The token works once.
  const std::string token = reply.substr(3, reply.size() - 4);
  EXPECT_TRUE(regions.claim(token).ok());
  EXPECT_FALSE(regions.claim(token).ok());
}

TEST(RegionSocket, UnclaimedTokensAreCappedPerPeer) {
  RegionSocketLimits limits;
  limits.max_pending_per_peer = 4;
  RegionSocket regions(socketPath("capped.fd"), 1 << 20, limits);
  { const absl::Status started = regions.start(); ASSERT_TRUE(started.ok()) << started; }
  std::vector<std::string> tokens;
  for (int i = 0; i < 4; ++i) {
    const int fd = sealedMemfd();
    const std::string reply = upload(socketPath("capped.fd"), {fd});
    close(fd);
    ASSERT_THAT(reply, StartsWith("ok "));
    tokens.push_back(reply.substr(3, reply.size() - 4));
  }
  const int fd = sealedMemfd();
  EXPECT_THAT(upload(socketPath("capped.fd"), {fd}), HasSubstr("error too many unclaimed regions (4 of user"));
  // Claiming one makes room.
  ASSERT_TRUE(regions.claim(tokens[0]).ok());
  EXPECT_THAT(upload(socketPath("capped.fd"), {fd}), StartsWith("ok "));
  close(fd);
}

// An unclaimed token and its mapping go once it expires, though no one
// uploads again (a client killed between upload and RegisterRegion).
TEST(RegionSocket, ExpiredTokensAreUnmappedWithoutAnotherUpload) {
  RegionSocketLimits limits;
  limits.token_lifetime = std::chrono::milliseconds(200);
  RegionSocket regions(socketPath("expire.fd"), 1 << 20, limits);
  { const absl::Status started = regions.start(); ASSERT_TRUE(started.ok()) << started; }
  const int before = openDescriptors();
  const int fd = sealedMemfd();
  const std::string reply = upload(socketPath("expire.fd"), {fd});
  close(fd);
  ASSERT_THAT(reply, StartsWith("ok "));
  EXPECT_EQ(regions.unclaimed(), 1u);
  EXPECT_EQ(openDescriptors(), before + 1);  // the daemon's mapping holds the memfd
  for (int i = 0; i < 50 && regions.unclaimed() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(regions.unclaimed(), 0u);
  EXPECT_EQ(openDescriptors(), before);
  EXPECT_FALSE(regions.claim(reply.substr(3, reply.size() - 4)).ok());
}

TEST(RegionSocket, ConnectionsBeyondTheCapAreToldSo) {
  RegionSocketLimits limits;
  limits.max_connections = 2;
  RegionSocket regions(socketPath("busy.fd"), 1 << 20, limits);
  { const absl::Status started = regions.start(); ASSERT_TRUE(started.ok()) << started; }
  const int a = connectTo(socketPath("busy.fd")), b = connectTo(socketPath("busy.fd"));
  // Let the daemon accept both before the third arrives.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int fd = sealedMemfd();
  EXPECT_THAT(upload(socketPath("busy.fd"), {fd}), StartsWith("error busy"));
  close(a);
  close(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_THAT(upload(socketPath("busy.fd"), {fd}), StartsWith("ok "));
  close(fd);
}

}  // namespace
}  // namespace accy::server
