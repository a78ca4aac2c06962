#include "compiler/choir/passes/vectorize.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

LoopHeader innermost(const Module& m) { return testing::loops(m).back(); }

TEST(Vectorize, FloatElementwiseLoopGetsLanesByElementSize) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"i", 40}})},
                                  [](tensor::Builder&, Args a) { return a[0].sin() * 2; }));
  auto v = vectorizeLoops(m, VectorizeOptions{.vector_bytes = 64});
  EXPECT_EQ(innermost(*v).tag, LoopTag::kVectorized);
  EXPECT_EQ(innermost(*v).vector_width, 16);
  Module d = *fuseKernels(lowered({tensor::spec(DType::f64, {{"i", 40}})},
                                  [](tensor::Builder&, Args a) { return a[0] * 2; }));
  EXPECT_EQ(innermost(*vectorizeLoops(d, VectorizeOptions{.vector_bytes = 32})).vector_width, 4);
}

TEST(Vectorize, StridedIntegerShortOrCastLoopsStayScalar) {
  auto tag = [](Module m) { return innermost(*vectorizeLoops(*fuseKernels(m), VectorizeOptions{.vector_bytes = 64})).tag; };
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f32, {{"i", 40}, {"j", 40}})},
                        [](tensor::Builder&, Args a) { return a[0].transpose({"j", "i"}) * 2; })),
            LoopTag::kSerial);  // the load walks the inner loop with stride 40
  EXPECT_EQ(tag(lowered({tensor::spec(DType::i32, {{"i", 40}})}, [](tensor::Builder&, Args a) { return a[0] * 2; })),
            LoopTag::kSerial);
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f32, {{"i", 3}})}, [](tensor::Builder&, Args a) { return a[0] * 2; })),
            LoopTag::kSerial);  // shorter than the narrowest vector (16 bytes)
  EXPECT_EQ(tag(lowered({tensor::spec(DType::i32, {{"i", 40}})},
                        [](tensor::Builder&, Args a) { return a[0].cast(DType::f32) * 2; })),
            LoopTag::kSerial);
}

// An embedding lookup reads whole rows at data-dependent positions: the
// position does not change along the feature loop, which vectorizes. When
// the index changes along the inner loop (a gather per element), it does not.
TEST(Vectorize, RowsAtDataDependentPositionsVectorizeAlongTheRow) {
  auto tag = [](Module m) { return innermost(*vectorizeLoops(*fuseKernels(m), VectorizeOptions{.vector_bytes = 32})).tag; };
  const std::vector<tensor::Spec> specs = {tensor::spec(DType::f32, {{"vocab", 100}, {"feature", 64}}),
                                           tensor::spec(DType::i32, {{"token", 30}})};
  EXPECT_EQ(tag(lowered(specs, [](tensor::Builder&, Args a) { return take(a[0], "vocab", a[1]) * 2; })),
            LoopTag::kVectorized);
  const std::vector<tensor::Spec> per_element = {tensor::spec(DType::f32, {{"vocab", 100}, {"feature", 64}}),
                                                 tensor::spec(DType::i32, {{"feature", 64}})};
  EXPECT_EQ(tag(lowered(per_element, [](tensor::Builder&, Args a) { return take(a[0], "vocab", a[1]) * 2; })),
            LoopTag::kSerial);
}

