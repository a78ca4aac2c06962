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

class RegionSocket {
 public:
  RegionSocket(std::string path, size_t max_region_bytes);
  ~RegionSocket();

  // Binds (mode 0600) and starts accepting in a background thread.
  absl::Status start();
  void stop();

  // Claims a token's mapping (once). NotFound for unknown or expired ones.
  absl::StatusOr<std::shared_ptr<Mapping>> claim(const std::string& token);

 private:
  void serve();
  void handle(int connection);

  std::string path_;
  size_t max_region_bytes_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  struct Pending {
    std::shared_ptr<Mapping> mapping;
    std::chrono::steady_clock::time_point created;
  };
  std::map<std::string, Pending> pending_;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_REGIONS_H_
