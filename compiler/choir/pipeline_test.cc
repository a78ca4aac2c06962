// The pipeline on the tone program and on shapes that exercise each pass.
#include "compiler/choir/pipeline.h"

#include "accy/accy.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/verifier.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using ::testing::HasSubstr;
using tensor::Builder;
using tensor::DType;
using tensor::Spec;
using tensor::Value;
using Args = std::span<const Value>;

tensor::Program tone(int64_t guesses) {
  std::vector<Spec> specs = {guesses ? tensor::spec(DType::f32, {{"guess", guesses}})
                                     : tensor::spec(DType::f32, {}),
                             tensor::spec(DType::f32, {{"point", 16}}),
                             tensor::spec(DType::f32, {{"point", 16}})};
  auto p = tensor::define("mismatch", specs, [](Builder&, Args a) {
    Value d = a[0].mul(a[1]).sin().sub(a[2]);
    return d.mul(d).sum("point");
  });
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(Pipeline, ToneFusesIntoOneReduction) {
  PipelineOptions o;
  o.vectorize.vector_bytes = 64;
  o.verify_each_pass = true;
  std::vector<std::string> passes;
  o.dump = [&](std::string_view pass, const Module&) { passes.emplace_back(pass); };
  auto m = compileToChoir(tone(8), o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(passes, (std::vector<std::string>{"lower", "fuse", "narrow", "loop-order", "epilogues", "partition", "tile", "vectorize",
                                              "parallelize"}));
  ASSERT_EQ(m->kernels.size(), 1u) << toText(*m);
  const std::string text = toText(*m);
  EXPECT_THAT(text, HasSubstr("reduce add out0["));
  EXPECT_THAT(text, HasSubstr("[vectorized x16]"));
  EXPECT_THAT(text, HasSubstr("sin(mul(in0[")) << text;
}

TEST(Pipeline, UnfusedLoweringHasAKernelPerOp) {
  PipelineOptions o;
  o.fuse = false;
  auto m = compileToChoir(tone(0), o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->kernels.size(), 5u) << toText(*m);
  EXPECT_TRUE(verifyModule(*m).ok());
}

TEST(Pipeline, LargeSumIsTiledAndParallel) {
  auto p = tensor::define("big", std::vector<Spec>{tensor::spec(DType::f32, {{"n", 1 << 20}})},
                          [](Builder&, Args a) { return a[0].sum("n"); });
  ASSERT_TRUE(p.ok());
  PipelineOptions o;
  o.vectorize.vector_bytes = 32;
  o.parallelize.threads = 2;
  auto m = compileToChoir(*p, o);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->kernels.size(), 3u) << toText(*m);  // tiles, their f64 combine, its rounding
  const std::string text = toText(*m);
  EXPECT_THAT(text, HasSubstr("[cpu_parallel]"));
  EXPECT_THAT(text, HasSubstr("[vectorized x8]"));
  EXPECT_THAT(text, HasSubstr("out0_tiles"));
}

TEST(Pipeline, LoopOrderPutsContiguousStoreInnermost) {
  // A transposed copy: out[b][a] = x[a][b]; the store is contiguous in b.
  auto p = tensor::define("t", std::vector<Spec>{tensor::spec(DType::f32, {{"a", 4}, {"b", 8}})},
                          [](Builder&, Args a) { return (a[0] * 2).transpose({"b", "a"}); });
  ASSERT_TRUE(p.ok());
  auto m = compileToChoir(*p, PipelineOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(verifyModule(*m).ok());
}

TEST(Verifier, CatchesOutOfBoundsAndUnboundVariables) {
  Module m;
  m.buffers.push_back(Buffer{"o", DType::f32, {4}, MemorySpace::kGlobal, BufferRole::kOutput, 0});
  LoopHeader h;
  h.var = m.newVar();
  h.extent = 5;
  m.kernels.push_back(Kernel{"k", {Stmt::loopOf(h, {Stmt::store(0, {Affine::var(h.var)},
                                                                 makeConstant(DType::f32, 1))})}});
  auto st = verifyModule(m);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("outside [0, 4)"));
  m.kernels[0].body[0].loop.extent = 4;
  EXPECT_TRUE(verifyModule(m).ok());
  m.kernels[0].body[0].body[0].index = {Affine::var(7)};
  EXPECT_FALSE(verifyModule(m).ok());
}

// tanh(dot(x, w) + b) * 2: the elementwise kernel after the product runs in
// the product's row loop, after the row's sums, reading them in place.
TEST(Pipeline, AProductsEpilogueRunsInItsRowLoop) {
  PipelineOptions o;
  o.vectorize.vector_bytes = 64;
  o.verify_each_pass = true;
  auto p = tensor::define("layer",
                          {tensor::spec(DType::f32, {{"i", 20}, {"k", 30}}), tensor::spec(DType::f32, {{"k", 30}, {"j", 40}}),
                           tensor::spec(DType::f32, {{"j", 40}})},
                          [](Builder&, Args a) { return (a[0].dot(a[1], "k") + a[2]).tanh() * 2; });
  ASSERT_TRUE(p.ok());
  auto m = compileToChoir(*p, o);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->kernels.size(), 1u) << toText(*m);
  const Stmt& rows = m->kernels[0].body[0];
  ASSERT_EQ(rows.kind, StmtKind::kLoop);
  ASSERT_EQ(rows.body.size(), 3u) << toText(*m);  // zero, accumulate, epilogue
  EXPECT_EQ(rows.body[2].loop.tag, LoopTag::kVectorized);
  EXPECT_THAT(toText(*m), HasSubstr("tanh"));
  // Without fusion the product and the elementwise kernel stay apart.
  o.fuse = false;
  auto unfused = compileToChoir(*p, o);
  ASSERT_TRUE(unfused.ok());
  EXPECT_GT(unfused->kernels.size(), 1u);
}

