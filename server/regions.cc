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
#include <vector>

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
  // Transparent huge pages where the kernel allows them on shmem (a hugetlb
  // memfd has huge pages already); nothing changes where it does not.
  if (size >= (size_t{2} << 20)) (void)madvise(address, size, MADV_HUGEPAGE);
  return std::make_shared<Mapping>(address, size, fd);
}

RegionSocket::RegionSocket(std::string path, size_t max_region_bytes, RegionSocketLimits limits)
    : path_(std::move(path)), max_region_bytes_(max_region_bytes), limits_(limits) {}

RegionSocket::~RegionSocket() { stop(); }

absl::Status RegionSocket::start() {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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

namespace {

void reply(int connection, const std::string& line) {
  (void)!send(connection, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace

void RegionSocket::serve() {
  struct Connection {
    int fd;
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<Connection> open;
  std::vector<pollfd> polled;
  while (!stopping_) {
    polled.assign(1, pollfd{listen_fd_, POLLIN, 0});
    for (const Connection& c : open) polled.push_back(pollfd{c.fd, POLLIN, 0});
    if (poll(polled.data(), polled.size(), 100) < 0) continue;
    const auto now = std::chrono::steady_clock::now();
    purgeExpired(now);
    // Answer what arrived, drop what waited too long; never block on one.
    for (size_t i = open.size(); i-- > 0;) {
      const short events = polled[i + 1].revents;
      if ((events & (POLLIN | POLLHUP | POLLERR)) != 0) {
        handle(open[i].fd);
      } else if (now < open[i].deadline) {
        continue;
      }
      close(open[i].fd);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if ((polled[0].revents & POLLIN) == 0) continue;
    while (true) {
      const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) break;
      if (static_cast<int>(open.size()) >= limits_.max_connections) {
        reply(c, strCat("error busy: ", open.size(), " connections are open; try again\n"));
        close(c);
        continue;
      }
      open.push_back(Connection{c, now + limits_.receive_timeout});
    }
  }
  for (const Connection& c : open) close(c.fd);
}

void RegionSocket::handle(int c) {
  // Room for several descriptors, so that every one a client sends is
  // received and can be closed: the kernel installs those that fit before
  // it truncates.
  constexpr int kMaxDescriptors = 16;
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptors)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = recvmsg(c, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  std::vector<int> received;
  if (n > 0) {
    for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        received.push_back(fd);
      }
    }
  }
  if (n <= 0 || received.size() != 1 || (msg.msg_flags & MSG_CTRUNC) != 0) {
    for (int fd : received) close(fd);
    reply(c, strCat("error send one byte with one file descriptor attached (got ", received.size(),
                    (msg.msg_flags & MSG_CTRUNC) != 0 ? ", more cut off" : "", ")\n"));
    return;
  }
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    close(received[0]);
    reply(c, "error the peer's credentials are unknown\n");
    return;
  }
  auto mapping = mapSealedMemfd(received[0], max_region_bytes_);  // owns the descriptor
  if (!mapping.ok()) {
    reply(c, strCat("error ", mapping.status().message(), "\n"));
    return;
  }
  reply(c, admit(*std::move(mapping), peer.uid));
}

void RegionSocket::purgeExpired(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<Mapping>> expired;  // unmapped after the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.created > limits_.token_lifetime) {
      expired.push_back(std::move(it->second.mapping));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t RegionSocket::unclaimed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

std::string RegionSocket::admit(std::shared_ptr<Mapping> mapping, uint32_t uid) {
  const auto now = std::chrono::steady_clock::now();
  purgeExpired(now);
  std::lock_guard<std::mutex> lock(mu_);
  int for_peer = 0;
  for (const auto& [token, pending] : pending_) for_peer += pending.uid == uid ? 1 : 0;
  if (for_peer >= limits_.max_pending_per_peer || static_cast<int>(pending_.size()) >= limits_.max_pending_total) {
    return strCat("error too many unclaimed regions (", for_peer, " of user ", uid, ", ", pending_.size(),
                  " in all; the limits are ", limits_.max_pending_per_peer, " and ", limits_.max_pending_total,
                  "): claim them with RegisterRegion or let them expire\n");
  }
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 4; ++i) token += strCat(absl::Hex(rd(), absl::kZeroPad8));
  pending_[token] = Pending{std::move(mapping), now, uid};
  return strCat("ok ", token, "\n");
}

absl::StatusOr<std::shared_ptr<Mapping>> RegionSocket::claim(const std::string& token) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pending_.find(token);
  if (it == pending_.end() || std::chrono::steady_clock::now() - it->second.created > limits_.token_lifetime) {
    return makeError(ErrorKind::kInvalidBuffer, "region: unknown or expired token");
  }
  auto mapping = it->second.mapping;
  pending_.erase(it);
  return mapping;
}

}  // namespace accy::server
