#include "backends/cpu/cpu_program.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <mutex>

#include <cstdlib>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "backends/buffer_checks.h"
#include "backends/cpu/thread_pool.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "base/errors.h"
#include "base/stop.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::cpu {

// Scratch blocks kept between launches: as many as launches ran at once,
// up to this many.
constexpr size_t kKeptScratch = 4;

struct LoadedCode {
  executable::Executable exe;
  void* memory = nullptr;
  size_t mapped = 0;
  std::vector<x64::KernelFn> kernels;
  int threads = 1;
  mutable std::mutex scratch_mu;
  mutable std::vector<std::byte*> kept_scratch;  // free blocks of exe's scratch size

  // A block for one launch: a kept one, else a fresh one (null when the
  // system refuses it).
  std::byte* takeScratch() const {
    {
      std::lock_guard<std::mutex> lock(scratch_mu);
      if (!kept_scratch.empty()) {
        std::byte* b = kept_scratch.back();
        kept_scratch.pop_back();
        return b;
      }
    }
    return static_cast<std::byte*>(std::aligned_alloc(64, (exe.artifact_plan.scratch_bytes + 63) / 64 * 64));
  }
  void giveScratch(std::byte* b) const {
    if (b == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(scratch_mu);
      if (kept_scratch.size() < kKeptScratch) {
        kept_scratch.push_back(b);
        return;
      }
    }
    std::free(b);
  }

  ~LoadedCode() {
    for (std::byte* b : kept_scratch) std::free(b);
    if (memory != nullptr) munmap(memory, mapped);
  }
};

namespace {

bool hostSupports(const std::string& isa) {
#if defined(__x86_64__)
  const x64::Isa host = x64::detectIsa();
  if (isa == "avx512") return host == x64::Isa::kAvx512;
  if (isa == "avx2+fma") return host != x64::Isa::kSse41;
  return isa == "sse4.1";
#else
  (void)isa;
  return false;
#endif
}

// With ACCY_PERF_MAP set (to anything but 0), every loaded kernel is
// named in /tmp/perf-<pid>.map, the file `perf report` reads to name JIT
// code: "accy:<kernel>" over the kernel's bytes.
void announceToPerf(const void* mem, const executable::Executable& exe) {
  const char* on = std::getenv("ACCY_PERF_MAP");
  if (on == nullptr || on[0] == '\0' || std::strcmp(on, "0") == 0) return;
  std::vector<std::pair<uint64_t, const executable::LaunchStep*>> starts;
  for (const executable::LaunchStep& s : exe.launch_plan.steps) starts.emplace_back(s.entry_offset, &s);
  std::sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  FILE* f = std::fopen(strCat("/tmp/perf-", getpid(), ".map").c_str(), "a");
  if (f == nullptr) return;
  for (size_t k = 0; k < starts.size(); ++k) {
    const uint64_t end = k + 1 < starts.size() ? starts[k + 1].first : exe.code.size();
    std::fprintf(f, "%" PRIxPTR " %" PRIx64 " accy:%s\n",
                 reinterpret_cast<uintptr_t>(static_cast<const uint8_t*>(mem) + starts[k].first), end - starts[k].first,
                 starts[k].second->kernel.c_str());
  }
  std::fclose(f);
}

}  // namespace

