// The CUDA backend, on two drivers: the fake driver built here
// (testdata/fake_cuda.cc, which stands in host code for the test kernels, so
// every path through the backend runs on any machine), and the real driver
// where this machine has a GPU. Hand-written PTX kernels (testdata/*.ptx) in
// hand-built executables; the buffer checks, the load checks, concurrent
// launches, host registration and a compiled program run end to end. Every
// test on the real driver skips, giving info().unavailable_reason, where it
// is unavailable; what the backend says then is tested too.
#include "backends/cuda/cuda_backend.h"
#include "backends/compile_program.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cuda_program.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/builder.h"
#include "base/errors.h"
#include "compiler/tensor/evaluate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::backends {
namespace {

using executable::BufferPlan;
using executable::Executable;
using executable::LaunchStep;
using tensor::DType;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kN = 1000;  // elements the test kernels handle
constexpr char kMissing[] = "libaccy-no-such-cuda.so.1";

std::string runfile(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/accy/backends/cuda/" + name;
}
std::string fakeDriver() { return runfile("testdata/libfake_cuda.so"); }

std::string readText(const std::string& name) {
  const std::string path = runfile("testdata/" + name);
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<uint8_t> bytesOf(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

uint64_t entryOffset(const std::string& text, const std::string& kernel) {
  const size_t at = text.find(".visible .entry " + kernel + "(");
  EXPECT_NE(at, std::string::npos) << kernel;
  return at == std::string::npos ? 0 : at;
}

tensor::Spec vec(int64_t n = kN) { return tensor::spec(DType::f32, {{"i", n}}); }

BufferPlan buffer(choir::BufferRole role, int io_index, int64_t scratch_offset = -1) {
  BufferPlan b;
  b.role = role;
  b.io_index = io_index;
  b.dtype = DType::f32;
  b.bytes = kN * 4;
  b.alignment = 4;
  b.scratch_offset = scratch_offset;
  return b;
}

// y = a * 2 + b: parameters 0 = input 0 (a), 1 = input 1 (b), 2 = output 0
// (y); 8 blocks of 128 threads.
Executable axpbExecutable() {
  Executable exe;
  exe.target = "ptx";
  exe.isa = "sm_70";
  const std::string text = readText("axpb.ptx");
  exe.code = bytesOf(text);
  exe.inputs = {vec(), vec()};
  exe.outputs = {vec()};
  exe.artifact_plan.buffers = {buffer(choir::BufferRole::kInput, 0), buffer(choir::BufferRole::kInput, 1),
                               buffer(choir::BufferRole::kOutput, 0)};
  exe.launch_plan.steps = {LaunchStep{"axpb", entryOffset(text, "axpb"), 8, kN, 128}};
  return exe;
}

// t = x + 1 (kernel 1, into a temporary), then y[i] = t[999 - i] * 3
// (kernel 2): parameters 0 = input 0 (x), 1 = temp (t), 2 = output 0 (y);
// 4 blocks of 256 threads each.
Executable twoKernelExecutable() {
  Executable exe;
  exe.target = "ptx";
  exe.isa = "sm_70";
  const std::string text = readText("two_kernels.ptx");
  exe.code = bytesOf(text);
  exe.inputs = {vec()};
  exe.outputs = {vec()};
  exe.artifact_plan.buffers = {buffer(choir::BufferRole::kInput, 0), buffer(choir::BufferRole::kTemp, -1, 0),
                               buffer(choir::BufferRole::kOutput, 0)};
  exe.artifact_plan.scratch_bytes = kN * 4;
  exe.launch_plan.steps = {LaunchStep{"add_one", entryOffset(text, "add_one"), 4, kN, 256},
                           LaunchStep{"reverse_triple", entryOffset(text, "reverse_triple"), 4, kN, 256}};
  return exe;
}

std::span<const std::byte> in(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }
std::span<std::byte> out(std::vector<float>& v) { return std::as_writable_bytes(std::span<float>(v)); }

absl::Status launch(const LoadedProgram& p, std::vector<std::span<const std::byte>> inputs,
                    std::vector<std::span<std::byte>> outputs) {
  return p.launch(inputs, outputs);
}

std::string message(const absl::Status& s) { return std::string(s.message()); }

// The fake driver's state (see fake_cuda.cc).
void* fakeHandle() {
  void* handle = dlopen(fakeDriver().c_str(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr) << "the fake driver is not loaded";
  if (handle != nullptr) dlclose(handle);  // drops only the reference NOLOAD took
  return handle;
}
int fakeLive(const char* what) {
  void* handle = fakeHandle();
  auto live =
      handle != nullptr ? reinterpret_cast<int (*)(const char*)>(dlsym(handle, "accy_fake_cuda_live")) : nullptr;
  return live != nullptr ? live(what) : -1;
}
std::string fakeLastLaunch(std::vector<unsigned>* dims) {
  void* handle = fakeHandle();
  auto last = handle != nullptr
                  ? reinterpret_cast<const char* (*)(unsigned*)>(dlsym(handle, "accy_fake_cuda_last_launch"))
                  : nullptr;
  dims->assign(6, 0);
  return last != nullptr ? last(dims->data()) : "";
}

enum class Driver { kFake, kReal };
void PrintTo(Driver d, std::ostream* os) { *os << (d == Driver::kFake ? "the fake driver" : "the real driver"); }

std::string driverName(const ::testing::TestParamInfo<Driver>& info) {
  return info.param == Driver::kFake ? "FakeDriver" : "RealDriver";
}

class CudaBackendTest : public ::testing::TestWithParam<Driver> {
 protected:
  static void SetUpTestSuite() {
    fake_ = makeCudaBackendFrom(BackendOptions{}, fakeDriver()).release();
    real_ = makeCudaBackend(BackendOptions{}).release();
  }
  static void TearDownTestSuite() {
    delete fake_;
    delete real_;
    fake_ = real_ = nullptr;
  }
  void SetUp() override {
    if (GetParam() == Driver::kFake) {
      ASSERT_TRUE(fake_->info().available) << fake_->info().unavailable_reason;
    } else if (!real_->info().available) {
      GTEST_SKIP() << "CUDA is unavailable here: " << real_->info().unavailable_reason;
    }
  }
  bool fake() const { return GetParam() == Driver::kFake; }
  const Backend& backend() const { return fake() ? *fake_ : *real_; }
  std::unique_ptr<Backend> makeAnother() const {
    return fake() ? makeCudaBackendFrom(BackendOptions{}, fakeDriver()) : makeCudaBackend(BackendOptions{});
  }

  std::shared_ptr<const LoadedProgram> load(Executable exe) const {
    absl::StatusOr<std::shared_ptr<const LoadedProgram>> loaded = backend().load(std::move(exe));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? *loaded : nullptr;
  }
  absl::Status loadStatus(Executable exe) const { return backend().load(std::move(exe)).status(); }

  static Backend* fake_;
  static Backend* real_;
};

Backend* CudaBackendTest::fake_ = nullptr;
Backend* CudaBackendTest::real_ = nullptr;

INSTANTIATE_TEST_SUITE_P(Drivers, CudaBackendTest, ::testing::Values(Driver::kFake, Driver::kReal), driverName);

TEST(CudaBackendInfo, DescribesItselfWhetherOrNotAvailable) {
  std::unique_ptr<Backend> b = makeCudaBackend(BackendOptions{});
  EXPECT_EQ(b->info().name, "cuda");
  EXPECT_EQ(b->info().targets, std::vector<std::string>{"ptx"});
  EXPECT_EQ(b->info().min_buffer_alignment, 1);
  EXPECT_EQ(b->info().available, b->info().unavailable_reason.empty()) << b->info().unavailable_reason;
}

// Where this machine has no GPU (CI, developers' machines) the backend says
// why, and refuses to compile or load.
TEST(CudaBackendInfo, WithoutAGpuItIsUnavailableAndSaysWhy) {
  std::unique_ptr<Backend> b = makeCudaBackend(BackendOptions{});
  if (b->info().available) GTEST_SKIP() << "a CUDA device is here: " << cudaDeviceName(*b);
  EXPECT_FALSE(b->info().unavailable_reason.empty());
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) {
    EXPECT_THAT(b->info().unavailable_reason, StartsWith("cannot load the CUDA driver library libcuda.so.1: "));
    EXPECT_THAT(b->info().unavailable_reason, HasSubstr("libcuda.so.1: cannot open shared object file"));
  } else {
    dlclose(driver);
    EXPECT_THAT(b->info().unavailable_reason, ::testing::AnyOf(HasSubstr("no CUDA device"), HasSubstr("cuInit")));
  }
  const absl::Status loaded = b->load(axpbExecutable()).status();
  EXPECT_EQ(errorKind(loaded), ErrorKind::kUnimplemented);
  EXPECT_THAT(message(loaded), HasSubstr("device cuda is not available: " + b->info().unavailable_reason));
  EXPECT_EQ(errorKind(compileOn(*b, tensor::Program{}, "ptx").status()), ErrorKind::kUnimplemented);
  EXPECT_EQ(cudaDeviceName(*b), "");
}

TEST(CudaBackendInfo, AMissingDriverMakesItUnavailableWithAReason) {
  std::unique_ptr<Backend> b = makeCudaBackendFrom(BackendOptions{}, kMissing);
  EXPECT_EQ(b->info().name, "cuda");
  EXPECT_FALSE(b->info().available);
  EXPECT_THAT(b->info().unavailable_reason, StartsWith("cannot load the CUDA driver library"));
  EXPECT_THAT(b->info().unavailable_reason, HasSubstr(kMissing));
  EXPECT_EQ(cudaDeviceName(*b), "");
  EXPECT_EQ(cudaTargetInfo(*b).sm, ptx::TargetInfo{}.sm);
  EXPECT_EQ(cudaTargetInfo(*b).max_threads_per_block, ptx::TargetInfo{}.max_threads_per_block);

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> loaded = b->load(Executable{});
  EXPECT_EQ(errorKind(loaded.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(message(loaded.status()), HasSubstr(kMissing));
  absl::StatusOr<Executable> compiled = compileOn(*b, tensor::Program{}, "ptx");
  EXPECT_EQ(errorKind(compiled.status()), ErrorKind::kUnimplemented);
  std::vector<float> memory(16);
  // Nothing to register on an unavailable device: a null handle, no error.
  auto none = b->registerHostMemory(memory.data(), 64);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);
}

TEST(CudaBackendInfo, TheFakeDriverMakesItAvailable) {
  std::unique_ptr<Backend> b = makeCudaBackendFrom(BackendOptions{}, fakeDriver());
  ASSERT_TRUE(b->info().available) << b->info().unavailable_reason;
  EXPECT_EQ(b->info().targets, std::vector<std::string>{"ptx"});
  EXPECT_EQ(cudaDeviceName(*b), "Accy Fake GPU 1 (device 1, sm_90, 132 SMs, 80 GiB, driver 12.8)");
  const ptx::TargetInfo t = cudaTargetInfo(*b);
  EXPECT_EQ(t.sm, 90);
  EXPECT_EQ(t.ptx_version, 78);  // sm_90 needs 7.8; the 12.8 driver accepts up to 8.7
  EXPECT_EQ(t.max_threads_per_block, 1024u);
  EXPECT_EQ(t.max_grid_x, 2147483647u);
  EXPECT_EQ(t.warp_size, 32u);
  EXPECT_EQ(t.mode, ptx::ArithmeticMode::kExact);
}

TEST_P(CudaBackendTest, TargetInfoComesFromTheDevice) {
  const ptx::TargetInfo t = cudaTargetInfo(backend());
  EXPECT_GE(t.sm, 70);
  EXPECT_GE(t.max_threads_per_block, 1024u);
  EXPECT_GE(t.max_grid_x, 65535u);
  EXPECT_EQ(t.warp_size, 32u);
  EXPECT_GE(t.ptx_version, 60);
  EXPECT_THAT(cudaDeviceName(backend()), HasSubstr("sm_"));
}



TEST_P(CudaBackendTest, OutputsStartWithTheCallersContents) {
  // Parameter 1 as output 1: the kernel reads it (y = a * 2 + out1) and
  // never writes it, so it comes back as it went in.
  Executable exe = axpbExecutable();
  exe.inputs = {vec()};
  exe.outputs = {vec(), vec()};
  exe.artifact_plan.buffers = {buffer(choir::BufferRole::kInput, 0), buffer(choir::BufferRole::kOutput, 1),
                               buffer(choir::BufferRole::kOutput, 0)};
  std::shared_ptr<const LoadedProgram> p = load(std::move(exe));
  ASSERT_NE(p, nullptr);
  std::vector<float> a(kN, 3.0f), y(kN, 0.0f), keep(kN);
  for (int64_t i = 0; i < kN; ++i) keep[i] = static_cast<float>(i);
  const absl::Status s = launch(*p, {in(a)}, {out(y), out(keep)});
  ASSERT_TRUE(s.ok()) << s;
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(y[i], 6.0f + static_cast<float>(i)) << "element " << i;
    ASSERT_EQ(keep[i], static_cast<float>(i)) << "element " << i;
  }
}



// The hand-written kernels, with the grid and block each launch used as the
// fake driver saw them.
TEST_P(CudaBackendTest, RunsOneKernelOverAThousandElements) {
  std::shared_ptr<const LoadedProgram> p = load(axpbExecutable());
  ASSERT_NE(p, nullptr);
  std::vector<float> a(kN), b(kN), y(kN, -1.0f);
  for (int64_t i = 0; i < kN; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = static_cast<float>(kN - i);
  }
  const absl::Status s = launch(*p, {in(a), in(b)}, {out(y)});
  ASSERT_TRUE(s.ok()) << s;
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(y[i], a[i] * 2 + b[i]) << "element " << i;
  EXPECT_EQ(p->executable().launch_plan.steps.size(), 1u);
  if (fake()) {
    std::vector<unsigned> dims;
    EXPECT_EQ(fakeLastLaunch(&dims), "axpb");
    EXPECT_THAT(dims, ::testing::ElementsAre(8u, 1u, 1u, 128u, 1u, 1u));
  }
}

TEST_P(CudaBackendTest, TwoKernelsPassATemporaryInStreamOrder) {
  std::shared_ptr<const LoadedProgram> p = load(twoKernelExecutable());
  ASSERT_NE(p, nullptr);
  for (int round = 0; round < 3; ++round) {  // the pooled launch resources are reused
    std::vector<float> x(kN), y(kN, -1.0f);
    for (int64_t i = 0; i < kN; ++i) x[i] = static_cast<float>(i * (round + 1));
    const absl::Status s = launch(*p, {in(x)}, {out(y)});
    ASSERT_TRUE(s.ok()) << s;
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(y[i], (x[kN - 1 - i] + 1) * 3) << "round " << round << ", element " << i;
  }
  if (fake()) {
    std::vector<unsigned> dims;
    EXPECT_EQ(fakeLastLaunch(&dims), "reverse_triple");
    EXPECT_THAT(dims, ::testing::ElementsAre(4u, 1u, 1u, 256u, 1u, 1u));
  }
}

TEST_P(CudaBackendTest, LoadRefusesBadExecutablesWithClearErrors) {
  Executable spirv = axpbExecutable();
  spirv.target = "spirv";
  absl::Status s = loadStatus(spirv);
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented) << s;
  EXPECT_THAT(message(s), HasSubstr("the CUDA backend runs ptx code, not spirv"));

  Executable missing_entry = axpbExecutable();
  missing_entry.launch_plan.steps[0].kernel = "axpc";
  s = loadStatus(missing_entry);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(message(s), HasSubstr("kernel 0 (axpc): the PTX module has no entry named axpc"));

  Executable second_missing = twoKernelExecutable();
  second_missing.launch_plan.steps[1].kernel = "reverse_twice";
  s = loadStatus(second_missing);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(message(s), HasSubstr("kernel 1 (reverse_twice): the PTX module has no entry named reverse_twice"));

  Executable nul = axpbExecutable();
  nul.code[40] = 0;
  s = loadStatus(nul);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(message(s), HasSubstr("the PTX text has a NUL byte at offset 40"));

  Executable no_group = axpbExecutable();
  no_group.launch_plan.steps[0].group_size = 0;
  s = loadStatus(no_group);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(message(s), HasSubstr("kernel 0 (axpb) has group_size 0; a ptx launch step runs blocks of 1 to "));

  Executable huge_group = axpbExecutable();
  huge_group.launch_plan.steps[0].group_size = 1 << 20;
  s = loadStatus(huge_group);
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented) << s;
  EXPECT_THAT(message(s), HasSubstr("kernel 0 (axpb) runs blocks of 1048576 threads; this device allows "));

  Executable too_many_blocks = axpbExecutable();
  too_many_blocks.launch_plan.steps[0].parallel_extent = int64_t{1} << 40;
  s = loadStatus(too_many_blocks);
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented) << s;
  EXPECT_THAT(message(s), HasSubstr("launches 1099511627776 blocks; this device allows"));

