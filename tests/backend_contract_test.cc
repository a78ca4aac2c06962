// The backend contract, written once and run on every device backend: the
// CPU, Vulkan (lavapipe here), CUDA on the fake driver (its kernels run on
// the PTX interpreter, compiler/codegen/ptx/ptxsim.py) and on the real one
// where this machine has a GPU, and the null backend
// (the reference evaluator; the template for a new device). Each case
// compiles programs for its target through the Backend interface, loads
// and launches them, and checks what every backend promises (backend.h,
// buffer_checks.h): results like the reference evaluator's, the buffer
// checks before anything runs, clear refusals of other targets'
// executables and of tf32 off CUDA, concurrent launches, and programs that
// outlive their backend. A case whose device is unavailable skips, saying
// why. What only one device can show stays in that backend's own test.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "accy/accy.h"
#include "backends/compile_program.h"
#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/null/null_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/codegen/targets.h"
#include "compiler/tensor/evaluate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::backends {
namespace {

using ::testing::HasSubstr;
using executable::Executable;
using tensor::DType;

std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/" + (workspace != nullptr ? workspace : "accy") + "/" + path;
}

struct BackendCase {
  std::string name;    // the test's suffix
  std::string device;  // info().name
  std::string target;  // what it compiles
  std::function<std::unique_ptr<Backend>()> make;
  int launch_rounds = 25;  // per thread in the concurrency test (the interpreter is slow)
};

void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.name; }

std::vector<BackendCase> cases() {
  return {
      {"Cpu", "cpu", "x86_64", [] { return makeCpuBackend(BackendOptions{}); }},
      {"Vulkan", "vulkan", "spirv", [] { return makeVulkanBackend(BackendOptions{}); }},
      {"CudaOnTheFakeDriver", "cuda", "ptx",
       [] {
         // Read by the fake driver at each launch.
         setenv("ACCY_FAKE_CUDA_PTXSIM", runfile("compiler/codegen/ptx/ptxsim.py").c_str(), 1);
         return makeCudaBackendFrom(BackendOptions{}, runfile("backends/cuda/testdata/libfake_cuda.so"));
       },
       3},
      {"Cuda", "cuda", "ptx", [] { return makeCudaBackend(BackendOptions{}); }},
      {"Null", "null", "reference", [] { return makeNullBackend(BackendOptions{}); }},
  };
}

constexpr int64_t kN = 1000;

tensor::Spec vec(int64_t n = kN) { return tensor::spec(DType::f32, {{"i", n}}); }

// y = a * 2 + b: exact in f32 for the values used.
tensor::Program axpb() {
  const tensor::Spec specs[] = {vec(), vec()};
  return *tensor::define("axpb", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return tensor::add(tensor::mul(v[0], 2.0), v[1]);
  });
}

// y = x - mean(x): a reduction whose result an elementwise kernel reads.
tensor::Program centred() {
  const tensor::Spec specs[] = {vec()};
  return *tensor::define("centred", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return tensor::sub(v[0], tensor::mean(v[0], "i"));
  });
}

// Two outputs: rows scaled and shifted, and row sums.
tensor::Program scaledRows() {
  const tensor::Spec specs[] = {tensor::spec(DType::f32, {{"row", 37}, {"col", 300}}),
                                tensor::spec(DType::f32, {{"col", 300}})};
  return *tensor::define("scaled_rows", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return std::vector<tensor::Value>{tensor::add(tensor::mul(v[0], 2.0), v[1]), tensor::sum(v[0], "col")};
  });
}

std::span<const std::byte> in(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }
std::span<std::byte> out(std::vector<float>& v) { return std::as_writable_bytes(std::span<float>(v)); }

absl::Status launch(const LoadedProgram& p, std::vector<std::span<const std::byte>> inputs,
                    std::vector<std::span<std::byte>> outputs) {
  return p.launch(inputs, outputs);
}

// Each output element within f32 rounding of the evaluator's.
void expectLikeTheEvaluator(const tensor::Program& program, const std::vector<std::span<const std::byte>>& inputs,
                            const std::vector<std::vector<float>>& got) {
  absl::StatusOr<std::vector<std::vector<std::byte>>> want = tensor::evaluate(program, inputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->size(), got.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ((*want)[o].size(), got[o].size() * 4);
    for (size_t i = 0; i < got[o].size(); ++i) {
      const double w = tensor::loadElement(DType::f32, &(*want)[o][i * 4]);
      ASSERT_NEAR(got[o][i], w, 2e-4 * (1 + std::fabs(w))) << "output " << o << ", element " << i;
    }
  }
}