// The GPU pipeline: lower, fuse, tf32 (when asked), gpu-map; the tf32 pass
// marks the kernel of a `dot` (with its fused producer) and not a sum of
// products written out by hand.
TEST(Pipeline, GpuPipelineMarksDotKernelsForTf32) {
  auto p = tensor::define("two",
                          {tensor::spec(DType::f32, {{"i", 32}, {"k", 32}}), tensor::spec(DType::f32, {{"k", 32}, {"j", 32}})},
                          [](Builder&, Args a) {
                            return std::vector<Value>{(a[0] * 2).dot(a[1], "k"), (a[0] * a[0]).sum("k")};
                          });
  ASSERT_TRUE(p.ok()) << p.status();
  for (bool tf32 : {false, true}) {
    PipelineOptions o;
    o.verify_each_pass = true;
    o.gpu_map.emplace();
    o.tf32 = tf32;
    std::vector<std::string> passes;
    o.dump = [&](std::string_view pass, const Module&) { passes.emplace_back(pass); };
    auto m = compileToChoir(*p, o);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(passes, tf32 ? (std::vector<std::string>{"lower", "fuse", "tf32", "gpu-map"})
                           : (std::vector<std::string>{"lower", "fuse", "gpu-map"}));
    int marked = 0;
    for (const Kernel& k : m->kernels) {
      if (!k.tf32) continue;
      ++marked;
      EXPECT_NE(k.gpu_tile, 0) << "the marked kernel is the tiled product: " << toText(*m);
      EXPECT_THAT(toText(*m), HasSubstr("[tf32]"));
    }
    EXPECT_EQ(marked, tf32 ? 1 : 0) << toText(*m);
    EXPECT_TRUE(verifyModule(*m).ok());
  }
}

