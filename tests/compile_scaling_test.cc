// Compile work grows linearly with the program.
//
// Nothing here is timed: every stage of the compiler is run on programs of
// size N and 4N, and the work it did is counted (choir/work.h: expression
// nodes made, copied, visited, printed and numbered; affine terms
// substituted; and the bytes of machine code for the x86-64 emitter). A
// stage whose count grows more than 1.5 x 4 = 6 times when the program grows
// 4 times fails: a quadratic stage grows 16 times. The shapes are the ones
// bench/compile_bench.cc times (docs/PERFORMANCE.md).
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "accy/accy.h"
#include "bench/program_shapes.h"
#include "compiler/choir/lower.h"
#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/loop_order.h"
#include "compiler/choir/passes/parallelize.h"
#include "compiler/choir/passes/tile.h"
#include "compiler/choir/passes/vectorize.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/work.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/codegen/spirv/compile.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "compiler/codegen/x86_64/simd.h"
#include "gtest/gtest.h"

namespace accy {
namespace {

namespace choir = accy::choir;
using Work = std::map<std::string, int64_t>;

constexpr int kSmall = 240;
constexpr double kMaxGrowth = 6.0;  // for 4x the program

// Work units of `f`, counted on this thread.
int64_t unitsOf(const std::function<void()>& f) {
  const int64_t before = choir::workUnits();
  f();
  return choir::workUnits() - before;
}

// The work of every stage compiling `program`.
Work stageWork(const tensor::Program& program) {
  Work w;
  absl::StatusOr<choir::Module> m;
  w["lower"] = unitsOf([&] { m = choir::lowerProgram(program); });
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return w;
  w["fuse"] = unitsOf([&] { m = choir::fuseKernels(*std::move(m)); });
  w["loop order"] = unitsOf([&] { m = choir::orderLoops(*std::move(m)); });
  w["tile"] = unitsOf([&] { m = choir::tileReductions(*std::move(m), choir::TileOptions{}); });
  choir::VectorizeOptions vectorize;
  vectorize.vector_bytes = x64::vectorBytes(x64::detectIsa());
  w["vectorize"] = unitsOf([&] { m = choir::vectorizeLoops(*std::move(m), vectorize); });
  choir::ParallelizeOptions parallelize;
  parallelize.threads = 2;
  w["parallelize"] = unitsOf([&] { m = choir::parallelizeLoops(*std::move(m), parallelize); });
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return w;
  x64::EmitOptions emit;
  emit.isa = x64::detectIsa();
  absl::StatusOr<x64::CpuArtifact> artifact;
  w["x86-64 emit"] = unitsOf([&] { artifact = x64::emitModule(*m, emit); });
  EXPECT_TRUE(artifact.ok()) << artifact.status();
  if (artifact.ok()) w["x86-64 code bytes"] = static_cast<int64_t>(artifact->code.size());
  // The GPU targets, whole (their own pipeline, mapping and translation).
  w["ptx compile"] = unitsOf([&] {
    auto exe = ptx::compileProgram(program, ptx::TargetInfo{});
    EXPECT_TRUE(exe.ok()) << exe.status();
  });
  w["spirv compile"] = unitsOf([&] {
    auto exe = spirv::compileProgram(program, spirv::TargetInfo{});
    EXPECT_TRUE(exe.ok()) << exe.status();
  });
  return w;
}

void expectLinear(const std::string& shape, const std::function<tensor::Program(int)>& make) {
  const tensor::Program small = make(kSmall);
  const tensor::Program large = make(4 * kSmall);
  ASSERT_GE(large.nodes.size(), 3 * small.nodes.size()) << shape << ": the larger program is not larger";
  const Work a = stageWork(small);
  const Work b = stageWork(large);
  for (const auto& [stage, units] : a) {
    const int64_t grown = b.at(stage);
    // A stage that does (almost) nothing stays within a small constant.
    if (units < 50) {
      EXPECT_LT(grown, 50 * kMaxGrowth) << shape << ", " << stage;
      continue;
    }
    const double ratio = static_cast<double>(grown) / static_cast<double>(units);
    std::printf("%-10s %-18s %10lld -> %10lld units: %.2fx\n", shape.c_str(), stage.c_str(),
                static_cast<long long>(units), static_cast<long long>(grown), ratio);
    EXPECT_LE(ratio, kMaxGrowth) << shape << ", " << stage << ": " << units << " units for " << small.nodes.size()
                                 << " nodes, " << grown << " for " << large.nodes.size() << " nodes";
  }
}

tensor::Program orFail(absl::StatusOr<tensor::Program> p) {
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : tensor::Program{};
}

TEST(CompileScaling, ChainOfFusedOps) {
  expectLinear("chain", [](int n) { return orFail(shapes::chain(n)); });
}

TEST(CompileScaling, ManyReductions) {
  expectLinear("reductions", [](int n) { return orFail(shapes::reductions(n)); });
}

TEST(CompileScaling, WideFanOut) {
  expectLinear("fanout", [](int n) { return orFail(shapes::fanout(n)); });
}

TEST(CompileScaling, PerceptronWithItsGradient) {
  expectLinear("mlp", [](int n) {
    tensor::Function loss = shapes::mlpLoss(shapes::mlpLayers(n));
    std::vector<int> wrt;
    for (int k = 1; k < static_cast<int>(loss.program().inputs.size()); ++k) wrt.push_back(k);
    auto grad = loss.valueAndGrad({.wrt = wrt});
    EXPECT_TRUE(grad.ok()) << grad.status();
    return grad.ok() ? grad->program() : tensor::Program{};
  });
}

// The counts do see quadratic work: printing every prefix of a chain (what
// the emitters once did to key common subexpressions) grows 16 times.
TEST(CompileScaling, TheCountsSeeQuadraticWork) {
  auto printPrefixes = [](int n) {
    choir::Module m;
    m.buffers.push_back(choir::Buffer{"x", tensor::DType::f32, {4}, choir::MemorySpace::kGlobal,
                                      choir::BufferRole::kInput, 0});
    choir::ExprRef e = choir::makeLoad(tensor::DType::f32, 0, {choir::Affine::constantOf(0)});
    std::vector<choir::ExprRef> prefixes;
    for (int i = 0; i < n; ++i) {
      e = choir::makeOp(tensor::OpCode::kNeg, tensor::DType::f32, {e});
      prefixes.push_back(e);
    }
    return unitsOf([&] {
      for (const choir::ExprRef& p : prefixes) (void)choir::toText(m, p);
    });
  };
  const double ratio = static_cast<double>(printPrefixes(4 * kSmall)) / static_cast<double>(printPrefixes(kSmall));
  EXPECT_GT(ratio, kMaxGrowth);
}

}  // namespace
}  // namespace accy
