#include "tools/msl/shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "backends/buffer_checks.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/executable/artifact_json.h"
#include "compiler/codegen/msl/artifact.h"
#include "compiler/codegen/msl/compile.h"
#include "compiler/codegen/targets.h"

// Fiber switches told to the sanitizers, which otherwise take another
// stack for an overflow (ASan) or lose track of the running thread (TSan).
#if defined(__SANITIZE_ADDRESS__)
#define ACCY_SHIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ACCY_SHIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define ACCY_SHIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ACCY_SHIM_TSAN 1
#endif
#endif
#ifndef ACCY_SHIM_ASAN
#define ACCY_SHIM_ASAN 0
#endif
#ifndef ACCY_SHIM_TSAN
#define ACCY_SHIM_TSAN 0
#endif
#if ACCY_SHIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if ACCY_SHIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif

// A fiber switch without the signal-mask system call swapcontext makes on
// every switch (two thirds of a cooperative kernel's time in the shim):
// the callee-saved registers, MXCSR and the x87 control word pushed on
// the stack being left, the stack pointer saved to *save and `load`
// taken up. A new fiber's stack is laid out as if it had switched away
// just before accy_shim_fiber_entry, which calls accy_shim_fiber_start.
extern "C" void accy_shim_switch(void** save, void* load);
extern "C" void accy_shim_fiber_entry();
extern "C" [[noreturn]] void accy_shim_fiber_start();
asm(R"(
  .text
  .p2align 4
  .globl accy_shim_switch
  .hidden accy_shim_switch
  .type accy_shim_switch, @function
accy_shim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size accy_shim_switch, .-accy_shim_switch

  .p2align 4
  .globl accy_shim_fiber_entry
  .hidden accy_shim_fiber_entry
  .type accy_shim_fiber_entry, @function
accy_shim_fiber_entry:
  call accy_shim_fiber_start
  ud2
  .size accy_shim_fiber_entry, .-accy_shim_fiber_entry
)");

namespace accy::mslshim {

// A compiled and loaded library of one or more executables' kernels.
struct Library {
  explicit Library(void* h) : handle(h) {}
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() { dlclose(handle); }
  void* handle;
};

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

// A barrier a threadgroup's fibers meet at, reusable: each time `count`
// of them have arrived, its generation advances and they all go on.
struct FiberBarrier {
  explicit FiberBarrier(int n) : count(n) {}
  const int count;
  int arrived = 0;
  uint64_t generation = 0;
};

// A SIMD group's exchange: a slot per lane and a barrier of its own.
struct SimdGroup {
  explicit SimdGroup(int lanes) : barrier(lanes), slots(static_cast<size_t>(lanes)) {}
  FiberBarrier barrier;
  std::vector<uint64_t> slots;
};

class Fibers;

// What a running thread's hooks act on.
struct ThreadState {
  Fibers* fibers = nullptr;  // null: a kernel whose threads never meet
  FiberBarrier* group = nullptr;
  SimdGroup* simd = nullptr;
  unsigned lane = 0, lanes = 0;
  std::atomic<bool>* misuse = nullptr;  // set when a hook is called without a group
};
thread_local ThreadState* current = nullptr;

// A threadgroup's threads as fibers on the calling CPU thread, each with a
// stack of its own (a guard page below it), switching only where a thread
// waits at a barrier: a wait that completes the barrier goes on, others
// yield until its generation advances. When every unfinished fiber waits
// and no barrier can complete, the threads did not all reach a barrier:
// the group is stuck, and from then on every wait returns at once so the
// fibers run to their ends.
class Fibers {
 public:
  static constexpr size_t kStackBytes = 256 << 10;

