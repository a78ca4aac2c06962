// The target registry: what it answers, and that the devices agree with it.
#include "compiler/codegen/targets.h"

#include <set>
#include <string>

#include "backends/registry.h"
#include "base/errors.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/codegen/spirv/compile.h"
#include "compiler/tensor/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/msl/shim.h"
#include "tools/webgpu/page_backend.h"

namespace accy::codegen {
namespace {

using ::testing::HasSubstr;

tensor::Program axpb() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 64}})};
  return *tensor::define("axpb", specs,
                         [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2.0 + 1.0; });
}

TEST(Targets, NamesAreUniqueAndEveryEntryIsComplete) {
  std::set<std::string> names;
  for (const TargetEntry& t : targets()) {
    EXPECT_TRUE(names.insert(std::string(t.name)).second) << t.name;
    EXPECT_FALSE(t.summary.empty()) << t.name;
    EXPECT_FALSE(t.emits.empty()) << t.name;
    EXPECT_FALSE(t.modes.empty()) << t.name;
    EXPECT_FALSE(t.device.empty()) << t.name;
    EXPECT_NE(t.compile, nullptr) << t.name;
    if (!t.code_emit.empty()) {
      EXPECT_TRUE(checkEmit(t, t.code_emit).ok()) << t.name;
    }
  }
  EXPECT_TRUE(names.count("x86_64") && names.count("spirv") && names.count("ptx") && names.count("reference"));
}

// Each entry's device runs it, and a device runs only registered targets:
// the two lists cannot drift apart.
TEST(Targets, EveryDeviceAgreesWithTheRegistry) {
  for (const auto& backend : backends::makeBackends(backends::BackendOptions{})) {
    for (const std::string& name : backend->info().targets) {
      absl::StatusOr<const TargetEntry*> t = findTarget(name);
      ASSERT_TRUE(t.ok()) << backend->info().name << " runs " << name << ": " << t.status();
      EXPECT_EQ((*t)->device, backend->info().name) << name;
    }
  }
  for (const TargetEntry& t : targets()) {
    if (t.device == "browser") continue;  // web/accy.js, not a backend
    if (t.device == "msl-shim") {         // the CPU check of tools/msl, not a library backend
      const mslshim::ShimBackend shim("/tmp");
      EXPECT_EQ(shim.info().name, t.device);
      EXPECT_THAT(shim.info().targets, ::testing::Contains(std::string(t.name)));
      continue;
    }
    if (t.device == "node") {  // web/accy_wasm.js in node (tools/webgpu/page_backend.h)
      const std::unique_ptr<webgpu::PageBackend> node = webgpu::nodeBackend("/tmp");
      EXPECT_EQ(node->info().name, t.device);
      EXPECT_THAT(node->info().targets, ::testing::Contains(std::string(t.name)));
      continue;
    }
    bool found = false;
    for (const auto& backend : backends::makeBackends(backends::BackendOptions{})) {
      if (backend->info().name != t.device) continue;
      found = true;
      EXPECT_THAT(backend->info().targets, ::testing::Contains(std::string(t.name)));
    }
    EXPECT_TRUE(found) << t.name << " names device " << t.device << ", which no backend is";
  }
}

TEST(Targets, UnknownNamesAreRefusedListingTheBuildsTargets) {
  absl::StatusOr<const TargetEntry*> t = findTarget("vhdl");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(errorKind(t.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("target vhdl is not available in this build"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(targetNames()));
  EXPECT_THAT(targetNames(), HasSubstr("spirv, ptx"));
}

TEST(Targets, ModesAreTheEntrysAndTheRefusalNamesWhoHasIt) {
  EXPECT_TRUE(checkMode("ptx", ArithmeticMode::kTf32).ok());
  EXPECT_TRUE(checkMode("spirv", ArithmeticMode::kFast).ok());
  for (const char* t : {"x86_64", "spirv", "reference"}) {
    const absl::Status st = checkMode(t, ArithmeticMode::kTf32);
    EXPECT_EQ(errorKind(st), ErrorKind::kInvalidArgument) << t;
    EXPECT_THAT(std::string(st.message()), ::testing::EndsWith(std::string("tf32 arithmetic runs on NVIDIA tensor "
                                                                           "cores and needs CUDA (target ptx); target ") +
                                                               t + " has no tf32 mode"));
  }
  EXPECT_EQ(errorKind(checkMode("nonesuch", ArithmeticMode::kExact)), ErrorKind::kInvalidArgument);
}

TEST(Targets, EmitsAreTheEntrys) {
  const TargetEntry* spirv = *findTarget("spirv");
  EXPECT_TRUE(checkEmit(*spirv, "spirv").ok());
  const absl::Status st = checkEmit(*spirv, "asm");
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("target spirv does not write --emit=asm (it writes spirv, artifact)"));
}

TEST(Targets, CompileForChecksTheModeAndTheDeviceDescription) {
  const tensor::Program p = axpb();
  // Defaults when no device is given; the device's own description else.
  absl::StatusOr<executable::Executable> spirv = compileFor("spirv", p, CompileRequest{});
  ASSERT_TRUE(spirv.ok()) << spirv.status();
  EXPECT_EQ(spirv->target, "spirv");
  spirv::TargetInfo small;
  small.max_workgroup_size = 32;
  spirv = compileFor("spirv", p, CompileRequest{.device = small});
  ASSERT_TRUE(spirv.ok()) << spirv.status();
  EXPECT_EQ(spirv->launch_plan.steps[0].group_size, 32);
  // The request's mode is the one compiled, whatever the description says.
  ptx::TargetInfo fast;
  fast.mode = ArithmeticMode::kFast;
  absl::StatusOr<executable::Executable> ptx = compileFor("ptx", p, CompileRequest{.device = fast});
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_EQ(ptx->isa, "sm_90");
  // A description of another target's device is a caller's mistake, named.
  absl::StatusOr<executable::Executable> wrong = compileFor("ptx", p, CompileRequest{.device = small});
  EXPECT_EQ(errorKind(wrong.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("ptx::TargetInfo"));
  EXPECT_EQ(errorKind(compileFor("spirv", p, CompileRequest{.mode = ArithmeticMode::kTf32}).status()),
            ErrorKind::kInvalidArgument);
  absl::StatusOr<executable::Executable> reference = compileFor("reference", p, CompileRequest{});
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_EQ(reference->target, "reference");
  EXPECT_EQ(reference->artifact_plan.buffers.size(), 2u);
}

}  // namespace
}  // namespace accy::codegen