class BackendContract : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    ASSERT_NE(backend_, nullptr);
    if (!backend_->info().available) {
      GTEST_SKIP() << GetParam().device << " is unavailable here: " << backend_->info().unavailable_reason;
    }
  }
  const Backend& backend() const { return *backend_; }
  const std::string& target() const { return GetParam().target; }

  Executable compile(const tensor::Program& p) const {
    absl::StatusOr<Executable> exe = backends::compileOn(*backend_, p, target());
    EXPECT_TRUE(exe.ok()) << exe.status();
    return exe.ok() ? *std::move(exe) : Executable{};
  }
  std::shared_ptr<const LoadedProgram> load(const tensor::Program& p) const {
    absl::StatusOr<std::shared_ptr<const LoadedProgram>> loaded = backend_->load(compile(p));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? *loaded : nullptr;
  }

  std::unique_ptr<Backend> backend_;
};

TEST_P(BackendContract, DescribesItself) {
  const DeviceInfo& info = backend().info();
  EXPECT_EQ(info.name, GetParam().device);
  EXPECT_THAT(info.targets, ::testing::Contains(target()));
  EXPECT_GE(info.min_buffer_alignment, 1);
  EXPECT_TRUE(info.unavailable_reason.empty()) << info.unavailable_reason;
}

TEST_P(BackendContract, RunsAnElementwiseProgramExactly) {
  std::shared_ptr<const LoadedProgram> p = load(axpb());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->executable().target, target());
  std::vector<float> a(kN), b(kN), y(kN, -1.0f);
  for (int64_t i = 0; i < kN; ++i) {
    a[i] = 0.5f * static_cast<float>(i);
    b[i] = static_cast<float>(kN - i);
  }
  ASSERT_TRUE(launch(*p, {in(a), in(b)}, {out(y)}).ok());
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(y[i], a[i] * 2 + b[i]) << "element " << i;
}

TEST_P(BackendContract, AReductionFeedsAnElementwiseKernel) {
  std::shared_ptr<const LoadedProgram> p = load(centred());
  ASSERT_NE(p, nullptr);
  for (int round = 0; round < 3; ++round) {  // launch resources are reused
    std::vector<float> x(kN), y(kN, -1.0f);
    for (int64_t i = 0; i < kN; ++i) x[i] = std::sin(static_cast<float>(i * (round + 1)));
    ASSERT_TRUE(launch(*p, {in(x)}, {out(y)}).ok());
    expectLikeTheEvaluator(centred(), {in(x)}, {y});
  }
}

TEST_P(BackendContract, RunsAProgramWithTwoOutputsLikeTheEvaluator) {
  std::shared_ptr<const LoadedProgram> p = load(scaledRows());
  ASSERT_NE(p, nullptr);
  std::vector<float> m(37 * 300), r(300), scaled(37 * 300), sums(37);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i) / 7;
  ASSERT_TRUE(launch(*p, {in(m), in(r)}, {out(scaled), out(sums)}).ok());
  expectLikeTheEvaluator(scaledRows(), {in(m), in(r)}, {scaled, sums});
}