// With gathers (x86-64), the same loops run in lanes: positions by data
// along the loop, and a stride past 1; not a stride whose lane offsets
// would pass 2^31 elements, nor an 8-byte value.
TEST(Vectorize, GathersTakeStridesAndPositionsThatFitThirtyTwoBits) {
  const VectorizeOptions gathers{.vector_bytes = 64, .lanes32 = true, .gathers = true};
  auto tag = [&](Module m) { return innermost(*vectorizeLoops(*fuseKernels(m), gathers)).tag; };
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f32, {{"i", 40}, {"j", 40}})},
                        [](tensor::Builder&, Args a) { return a[0].transpose({"j", "i"}) * 2; })),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f32, {{"vocab", 100}, {"feature", 64}}),
                         tensor::spec(DType::i32, {{"feature", 64}})},
                        [](tensor::Builder&, Args a) { return take(a[0], "vocab", a[1]) * 2; })),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f32, {{"i", 40}, {"j", int64_t{1} << 26}})},
                        [](tensor::Builder&, Args a) { return a[0].transpose({"j", "i"}) * 2; })),
            LoopTag::kSerial);  // lane offsets of 2^26 elements each
  // f64: a stride gathers, a take along the loop does not (its positions
  // would be i32 lanes beside f64 ones).
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f64, {{"i", 40}, {"j", 40}})},
                        [](tensor::Builder&, Args a) { return a[0].transpose({"j", "i"}) * 2; })),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f64, {{"vocab", 100}}), tensor::spec(DType::i32, {{"t", 64}})},
                        [](tensor::Builder&, Args a) { return take(a[0], "vocab", a[1]) * 2; })),
            LoopTag::kSerial);
  EXPECT_EQ(tag(lowered({tensor::spec(DType::f64, {{"i", 40}, {"j", int64_t{1} << 26}})},
                        [](tensor::Builder&, Args a) { return a[0].transpose({"j", "i"}) * 2; })),
            LoopTag::kSerial);
}

// A `where` whose condition is the same along the loop (a flag per row,
// read from an i32 tensor) vectorizes under uniform_conditions, its
// condition computed once per step; without it, or when the condition
// changes along the loop, the loop stays scalar.
TEST(Vectorize, ConditionsTheSameAlongTheLoopUnderUniformConditions) {
  const std::vector<tensor::Spec> specs = {tensor::spec(DType::f32, {{"row", 30}, {"feature", 64}}),
                                           tensor::spec(DType::i32, {{"row", 30}})};
  auto tag = [&](VectorizeOptions o, auto fn) { return innermost(*vectorizeLoops(*fuseKernels(lowered(specs, fn)), o)).tag; };
  auto per_row = [](tensor::Builder& b, Args a) { return a[1].gt(b.constant(0, DType::i32)).where(a[0], a[0] * 2); };
  EXPECT_EQ(tag(VectorizeOptions{.vector_bytes = 32, .uniform_conditions = true}, per_row), LoopTag::kVectorized);
  EXPECT_EQ(tag(VectorizeOptions{.vector_bytes = 32}, per_row), LoopTag::kSerial);
  const std::vector<tensor::Spec> per_element_specs = {tensor::spec(DType::f32, {{"row", 30}, {"feature", 64}}),
                                                       tensor::spec(DType::i32, {{"feature", 64}})};
  Module m = *fuseKernels(lowered(per_element_specs, [](tensor::Builder& b, Args a) {
    return a[1].gt(b.constant(0, DType::i32)).where(a[0], a[0] * 2);
  }));
  EXPECT_EQ(innermost(*vectorizeLoops(m, VectorizeOptions{.vector_bytes = 32, .uniform_conditions = true})).tag,
            LoopTag::kSerial);
}

// With int32 (wasm's i32x4): i32 loops of the ops i32 lanes have; not
// division, pow, casts or i64.
TEST(Vectorize, Int32LoopsWhenTheTargetHasI32Lanes) {
  auto tag = [](Module m) {
    return innermost(*vectorizeLoops(*fuseKernels(m), VectorizeOptions{.vector_bytes = 16, .int32 = true})).tag;
  };
  const std::vector<tensor::Spec> ints = {tensor::spec(DType::i32, {{"i", 40}})};
  EXPECT_EQ(tag(lowered(ints, [](tensor::Builder&, Args a) { return (a[0] * 3 - a[0].abs()).max(a[0].neg()); })),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(lowered(ints, [](tensor::Builder&, Args a) { return a[0].gt(2).where(a[0], a[0] + 1); })),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(lowered(ints, [](tensor::Builder&, Args a) { return a[0] / 3; })), LoopTag::kSerial);
  EXPECT_EQ(tag(lowered(ints, [](tensor::Builder&, Args a) { return a[0].pow(a[0]); })), LoopTag::kSerial);
  EXPECT_EQ(tag(lowered({tensor::spec(DType::i64, {{"i", 40}})}, [](tensor::Builder&, Args a) { return a[0] * 2; })),
            LoopTag::kSerial);
  Module r = *fuseKernels(lowered({tensor::spec(DType::i32, {{"g", 3}, {"p", 100}})},
                                  [](tensor::Builder&, Args a) { return (a[0] * a[0]).sum("p"); }));
  auto v = vectorizeLoops(r, VectorizeOptions{.vector_bytes = 16, .int32 = true});
  EXPECT_EQ(v->kernels[0].body[0].body[0].domain.back().tag, LoopTag::kVectorized);
}

