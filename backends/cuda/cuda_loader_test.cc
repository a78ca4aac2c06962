// The CUDA entry-point table and the device: a missing library or entry
// point and a failing call give statuses that say which; every entry
// resolves against the fake driver built here (testdata/fake_cuda.cc), the
// toolkit's stub library where it is installed, and the real driver where
// there is one; device choice, limits, contexts and host registration on the
// fake driver.
#include "backends/cuda/cuda_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/cuda/cuda_device.h"
#include "base/errors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kMissing[] = "libaccy-no-such-cuda.so.1";
constexpr char kStub[] = "/usr/local/cuda/lib64/stubs/libcuda.so";

std::string runfile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/accy/backends/cuda/" + name;
}
std::string fakeDriver() { return runfile("testdata/libfake_cuda.so"); }
std::string partialDriver() { return runfile("testdata/libfake_cuda_partial.so"); }

std::string message(const absl::Status& s) { return std::string(s.message()); }

// The fake driver's state (see fake_cuda.cc): "contexts", "allocations", ...
int fakeLive(const char* what) {
  void* handle = dlopen(fakeDriver().c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr) << "the fake driver is not loaded";
  if (handle == nullptr) return -1;
  auto live = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "accy_fake_cuda_live"));
  dlclose(handle);  // drops only the reference NOLOAD took
  return live != nullptr ? live(what) : -1;
}

// Sets an environment variable for the scope's life.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

int entryCount() {
  int n = 0;
#define ACCY_CU_ENTRY(name, type, symbol, older) ++n;
#include "backends/cuda/cuda_functions.inc"
#undef ACCY_CU_ENTRY
  return n;
}

// Every entry of `cu` is set; returns how many there are.
int expectEveryEntry(const CudaFunctions& cu) {
  int resolved = 0;
#define ACCY_CU_ENTRY(name, type, symbol, older)           \
  EXPECT_NE(cu.name, nullptr) << #name " did not resolve"; \
  ++resolved;
#include "backends/cuda/cuda_functions.inc"
#undef ACCY_CU_ENTRY
  return resolved;
}

#define ACCY_TEST_STR2(x) #x
#define ACCY_TEST_XSTR(x) ACCY_TEST_STR2(x)

TEST(CudaLoader, SymbolsAreTheOnesTheHeaderMapsTheNamesTo) {
  // ACCY_TEST_XSTR(name) is the name after cuda.h's macros: what a program
  // linked against libcuda would call (cuMemAlloc -> cuMemAlloc_v2).
#define ACCY_CU_ENTRY(name, type, symbol, older) EXPECT_STREQ(symbol, ACCY_TEST_XSTR(name)) << #name;
#include "backends/cuda/cuda_functions.inc"
#undef ACCY_CU_ENTRY
  EXPECT_STREQ(ACCY_TEST_XSTR(cuMemAlloc), "cuMemAlloc_v2");
  EXPECT_STREQ(ACCY_TEST_XSTR(cuLaunchKernel), "cuLaunchKernel");  // not the per-thread-stream _ptsz
  EXPECT_EQ(entryCount(), 35);
}