  Executable empty = axpbExecutable();
  empty.code.clear();
  EXPECT_EQ(errorKind(loadStatus(empty)), ErrorKind::kInvalidProgram);  // validateExecutable

  // PTX the JIT refuses: the error carries the JIT's log, which names the
  // bad symbol.
  Executable bad_ptx = axpbExecutable();
  std::string text(bad_ptx.code.begin(), bad_ptx.code.end());
  text.replace(text.find("0f40000000"), 10, "accy_fake_jit_error");
  bad_ptx.code = bytesOf(text);
  s = loadStatus(bad_ptx);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(message(s), HasSubstr("the driver's JIT refused the PTX module: cuModuleLoadDataEx failed with "
                                    "CUDA_ERROR_INVALID_PTX"));
  EXPECT_THAT(message(s), HasSubstr("; its log:\n"));
  EXPECT_THAT(message(s), HasSubstr("accy_fake_jit_error"));
}



TEST_P(CudaBackendTest, TimedLaunchesSayHowLongTheKernelsTook) {
  std::shared_ptr<const LoadedProgram> p = load(twoKernelExecutable());
  ASSERT_NE(p, nullptr);
  const auto* cuda = dynamic_cast<const cuda::CudaProgram*>(p.get());
  ASSERT_NE(cuda, nullptr);
  std::vector<float> x(kN, 1.0f), y(kN);
  const std::vector<std::span<const std::byte>> inputs = {in(x)};
  const std::vector<std::span<std::byte>> outputs = {out(y)};
  float ms = -1.0f;
  const absl::Status s = cuda->launchTimed(inputs, outputs, &ms);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GE(ms, 0.0f);
  EXPECT_LT(ms, 10000.0f);
  EXPECT_EQ(y[0], 6.0f);
}

