#include "compiler/choir/passes/fuse.h"

#include <map>

#include "compiler/choir/passes/pass_testing.h"
#include "compiler/choir/rewrite.h"
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
  // (64 points: a reduction; a few points lower as their sum written out.)
  Module m = lowered({tensor::spec(DType::f32, {{"i", 64}})},
                     [](tensor::Builder&, Args a) { return (a[0] * a[0]).sum("i"); });
  auto fused = fuseKernels(m);
  ASSERT_EQ(fused->kernels.size(), 1u);
  EXPECT_EQ(fused->kernels[0].body[0].kind, StmtKind::kReduce);
}

TEST(Fuse, StencilPassesFuseThroughPadsWithLoadsOfTheirOwn) {
  // A separable blur: the horizontal pass (3 taps of a padded row) is read
  // at 3 clamped positions of the vertical pass's pad. It is inlined at
  // each: no temporary, and every copy of a load binds variables of its own.
  Module m = lowered({tensor::spec(DType::f32, {{"y", 16}, {"x", 16}})}, [](tensor::Builder&, Args a) {
    tensor::Value h = a[0].pad("x", 1, 1).window("x", "kx", 3).sum("kx") / 3.0f;
    return h.pad("y", 1, 1).window("y", "ky", 3).sum("ky") / 3.0f;
  });
  auto fused = fuseKernels(m);
  ASSERT_TRUE(fused.ok());
  ASSERT_TRUE(verifyModule(*fused).ok()) << verifyModule(*fused);
  ASSERT_EQ(fused->kernels.size(), 1u) << toText(*fused);
  EXPECT_EQ(fused->buffers.size(), 2u) << "a temporary is left";
  std::map<int, int> binders;
  visitStmts(fused->kernels[0].body, [&](const Stmt& s) {
    if (s.value) {
      visitExpr(s.value, [&](const Expr& e) {
        for (int v : e.bound) ++binders[v];
      });
    }
  });
  ASSERT_FALSE(binders.empty());
  for (const auto& [v, loads] : binders) EXPECT_EQ(loads, 1) << "i" << v << " is bound by " << loads << " loads";
  // A position value along the clamped dimension cannot move inside a load:
  // an iota along y read through the pad stays stored.
  Module iota = lowered({tensor::spec(DType::f32, {{"y", 16}, {"x", 16}})}, [](tensor::Builder& b, Args a) {
    tensor::Value h = a[0] + b.iota("y", 16, DType::f32);
    return h.pad("y", 1, 1).window("y", "ky", 3).sum("ky");
  });
  auto kept = fuseKernels(iota);
  ASSERT_TRUE(kept.ok());
  ASSERT_TRUE(verifyModule(*kept).ok()) << verifyModule(*kept);
  EXPECT_EQ(kept->kernels.size(), 2u) << toText(*kept);
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

// v = v + v, sixty times: each value is cheap and read twice. Copying it to
// both places at every step would make a tree of 2^60 nodes; the copies are
// bounded by FuseLimits::max_duplicated_nodes, so some values stay stored.
TEST(Fuse, ACheapValueReadTwiceAtEveryStepStaysSmall) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}})}, [](tensor::Builder&, Args a) {
    tensor::Value v = a[0];
    for (int k = 0; k < 60; ++k) v = v + v;
    return v;
  });
  auto fused = fuseKernels(m);
  ASSERT_TRUE(fused.ok());
  EXPECT_TRUE(verifyModule(*fused).ok());
  int64_t nodes = 0;
  for (const Kernel& k : fused->kernels) {
    visitStmts(k.body, [&](const Stmt& s) {
      if (s.value) nodes += exprSize(s.value);
    });
  }
  EXPECT_LE(nodes, 60 * (FuseLimits{}.max_duplicated_nodes + 2)) << toText(*fused);
  EXPECT_LT(fused->kernels.size(), 60u);  // still fused where the copies are small
}

// A long chain is cut into kernels of at most max_nodes nodes each.
TEST(Fuse, ALongChainIsCutAtTheNodeLimit) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}})}, [](tensor::Builder&, Args a) {
    tensor::Value v = a[0];
    for (int k = 0; k < 1000; ++k) v = k % 2 == 0 ? v * 1.5 : v.tanh();
    return v;
  });
  FuseLimits limits;
  limits.max_nodes = 100;
  auto fused = fuseKernels(m, limits);
  ASSERT_TRUE(fused.ok());
  EXPECT_TRUE(verifyModule(*fused).ok());
  EXPECT_GE(fused->kernels.size(), 1500u / 100);  // 1,000 ops make 1,500 nodes
  for (const Kernel& k : fused->kernels) {
    visitStmts(k.body, [&](const Stmt& s) {
      if (s.value) {
        EXPECT_LE(exprSize(s.value), limits.max_nodes) << k.name;
      }
    });
  }
}

// A balanced sum of 32 products needs 7 live values; a limit of 4 keeps
// its inner sums stored.
TEST(Fuse, AnExpressionNeedingMoreRegistersThanTheLimitIsSplit) {
  Module m = lowered({tensor::spec(DType::f32, {{"i", 8}})}, [](tensor::Builder&, Args a) {
    std::vector<tensor::Value> level;
    for (int k = 0; k < 32; ++k) level.push_back(a[0] * (1.0 + k));
    while (level.size() > 1) {
      std::vector<tensor::Value> next;
      for (size_t k = 0; k + 1 < level.size(); k += 2) next.push_back(level[k] + level[k + 1]);
      level = next;
    }
    return level[0];
  });
  FuseLimits limits;
  limits.max_registers = 4;
  auto split = fuseKernels(m, limits);
  ASSERT_TRUE(split.ok());
  EXPECT_GT(split->kernels.size(), 1u);
  EXPECT_EQ(fuseKernels(m)->kernels.size(), 1u);  // the default limit takes it whole
}

}  // namespace
}  // namespace accy::choir