TEST(CudaLoader, AMissingLibraryIsUnimplementedAndNamed) {
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> library = CudaLibrary::open(kMissing);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(errorKind(library.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(message(library.status()), HasSubstr("cannot load the CUDA driver library libaccy-no-such-cuda.so.1: "));
  EXPECT_THAT(message(library.status()), HasSubstr("cannot open shared object file"));

  absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(kMissing);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(errorKind(device.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(message(device.status()), HasSubstr(kMissing));
}

TEST(CudaLoader, ALibraryLackingEntryPointsNamesEachOne) {
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> library = CudaLibrary::open(partialDriver());
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(errorKind(library.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(message(library.status()),
              HasSubstr("libfake_cuda_partial.so is not a usable CUDA driver: it lacks 2 entry points: "
                        "cuLaunchKernel, cuEventElapsedTime_v2 (or cuEventElapsedTime) (at "));
  EXPECT_THAT(message(library.status()), HasSubstr("cuda_loader.cc:"));

  // A library that is no driver at all lacks every one.
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> libc = CudaLibrary::open("libc.so.6");
  ASSERT_FALSE(libc.ok());
  EXPECT_THAT(message(libc.status()),
              HasSubstr("libc.so.6 is not a usable CUDA driver: it lacks " + std::to_string(entryCount()) +
                        " entry points: cuGetErrorName, cuGetErrorString, cuInit, "));
}

TEST(CudaLoader, EveryEntryPointResolvesInTheFakeDriver) {
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> library = CudaLibrary::open(fakeDriver());
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(expectEveryEntry((*library)->functions()), entryCount());
  EXPECT_EQ((*library)->path(), fakeDriver());
  // Opened once per process.
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> again = CudaLibrary::open(fakeDriver());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(library->get(), again->get());
}

// Before the stub test: once the stub is loaded, "libcuda.so.1" may name it.
TEST(CudaLoader, EveryEntryPointResolvesInTheRealDriver) {
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> library = CudaLibrary::open();
  if (!library.ok()) GTEST_SKIP() << "no CUDA driver here: " << library.status();
  // The stub's soname is libcuda.so.1 too: once a test has loaded it, the
  // dynamic loader answers with it.
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>((*library)->functions().cuInit), &where) != 0 && where.dli_fname != nullptr &&
      std::string(where.dli_fname).find("/stubs/") != std::string::npos) {
    GTEST_SKIP() << "libcuda.so.1 here is the toolkit's stub library " << where.dli_fname;
  }
  EXPECT_EQ(expectEveryEntry((*library)->functions()), entryCount());
  EXPECT_EQ((*library)->path(), kCudaLibrary);
}

TEST(CudaLoader, EveryEntryPointResolvesInTheToolkitStub) {
  if (!std::filesystem::exists(kStub)) GTEST_SKIP() << "no CUDA toolkit stub library at " << kStub;
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> library = CudaLibrary::open(kStub);
  ASSERT_TRUE(library.ok()) << library.status();
  EXPECT_EQ(expectEveryEntry((*library)->functions()), entryCount());
  // The stub's cuInit refuses to run; the device says so by name.
  absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(kStub);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(errorKind(device.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(message(device.status()), HasSubstr("the CUDA driver did not start: cuInit failed with "));
  EXPECT_THAT(message(device.status()), HasSubstr("CUDA_ERROR_STUB_LIBRARY"));
}

TEST(CudaLoader, ResultsHaveNames) {
  EXPECT_EQ(cuResultName(CUDA_SUCCESS), "CUDA_SUCCESS");
  EXPECT_EQ(cuResultName(CUDA_ERROR_OUT_OF_MEMORY), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(cuResultName(CUDA_ERROR_INVALID_PTX), "CUDA_ERROR_INVALID_PTX");
  EXPECT_EQ(cuResultName(CUDA_ERROR_STUB_LIBRARY), "CUDA_ERROR_STUB_LIBRARY");
  EXPECT_EQ(cuResultName(static_cast<CUresult>(12345)), "CUresult(12345)");

  // With a loaded driver, its own names come first; the table still covers
  // what it does not name.
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> fake = CudaLibrary::open(fakeDriver());
  ASSERT_TRUE(fake.ok()) << fake.status();
  const CudaFunctions* cu = &(*fake)->functions();
  EXPECT_EQ(cuResultName(static_cast<CUresult>(9999), cu), "CUDA_ERROR_FAKE_ONLY");
  EXPECT_EQ(cuResultName(CUDA_ERROR_LAUNCH_TIMEOUT, cu), "CUDA_ERROR_LAUNCH_TIMEOUT");
  EXPECT_EQ(cuResultName(static_cast<CUresult>(12345), cu), "CUresult(12345)");
}

TEST(CudaLoader, ErrorsNameTheCallTheLineAndTheResult) {
  const absl::Status fault = cudaError(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize", "backends/cuda/x.cc", 42);
  EXPECT_EQ(errorKind(fault), ErrorKind::kLaunchFailed);
  EXPECT_EQ(message(fault),
            "LaunchFailed: cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS at backends/cuda/x.cc:42");
  EXPECT_EQ(errorKind(cudaError(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "f", 1)), ErrorKind::kOutOfMemory);
  EXPECT_EQ(errorKind(cudaError(CUDA_ERROR_NO_DEVICE, "cuInit", "f", 1)), ErrorKind::kUnimplemented);
  EXPECT_EQ(errorKind(cudaError(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "cuModuleLoadDataEx", "f", 1)),
            ErrorKind::kUnimplemented);
  EXPECT_EQ(errorKind(cudaError(CUDA_ERROR_INVALID_PTX, "cuModuleLoadDataEx", "f", 1)), ErrorKind::kInvalidProgram);

  // The driver's description follows the name when the driver is loaded.
  absl::StatusOr<std::shared_ptr<const CudaLibrary>> fake = CudaLibrary::open(fakeDriver());
  ASSERT_TRUE(fake.ok()) << fake.status();
  EXPECT_EQ(message(cudaError(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "f.cc", 7, &(*fake)->functions())),
            "OutOfMemory: cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY "
            "(fake driver says CUDA_ERROR_OUT_OF_MEMORY) at f.cc:7");
}

// ACCY_CU_CALL returns the error from the enclosing function, naming the
// call as the API spells it (not the _v2 symbol).
CUresult failingAlloc(CUdeviceptr*, size_t) { return CUDA_ERROR_OUT_OF_MEMORY; }
CUresult succeedingInit(unsigned int) { return CUDA_SUCCESS; }
absl::Status callBoth(const CudaFunctions& cu) {
  ACCY_CU_CALL(cu, cuInit, 0);
  CUdeviceptr p = 0;
  ACCY_CU_CALL(cu, cuMemAlloc, &p, 16);
  return absl::OkStatus();
}

TEST(CudaLoader, CallMacroReturnsTheFailure) {
  CudaFunctions cu;
  cu.cuInit = succeedingInit;
  cu.cuMemAlloc = failingAlloc;
  const absl::Status s = callBoth(cu);
  EXPECT_EQ(errorKind(s), ErrorKind::kOutOfMemory);
  EXPECT_THAT(message(s), StartsWith("OutOfMemory: cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY at "));
  EXPECT_THAT(message(s), HasSubstr("cuda_loader_test.cc:"));
}

TEST(CudaPtxVersions, FollowTheDriverAndTheTarget) {
  EXPECT_EQ(maxPtxVersionForDriver(11080), 78);
  EXPECT_EQ(maxPtxVersionForDriver(12000), 80);
  EXPECT_EQ(maxPtxVersionForDriver(12040), 84);
  EXPECT_EQ(maxPtxVersionForDriver(12060), 85);
  EXPECT_EQ(maxPtxVersionForDriver(12080), 87);
  EXPECT_EQ(maxPtxVersionForDriver(13000), 90);
  EXPECT_EQ(maxPtxVersionForDriver(14020), 90);
  EXPECT_EQ(minPtxVersionForSm(70), 60);
  EXPECT_EQ(minPtxVersionForSm(80), 70);
  EXPECT_EQ(minPtxVersionForSm(89), 78);
  EXPECT_EQ(minPtxVersionForSm(90), 78);
  EXPECT_EQ(minPtxVersionForSm(100), 86);
  EXPECT_EQ(minPtxVersionForSm(120), 87);
}

TEST(CudaDeviceOnTheFakeDriver, PicksTheDeviceWithTheMostMultiprocessors) {
  {
    absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(fakeDriver());
    ASSERT_TRUE(device.ok()) << device.status();
    const CudaDevice& d = **device;
    EXPECT_EQ(d.ordinal(), 1);  // 132 SMs beat device 0's 66
    EXPECT_EQ(d.name(), "Accy Fake GPU 1");
    EXPECT_EQ(d.driverVersion(), 12080);
    EXPECT_EQ(d.limits().sm, 90);
    EXPECT_EQ(d.limits().multiprocessors, 132);
    EXPECT_EQ(d.limits().max_threads_per_block, 1024u);
    EXPECT_EQ(d.limits().max_grid_x, 2147483647u);
    EXPECT_EQ(d.limits().warp_size, 32u);
    EXPECT_EQ(d.limits().total_memory, uint64_t{80} << 30);
    EXPECT_TRUE(d.limits().host_register);
    EXPECT_NE(d.context(), nullptr);
    EXPECT_EQ(fakeLive("contexts"), 1);
    EXPECT_EQ(fakeLive("current"), 0);  // nothing left current on this thread
  }
  EXPECT_EQ(fakeLive("contexts"), 0);  // released with the device

  ScopedEnv one("ACCY_FAKE_CUDA_DEVICES", "1");
  absl::StatusOr<std::shared_ptr<CudaDevice>> only = CudaDevice::open(fakeDriver());
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_EQ((*only)->ordinal(), 0);
}

TEST(CudaDeviceOnTheFakeDriver, NoDeviceIsUnimplementedWithAReason) {
  {
    ScopedEnv none("ACCY_FAKE_CUDA_DEVICES", "0");
    absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(fakeDriver());
    ASSERT_FALSE(device.ok());
    EXPECT_EQ(errorKind(device.status()), ErrorKind::kUnimplemented);
    EXPECT_THAT(message(device.status()), HasSubstr("no CUDA device (the CUDA 12.8 driver in "));
  }
  {
    ScopedEnv init("ACCY_FAKE_CUDA_INIT", "100");  // CUDA_ERROR_NO_DEVICE
    absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(fakeDriver());
    ASSERT_FALSE(device.ok());
    EXPECT_EQ(errorKind(device.status()), ErrorKind::kUnimplemented);
    EXPECT_THAT(message(device.status()),
                StartsWith("Unimplemented: no CUDA device: cuInit failed with CUDA_ERROR_NO_DEVICE "
                           "(fake driver says CUDA_ERROR_NO_DEVICE) at "));
  }
  {
    ScopedEnv init("ACCY_FAKE_CUDA_INIT", "999");  // CUDA_ERROR_UNKNOWN: still "unavailable", not a launch failure
    absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(fakeDriver());
    ASSERT_FALSE(device.ok());
    EXPECT_EQ(errorKind(device.status()), ErrorKind::kUnimplemented);
    EXPECT_THAT(message(device.status()),
                HasSubstr("the CUDA driver did not start: cuInit failed with CUDA_ERROR_UNKNOWN at "));
  }
  EXPECT_EQ(fakeLive("contexts"), 0);
}

TEST(CudaDeviceOnTheFakeDriver, ContextScopesNest) {
  absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(fakeDriver());
  ASSERT_TRUE(device.ok()) << device.status();
  {
    ContextScope outer(**device);
    ASSERT_TRUE(outer.status().ok()) << outer.status();
    {
      ContextScope inner(**device);
      EXPECT_TRUE(inner.status().ok());
      EXPECT_EQ(fakeLive("current"), 2);
    }
    EXPECT_EQ(fakeLive("current"), 1);
  }
  EXPECT_EQ(fakeLive("current"), 0);
}

TEST(CudaDeviceOnTheFakeDriver, RegistersHostMemoryUntilTheRegistrationGoes) {
  absl::StatusOr<std::shared_ptr<CudaDevice>> device = CudaDevice::open(fakeDriver());
  ASSERT_TRUE(device.ok()) << device.status();
  std::vector<float> memory(4096);
  {
    absl::StatusOr<std::unique_ptr<HostRegistration>> r = registerHostMemory(*device, memory.data(), 16384);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->data(), memory.data());
    EXPECT_EQ((*r)->size(), 16384u);
    EXPECT_EQ((*r)->devicePointer(), reinterpret_cast<CUdeviceptr>(memory.data()));
    EXPECT_EQ(fakeLive("registrations"), 1);
    EXPECT_EQ(fakeLive("current"), 0);

    // Overlapping ranges are the driver's to refuse, by name.
    absl::StatusOr<std::unique_ptr<HostRegistration>> twice = registerHostMemory(*device, &memory[100], 400);
    ASSERT_FALSE(twice.ok());
    EXPECT_THAT(message(twice.status()),
                HasSubstr("cuMemHostRegister failed with CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED at "));
    EXPECT_EQ(fakeLive("registrations"), 1);

    // The registration keeps the device's context alive after the device goes.
    device->reset();
    EXPECT_EQ(fakeLive("contexts"), 1);
  }
  EXPECT_EQ(fakeLive("registrations"), 0);
  EXPECT_EQ(fakeLive("contexts"), 0);

  absl::StatusOr<std::shared_ptr<CudaDevice>> again = CudaDevice::open(fakeDriver());
  ASSERT_TRUE(again.ok());
  absl::StatusOr<std::unique_ptr<HostRegistration>> empty = registerHostMemory(*again, memory.data(), 0);
  EXPECT_EQ(errorKind(empty.status()), ErrorKind::kInvalidBuffer);
}

}  // namespace
}  // namespace accy::cuda
