#include "tools/msl/shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "backends/buffer_checks.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/gpu/artifact_json.h"
#include "compiler/codegen/msl/artifact.h"
#include "compiler/codegen/msl/compile.h"
#include "compiler/codegen/targets.h"

namespace accy::mslshim {
namespace {

// tools/msl/metal_stdlib, written beside each generated file.
constexpr char kMetalStdlib[] =
#include "tools/msl/metal_stdlib.inc"
    ;

// The generated code compiles with warnings as errors, except for what
// generated code has by construction: attributes only Metal knows, builtin
// parameters and bound values a kernel does not use. No contraction: the
// exact-mode algorithms need each rounding where they put it.
const char* const kClangFlags[] = {"-std=c++17",
                                   "-O1",
                                   "-fPIC",
                                   "-ffp-contract=off",
                                   // Undefined behaviour in a kernel (signed overflow, shifts by
                                   // the width, out-of-range conversions) traps: a loud stop.
                                   "-fsanitize=undefined",
                                   "-fsanitize-trap=undefined",
                                   "-fno-sanitize=function",
                                   "-fno-exceptions",
                                   "-Wall",
                                   "-Wextra",
                                   "-Werror",
                                   "-Wno-unknown-attributes",
                                   "-Wno-unused-parameter",
                                   "-Wno-unused-variable",
                                   "-Wno-unused-but-set-variable"};

std::atomic<int64_t> barriers_met{0}, shuffles_done{0}, cooperative_threads{0};

// Must match AccyShimHooks in tools/msl/metal_stdlib.
struct Hooks {
  void (*barrier)();
  void (*shuffle_down)(void* value, unsigned bytes, unsigned delta);
};

// A reusable barrier for `count` threads that gives up (and lets every
// thread through from then on) when one waits longer than kBarrierTimeout.
class Barrier {
 public:
  Barrier(int count, std::chrono::milliseconds timeout) : count_(count), timeout_(timeout) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) return;
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, timeout_, [&] { return generation_ != generation || broken_; })) {
      broken_ = true;
      cv_.notify_all();
    }
  }
  bool broken() {
    std::lock_guard<std::mutex> lock(mutex_);
    return broken_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int count_;
  const std::chrono::milliseconds timeout_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
};

// A SIMD group's exchange: a slot per lane and a barrier of its own.
struct SimdGroup {
  SimdGroup(int lanes, std::chrono::milliseconds timeout) : barrier(lanes, timeout), slots(static_cast<size_t>(lanes)) {}
  Barrier barrier;
  std::vector<uint64_t> slots;
};

// What a running thread's hooks act on.
struct ThreadState {
  Barrier* group = nullptr;  // null: a kernel whose threads never meet
  SimdGroup* simd = nullptr;
  unsigned lane = 0, lanes = 0;
  std::atomic<bool>* misuse = nullptr;  // set when a hook is called without a group
};
thread_local ThreadState* current = nullptr;

void hookBarrier() {
  if (current->group == nullptr) {
    current->misuse->store(true);
    return;
  }
  barriers_met.fetch_add(1, std::memory_order_relaxed);
  current->group->wait();
}

void hookShuffleDown(void* value, unsigned bytes, unsigned delta) {
  if (current->simd == nullptr || bytes > 8) {
    current->misuse->store(true);
    return;
  }
  shuffles_done.fetch_add(1, std::memory_order_relaxed);
  SimdGroup& s = *current->simd;
  std::memcpy(&s.slots[current->lane], value, bytes);
  s.barrier.wait();
  if (current->lane + delta < current->lanes) std::memcpy(value, &s.slots[current->lane + delta], bytes);
  s.barrier.wait();  // every lane has read before the slots are written again
}

const Hooks kHooks = {hookBarrier, hookShuffleDown};

// Runs argv[0] with `argv`, its output into `log`; its exit status, or -1.
int runTool(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string firstLines(const std::string& path, int lines) {
  std::ifstream in(path);
  std::string out, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) strAppend(&out, "\n  ", line);
  return out;
}

using Entry = void (*)(void* const* pointers, const uint32_t* builtins);

