// Every SPIR-V module of the conformance programs passes spirv-val, and
// what the emitter cannot do is refused by name.
#include "compiler/codegen/spirv/compile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "accy/accy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/random_programs.h"

namespace accy::spirv {
namespace {

namespace tensor = accy::tensor;

bool haveSpirvVal() { return std::system("spirv-val --version >/dev/null 2>&1") == 0; }

// Validates every module of `exe`; returns spirv-val's complaint, if any.
std::string validate(const executable::Executable& exe) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/module.spv";
  for (size_t k = 0; k < exe.launch_plan.steps.size(); ++k) {
    const uint64_t begin = exe.launch_plan.steps[k].entry_offset;
    const uint64_t end = k + 1 < exe.launch_plan.steps.size() ? exe.launch_plan.steps[k + 1].entry_offset : exe.code.size();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(exe.code.data() + begin), static_cast<std::streamsize>(end - begin));
    const std::string cmd = "spirv-val --target-env vulkan1.1 " + path + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    if (pclose(p) != 0) return "kernel " + exe.launch_plan.steps[k].kernel + ": " + out;
  }
  return "";
}

TargetInfo lavapipeLike(bool fast) {
  TargetInfo t;
  t.max_workgroup_size = 1024;
  t.float64 = true;
  t.int64 = true;
  t.storage_8bit = true;
  t.mode = fast ? ArithmeticMode::kFast : ArithmeticMode::kExact;
  return t;
}

TEST(Spirv, RandomConformanceProgramsValidate) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  int compiled = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    testing::RandomOptions o;
    o.dtype = seed % 3 ? tensor::DType::f32 : tensor::DType::f64;
    auto c = testing::randomProgram(seed, o);
    TargetInfo t = lavapipeLike(/*fast=*/seed % 2 == 0);
    t.subgroup_size = seed % 4 < 2 ? 8 : 0;  // half with subgroup shuffles
    auto exe = compileProgram(c.program, t);
    ASSERT_TRUE(exe.ok()) << "seed " << seed << ": " << exe.status() << "\n" << tensor::toText(c.program);
    EXPECT_EQ(validate(*exe), "") << "seed " << seed << "\n" << tensor::toText(c.program);
    ++compiled;
  }
  EXPECT_EQ(compiled, 150);
}

TEST(Spirv, ToneProgramsValidateAndUseAWorkgroupTree) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", 4096}}),
                                tensor::spec(tensor::DType::f32, {{"point", 4096}})};
  auto p = tensor::define("mismatch", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    tensor::Value d = a[0].mul(a[1]).sin().sub(a[2]);
    return d.mul(d).sum("point");
  });
  auto exe = compileProgram(*p, lavapipeLike(true));
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(validate(*exe), "");
  EXPECT_EQ(exe->launch_plan.steps.size(), 1u);
  EXPECT_EQ(exe->launch_plan.steps[0].parallel_extent, 1);  // one workgroup reduces the one output
}

TEST(Spirv, ExactModeTranscendentalsValidate) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  for (tensor::DType d : {tensor::DType::f32, tensor::DType::f64}) {
    const tensor::Spec specs[] = {tensor::spec(d, {{"i", 8}}), tensor::spec(d, {{"i", 8}})};
    auto p = tensor::define("t", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
      return {a[0].sin(), a[0].cos(), a[0].exp(), a[0].log(), a[0].tanh(), a[0].sigmoid(), a[0].pow(a[1])};
    });
    auto exe = compileProgram(*p, lavapipeLike(false));
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_EQ(validate(*exe), "") << tensor::dtypeName(d);
  }
}

// Whether module `k` of `exe` declares OpCapability `cap`.
bool hasCapability(const executable::Executable& exe, size_t k, uint32_t cap) {
  const uint64_t begin = exe.launch_plan.steps[k].entry_offset;
  const uint64_t end = k + 1 < exe.launch_plan.steps.size() ? exe.launch_plan.steps[k + 1].entry_offset : exe.code.size();
  std::vector<uint32_t> words((end - begin) / 4);
  std::memcpy(words.data(), exe.code.data() + begin, words.size() * 4);
  for (size_t w = 5; w < words.size(); w += std::max<uint32_t>(words[w] >> 16, 1)) {
    if ((words[w] & 0xffff) == 17 /* OpCapability */ && words[w + 1] == cap) return true;
  }
  return false;
}

