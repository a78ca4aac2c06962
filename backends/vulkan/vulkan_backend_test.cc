// The Vulkan backend on whatever device this machine has (lavapipe on a
// machine without a GPU): hand-assembled SPIR-V kernels from testdata/
// loaded into hand-built executables, the buffer checks, the load checks,
// concurrent launches, and a compiled program run end to end. Every test
// that needs a device skips, saying why, where the backend is unavailable.
#include "backends/vulkan/vulkan_backend.h"
#include "backends/compile_program.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/staged_program.h"
#include "backends/vulkan/vulkan_program.h"
#include "compiler/tensor/loops.h"
#include "compiler/codegen/spirv/compile.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/builder.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/tensor/evaluate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::backends {
namespace {

using ::testing::HasSubstr;
using executable::BufferPlan;
using executable::Executable;
using executable::LaunchStep;
using tensor::DType;

constexpr int64_t kN = 1000;         // elements the test kernels handle
constexpr int64_t kWorkgroups = 16;  // of 64 invocations: 1024 >= kN
constexpr char kLibrary[] = "libaccy-no-such-vulkan.so.1";

std::vector<uint8_t> readModule(const std::string& name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const std::string path =
      std::string(srcdir != nullptr ? srcdir : ".") + "/accy/backends/vulkan/testdata/" + name + ".spv";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
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

// y = a * 2 + b: bindings 0 = input 0 (a), 1 = input 1 (b), 2 = output 0 (y).
Executable axpbExecutable() {
  Executable exe;
  exe.target = "spirv";
  exe.isa = "vulkan1.1";
  exe.code = readModule("axpb");
  exe.inputs = {vec(), vec()};
  exe.outputs = {vec()};
  exe.artifact_plan.buffers = {buffer(choir::BufferRole::kInput, 0), buffer(choir::BufferRole::kInput, 1),
                               buffer(choir::BufferRole::kOutput, 0)};
  exe.launch_plan.steps = {LaunchStep{"axpb", 0, kWorkgroups, kN}};
  return exe;
}

// t = x + 1 (kernel 1, into a temporary), then y[i] = t[999 - i] * 3
// (kernel 2): bindings 0 = input 0 (x), 1 = temp (t), 2 = output 0 (y).
Executable twoKernelExecutable() {
  Executable exe;
  exe.target = "spirv";
  exe.isa = "vulkan1.1";
  exe.code = readModule("add_one");
  const std::vector<uint8_t> second = readModule("reverse_triple");
  const uint64_t second_offset = exe.code.size();
  exe.code.insert(exe.code.end(), second.begin(), second.end());
  exe.inputs = {vec()};
  exe.outputs = {vec()};
  exe.artifact_plan.buffers = {buffer(choir::BufferRole::kInput, 0), buffer(choir::BufferRole::kTemp, -1, 0),
                               buffer(choir::BufferRole::kOutput, 0)};
  exe.artifact_plan.scratch_bytes = kN * 4;
  exe.launch_plan.steps = {LaunchStep{"add_one", 0, kWorkgroups, kN},
                           LaunchStep{"reverse_triple", second_offset, kWorkgroups, kN}};
  return exe;
}

std::span<const std::byte> in(const std::vector<float>& v) { return std::as_bytes(std::span<const float>(v)); }
std::span<std::byte> out(std::vector<float>& v) { return std::as_writable_bytes(std::span<float>(v)); }

absl::Status launch(const LoadedProgram& p, std::vector<std::span<const std::byte>> inputs,
                    std::vector<std::span<std::byte>> outputs) {
  return p.launch(inputs, outputs);
}

class VulkanBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { backend_ = makeVulkanBackend(BackendOptions{}).release(); }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  void SetUp() override {
    if (!backend_->info().available) {
      GTEST_SKIP() << "Vulkan is unavailable here: " << backend_->info().unavailable_reason;
    }
  }
  const Backend& backend() const { return *backend_; }

  std::shared_ptr<const LoadedProgram> load(Executable exe) const {
    absl::StatusOr<std::shared_ptr<const LoadedProgram>> loaded = backend_->load(std::move(exe));
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? *loaded : nullptr;
  }

  static Backend* backend_;
};

Backend* VulkanBackendTest::backend_ = nullptr;

TEST(VulkanBackendInfo, DescribesItselfWhetherOrNotAvailable) {
  std::unique_ptr<Backend> b = makeVulkanBackend(BackendOptions{});
  EXPECT_EQ(b->info().name, "vulkan");
  EXPECT_EQ(b->info().targets, std::vector<std::string>{"spirv"});
  EXPECT_EQ(b->info().min_buffer_alignment, 1);
  EXPECT_EQ(b->info().available, b->info().unavailable_reason.empty()) << b->info().unavailable_reason;
}

TEST(VulkanBackendInfo, LavapipeIsAvailableOnThisMachine) {
  if (!std::filesystem::exists("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")) {
    GTEST_SKIP() << "lavapipe (mesa-vulkan-drivers) is not installed here";
  }
  std::unique_ptr<Backend> b = makeVulkanBackend(BackendOptions{});
  ASSERT_TRUE(b->info().available) << b->info().unavailable_reason;
  const std::string name = vulkanDeviceName(*b);
  // A real GPU, where there is one, is preferred over lavapipe's CPU device.
  if (name.find("(CPU,") != std::string::npos) {
    EXPECT_THAT(name, HasSubstr("llvmpipe"));
  }
  EXPECT_THAT(name, HasSubstr("Vulkan 1."));
}

TEST(VulkanBackendInfo, AMissingLoaderMakesItUnavailableWithAReason) {
  std::unique_ptr<Backend> b = makeVulkanBackendFrom(BackendOptions{}, kLibrary);
  EXPECT_EQ(b->info().name, "vulkan");
  EXPECT_FALSE(b->info().available);
  EXPECT_THAT(b->info().unavailable_reason, ::testing::StartsWith("cannot load the Vulkan library"));
  EXPECT_THAT(b->info().unavailable_reason, HasSubstr(kLibrary));
  EXPECT_EQ(vulkanDeviceName(*b), "");
  EXPECT_EQ(vulkanTargetInfo(*b).max_workgroup_size, spirv::TargetInfo{}.max_workgroup_size);

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> loaded = b->load(Executable{});
  EXPECT_EQ(errorKind(loaded.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(kLibrary));
  absl::StatusOr<Executable> compiled = compileOn(*b, tensor::Program{}, "spirv");
  EXPECT_EQ(errorKind(compiled.status()), ErrorKind::kUnimplemented);
}

TEST_F(VulkanBackendTest, TargetInfoComesFromTheDevice) {
  const spirv::TargetInfo t = vulkanTargetInfo(backend());
  // Vulkan's required minimums.
  EXPECT_GE(t.max_workgroup_size, 128u);
  EXPECT_GE(t.max_workgroup_count, 65535u);
  EXPECT_EQ(t.mode, codegen::ArithmeticMode::kExact);
  if (t.subgroup_size != 0) {
    EXPECT_EQ(t.subgroup_size & (t.subgroup_size - 1), 0u) << t.subgroup_size;
  }
  if (vulkanDeviceName(backend()).find("llvmpipe") != std::string::npos) {
    EXPECT_TRUE(t.float64);
    EXPECT_TRUE(t.int64);
    EXPECT_TRUE(t.storage_8bit);  // VK_KHR_8bit_storage: bool buffers
  }
}



TEST_F(VulkanBackendTest, OutputsStartWithTheCallersContents) {
  // Binding 1 as output 1: the kernel reads it (y = a * 2 + out1) and
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
  ASSERT_TRUE(launch(*p, {in(a)}, {out(y), out(keep)}).ok());
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(y[i], 6.0f + static_cast<float>(i)) << "element " << i;
    ASSERT_EQ(keep[i], static_cast<float>(i)) << "element " << i;
  }
}



TEST_F(VulkanBackendTest, LoadRejectsWhatIsNotASpirvExecutable) {
  auto loadStatus = [&](Executable exe) { return backend().load(std::move(exe)).status(); };

  Executable no_magic = axpbExecutable();
  no_magic.code[0] ^= 0xff;
  absl::Status s = loadStatus(no_magic);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 0 (axpb): no SPIR-V module at byte 0"));

  Executable ragged = axpbExecutable();
  ragged.code.push_back(0);
  s = loadStatus(ragged);
  EXPECT_EQ(errorKind(s), ErrorKind::kInvalidProgram) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not whole 32-bit words"));

  Executable misplaced = twoKernelExecutable();
  misplaced.launch_plan.steps[1].entry_offset += 2;
  EXPECT_EQ(errorKind(loadStatus(misplaced)), ErrorKind::kInvalidProgram);

  Executable empty = axpbExecutable();
  empty.code.clear();
  EXPECT_EQ(errorKind(loadStatus(empty)), ErrorKind::kInvalidProgram);  // validateExecutable

  Executable x86 = axpbExecutable();
  x86.target = "x86_64";
  s = loadStatus(x86);
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not x86_64"));

  Executable too_many_groups = axpbExecutable();
  too_many_groups.launch_plan.steps[0].parallel_extent = int64_t{1} << 40;
  s = loadStatus(too_many_groups);
  EXPECT_EQ(errorKind(s), ErrorKind::kUnimplemented) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("workgroups; this device allows"));
}





