#include "backends/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "backends/cpu/thread_pool.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "compiler/tensor/errors.h"
#include "compiler/tensor/status_macros.h"
#include "compiler/tensor/strings.h"

namespace accy::cpu {

struct LoadedCode {
  executable::Executable exe;
  void* memory = nullptr;
  size_t mapped = 0;
  std::vector<x64::KernelFn> kernels;
  int threads = 1;

  ~LoadedCode() {
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

absl::Status invalidBuffer(std::string what) { return makeError(ErrorKind::kInvalidBuffer, what); }

bool overlaps(const std::byte* a, size_t an, const std::byte* b, size_t bn) {
  return a < b + bn && b < a + an;
}

}  // namespace

absl::StatusOr<LoadedExecutable> LoadedExecutable::load(executable::Executable exe, int threads) {
  ACCY_RETURN_IF_ERROR(executable::validateExecutable(exe));
  if (exe.target != "x86_64") {
    return makeError(ErrorKind::kUnimplemented, strCat("the CPU backend runs x86_64 code, not ", exe.target));
  }
  if (!hostSupports(exe.isa)) {
    return makeError(ErrorKind::kUnimplemented, strCat("this CPU cannot run code built for ", exe.isa));
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
  code->threads = std::max(1, threads);
  code->exe = std::move(exe);
  return LoadedExecutable(std::move(code));
}

const executable::Executable& LoadedExecutable::executable() const { return code_->exe; }

absl::Status LoadedExecutable::launch(absl::Span<const std::span<const std::byte>> inputs,
                                      absl::Span<const std::span<std::byte>> outputs) const {
  const executable::Executable& exe = code_->exe;
  if (inputs.size() != exe.inputs.size()) {
    return invalidBuffer(strCat("expected ", exe.inputs.size(), " input buffers, got ", inputs.size()));
  }
  if (outputs.size() != exe.outputs.size()) {
    return invalidBuffer(strCat("expected ", exe.outputs.size(), " output buffers, got ", outputs.size()));
  }
  auto check = [&](const char* what, size_t i, const tensor::Spec& spec, const std::byte* p,
                   size_t size) -> absl::Status {
    if (static_cast<int64_t>(size) != spec.byteSize()) {
      return invalidBuffer(strCat(what, " ", i, " (", tensor::specText(spec), ") needs ", spec.byteSize(),
                                  " bytes, got ", size));
    }
    const int64_t align = tensor::dtypeSize(spec.dtype);
    if (reinterpret_cast<uintptr_t>(p) % align != 0) {
      return invalidBuffer(strCat(what, " ", i, " is not aligned to ", align, " bytes"));
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    ACCY_RETURN_IF_ERROR(check("input", i, exe.inputs[i], inputs[i].data(), inputs[i].size()));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    ACCY_RETURN_IF_ERROR(check("output", i, exe.outputs[i], outputs[i].data(), outputs[i].size()));
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (overlaps(outputs[i].data(), outputs[i].size(), inputs[j].data(), inputs[j].size())) {
        return invalidBuffer(strCat("output ", i, " shares bytes with input ", j));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (overlaps(outputs[i].data(), outputs[i].size(), outputs[j].data(), outputs[j].size())) {
        return invalidBuffer(strCat("output ", i, " shares bytes with output ", j));
      }
    }
  }
  // Per-launch scratch for temporaries.
  std::unique_ptr<std::byte, decltype(&std::free)> scratch(nullptr, &std::free);
  if (exe.artifact_plan.scratch_bytes > 0) {
    scratch.reset(static_cast<std::byte*>(std::aligned_alloc(64, exe.artifact_plan.scratch_bytes)));
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
  const void* const* rt = x64::runtimeTable();
  ThreadPool& pool = ThreadPool::shared();
  for (size_t k = 0; k < code_->kernels.size(); ++k) {
    const executable::LaunchStep& step = exe.launch_plan.steps[k];
    const x64::KernelFn fn = code_->kernels[k];
    const int64_t extent = step.parallel_extent;
    const int parallelism = std::min(code_->threads, pool.size());
    if (extent <= 0 || parallelism <= 1) {
      fn(pointers.data(), 0, extent > 0 ? extent : 1, rt);
      continue;
    }
    const int64_t chunks = std::min<int64_t>(extent, int64_t{parallelism} * 4);
    pool.parallelFor(chunks, parallelism, [&](int64_t c) {
      const int64_t begin = extent * c / chunks;
      const int64_t end = extent * (c + 1) / chunks;
      fn(pointers.data(), begin, end, rt);
    });
  }
  return absl::OkStatus();
}

}  // namespace accy::cpu
