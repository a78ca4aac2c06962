#include "backends/cuda/cuda_program.h"

#include <chrono>
#include <thread>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>

#include "backends/buffer_checks.h"
#include "base/errors.h"
#include "base/stop.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::cuda {

// Waits for `stream`'s work, at most `limit` (0: no limit): cuStreamQuery
// in a loop, yielding the CPU for the first 2 ms (short kernels answer at
// once), then sleeping 100 us between queries. CUDA_ERROR_NOT_READY when
// the limit passed; cuStreamSynchronize where the driver lacks cuStreamQuery.
static CUresult waitForStream(const CudaFunctions& cu, CUstream stream, std::chrono::milliseconds limit) {
  if (cu.cuStreamQuery == nullptr) return cu.cuStreamSynchronize(stream);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const CUresult r = cu.cuStreamQuery(stream);
    if (r != CUDA_ERROR_NOT_READY) return r;
    const auto waited = std::chrono::steady_clock::now() - start;
    if (limit.count() > 0 && waited > limit) return CUDA_ERROR_NOT_READY;
    if (waited < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// Everything one launch needs, reusable launch after launch: the buffers
// never change size. Destroyed with the device's context current.
struct CudaProgram::LaunchResources {
  explicit LaunchResources(const CudaDevice* d) : device(d) {}
  LaunchResources(const LaunchResources&) = delete;
  LaunchResources& operator=(const LaunchResources&) = delete;
  ~LaunchResources() {
    const CudaFunctions& cu = device->cu();
    ContextScope scope(*device);
    if (!scope.status().ok()) return;  // the context is gone; so is what it held
    if (stream != nullptr) cu.cuStreamSynchronize(stream);
    for (CUdeviceptr p : buffers) {
      if (p != 0) cu.cuMemFree(p);
    }
    if (start != nullptr) cu.cuEventDestroy(start);
    if (end != nullptr) cu.cuEventDestroy(end);
    if (stream != nullptr) cu.cuStreamDestroy(stream);
  }

  const CudaDevice* device;
  CUstream stream = nullptr;
  CUevent start = nullptr, end = nullptr;  // around the kernels, for launchTimed
  std::vector<CUdeviceptr> buffers;        // one per artifact-plan buffer
  std::vector<void*> args;                 // cuLaunchKernel's parameters: &buffers[b]
};

namespace {

absl::Status invalidProgram(std::string what) { return makeError(ErrorKind::kInvalidProgram, what); }
absl::Status unsupported(std::string what) { return makeError(ErrorKind::kUnimplemented, what); }

// The classic limit on a launch's parameters (drivers from CUDA 12.1 allow
// more on Volta and newer; the executable's buffers fit the older one).
constexpr size_t kMaxParameterBytes = 4096;
// Room for the JIT's error and info logs.
constexpr size_t kJitLogBytes = 64 * 1024;

absl::Status checkExecutable(const executable::Executable& exe, const DeviceLimits& limits) {
  for (size_t i = 0; i < exe.code.size(); ++i) {
    if (exe.code[i] == 0) {
      return invalidProgram(strCat("the PTX text has a NUL byte at offset ", i, " (PTX code is NUL-free text)"));
    }
  }
  const std::vector<executable::BufferPlan>& plans = exe.artifact_plan.buffers;
  for (size_t b = 0; b < plans.size(); ++b) {
    if (plans[b].bytes < 0) return invalidProgram(strCat("executable: buffer ", b, " has a negative size"));
  }
  if (plans.size() * sizeof(CUdeviceptr) > kMaxParameterBytes) {
    return unsupported(strCat("the executable has ", plans.size(), " buffers; a CUDA launch passes at most ",
                              kMaxParameterBytes / sizeof(CUdeviceptr), " (", kMaxParameterBytes,
                              " bytes of u64 parameters)"));
  }
  for (size_t k = 0; k < exe.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = exe.launch_plan.steps[k];
    const std::string what = strCat("kernel ", k, " (", s.kernel, ")");
    if (s.kernel.empty()) return invalidProgram(strCat("kernel ", k, " has no name"));
    if (s.group_size < 1) {
      return invalidProgram(strCat(what, " has group_size ", s.group_size, "; a ptx launch step runs blocks of 1 to ",
                                   limits.max_threads_per_block, " threads"));
    }
    if (s.group_size > static_cast<int64_t>(limits.max_threads_per_block)) {
      return unsupported(strCat(what, " runs blocks of ", s.group_size, " threads; this device allows ",
                                limits.max_threads_per_block));
    }
    if (std::max<int64_t>(s.parallel_extent, 1) > static_cast<int64_t>(limits.max_grid_x)) {
      return unsupported(
          strCat(what, " launches ", s.parallel_extent, " blocks; this device allows ", limits.max_grid_x));
    }
  }
  return absl::OkStatus();
}

// The log's text up to its NUL, without trailing white space.
std::string logText(const std::vector<char>& log) {
  std::string text(log.data(), strnlen(log.data(), log.size()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

CudaProgram::CudaProgram(std::shared_ptr<const CudaDevice> device, executable::Executable exe)
    : device_(std::move(device)), exe_(std::move(exe)) {}

CudaProgram::~CudaProgram() {
  idle_.clear();
  if (module_ != nullptr) {
    ContextScope scope(*device_);
    if (scope.status().ok()) device_->cu().cuModuleUnload(module_);
  }
}

absl::StatusOr<std::shared_ptr<const CudaProgram>> CudaProgram::load(std::shared_ptr<const CudaDevice> device,
                                                                     executable::Executable exe) {
  ACCY_RETURN_IF_ERROR(executable::validateExecutable(exe));
  if (exe.target != "ptx") {
    return unsupported(strCat("the CUDA backend runs ptx code, not ", exe.target));
  }
  ACCY_RETURN_IF_ERROR(checkExecutable(exe, device->limits()));

  std::shared_ptr<CudaProgram> program(new CudaProgram(device, std::move(exe)));
  const executable::Executable& e = program->exe_;
  if (e.launch_plan.steps.empty()) return std::shared_ptr<const CudaProgram>(std::move(program));

  const CudaFunctions& cu = device->cu();
  ContextScope scope(*device);
  ACCY_RETURN_IF_ERROR(scope.status());

  // The text, NUL-terminated as the driver reads it.
  const std::string text(e.code.begin(), e.code.end());
  std::vector<char> error_log(kJitLogBytes, '\0'), info_log(kJitLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(error_log.size() - 1)),
                    info_log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(info_log.size() - 1))};
  CUmodule module = nullptr;
  const CUresult loaded = cu.cuModuleLoadDataEx(&module, text.c_str(), 4, options, values);
  if (loaded != CUDA_SUCCESS) {
    const absl::Status error = cudaError(loaded, "cuModuleLoadDataEx", __FILE__, __LINE__, &cu);
    std::string log = logText(error_log);
    if (log.empty()) log = logText(info_log);
    return makeError(errorKind(error),
                     strCat("the driver's JIT refused the PTX module: ", messageWithoutKind(error),
                            log.empty() ? std::string("; it wrote no log") : strCat("; its log:\n", log)));
  }
  program->module_ = module;  // unloaded by ~CudaProgram from here on

  std::map<std::string, CUfunction> found;
  for (size_t k = 0; k < e.launch_plan.steps.size(); ++k) {
    const executable::LaunchStep& s = e.launch_plan.steps[k];
    auto it = found.find(s.kernel);
    if (it == found.end()) {
      CUfunction f = nullptr;
      const CUresult r = cu.cuModuleGetFunction(&f, module, s.kernel.c_str());
      if (r == CUDA_ERROR_NOT_FOUND) {
        return invalidProgram(strCat("kernel ", k, " (", s.kernel, "): the PTX module has no entry named ", s.kernel));
      }
      if (r != CUDA_SUCCESS) return cudaError(r, "cuModuleGetFunction", __FILE__, __LINE__, &cu);
      it = found.emplace(s.kernel, f).first;
    }
    program->functions_.push_back(it->second);
  }
  return std::shared_ptr<const CudaProgram>(std::move(program));
}

absl::StatusOr<std::unique_ptr<CudaProgram::LaunchResources>> CudaProgram::makeResources() const {
  const CudaFunctions& cu = device_->cu();
  // Frees whatever was made if a step below fails.
  auto r = std::make_unique<LaunchResources>(device_.get());
  ContextScope scope(*device_);
  ACCY_RETURN_IF_ERROR(scope.status());
  ACCY_CU_CALL(cu, cuStreamCreate, &r->stream, CU_STREAM_NON_BLOCKING);
  ACCY_CU_CALL(cu, cuEventCreate, &r->start, CU_EVENT_DEFAULT);
  ACCY_CU_CALL(cu, cuEventCreate, &r->end, CU_EVENT_DEFAULT);
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;
  r->buffers.assign(plans.size(), 0);
  for (size_t b = 0; b < plans.size(); ++b) {
    // CUDA has no empty allocations; an empty buffer still gets an address.
    ACCY_CU_CALL(cu, cuMemAlloc, &r->buffers[b], static_cast<size_t>(std::max<int64_t>(plans[b].bytes, 1)));
  }
  for (CUdeviceptr& p : r->buffers) r->args.push_back(&p);
  return r;
}

absl::Status CudaProgram::enqueueSteps(void** args, CUstream stream) const {
  const CudaFunctions& cu = device_->cu();
  for (size_t k = 0; k < functions_.size(); ++k) {
    const executable::LaunchStep& s = exe_.launch_plan.steps[k];
    const unsigned int blocks = static_cast<unsigned int>(std::max<int64_t>(s.parallel_extent, 1));
    const unsigned int threads = static_cast<unsigned int>(s.group_size);
    ACCY_CU_CALL(cu, cuLaunchKernel, functions_[k], blocks, 1, 1, threads, 1, 1, 0, stream, args, nullptr);
  }
  return absl::OkStatus();
}

absl::Status CudaProgram::enqueueOnDevice(absl::Span<const CUdeviceptr> buffers, CUstream stream) const {
  if (buffers.size() != exe_.artifact_plan.buffers.size()) {
    return makeError(ErrorKind::kInvalidBuffer, strCat("cuda: ", buffers.size(), " device buffers for a program of ",
                                                       exe_.artifact_plan.buffers.size()));
  }
  ContextScope scope(*device_);
  ACCY_RETURN_IF_ERROR(scope.status());
  std::vector<CUdeviceptr> addresses(buffers.begin(), buffers.end());
  std::vector<void*> args;
  for (CUdeviceptr& a : addresses) args.push_back(&a);
  return enqueueSteps(args.empty() ? nullptr : args.data(), stream);
}

absl::Status CudaProgram::run(LaunchResources& r, absl::Span<const std::span<const std::byte>> inputs,
                              absl::Span<const std::span<std::byte>> outputs, float* kernel_ms) const {
  const CudaFunctions& cu = device_->cu();
  ContextScope scope(*device_);
  ACCY_RETURN_IF_ERROR(scope.status());
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;
  // Everything is queued on the stream; on any failure the stream is still
  // drained before returning, so no copy touches the caller's memory after.
  auto enqueue = [&]() -> absl::Status {
    for (size_t b = 0; b < plans.size(); ++b) {
      const size_t bytes = static_cast<size_t>(plans[b].bytes);
      if (bytes == 0) continue;
      switch (plans[b].role) {
        case choir::BufferRole::kInput:
          ACCY_CU_CALL(cu, cuMemcpyHtoDAsync, r.buffers[b], inputs[plans[b].io_index].data(), bytes, r.stream);
          break;
        case choir::BufferRole::kOutput:
          ACCY_CU_CALL(cu, cuMemcpyHtoDAsync, r.buffers[b], outputs[plans[b].io_index].data(), bytes, r.stream);
          break;
        case choir::BufferRole::kTemp:
          break;
      }
    }
    if (kernel_ms != nullptr) ACCY_CU_CALL(cu, cuEventRecord, r.start, r.stream);
    ACCY_RETURN_IF_ERROR(enqueueSteps(r.args.empty() ? nullptr : r.args.data(), r.stream));
    if (kernel_ms != nullptr) ACCY_CU_CALL(cu, cuEventRecord, r.end, r.stream);
    for (size_t b = 0; b < plans.size(); ++b) {
      const size_t bytes = static_cast<size_t>(plans[b].bytes);
      if (plans[b].role == choir::BufferRole::kOutput && bytes > 0) {
        ACCY_CU_CALL(cu, cuMemcpyDtoHAsync, outputs[plans[b].io_index].data(), r.buffers[b], bytes, r.stream);
      }
    }
    return absl::OkStatus();
  };
  const absl::Status queued = enqueue();
  const absl::Status synced = waitFor(r.stream);
  ACCY_RETURN_IF_ERROR(device_->health());  // a hung launch: the device is lost
  ACCY_RETURN_IF_ERROR(queued);
  ACCY_RETURN_IF_ERROR(synced);
  if (kernel_ms != nullptr) ACCY_CU_CALL(cu, cuEventElapsedTime, kernel_ms, r.start, r.end);
  return absl::OkStatus();
}

absl::Status CudaProgram::waitFor(CUstream stream) const {
  const CudaFunctions& cu = device_->cu();
  host_waits_.fetch_add(1, std::memory_order_relaxed);
  const CUresult synced = waitForStream(cu, stream, device_->launchTimeout());
  if (synced == CUDA_ERROR_NOT_READY) {
    absl::Status hung = makeError(ErrorKind::kLaunchFailed,
                                  strCat("cuda: a launch did not finish within ", device_->launchTimeout().count(),
                                         " ms (the launch timeout); the device is marked lost"));
    device_->markLost(hung);
    return hung;
  }
  if (synced != CUDA_SUCCESS) return cudaError(synced, "cuStreamSynchronize", __FILE__, __LINE__, &cu);
  return absl::OkStatus();
}

std::optional<absl::Status> CudaProgram::launchRepeated(const Repeat& repeat,
                                                        absl::Span<const std::span<const std::byte>> inputs,
                                                        absl::Span<const std::span<std::byte>> outputs) const {
  std::optional<backends::RepeatBuffers> buffers =
      backends::repeatBuffers(exe_, repeat.steps, repeat.carries, repeat.xs, inputs, outputs);
  if (!buffers.has_value() || functions_.empty()) return std::nullopt;
  return withResources(
      [&](LaunchResources& r) { return runRepeated(r, repeat, inputs, outputs, buffers->in, buffers->out); });
}

absl::Status CudaProgram::runRepeated(LaunchResources& r, const Repeat& repeat,
                                      absl::Span<const std::span<const std::byte>> inputs,
                                      absl::Span<const std::span<std::byte>> outputs, const std::vector<int>& in,
                                      const std::vector<int>& out) const {
  const CudaFunctions& cu = device_->cu();
  ContextScope scope(*device_);
  ACCY_RETURN_IF_ERROR(scope.status());
  const size_t nc = repeat.carries, nx = repeat.xs, ny = outputs.size() - nc;
  const std::vector<executable::BufferPlan>& plans = exe_.artifact_plan.buffers;
  // The whole xs and ys on the device, for this launch (freed once the
  // stream is drained).
  struct Whole {
    const CudaFunctions& cu;
    std::vector<CUdeviceptr> p;
    ~Whole() {
      for (CUdeviceptr d : p) cu.cuMemFree(d);
    }
  } whole{cu, {}};
  auto enqueue = [&]() -> absl::Status {
    for (size_t j = 0; j < nx + ny; ++j) {
      const size_t bytes = j < nx ? inputs[nc + j].size() : outputs[nc + j - nx].size();
      CUdeviceptr d = 0;
      ACCY_CU_CALL(cu, cuMemAlloc, &d, std::max<size_t>(bytes, 1));
      whole.p.push_back(d);
      if (j < nx && bytes > 0) ACCY_CU_CALL(cu, cuMemcpyHtoDAsync, d, inputs[nc + j].data(), bytes, r.stream);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if ((i >= nc && i < nc + nx) || inputs[i].empty()) continue;
      ACCY_CU_CALL(cu, cuMemcpyHtoDAsync, r.buffers[in[i]], inputs[i].data(), inputs[i].size(), r.stream);
    }
    int64_t queued = 0;
    std::vector<CUdeviceptr> step(r.buffers.begin(), r.buffers.end());
    std::vector<void*> args;
    for (CUdeviceptr& a : step) args.push_back(&a);
    for (int64_t t = 0; t < repeat.steps; ++t) {
      // Odd steps read the carries' output buffers and write their inputs.
      for (size_t c = 0; c < nc; ++c) {
        step[in[c]] = r.buffers[t % 2 == 0 ? in[c] : out[c]];
        step[out[c]] = r.buffers[t % 2 == 0 ? out[c] : in[c]];
      }
      for (size_t j = 0; j < nx; ++j) step[in[nc + j]] = whole.p[j] + static_cast<CUdeviceptr>(t * plans[in[nc + j]].bytes);
      for (size_t y = 0; y < ny; ++y) {
        step[out[nc + y]] = whole.p[nx + y] + static_cast<CUdeviceptr>(t * plans[out[nc + y]].bytes);
      }
      ACCY_RETURN_IF_ERROR(enqueueSteps(args.data(), r.stream));
      queued += static_cast<int64_t>(functions_.size());
      if (queued >= kStepLaunchesPerWait && t + 1 < repeat.steps) {
        ACCY_RETURN_IF_ERROR(waitFor(r.stream));  // bounded queue; the stop check between
        ACCY_RETURN_IF_ERROR(checkStop());
        queued = 0;
      }
    }
    // Step t wrote the carries' output buffers when t is even.
    const bool in_output = (repeat.steps - 1) % 2 == 0;
    for (size_t c = 0; c < nc; ++c) {
      if (outputs[c].empty()) continue;
      ACCY_CU_CALL(cu, cuMemcpyDtoHAsync, outputs[c].data(), r.buffers[in_output ? out[c] : in[c]], outputs[c].size(),
                   r.stream);
    }
    for (size_t y = 0; y < ny; ++y) {
      if (outputs[nc + y].empty()) continue;
      ACCY_CU_CALL(cu, cuMemcpyDtoHAsync, outputs[nc + y].data(), whole.p[nx + y], outputs[nc + y].size(), r.stream);
    }
    return absl::OkStatus();
  };
  const absl::Status queued = enqueue();
  // Drained whatever happened: no copy touches the caller's memory after.
  const absl::Status synced = waitFor(r.stream);
  ACCY_RETURN_IF_ERROR(device_->health());
  ACCY_RETURN_IF_ERROR(queued);
  return synced;
}

absl::Status CudaProgram::launch(absl::Span<const std::span<const std::byte>> inputs,
                                 absl::Span<const std::span<std::byte>> outputs) const {
  return launchTimed(inputs, outputs, nullptr);
}

absl::Status CudaProgram::launchTimed(absl::Span<const std::span<const std::byte>> inputs,
                                      absl::Span<const std::span<std::byte>> outputs, float* kernel_ms) const {
  ACCY_RETURN_IF_ERROR(backends::checkLaunchBuffers(exe_, inputs, outputs));
  if (kernel_ms != nullptr) *kernel_ms = 0.0f;
  if (functions_.empty()) return absl::OkStatus();
  return withResources([&](LaunchResources& r) { return run(r, inputs, outputs, kernel_ms); });
}

absl::Status CudaProgram::withResources(const std::function<absl::Status(LaunchResources&)>& work) const {
  ACCY_RETURN_IF_ERROR(device_->health());  // a lost device fails fast, saying why
  ACCY_ASSIGN_OR_RETURN(std::unique_ptr<LaunchResources> r, idle_.take([&] { return makeResources(); }));
  // On failure the resources are dropped, not pooled: their state is unknown;
  // a hung launch's are kept, never freed (the device may still use them).
  if (absl::Status st = work(*r); !st.ok()) {
    if (!device_->health().ok()) {
      device_->park(std::shared_ptr<LaunchResources>(std::move(r)));
      return st;
    }
    device_->probeAfterFailure(st);
    return st;
  }
  idle_.give(std::move(r));
  return absl::OkStatus();
}

}  // namespace accy::cuda
