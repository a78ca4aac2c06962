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

TEST(GpuMap, FullReductionsUseTheTree) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"p", 100000}})},
                                  [](tensor::Builder&, Args a) { return a[0].sum("p"); }));
  auto g = mapToGpu(m, GpuMapOptions{});
  ASSERT_TRUE(g.ok());
  auto d = describeGpuKernel(g->kernels[0]);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->form, GpuForm::kTreeReduce);
  // 100,000 points: split into parts of at least 32 points per invocation
  // (128 invocations here), and a second kernel combines the parts.
  EXPECT_EQ(d->split, 100000 / (128 * 32));
  ASSERT_EQ(g->kernels.size(), 2u);
  // A floating sum's parts are compensated: each part and its error.
  EXPECT_EQ(g->buffers[d->partials].shape, std::vector<int64_t>{2 * d->split});
  EXPECT_EQ(g->buffers[d->partials].role, BufferRole::kTemp);
  auto parts = describeGpuKernel(g->kernels[1]);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->leaf->domain[0].extent, 2 * d->split);
  EXPECT_TRUE(parts->leaf->compensated);
  EXPECT_EQ(parts->leaf->buffer, g->kernels[0].body[0].buffer);
  EXPECT_TRUE(verifyModule(*g).ok()) << verifyModule(*g);
  // An integer sum's parts are plain.
  Module ints = *fuseKernels(lowered({tensor::spec(DType::i32, {{"p", 100000}})},
                                     [](tensor::Builder&, Args a) { return a[0].sum("p"); }));
  auto gi = mapToGpu(ints, GpuMapOptions{});
  ASSERT_TRUE(gi.ok());
  auto di = describeGpuKernel(gi->kernels[0]);
  ASSERT_TRUE(di.ok()) << di.status();
  EXPECT_EQ(gi->buffers[di->partials].shape, std::vector<int64_t>{di->split});
  // Splitting off: one kernel.
  auto whole = mapToGpu(m, GpuMapOptions{.min_points_per_invocation_to_split = 0});
  EXPECT_EQ(whole->kernels.size(), 1u);
}

TEST(GpuMap, ProductsAreTiledThroughWorkgroupMemory) {
  // c[b, i, j] = sum_k a[b, i, k] * w[k, j]: i is the row (only a uses it),
  // j the column (only w), b a batch loop.
  Module m = *fuseKernels(lowered(
      {tensor::spec(DType::f32, {{"b", 3}, {"i", 40}, {"k", 24}}), tensor::spec(DType::f32, {{"k", 24}, {"j", 33}})},
      [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); }));
  auto g = mapToGpu(m, GpuMapOptions{.max_workgroup_size = 1024});
  ASSERT_TRUE(g.ok());
  const Kernel& k = g->kernels[0];
  EXPECT_EQ(k.gpu_tile, 16);
  EXPECT_EQ(k.workgroup_size, 256);
  auto d = describeGpuKernel(k);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->form, GpuForm::kTiledProduct);
  ASSERT_EQ(d->loops.size(), 3u);
  EXPECT_EQ(d->loops[d->row].extent, 40);
  EXPECT_EQ(d->loops[d->col].extent, 33);
  EXPECT_EQ(d->micro, 4);  // rows and columns >= 2 x 16: 4 x 4 outputs per invocation
  EXPECT_EQ(d->batch, std::vector<int>{0});
  EXPECT_EQ(d->loops[0].tag, LoopTag::kGpuBlock);
  EXPECT_EQ(d->leaf->domain[0].tag, LoopTag::kSerial);
  EXPECT_TRUE(verifyModule(*g).ok());
  // A small device limit gives a smaller square tile.
  auto small = mapToGpu(m, GpuMapOptions{.max_workgroup_size = 64});
  EXPECT_EQ(small->kernels[0].gpu_tile, 8);
  EXPECT_EQ(small->kernels[0].workgroup_size, 64);
  // Register blocking off, or too few rows for it: one output per invocation.
  EXPECT_EQ(describeGpuKernel(mapToGpu(m, GpuMapOptions{.max_workgroup_size = 1024, .micro_tile = 1})->kernels[0])->micro, 1);
  Module narrow = *fuseKernels(lowered(
      {tensor::spec(DType::f32, {{"i", 20}, {"k", 24}}), tensor::spec(DType::f32, {{"k", 24}, {"j", 33}})},
      [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); }));
  EXPECT_EQ(describeGpuKernel(mapToGpu(narrow, GpuMapOptions{.max_workgroup_size = 1024})->kernels[0])->micro, 1);
  // Below the threshold (or with tiling off) it is one invocation per output.
  auto off = mapToGpu(m, GpuMapOptions{.min_extent_for_tiles = 0});
  EXPECT_EQ(off->kernels[0].gpu_tile, 0);
  EXPECT_EQ(describeGpuKernel(off->kernels[0])->form, GpuForm::kSerialReduce);
}

TEST(GpuMap, MatrixVectorProductsAreNotTiled) {
  // No column loop: w has no axis the output keeps.
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"i", 64}, {"k", 64}}), tensor::spec(DType::f32, {{"k", 64}})},
                                  [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); }));
  auto g = mapToGpu(m, GpuMapOptions{.max_workgroup_size = 256});
  EXPECT_EQ(g->kernels[0].gpu_tile, 0);
}

TEST(GpuMap, DescribeRefusesUnmappedKernels) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"a", 3}})},
                                  [](tensor::Builder&, Args a) { return a[0] * 2; }));
  auto d = describeGpuKernel(m.kernels[0]);
  EXPECT_EQ(errorKind(d.status()), ErrorKind::kInvalidProgram);
  EXPECT_THAT(d.status().message(), ::testing::HasSubstr(m.kernels[0].name));
}

}  // namespace
}  // namespace accy::choir
