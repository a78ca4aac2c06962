// accyd's compile cache: loaded executables in memory, and serialized
// executables on disk when the daemon is a stamped build.
//
// Key = SHA-256 of (build record, wire bytes, target, options), so another
// build of the compiler never hits. Disk entries are code the daemon maps
// executable, so they are treated as such (docs/ACCYD.md, "Security"):
//  - the directory must be the daemon's own (owned by its user, not
//    writable by group or others, not a symbolic link), else the disk is
//    refused with the reason in the statistics;
//  - every entry carries an HMAC-SHA256 of its payload under a
//    per-installation key (`cache.key` in the directory, 32 random bytes,
//    mode 0600, made on first use): an entry planted by anyone without the
//    key, or damaged, is deleted and recompiled, never loaded;
//  - entries are opened with O_NOFOLLOW and must be regular files of the
//    daemon's user; they are written to a temporary file with an
//    unpredictable name (O_EXCL, mode 0600) and renamed into place;
//    temporaries older than an hour (left by a killed daemon) are removed
//    at start;
//  - the directory is kept under a byte bound by evicting the least
//    recently used entries.
// In memory, loaded programs are kept under a byte bound (their code and
// plans), evicting the least recently used. A compile that fails, or
// throws, leaves no entry behind: requests waiting for it get its error
// and the next request compiles again. An unstamped build refuses the disk
// (UnrecordedCompilerBuild, reported in the statistics) and caches in
// memory only.
#ifndef ACCY_SERVER_COMPILE_CACHE_H_
#define ACCY_SERVER_COMPILE_CACHE_H_

#include <atomic>
#include <condition_variable>
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
  int64_t memory_max_bytes = int64_t{1} << 30;  // code and plans of the loaded programs kept
  // Compiles: each stops once it has run this long (asked inside the
  // passes and emitters: compiler/choir/work.h); at most
  // max_concurrent_compiles run at once, and one that finds them all busy
  // waits up to compile_queue_ms for a slot, then is refused
  // (too_many_programs, RESOURCE_EXHAUSTED). Hits need no slot.
  int64_t max_compile_ms = 60000;
  int64_t max_concurrent_compiles = 1;
  int64_t compile_queue_ms = 10000;
  // How a miss compiles; null: backends::compileOn (tests count or slow it).
  std::function<absl::StatusOr<executable::Executable>(const backends::Backend& device, const tensor::Program& program,
                                                       const std::string& target,
                                                       const backends::CompileOptions& options)>
      compile;
};

// Half the machine's cores, at least one: hostile compiles never take
// every core.
int64_t defaultConcurrentCompiles();

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
  //
  // The stop check installed on the calling thread (base/stop.h: accyd's
  // check that the call is still wanted) is asked while waiting for a slot
  // or for another session's compile of the same program, and inside the
  // compile itself: a cancelled caller stops within milliseconds. When the
  // caller that compiles stops, the sessions waiting for its compile do
  // not share its failure: each asks again (one of them compiles).
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
  // Checks the directory and reads (or makes) the key; a reason to refuse
  // the disk otherwise.
  absl::Status openDisk();
  std::string mac(std::string_view payload) const;
  std::optional<executable::Executable> readDisk(const std::string& key);
  void writeDisk(const std::string& key, const executable::Executable& exe);
  void evict();
  void removeStaleTemporaries();
  // Keeps `loaded` under `key` in memory, evicting the least recently used
  // beyond the bounds. Under mu_.
  void remember(const std::string& key, std::shared_ptr<const backends::LoadedProgram> loaded);

  CacheOptions options_;
  executable::BuildRecord record_;
  std::string record_text_;
  std::string mac_key_;
  using Loaded = absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>>;
  mutable std::mutex mu_;
  struct Kept {
    std::shared_ptr<const backends::LoadedProgram> loaded;
    int64_t bytes = 0;
    uint64_t last_use = 0;
  };
  std::map<std::string, Kept> memory_;
  int64_t memory_bytes_ = 0;
  uint64_t uses_ = 0;
  // A compile in progress: its result, and whether its caller stopped it
  // (then those who wait for it ask again instead of taking the failure).
  struct InFlight {
    std::shared_future<Loaded> result;
    std::shared_ptr<std::atomic<bool>> abandoned;
  };
  std::map<std::string, InFlight> in_flight_;
  // Compiles running now, under mu_; a slot's release signals slot_freed_.
  int64_t compiles_running_ = 0;
  std::condition_variable slot_freed_;
  // Waits for a compile slot (under `lock`, which it may let go while it
  // waits): OK with the slot taken, else why not (a stop, the queue's time).
  absl::Status takeSlot(std::unique_lock<std::mutex>& lock);
  CacheStats stats_;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_COMPILE_CACHE_H_