TEST_P(CudaBackendTest, BuffersInRegisteredHostMemoryRunTheSame) {
  std::shared_ptr<const LoadedProgram> p = load(axpbExecutable());
  ASSERT_NE(p, nullptr);
  // One page-aligned region holding a, b and y, like a daemon's
  // shared-memory region (pinning works on whole pages).
  constexpr size_t kBytes = (3 * kN * sizeof(float) + 4095) / 4096 * 4096;
  std::unique_ptr<float, decltype(&std::free)> memory(static_cast<float*>(std::aligned_alloc(4096, kBytes)),
                                                      &std::free);
  ASSERT_NE(memory, nullptr);
  const std::span<float> region(memory.get(), 3 * kN);
  for (int64_t i = 0; i < kN; ++i) {
    region[i] = static_cast<float>(i);
    region[kN + i] = 1.0f;
    region[2 * kN + i] = -1.0f;
  }
  absl::StatusOr<std::unique_ptr<cuda::HostRegistration>> registered =
      cuda::registerHostMemory(cudaDevice(backend()), memory.get(), kBytes);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_NE((*registered)->devicePointer(), 0u);
  const std::span<std::byte> whole = std::as_writable_bytes(region);
  for (int round = 0; round < 2; ++round) {
    const absl::Status s =
        launch(*p, {whole.subspan(0, kN * 4), whole.subspan(kN * 4, kN * 4)}, {whole.subspan(2 * kN * 4, kN * 4)});
    ASSERT_TRUE(s.ok()) << s;
    for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(region[2 * kN + i], 2.0f * static_cast<float>(i) + 1.0f) << i;
  }
  registered->reset();  // unregistered before the memory goes
}



