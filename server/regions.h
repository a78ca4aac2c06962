// Shared-memory regions: sealed memfds passed by clients over a Unix
// socket with SCM_RIGHTS, mapped once by the daemon.
//
// Protocol on `<socket>.fd`: the client connects, sends one byte with the
// memfd attached; the daemon checks the fd is a memfd sealed against
// shrinking and growing (F_SEAL_SHRINK | F_SEAL_GROW, so its size cannot
// change under a mapping), no larger than the region limit, maps it shared
// read-write, and answers with a line "ok <token>\n" or "error <message>\n".
// The token (128 random bits) is then presented in RegisterRegion by the
// session that owns it; unclaimed tokens expire after a minute.
//
// Defences (docs/ACCYD.md, "Security"): every descriptor a message carries is
// closed unless it is the one region mapped (a second or third descriptor,
// or those received before MSG_CTRUNC, would otherwise leak); connections
// are served by one poll loop, non-blocking, so a client that connects and
// sends nothing delays no one (it is dropped after `receive_timeout`), and
// at most `max_connections` are open at once; unclaimed tokens are capped
// per peer user (SO_PEERCRED) and in total.
#ifndef ACCY_SERVER_REGIONS_H_
#define ACCY_SERVER_REGIONS_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <vector>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace accy::server {

// A mapped region; unmapped and closed when the last reference goes.
class Mapping {
 public:
  Mapping(void* address, size_t size, int fd) : address_(address), size_(size), fd_(fd) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(address_); }
  size_t size() const { return size_; }
  // Keeps a device's registration of this memory (backends::
  // registerHostMemory) for as long as the mapping lives; registrations are
  // released before the memory is unmapped.
  void keepRegistration(std::shared_ptr<void> registration) { registrations_.push_back(std::move(registration)); }
  size_t registrations() const { return registrations_.size(); }

 private:
  void* address_;
  size_t size_;
  int fd_;
  std::vector<std::shared_ptr<void>> registrations_;
};

// Checks and maps a received fd (takes ownership of it).
absl::StatusOr<std::shared_ptr<Mapping>> mapSealedMemfd(int fd, size_t max_bytes);

struct RegionSocketLimits {
  int max_connections = 64;         // open at once; more are answered "error busy"
  int max_pending_per_peer = 256;   // unclaimed tokens per peer user id
  int max_pending_total = 4096;     // unclaimed tokens in all
  std::chrono::milliseconds receive_timeout{2000};
  // An unclaimed token (and its mapping) goes after this long; the serve
  // loop purges them, so a client killed between upload and RegisterRegion
  // holds nothing longer.
  std::chrono::milliseconds token_lifetime{60000};
};

class RegionSocket {
 public:
  RegionSocket(std::string path, size_t max_region_bytes, RegionSocketLimits limits = {});
  ~RegionSocket();

  // Binds (mode 0600) and starts accepting in a background thread.
  absl::Status start();
  void stop();

  // Claims a token's mapping (once). NotFound for unknown or expired ones.
  absl::StatusOr<std::shared_ptr<Mapping>> claim(const std::string& token);
  // Tokens issued and not yet claimed nor expired.
  size_t unclaimed() const;

 private:
  void serve();
  void purgeExpired(std::chrono::steady_clock::time_point now);
  // Reads the one message of a readable connection and answers it.
  void handle(int connection);
  // A token for `mapping` from peer `uid`, or an error line.
  std::string admit(std::shared_ptr<Mapping> mapping, uint32_t uid);

  std::string path_;
  size_t max_region_bytes_;
  RegionSocketLimits limits_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  struct Pending {
    std::shared_ptr<Mapping> mapping;
    std::chrono::steady_clock::time_point created;
    uint32_t uid = 0;
  };
  std::map<std::string, Pending> pending_;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_REGIONS_H_