// An embedding gradient on a GPU: the rows of the table cut into ranges,
// one invocation per range and column walking every index in order, the
// store guarded by the range (lower.h): work that grows with the ranges,
// not the vocabulary. A short row set keeps the reduction form, and a walk
// longer than the device allows (llvmpipe) keeps it too.
TEST(Pipeline, AGpuScatterIntoManyRowsWalksItsIndicesPerRange) {
  auto program = [](int64_t vocab, int64_t tokens) {
    auto p = tensor::define("embedding_grad",
                            {tensor::spec(DType::i32, {{"token", tokens}}),
                             tensor::spec(DType::f32, {{"token", tokens}, {"feature", 64}})},
                            [&](Builder& b, Args a) {
                              const Value zeros = b.constant(0, DType::f32).broadcast("vocab", vocab).broadcast("feature", 64);
                              return tensor::scatterAdd(zeros, "vocab", a[0], a[1]);
                            });
    EXPECT_TRUE(p.ok()) << p.status();
    return *p;
  };
  auto forms = [](const tensor::Program& p, int64_t max_serial) {
    PipelineOptions o;
    o.verify_each_pass = true;
    o.gpu_map.emplace();
    o.gpu_map->max_serial_domain = max_serial;
    auto m = compileToChoir(p, o);
    EXPECT_TRUE(m.ok()) << m.status();
    // The nests' leaves point into the module, which ends here: whether
    // the leaf has a guard is read now.
    struct Mapped {
      GpuForm form;
      GpuNest nest;
      bool guarded;
    };
    std::vector<Mapped> out;
    for (const Kernel& k : m->kernels) {
      auto d = describeGpuKernel(k);
      EXPECT_TRUE(d.ok()) << d.status();
      out.push_back({d->form, *d, d->leaf->guard != nullptr});
      out.back().nest.leaf = nullptr;
    }
    return out;
  };
  const auto wide = forms(program(100000, 1000), INT64_MAX);
  ASSERT_EQ(wide.size(), 2u);  // zero the output, then scatter into it
  EXPECT_EQ(wide[0].form, GpuForm::kElementwise);
  ASSERT_EQ(wide[1].form, GpuForm::kOrderedStores);
  const GpuNest& scatter = wide[1].nest;
  // 16384 / 64 columns = 256 ranges of 391 rows, then the 64 columns.
  ASSERT_EQ(scatter.loops.size(), 2u);
  EXPECT_EQ(scatter.loops[0].extent, 256);
  EXPECT_EQ(scatter.loops[1].extent, 64);
  ASSERT_EQ(scatter.serial.size(), 1u);
  EXPECT_EQ(scatter.serial[0].extent, 1000);  // every token, in order
  EXPECT_TRUE(wide[1].guarded);
  // Fewer rows than ranges: the reduction per element.
  const auto narrow = forms(program(100, 1000), INT64_MAX);
  for (const auto& k : narrow) EXPECT_NE(k.form, GpuForm::kOrderedStores);
  // A walk past the device's loop limit: the reduction, whose long walks cooperate.
  const auto limited = forms(program(100000, 1000), 999);
  for (const auto& k : limited) EXPECT_NE(k.form, GpuForm::kOrderedStores);
  // The conformance row scatter_add_ranges at p = 17 (tests/op_cases.h):
  // indices matched along q, rows of 5 x 256 columns: 9 ranges of 2 rows.
  auto row = tensor::define("ranges", {tensor::spec(DType::f32, {{"p", 17}, {"q", 5}})}, [](Builder& b, Args a) {
    Value idx = (a[0].cast(DType::i32) * 9 + 1).rename("p", "j");
    Value updates = a[0].rename("p", "j").broadcast("w", 256) * 2 + b.iota("w", 256, DType::f32);
    return tensor::scatterAdd(a[0].broadcast("w", 256), "p", idx, updates);
  });
  ASSERT_TRUE(row.ok()) << row.status();
  int ordered = 0;
  for (const auto& k : forms(*row, INT64_MAX)) {
    if (k.form != GpuForm::kOrderedStores) continue;
    ++ordered;
    EXPECT_EQ(k.nest.loops[0].extent, 9);
  }
  EXPECT_EQ(ordered, 1);
}

}  // namespace
}  // namespace accy::choir
