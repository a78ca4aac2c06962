// The CUDA driver library, opened at run time.
//
// Accy never links -lcuda: `CudaLibrary::open` dlopens the driver
// (libcuda.so.1) and resolves, with dlsym, every entry point listed in
// cuda_functions.inc into a `CudaFunctions` table, by the exported
// (versioned) symbol names the CUDA headers map the API names to
// (cuMemAlloc -> cuMemAlloc_v2). The headers are used for their types and
// the PFN_ typedefs of cudaTypedefs.h only; no prototype is ever called. A
// machine without the driver builds and runs everything else: opening the
// library fails with a status, nothing more.
//
// Errors: a library that cannot be opened or lacks entry points, and a call
// that does not return CUDA_SUCCESS, become an absl::Status naming the call,
// the source file and line, and (for calls) the CUresult by name.
#ifndef ACCY_BACKENDS_CUDA_CUDA_LOADER_H_
#define ACCY_BACKENDS_CUDA_CUDA_LOADER_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace accy::cuda {

// The driver library's soname on Linux.
inline constexpr char kCudaLibrary[] = "libcuda.so.1";

// One pointer per entry point in cuda_functions.inc, null until resolved.
// Members are named like the API after cuda.h's macros, so
// `cu.cuMemAlloc(...)` calls the cuMemAlloc_v2 entry.
struct CudaFunctions {
#define ACCY_CU_ENTRY(name, type, symbol, older) type name = nullptr;
#include "backends/cuda/cuda_functions.inc"
#undef ACCY_CU_ENTRY
};

// An open driver library with every entry point resolved.
//
// A library that opens stays open for the life of the process (the CUDA
// driver does not support being unloaded while contexts or threads it made
// exist): `open` returns the same object for the same path. A failed open is
// not remembered; the next call tries again.
class CudaLibrary {
 public:
  // Opens `path` (a soname or a file path) and resolves every entry point.
  // Unimplemented when that fails, naming the library and the dlerror text,
  // or every entry point it lacks. cuInit is not called. Thread-safe.
  static absl::StatusOr<std::shared_ptr<const CudaLibrary>> open(const std::string& path = kCudaLibrary);

  CudaLibrary(const CudaLibrary&) = delete;
  CudaLibrary& operator=(const CudaLibrary&) = delete;
  ~CudaLibrary();

  const CudaFunctions& functions() const { return cu_; }
  const std::string& path() const { return path_; }

 private:
  CudaLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
  CudaFunctions cu_;
};

// "CUDA_ERROR_OUT_OF_MEMORY" for CUDA_ERROR_OUT_OF_MEMORY: from the driver's
// cuGetErrorName when `cu` has it and it knows the value, else from this
// file's table of the header's values, else "CUresult(<n>)".
std::string cuResultName(CUresult result, const CudaFunctions* cu = nullptr);

// The status for `call` returning `result` at file:line. The message reads
// "<call> failed with <CUresult name> at <file>:<line>", with the driver's
// description in parentheses after the name when `cu` provides
// cuGetErrorString ("... with CUDA_ERROR_OUT_OF_MEMORY (out of memory) at
// ..."). Kinds: OutOfMemory for the out-of-memory results; Unimplemented for
// a missing or mismatched driver or device and unsupported code or
// features; InvalidProgram for PTX or images the driver refuses;
// LaunchFailed otherwise.
absl::Status cudaError(CUresult result, std::string_view call, std::string_view file, int line,
                       const CudaFunctions* cu = nullptr);

}  // namespace accy::cuda

// Calls `cu.fn(args...)` (cu: a CudaFunctions) and returns (from a function
// returning absl::Status or absl::StatusOr) the cudaError naming `fn` when it
// does not return CUDA_SUCCESS.
#define ACCY_CU_CALL(cu, fn, ...)                                                      \
  do {                                                                                 \
    const CUresult accy_cu_result_ = (cu).fn(__VA_ARGS__);                             \
    if (accy_cu_result_ != CUDA_SUCCESS) {                                             \
      return ::accy::cuda::cudaError(accy_cu_result_, #fn, __FILE__, __LINE__, &(cu)); \
    }                                                                                  \
  } while (0)

#endif  // ACCY_BACKENDS_CUDA_CUDA_LOADER_H_
