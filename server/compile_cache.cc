#include "server/compile_cache.h"

#include "backends/compile_program.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/cpus.h"
#include "base/errors.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/codec.h"
#include "base/status_macros.h"
#include "base/stop.h"
#include "base/strings.h"

namespace accy::server {
namespace {

namespace fs = std::filesystem;
// Version 02: the digest is an HMAC-SHA256 under the installation's key
// (version 01 entries, with a plain SHA-256, are refused and replaced).
constexpr char kMagic[8] = {'A', 'C', 'C', 'Y', 'C', 'C', '0', '2'};
constexpr char kKeyFile[] = "cache.key";
constexpr size_t kKeyBytes = 32;
constexpr auto kStaleTemporary = std::chrono::hours(1);

std::string sha256(std::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string randomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    // No randomness: O_EXCL still refuses an existing name.
    raw = strCat(::getpid(), ".", std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return hex(raw);
}

// The whole contents of a regular file of this user, opened without
// following a symbolic link; nullopt otherwise.
std::optional<std::string> readOwnFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::string> data;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid()) {
    data.emplace(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < data->size()) {
      const ssize_t n = ::read(fd, data->data() + got, data->size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != data->size()) data.reset();
  }
  ::close(fd);
  return data;
}

// Writes `data` to a new file (O_EXCL, mode 0600); false if it exists or fails.
bool writeNewFile(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t put = 0;
  while (put < data.size()) {
    const ssize_t n = ::write(fd, data.data() + put, data.size() - put);
    if (n <= 0) break;
    put += static_cast<size_t>(n);
  }
  const bool ok = put == data.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) ::unlink(path.c_str());
  return ok;
}

}  // namespace

CompileCache::CompileCache(const CacheOptions& options, executable::BuildRecord record)
    : options_(options), record_(std::move(record)), record_text_(executable::buildRecordText(record_)) {
  if (options_.disk_dir.empty()) {
    stats_.disk_disabled_reason = "no cache directory configured";
  } else if (absl::Status st = executable::requireRecordedBuild(record_, "the disk cache"); !st.ok()) {
    stats_.disk_disabled_reason = std::string(st.message());
  } else if (absl::Status st = openDisk(); !st.ok()) {
    stats_.disk_disabled_reason = std::string(st.message());
  } else {
    stats_.disk_enabled = true;
    removeStaleTemporaries();
  }
}

absl::Status CompileCache::openDisk() {
  const std::string& dir = options_.disk_dir;
  auto refuse = [&](std::string why) { return absl::FailedPreconditionError(strCat("cache directory ", dir, ": ", why)); };
  std::error_code ec;
  const mode_t old = ::umask(0077);
  fs::create_directories(dir, ec);
  ::umask(old);
  if (ec) return refuse(strCat("cannot create it: ", ec.message()));
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return refuse(strCat("cannot stat it: ", std::strerror(errno)));
  if (S_ISLNK(st.st_mode)) return refuse("it is a symbolic link");
  if (!S_ISDIR(st.st_mode)) return refuse("it is not a directory");
  if (st.st_uid != ::geteuid()) return refuse(strCat("it is owned by user ", st.st_uid, ", not this daemon's ", ::geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return refuse(strCat("others can write to it (mode ", absl::StrFormat("%04o", st.st_mode & 07777), "); chmod go-w it"));
  }
  const std::string key_path = dir + "/" + kKeyFile;
  std::optional<std::string> key = readOwnFile(key_path);
  if (!key.has_value()) {
    const std::string fresh = std::string(randomHex(kKeyBytes)).substr(0, 2 * kKeyBytes);
    if (!writeNewFile(key_path, fresh)) {
      key = readOwnFile(key_path);  // made by another daemon meanwhile
    } else {
      key = fresh;
    }
  }
  if (!key.has_value() || key->size() != 2 * kKeyBytes) {
    return refuse(strCat(key_path, " is not a key this daemon can use (", 2 * kKeyBytes,
                         " hex digits in a regular file of its user)"));
  }
  if (::lstat(key_path.c_str(), &st) != 0 || (st.st_mode & 077) != 0) {
    return refuse(strCat(key_path, " can be read by others; chmod 600 it"));
  }
  mac_key_ = *key;
  return absl::OkStatus();
}

std::string CompileCache::mac(std::string_view payload) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), mac_key_.data(), static_cast<int>(mac_key_.size()),
       reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

void CompileCache::removeStaleTemporaries() {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& e : fs::directory_iterator(options_.disk_dir, ec)) {
    if (e.path().filename().string().find(".exe.tmp.") == std::string::npos) continue;
    std::error_code time_ec;
    const auto written = e.last_write_time(time_ec);
    if (!time_ec && now - written > kStaleTemporary) fs::remove(e.path(), time_ec);
  }
}