TEST(Spirv, TiledProductsAndSubgroupTreesValidate) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  for (tensor::DType d : {tensor::DType::f32, tensor::DType::f64, tensor::DType::i32}) {
    // A batched product with ragged tiles, and a long sum (tree).
    const tensor::Spec specs[] = {tensor::spec(d, {{"b", 2}, {"i", 37}, {"k", 19}}), tensor::spec(d, {{"k", 19}, {"j", 21}}),
                                  tensor::spec(d, {{"p", 5000}})};
    auto p = tensor::define("mm", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
      return {a[0].dot(a[1], "k"), a[2].max("p")};
    });
    ASSERT_TRUE(p.ok()) << p.status();
    TargetInfo t = lavapipeLike(false);
    t.subgroup_size = 8;
    auto exe = compileProgram(*p, t);
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_EQ(validate(*exe), "") << tensor::dtypeName(d);
    ASSERT_EQ(exe->launch_plan.steps.size(), 2u);
    EXPECT_EQ(exe->launch_plan.steps[0].group_size, 256);   // 16 x 16 tile
    EXPECT_EQ(exe->launch_plan.steps[0].parallel_extent, 2 * 3 * 2);  // batch x row tiles x column tiles
    EXPECT_FALSE(hasCapability(*exe, 0, 66));
    EXPECT_TRUE(hasCapability(*exe, 1, 66 /* GroupNonUniformShuffleRelative */));
    t.subgroup_size = 0;
    auto plain = compileProgram(*p, t);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_FALSE(hasCapability(*plain, 1, 66));
  }
}

TEST(Spirv, MissingDeviceFeaturesAreRefusedByName) {
  TargetInfo no8 = lavapipeLike(true);
  no8.storage_8bit = false;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 8}})};
  auto b = tensor::define("b", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].gt(0.0); });
  const absl::Status bool_refused = compileProgram(*b, no8).status();
  EXPECT_EQ(errorKind(bool_refused), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(bool_refused.message()), ::testing::HasSubstr("bool buffers"));
  EXPECT_THAT(std::string(bool_refused.message()), ::testing::HasSubstr("storageBuffer8BitAccess"));
  EXPECT_TRUE(compileProgram(*b, lavapipeLike(true)).ok());
  TargetInfo no64 = lavapipeLike(true);
  no64.float64 = false;
  const tensor::Spec d[] = {tensor::spec(tensor::DType::f64, {{"i", 8}})};
  auto f64 = tensor::define("d", d, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; });
  EXPECT_THAT(compileProgram(*f64, no64).status().message(), ::testing::HasSubstr("shaderFloat64"));
  TargetInfo noi64 = lavapipeLike(true);
  noi64.int64 = false;
  const tensor::Spec l[] = {tensor::spec(tensor::DType::i64, {{"i", 8}}), tensor::spec(tensor::DType::i64, {{"i", 8}})};
  auto pow64 = tensor::define("l", l, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].pow(a[1]); });
  EXPECT_THAT(compileProgram(*pow64, noi64).status().message(), ::testing::HasSubstr("shaderInt64"));
}

// Bool inputs, outputs and temporaries (one byte per element): u8 arrays
// under StorageBuffer8BitAccess, without the Int8 capability.
TEST(Spirv, BoolBuffersValidate) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  using tensor::DType;
  for (int64_t n : {8, 4096}) {  // 4096: the max/min reductions take the workgroup tree
    const tensor::Spec specs[] = {tensor::spec(DType::bool_, {{"i", n}}), tensor::spec(DType::bool_, {{"i", n}}),
                                  tensor::spec(DType::f32, {{"i", n}}), tensor::spec(DType::i32, {{"i", n}})};
    auto p = tensor::define("bools", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
      return {a[0].max(a[1]),  a[0].min(a[1]),  a[0].eq(a[1]),       a[0].lt(a[1]),
              a[2].gt(0.0),    tensor::where(a[0], a[2], a[2] * 2), a[0].cast(DType::f32), a[3].cast(DType::bool_),
              a[0].max("i"),   a[1].min("i"),   a[2].lt(1.0).max("i"), a[0].cast(DType::i32).sum("i")};
    });
    ASSERT_TRUE(p.ok()) << p.status();
    for (bool fast : {false, true}) {
      auto exe = compileProgram(*p, lavapipeLike(fast));
      ASSERT_TRUE(exe.ok()) << exe.status();
      EXPECT_EQ(validate(*exe), "") << "n=" << n;
      for (size_t k = 0; k < exe->launch_plan.steps.size(); ++k) {
        EXPECT_TRUE(hasCapability(*exe, k, 4448 /* StorageBuffer8BitAccess */)) << "kernel " << k;
        EXPECT_FALSE(hasCapability(*exe, k, 39 /* Int8 */)) << "kernel " << k;
      }
    }
  }
}