// Each kernel binds only the buffers it uses: a program of more buffers
// than the device allows a stage runs when every kernel stays within it,
// and a kernel past it is refused naming the kernel.
// A scan whose body is one program runs every step on the device: one
// command buffer, one submit (or one per chunk of steps), and the
// evaluator's results, carries swapped between steps, xs read and ys
// written a slice a step, the captures bound once.
TEST_F(VulkanBackendTest, AScanRunsInOneCommandBuffer) {
  auto make = [](int64_t length) {
    return tensor::define(
        "drift", {tensor::spec(DType::f32, {{"i", 16}}), tensor::spec(DType::f32, {{"step", length}, {"i", 16}}),
                  tensor::spec(DType::f32, {{"i", 16}}), tensor::spec(DType::f32, {})},
        [&](tensor::Builder& b, std::span<const tensor::Value> a) {
          const tensor::Value w = a[2];
          tensor::ScanResult r = tensor::scan(
              b, {.length = length}, {a[0], a[3]}, {a[1]},
              [&](tensor::Builder&, std::span<const tensor::Value> c,
                  std::span<const tensor::Value> x) -> absl::StatusOr<tensor::ScanStep> {
                const tensor::Value next = c[0] * 0.9f + x[0] * w;
                return tensor::ScanStep{{next, c[1] + next.sum("i")}, {next * 2.0f, next.max("i")}};
              });
          return std::vector<tensor::Value>{r.carry[0], r.carry[1], r.ys[0], r.ys[1]};
        });
  };
  for (int64_t length : {1, 2, 7, 64}) {
    SCOPED_TRACE("length " + std::to_string(length));
    auto p = make(length);
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<std::shared_ptr<const LoadedProgram>> loaded;
    auto plan = StagedProgram::build(*p, [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
      ACCY_ASSIGN_OR_RETURN(Executable exe, compileOn(backend(), stage, "spirv"));
      ACCY_ASSIGN_OR_RETURN(std::shared_ptr<const LoadedProgram> one, backend().load(std::move(exe)));
      loaded.push_back(one);
      return one;
    });
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(loaded.size(), 1u) << "the body, and no other stage";
    const auto* body = dynamic_cast<const vulkan::VulkanProgram*>(loaded[0].get());
    ASSERT_NE(body, nullptr);
    std::vector<float> x0(16), xs(length * 16), w(16);
    for (int i = 0; i < 16; ++i) {
      x0[i] = 0.1f * i - 0.5f;
      w[i] = std::cos(0.3f * i);
    }
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.01f * i);
    const std::vector<float> total0 = {0.5f};
    std::vector<std::span<const std::byte>> ins = {in(x0), in(xs), in(w), in(total0)};
    auto want = tensor::evaluate(*p, ins);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int64_t per_submit : {int64_t{0}, int64_t{40}}) {
      if (per_submit > 0) body->setCommandsPerSubmit(per_submit);
      std::vector<float> carry(16), total(1), doubled(length * 16), peak(length);
      std::vector<std::span<std::byte>> outs = {out(carry), out(total), out(doubled), out(peak)};
      const int64_t before = body->device().submits();
      ASSERT_TRUE((*plan)->launch(ins, outs).ok());
      const int64_t submits = body->device().submits() - before;
      if (per_submit == 0) {
        EXPECT_EQ(submits, 1) << "every step in one command buffer";
      } else {
        EXPECT_GT(submits, length > 4 ? 1 : 0) << "chunks of steps";
        EXPECT_LT(submits, length + 1);
      }
      for (size_t k = 0; k < outs.size(); ++k) {
        const std::vector<std::byte>& ref = (*want)[k];
        ASSERT_EQ(ref.size(), outs[k].size());
        for (size_t e = 0; e < ref.size() / 4; ++e) {
          float g, r;
          std::memcpy(&g, outs[k].data() + 4 * e, 4);
          std::memcpy(&r, ref.data() + 4 * e, 4);
          EXPECT_NEAR(g, r, 1e-4f * (1 + std::abs(r))) << "output " << k << " element " << e;
        }
      }
    }
  }
}