// axpb renamed accy_fake_fault: the fake driver's kernel that faults.
Executable faultExecutable() {
  Executable exe = axpbExecutable();
  std::string text(exe.code.begin(), exe.code.end());
  text.replace(text.find(".entry axpb("), 12, ".entry accy_fake_fault(");
  exe.code = bytesOf(text);
  exe.launch_plan.steps[0].kernel = "accy_fake_fault";
  return exe;
}

// What only the fake driver can show: a fault inside a kernel, and that
// everything a backend made is given back.
TEST(CudaOnTheFakeDriver, AFaultInAKernelIsLaunchFailedAndTheNextLaunchRuns) {
  std::unique_ptr<Backend> b = makeCudaBackendFrom(BackendOptions{}, fakeDriver());
  ASSERT_TRUE(b->info().available) << b->info().unavailable_reason;
  absl::StatusOr<std::shared_ptr<const LoadedProgram>> p = b->load(faultExecutable());
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<float> a(kN), c(kN), y(kN);
  for (int round = 0; round < 2; ++round) {
    const absl::Status s = launch(**p, {in(a), in(c)}, {out(y)});
    EXPECT_EQ(errorKind(s), ErrorKind::kLaunchFailed) << s;
    EXPECT_THAT(message(s), HasSubstr("cuStreamSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS "
                                      "(fake driver says CUDA_ERROR_ILLEGAL_ADDRESS) at "));
    EXPECT_THAT(message(s), HasSubstr("cuda_program.cc:"));
  }
}