std::string CompileCache::keyFor(std::string_view wire, std::string_view target, std::string_view options) const {
  std::string material = record_text_;
  for (std::string_view part : {wire, target, options}) {
    material += strCat(part.size(), ":");
    material.append(part.data(), part.size());
  }
  return hex(sha256(material));
}

std::string CompileCache::pathFor(const std::string& key) const { return options_.disk_dir + "/" + key + ".exe"; }

std::optional<executable::Executable> CompileCache::readDisk(const std::string& key) {
  const std::string path = pathFor(key);
  std::error_code exists_ec;
  if (!fs::exists(fs::symlink_status(path, exists_ec))) return std::nullopt;
  auto corrupt = [&]() -> std::optional<executable::Executable> {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.corrupt_entries;
    }
    std::error_code ec;
    fs::remove(path, ec);
    return std::nullopt;
  };
  // A symbolic link, another user's file or anything but a regular file is
  // not an entry this daemon wrote.
  std::optional<std::string> data = readOwnFile(path);
  if (!data.has_value()) return corrupt();
  // magic | HMAC-SHA256(key, payload) | payload
  if (data->size() < sizeof kMagic + SHA256_DIGEST_LENGTH || std::memcmp(data->data(), kMagic, sizeof kMagic) != 0) {
    return corrupt();
  }
  std::string_view payload(data->data() + sizeof kMagic + SHA256_DIGEST_LENGTH,
                           data->size() - sizeof kMagic - SHA256_DIGEST_LENGTH);
  const std::string expected = mac(payload);
  if (CRYPTO_memcmp(expected.data(), data->data() + sizeof kMagic, SHA256_DIGEST_LENGTH) != 0) return corrupt();
  auto exe = executable::parseExecutable(payload);
  if (!exe.ok()) return corrupt();
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);  // recently used
  return std::move(*exe);
}

void CompileCache::writeDisk(const std::string& key, const executable::Executable& exe) {
  const std::string payload = executable::serializeExecutable(exe);
  const std::string path = pathFor(key);
  const std::string tmp = strCat(path, ".tmp.", randomHex(16));
  std::string data(kMagic, sizeof kMagic);
  data += mac(payload);
  data += payload;
  if (!writeNewFile(tmp, data)) return;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  evict();
}

void CompileCache::evict() {
  struct Entry {
    fs::path path;
    fs::file_time_type time;
    uintmax_t size;
  };
  std::vector<Entry> entries;
  uintmax_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.disk_dir, ec)) {
    if (e.path().extension() != ".exe") continue;
    const uintmax_t size = e.file_size(ec);
    entries.push_back(Entry{e.path(), e.last_write_time(ec), size});
    total += size;
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= static_cast<uintmax_t>(options_.disk_max_bytes)) break;
    fs::remove(e.path, ec);
    total -= e.size;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.disk_bytes = total;
}

int64_t defaultConcurrentCompiles() {
  return std::max<int64_t>(1, usableCpus() / 2);
}

