#include "server/compile_cache.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <vector>

#include "compiler/executable/codec.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::server {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'A', 'C', 'C', 'Y', 'C', 'C', '0', '1'};

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

}  // namespace

CompileCache::CompileCache(const CacheOptions& options, executable::BuildRecord record)
    : options_(options), record_(std::move(record)), record_text_(executable::buildRecordText(record_)) {
  if (options_.disk_dir.empty()) {
    stats_.disk_disabled_reason = "no cache directory configured";
  } else if (absl::Status st = executable::requireRecordedBuild(record_, "the disk cache"); !st.ok()) {
    stats_.disk_disabled_reason = std::string(st.message());
  } else {
    std::error_code ec;
    fs::create_directories(options_.disk_dir, ec);
    stats_.disk_enabled = !ec;
    if (ec) stats_.disk_disabled_reason = strCat("cannot create ", options_.disk_dir, ": ", ec.message());
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&]() -> std::optional<executable::Executable> {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.corrupt_entries;
    }
    std::error_code ec;
    fs::remove(path, ec);
    return std::nullopt;
  };
  // magic | sha256(payload) | payload
  if (data.size() < sizeof kMagic + SHA256_DIGEST_LENGTH || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return corrupt();
  }
  std::string_view payload(data.data() + sizeof kMagic + SHA256_DIGEST_LENGTH,
                           data.size() - sizeof kMagic - SHA256_DIGEST_LENGTH);
  if (sha256(payload) != std::string_view(data.data() + sizeof kMagic, SHA256_DIGEST_LENGTH)) return corrupt();
  auto exe = executable::parseExecutable(payload);
  if (!exe.ok()) return corrupt();
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // recently used
  return std::move(*exe);
}

void CompileCache::writeDisk(const std::string& key, const executable::Executable& exe) {
  const std::string payload = executable::serializeExecutable(exe);
  const std::string path = pathFor(key);
  const std::string tmp = strCat(path, ".tmp.", ::getpid(), ".", reinterpret_cast<uintptr_t>(&exe));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(kMagic, sizeof kMagic);
    const std::string digest = sha256(payload);
    out.write(digest.data(), static_cast<std::streamsize>(digest.size()));
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return;
    }
  }
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

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> CompileCache::get(
    const tensor::Program& program, std::string_view wire, const backends::Backend& backend,
    const std::string& target, const backends::CompileOptions& options, std::string* level) {
  const std::string key =
      keyFor(wire, strCat(backend.info().name, "/", target), strCat("mode=", backends::arithmeticModeName(options.mode)));
  std::promise<Loaded> promise;
  bool disk_enabled = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      ++stats_.memory_hits;
      *level = "memory";
      return it->second;
    }
    if (auto it = in_flight_.find(key); it != in_flight_.end()) {
      // Another session is compiling the same program: wait for it rather
      // than compile twice; the result is the one it puts in memory.
      std::shared_future<Loaded> pending = it->second;
      ++stats_.memory_hits;
      lock.unlock();
      *level = "memory";
      return pending.get();
    }
    in_flight_.emplace(key, promise.get_future().share());
    disk_enabled = stats_.disk_enabled;
  }
  // Disk, compile and load run outside the lock: a slow compile delays
  // only the sessions that asked for the same program.
  auto fill = [&]() -> Loaded {
    std::optional<executable::Executable> exe;
    if (disk_enabled) exe = readDisk(key);
    if (exe.has_value()) {
      *level = "disk";
    } else {
      level->clear();
      ACCY_ASSIGN_OR_RETURN(executable::Executable fresh, backend.compile(program, target, options));
      if (disk_enabled) writeDisk(key, fresh);
      exe = std::move(fresh);
    }
    return backend.load(std::move(*exe));
  };
  Loaded loaded = fill();
  std::lock_guard<std::mutex> lock(mu_);
  ++(*level == "disk" ? stats_.disk_hits : stats_.misses);
  if (loaded.ok()) {
    if (static_cast<int64_t>(memory_.size()) >= options_.memory_max_entries) memory_.erase(memory_.begin());
    memory_.emplace(key, *loaded);
  }
  in_flight_.erase(key);
  promise.set_value(loaded);
  return loaded;
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
