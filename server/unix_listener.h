// accyd's Unix socket, accepted by accyd itself rather than by gRPC, so
// that each connection's peer is known: the kernel's SO_PEERCRED uid of
// the process that connected. Each accepted connection is reported with
// its uid, then handed to gRPC (grpc::AddInsecureChannelFromFd), whose
// calls on it then name it "fd:N" as their peer.
#ifndef ACCY_SERVER_UNIX_LISTENER_H_
#define ACCY_SERVER_UNIX_LISTENER_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace accy::server {

class UnixListener {
 public:
  // Binds and listens on `path` (the file made with mode 0600; the caller
  // may chmod it).
  static absl::StatusOr<std::unique_ptr<UnixListener>> open(const std::string& path);
  ~UnixListener();

  // Accepts on a thread of its own until stop(): `accepted(fd, uid)` takes
  // each connection.
  void start(std::function<void(int fd, uid_t uid)> accepted);
  // Stops accepting (connections already handed over stay served).
  void stop();

 private:
  UnixListener() = default;
  int fd_ = -1;
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_UNIX_LISTENER_H_
