// The compile cache: memory hits, disk entries that survive a restart, a
// corrupted entry detected and recompiled, another build record never
// hitting, and an unstamped build refusing the disk.
#include "server/compile_cache.h"

#include "backends/compile_program.h"

#include <openssl/sha.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <stdexcept>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>
#include <fstream>

#include "accy/accy.h"
#include "base/stop.h"
#include "backends/cpu/cpu_backend.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/codec.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::server {
namespace {

namespace tensor = accy::tensor;

executable::BuildRecord stamped(const std::string& source) {
  return executable::BuildRecord{true, {{"SOURCE_HASH", source}, {"COMPILER", "gcc"}}};
}

struct Fixture {
  tensor::Program program;
  std::string wire;
  // A CPU backend; the cache's compiles of it are counted (counted()).
  std::unique_ptr<backends::Backend> cpu = backends::makeCpuBackend(backends::BackendOptions{1});
  backends::Backend& backend = *cpu;
  int compiles = 0;
  // `o` with its compiles counted in `compiles`.
  CacheOptions counted(CacheOptions o) {
    o.compile = [this](const backends::Backend& b, const tensor::Program& p, const std::string& t,
                       const backends::CompileOptions& options) {
      ++compiles;
      return backends::compileOn(b, p, t, options);
    };
    return o;
  }
  Fixture() {
    program = *tensor::define("mismatch", tone::specs(), tone::mismatch);
    wire = wire::encode(program);
  }
};

CacheOptions diskAt(const std::string& dir) {
  CacheOptions o;
  o.disk_dir = dir;
  return o;
}

std::string tempDir() {
  std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/cache-XXXXXX";
  return mkdtemp(dir.data());
}

TEST(CompileCache, RestartHitsTheDiskCorruptionRecompilesOtherBuildsMiss) {
  Fixture f;
  const std::string dir = tempDir();
  std::string level;
  {
    CompileCache cache(f.counted(diskAt(dir)), stamped("a"));
    ASSERT_TRUE(cache.stats().disk_enabled);
    ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
    EXPECT_EQ(level, "");
    ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
    EXPECT_EQ(level, "memory");
    EXPECT_EQ(f.compiles, 1);
    EXPECT_EQ(cache.stats().disk_entries, 1u);
  }
  {  // a restarted daemon, same build: served from disk without compiling
    CompileCache cache(f.counted(diskAt(dir)), stamped("a"));
    auto loaded = cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level);
    ASSERT_TRUE(loaded.ok());
    EXPECT_EQ(level, "disk");
    EXPECT_EQ(f.compiles, 1);
    const tone::Samples data = tone::samples();
    float freq[1] = {2.5f}, v[1];
    ASSERT_TRUE((*loaded)->launch({bytes(freq), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
    EXPECT_NEAR(v[0], 8.656, 5e-4);
  }
  {  // a corrupted entry is detected, deleted and recompiled
    CompileCache cache(f.counted(diskAt(dir)), stamped("a"));
    const std::string path = cache.pathFor(cache.keyFor(f.wire, "cpu/x86_64", "mode=exact"));
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(60);
    file.put('\x5a');
    file.close();
    ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
    EXPECT_EQ(level, "");
    EXPECT_EQ(f.compiles, 2);
    EXPECT_EQ(cache.stats().corrupt_entries, 1u);
  }
  {  // another build record never hits
    CompileCache cache(f.counted(diskAt(dir)), stamped("b"));
    ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
    EXPECT_EQ(level, "");
    EXPECT_EQ(f.compiles, 3);
  }
  std::filesystem::remove_all(dir);
}

TEST(CompileCache, UnstampedBuildsRefuseTheDiskButCacheInMemory) {
  Fixture f;
  const std::string dir = tempDir();
  CompileCache cache(f.counted(diskAt(dir)), executable::BuildRecord{});
  EXPECT_FALSE(cache.stats().disk_enabled);
  EXPECT_THAT(cache.stats().disk_disabled_reason, ::testing::HasSubstr("UnrecordedCompilerBuild"));
  std::string level;
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
  EXPECT_EQ(level, "memory");
  EXPECT_EQ(f.compiles, 1);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  EXPECT_EQ(errorKind(executable::requireRecordedBuild(executable::BuildRecord{}, "saving")),
            ErrorKind::kUnrecordedCompilerBuild);
  std::filesystem::remove_all(dir);
}

TEST(CompileCache, DiskIsKeptUnderItsByteBound) {
  Fixture f;
  const std::string dir = tempDir();
  CacheOptions tiny;
  tiny.disk_dir = dir;
  tiny.disk_max_bytes = 1;
  CompileCache cache(f.counted(tiny), stamped("a"));
  std::string level;
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {.mode = codegen::ArithmeticMode::kExact}, &level).ok());
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {.mode = codegen::ArithmeticMode::kFast}, &level).ok());
  EXPECT_EQ(cache.stats().disk_entries, 0u);  // every entry is over a 1-byte bound
  std::filesystem::remove_all(dir);
}


