// A PTX executable loaded on a CUDA device.
//
// Load validates the executable (the layout in compiler/codegen/ptx/
// compile.h) and JIT-compiles its one PTX module once
// (cuModuleLoadDataEx, the JIT's error and info logs captured into the
// error), then looks up every step's kernel by name (cuModuleGetFunction).
//
// A launch copies the caller's inputs and outputs into device buffers (so
// outputs start with the caller's contents, as on the CPU where they are
// used in place), launches every step in order on one stream with
// (max(parallel_extent, 1), 1, 1) blocks of (group_size, 1, 1) threads and
// one u64 parameter per artifact-plan buffer (its device address), copies
// the outputs back and waits for the stream. The device buffers and the
// stream of a launch are pooled and reused; launches from many threads at
// once each take their own set and run on their own streams concurrently.
#ifndef ACCY_BACKENDS_CUDA_CUDA_PROGRAM_H_
#define ACCY_BACKENDS_CUDA_CUDA_PROGRAM_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/backend.h"
#include "backends/resource_pool.h"
#include "backends/cuda/cuda_device.h"
#include "compiler/executable/executable.h"

namespace accy::cuda {

class CudaProgram final : public backends::LoadedProgram {
 public:
  // Fails, before anything reaches the device, with
  //  - InvalidProgram when `exe` fails validateExecutable, its code is empty
  //    or holds a NUL byte, a step's group_size is below 1, or the executable
  //    has more buffers than a launch's 4 KiB of parameters holds;
  //  - Unimplemented when exe.target is not "ptx", or a step's group_size or
  //    block count exceeds this device's limits;
  // then with the cudaError of cuModuleLoadDataEx, followed by the JIT's
  // log (InvalidProgram for PTX the JIT refuses, Unimplemented for a PTX
  // version or target this driver or device does not support), or
  // InvalidProgram naming the first step whose kernel the module lacks.
  static absl::StatusOr<std::shared_ptr<const CudaProgram>> load(std::shared_ptr<const CudaDevice> device,
                                                                 executable::Executable exe);

  CudaProgram(const CudaProgram&) = delete;
  CudaProgram& operator=(const CudaProgram&) = delete;
  ~CudaProgram() override;

  // Buffers: exactly the executable's input and output counts and byte
  // sizes, aligned to their element size, outputs disjoint from each other
  // and from the inputs; anything else fails with InvalidBuffer before
  // anything runs. A failing CUDA call gives its cudaError (a fault in a
  // kernel surfaces at cuStreamSynchronize as LaunchFailed).
  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override;

  // The same, and sets *kernel_ms to the time the device spent from the
  // first kernel's start to the last one's end (CUDA events), in
  // milliseconds.
  absl::Status launchTimed(absl::Span<const std::span<const std::byte>> inputs,
                           absl::Span<const std::span<std::byte>> outputs, float* kernel_ms) const;

  // Enqueues every step, in order, on `stream` with `buffers` as the
  // kernels' parameters (the device addresses of the artifact plan's
  // buffers, one per buffer in plan order, each at least as large as
  // planned; the caller owns them and their contents) and returns without
  // waiting. For callers that keep their data on the device (benchmarks,
  // pipelines of programs). InvalidBuffer for a wrong buffer count; the
  // cudaError of a failing call (faults surface when the caller waits for
  // the stream).
  absl::Status enqueueOnDevice(absl::Span<const CUdeviceptr> buffers, CUstream stream) const;

  // A scan of this program as its body, on the device: every step's
  // kernels queued on one stream with the step's buffers as parameters
  // (the carries' two buffers swapped between steps, each xs and y slice
  // addressed in place in the whole value on the device: nothing copied
  // between steps), the host waiting once every kStepLaunchesPerWait
  // kernel launches (and asking the caller's stop check there) and at the
  // end. Nullopt for a program with an input or output no kernel reads.
  std::optional<absl::Status> launchRepeated(const Repeat& repeat, absl::Span<const std::span<const std::byte>> inputs,
                                             absl::Span<const std::span<std::byte>> outputs) const override;
  static constexpr int64_t kStepLaunchesPerWait = 1 << 14;
  // Times a launch of this program waited for its stream.
  int64_t hostWaits() const { return host_waits_.load(std::memory_order_relaxed); }

  const executable::Executable& executable() const override { return exe_; }
  const CudaDevice& device() const { return *device_; }


 private:
  struct LaunchResources;

  CudaProgram(std::shared_ptr<const CudaDevice> device, executable::Executable exe);
  absl::StatusOr<std::unique_ptr<LaunchResources>> makeResources() const;
  // cuLaunchKernel for every step with `args` (one pointer per buffer).
  absl::Status enqueueSteps(void** args, CUstream stream) const;
  absl::Status run(LaunchResources& r, absl::Span<const std::span<const std::byte>> inputs,
                   absl::Span<const std::span<std::byte>> outputs, float* kernel_ms) const;

  std::shared_ptr<const CudaDevice> device_;
  executable::Executable exe_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;  // one per launch step

  absl::Status runRepeated(LaunchResources& r, const Repeat& repeat,
                           absl::Span<const std::span<const std::byte>> inputs,
                           absl::Span<const std::span<std::byte>> outputs, const std::vector<int>& in,
                           const std::vector<int>& out) const;
  // Runs `work` on launch resources from the pool (the device's health
  // asked first), gives them back after, and on failure drops them (asking
  // the device whether the failure was sticky) or, when the device is
  // lost, parks them with it (a hung launch may still use them).
  absl::Status withResources(const std::function<absl::Status(LaunchResources&)>& work) const;
  // Waits for `stream` within the launch timeout (a hung launch marks the
  // device lost), counting the wait.
  absl::Status waitFor(CUstream stream) const;

  mutable std::atomic<int64_t> host_waits_{0};
  // Launch resources not in use.
  mutable backends::ResourcePool<LaunchResources> idle_;
};

}  // namespace accy::cuda

#endif  // ACCY_BACKENDS_CUDA_CUDA_PROGRAM_H_