TEST_P(BackendContract, BadBuffersAreInvalidBufferBeforeAnythingRuns) {
  std::shared_ptr<const LoadedProgram> p = load(axpb());
  ASSERT_NE(p, nullptr);
  std::vector<float> a(kN, 1.0f), b(kN, 1.0f), y(kN, -7.0f), short_buffer(kN - 1);
  std::vector<float> big(2 * kN + 2, 1.0f);
  auto expectInvalid = [&](absl::Status s, const std::string& says) {
    EXPECT_EQ(errorKind(s), ErrorKind::kInvalidBuffer) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(says));
    for (float v : y) ASSERT_EQ(v, -7.0f) << "the output was written";
  };
  expectInvalid(launch(*p, {in(a)}, {out(y)}), "expected 2 input buffers, got 1");
  expectInvalid(launch(*p, {in(a), in(b)}, {}), "expected 1 output buffers, got 0");
  expectInvalid(launch(*p, {in(a), in(short_buffer)}, {out(y)}), "input 1 (f32[i=1000]) needs 4000 bytes, got 3996");
  expectInvalid(launch(*p, {in(a), in(b)}, {out(short_buffer)}), "output 0 (f32[i=1000]) needs 4000 bytes");
  const std::span<const std::byte> misaligned = std::as_bytes(std::span<const float>(big)).subspan(1, kN * 4);
  expectInvalid(launch(*p, {misaligned, in(b)}, {out(y)}), "input 0 is not aligned to 4 bytes");
  const std::span<std::byte> whole = out(big);
  expectInvalid(launch(*p, {whole.subspan(0, kN * 4), in(b)}, {whole.subspan(kN * 4 - 4, kN * 4)}),
                "output 0 shares bytes with input 0");
}

TEST_P(BackendContract, OverlappingOutputsAreInvalidBuffer) {
  std::shared_ptr<const LoadedProgram> p = load(scaledRows());
  ASSERT_NE(p, nullptr);
  std::vector<float> m(37 * 300), r(300), outputs(37 * 300 + 37);
  const std::span<std::byte> whole = out(outputs);
  const absl::Status s = launch(*p, {in(m), in(r)}, {whole.subspan(0, 37 * 300 * 4), whole.subspan(37 * 4, 37 * 4)});
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidBuffer) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("output 1 shares bytes with output 0"));
}

TEST_P(BackendContract, LoadRefusesExecutablesItCannotRun) {
  Executable other = compile(axpb());
  other.target = "nonesuch";
  absl::Status s = backend().load(other).status();
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(strCat("runs ", target(), " code, not nonesuch")));

  Executable empty = compile(axpb());
  empty.code.clear();
  s = backend().load(empty).status();
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
}

TEST_P(BackendContract, CompilesOnlyItsTarget) {
  absl::StatusOr<Executable> exe = backends::compileOn(backend(), axpb(), "nonesuch");
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kCompileFailed) << exe.status();
  EXPECT_THAT(std::string(exe.status().message()), HasSubstr(strCat("no target nonesuch; it compiles ", target())));
}

TEST_P(BackendContract, Tf32IsForPtxOnly) {
  absl::StatusOr<Executable> exe = backends::compileOn(backend(), axpb(), target(), CompileOptions{codegen::ArithmeticMode::kTf32});
  if (target() == "ptx") {
    EXPECT_TRUE(exe.ok()) << exe.status();  // no dot: nothing runs on tensor cores
    return;
  }
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kInvalidArgument) << exe.status();
  EXPECT_EQ(exe.status().message(), codegen::checkMode(target(), codegen::ArithmeticMode::kTf32).message());
}

TEST_P(BackendContract, LaunchesFromFourThreadsAtOnce) {
  std::shared_ptr<const LoadedProgram> p = load(axpb());
  ASSERT_NE(p, nullptr);
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < GetParam().launch_rounds; ++round) {
        std::vector<float> a(kN), b(kN, static_cast<float>(t)), y(kN);
        for (int64_t i = 0; i < kN; ++i) a[i] = static_cast<float>(t * 100000 + round * 1000 + i);
        if (!launch(*p, {in(a), in(b)}, {out(y)}).ok()) {
          ++failures[t];
          continue;
        }
        for (int64_t i = 0; i < kN; ++i) {
          if (y[i] != a[i] * 2 + b[i]) {
            ++failures[t];
            break;
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST_P(BackendContract, ALoadedProgramOutlivesItsBackend) {
  std::unique_ptr<Backend> own = GetParam().make();
  absl::StatusOr<std::shared_ptr<const LoadedProgram>> p = own->load(compile(axpb()));
  ASSERT_TRUE(p.ok()) << p.status();
  own.reset();
  std::vector<float> a(kN, 1.0f), b(kN, 2.0f), y(kN);
  ASSERT_TRUE(launch(**p, {in(a), in(b)}, {out(y)}).ok());
  EXPECT_EQ(y[kN - 1], 4.0f);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendContract, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<BackendCase>& info) { return info.param.name; });

}  // namespace
}  // namespace accy::backends