// The disk is code: entries without the installation's key, symbolic
// links, directories others can write, and stale temporaries.
TEST(CompileCache, APlantedEntryWithAPlainChecksumIsRefusedAndRecompiled) {
  Fixture f;
  const std::string dir = tempDir();
  std::string level;
  CompileCache cache(f.counted(diskAt(dir)), stamped("a"));
  ASSERT_TRUE(cache.stats().disk_enabled) << cache.stats().disk_disabled_reason;
  // The key file: 0600, beside the entries.
  struct stat st;
  ASSERT_EQ(stat((dir + "/cache.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // An attacker who can write the directory but not read the key plants an
  // executable with a correct plain SHA-256 (what version 01 trusted).
  absl::StatusOr<executable::Executable> exe = backends::compileOn(f.backend, f.program, "x86_64");
  ASSERT_TRUE(exe.ok());
  const std::string payload = executable::serializeExecutable(*exe);
  unsigned char digest[32];
  SHA256(reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), digest);
  const std::string path = cache.pathFor(cache.keyFor(f.wire, "cpu/x86_64", "mode=exact"));
  for (const char* magic : {"ACCYCC01", "ACCYCC02"}) {
    {
      std::ofstream planted(path, std::ios::binary | std::ios::trunc);
      planted.write(magic, 8);
      planted.write(reinterpret_cast<const char*>(digest), 32);
      planted.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    }
    CompileCache fresh(f.counted(diskAt(dir)), stamped("a"));
    const int before = f.compiles;
    ASSERT_TRUE(fresh.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
    EXPECT_EQ(level, "") << "the planted entry was loaded (" << magic << ")";
    EXPECT_EQ(f.compiles, before + 1);
    EXPECT_EQ(fresh.stats().corrupt_entries, 1u);
  }
  // The entry the daemon wrote itself is served from disk.
  CompileCache restarted(diskAt(dir), stamped("a"));
  ASSERT_TRUE(restarted.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
  EXPECT_EQ(level, "disk");
  // Another installation's key (a copied entry) does not verify.
  const std::string other = tempDir();
  std::filesystem::copy_file(path, other + "/" + std::filesystem::path(path).filename().string());
  CompileCache elsewhere(diskAt(other), stamped("a"));
  ASSERT_TRUE(elsewhere.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
  EXPECT_EQ(level, "");
  EXPECT_EQ(elsewhere.stats().corrupt_entries, 1u);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

TEST(CompileCache, ASymbolicLinkIsNotAnEntry) {
  Fixture f;
  const std::string dir = tempDir();
  std::string level;
  std::string path;
  {
    CompileCache cache(f.counted(diskAt(dir)), stamped("a"));
    ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
    path = cache.pathFor(cache.keyFor(f.wire, "cpu/x86_64", "mode=exact"));
  }
  // A valid entry moved aside, and a link to it in its place.
  std::filesystem::rename(path, dir + "/elsewhere");
  std::filesystem::create_symlink(dir + "/elsewhere", path);
  CompileCache cache(f.counted(diskAt(dir)), stamped("a"));
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", {}, &level).ok());
  EXPECT_EQ(level, "");
  EXPECT_EQ(cache.stats().corrupt_entries, 1u);
  EXPECT_FALSE(std::filesystem::is_symlink(std::filesystem::symlink_status(path)));
  std::filesystem::remove_all(dir);
}

TEST(CompileCache, ADirectoryOthersCanWriteIsRefused) {
  const std::string dir = tempDir();
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  CompileCache cache(diskAt(dir), stamped("a"));
  EXPECT_FALSE(cache.stats().disk_enabled);
  EXPECT_THAT(cache.stats().disk_disabled_reason, ::testing::HasSubstr("others can write to it (mode 0777)"));
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  const std::string link = dir + "-link";
  std::filesystem::create_directory_symlink(dir, link);
  CompileCache linked(diskAt(link), stamped("a"));
  EXPECT_FALSE(linked.stats().disk_enabled);
  EXPECT_THAT(linked.stats().disk_disabled_reason, ::testing::HasSubstr("symbolic link"));
  // A key file others can read.
  CompileCache made(diskAt(dir), stamped("a"));
  ASSERT_TRUE(made.stats().disk_enabled);
  std::filesystem::permissions(dir + "/cache.key", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                                       std::filesystem::perms::others_read);
  CompileCache readable(diskAt(dir), stamped("a"));
  EXPECT_FALSE(readable.stats().disk_enabled);
  EXPECT_THAT(readable.stats().disk_disabled_reason, ::testing::HasSubstr("can be read by others"));
  std::filesystem::remove(link);
  std::filesystem::remove_all(dir);
}

TEST(CompileCache, StaleTemporariesAreRemovedAtStart) {
  const std::string dir = tempDir();
  { CompileCache make_key(diskAt(dir), stamped("a")); }
  const std::string stale = dir + "/0123.exe.tmp.old", recent = dir + "/4567.exe.tmp.new";
  std::ofstream(stale) << "x";
  std::ofstream(recent) << "x";
  std::filesystem::last_write_time(stale, std::filesystem::file_time_type::clock::now() - std::chrono::hours(2));
  CompileCache cache(diskAt(dir), stamped("a"));
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(recent));  // perhaps another daemon's, being written
  std::filesystem::remove_all(dir);
}

TEST(CompileCache, MemoryKeepsTheMostRecentlyUsedUnderItsByteBound) {
  Fixture f;
  CacheOptions o;
  CompileCache probe(f.counted(o), executable::BuildRecord{});
  std::string level;
  auto one = probe.get(f.program, f.wire, f.backend, "x86_64", {}, &level);
  ASSERT_TRUE(one.ok());
  // Room for two programs of this size, not three.
  o.memory_max_bytes = static_cast<int64_t>((*one)->executable().code.size()) * 2 + 2000;
  CompileCache cache(f.counted(o), executable::BuildRecord{});
  const backends::CompileOptions exact{}, fast{.mode = codegen::ArithmeticMode::kFast};
  const std::string other_wire = f.wire + " ";  // another key, the same program
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", exact, &level).ok());       // A
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", fast, &level).ok());        // B
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", exact, &level).ok());       // A again
  EXPECT_EQ(level, "memory");
  ASSERT_TRUE(cache.get(f.program, other_wire, f.backend, "x86_64", exact, &level).ok());   // C evicts B
  EXPECT_EQ(cache.stats().memory_entries, 2u);
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", exact, &level).ok());
  EXPECT_EQ(level, "memory") << "the most recently used entry was evicted";
  ASSERT_TRUE(cache.get(f.program, f.wire, f.backend, "x86_64", fast, &level).ok());
  EXPECT_EQ(level, "") << "the least recently used entry was kept";
}

TEST(CompileCache, ACompileThatThrowsLeavesNothingStuck) {
  // The first compile throws.
  std::atomic<int> calls{0};
  CacheOptions throwing;
  throwing.compile = [&calls](const backends::Backend& b, const tensor::Program& p, const std::string& t,
                              const backends::CompileOptions& options) {
    if (calls.fetch_add(1) == 0) throw std::runtime_error("out of something");
    return backends::compileOn(b, p, t, options);
  };
  Fixture f;
  backends::Backend& backend = f.backend;
  CompileCache cache(throwing, executable::BuildRecord{});
  std::string level;
  EXPECT_THROW((void)cache.get(f.program, f.wire, backend, "x86_64", {}, &level), std::runtime_error);
  // The key is free again: the next request compiles (it would wait forever
  // on the abandoned compile otherwise).
  auto next = std::async(std::launch::async, [&] {
    std::string l;
    return cache.get(f.program, f.wire, backend, "x86_64", {}, &l).ok();
  });
  ASSERT_EQ(next.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_TRUE(next.get());
  EXPECT_EQ(calls.load(), 2);
}

// A slow compile holds up only the requests for the same program: another
// program compiles and loads meanwhile, and the requests that share the
// slow key wait for its one compile.
TEST(CompileCache, ASlowCompileDelaysOnlyItsOwnKey) {
  // Compiles of the program "slow" wait until `open`.
  struct Gating {
    std::unique_ptr<backends::Backend> cpu = backends::makeCpuBackend(backends::BackendOptions{1});
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    std::atomic<int> slow_compiles{0};
  } backend;
  CacheOptions gated{.max_concurrent_compiles = 2};  // the fast key takes its own slot
  gated.compile = [&backend](const backends::Backend& b, const tensor::Program& p, const std::string& t,
                             const backends::CompileOptions& options) {
    if (p.name == "slow") {
      ++backend.slow_compiles;
      std::unique_lock<std::mutex> lock(backend.mu);
      backend.cv.wait(lock, [&] { return backend.open; });
    }
    return backends::compileOn(b, p, t, options);
  };
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 4}})};
  auto slow = tensor::define("slow", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; });
  auto fast = tensor::define("fast", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 3; });
  const std::string slow_wire = wire::encode(*slow), fast_wire = wire::encode(*fast);
  CompileCache cache(gated, stamped("a"));
  std::vector<std::thread> waiting;
  std::vector<std::string> levels(3);
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i) {
    waiting.emplace_back([&, i] {
      EXPECT_TRUE(cache.get(*slow, slow_wire, *backend.cpu, "x86_64", {}, &levels[i]).ok());
      ++done;
    });
  }
  while (backend.slow_compiles.load() == 0) std::this_thread::yield();
  std::string level;
  EXPECT_TRUE(cache.get(*fast, fast_wire, *backend.cpu, "x86_64", {}, &level).ok());  // not blocked
  EXPECT_EQ(level, "");
  EXPECT_EQ(done.load(), 0);
  {
    std::lock_guard<std::mutex> lock(backend.mu);
    backend.open = true;
  }
  backend.cv.notify_all();
  for (std::thread& t : waiting) t.join();
  EXPECT_EQ(backend.slow_compiles.load(), 1);
  EXPECT_EQ(std::count(levels.begin(), levels.end(), ""), 1);        // the one that compiled
  EXPECT_EQ(std::count(levels.begin(), levels.end(), "memory"), 2);  // the ones that waited for it
  EXPECT_EQ(cache.stats().misses, 2u);
}

}  // namespace

