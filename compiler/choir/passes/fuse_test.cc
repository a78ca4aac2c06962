#include "compiler/choir/passes/fuse.h"

#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

TEST(Fuse, ElementwiseChainBecomesOneKernel) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}})}, [](tensor::Builder&, Args a) {
    return ((a[0] * 2 + 1) * a[0]).abs();
  });
  EXPECT_EQ(m.kernels.size(), 4u);
  auto fused = fuseKernels(m);
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(fused->kernels.size(), 1u) << toText(*fused);
  EXPECT_TRUE(verifyModule(*fused).ok());
  EXPECT_EQ(fused->buffers.size(), 2u);  // the temporaries are gone
}

TEST(Fuse, ProducerFoldsIntoTheReductionThatReadsIt) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}})},
                     [](tensor::Builder&, Args a) { return (a[0] * a[0]).sum("i"); });
  auto fused = fuseKernels(m);
  ASSERT_EQ(fused->kernels.size(), 1u);
  EXPECT_EQ(fused->kernels[0].body[0].kind, StmtKind::kReduce);
}

TEST(Fuse, ExpensiveProducerReadAtTwoPlacesStaysSeparate) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}})}, [](tensor::Builder&, Args a) {
    tensor::Value e = a[0].exp();
    return e.slice("i", 0, 4) + e.slice("i", 4, 8);
  });
  auto fused = fuseKernels(m);
  EXPECT_EQ(fused->kernels.size(), 2u) << toText(*fused);
  // A cheap producer read at two places is still inlined.
  Module cheap = lowered({tensor::spec(DType::f32, {{"i", 8}})}, [](tensor::Builder&, Args a) {
    tensor::Value e = a[0] * 3;
    return e.slice("i", 0, 4) + e.slice("i", 4, 8);
  });
  EXPECT_EQ(fuseKernels(cheap)->kernels.size(), 1u);
}

TEST(Fuse, ExpensiveProducerUnderABroadcastStaysSeparate) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}}), tensor::spec(DType::f32, {{"j", 64}})},
                     [](tensor::Builder&, Args a) { return (a[0].exp() * a[1]).sum("j"); });
  auto fused = fuseKernels(m);
  EXPECT_EQ(fused->kernels.size(), 2u) << toText(*fused);
}

}  // namespace
}  // namespace accy::choir
