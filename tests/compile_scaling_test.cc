// Compile work grows linearly with the program.
//
// Nothing here is timed: every stage of the compiler is run on programs of
// size N and 4N, and the work it did is counted (choir/work.h: expression
// nodes made, copied, visited, printed and numbered; affine terms
// substituted; and the bytes of machine code for the x86-64 emitter). A
// stage whose count grows more than 1.5 x 4 = 6 times when the program grows
// 4 times fails: a quadratic stage grows 16 times. The shapes are the ones
// bench/compile_bench.cc times (docs/PERFORMANCE.md).
#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "accy/accy.h"
#include "tests/program_shapes.h"
#include "compiler/choir/lower.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/targets.h"
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


// Programs at the limits of the language (docs/SEMANTICS.md, "Limits")
// compile for every target, print and verify on a thread with a 1 MiB
// stack (an eighth of the 8 MiB a gRPC thread has): no stage recurses in
// proportion to its input. Loop nests are at most 64 deep (the axes of a
// value) and fused expressions at most FuseLimits::max_nodes nodes; a
// chain of the 65,536 nodes accyd compiles by default is cut by fusion.
// Past the limits, recording refuses with ProgramTooLarge.
TEST(CompileLimits, ProgramsAtEveryLimitCompileForEveryTargetOnASmallStack) {
  std::vector<tensor::Axis> axes;
  for (int i = 0; i < tensor::kMaxAxes; ++i) axes.push_back({"a" + std::to_string(i), i < 4 ? 2 : 1});
  const tensor::Spec rank_spec[] = {tensor::spec(tensor::DType::f32, axes)};
  auto rank = tensor::define("rank64", rank_spec, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return (v[0].sin() * 2.0).sum("a1").exp();
  });
  ASSERT_TRUE(rank.ok()) << rank.status();
  const tensor::Spec chain_spec[] = {tensor::spec(tensor::DType::f32, {{"i", 64}})};
  // 65,536 nodes: negations and halvings, fused 256 nodes to a kernel.
  auto chain = tensor::define("chain", chain_spec, [](tensor::Builder&, std::span<const tensor::Value> v) {
    tensor::Value x = v[0];
    for (int k = 0; k < 21845; ++k) x = -x * 0.5;  // three nodes: neg, a constant, mul
    return x;
  });
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->nodes.size(), size_t{1} << 16);
  // Squares, each value read twice: fusion stops every few levels (the
  // expression doubles), so thousands of kernels and buffers. SPIR-V once
  // declared every buffer in every kernel: 4.3 s for these 8,192 nodes.
  auto squares = tensor::define("squares", chain_spec, [](tensor::Builder&, std::span<const tensor::Value> v) {
    tensor::Value x = v[0];
    for (int k = 0; k + 1 < 8192; ++k) x = (k % 2 == 0 ? x * x : -x);
    return x;
  });
  ASSERT_TRUE(squares.ok()) << squares.status();
  struct Case {
    const tensor::Program* program;
    std::string target;
    absl::Status status;
  };
  std::vector<Case> cases;
  for (const codegen::TargetEntry& t : codegen::targets()) {
    if (!t.available) continue;
    for (const tensor::Program* p : {&*rank, &*chain, &*squares}) cases.push_back({p, std::string(t.name), absl::OkStatus()});
  }
  ASSERT_GE(cases.size(), 18u);
  std::string printed;
  auto work = [&] {
    for (Case& c : cases) {
      const auto start = std::chrono::steady_clock::now();
      c.status = codegen::compileFor(c.target, *c.program, codegen::CompileRequest{}).status();
      std::printf("limits: %s for %s compiled in %.0f ms\n", c.program->name.c_str(), c.target.c_str(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3);
    }
    for (const tensor::Program* p : {&*rank, &*chain}) {
      absl::StatusOr<choir::Module> m = choir::compileToChoir(*p, choir::PipelineOptions{});
      if (m.ok()) printed = choir::toText(*m) + tensor::toText(*p);
    }
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 20);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* f) -> void* {
                  (*static_cast<std::function<void()>*>(f))();
                  return nullptr;
                },
                new std::function<void()>(work)),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  for (const Case& c : cases) {
    EXPECT_TRUE(c.status.ok()) << c.program->name << " for " << c.target << ": " << c.status;
  }
  EXPECT_FALSE(printed.empty());
  // One past each limit is refused while recording.
  axes.push_back({"extra", 1});
  const tensor::Spec too_many[] = {tensor::spec(tensor::DType::f32, axes)};
  auto wide = tensor::define("wide", too_many, [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0]; });
  EXPECT_EQ(errorKind(wide.status()), ErrorKind::kProgramTooLarge) << wide.status();
  auto broad = tensor::define("broad", rank_spec, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].broadcast("extra", 2);
  });
  EXPECT_EQ(errorKind(broad.status()), ErrorKind::kProgramTooLarge) << broad.status();
  const tensor::Spec long_name[] = {tensor::spec(tensor::DType::f32, {{std::string(65, 'a'), 2}})};
  auto named = tensor::define("named", long_name, [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0]; });
  EXPECT_EQ(errorKind(named.status()), ErrorKind::kInvalidAxisName) << named.status();
  auto titled = tensor::define(std::string(257, 'p'), chain_spec,
                               [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0]; });
  EXPECT_EQ(errorKind(titled.status()), ErrorKind::kProgramTooLarge) << titled.status();
}

}  // namespace
}  // namespace accy
