#include "compiler/choir/passes/partition.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/loop_order.h"
#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;
using ::testing::HasSubstr;
using ::testing::Not;

Module ordered(std::vector<tensor::Spec> specs, std::function<tensor::Value(tensor::Builder&, Args)> fn) {
  return *orderLoops(*fuseKernels(lowered(std::move(specs), std::move(fn))));
}

// Points of the kernels' loops, reduction domains included.
int64_t points(const std::vector<Stmt>& stmts) {
  int64_t n = 0;
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::kLoop) n += s.loop.extent * std::max<int64_t>(1, points(s.body));
    if (s.kind == StmtKind::kStore) n += 1;
    if (s.kind == StmtKind::kReduce) {
      int64_t d = 1;
      for (const LoopHeader& h : s.domain) d *= h.extent;
      n += d;
    }
  }
  return n;
}

int64_t points(const Module& m) {
  int64_t n = 0;
  for (const Kernel& k : m.kernels) n += points(k.body);
  return n;
}

TEST(Partition, PaddedConvolutionSplitsIntoAnAffineInteriorAndEdges) {
  // 2-D, 3x3, padding 1, 4 -> 8 channels, over 40 x 12.
  Module m = ordered({tensor::spec(DType::f32, {{"c", 4}, {"h", 40}, {"w", 12}}),
                      tensor::spec(DType::f32, {{"o", 8}, {"c", 4}, {"kh", 3}, {"kw", 3}})},
                     [](tensor::Builder&, Args a) {
                       tensor::Value x = a[0].pad("h", 1, 1).pad("w", 1, 1).window("h", "kh", 3).window("w", "kw", 3);
                       return dot(x, a[1], {"c", "kh", "kw"});
                     });
  ASSERT_THAT(toText(m), HasSubstr("where("));
  auto split = partitionBoundaries(m);
  ASSERT_TRUE(split.ok());
  ASSERT_TRUE(verifyModule(*split).ok()) << verifyModule(*split) << toText(*split);
  // The same points, in more loops: the outermost loop (h, 40 >= 32) is one
  // kernel per piece, the interior of h split again along w.
  EXPECT_EQ(points(*split), points(m));
  ASSERT_EQ(split->kernels.size(), m.kernels.size() + 2) << toText(*split);
  const Kernel& interior = split->kernels[split->kernels.size() - 2];
  EXPECT_THAT(interior.name, HasSubstr("_part1"));
  ASSERT_EQ(interior.body.size(), 1u);
  EXPECT_EQ(interior.body[0].loop.extent, 38);
  // Along w: the edges, and the interior with its guards and clamps gone.
  const std::vector<Stmt>& w = interior.body[0].body;
  ASSERT_EQ(w.size(), 3u) << toText(*split);
  EXPECT_EQ(w[0].loop.extent, 1);
  EXPECT_EQ(w[1].loop.extent, 10);
  EXPECT_EQ(w[2].loop.extent, 1);
  Module only_interior = *split;
  only_interior.kernels = {interior};
  only_interior.kernels[0].body[0].body = {w[1]};
  const std::string text = toText(only_interior);
  EXPECT_THAT(text, Not(HasSubstr("where(")));
  EXPECT_THAT(text, Not(HasSubstr("min(")));
  EXPECT_THAT(text, Not(HasSubstr(" where i"))) << "a load still binds a clamped position";
  // At an edge the guard is decided: a constant padding value, no test.
  Module edge = only_interior;
  edge.kernels[0].body[0].body = {w[0]};
  EXPECT_THAT(toText(edge), Not(HasSubstr("ge(")));
  EXPECT_THAT(toText(edge), HasSubstr("mul(0:f32"));
}

// A padding of 2 (a window reaching two past the edge, as a convolution's
// transposed form pads): each edge is two rows, and each row decides a
// different set of taps, so the edges split row by row and no piece keeps
// a guard or a clamp.
TEST(Partition, EdgesWiderThanOneRowSplitRowByRow) {
  Module m = ordered({tensor::spec(DType::f32, {{"c", 4}, {"w", 40}}), tensor::spec(DType::f32, {{"o", 8}, {"c", 4}, {"k", 3}})},
                     [](tensor::Builder&, Args a) {
                       return dot(a[0].pad("w", 2, 2).window("w", "k", 3), a[1], {"c", "k"});
                     });
  ASSERT_THAT(toText(m), HasSubstr("where("));
  auto split = partitionBoundaries(m);
  ASSERT_TRUE(split.ok());
  ASSERT_TRUE(verifyModule(*split).ok()) << verifyModule(*split) << toText(*split);
  EXPECT_EQ(points(*split), points(m));
  const std::string text = toText(*split);
  EXPECT_THAT(text, Not(HasSubstr("ge("))) << text;
  EXPECT_THAT(text, Not(HasSubstr("lt("))) << text;
  EXPECT_THAT(text, Not(HasSubstr("min("))) << text;
}

TEST(Partition, ShortOuterLoopsStayOneKernel) {
  // h = 20 < 32: the outermost loop stays whole, inner loops split.
  Module m = ordered({tensor::spec(DType::f32, {{"h", 20}, {"w", 9}})}, [](tensor::Builder&, Args a) {
    return a[0].pad("w", 1, 1).window("w", "k", 3).sum("k");
  });
  auto split = partitionBoundaries(m);
  ASSERT_TRUE(split.ok());
  ASSERT_TRUE(verifyModule(*split).ok());
  EXPECT_EQ(split->kernels.size(), m.kernels.size());
  EXPECT_EQ(points(*split), points(m));
  ASSERT_EQ(split->kernels[0].body.size(), 1u);
  EXPECT_EQ(split->kernels[0].body[0].loop.extent, 20);
  EXPECT_EQ(split->kernels[0].body[0].body.size(), 3u) << toText(*split);
}

TEST(Partition, DataDependentPositionsAndPlainWindowsAreLeftAlone) {
  // A take's clamp reads data: nothing decides it. A window without padding
  // has no test at all.
  for (bool take : {true, false}) {
    Module m = ordered({tensor::spec(DType::f32, {{"v", 50}, {"f", 8}}), tensor::spec(DType::i32, {{"t", 40}})},
                       [&](tensor::Builder&, Args a) {
                         return take ? tensor::take(a[0], "v", a[1]) : a[0].window("v", "k", 3).sum("k");
                       });
    auto split = partitionBoundaries(m);
    ASSERT_TRUE(split.ok());
    EXPECT_EQ(toText(*split), toText(m));
  }
}

TEST(Partition, PieceCountIsBounded) {
  // Limits: at most max_pieces per loop, max_copies per kernel.
  Module m = ordered({tensor::spec(DType::f32, {{"h", 8}, {"w", 30}})}, [](tensor::Builder&, Args a) {
    return a[0].pad("w", 1, 1).window("w", "k", 3).sum("k");
  });
  auto none = partitionBoundaries(m, PartitionOptions{.max_pieces = 2});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(toText(*none), toText(m));
  auto capped = partitionBoundaries(m, PartitionOptions{.max_copies = 0});
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(toText(*capped), toText(m));
}

}  // namespace
}  // namespace accy::choir
