// The CUDA device: PTX executables run through the CUDA Driver API on an
// NVIDIA GPU.
//
// The backend loads libcuda.so.1 at run time. Without the driver library, a
// driver that starts or a usable device it still exists but reports
// info().available == false with info().unavailable_reason saying what is
// missing (e.g. "cannot load the CUDA driver library libcuda.so.1:
// libcuda.so.1: cannot open shared object file: ..." or "no CUDA device:
// ..."); compile and load then fail with Unimplemented and that reason.
//
// info(): name "cuda", targets {"ptx"}, min_buffer_alignment 1 (buffers are
// copied; each needs its element size). compile(program, "ptx") runs
// accy::ptx::compileProgram with the device's TargetInfo. load() validates
// an executable and JIT-compiles its module once (see cuda_program.h); its
// launches follow the LoadedProgram contract, from any number of threads.
#ifndef ACCY_BACKENDS_CUDA_CUDA_BACKEND_H_
#define ACCY_BACKENDS_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/cuda/cuda_device.h"
#include "compiler/codegen/ptx/compile.h"

namespace accy::backends {

std::unique_ptr<Backend> makeCudaBackend(const BackendOptions& options);

// The same, loading the driver from `library_path` (a soname or a file)
// instead of libcuda.so.1; for tests and diagnosis.
std::unique_ptr<Backend> makeCudaBackendFrom(const BackendOptions& options, const std::string& library_path);

// What compile() targets on a backend made above: sm (major * 10 + minor),
// the PTX ISA version (the default, raised to what the device's sm needs,
// capped at what the driver's JIT accepts), max threads per block, max grid
// x and warp size from the device. TargetInfo's defaults for an unavailable
// CUDA backend or any other backend.
ptx::TargetInfo cudaTargetInfo(const Backend& backend);

// The device in use, e.g. "NVIDIA H200 (device 0, sm_90, 132 SMs, 140 GiB,
// driver 12.8)"; empty for an unavailable CUDA backend or any other backend.
std::string cudaDeviceName(const Backend& backend);

// The device a CUDA backend runs on, for callers that manage device memory
// and streams themselves (the CUDA benchmark); null for an unavailable CUDA
// backend or any other backend.
std::shared_ptr<const cuda::CudaDevice> cudaDevice(const Backend& backend);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_CUDA_CUDA_BACKEND_H_