TEST_F(VulkanBackendTest, KernelsBindOnlyTheirOwnBuffers) {
  const uint32_t limit = vulkanTargetInfo(backend()).max_storage_buffers;
  ASSERT_GT(limit, 0u);
  const int n = static_cast<int>(limit) + 4;  // inputs, each with its own reduction and output
  const tensor::Spec v = tensor::spec(tensor::DType::f32, {{"i", 64}});
  std::vector<tensor::Spec> specs(n, v);
  auto apart = tensor::define("apart", specs, [&](tensor::Builder&, std::span<const tensor::Value> a) {
    std::vector<tensor::Value> out;
    for (int k = 0; k < n; ++k) out.push_back((a[k] * static_cast<double>(k + 1)).sum("i"));
    return out;
  });
  ASSERT_TRUE(apart.ok()) << apart.status();
  absl::StatusOr<Executable> exe = compileOn(backend(), *apart, "spirv");
  ASSERT_TRUE(exe.ok()) << exe.status();
  ASSERT_GT(exe->artifact_plan.buffers.size(), limit) << "the program must hold more buffers than a stage allows";
  std::shared_ptr<const LoadedProgram> p = load(*exe);
  ASSERT_NE(p, nullptr);
  std::vector<std::vector<float>> xs(n, std::vector<float>(64));
  std::vector<std::vector<float>> ys(n, std::vector<float>(1, -1.0f));
  std::vector<std::span<const std::byte>> ins;
  std::vector<std::span<std::byte>> outs;
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < 64; ++i) xs[k][i] = static_cast<float>((i * 7 + k) % 11) * 0.25f;
    ins.push_back(in(xs[k]));
    outs.push_back(out(ys[k]));
  }
  ASSERT_TRUE(launch(*p, ins, outs).ok());
  auto want = tensor::evaluate(*apart, ins);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int k = 0; k < n; ++k) {
    float w = 0;
    std::memcpy(&w, (*want)[k].data(), 4);
    EXPECT_NEAR(ys[k][0], w, 1e-4 * (1 + std::abs(w))) << "output " << k;
  }

  // A sum of every input at once: the device's compile keeps each kernel
  // within the limit (fusion stores a partial sum), and it runs.
  auto together = tensor::define("together", specs, [&](tensor::Builder&, std::span<const tensor::Value> a) {
    tensor::Value sum = a[0];
    for (int k = 1; k < n; ++k) sum = sum + a[k];
    return sum;
  });
  ASSERT_TRUE(together.ok()) << together.status();
  absl::StatusOr<Executable> split = compileOn(backend(), *together, "spirv");
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_GT(split->launch_plan.steps.size(), 1u) << "one kernel cannot bind all " << n + 1 << " buffers";
  std::shared_ptr<const LoadedProgram> runs = load(*split);
  ASSERT_NE(runs, nullptr);
  std::vector<float> total(64, -1.0f);
  ASSERT_TRUE(launch(*runs, ins, {out(total)}).ok());
  auto total_want = tensor::evaluate(*together, ins);
  ASSERT_TRUE(total_want.ok()) << total_want.status();
  for (int i = 0; i < 64; ++i) {
    float w = 0;
    std::memcpy(&w, (*total_want)[0].data() + 4 * i, 4);
    EXPECT_NEAR(total[i], w, 1e-4 * (1 + std::abs(w))) << "element " << i;
  }
  // Compiled without the bound, one kernel binds them all: refused, named.
  spirv::TargetInfo unbounded = vulkanTargetInfo(backend());
  unbounded.max_storage_buffers = 0;
  absl::StatusOr<Executable> one = spirv::compileProgram(*together, unbounded);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::Status st = backend().load(*one).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kUnimplemented) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(strCat("binds ", n + 1, " storage buffers; this device allows ", limit,
                                                          " a stage")));

  // A module binding a buffer the executable lacks is refused by name.
  Executable bad = axpbExecutable();
  bool patched = false;
  for (size_t at = 20; at + 16 <= bad.code.size() && !patched; at += 4) {
    uint32_t w[4];
    std::memcpy(w, bad.code.data() + at, 16);
    if (w[0] == ((4u << 16) | 71u) && w[2] == 33u) {  // OpDecorate %x Binding N
      w[3] = 99;
      std::memcpy(bad.code.data() + at, w, 16);
      patched = true;
    }
  }
  ASSERT_TRUE(patched) << "no Binding decoration found in the test module";
  st = backend().load(bad).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("kernel 0 (axpb): its module binds buffer 99; the executable has"));
}

}  // namespace
}  // namespace accy::backends