// A sticky fault (what an illegal address is on a real GPU): the launch
// fails, the probe after it fails too, and the device reports itself lost,
// through health() and to every later launch, fast and saying why.
TEST(CudaOnTheFakeDriver, AStickyFaultMarksTheDeviceLost) {
  std::unique_ptr<Backend> b = makeCudaBackendFrom(BackendOptions{}, fakeDriver());
  ASSERT_TRUE(b->info().available) << b->info().unavailable_reason;
  std::shared_ptr<const LoadedProgram> good;
  {
    absl::StatusOr<std::shared_ptr<const LoadedProgram>> p = b->load(axpbExecutable());
    ASSERT_TRUE(p.ok()) << p.status();
    good = *p;
  }
  absl::StatusOr<std::shared_ptr<const LoadedProgram>> faulty = b->load(faultExecutable());
  ASSERT_TRUE(faulty.ok()) << faulty.status();
  std::vector<float> a(kN, 1.0f), c(kN, 1.0f), y(kN);
  ASSERT_TRUE(launch(*good, {in(a), in(c)}, {out(y)}).ok());
  EXPECT_TRUE(b->health().ok());
  setenv("ACCY_FAKE_CUDA_STICKY", "1", 1);
  const absl::Status fault = launch(**faulty, {in(a), in(c)}, {out(y)});
  unsetenv("ACCY_FAKE_CUDA_STICKY");
  EXPECT_EQ(errorKind(fault), ErrorKind::kLaunchFailed) << fault;
  const absl::Status health = b->health();
  EXPECT_EQ(errorKind(health), ErrorKind::kLaunchFailed);
  EXPECT_THAT(message(health), HasSubstr("is lost: after "));
  EXPECT_THAT(message(health), HasSubstr("a probe failed too"));
  // A good program on the same device now fails at once with that reason.
  const absl::Status after = launch(*good, {in(a), in(c)}, {out(y)});
  EXPECT_EQ(message(after), message(health));
  auto clear = reinterpret_cast<void (*)()>(dlsym(dlopen(fakeDriver().c_str(), RTLD_NOW | RTLD_NOLOAD),
                                                  "accy_fake_cuda_clear_fault"));
  ASSERT_NE(clear, nullptr);
  clear();
}