class ShimProgram final : public backends::LoadedProgram {
 public:
  ShimProgram(executable::Executable exe, void* library, std::vector<Entry> entries,
              std::vector<msl::KernelInfo> infos, std::chrono::milliseconds barrier_timeout)
      : exe_(std::move(exe)),
        library_(library),
        entries_(std::move(entries)),
        infos_(std::move(infos)),
        barrier_timeout_(barrier_timeout) {}
  ~ShimProgram() override { dlclose(library_); }

  const executable::Executable& executable() const override { return exe_; }

  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override {
    if (absl::Status st = backends::checkLaunchBuffers(exe_, inputs, outputs); !st.ok()) return st;
    const auto& plans = exe_.artifact_plan.buffers;
    std::vector<std::byte> scratch(static_cast<size_t>(exe_.artifact_plan.scratch_bytes) + 64);
    std::byte* base = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    std::vector<void*> buffers(plans.size(), nullptr);
    for (size_t b = 0; b < plans.size(); ++b) {
      const executable::BufferPlan& p = plans[b];
      switch (p.role) {
        case choir::BufferRole::kInput:
          buffers[b] = const_cast<std::byte*>(inputs[static_cast<size_t>(p.io_index)].data());
          break;
        case choir::BufferRole::kOutput:
          buffers[b] = outputs[static_cast<size_t>(p.io_index)].data();
          break;
        case choir::BufferRole::kTemp:
          buffers[b] = base + p.scratch_offset;
          break;
      }
    }
    for (size_t k = 0; k < entries_.size(); ++k) {
      if (absl::Status st = runKernel(k, buffers); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status runKernel(size_t k, const std::vector<void*>& buffers) const {
    const executable::LaunchStep& step = exe_.launch_plan.steps[k];
    const msl::KernelInfo& info = infos_[k];
    const int threads = static_cast<int>(step.group_size);
    const int64_t groups = std::max<int64_t>(step.parallel_extent, 1);
    std::vector<void*> pointers;
    for (int b : info.bindings) pointers.push_back(buffers[static_cast<size_t>(b)]);
    const Entry entry = entries_[k];
    std::atomic<bool> misuse{false};
    if (!info.cooperative()) {
      // The threads never meet: their work on a few CPU threads.
      const int64_t total = groups * threads;
      const int workers = static_cast<int>(std::clamp<int64_t>(total / 4096, 1, std::thread::hardware_concurrency()));
      std::vector<std::thread> pool;
      for (int w = 0; w < workers; ++w) {
        pool.emplace_back([&, w] {
          ThreadState state;
          state.misuse = &misuse;
          current = &state;
          for (int64_t i = total * w / workers; i < total * (w + 1) / workers; ++i) {
            const uint32_t builtins[3] = {static_cast<uint32_t>(i % threads), static_cast<uint32_t>(i / threads),
                                          static_cast<uint32_t>(i)};
            entry(pointers.data(), builtins);
          }
          current = nullptr;
        });
      }
      for (std::thread& t : pool) t.join();
    } else {
      // Each threadgroup's threads as CPU threads, meeting at barriers. The
      // threadgroup arrays are the kernel's statics (the shim's
      // `threadgroup`): one threadgroup of one launch at a time.
      std::lock_guard<std::mutex> one_at_a_time(cooperative_);
      // The kernel's barriers, and another where a threadgroup's threads
      // finish (a thread that skips a barrier its group meets cannot pair
      // with the others' next one).
      Barrier group(threads, barrier_timeout_), finished(threads, barrier_timeout_);
      cooperative_threads.fetch_add(threads, std::memory_order_relaxed);
      std::vector<std::unique_ptr<SimdGroup>> simd;
      for (int s = 0; s * 32 < threads; ++s) simd.push_back(std::make_unique<SimdGroup>(std::min(32, threads - 32 * s), barrier_timeout_));
      const uint32_t simd_count = static_cast<uint32_t>(simd.size());
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          ThreadState state;
          state.group = &group;
          state.simd = simd[static_cast<size_t>(t / 32)].get();
          state.lane = static_cast<unsigned>(t % 32);
          state.lanes = static_cast<unsigned>(std::min(32, threads - 32 * (t / 32)));
          state.misuse = &misuse;
          current = &state;
          for (int64_t g = 0; g < groups; ++g) {
            const uint32_t builtins[7] = {static_cast<uint32_t>(t),      static_cast<uint32_t>(g),
                                          static_cast<uint32_t>(g * threads + t),
                                          32u,  // threads_per_simdgroup: the SIMD width
                                          simd_count, static_cast<uint32_t>(t / 32), static_cast<uint32_t>(t % 32)};
            entry(pointers.data(), builtins);
            finished.wait();  // the threadgroup's memory passes to the next
          }
          current = nullptr;
        });
      }
      for (std::thread& t : pool) t.join();
      bool stuck = group.broken() || finished.broken();
      for (const auto& s : simd) stuck = stuck || s->barrier.broken();
      if (stuck) {
        return makeError(ErrorKind::kLaunchFailed,
                         strCat("MSL shim: kernel ", step.kernel, ": threads of a threadgroup did not all reach a "
                                "barrier or SIMD-group operation within ", barrier_timeout_.count(), " ms"));
      }
    }
    if (misuse.load()) {
      return makeError(ErrorKind::kLaunchFailed, strCat("MSL shim: kernel ", step.kernel,
                                                        " used a barrier or SIMD-group operation its description "
                                                        "(first line) does not declare"));
    }
    return absl::OkStatus();
  }

