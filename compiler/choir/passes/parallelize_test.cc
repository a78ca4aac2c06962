#include "compiler/choir/passes/parallelize.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/vectorize.h"
#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

TEST(Parallelize, LargeKernelOutermostLoopGoesParallel) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"a", 512}, {"b", 512}})},
                                  [](tensor::Builder&, Args a) { return a[0] * 2; }));
  auto p = parallelizeLoops(m, ParallelizeOptions{.threads = 2});
  EXPECT_EQ(p->kernels[0].body[0].loop.tag, LoopTag::kCpuParallel);
  EXPECT_TRUE(verifyModule(*p).ok());
  // One thread, or too little work: nothing changes.
  EXPECT_EQ(parallelizeLoops(m, ParallelizeOptions{.threads = 1})->kernels[0].body[0].loop.tag, LoopTag::kSerial);
  Module small = *fuseKernels(lowered({tensor::spec(DType::f32, {{"a", 8}, {"b", 8}})},
                                      [](tensor::Builder&, Args a) { return a[0] * 2; }));
  EXPECT_EQ(parallelizeLoops(small, ParallelizeOptions{.threads = 2})->kernels[0].body[0].loop.tag, LoopTag::kSerial);
}

TEST(Parallelize, SingleVectorizedLoopIsStripMinedIntoParallelTiles) {
  Module m = *vectorizeLoops(*fuseKernels(lowered({tensor::spec(DType::f32, {{"n", 1 << 20}})},
                                                  [](tensor::Builder&, Args a) { return a[0].sin(); })),
                             VectorizeOptions{.vector_bytes = 64});
  auto p = parallelizeLoops(m, ParallelizeOptions{.threads = 2});
  ASSERT_TRUE(verifyModule(*p).ok());
  const Stmt& outer = p->kernels[0].body[0];
  EXPECT_EQ(outer.loop.tag, LoopTag::kCpuParallel);
  EXPECT_EQ(outer.loop.extent, 256);
  EXPECT_EQ(outer.body[0].loop.tag, LoopTag::kVectorized);
  EXPECT_EQ(outer.body[0].loop.extent, (1 << 20) / 256);
}

TEST(Parallelize, FullReductionIsNotSplitByThisPass) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"n", 1 << 20}})},
                                  [](tensor::Builder&, Args a) { return a[0].sum("n"); }));
  auto p = parallelizeLoops(m, ParallelizeOptions{.threads = 2});
  EXPECT_EQ(p->kernels[0].body[0].kind, StmtKind::kReduce);  // the tile pass splits it
}

}  // namespace
}  // namespace accy::choir
