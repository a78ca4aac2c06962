// accyd's compile cache: loaded executables in memory, and serialized
// executables on disk when the daemon is a stamped build.
//
// Key = SHA-256 of (build record, wire bytes, target, options), so another
// build of the compiler never hits. Disk entries are written to a temporary
// file and renamed into place (atomic), carry a SHA-256 of their payload
// (a corrupt entry is detected, deleted and recompiled, never trusted),
// and the directory is kept under a byte bound by evicting the least
// recently used entries. An unstamped build refuses the disk
// (UnrecordedCompilerBuild, reported in the statistics) and caches in
// memory only.
#ifndef ACCY_SERVER_COMPILE_CACHE_H_
#define ACCY_SERVER_COMPILE_CACHE_H_

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "compiler/executable/build_record.h"
#include "compiler/tensor/program.h"

namespace accy::server {

struct CacheOptions {
  std::string disk_dir;             // empty: memory only
  int64_t disk_max_bytes = int64_t{1} << 30;
  int64_t memory_max_entries = 1024;
};

struct CacheStats {
  uint64_t memory_entries = 0, memory_hits = 0, disk_entries = 0, disk_hits = 0, disk_bytes = 0;
  uint64_t misses = 0, corrupt_entries = 0;
  bool disk_enabled = false;
  std::string disk_disabled_reason;
};

class CompileCache {
 public:
  // `record` is the running binary's build record (tests pass others).
  CompileCache(const CacheOptions& options, executable::BuildRecord record);

  // The program loaded on `backend` for (wire bytes, target, options):
  // from memory, else from disk, else compiled by `backend` (then stored in
  // both). Thread-safe; disk, compile and load run outside the cache's
  // lock, and concurrent requests for the same key wait for the one compile
  // (reported as memory hits). A failed compile is not cached.
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> get(const tensor::Program& program,
                                                                     std::string_view wire,
                                                                     const backends::Backend& backend,
                                                                     const std::string& target,
                                                                     const backends::CompileOptions& options,
                                                                     std::string* level);

  CacheStats stats() const;

  // Hex key, exposed for tests that corrupt entries.
  std::string keyFor(std::string_view wire, std::string_view target, std::string_view options) const;
  std::string pathFor(const std::string& key) const;

 private:
  std::optional<executable::Executable> readDisk(const std::string& key);
  void writeDisk(const std::string& key, const executable::Executable& exe);
  void evict();

  CacheOptions options_;
  executable::BuildRecord record_;
  std::string record_text_;
  using Loaded = absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>>;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const backends::LoadedProgram>> memory_;
  std::map<std::string, std::shared_future<Loaded>> in_flight_;
  CacheStats stats_;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_COMPILE_CACHE_H_