  executable::Executable exe_;
  void* library_;
  std::vector<Entry> entries_;
  std::vector<msl::KernelInfo> infos_;
  std::chrono::milliseconds barrier_timeout_;
  mutable std::mutex cooperative_;
};

}  // namespace

ShimStats stats() {
  return ShimStats{barriers_met.load(), shuffles_done.load(), cooperative_threads.load()};
}

std::string clangPath() {
  if (const char* env = std::getenv("ACCY_CLANG"); env != nullptr && *env != '\0') {
    return access(env, X_OK) == 0 ? env : "";
  }
  for (const char* path : {"/usr/bin/clang++", "/usr/local/bin/clang++", "/usr/bin/clang++-16", "/usr/bin/clang++-15",
                           "/usr/bin/clang++-14"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

ShimBackend::ShimBackend(std::string work_dir) : work_dir_(std::move(work_dir)) {
  info_.name = "msl-shim";
  info_.targets = {"msl"};
  info_.min_buffer_alignment = 1;
  info_.available = !clangPath().empty();
  if (!info_.available) info_.unavailable_reason = "clang++ not found (/usr/bin/clang++ or ACCY_CLANG)";
}

absl::StatusOr<executable::Executable> ShimBackend::compile(const tensor::Program& program, const std::string& target,
                                                            const backends::CompileOptions& options) const {
  if (target != "msl") {
    return makeError(ErrorKind::kInvalidArgument, strCat("the MSL shim runs target msl, not ", target));
  }
  return codegen::compileFor(target, program, codegen::CompileRequest{.mode = options.mode});
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> ShimBackend::load(executable::Executable exe) const {
  if (exe.target != "msl") {
    return makeError(ErrorKind::kInvalidArgument, strCat("the MSL shim loads msl executables, not ", exe.target));
  }
  const std::string clang = clangPath();
  if (clang.empty()) return makeError(ErrorKind::kUnimplemented, strCat("MSL shim: ", info_.unavailable_reason));
  if (exe.launch_plan.steps.empty()) return makeError(ErrorKind::kInvalidArgument, "MSL executable has no kernels");
  // One C++ file: each kernel's source in a namespace of its own, and an
  // entry that calls it with its parameters in the order its first line
  // describes.
  std::vector<msl::KernelInfo> infos;
  std::string file = strCat("#include <metal_stdlib>\n");
  for (size_t k = 0; k < exe.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& step = exe.launch_plan.steps[k];
    if (step.group_size < 1 || step.group_size > 1024) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("MSL kernel ", step.kernel, ": ", step.group_size, " threads per threadgroup (1 to 1024)"));
    }
    const std::string_view source = gpu::kernelSource(exe, k);
    absl::StatusOr<msl::KernelInfo> info = msl::kernelInfo(source);
    if (!info.ok()) return info.status();
    std::string args;
    size_t pointer = 0;
    for (int b : info->bindings) {
      if (b < 0 || static_cast<size_t>(b) >= exe.artifact_plan.buffers.size()) {
        return makeError(ErrorKind::kInvalidArgument,
                         strCat("MSL kernel ", step.kernel, " binds buffer ", b, ", which the executable lacks"));
      }
      const executable::BufferPlan& p = exe.artifact_plan.buffers[static_cast<size_t>(b)];
      strAppend(&args, args.empty() ? "" : ", ", "(", p.role == choir::BufferRole::kInput ? "const " : "",
                msl::storedType(p.dtype), "*)p[", pointer++, "]");
    }
    for (int i = 0; i < (info->simdgroups ? 7 : 3); ++i) strAppend(&args, args.empty() ? "" : ", ", "b[", i, "]");
    strAppend(&file, "namespace accy_k", k, " {\n", source, "}  // namespace accy_k", k,
              "\nextern \"C\" void accy_entry_", k, "(void* const* p, const uint* b) { accy_k", k,
              "::", msl::kEntryName, "(", args, "); }\n");
    infos.push_back(*std::move(info));
  }
  static std::atomic<int> counter{0};
  const std::string stem = strCat(work_dir_, "/msl", getpid(), "_", counter++);
  {
    std::ofstream header(strCat(work_dir_, "/metal_stdlib"), std::ios::trunc);
    header << kMetalStdlib;
    std::ofstream out(stem + ".cc", std::ios::trunc);
    out << file;
    if (!header || !out) {
      return makeError(ErrorKind::kCompileFailed, strCat("MSL shim: cannot write ", stem, ".cc"));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> argv = {clang};
  for (const char* f : kClangFlags) argv.emplace_back(f);
  for (const std::string& f : {strCat("-I", work_dir_), std::string("-c"), stem + ".cc", std::string("-o"), stem + ".o"}) {
    argv.push_back(f);
  }
  if (runTool(argv, stem + ".log") != 0) {
    return makeError(ErrorKind::kCompileFailed,
                     strCat("MSL shim: clang++ refused the generated MSL (", stem, ".cc):", firstLines(stem + ".log", 12)));
  }
  // Linked by ld where binutils has it (much faster than the driver).
  const std::vector<std::string> link =
      access("/usr/bin/ld", X_OK) == 0
          ? std::vector<std::string>{"/usr/bin/ld", "-shared", "-o", stem + ".so", stem + ".o"}
          : std::vector<std::string>{clang, "-shared", "-nostdlib", "-o", stem + ".so", stem + ".o"};
  if (runTool(link, stem + ".log") != 0) {
    return makeError(ErrorKind::kCompileFailed, strCat("MSL shim: linking ", stem, ".o failed:", firstLines(stem + ".log", 12)));
  }
  void* library = dlopen((stem + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  *compile_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++*loads_;
  if (library == nullptr) {
    return makeError(ErrorKind::kCompileFailed, strCat("MSL shim: cannot load ", stem, ".so: ", dlerror()));
  }
  for (const char* ext : {".cc", ".o", ".so", ".log"}) std::remove((stem + ext).c_str());
  auto** hooks = static_cast<const Hooks**>(dlsym(library, "accy_shim_hooks"));
  std::vector<Entry> entries;
  for (size_t k = 0; k < infos.size(); ++k) {
    entries.push_back(reinterpret_cast<Entry>(dlsym(library, strCat("accy_entry_", k).c_str())));
    if (entries.back() == nullptr) hooks = nullptr;
  }
  if (hooks == nullptr) {
    dlclose(library);
    return makeError(ErrorKind::kCompileFailed, "MSL shim: the library lacks its hooks or entries");
  }
  *hooks = &kHooks;
  return std::shared_ptr<const backends::LoadedProgram>(
      std::make_shared<ShimProgram>(std::move(exe), library, std::move(entries), std::move(infos), barrier_timeout_));
}

}  // namespace accy::mslshim