// Integer pow: a structured square-and-multiply loop, also inside the
// serial and workgroup-tree reduction loops.
TEST(Spirv, IntegerPowValidates) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  for (tensor::DType d : {tensor::DType::i32, tensor::DType::i64}) {
    for (int64_t n : {8, 4096}) {
      const tensor::Spec specs[] = {tensor::spec(d, {{"i", n}}), tensor::spec(d, {{"i", n}})};
      auto p = tensor::define("ipow", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
        return {a[0].pow(a[1]), a[0].pow(a[1]).pow(a[0]).sum("i"), tensor::where(a[0].lt(a[1]), a[0].pow(3), a[1])};
      });
      ASSERT_TRUE(p.ok()) << p.status();
      auto exe = compileProgram(*p, lavapipeLike(false));
      ASSERT_TRUE(exe.ok()) << exe.status();
      EXPECT_EQ(validate(*exe), "") << tensor::dtypeName(d) << " n=" << n;
    }
  }
}

TEST(Spirv, ExactModeArithmeticValidates) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::i32, {{"i", 100}}), tensor::spec(tensor::DType::i32, {{"i", 100}})};
  auto p = tensor::define("ints", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
    return {a[0] / a[1], a[0].max(a[1]).sum("i"), a[0].cast(tensor::DType::f32).abs().sqrt(),
            tensor::where(a[0].lt(a[1]), a[0], -a[1]), a[0].cast(tensor::DType::f32).cast(tensor::DType::i32)};
  });
  auto exe = compileProgram(*p, lavapipeLike(false));
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(validate(*exe), "");
}

}  // namespace
}  // namespace accy::spirv

namespace accy::spirv {
namespace {

// A device that bounds an invocation's loop iterations (llvmpipe: 65,535 in
// all) gets long reductions split across workgroups, so that no invocation
// runs long; a kernel that would still pass the bound is refused by name
// rather than compiled to compute less.
TEST(Spirv, LoopIterationLimitsAreRespectedOrRefused) {
  TargetInfo cpu_device = lavapipeLike(false);
  cpu_device.cooperative_workgroups = false;
  cpu_device.max_loop_iterations = 65535;
  const tensor::Spec long_sum[] = {tensor::spec(tensor::DType::f32, {{"i", int64_t{1} << 22}})};
  auto sum = tensor::define("sum", long_sum, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("i"); });
  ASSERT_TRUE(sum.ok());
  auto limited = compileProgram(*sum, cpu_device);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ(limited->launch_plan.steps.size(), 2u) << "the sum is split, then its parts combined";
  EXPECT_EQ(validate(*limited), "");
  cpu_device.max_loop_iterations = 0;  // no limit: one invocation sums it all
  auto unlimited = compileProgram(*sum, cpu_device);
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  EXPECT_EQ(unlimited->launch_plan.steps.size(), 1u);

  TargetInfo tiny = lavapipeLike(false);
  tiny.max_workgroup_count = 4;
  tiny.max_loop_iterations = 100;
  const tensor::Spec many[] = {tensor::spec(tensor::DType::f32, {{"i", 1000000}})};
  auto twice = tensor::define("twice", many, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; });
  const absl::Status refused = compileProgram(*twice, tiny).status();
  EXPECT_EQ(errorKind(refused), ErrorKind::kUnimplemented) << refused;
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("loop iterations in one invocation"));
  tiny.max_loop_iterations = 0;
  EXPECT_TRUE(compileProgram(*twice, tiny).ok());
}

}  // namespace
}  // namespace accy::spirv
