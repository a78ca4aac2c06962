// Per-launch resources (device buffers, command buffers, streams) that a
// loaded program reuses across launches from any number of threads: a
// launch takes an idle set or makes one, and gives it back when it
// succeeded; a failed launch drops its set, whose state is unknown.
#ifndef ACCY_BACKENDS_RESOURCE_POOL_H_
#define ACCY_BACKENDS_RESOURCE_POOL_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"

namespace accy::backends {

template <typename T>
class ResourcePool {
 public:
  explicit ResourcePool(size_t max_idle = 8) : max_idle_(max_idle) {}

  // An idle set, or a new one from `make` (absl::StatusOr<std::unique_ptr<T>>()).
  template <typename Make>
  absl::StatusOr<std::unique_ptr<T>> take(Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<T> r = std::move(idle_.back());
        idle_.pop_back();
        return r;
      }
    }
    return make();
  }

  // Keeps `r` for the next launch (at most max_idle are kept).
  void give(std::unique_ptr<T> r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(r));
  }

  // Releases every idle set (before the device objects they use go).
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.clear();
  }

 private:
  const size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<T>> idle_;
};

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_RESOURCE_POOL_H_