TEST(CudaOnTheFakeDriver, EverythingABackendMadeIsGivenBack) {
  const char* kinds[] = {"contexts", "allocations", "registrations", "modules", "streams", "events", "current"};
  std::unique_ptr<Backend> first = makeCudaBackendFrom(BackendOptions{}, fakeDriver());  // loads the fake
  ASSERT_TRUE(first->info().available);
  first.reset();
  std::vector<int> before;
  for (const char* k : kinds) before.push_back(fakeLive(k));
  {
    std::unique_ptr<Backend> b = makeCudaBackendFrom(BackendOptions{}, fakeDriver());
    auto one = b->load(axpbExecutable());
    auto two = b->load(twoKernelExecutable());
    ASSERT_TRUE(one.ok() && two.ok());
    std::vector<float> x(kN, 1.0f), y(kN), z(kN);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        std::vector<float> mine(kN);
        for (int round = 0; round < 5; ++round) EXPECT_TRUE(launch(**two, {in(x)}, {out(mine)}).ok());
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_TRUE(launch(**one, {in(x), in(y)}, {out(z)}).ok());
    auto registered = b->registerHostMemory(z.data(), z.size() * 4);
    ASSERT_TRUE(registered.ok()) << registered.status();
    EXPECT_NE(*registered, nullptr);
    EXPECT_GT(fakeLive("allocations"), before[1]);
    EXPECT_GT(fakeLive("streams"), before[4]);
    EXPECT_EQ(fakeLive("modules"), before[3] + 2);
    EXPECT_EQ(fakeLive("current"), 0);
  }
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(fakeLive(kinds[i]), before[i]) << kinds[i];
}

}  // namespace
}  // namespace accy::backends