absl::StatusOr<LoadedExecutable> LoadedExecutable::load(executable::Executable exe, int threads) {
  ACCY_RETURN_IF_ERROR(executable::validateExecutable(exe));
  if (exe.target != "x86_64") {
    return makeError(ErrorKind::kUnimplemented, strCat("the CPU backend runs x86_64 code, not ", exe.target));
  }
  if (!hostSupports(exe.isa)) {
#if defined(__x86_64__)
    return makeError(ErrorKind::kUnimplemented, strCat("this CPU cannot run code built for ", exe.isa, " (it runs ",
                                                       x64::isaName(x64::detectIsa()), ")"));
#else
    return makeError(ErrorKind::kUnimplemented, strCat("this CPU cannot run code built for ", exe.isa));
#endif
  }
  auto code = std::make_shared<LoadedCode>();
  const size_t page = 4096;
  code->mapped = (exe.code.size() + page - 1) / page * page;
  void* mem = mmap(nullptr, code->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return makeError(ErrorKind::kOutOfMemory, strCat("mmap of ", code->mapped, " bytes for code failed"));
  }
  code->memory = mem;
  std::memcpy(mem, exe.code.data(), exe.code.size());
  if (mprotect(mem, code->mapped, PROT_READ | PROT_EXEC) != 0) {
    return makeError(ErrorKind::kOutOfMemory, "mprotect of generated code failed");
  }
  for (const executable::LaunchStep& s : exe.launch_plan.steps) {
    code->kernels.push_back(
        reinterpret_cast<x64::KernelFn>(static_cast<uint8_t*>(mem) + s.entry_offset));
  }
  announceToPerf(mem, exe);
  code->threads = std::max(1, threads);
  code->exe = std::move(exe);
  return LoadedExecutable(std::move(code));
}

const executable::Executable& LoadedExecutable::executable() const { return code_->exe; }

absl::Status LoadedExecutable::launch(absl::Span<const std::span<const std::byte>> inputs,
                                      absl::Span<const std::span<std::byte>> outputs) const {
  ACCY_RETURN_IF_ERROR(backends::checkLaunchBuffers(code_->exe, inputs, outputs));
  return launchTrusted(inputs, outputs);
}

namespace {

// Runs every kernel of `code` on the buffer table `pointers` (one entry per
// buffer of the artifact plan), each parallel loop split over the pool.
absl::Status runKernels(const LoadedCode& code, void* const* pointers) {
  const executable::Executable& exe = code.exe;
  const void* const* rt = x64::runtimeTable();
  ThreadPool& pool = ThreadPool::shared();
  // A caller that may ask the launch to stop (base/stop.h): asked before
  // each kernel and each chunk, the chunks then small enough (about 2^20
  // iteration points) that a stop takes effect within milliseconds.
  const StopCheck* stop = stopCheck();
  std::mutex stop_mu;
  absl::Status stopped;
  std::atomic<bool> stopping{false};
  auto shouldStop = [&]() {
    if (stopping.load(std::memory_order_relaxed)) return true;
    absl::Status st = (*stop)();
    if (st.ok()) return false;
    std::lock_guard<std::mutex> lock(stop_mu);
    if (stopped.ok()) stopped = std::move(st);
    stopping.store(true);
    return true;
  };
  for (size_t k = 0; k < code.kernels.size(); ++k) {
    const executable::LaunchStep& step = exe.launch_plan.steps[k];
    const x64::KernelFn fn = code.kernels[k];
    const int64_t extent = step.parallel_extent;
    const int parallelism = std::min(code.threads, pool.size());
    if (stop != nullptr && shouldStop()) break;
    if (extent <= 0 || (parallelism <= 1 && stop == nullptr)) {
      fn(pointers, 0, extent > 0 ? extent : 1, rt);
      continue;
    }
    int64_t chunks = std::min<int64_t>(extent, int64_t{parallelism} * 4);
    if (stop != nullptr) chunks = std::clamp<int64_t>(step.work > 0 ? step.work >> 20 : 1024, chunks, extent);
    auto chunk = [&](int64_t c) {
      if (stop != nullptr && shouldStop()) return;
      const int64_t begin = extent * c / chunks;
      const int64_t end = extent * (c + 1) / chunks;
      fn(pointers, begin, end, rt);
    };
    if (parallelism <= 1) {
      for (int64_t c = 0; c < chunks; ++c) chunk(c);
    } else {
      pool.parallelFor(chunks, parallelism, chunk);
    }
  }
  if (stopping.load()) return stopped;
  return absl::OkStatus();
}

// A launch set up once: the buffer table with the temporaries' scratch in
// place, the caller's buffers patched in as they are bound.
class CpuBoundLaunch final : public backends::BoundLaunch {
 public:
  explicit CpuBoundLaunch(std::shared_ptr<const LoadedCode> code) : code_(std::move(code)) {
    const executable::Executable& exe = code_->exe;
    input_at_.assign(exe.inputs.size(), -1);
    output_at_.assign(exe.outputs.size(), -1);
    if (exe.artifact_plan.scratch_bytes > 0) scratch_ = code_->takeScratch();
    for (const executable::BufferPlan& b : exe.artifact_plan.buffers) {
      switch (b.role) {
        case choir::BufferRole::kInput:
          input_at_[b.io_index] = static_cast<int32_t>(pointers_.size());
          pointers_.push_back(nullptr);
          break;
        case choir::BufferRole::kOutput:
          output_at_[b.io_index] = static_cast<int32_t>(pointers_.size());
          pointers_.push_back(nullptr);
          break;
        case choir::BufferRole::kTemp:
          pointers_.push_back(scratch_ != nullptr ? scratch_ + b.scratch_offset : nullptr);
          break;
      }
    }
  }
  ~CpuBoundLaunch() override { code_->giveScratch(scratch_); }
  // An input the kernels never read has no entry (-1).
  void bindInput(size_t i, std::span<const std::byte> buffer) override {
    if (input_at_[i] >= 0) pointers_[input_at_[i]] = const_cast<std::byte*>(buffer.data());
  }
  void bindOutput(size_t k, std::span<std::byte> buffer) override {
    if (output_at_[k] >= 0) pointers_[output_at_[k]] = buffer.data();
  }
  absl::Status run() override {
    if (code_->exe.artifact_plan.scratch_bytes > 0 && scratch_ == nullptr) {
      return makeError(ErrorKind::kOutOfMemory, strCat("scratch of ", code_->exe.artifact_plan.scratch_bytes, " bytes"));
    }
    return runKernels(*code_, pointers_.data());
  }