  explicit Fibers(int count) : fibers_(static_cast<size_t>(count)) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    slot_bytes_ = kStackBytes + page;
    mapped_bytes_ = slot_bytes_ * fibers_.size();
    void* m = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    mapping_ = m == MAP_FAILED ? nullptr : static_cast<char*>(m);
    for (size_t t = 0; mapping_ != nullptr && t < fibers_.size(); ++t) {
      mprotect(mapping_ + t * slot_bytes_, page, PROT_NONE);  // stacks grow down onto the guard
      fibers_[t].stack = mapping_ + t * slot_bytes_ + page;
    }
  }
  ~Fibers() {
    if (mapping_ != nullptr) munmap(mapping_, mapped_bytes_);
  }
  Fibers(const Fibers&) = delete;
  Fibers& operator=(const Fibers&) = delete;

  bool mapped() const { return mapping_ != nullptr; }
  bool stuck() const { return stuck_; }

  // A new fiber's first code (from accy_shim_fiber_entry).
  [[noreturn]] static void enter() {
    start();
    __builtin_unreachable();  // a finished fiber is never resumed
  }

  // Runs body(t) on fiber t for every t until all have returned, with
  // `current` at states[t] while fiber t runs.
  void run(std::vector<ThreadState>& states, const std::function<void(int)>& body) {
    body_ = &body;
    states_ = &states;
    for (size_t t = 0; t < fibers_.size(); ++t) prepare(fibers_[t], static_cast<int>(t));
#if ACCY_SHIM_TSAN
    main_tsan_ = __tsan_get_current_fiber();
#endif
    Fibers* const outer = self_;
    self_ = this;
    size_t live = fibers_.size();
    while (live > 0) {
      bool ran = false;
      for (Fiber& f : fibers_) {
        if (f.done || (!stuck_ && f.waiting != nullptr && f.waiting->generation == f.generation)) continue;
        f.waiting = nullptr;
        ran = true;
        resume(f);
        if (f.done) --live;
      }
      if (!ran) stuck_ = true;  // every unfinished fiber waits at a barrier the others do not reach
    }
    self_ = outer;
#if ACCY_SHIM_TSAN
    for (Fiber& f : fibers_) __tsan_destroy_fiber(f.tsan);
#endif
  }

  // The running fiber waits at `b` (see the class comment).
  void wait(FiberBarrier& b) {
    if (stuck_) return;
    if (++b.arrived == b.count) {
      b.arrived = 0;
      ++b.generation;
      return;
    }
    running_->waiting = &b;
    running_->generation = b.generation;
    suspend(false);
  }

 private:
  struct Fiber {
    void* sp = nullptr;  // where accy_shim_switch left it
    char* stack = nullptr;
    int index = 0;
    bool done = false;
    const FiberBarrier* waiting = nullptr;
    uint64_t generation = 0;
    void* asan_fake_stack = nullptr;
    void* tsan = nullptr;
  };

  // Fiber f's stack, laid out as if it had switched away just before
  // accy_shim_fiber_entry (accy_shim_switch's frame: MXCSR and the x87
  // control word at their defaults, six registers, the return address).
  static void prepare(Fiber& f, int index) {
    f.index = index;
    auto* top = reinterpret_cast<uint64_t*>(f.stack + kStackBytes);  // 16-byte aligned
    uint64_t* sp = top - 8;
    sp[0] = 0x1F80u | (uint64_t{0x037F} << 32);  // MXCSR, then the x87 control word
    for (int r = 1; r <= 6; ++r) sp[r] = 0;       // r15, r14, r13, r12, rbx, rbp
    sp[7] = reinterpret_cast<uint64_t>(&accy_shim_fiber_entry);
    f.sp = sp;
#if ACCY_SHIM_TSAN
    f.tsan = __tsan_create_fiber(0);
#endif
  }

  // From the scheduler into fiber f, until it waits or returns.
  void resume(Fiber& f) {
    running_ = &f;
    ThreadState* const scheduler_state = current;
    current = &(*states_)[static_cast<size_t>(f.index)];
#if ACCY_SHIM_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, f.stack, kStackBytes);
#endif
#if ACCY_SHIM_TSAN
    __tsan_switch_to_fiber(f.tsan, 0);
#endif
    accy_shim_switch(&main_sp_, f.sp);
#if ACCY_SHIM_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
    current = scheduler_state;
    running_ = nullptr;
  }

