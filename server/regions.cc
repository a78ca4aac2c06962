#include "server/regions.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::server {

Mapping::~Mapping() {
  registrations_.clear();  // before the memory goes
  if (address_ != nullptr && size_ > 0) munmap(address_, size_);
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::shared_ptr<Mapping>> mapSealedMemfd(int fd, size_t max_bytes) {
  auto refuse = [&](std::string why) {
    close(fd);
    return makeError(ErrorKind::kInvalidBuffer, strCat("region: ", why));
  };
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) return refuse("the descriptor is not a memfd (it cannot carry seals)");
  if ((seals & F_SEAL_SHRINK) == 0 || (seals & F_SEAL_GROW) == 0) {
    return refuse("the memfd must be sealed with F_SEAL_SHRINK and F_SEAL_GROW");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) return refuse("the memfd is empty");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size > max_bytes) return refuse(strCat("the memfd holds ", size, " bytes, above the limit of ", max_bytes));
  void* address = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) return refuse(strCat("mmap failed: ", std::strerror(errno)));
  return std::make_shared<Mapping>(address, size, fd);
}

RegionSocket::RegionSocket(std::string path, size_t max_region_bytes)
    : path_(std::move(path)), max_region_bytes_(max_region_bytes) {}

RegionSocket::~RegionSocket() { stop(); }

absl::Status RegionSocket::start() {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::InternalError("region socket: socket() failed");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) return absl::InvalidArgumentError("region socket: path too long");
  std::strcpy(addr.sun_path, path_.c_str());
  unlink(path_.c_str());
  const mode_t old = umask(0077);
  const int bound = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (bound != 0 || listen(listen_fd_, 64) != 0) {
    return absl::InternalError(strCat("region socket: cannot listen on ", path_, ": ", std::strerror(errno)));
  }
  thread_ = std::thread([this] { serve(); });
  return absl::OkStatus();
}

void RegionSocket::stop() {
  if (stopping_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
}

void RegionSocket::serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    handle(c);
    close(c);
  }
}

void RegionSocket::handle(int c) {
  timeval timeout{2, 0};
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  std::string reply;
  const ssize_t n = recvmsg(c, &msg, MSG_CMSG_CLOEXEC);
  cmsghdr* cm = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr;
  if (cm == nullptr || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
      (msg.msg_flags & MSG_CTRUNC) != 0) {
    reply = "error send one byte with one file descriptor attached\n";
  } else {
    int fd;
    std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    auto mapping = mapSealedMemfd(fd, max_region_bytes_);
    if (!mapping.ok()) {
      reply = strCat("error ", mapping.status().message(), "\n");
    } else {
      std::random_device rd;
      std::string token;
      for (int i = 0; i < 4; ++i) token += strCat(absl::Hex(rd(), absl::kZeroPad8));
      std::lock_guard<std::mutex> lock(mu_);
      const auto now = std::chrono::steady_clock::now();
      for (auto it = pending_.begin(); it != pending_.end();) {
        it = now - it->second.created > std::chrono::minutes(1) ? pending_.erase(it) : std::next(it);
      }
      pending_[token] = Pending{*mapping, now};
      reply = strCat("ok ", token, "\n");
    }
  }
  (void)!write(c, reply.data(), reply.size());
}

absl::StatusOr<std::shared_ptr<Mapping>> RegionSocket::claim(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(token);
  if (it == pending_.end() || std::chrono::steady_clock::now() - it->second.created > std::chrono::minutes(1)) {
    return makeError(ErrorKind::kInvalidBuffer, "region: unknown or expired token");
  }
  auto mapping = it->second.mapping;
  pending_.erase(it);
  return mapping;
}

}  // namespace accy::server