 private:
  std::shared_ptr<const LoadedCode> code_;
  std::byte* scratch_ = nullptr;
  absl::InlinedVector<void*, 16> pointers_;
  std::vector<int32_t> input_at_, output_at_;  // each buffer's entry in pointers_
};

}  // namespace

absl::Status LoadedExecutable::launchTrusted(absl::Span<const std::span<const std::byte>> inputs,
                                             absl::Span<const std::span<std::byte>> outputs) const {
  const executable::Executable& exe = code_->exe;
  // This launch's scratch for temporaries, handed back for the next.
  auto give = [this](std::byte* b) { code_->giveScratch(b); };
  std::unique_ptr<std::byte, decltype(give)> scratch(nullptr, give);
  if (exe.artifact_plan.scratch_bytes > 0) {
    scratch.reset(code_->takeScratch());
    if (!scratch) {
      return makeError(ErrorKind::kOutOfMemory,
                       strCat("scratch of ", exe.artifact_plan.scratch_bytes, " bytes"));
    }
  }
  absl::InlinedVector<void*, 16> pointers;
  for (const executable::BufferPlan& b : exe.artifact_plan.buffers) {
    switch (b.role) {
      case choir::BufferRole::kInput:
        pointers.push_back(const_cast<std::byte*>(inputs[b.io_index].data()));
        break;
      case choir::BufferRole::kOutput:
        pointers.push_back(outputs[b.io_index].data());
        break;
      case choir::BufferRole::kTemp:
        pointers.push_back(scratch.get() + b.scratch_offset);
        break;
    }
  }
  return runKernels(*code_, pointers.data());
}

std::unique_ptr<backends::BoundLaunch> LoadedExecutable::bind() const {
  return std::make_unique<CpuBoundLaunch>(code_);
}

}  // namespace accy::cpu