// A compile whose caller stops it (its call cancelled, its deadline past)
// stops inside the compiler, within milliseconds, and the session waiting
// for the same program does not share that failure: it compiles it itself.
TEST(CompileCache, AStoppedCallersWaitersCompileForThemselves) {
  std::unique_ptr<backends::Backend> cpu = backends::makeCpuBackend(backends::BackendOptions{1});
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 256}})};
  auto slow = tensor::define("slow", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    tensor::Value x = v[0];
    for (int k = 0; k < 12000; ++k) x = (k % 2 == 0 ? x.sin() : x.cos());
    return x;
  });
  ASSERT_TRUE(slow.ok());
  const std::string wire_bytes = wire::encode(*slow);
  CompileCache cache(CacheOptions{.max_concurrent_compiles = 2}, stamped("a"));
  const auto start = std::chrono::steady_clock::now();
  std::atomic<double> stopped_after{0};
  std::thread first([&] {
    const StopCheck after_100ms = [&]() -> absl::Status {
      if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100)) return absl::OkStatus();
      return absl::CancelledError("the caller went away");
    };
    ScopedStopCheck scope(&after_100ms);
    std::string level;
    auto loaded = cache.get(*slow, wire_bytes, *cpu, "x86_64", {}, &level);
    stopped_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kCancelled) << loaded.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::string level = "unset";
  auto second = cache.get(*slow, wire_bytes, *cpu, "x86_64", {}, &level);
  const double second_done = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  first.join();
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(level, "");  // compiled by this caller, not a hit on the stopped one
  // Stopped inside the compiler: its delay past the deadline is a small
  // part of the whole compile, which the second caller then ran after it
  // (both measured on this machine under whatever else runs: a fixed
  // bound of 100 ms failed at 113 ms beside another test on 2 cores).
  const double whole_compile = second_done - stopped_after.load();
  EXPECT_LT(stopped_after.load() - 0.1, whole_compile / 4)
      << "stopped " << stopped_after.load() - 0.1 << " s after its deadline; the compile takes " << whole_compile << " s";
  EXPECT_EQ(cache.stats().memory_entries, 1u);
}

}  // namespace accy::server