namespace accy::backends {
namespace {

// A launch whose stream never finishes (the fake driver's hung kernel)
// fails after the launch timeout instead of waiting forever, marks the
// device lost, and later launches fail at once with the reason.
TEST(CudaOnTheFakeDriver, AHungLaunchIsBoundedAndMarksTheDeviceLost) {
  std::unique_ptr<Backend> b =
      makeCudaBackendFrom(BackendOptions{.launch_timeout_ms = 50}, fakeDriver());
  ASSERT_TRUE(b->info().available) << b->info().unavailable_reason;
  absl::StatusOr<std::shared_ptr<const LoadedProgram>> p = b->load(axpbExecutable());
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<float> a(kN, 1.0f), c(kN, 1.0f), y(kN);
  const std::span<const std::byte> ins[] = {std::as_bytes(std::span(a)), std::as_bytes(std::span(c))};
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(y))};
  ASSERT_TRUE((*p)->launch(ins, outs).ok());
  setenv("ACCY_FAKE_CUDA_HANG", "1", 1);
  const auto start = std::chrono::steady_clock::now();
  const absl::Status hung = (*p)->launch(ins, outs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  unsetenv("ACCY_FAKE_CUDA_HANG");
  EXPECT_EQ(errorKind(hung), ErrorKind::kLaunchFailed);
  EXPECT_THAT(std::string(hung.message()), ::testing::HasSubstr("did not finish within 50 ms"));
  EXPECT_LT(seconds, 2.0);
  EXPECT_FALSE(b->health().ok());
  EXPECT_THAT(std::string((*p)->launch(ins, outs).message()), ::testing::HasSubstr("did not finish within 50 ms"));
}

}  // namespace
}  // namespace accy::backends