  // From the running fiber back to the scheduler; `finished`: for good.
  void suspend(bool finished) {
    Fiber& f = *running_;
#if ACCY_SHIM_ASAN
    __sanitizer_start_switch_fiber(finished ? nullptr : &f.asan_fake_stack, main_stack_bottom_, main_stack_bytes_);
#endif
#if ACCY_SHIM_TSAN
    __tsan_switch_to_fiber(main_tsan_, 0);
#endif
    accy_shim_switch(&f.sp, main_sp_);
    // Resumed.
#if ACCY_SHIM_ASAN
    __sanitizer_finish_switch_fiber(f.asan_fake_stack, nullptr, nullptr);
#endif
    (void)finished;
  }

  static void start() {
    Fibers* const self = self_;
    Fiber& f = *self->running_;
#if ACCY_SHIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &self->main_stack_bottom_, &self->main_stack_bytes_);
#endif
    (*self->body_)(f.index);
    f.done = true;
    self->suspend(true);  // never resumed
  }

  static thread_local Fibers* self_;
  std::vector<Fiber> fibers_;
  char* mapping_ = nullptr;
  size_t slot_bytes_ = 0, mapped_bytes_ = 0;
  const std::function<void(int)>* body_ = nullptr;
  std::vector<ThreadState>* states_ = nullptr;
  void* main_sp_ = nullptr;  // the scheduler's, while a fiber runs
  Fiber* running_ = nullptr;
  bool stuck_ = false;
  const void* main_stack_bottom_ = nullptr;
  size_t main_stack_bytes_ = 0;
  void* main_tsan_ = nullptr;
};
thread_local Fibers* Fibers::self_ = nullptr;

}  // namespace
}  // namespace accy::mslshim

extern "C" void accy_shim_fiber_start() { accy::mslshim::Fibers::enter(); }

