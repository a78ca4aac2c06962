#include "compiler/choir/passes/parallelize.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/pipeline.h"
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

// A scatter's serial loop over its indices cannot be split; the row its
// feature loop walks is, into one part per thread, the parts loop
// outermost. Too narrow a row (fewer lanes than the vector per part) stays
// serial.
TEST(Parallelize, AScattersRowsAreSplitAcrossThreads) {
  auto scatter = [](int64_t features) {
    auto p = tensor::define("scatter",
                            {tensor::spec(DType::f32, {{"t", 4096}, {"f", features}}),
                             tensor::spec(DType::i32, {{"t", 4096}})},
                            [&](tensor::Builder& b, Args a) {
                              tensor::Value zeros =
                                  b.constant(0, DType::f32).broadcast("v", 256).broadcast("f", features);
                              return scatterAdd(zeros, "v", a[1], a[0]);
                            });
    return compileToChoir(*p, PipelineOptions{.vectorize = VectorizeOptions{.vector_bytes = 64, .uniform_conditions = true},
                                              .parallelize = ParallelizeOptions{.threads = 2}});
  };
  auto p = scatter(64);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(verifyModule(*p).ok()) << toText(*p);
  const Kernel& k = p->kernels.back();
  ASSERT_EQ(k.body[0].kind, StmtKind::kLoop) << toText(*p);
  EXPECT_EQ(k.body[0].loop.tag, LoopTag::kCpuParallel) << toText(*p);
  EXPECT_EQ(k.body[0].loop.extent, 2);
  const Stmt& tokens = k.body[0].body[0];
  EXPECT_EQ(tokens.loop.tag, LoopTag::kSerial);
  EXPECT_EQ(tokens.loop.extent, 4096);
  EXPECT_EQ(tokens.body[0].loop.extent, 32);
  EXPECT_EQ(tokens.body[0].loop.tag, LoopTag::kVectorized) << toText(*p);
  // A row of two axes: the outer one splits, the inner loop stays inside
  // each part with the part's offset in its index.
  auto two = tensor::define("scatter2",
                            {tensor::spec(DType::f32, {{"t", 4096}, {"f", 4}, {"g", 16}}),
                             tensor::spec(DType::i32, {{"t", 4096}})},
                            [&](tensor::Builder& b, Args a) {
                              tensor::Value zeros = b.constant(0, DType::f32)
                                                        .broadcast("v", 256)
                                                        .broadcast("f", 4)
                                                        .broadcast("g", 16);
                              return scatterAdd(zeros, "v", a[1], a[0]);
                            });
  auto p2 = compileToChoir(*two, PipelineOptions{.vectorize = VectorizeOptions{.vector_bytes = 64, .uniform_conditions = true},
                                                 .parallelize = ParallelizeOptions{.threads = 2},
                                                 .verify_each_pass = true});
  ASSERT_TRUE(p2.ok()) << p2.status();
  const Stmt& outer2 = p2->kernels.back().body[0];
  EXPECT_EQ(outer2.loop.tag, LoopTag::kCpuParallel) << toText(*p2);
  EXPECT_EQ(outer2.loop.extent, 2) << toText(*p2);
  EXPECT_EQ(outer2.body[0].body[0].loop.extent, 2) << toText(*p2);  // f, within a part
  const std::string part = "i" + std::to_string(outer2.loop.var);
  EXPECT_NE(toText(*p2).find("2*" + part + " + "), std::string::npos) << toText(*p2);
  // 16 features: one vector, nothing to split.
  auto narrow = scatter(16);
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(narrow->kernels.back().body[0].loop.tag, LoopTag::kSerial) << toText(*narrow);
}

// ScatterSplit::kRanges: the parts loop over ranges of the scattered axis
// goes outermost and parallel, the nest inside keeps its whole rows, and the
// store's guard is the part's range of the index (which also drops indices
// out of range). A row of one vector, which the column split leaves serial,
// splits this way; a part count that does not divide the rows is lowered
// to one that does.
TEST(Parallelize, AScattersRangesAreSplitAcrossThreads) {
  auto scatter = [](int64_t features, DType index, int threads) {
    auto p = tensor::define("scatter",
                            {tensor::spec(DType::f32, {{"t", 4096}, {"f", features}}), tensor::spec(index, {{"t", 4096}})},
                            [&](tensor::Builder& b, Args a) {
                              tensor::Value zeros =
                                  b.constant(0, DType::f32).broadcast("v", 256).broadcast("f", features);
                              return scatterAdd(zeros, "v", a[1], a[0]);
                            });
    return compileToChoir(
        *p, PipelineOptions{.vectorize = VectorizeOptions{.vector_bytes = 64, .uniform_conditions = true},
                            .parallelize = ParallelizeOptions{.threads = threads, .scatter_split = ScatterSplit::kRanges},
                            .verify_each_pass = true});
  };
  for (const DType index : {DType::i32, DType::i64}) {
    for (const int64_t features : {64, 16}) {
      for (const int threads : {2, 3, 4}) {
        auto p = scatter(features, index, threads);
        ASSERT_TRUE(p.ok()) << p.status();
        const std::string text = toText(*p);
        const Kernel& k = p->kernels.back();
        ASSERT_EQ(k.body[0].kind, StmtKind::kLoop) << text;
        EXPECT_EQ(k.body[0].loop.tag, LoopTag::kCpuParallel) << text;
        EXPECT_EQ(k.body[0].loop.extent, threads == 3 ? 2 : threads) << text;  // 256 rows: 2 parts of 128, not 3
        const Stmt& tokens = k.body[0].body[0];
        EXPECT_EQ(tokens.loop.tag, LoopTag::kSerial) << text;
        EXPECT_EQ(tokens.loop.extent, 4096) << text;
        EXPECT_EQ(tokens.body[0].loop.extent, features) << text;  // whole rows
        const std::string chunk = std::to_string(256 / k.body[0].loop.extent) + "*i" +
                                  std::to_string(k.body[0].loop.var);
        EXPECT_NE(text.find("index:" + std::string(tensor::dtypeName(index)) + "(" + chunk + ")"), std::string::npos)
            << text;
      }
    }
  }
}

}  // namespace
}  // namespace accy::choir
