#include "backends/cuda/cuda_loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::cuda {
namespace {

// The header's names, for when the driver cannot be asked (not loaded, or
// cuGetErrorName itself fails, as the toolkit's stub library does).
const char* tableName(CUresult result) {
  switch (result) {
#define ACCY_CU_RESULT(r) \
  case r:                 \
    return #r;
    ACCY_CU_RESULT(CUDA_SUCCESS)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_VALUE)
    ACCY_CU_RESULT(CUDA_ERROR_OUT_OF_MEMORY)
    ACCY_CU_RESULT(CUDA_ERROR_NOT_INITIALIZED)
    ACCY_CU_RESULT(CUDA_ERROR_DEINITIALIZED)
    ACCY_CU_RESULT(CUDA_ERROR_STUB_LIBRARY)
    ACCY_CU_RESULT(CUDA_ERROR_DEVICE_UNAVAILABLE)
    ACCY_CU_RESULT(CUDA_ERROR_NO_DEVICE)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_DEVICE)
    ACCY_CU_RESULT(CUDA_ERROR_DEVICE_NOT_LICENSED)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_IMAGE)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_CONTEXT)
    ACCY_CU_RESULT(CUDA_ERROR_MAP_FAILED)
    ACCY_CU_RESULT(CUDA_ERROR_UNMAP_FAILED)
    ACCY_CU_RESULT(CUDA_ERROR_NO_BINARY_FOR_GPU)
    ACCY_CU_RESULT(CUDA_ERROR_ECC_UNCORRECTABLE)
    ACCY_CU_RESULT(CUDA_ERROR_UNSUPPORTED_LIMIT)
    ACCY_CU_RESULT(CUDA_ERROR_CONTEXT_ALREADY_IN_USE)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_PTX)
    ACCY_CU_RESULT(CUDA_ERROR_NVLINK_UNCORRECTABLE)
    ACCY_CU_RESULT(CUDA_ERROR_JIT_COMPILER_NOT_FOUND)
    ACCY_CU_RESULT(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    ACCY_CU_RESULT(CUDA_ERROR_JIT_COMPILATION_DISABLED)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_SOURCE)
    ACCY_CU_RESULT(CUDA_ERROR_FILE_NOT_FOUND)
    ACCY_CU_RESULT(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND)
    ACCY_CU_RESULT(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED)
    ACCY_CU_RESULT(CUDA_ERROR_OPERATING_SYSTEM)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_HANDLE)
    ACCY_CU_RESULT(CUDA_ERROR_ILLEGAL_STATE)
    ACCY_CU_RESULT(CUDA_ERROR_NOT_FOUND)
    ACCY_CU_RESULT(CUDA_ERROR_NOT_READY)
    ACCY_CU_RESULT(CUDA_ERROR_ILLEGAL_ADDRESS)
    ACCY_CU_RESULT(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    ACCY_CU_RESULT(CUDA_ERROR_LAUNCH_TIMEOUT)
    ACCY_CU_RESULT(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE)
    ACCY_CU_RESULT(CUDA_ERROR_CONTEXT_IS_DESTROYED)
    ACCY_CU_RESULT(CUDA_ERROR_ASSERT)
    ACCY_CU_RESULT(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    ACCY_CU_RESULT(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
    ACCY_CU_RESULT(CUDA_ERROR_HARDWARE_STACK_ERROR)
    ACCY_CU_RESULT(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    ACCY_CU_RESULT(CUDA_ERROR_MISALIGNED_ADDRESS)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_ADDRESS_SPACE)
    ACCY_CU_RESULT(CUDA_ERROR_INVALID_PC)
    ACCY_CU_RESULT(CUDA_ERROR_LAUNCH_FAILED)
    ACCY_CU_RESULT(CUDA_ERROR_NOT_PERMITTED)
    ACCY_CU_RESULT(CUDA_ERROR_NOT_SUPPORTED)
    ACCY_CU_RESULT(CUDA_ERROR_SYSTEM_NOT_READY)
    ACCY_CU_RESULT(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    ACCY_CU_RESULT(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
    ACCY_CU_RESULT(CUDA_ERROR_TIMEOUT)
    ACCY_CU_RESULT(CUDA_ERROR_UNKNOWN)
#undef ACCY_CU_RESULT
    default:  // the driver's enum grows with every release
      return nullptr;
  }
}

std::string symbolList(const std::string& missing, const char* symbol, const char* older) {
  return strCat(missing, missing.empty() ? "" : ", ", symbol, older != nullptr ? strCat(" (or ", older, ")") : "");
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CudaLibrary>> CudaLibrary::open(const std::string& path) {
  // Never destroyed: what they hold stays loaded until exit (see the header).
  static std::mutex* const mutex = new std::mutex;
  static auto* const opened = new std::map<std::string, std::shared_ptr<const CudaLibrary>>;
  std::lock_guard<std::mutex> lock(*mutex);
  if (auto it = opened->find(path); it != opened->end()) return it->second;

  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return makeError(ErrorKind::kUnimplemented,
                     strCat("cannot load the CUDA driver library ", path, ": ", why != nullptr ? why : "dlopen failed",
                            " (install the NVIDIA driver, which provides libcuda.so.1)"));
  }
  // On a failure below, `library` closes the handle.
  std::shared_ptr<CudaLibrary> library(new CudaLibrary(handle, path));
  CudaFunctions& cu = library->cu_;
  std::string missing;
  int missing_count = 0;
#define ACCY_CU_ENTRY(name, type, symbol, older)                            \
  {                                                                         \
    void* found = dlsym(handle, symbol);                                    \
    const char* other = older;                                              \
    if (found == nullptr && other != nullptr) found = dlsym(handle, other); \
    if (found == nullptr) {                                                 \
      missing = symbolList(missing, symbol, other);                         \
      ++missing_count;                                                      \
    }                                                                       \
    cu.name = reinterpret_cast<type>(found);                                \
  }
#include "backends/cuda/cuda_functions.inc"
#undef ACCY_CU_ENTRY
  if (missing_count > 0) {
    return makeError(ErrorKind::kUnimplemented, strCat(path, " is not a usable CUDA driver: it lacks ", missing_count,
                                                       missing_count == 1 ? " entry point: " : " entry points: ",
                                                       missing, " (at ", __FILE__, ":", __LINE__, ")"));
  }
  opened->emplace(path, library);
  return std::shared_ptr<const CudaLibrary>(std::move(library));
}

// Runs only for a library that failed to load: the others are kept.
CudaLibrary::~CudaLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

std::string cuResultName(CUresult result, const CudaFunctions* cu) {
  if (cu != nullptr && cu->cuGetErrorName != nullptr) {
    const char* name = nullptr;
    if (cu->cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr && name[0] != '\0') return name;
  }
  if (const char* name = tableName(result)) return name;
  return strCat("CUresult(", static_cast<int>(result), ")");
}

absl::Status cudaError(CUresult result, std::string_view call, std::string_view file, int line,
                       const CudaFunctions* cu) {
  ErrorKind kind = ErrorKind::kLaunchFailed;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      kind = ErrorKind::kOutOfMemory;
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      kind = ErrorKind::kUnimplemented;
      break;
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_SOURCE:
      kind = ErrorKind::kInvalidProgram;
      break;
    default:  // the driver's enum: every other result is a failed run
      break;
  }
  std::string description;
  if (cu != nullptr && cu->cuGetErrorString != nullptr) {
    const char* text = nullptr;
    if (cu->cuGetErrorString(result, &text) == CUDA_SUCCESS && text != nullptr && text[0] != '\0') {
      description = strCat(" (", text, ")");
    }
  }
  return makeError(kind, strCat(call, " failed with ", cuResultName(result, cu), description, " at ", file, ":", line));
}

}  // namespace accy::cuda
