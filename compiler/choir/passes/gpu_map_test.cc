#include "compiler/choir/passes/gpu_map.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

TEST(GpuMap, StoreNestsBecomeInvocationsWithAPowerOfTwoWorkgroup) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"a", 3}, {"b", 5}})},
                                  [](tensor::Builder&, Args a) { return a[0] * 2; }));
  auto g = mapToGpu(m, GpuMapOptions{.max_workgroup_size = 100});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->kernels[0].workgroup_size, 64);
  for (const LoopHeader& h : testing::loops(*g)) EXPECT_EQ(h.tag, LoopTag::kGpuThread);
  EXPECT_TRUE(verifyModule(*g).ok());
}

TEST(GpuMap, LongReductionsWithFewOutputsUseAWorkgroupTree) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"g", 8}, {"p", 4096}})},
                                  [](tensor::Builder&, Args a) { return (a[0] * a[0]).sum("p"); }));
  auto g = mapToGpu(m, GpuMapOptions{});
  const Stmt& outer = g->kernels[0].body[0];
  EXPECT_EQ(outer.loop.tag, LoopTag::kGpuBlock);
  EXPECT_EQ(outer.body[0].domain[0].tag, LoopTag::kGpuThread);
}

TEST(GpuMap, ShortReductionsRunOnePerInvocation) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"g", 10000}, {"p", 16}})},
                                  [](tensor::Builder&, Args a) { return a[0].sum("p"); }));
  auto g = mapToGpu(m, GpuMapOptions{});
  const Stmt& outer = g->kernels[0].body[0];
  EXPECT_EQ(outer.loop.tag, LoopTag::kGpuThread);
  EXPECT_EQ(outer.body[0].domain[0].tag, LoopTag::kSerial);
}

TEST(GpuMap, NonNestKernelsAreRefusedByName) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 4}, {"k", 5}}), tensor::spec(DType::f32, {{"k", 5}, {"j", 6}})},
                     [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); });
  // Give a loop two statements, as the CPU's accumulate form does.
  Stmt& loop = m.kernels[0].body[0];
  loop.body.push_back(loop.body[0]);
  auto g = mapToGpu(m, GpuMapOptions{});
  EXPECT_EQ(errorKind(g.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(g.status().message(), ::testing::HasSubstr(m.kernels[0].name));
}

}  // namespace
}  // namespace accy::choir