namespace accy::mslshim {
namespace {

void hookBarrier() {
  if (current->group == nullptr) {
    current->misuse->store(true);
    return;
  }
  barriers_met.fetch_add(1, std::memory_order_relaxed);
  current->fibers->wait(*current->group);
}

void hookShuffleDown(void* value, unsigned bytes, unsigned delta) {
  if (current->simd == nullptr || bytes > 8) {
    current->misuse->store(true);
    return;
  }
  shuffles_done.fetch_add(1, std::memory_order_relaxed);
  SimdGroup& s = *current->simd;
  std::memcpy(&s.slots[current->lane], value, bytes);
  current->fibers->wait(s.barrier);
  if (current->lane + delta < current->lanes) std::memcpy(value, &s.slots[current->lane + delta], bytes);
  current->fibers->wait(s.barrier);  // every lane has read before the slots are written again
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

// One executable's kernels as C++: each kernel's source in a namespace of
// its own, and an entry `accy_entry_<tag><k>` that calls it with its
// parameters in the order its first line describes.
struct Unit {
  std::string source;
  std::vector<msl::KernelInfo> infos;
};

absl::StatusOr<Unit> unitOf(const executable::Executable& exe, std::string_view tag) {
  if (exe.target != "msl") {
    return makeError(ErrorKind::kInvalidArgument, strCat("the MSL shim loads msl executables, not ", exe.target));
  }
  if (exe.launch_plan.steps.empty()) return makeError(ErrorKind::kInvalidArgument, "MSL executable has no kernels");
  Unit unit;
  for (size_t k = 0; k < exe.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& step = exe.launch_plan.steps[k];
    if (step.group_size < 1 || step.group_size > 1024) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("MSL kernel ", step.kernel, ": ", step.group_size, " threads per threadgroup (1 to 1024)"));
    }
    const std::string_view source = executable::kernelSource(exe, k);
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
    strAppend(&unit.source, "namespace accy_k", tag, k, " {\n", source, "}  // namespace accy_k", tag, k,
              "\nextern \"C\" void accy_entry_", tag, k, "(void* const* p, const uint* b) { accy_k", tag, k,
              "::", msl::kEntryName, "(", args, "); }\n");
    unit.infos.push_back(*std::move(info));
  }
  return unit;
}

// The entries of `exe`'s kernels in `library`, under `tag`; null when one
// is missing.
std::vector<Entry> entriesOf(const Library& library, std::string_view tag, size_t kernels) {
  std::vector<Entry> entries;
  for (size_t k = 0; k < kernels; ++k) {
    entries.push_back(reinterpret_cast<Entry>(dlsym(library.handle, strCat("accy_entry_", tag, k).c_str())));
    if (entries.back() == nullptr) return {};
  }
  return entries;
}

class ShimProgram final : public backends::LoadedProgram {
 public:
  ShimProgram(executable::Executable exe, std::shared_ptr<Library> library, std::vector<Entry> entries,
              std::vector<msl::KernelInfo> infos)
      : exe_(std::move(exe)), library_(std::move(library)), entries_(std::move(entries)), infos_(std::move(infos)) {}

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
      // Each threadgroup's threads as fibers, meeting at barriers. The
      // threadgroup arrays are the kernel's statics (the shim's
      // `threadgroup`): one threadgroup of one launch at a time.
      std::lock_guard<std::mutex> one_at_a_time(cooperative_);
      // The kernel's barriers, and another where a threadgroup's threads
      // finish (a thread that skips a barrier its group meets cannot pair
      // with the others' next one).
      FiberBarrier group(threads), finished(threads);
      Fibers fibers(threads);
      if (!fibers.mapped()) {
        return makeError(ErrorKind::kOutOfMemory,
                         strCat("MSL shim: kernel ", step.kernel, ": no memory for ", threads, " threads' stacks"));
      }
      cooperative_threads.fetch_add(threads, std::memory_order_relaxed);
      std::vector<std::unique_ptr<SimdGroup>> simd;
      for (int s = 0; s * 32 < threads; ++s) simd.push_back(std::make_unique<SimdGroup>(std::min(32, threads - 32 * s)));
      const uint32_t simd_count = static_cast<uint32_t>(simd.size());
      std::vector<ThreadState> states(static_cast<size_t>(threads));
      for (int t = 0; t < threads; ++t) {
        ThreadState& state = states[static_cast<size_t>(t)];
        state.fibers = &fibers;
        state.group = &group;
        state.simd = simd[static_cast<size_t>(t / 32)].get();
        state.lane = static_cast<unsigned>(t % 32);
        state.lanes = static_cast<unsigned>(std::min(32, threads - 32 * (t / 32)));
        state.misuse = &misuse;
      }
      fibers.run(states, [&](int t) {
        for (int64_t g = 0; g < groups; ++g) {
          const uint32_t builtins[7] = {static_cast<uint32_t>(t),      static_cast<uint32_t>(g),
                                        static_cast<uint32_t>(g * threads + t),
                                        32u,  // threads_per_simdgroup: the SIMD width
                                        simd_count, static_cast<uint32_t>(t / 32), static_cast<uint32_t>(t % 32)};
          entry(pointers.data(), builtins);
          fibers.wait(finished);  // the threadgroup's memory passes to the next
        }
      });
      if (fibers.stuck()) {
        return makeError(ErrorKind::kLaunchFailed,
                         strCat("MSL shim: kernel ", step.kernel, ": threads of a threadgroup did not all reach a "
                                "barrier or SIMD-group operation (every thread left was waiting at one)"));
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
  std::shared_ptr<Library> library_;  // shared by the executables compiled with it (ShimBackend::preload)
  std::vector<Entry> entries_;
  std::vector<msl::KernelInfo> infos_;
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

absl::StatusOr<std::shared_ptr<Library>> ShimBackend::compileLibrary(const std::string& units) const {
  const std::string clang = clangPath();
  if (clang.empty()) return makeError(ErrorKind::kUnimplemented, strCat("MSL shim: ", info_.unavailable_reason));
  static std::atomic<int> counter{0};
  const std::string stem = strCat(work_dir_, "/msl", getpid(), "_", counter++);
  {
    std::ofstream header(strCat(work_dir_, "/metal_stdlib"), std::ios::trunc);
    header << kMetalStdlib;
    std::ofstream out(stem + ".cc", std::ios::trunc);
    out << "#include <metal_stdlib>\n" << units;
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
  void* handle = dlopen((stem + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  *compile_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++*compiles_;
  if (handle == nullptr) {
    return makeError(ErrorKind::kCompileFailed, strCat("MSL shim: cannot load ", stem, ".so: ", dlerror()));
  }
  for (const char* ext : {".cc", ".o", ".so", ".log"}) std::remove((stem + ext).c_str());
  auto library = std::make_shared<Library>(handle);
  auto** hooks = static_cast<const Hooks**>(dlsym(handle, "accy_shim_hooks"));
  if (hooks == nullptr) return makeError(ErrorKind::kCompileFailed, "MSL shim: the library lacks its hooks");
  *hooks = &kHooks;
  return library;
}

absl::Status ShimBackend::preload(std::span<const executable::Executable> exes, size_t per_library) const {
  per_library = std::max<size_t>(per_library, 1);
  for (size_t first = 0; first < exes.size(); first += per_library) {
    std::string units;
    std::vector<std::pair<std::string, std::string>> keys_and_tags;  // the untagged source, the tag
    for (size_t e = first; e < std::min(exes.size(), first + per_library); ++e) {
      absl::StatusOr<Unit> key = unitOf(exes[e], "");
      if (!key.ok()) continue;  // refused by load, alone
      const std::string tag = strCat("p", e - first, "_");
      absl::StatusOr<Unit> tagged = unitOf(exes[e], tag);
      units += tagged->source;
      keys_and_tags.emplace_back(std::move(key->source), tag);
    }
    if (keys_and_tags.empty()) continue;
    absl::StatusOr<std::shared_ptr<Library>> library = compileLibrary(units);
    if (!library.ok()) continue;  // each compiled (and refused, by name) when loaded
    std::lock_guard<std::mutex> lock(preloaded_->mutex);
    for (auto& [key, tag] : keys_and_tags) preloaded_->libraries[std::move(key)] = {*library, tag};
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> ShimBackend::load(executable::Executable exe) const {
  if (clangPath().empty()) return makeError(ErrorKind::kUnimplemented, strCat("MSL shim: ", info_.unavailable_reason));
  absl::StatusOr<Unit> unit = unitOf(exe, "");
  if (!unit.ok()) return unit.status();
  ++*loads_;
  std::shared_ptr<Library> library;
  std::string tag;
  {
    std::lock_guard<std::mutex> lock(preloaded_->mutex);
    if (auto it = preloaded_->libraries.find(unit->source); it != preloaded_->libraries.end()) {
      library = it->second.first;
      tag = it->second.second;
      preloaded_->libraries.erase(it);  // loaded once; a second load compiles afresh
    }
  }
  if (library == nullptr) {
    absl::StatusOr<std::shared_ptr<Library>> compiled = compileLibrary(unit->source);
    if (!compiled.ok()) return compiled.status();
    library = *std::move(compiled);
  }
  std::vector<Entry> entries = entriesOf(*library, tag, unit->infos.size());
  if (entries.empty()) return makeError(ErrorKind::kCompileFailed, "MSL shim: the library lacks the kernels' entries");
  return std::shared_ptr<const backends::LoadedProgram>(
      std::make_shared<ShimProgram>(std::move(exe), std::move(library), std::move(entries), std::move(unit->infos)));
}

}  // namespace accy::mslshim
