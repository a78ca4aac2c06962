#include "compiler/choir/passes/loop_order.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

TEST(LoopOrder, ContiguousStoreLoopGoesInnermost) {
  // out[b][a] = x[a][b] * 2: the fused store walks b contiguously.
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"a", 4}, {"b", 8}})}, [](tensor::Builder&, Args a) {
    return (a[0] * 2).rename("a", "c").transpose({"b", "c"});
  }));
  auto ordered = orderLoops(m);
  ASSERT_TRUE(ordered.ok());
  EXPECT_TRUE(verifyModule(*ordered).ok());
  // Innermost loop has extent of the contiguous output axis.
  const auto hs = testing::loops(*ordered);
  ASSERT_FALSE(hs.empty());
  EXPECT_EQ(hs.back().extent, 4);
}

TEST(LoopOrder, MatrixProductAccumulatesInTheOutput) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 4}, {"k", 5}}), tensor::spec(DType::f32, {{"k", 5}, {"j", 6}})},
                     [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); });
  auto ordered = orderLoops(*fuseKernels(m));
  ASSERT_TRUE(ordered.ok());
  EXPECT_TRUE(verifyModule(*ordered).ok());
  const std::string text = toText(*ordered);
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("reduce")));  // rewritten into stores
  EXPECT_THAT(text, ::testing::HasSubstr("add(out0["));
}

TEST(LoopOrder, ConvolutionWeightsAreRelaidForTheOutputLoop) {
  // out[h, w, o] = sum over (c, kh, kw) of x[c, h + kh, w + kw] * k[o, c, kh, kw]:
  // the short window loop is a poor vector loop and o walks k with a stride,
  // so a kernel first copies k into [c, kh, kw, o] and the product
  // accumulates in the output along o.
  Module m = lowered({tensor::spec(DType::f32, {{"c", 4}, {"h", 10}, {"w", 12}}),
                      tensor::spec(DType::f32, {{"o", 8}, {"c", 4}, {"kh", 3}, {"kw", 3}})},
                     [](tensor::Builder&, Args a) {
                       return dot(a[0].window("h", "kh", 3).window("w", "kw", 3), a[1], {"c", "kh", "kw"});
                     });
  auto ordered = orderLoops(*fuseKernels(m));
  ASSERT_TRUE(ordered.ok());
  ASSERT_TRUE(verifyModule(*ordered).ok()) << verifyModule(*ordered);
  ASSERT_EQ(ordered->kernels.size(), 2u) << toText(*ordered);
  EXPECT_THAT(ordered->kernels[0].name, ::testing::HasSubstr("_relayout0"));
  const std::string text = toText(*ordered);
  EXPECT_THAT(text, ::testing::HasSubstr("temp f32[4, 3, 3, 8]"));
  EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr("reduce")));
  // A weight tensor that differs per output row is not copied.
  Module per_row = lowered({tensor::spec(DType::f32, {{"c", 4}, {"h", 10}, {"w", 12}}),
                            tensor::spec(DType::f32, {{"h", 8}, {"o", 8}, {"c", 4}, {"kh", 3}})},
                           [](tensor::Builder&, Args a) {
                             return dot(a[0].window("h", "kh", 3), a[1], {"c", "kh"});
                           });
  auto kept = orderLoops(*fuseKernels(per_row));
  ASSERT_TRUE(kept.ok());
  EXPECT_THAT(toText(*kept), ::testing::Not(::testing::HasSubstr("_relayout")));
}

// A long sum into a small output (a convolution's weight gradient): a
// kernel zeroes the output first, and the sum runs with the domain's outer
// loops outside the output's rows, the longest row loop split in 4 parts
// outermost; each output element adds its terms in the domain's order.
// An output too large for the caches, or a domain with few outer steps,
// keeps the row-by-row form.
TEST(LoopOrder, LongSumIntoASmallOutputRunsItsDomainOutermost) {
  auto gradient = [](int64_t batch, int64_t h) {
    return lowered({tensor::spec(DType::f32, {{"b", batch}, {"c", 32}, {"h", h}, {"w", 12}}),
                    tensor::spec(DType::f32, {{"b", batch}, {"h", h - 2}, {"w", 10}, {"o", 16}})},
                   [](tensor::Builder&, Args a) {
                     return dot(a[0].window("h", "kh", 3).window("w", "kw", 3), a[1], {"b", "h", "w"});
                   });
  };
  auto ordered = orderLoops(*fuseKernels(gradient(4, 10)));
  ASSERT_TRUE(ordered.ok());
  ASSERT_TRUE(verifyModule(*ordered).ok()) << verifyModule(*ordered);
  ASSERT_EQ(ordered->kernels.size(), 2u) << toText(*ordered);
  EXPECT_THAT(ordered->kernels[0].name, ::testing::HasSubstr("_zero"));
  std::vector<int64_t> nest;  // the sum's loops, outermost first
  for (const Stmt* s = &ordered->kernels[1].body[0]; s->kind == StmtKind::kLoop; s = &s->body[0]) {
    nest.push_back(s->loop.extent);
  }
  // parts of c, b, h, kh, kw, c in a part, w, o
  EXPECT_THAT(nest, ::testing::ElementsAre(4, 4, 8, 3, 3, 8, 10, 16)) << toText(*ordered);
  EXPECT_THAT(toText(*ordered), ::testing::Not(::testing::HasSubstr("reduce")));
  // Two outer steps (b, h) are too few: the rows stay outermost.
  auto few = orderLoops(*fuseKernels(gradient(1, 3)));
  ASSERT_TRUE(few.ok());
  EXPECT_THAT(toText(*few), ::testing::Not(::testing::HasSubstr("_zero")));
}

TEST(LoopOrder, ReductionPutsUnitStrideDomainLoopInnermost) {
  Module m = lowered({tensor::spec(DType::f32, {{"a", 3}, {"b", 7}})},
                     [](tensor::Builder&, Args a) { return a[0].sum({"b", "a"}); });
  auto ordered = orderLoops(*fuseKernels(m));
  const Stmt& r = ordered->kernels[0].body[0];
  ASSERT_EQ(r.kind, StmtKind::kReduce);
  EXPECT_EQ(r.domain.back().extent, 7);
}

}  // namespace
}  // namespace accy::choir