// With lanes32 (x86-64): f32, i32 and u32 mixed in 4-byte lanes, with
// Threefry words, index values, constant shifts and casts to f32; not
// division, shifts by a value, float-to-integer casts, or 8-byte values.
TEST(Vectorize, MixedFourByteLanesUnderLanes32) {
  auto tag = [](const std::vector<tensor::Spec>& specs, auto fn) {
    Module m = *fuseKernels(lowered(specs, fn));
    return innermost(*vectorizeLoops(m, VectorizeOptions{.vector_bytes = 32, .lanes32 = true})).tag;
  };
  const std::vector<tensor::Spec> u = {tensor::spec(DType::u32, {{"i", 40}})};
  const std::vector<tensor::Spec> f = {tensor::spec(DType::f32, {{"i", 40}})};
  EXPECT_EQ(tag(u, [](tensor::Builder& b, Args a) {
              return (b.iota("i", 40, DType::u32) + a[0]).shiftRight(8.0).cast(DType::f32) * 0.5f;
            }),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(u, [](tensor::Builder&, Args a) { return a[0].lt(7.0).where(a[0].max(3.0), a[0].bitNot()); }),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(f, [](tensor::Builder&, Args a) { return a[0].bitcast(DType::u32).bitXor(1.0).bitcast(DType::f32); }),
            LoopTag::kVectorized);
  EXPECT_EQ(tag(u, [](tensor::Builder&, Args a) { return a[0] / 3.0; }), LoopTag::kSerial);
  EXPECT_EQ(tag(u, [](tensor::Builder&, Args a) { return a[0].shiftLeft(a[0]); }), LoopTag::kSerial);
  EXPECT_EQ(tag(f, [](tensor::Builder&, Args a) { return a[0].cast(DType::i32); }), LoopTag::kSerial);
  EXPECT_EQ(tag(u, [](tensor::Builder&, Args a) { return a[0].cast(DType::f64); }), LoopTag::kSerial);
  EXPECT_EQ(tag({tensor::spec(DType::i64, {{"i", 40}})}, [](tensor::Builder&, Args a) { return a[0] * 2.0; }),
            LoopTag::kSerial);
  // Without lanes32 an integer value keeps an f32 loop scalar.
  Module m = *fuseKernels(lowered(f, [](tensor::Builder&, Args a) { return a[0].bitcast(DType::u32).bitcast(DType::f32); }));
  EXPECT_EQ(innermost(*vectorizeLoops(m, VectorizeOptions{.vector_bytes = 32})).tag, LoopTag::kSerial);
}

TEST(Vectorize, ARowShorterThanTheWidestVectorTakesANarrowerOne) {
  auto width = [](int64_t n) {
    Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"r", 5}, {"i", n}})},
                                    [](tensor::Builder&, Args a) { return a[0] * 2; }));
    const LoopHeader h = innermost(*vectorizeLoops(m, VectorizeOptions{.vector_bytes = 64}));
    return h.tag == LoopTag::kVectorized ? h.vector_width : 0;
  };
  EXPECT_EQ(width(40), 16);
  EXPECT_EQ(width(8), 8);   // one 32-byte vector per row
  EXPECT_EQ(width(6), 4);   // one 16-byte vector and a tail
  EXPECT_EQ(width(3), 0);
}

TEST(Vectorize, ReductionInnermostDomainLoop) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"g", 3}, {"p", 100}})},
                                  [](tensor::Builder&, Args a) { return (a[0] * a[0]).sum("p"); }));
  auto v = vectorizeLoops(m, VectorizeOptions{.vector_bytes = 32});
  const Stmt& r = v->kernels[0].body[0].body[0];
  ASSERT_EQ(r.kind, StmtKind::kReduce);
  EXPECT_EQ(r.domain.back().tag, LoopTag::kVectorized);
  EXPECT_TRUE(verifyModule(*v).ok());
}

}  // namespace
}  // namespace accy::choir
