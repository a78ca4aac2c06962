// Every SPIR-V module of the conformance programs passes spirv-val, and
// what the emitter cannot do is refused by name.
#include "compiler/codegen/spirv/compile.h"

#include <cstdio>
#include <cstdlib>
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
  t.fast_math = fast;
  return t;
}

TEST(Spirv, RandomConformanceProgramsValidate) {
  if (!haveSpirvVal()) GTEST_SKIP() << "spirv-val (spirv-tools) is not installed";
  int compiled = 0;
  for (uint32_t seed = 1; seed <= 150; ++seed) {
    testing::RandomOptions o;
    o.dtype = seed % 3 ? tensor::DType::f32 : tensor::DType::f64;
    auto c = testing::randomProgram(seed, o);
    auto exe = compileProgram(c.program, lavapipeLike(/*fast=*/seed % 2 == 0));
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

TEST(Spirv, BoolBuffersAndMissingDeviceFeaturesAreRefusedByName) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 8}})};
  auto b = tensor::define("b", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].gt(0.0); });
  EXPECT_THAT(compileProgram(*b, lavapipeLike(true)).status().message(), ::testing::HasSubstr("bool buffers"));
  TargetInfo no64 = lavapipeLike(true);
  no64.float64 = false;
  const tensor::Spec d[] = {tensor::spec(tensor::DType::f64, {{"i", 8}})};
  auto f64 = tensor::define("d", d, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; });
  EXPECT_THAT(compileProgram(*f64, no64).status().message(), ::testing::HasSubstr("shaderFloat64"));
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
