#include "server/unix_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::server {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::open(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return makeError(ErrorKind::kInvalidArgument, strCat("socket path ", path, " is longer than ",
                                                         sizeof(addr.sun_path) - 1, " bytes"));
  }
  std::unique_ptr<UnixListener> l(new UnixListener());
  l->fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (l->fd_ < 0) return makeError(ErrorKind::kInvalidArgument, strCat("socket: ", std::strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const mode_t old_mask = umask(0077);  // the socket file: owner only
  const int bound = bind(l->fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  umask(old_mask);
  if (bound != 0 || listen(l->fd_, 128) != 0) {
    return makeError(ErrorKind::kInvalidArgument, strCat("cannot listen on ", path, ": ", std::strerror(errno)));
  }
  if (pipe2(l->wake_, O_CLOEXEC) != 0) {
    return makeError(ErrorKind::kInvalidArgument, strCat("pipe: ", std::strerror(errno)));
  }
  return l;
}

UnixListener::~UnixListener() {
  stop();
  for (int fd : {fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void UnixListener::start(std::function<void(int fd, uid_t uid)> accepted) {
  thread_ = std::thread([this, accepted = std::move(accepted)] {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;  // stop()
      const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;  // the peer went away, or EAGAIN
      ucred cred{};
      socklen_t len = sizeof(cred);
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        close(fd);  // no identity, no service
        continue;
      }
      accepted(fd, cred.uid);
    }
  });
}

void UnixListener::stop() {
  if (!thread_.joinable()) return;
  const char byte = 0;
  if (write(wake_[1], &byte, 1) != 1) {
    // The pipe is ours and empty: a write cannot fail short of EINTR.
  }
  thread_.join();
}

}  // namespace accy::server