namespace accy::backends {
namespace {

// A launch the device does not finish within the launch timeout fails by
// name, marks the device lost (health), and every later launch fails at
// once with the same reason instead of waiting on the device.
TEST(VulkanLaunchTimeout, AHungLaunchMarksTheDeviceLost) {
  std::unique_ptr<Backend> backend = makeVulkanBackend(BackendOptions{.launch_timeout_ms = 1});
  if (!backend->info().available) GTEST_SKIP() << "Vulkan is unavailable here: " << backend->info().unavailable_reason;
  // 2^22 elements of a transcendental chain: far more than 1 ms on any
  // device of this machine (lavapipe).
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 1 << 22}})};
  auto p = tensor::define("long", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0].sin().cos().exp().sin().cos().exp().sin();
  });
  ASSERT_TRUE(p.ok());
  auto exe = compileOn(*backend, *p, "spirv");
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto loaded = backend->load(*std::move(exe));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<float> in(1 << 22, 0.5f), out(1 << 22);
  const std::span<const std::byte> ins[] = {std::as_bytes(std::span(in))};
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(out))};
  EXPECT_TRUE(backend->health().ok());
  const absl::Status hung = (*loaded)->launch(ins, outs);
  EXPECT_EQ(errorKind(hung), ErrorKind::kLaunchFailed);
  EXPECT_THAT(std::string(hung.message()), ::testing::HasSubstr("did not finish within 1 ms"));
  EXPECT_FALSE(backend->health().ok());
  const auto start = std::chrono::steady_clock::now();
  const absl::Status again = (*loaded)->launch(ins, outs);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
  EXPECT_THAT(std::string(again.message()), ::testing::HasSubstr("did not finish within 1 ms"));
}

}  // namespace
}  // namespace accy::backends