absl::Status CompileCache::takeSlot(std::unique_lock<std::mutex>& lock) {
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::milliseconds(options_.compile_queue_ms);
  while (compiles_running_ >= options_.max_concurrent_compiles) {
    // Wakes for a freed slot, or every 10 ms to ask whether the caller
    // still wants the compile.
    slot_freed_.wait_for(lock, std::chrono::milliseconds(10));
    if (compiles_running_ < options_.max_concurrent_compiles) break;
    ACCY_RETURN_IF_ERROR(checkStop());
    if (std::chrono::steady_clock::now() >= until) {
      return makeError(ErrorKind::kTooManyPrograms,
                       strCat("accyd: ", compiles_running_, " compiles are running (--max-concurrent-compiles=",
                              options_.max_concurrent_compiles, "); this one waited ", options_.compile_queue_ms,
                              " ms for a slot (--compile-queue-ms); try again later"));
    }
  }
  ++compiles_running_;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> CompileCache::get(
    const tensor::Program& program, std::string_view wire, const backends::Backend& backend,
    const std::string& target, const backends::CompileOptions& options, std::string* level) {
  const std::string key =
      keyFor(wire, strCat(backend.info().name, "/", target), strCat("mode=", codegen::arithmeticModeName(options.mode)));
  std::promise<Loaded> promise;
  auto abandoned = std::make_shared<std::atomic<bool>>(false);
  bool disk_enabled = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (auto it = memory_.find(key); it != memory_.end()) {
      ++stats_.memory_hits;
      *level = "memory";
      it->second.last_use = ++uses_;
      return it->second.loaded;
    }
    auto it = in_flight_.find(key);
    if (it == in_flight_.end()) break;
    // Another session is compiling the same program: wait for it rather
    // than compile twice; the result is the one it puts in memory. Ask
    // again if its caller stopped it.
    const InFlight pending = it->second;
    lock.unlock();
    while (pending.result.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
      ACCY_RETURN_IF_ERROR(checkStop());
    }
    lock.lock();
    if (pending.abandoned->load()) continue;
    ++stats_.memory_hits;
    *level = "memory";
    return pending.result.get();
  }
  in_flight_.emplace(key, InFlight{promise.get_future().share(), abandoned});
  disk_enabled = stats_.disk_enabled;
  // Whatever happens below (an error, or an exception from a backend), the
  // in-flight entry goes and its waiters are answered: none is left
  // waiting for a compile that will never finish.
  struct Settle {
    CompileCache* cache;
    const std::string& key;
    std::promise<Loaded>& promise;
    bool settled = false;
    ~Settle() {
      if (settled) return;
      std::lock_guard<std::mutex> lock(cache->mu_);
      cache->in_flight_.erase(key);
      promise.set_value(makeError(ErrorKind::kCompileFailed, "the compile was abandoned (the backend threw)"));
    }
  } settle{this, key, promise};
  auto settleWith = [&](const Loaded& loaded) {  // under mu_
    in_flight_.erase(key);
    settle.settled = true;
    promise.set_value(loaded);
  };
  if (absl::Status slot = takeSlot(lock); !slot.ok()) {
    abandoned->store(true);
    settleWith(slot);
    return slot;
  }
  lock.unlock();
  struct Slot {
    CompileCache* cache;
    ~Slot() {
      std::lock_guard<std::mutex> lock(cache->mu_);
      --cache->compiles_running_;
      cache->slot_freed_.notify_one();
    }
  } slot{this};
  // The compile's time limit and the caller's own check, asked inside the
  // compile; a stop the caller asked for abandons it (see get's comment).
  const StopCheck* caller = stopCheck();
  const auto limit = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.max_compile_ms);
  const StopCheck within = [&, max_ms = options_.max_compile_ms]() -> absl::Status {
    if (caller != nullptr) {
      absl::Status st = (*caller)();
      if (!st.ok()) {
        abandoned->store(true);
        return st;
      }
    }
    if (std::chrono::steady_clock::now() <= limit) return absl::OkStatus();
    return makeError(ErrorKind::kCompileFailed,
                     strCat("accyd: the compile took longer than ", max_ms, " ms (--max-compile-ms); stopped"));
  };
  ScopedStopCheck scoped(&within);
  // Disk, compile and load run outside the lock: a slow compile delays
  // only the sessions that asked for the same program.
  auto fill = [&]() -> Loaded {
    std::optional<executable::Executable> exe;
    if (disk_enabled) exe = readDisk(key);
    if (exe.has_value()) {
      *level = "disk";
    } else {
      level->clear();
      ACCY_ASSIGN_OR_RETURN(executable::Executable fresh,
                            options_.compile ? options_.compile(backend, program, target, options)
                                             : backends::compileOn(backend, program, target, options));
      if (disk_enabled) writeDisk(key, fresh);
      exe = std::move(fresh);
    }
    return backend.load(std::move(*exe));
  };
  Loaded loaded = fill();
  lock.lock();
  ++(*level == "disk" ? stats_.disk_hits : stats_.misses);
  if (loaded.ok()) remember(key, *loaded);
  settleWith(loaded);
  lock.unlock();  // the slot's release takes the lock
  return loaded;
}

void CompileCache::remember(const std::string& key, std::shared_ptr<const backends::LoadedProgram> loaded) {
  const executable::Executable& exe = loaded->executable();
  const int64_t bytes = static_cast<int64_t>(exe.code.size() + exe.launch_plan.steps.size() * 64 +
                                             exe.artifact_plan.buffers.size() * 48 + 256);
  Kept& kept = memory_[key];
  memory_bytes_ += bytes - kept.bytes;
  kept = Kept{std::move(loaded), bytes, ++uses_};
  while (memory_.size() > 1 && (static_cast<int64_t>(memory_.size()) > options_.memory_max_entries ||
                                memory_bytes_ > options_.memory_max_bytes)) {
    auto oldest = memory_.begin();
    for (auto it = memory_.begin(); it != memory_.end(); ++it) {
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    }
    memory_bytes_ -= oldest->second.bytes;
    memory_.erase(oldest);
  }
}

CacheStats CompileCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CacheStats s = stats_;
  s.memory_entries = memory_.size();
  if (s.disk_enabled) {
    std::error_code ec;
    s.disk_entries = 0;
    for (const auto& e : fs::directory_iterator(options_.disk_dir, ec)) {
      if (e.path().extension() == ".exe") ++s.disk_entries;
    }
  }
  return s;
}

}  // namespace accy::server
