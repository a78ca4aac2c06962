// CPU backend conformance: the device suite (tests/device_suite.h) on the
// x86-64 device in process (the backend accyd's cpu device serves), and the
// CPU's own cases: every op and thousands of random programs at every
// instruction set the host has, misaligned outputs, thread counts, the
// blocked product's remainders, streamed stores and the sum's bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numbers>
#include <random>

#include "accy/accy.h"
#include "backends/cpu/cpu_program.h"
#include "backends/cpu/cpu_backend.h"
#include "tests/program_shapes.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/x86_64/compile.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "tests/conformance.h"
#include "tests/device_suite.h"
#include "tests/op_cases.h"
#include "tests/random_programs.h"
#include "tests/sum_data.h"

namespace accy::testing {
namespace {

using tensor::Builder;
using tensor::DType;
using tensor::Spec;
using tensor::Value;

// Compiles for `isa`, runs, and compares with the evaluator.
// The outputs start `output_offset` bytes into their allocations (to
// misalign them); `options` may set everything but the ISA and threads.
::testing::AssertionResult runAndCompare(const tensor::Program& program,
                                         const std::vector<std::vector<std::byte>>& inputs,
                                         x64::Isa isa, int threads = 1, x64::CompileOptions o = {},
                                         size_t output_offset = 0) {
  o.isa = isa;
  o.threads = threads;
  auto exe = x64::compileProgram(program, o);
  if (!exe.ok()) return ::testing::AssertionFailure() << exe.status();
  auto loaded = cpu::LoadedExecutable::load(*exe, threads);
  if (!loaded.ok()) return ::testing::AssertionFailure() << loaded.status();
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::span<std::byte>> out_views;
  for (const Spec& s : program.outputSpecs()) {
    std::vector<std::byte> poisoned = poisonedOutput(s);
    poisoned.insert(poisoned.begin(), output_offset, std::byte{0});
    outs.push_back(std::move(poisoned));
  }
  for (auto& o2 : outs) out_views.emplace_back(o2.data() + output_offset, o2.size() - output_offset);
  auto in = views(inputs);
  if (auto st = loaded->launch(in, out_views); !st.ok()) return ::testing::AssertionFailure() << st;
  auto expected = tensor::evaluate(program, in);
  if (!expected.ok()) return ::testing::AssertionFailure() << expected.status();
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::vector<std::byte> got(outs[k].begin() + output_offset, outs[k].end());
    auto r = matches(program.outputSpecs()[k].dtype, got, (*expected)[k]);
    if (!r) return r << " in output " << k << " (" << x64::isaName(isa) << ")\n" << tensor::toText(program);
  }
  return ::testing::AssertionSuccess();
}

// The x86-64 device as the suite sees it: the backend's loads and launches,
// programs compiled for the host's best ISA on two threads (parallel loops
// split in two), the CPU's schedule (no workgroup forms).
backends::Backend& cpuDevice() {
  static std::unique_ptr<backends::Backend> b = backends::makeCpuBackend(backends::BackendOptions{});
  return *b;
}

GpuUnderTest cpuUnderTest() {
  GpuUnderTest g;
  g.backend = &cpuDevice();
  g.target = "x86_64";
  g.compile_for_gpu = [](const tensor::Program& program) {
    return x64::compileProgram(program, x64::CompileOptions{.threads = 2});
  };
  g.int64 = true;
  g.float64 = true;
  g.gpu_forms = false;
  g.note = std::string("x86-64 in process, ") + x64::isaName(x64::detectIsa());
  return g;
}

const bool registered = registerDeviceSuite({
    .name = "x86_64",
    .unavailable = [] { return cpuDevice().info().available ? std::string() : cpuDevice().info().unavailable_reason; },
    .device = cpuUnderTest,
    .refuses = {},
    .leaves_out = {},
});

std::vector<x64::Isa> hostIsas() {
  std::vector<x64::Isa> isas = {x64::Isa::kSse41};
  const x64::Isa best = x64::detectIsa();
  if (best != x64::Isa::kSse41) isas.push_back(x64::Isa::kAvx2);
  if (best == x64::Isa::kAvx512) isas.push_back(x64::Isa::kAvx512);
  return isas;
}


TEST(CpuConformance, EveryOpEveryDTypeOddExtents) {
  std::mt19937 rng(7);
  for (const OpCase& c : opCases()) {
    for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
      if (c.floats_only && !tensor::isFloating(dtype)) continue;
      for (int64_t p : {1, 3, 17, 40}) {
        for (int64_t q : {1, 5}) {
          const std::vector<Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", q}}),
                                           tensor::spec(dtype, {{"p", p}, {"q", q}})};
          const std::optional<tensor::Program> program = recordCase(c, dtype, p, specs);
          if (!program) continue;  // a refusal by design, asserted by recordCase
          std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, c.lo, c.hi),
                                                        randomBytes(specs[1], rng, c.lo, c.hi)};
          for (x64::Isa isa : hostIsas()) {
            EXPECT_TRUE(runAndCompare(*program, inputs, isa))
                << c.name << " " << tensor::dtypeName(dtype) << " p=" << p << " q=" << q;
          }
        }
      }
    }
  }
}

// Found by the wire fuzzer (tools/fuzz): on SSE4.1 a kernel of this
// program read a spilled pointer from a stack slot something else had
// overwritten, and faulted. Four outputs of one input's products: a cos
// chain, a sum over `point`, the sum divided, the input itself.
TEST(CpuConformance, FuzzerFoundProgramsMatch) {
  absl::StatusOr<tensor::Program> program = tensor::define(
      "tone_mismatch8",
      {tensor::spec(DType::f32, {{"guess", 8}}), tensor::spec(DType::f32, {{"point", 16}, {"z", 32}}),
       tensor::spec(DType::f32, {{"point", 16}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
        // In the fuzzer's order: the fuser cuts by the order of the nodes.
        const tensor::Value prod = a[0] * a[1];
        const tensor::Value chain = (prod.cos() - a[2]) * a[0];
        const tensor::Value sum = prod.sum("point");
        return {sum, chain, sum / a[0], a[0]};
      });
  ASSERT_TRUE(program.ok()) << program.status();
  std::mt19937 rng(11);
  std::vector<std::vector<std::byte>> inputs;
  for (const Spec& s : program->inputSpecs()) inputs.push_back(randomBytes(s, rng, 0.5, 2));
  for (x64::Isa isa : hostIsas()) {
    for (int threads : {1, 2}) EXPECT_TRUE(runAndCompare(*program, inputs, isa, threads)) << "threads " << threads;
  }
}

// Indices at the i32 and i64 extremes, negative, past the end and
// duplicated: take, scatter_add and pad read and write only inside their
// buffers. Every buffer sits between canary bytes that must come back
// untouched, and the results equal the evaluator's (also under ASan).
TEST(CpuConformance, AdversarialIndicesTouchNothingOutsideTheBuffers) {
  const std::vector<int64_t> wild = {INT64_MIN, -1, 0, 1, 6, 7, 8, INT64_MAX, 2147483647, -2147483648LL,
                                     int64_t{1} << 40, 3, 3, 3};
  const int64_t n = static_cast<int64_t>(wild.size());
  for (DType index_dtype : {DType::i32, DType::i64}) {
    const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"v", 7}, {"f", 3}}),
                                     tensor::spec(index_dtype, {{"t", n}}),
                                     tensor::spec(DType::f32, {{"t", n}, {"f", 3}})};
    auto program = tensor::define("wild", specs, [](Builder&, std::span<const Value> a) -> std::vector<Value> {
      return {take(a[0], "v", a[1]), scatterAdd(a[0], "v", a[1], a[2]),
              take(a[0].pad("v", 2, 3, -1), "v", a[1]).sum("f")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    std::vector<std::byte> indices(specs[1].byteSize());
    for (int64_t i = 0; i < n; ++i) {
      if (index_dtype == DType::i32) {
        const int32_t v = static_cast<int32_t>(std::clamp<int64_t>(wild[i], INT32_MIN, INT32_MAX));
        std::memcpy(&indices[i * 4], &v, 4);
      } else {
        std::memcpy(&indices[i * 8], &wild[i], 8);
      }
    }
    std::mt19937 rng(3);
    const std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -2, 2), indices,
                                                        randomBytes(specs[2], rng, -2, 2)};
    auto want = tensor::evaluate(*program, views(inputs));
    ASSERT_TRUE(want.ok()) << want.status();
    constexpr size_t kCanary = 256;
    {
      for (int threads : {1, 2}) {
        auto cpu = tensor::CpuExecutable::compile(*program, {.threads = threads});
        ASSERT_TRUE(cpu.ok()) << cpu.status();
        // Inputs and outputs inside larger allocations filled with 0xA5.
        std::vector<std::vector<std::byte>> in_mem, out_mem;
        std::vector<std::span<const std::byte>> in_views;
        std::vector<std::span<std::byte>> out_views;
        for (const auto& b : inputs) {
          std::vector<std::byte> m(b.size() + 2 * kCanary, std::byte{0xA5});
          std::memcpy(m.data() + kCanary, b.data(), b.size());
          in_mem.push_back(std::move(m));
        }
        for (const Spec& o : program->outputSpecs()) {
          out_mem.emplace_back(static_cast<size_t>(o.byteSize()) + 2 * kCanary, std::byte{0xA5});
        }
        for (size_t k = 0; k < inputs.size(); ++k) in_views.emplace_back(in_mem[k].data() + kCanary, inputs[k].size());
        for (size_t k = 0; k < out_mem.size(); ++k) out_views.emplace_back(out_mem[k].data() + kCanary, out_mem[k].size() - 2 * kCanary);
        ASSERT_TRUE(cpu->launch(in_views, out_views).ok());
        auto untouched = [&](const std::vector<std::byte>& m) {
          for (size_t i = 0; i < kCanary; ++i) {
            if (m[i] != std::byte{0xA5} || m[m.size() - 1 - i] != std::byte{0xA5}) return false;
          }
          return true;
        };
        for (size_t k = 0; k < in_mem.size(); ++k) {
          EXPECT_TRUE(untouched(in_mem[k])) << "input " << k;
          EXPECT_EQ(0, std::memcmp(in_mem[k].data() + kCanary, inputs[k].data(), inputs[k].size())) << "input " << k;
        }
        for (size_t k = 0; k < out_mem.size(); ++k) {
          EXPECT_TRUE(untouched(out_mem[k])) << "output " << k;
          const Spec o = program->outputSpecs()[k];
          for (int64_t e = 0; e < o.elementCount(); ++e) {
            const double got = tensor::loadElement(o.dtype, out_views[k].data() + e * 4);
            const double ref = tensor::loadElement(o.dtype, (*want)[k].data() + e * 4);
            EXPECT_NEAR(got, ref, 1e-5 * (1 + std::fabs(ref))) << "output " << k << " element " << e;
          }
        }
      }
    }
  }
}

// A take along the vector axis (out[t] = x[idx[t]]) gathers its lanes on
// AVX2 and AVX-512 (vgatherdps): 4-byte tables gathered, with an index
// coefficient above 1 (the row stride), under a reduction, and a load of
// stride 3 (a transpose) at constant offsets; at every ISA
// the evaluator's results, whatever the indices (negative, past the end,
// the i32 extremes), and a gather from an f64 table left scalar.
// A taken row read across, with a stride along the vector axis: the row's
// position is data, the same for the whole loop (computed before it), and
// the lanes gather at constant offsets from it. (Found by the wire fuzzer:
// the gather once looked for that position in lanes that were not there.)
TEST(CpuConformance, AStridedReadOfATakenRowGathers) {
  const std::vector<int32_t> wild = {INT32_MIN, -1, 0, 1, 6, 9, 10, INT32_MAX, 3};
  const int64_t n = static_cast<int64_t>(wild.size());
  for (DType table : {DType::f32, DType::i32}) {
    const std::vector<Spec> specs = {tensor::spec(table, {{"v", 10}, {"a", 37}, {"b", 3}}),
                                     tensor::spec(DType::i32, {{"t", n}})};
    auto program = tensor::define("row_across", specs, [](Builder&, std::span<const Value> a) {
      return take(a[0], "v", a[1]).transpose({"t", "b", "a"}) * 2;  // x[idx[t], a, b], a innermost
    });
    ASSERT_TRUE(program.ok()) << program.status();
    std::vector<std::byte> indices(n * 4);
    std::memcpy(indices.data(), wild.data(), indices.size());
    std::mt19937 rng(12);
    const std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -50, 50), indices};
    for (x64::Isa isa : hostIsas()) {
      SCOPED_TRACE(std::string(tensor::dtypeName(table)) + " at " + x64::isaName(isa));
      EXPECT_TRUE(runAndCompare(*program, inputs, isa));
      EXPECT_TRUE(runAndCompare(*program, inputs, isa, 2));
    }
  }
}

TEST(CpuConformance, GathersAlongTheVectorAxis) {
  const std::vector<int32_t> wild = {INT32_MIN, -1, 0, 1, 6, 99, 100, 101, INT32_MAX, 50, 50, 3, 7, 99, 2, 64, 0,
                                     1000, -5, 98, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28};
  const int64_t n = static_cast<int64_t>(wild.size());  // 37: a vector step and a tail at every width
  for (DType table : {DType::f32, DType::i32, DType::f64}) {
    const std::vector<Spec> specs = {tensor::spec(table, {{"v", 100}}), tensor::spec(DType::i32, {{"t", n}}),
                                     tensor::spec(table, {{"v", 100}, {"f", 3}})};
    auto program = tensor::define("gather", specs, [](Builder&, std::span<const Value> a) -> std::vector<Value> {
      const Value rows = take(a[2], "v", a[1]).transpose({"f", "t"});  // x[idx[t], f]: stride 3 along t
      // and a plain transpose: a load of stride 3 along the vector axis.
      return {take(a[0], "v", a[1]), rows, take(a[0], "v", a[1]).sum("t"), a[2].transpose({"f", "v"}) * 2};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    std::vector<std::byte> indices(n * 4);
    std::memcpy(indices.data(), wild.data(), indices.size());
    std::mt19937 rng(11);
    const std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -50, 50), indices,
                                                        randomBytes(specs[2], rng, -50, 50)};
    for (x64::Isa isa : hostIsas()) {
      SCOPED_TRACE(std::string(tensor::dtypeName(table)) + " at " + x64::isaName(isa));
      EXPECT_TRUE(runAndCompare(*program, inputs, isa));
      std::string assembly;
      auto exe = x64::compileProgram(*program, {.threads = 1, .isa = isa, .assembly = &assembly});
      ASSERT_TRUE(exe.ok()) << exe.status();
      // 4-byte values gather positions from data and strides; f64 values
      // gather strides only (the transpose), their takes stay scalar.
      const bool gathers = assembly.find("vgatherdps") != std::string::npos;
      EXPECT_EQ(gathers, isa != x64::Isa::kSse41 && table != DType::f64) << "gathered 4-byte lanes";
      const bool gathers64 = assembly.find("vgatherdpd") != std::string::npos;
      EXPECT_EQ(gathers64, isa != x64::Isa::kSse41 && table == DType::f64) << "gathered f64 lanes";
    }
  }
}

// Every kernel compiled for AVX2 or AVX-512 clears the vector registers'
// upper halves before it returns (vzeroupper): the caller's SSE code would
// otherwise run slowly on Intel cores (docs/PERFORMANCE.md).
TEST(CpuConformance, KernelsReturnWithCleanUpperVectorHalves) {
  auto program = tensor::define("clean", {tensor::spec(DType::f32, {{"i", 64}})},
                                [](Builder&, std::span<const Value> a) -> std::vector<Value> {
                                  return {a[0] * 2 + 1, (a[0] * a[0]).sum("i")};
                                });
  ASSERT_TRUE(program.ok()) << program.status();
  for (x64::Isa isa : hostIsas()) {
    std::string assembly;
    auto exe = x64::compileProgram(*program, {.threads = 1, .isa = isa, .assembly = &assembly});
    ASSERT_TRUE(exe.ok()) << exe.status();
    size_t returns = 0, cleans = 0;
    for (size_t at = assembly.find("\nret"); at != std::string::npos; at = assembly.find("\nret", at + 1)) ++returns;
    for (size_t at = assembly.find("vzeroupper"); at != std::string::npos; at = assembly.find("vzeroupper", at + 1)) ++cleans;
    EXPECT_GT(returns, 0u) << x64::isaName(isa);
    EXPECT_EQ(cleans, isa == x64::Isa::kSse41 ? 0u : returns) << x64::isaName(isa);
  }
}

// scatter_add with many duplicates: the same bits on every run and at
// every thread count. Large enough that its rows are split across the
// threads (passes/parallelize.h), with every index clamped or dropped
// somewhere; the result also matches the evaluator's.
TEST(CpuConformance, ScatterAddIsBitwiseRepeatable) {
  // Rows of one axis (split in its vector loop), and of two (split in the
  // outer of the two, the inner loop inside each part); i32 and i64
  // indices; both splits across threads (each thread its columns of every
  // row, or the rows of its range): the same bits as one thread, every run.
  for (const DType index_type : {DType::i32, DType::i64}) {
    for (const std::vector<tensor::Axis>& row :
         {std::vector<tensor::Axis>{{"f", 64}}, std::vector<tensor::Axis>{{"f", 4}, {"g", 16}}}) {
      std::vector<tensor::Axis> x_axes = {{"v", 64}}, u_axes = {{"t", 1024}};
      for (const tensor::Axis& a : row) {
        x_axes.push_back(a);
        u_axes.push_back(a);
      }
      const std::vector<Spec> specs = {tensor::spec(DType::f32, x_axes), tensor::spec(index_type, {{"t", 1024}}),
                                       tensor::spec(DType::f32, u_axes)};
      auto program = tensor::define("scatter", specs, [](Builder&, std::span<const Value> a) {
        return scatterAdd(a[0], "v", a[1], a[2]);
      });
      ASSERT_TRUE(program.ok()) << program.status();
      std::mt19937 rng(9);
      const std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -1, 1),
                                                          randomBytes(specs[1], rng, -4, 67),
                                                          randomBytes(specs[2], rng, -1e4, 1e4)};
      const std::string what =
          std::string(tensor::dtypeName(index_type)) + " indices, " + std::to_string(row.size()) + " row axes";
      std::vector<std::byte> first;
      for (const tensor::ScatterSplit split : {tensor::ScatterSplit::kColumns, tensor::ScatterSplit::kRanges}) {
        for (int threads : {1, 2, 3, 4}) {
          auto cpu = tensor::CpuExecutable::compile(*program, {.threads = threads, .scatter_split = split});
          ASSERT_TRUE(cpu.ok()) << cpu.status();
          for (int run = 0; run < 3; ++run) {
            std::vector<std::byte> out(specs[0].byteSize());
            ASSERT_TRUE(cpu->launch(views(inputs), {std::span<std::byte>(out)}).ok());
            if (first.empty()) first = out;
            EXPECT_EQ(out, first) << what << ", split " << static_cast<int>(split) << ", " << threads
                                  << " threads, run " << run;
          }
        }
      }
      EXPECT_TRUE(runAndCompare(*program, inputs, hostIsas().back(), 2)) << what;
      // The range split is what ran: its scatter kernel's outermost loop is
      // over the ranges, parallel, and the store tests the range.
      std::string ranges_text;
      ASSERT_TRUE(
          x64::compileProgram(*program, {.threads = 2, .scatter_split = choir::ScatterSplit::kRanges,
                                         .choir_text = &ranges_text})
              .ok());
      std::string columns_text;
      ASSERT_TRUE(x64::compileProgram(*program, {.threads = 2, .choir_text = &columns_text}).ok());
      EXPECT_NE(ranges_text, columns_text) << what;
      EXPECT_NE(ranges_text.find("[cpu_parallel]"), std::string::npos) << what << "\n" << ranges_text;
      EXPECT_NE(ranges_text.find("index:"), std::string::npos) << what << "\n" << ranges_text;
      EXPECT_EQ(columns_text.find("index:"), std::string::npos) << what << "\n" << columns_text;
      if (index_type != DType::i32) continue;
      // Each row's index is read straight from its memory operand, without a
      // row base computed for it first.
      std::string assembly;
      ASSERT_TRUE(x64::compileProgram(*program, {.threads = 2, .assembly = &assembly}).ok());
      bool index_operand = false;  // movsxd r, dword ptr [base+index*4]
      for (size_t at = assembly.find("movsxd "); at != std::string::npos; at = assembly.find("movsxd ", at + 1)) {
        const std::string line = assembly.substr(at, assembly.find('\n', at) - at);
        const size_t open = line.find("dword ptr [");
        index_operand = index_operand || (open != std::string::npos && line.find('+', open) != std::string::npos &&
                                          line.find("*4]", open) != std::string::npos);
      }
      EXPECT_TRUE(index_operand) << assembly;
    }
  }
}

// Chains of 4,096 and 8,192 ops fused with no node limit asked for: fusion
// makes values of at most kMaxFusedNodes nodes whatever the limit (the
// 4,096-op chain in one kernel crashed the CPU walker, 3.3 KiB of stack a
// level, and fusion's inliner under AddressSanitizer). A kernel deeper than
// the walker takes (a module made by hand: fusion makes none) is refused
// with a clear error, not a crash.
TEST(CpuConformance, AnExpressionThousandsOfOpsDeepInOneKernel) {
  x64::CompileOptions o;
  o.fuse_limits.max_nodes = int64_t{1} << 40;
  for (int ops : {4096, 8192}) {
    auto program = shapes::chain(ops);
    ASSERT_TRUE(program.ok()) << program.status();
    std::mt19937 rng(3);
    const std::vector<std::vector<std::byte>> inputs = {randomBytes(program->inputSpecs()[0], rng, -2, 2)};
    EXPECT_TRUE(runAndCompare(*program, inputs, hostIsas().back(), 1, o)) << ops << " ops";
  }
  choir::Module m;
  m.buffers.push_back(choir::Buffer{"x", DType::f32, {4}, choir::MemorySpace::kGlobal, choir::BufferRole::kInput, 0});
  m.buffers.push_back(choir::Buffer{"y", DType::f32, {4}, choir::MemorySpace::kGlobal, choir::BufferRole::kOutput, 0});
  choir::ExprRef e = choir::makeLoad(DType::f32, 0, {choir::Affine::constantOf(0)});
  for (int i = 0; i < 2100; ++i) e = choir::makeOp(tensor::OpCode::kNeg, DType::f32, {e});
  choir::Kernel k;
  k.name = "deep";
  k.body.push_back(choir::Stmt::store(1, {choir::Affine::constantOf(0)}, e));
  m.kernels.push_back(std::move(k));
  auto artifact = x64::emitModule(m, {});
  ASSERT_FALSE(artifact.ok());
  EXPECT_NE(artifact.status().message().find("an expression more than 2048 operations deep in one kernel"),
            std::string_view::npos)
      << artifact.status();
}

TEST(CpuConformance, RandomProgramsF32) {
  for (uint32_t seed = 1; seed <= 1500; ++seed) {
    RandomCase c = randomProgram(seed, RandomOptions{});
    const x64::Isa isa = hostIsas()[seed % hostIsas().size()];
    ASSERT_TRUE(runAndCompare(c.program, c.inputs, isa, seed % 3 == 0 ? 2 : 1)) << "seed " << seed;
  }
}

TEST(CpuConformance, RandomProgramsF64) {
  RandomOptions o;
  o.dtype = DType::f64;
  for (uint32_t seed = 1; seed <= 500; ++seed) {
    RandomCase c = randomProgram(seed, o);
    const x64::Isa isa = hostIsas()[seed % hostIsas().size()];
    ASSERT_TRUE(runAndCompare(c.program, c.inputs, isa)) << "seed " << seed;
  }
}

TEST(CpuConformance, LargeParallelKernelsMatch) {
  // Big enough to be tiled and split across threads.
  auto program = tensor::define(
      "big", std::vector<Spec>{tensor::spec(DType::f32, {{"n", 1 << 18}}), tensor::spec(DType::f32, {})},
      [](Builder&, Args a) -> std::vector<Value> {
        return {(a[0] * a[1]).sin().sum("n"), a[0].exp().max("n"), (a[0] + a[1]).cos()};
      });
  ASSERT_TRUE(program.ok());
  std::mt19937 rng(3);
  std::vector<std::vector<std::byte>> inputs = {randomBytes(program->inputSpecs()[0], rng, -1, 1),
                                                randomBytes(program->inputSpecs()[1], rng, -1, 1)};
  EXPECT_TRUE(runAndCompare(*program, inputs, x64::detectIsa(), 2));
}

// Programs the fuser has to cut (docs/CHOIR.md, "Fusion limits"): a chain
// longer than FuseLimits::max_nodes, a value read twice at every step, and
// rows of 8 floats (vectorized with a narrower vector than the widest), on
// every ISA the host has.
TEST(CpuConformance, ProgramsTheFuserCutsMatch) {
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"a", 37}, {"b", 8}})};
  std::vector<tensor::Program> programs;
  programs.push_back(*tensor::define("long_chain", specs, [](Builder&, Args a) -> std::vector<Value> {
    Value v = a[0];
    for (int i = 0; i < 600; ++i) v = i % 3 == 0 ? v * 1.0001 : i % 3 == 1 ? v + 0.5 : v.tanh();
    return {v, v.sum({"a", "b"})};
  }));
  programs.push_back(*tensor::define("doubling", specs, [](Builder&, Args a) -> std::vector<Value> {
    Value v = a[0] * 1e-12;
    for (int i = 0; i < 40; ++i) v = v + v;
    return {v, v.sum("a")};
  }));
  std::mt19937 rng(11);
  for (const tensor::Program& p : programs) {
    std::vector<std::vector<std::byte>> inputs = {randomBytes(p.inputSpecs()[0], rng, -1, 1)};
    for (x64::Isa isa : hostIsas()) EXPECT_TRUE(runAndCompare(p, inputs, isa)) << p.name;
  }
}

// Matrix products go through the register-blocked microkernel
// (kernel_emitter.h, Product): shapes with row and column remainders of
// every size (a partial row block, a partial column block, a vector
// remainder, a scalar tail), k in several packed panels with a partial last
// one, a transposed left operand, a batch (an outer loop), an elementwise
// epilogue, f64, one and two threads (splitting rows, or columns when there
// are enough column blocks), on every ISA the host has.
TEST(CpuConformance, MatrixProductsOfEveryRemainderMatch) {
  std::mt19937 rng(5);
  struct Shape {
    int64_t m, k, n;
    DType dtype;
  };
  const Shape shapes[] = {{1, 1, 16, DType::f32},  {7, 5, 16, DType::f32},   {13, 9, 67, DType::f32},
                          {6, 31, 64, DType::f32}, {25, 17, 130, DType::f32}, {12, 3, 200, DType::f32},
                          {9, 11, 37, DType::f64}, {6, 4, 8, DType::f64},
                          // k beyond one packed panel (256 rows): blocks of k, the last one partial
                          {7, 300, 70, DType::f32}, {13, 513, 16, DType::f32}, {5, 257, 20, DType::f64},
                          // enough column blocks for two threads to split the columns
                          {9, 40, 600, DType::f32}, {7, 60, 300, DType::f64}, {3, 300, 1100, DType::f32}};
  for (const Shape& sh : shapes) {
    const std::vector<Spec> specs = {tensor::spec(sh.dtype, {{"m", sh.m}, {"k", sh.k}}),
                                     tensor::spec(sh.dtype, {{"k", sh.k}, {"n", sh.n}})};
    auto plain = tensor::define("product", specs, [](Builder&, Args a) { return a[0].dot(a[1], "k"); });
    auto transposed = tensor::define("product_t", {tensor::spec(sh.dtype, {{"k", sh.k}, {"m", sh.m}}), specs[1]},
                                     [](Builder&, Args a) { return a[0].dot(a[1], "k"); });
    auto batched = tensor::define(
        "product_batched",
        {tensor::spec(sh.dtype, {{"b", 3}, {"m", sh.m}, {"k", sh.k}}), tensor::spec(sh.dtype, {{"b", 3}, {"k", sh.k}, {"n", sh.n}})},
        [](Builder&, Args a) { return a[0].dot(a[1], "k"); });
    // An elementwise epilogue (choir/passes/epilogue.h), applied per tile,
    // with a value per column and one per row (each row's is the same in
    // all its vectors: loaded once a row, after the row's addresses).
    auto epilogue = tensor::define(
        "product_epilogue",
        {specs[0], specs[1], tensor::spec(sh.dtype, {{"n", sh.n}}), tensor::spec(sh.dtype, {{"m", sh.m}})},
        [](Builder&, Args a) { return (a[0].dot(a[1], "k") + a[2]).tanh() * a[3] - a[2]; });
    ASSERT_TRUE(plain.ok() && transposed.ok() && batched.ok() && epilogue.ok());
    for (const tensor::Program* p : {&*plain, &*transposed, &*batched, &*epilogue}) {
      std::vector<std::vector<std::byte>> inputs;
      for (const Spec& s : p->inputSpecs()) inputs.push_back(randomBytes(s, rng, -1, 1));
      for (x64::Isa isa : hostIsas()) {
        for (int threads : {1, 2}) {
          EXPECT_TRUE(runAndCompare(*p, inputs, isa, threads))
              << p->name << " " << sh.m << "x" << sh.k << "x" << sh.n << ", " << threads << " threads";
        }
      }
    }
  }
}

// Convolutions: pad, windows and a dot over channels and taps, which the
// pipeline turns into a weight relayout, loops split at the padding's edges
// (passes/partition.h) and the blocked microkernel over a window's taps
// (kernel_emitter.h, Product::terms): stride, dilation, uneven padding,
// channel counts with every column remainder, rows split by threads, f32
// and f64, on every ISA the host has, one and two threads.
TEST(CpuConformance, ConvolutionsMatch) {
  std::mt19937 rng(9);
  struct Shape {
    int64_t batch, in, out, h, w, kh, kw, stride, dilation, pad_lo, pad_hi;
    DType dtype;
  };
  const Shape shapes[] = {{2, 3, 16, 9, 11, 3, 3, 1, 1, 1, 1, DType::f32},  {1, 5, 37, 7, 40, 3, 3, 1, 1, 1, 1, DType::f32},
                          {3, 4, 24, 12, 13, 3, 3, 2, 1, 1, 1, DType::f32}, {1, 2, 20, 10, 10, 3, 3, 1, 2, 2, 2, DType::f32},
                          {2, 3, 9, 6, 8, 1, 5, 1, 1, 0, 3, DType::f32},    {1, 6, 12, 8, 9, 3, 3, 1, 1, 1, 1, DType::f64},
                          {1, 2, 8, 2, 3, 3, 3, 1, 1, 1, 1, DType::f32}};
  for (const Shape& sh : shapes) {
    const std::vector<Spec> specs = {
        tensor::spec(sh.dtype, {{"b", sh.batch}, {"c", sh.in}, {"h", sh.h}, {"w", sh.w}}),
        tensor::spec(sh.dtype, {{"o", sh.out}, {"c", sh.in}, {"kh", sh.kh}, {"kw", sh.kw}})};
    auto program = tensor::define("conv", specs, [&](Builder&, Args a) {
      Value x = a[0].pad("h", sh.pad_lo, sh.pad_hi).pad("w", sh.pad_lo, sh.pad_hi);
      x = x.window("h", "kh", sh.kh, sh.stride, sh.dilation).window("w", "kw", sh.kw, sh.stride, sh.dilation);
      return dot(x, a[1], {"c", "kh", "kw"});
    });
    ASSERT_TRUE(program.ok()) << program.status();
    std::vector<std::vector<std::byte>> inputs;
    for (const Spec& s : program->inputSpecs()) inputs.push_back(randomBytes(s, rng, -1, 1));
    for (x64::Isa isa : hostIsas()) {
      for (int threads : {1, 2}) {
        EXPECT_TRUE(runAndCompare(*program, inputs, isa, threads))
            << "conv " << sh.batch << "x" << sh.in << "x" << sh.h << "x" << sh.w << " -> " << sh.out << ", "
            << sh.kh << "x" << sh.kw << " stride " << sh.stride << " dilation " << sh.dilation << ", " << threads
            << " threads";
      }
    }
  }
}

// A convolution's gradients against the evaluator: the input's as the
// transposed convolution (one product), the weights' as a long sum into a
// small output (zeroed first, the batch and rows outermost, every output
// row a blocked product over one row of pixels, the padding's pieces added
// in turn, the all-padding ones with a constant A). Padding, dilation,
// stride, f32 and f64, every ISA, one and two threads.
TEST(CpuConformance, ConvolutionGradientsMatch) {
  std::mt19937 rng(19);
  struct Shape {
    int64_t batch, in, out, h, w, k, stride, dilation, pad;
    DType dtype;
  };
  const Shape shapes[] = {{2, 3, 16, 9, 11, 3, 1, 1, 1, DType::f32}, {3, 2, 9, 12, 13, 3, 2, 1, 1, DType::f32},
                          {2, 4, 8, 10, 10, 3, 1, 2, 2, DType::f32}, {2, 3, 12, 8, 9, 3, 1, 1, 1, DType::f64},
                          {4, 1, 16, 8, 8, 3, 1, 1, 1, DType::f32}};
  for (const Shape& sh : shapes) {
    const std::vector<Spec> specs = {tensor::spec(sh.dtype, {{"b", sh.batch}, {"c", sh.in}, {"h", sh.h}, {"w", sh.w}}),
                                     tensor::spec(sh.dtype, {{"o", sh.out}, {"c", sh.in}, {"kh", sh.k}, {"kw", sh.k}})};
    auto loss = tensor::Function::define("conv", specs, [&](Builder&, Args a) {
      Value x = a[0].pad("h", sh.pad, sh.pad).pad("w", sh.pad, sh.pad);
      x = x.window("h", "kh", sh.k, sh.stride, sh.dilation).window("w", "kw", sh.k, sh.stride, sh.dilation);
      const Value y = dot(x, a[1], {"c", "kh", "kw"});
      return (y * y).sum({"b", "h", "w", "o"});
    });
    ASSERT_TRUE(loss.ok()) << loss.status();
    auto grads = loss->grad({.wrt = {0, 1}});
    ASSERT_TRUE(grads.ok()) << grads.status();
    const tensor::Program& program = grads->program();
    std::vector<std::vector<std::byte>> inputs;
    for (const Spec& s : program.inputSpecs()) inputs.push_back(randomBytes(s, rng, -1, 1));
    for (x64::Isa isa : hostIsas()) {
      for (int threads : {1, 2}) {
        EXPECT_TRUE(runAndCompare(program, inputs, isa, threads))
            << "conv gradient " << sh.batch << "x" << sh.in << "x" << sh.h << "x" << sh.w << " -> " << sh.out
            << ", stride " << sh.stride << " dilation " << sh.dilation << ", " << threads << " threads";
      }
    }
    // The weights' gradient takes the long-sum order (its zeroing kernel)
    // and runs as blocked products.
    std::string choir, listing;
    x64::CompileOptions o;
    o.threads = 1;
    o.choir_text = &choir;
    o.assembly = &listing;
    ASSERT_TRUE(x64::compileProgram(program, o).ok());
    EXPECT_NE(choir.find("_dot_zero"), std::string::npos) << choir;
  }
}

// Non-temporal stores (forced on for every size): outputs starting 0 to 3
// elements past an address aligned to the widest vector, extents with and
// without a scalar tail, shorter than one vector, f32 and f64, every ISA,
// one and two threads; the listing shows streaming stores exactly when
// they are on, and never for a value bound by arithmetic (a sin).
TEST(CpuConformance, StreamingStoresMatch) {
  std::mt19937 rng(9);
  for (DType dtype : {DType::f32, DType::f64}) {
    for (int64_t n : {3, 16, 67, 1000, 4099}) {
      auto p = tensor::define("stream", {tensor::spec(dtype, {{"p", n}})},
                              [](Builder&, Args a) { return (a[0] * 3 + 1) * 2; });
      auto heavy = tensor::define("heavy", {tensor::spec(dtype, {{"p", n}})},
                                  [](Builder&, Args a) { return (a[0] * 3 + 1).sin() * 2; });
      ASSERT_TRUE(heavy.ok()) << heavy.status();
      ASSERT_TRUE(p.ok()) << p.status();
      const std::vector<std::vector<std::byte>> inputs = {randomBytes(p->inputSpecs()[0], rng, -4, 4)};
      for (x64::Isa isa : hostIsas()) {
        for (int threads : {1, 2}) {
          for (size_t offset : {0, 1, 2, 3}) {
            x64::CompileOptions o;
            o.stream_stores_above = 0;
            EXPECT_TRUE(runAndCompare(*p, inputs, isa, threads, o, offset * tensor::dtypeSize(dtype)))
                << n << " " << tensor::dtypeName(dtype) << ", " << threads << " threads, offset " << offset;
          }
          for (int64_t above : {int64_t{0}, int64_t{-1}}) {
            std::string listing;
            x64::CompileOptions o;
            o.isa = isa;
            o.threads = threads;
            o.stream_stores_above = above;
            o.assembly = &listing;
            ASSERT_TRUE(x64::compileProgram(*p, o).ok());
            const bool streams = listing.find("movntp") != std::string::npos;
            EXPECT_EQ(streams, above == 0 && n >= 16 / static_cast<int64_t>(tensor::dtypeSize(dtype)))
                << n << " " << x64::isaName(isa) << " stream_stores_above " << above;
            listing.clear();
            ASSERT_TRUE(x64::compileProgram(*heavy, o).ok());
            EXPECT_EQ(listing.find("movntp"), std::string::npos) << n << " " << x64::isaName(isa) << " sin";
          }
        }
      }
    }
  }
}

// Streamed rows of a few whole vectors (an embedding gather's): written
// straight where a row starts aligned, through the aligning loop where it
// does not. Rows of 1 to 8 vectors of every ISA, outputs placed 0 to 3
// elements past a 64-byte line, indices out of range among them; one and
// two threads.
TEST(CpuConformance, StreamedRowsMatchAtEveryAlignment) {
  std::mt19937 rng(10);
  for (DType dtype : {DType::f32, DType::f64}) {
    const int64_t size = tensor::dtypeSize(dtype);
    for (int64_t features : {int64_t{2}, 64 / size, 256 / size, 512 / size}) {
      const std::vector<Spec> specs = {tensor::spec(dtype, {{"v", 33}, {"f", features}}),
                                       tensor::spec(DType::i32, {{"t", 41}})};
      auto p = tensor::define("rows", specs, [](Builder&, Args a) { return take(a[0], "v", a[1]); });
      ASSERT_TRUE(p.ok()) << p.status();
      const std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -4, 4),
                                                          randomBytes(specs[1], rng, -3, 40)};
      auto want = tensor::evaluate(*p, views(inputs));
      ASSERT_TRUE(want.ok()) << want.status();
      for (x64::Isa isa : hostIsas()) {
        for (int threads : {1, 2}) {
          x64::CompileOptions o;
          o.isa = isa;
          o.threads = threads;
          o.stream_stores_above = 0;
          auto exe = x64::compileProgram(*p, o);
          ASSERT_TRUE(exe.ok()) << exe.status();
          auto loaded = cpu::LoadedExecutable::load(*exe, threads);
          ASSERT_TRUE(loaded.ok()) << loaded.status();
          const size_t bytes = (*want)[0].size();
          for (int64_t offset : {0, 1, 2, 3}) {
            std::vector<std::byte> storage(bytes + 128, std::byte{0xA5});
            std::byte* base = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 + offset * size;
            auto st = loaded->launch(views(inputs), {std::span<std::byte>(base, bytes)});
            ASSERT_TRUE(st.ok()) << st;
            EXPECT_TRUE(matches(dtype, std::vector<std::byte>(base, base + bytes), (*want)[0]))
                << features << " " << tensor::dtypeName(dtype) << " " << x64::isaName(isa) << ", " << threads
                << " threads, offset " << offset;
            EXPECT_EQ(base[bytes], std::byte{0xA5}) << "the byte after the output changed";
            if (offset > 0) {
              EXPECT_EQ(base[-1], std::byte{0xA5}) << "the byte before the output changed";
            }
          }
        }
      }
    }
  }
}

// A sum's bits do not depend on where its input lies or on how many threads
// run it: the same values at every misalignment of a 64-byte line, on one
// thread and on two, give one result (docs/PERFORMANCE.md: an aligned
// reduction must keep this).
TEST(CpuConformance, SumBitsDoNotDependOnAddressOrThreads) {
  std::mt19937 rng(12);
  for (DType dtype : {DType::f32, DType::f64}) {
    const int64_t size = tensor::dtypeSize(dtype);
    for (int64_t n : {int64_t{1000003}, int64_t{4099}}) {
      auto p = tensor::define("sum", {tensor::spec(dtype, {{"i", n}})},
                              [](Builder&, Args a) { return a[0].sum({"i"}); });
      ASSERT_TRUE(p.ok()) << p.status();
      const std::vector<std::byte> values = randomBytes(p->inputSpecs()[0], rng, -1, 1);
      // AVX2 and AVX-512 sum in the same lanes (light loops use 32-byte
      // vectors on both): their bits agree too. SSE4.1's lanes differ.
      std::vector<std::byte> wide;
      for (x64::Isa isa : hostIsas()) {
        std::vector<std::byte> first;
        for (int threads : {1, 2}) {
          x64::CompileOptions o;
          o.isa = isa;
          o.threads = threads;
          auto exe = x64::compileProgram(*p, o);
          ASSERT_TRUE(exe.ok()) << exe.status();
          auto loaded = cpu::LoadedExecutable::load(*exe, threads);
          ASSERT_TRUE(loaded.ok()) << loaded.status();
          // 64-byte aligned storage, the values placed `offset` elements in.
          std::vector<std::byte> storage(values.size() + 128);
          std::byte* base = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
          for (int64_t offset = 0; offset < 64 / size; ++offset) {
            std::memcpy(base + offset * size, values.data(), values.size());
            std::vector<std::byte> out(static_cast<size_t>(size));
            const std::span<const std::byte> in(base + offset * size, values.size());
            ASSERT_TRUE(loaded->launch({in}, {std::span<std::byte>(out)}).ok());
            if (first.empty()) first = out;
            EXPECT_EQ(out, first) << tensor::dtypeName(dtype) << " n " << n << " " << x64::isaName(isa) << ", "
                                  << threads << " threads, " << offset << " elements past a 64-byte boundary";
          }
        }
        if (isa == x64::Isa::kSse41) continue;
        if (wide.empty()) wide = first;
        EXPECT_EQ(first, wide) << tensor::dtypeName(dtype) << " n " << n << ": " << x64::isaName(isa)
                               << " and AVX2 differ";
      }
    }
  }
}

// The samplers' distributions at 2^20 samples (uniform and normal: mean,
// variance and the Kolmogorov-Smirnov distance; bernoulli's rate), split
// streams uncorrelated, and the bits and uniform samples equal to the
// evaluator's bit for bit. The bounds are about four standard errors (the
// KS bound is the 0.1% critical value): a sampler off by a fraction of a
// percent fails.
// bitcast between f64 and i64 keeps every bit on every ISA: signed zeros,
// infinities, NaN payloads (quiet and signalling patterns), subnormals and
// integers past 2^53. Compared with the input bytes themselves: the
// op-case row narrows to 32 bits first, because the evaluator holds i64
// exactly only up to 2^53.
TEST(CpuConformance, Bitcast64KeepsEveryBit) {
  const std::vector<uint64_t> patterns = {
      0x3FF0000000000000,  // 1.0
      0x8000000000000000,  // -0.0, and INT64_MIN
      0x0000000000000000, 0x7FF0000000000000, 0xFFF0000000000000,  // 0, +inf, -inf
      0x7FF8000000000123,  // a quiet NaN with a payload
      0x7FF0000000000001,  // a signalling NaN pattern
      0xFFFFFFFFFFFFFFFF,  // -1, a negative NaN with every payload bit
      0x0000000000000001,  // the smallest subnormal
      0x7FEFFFFFFFFFFFFF,  // the largest finite double
      0x0123456789ABCDEF, 0x8000000000000001, 0x7FFFFFFFFFFFFFFF,
  };
  const int64_t n = static_cast<int64_t>(patterns.size());
  const std::vector<Spec> specs = {tensor::spec(DType::f64, {{"i", n}}), tensor::spec(DType::i64, {{"i", n}})};
  auto program = tensor::define("bitcast64", specs, [](Builder&, std::span<const Value> a) {
    return std::vector<Value>{a[0].bitcast(DType::i64), a[1].bitcast(DType::f64)};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<std::byte> bytes(patterns.size() * 8);
  std::memcpy(bytes.data(), patterns.data(), bytes.size());
  for (x64::Isa isa : hostIsas()) {
    auto exe = x64::compileProgram(*program, {.threads = 1, .isa = isa});
    ASSERT_TRUE(exe.ok()) << exe.status();
    auto loaded = cpu::LoadedExecutable::load(*exe, 1);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    std::vector<std::byte> as_int(bytes.size()), as_float(bytes.size());
    const std::span<const std::byte> in[] = {bytes, bytes};
    const std::span<std::byte> out[] = {as_int, as_float};
    ASSERT_TRUE(loaded->launch(in, out).ok()) << x64::isaName(isa);
    EXPECT_EQ(as_int, bytes) << "f64 to i64, " << x64::isaName(isa);
    EXPECT_EQ(as_float, bytes) << "i64 to f64, " << x64::isaName(isa);
  }
}

// normal f32 (exact mode) against the same formula in double from the same
// bits: each sample's block's words w0, w1 (threefry2x32 of the counter
// (0, i)), u1 = (w0 >> 8) 2^-24, u2 = (w1 >> 8) 2^-24, r = sqrt(-2 log(1 - u1)),
// z = r cos(2 pi u2). The bar (docs/MATH_ACCURACY.md, "Samplers"): |z - z64|
// <= 2^-20 (r + |z|), from the f32 roundings of the angle (2 pi u2, up to
// 2^-21 absolute, times r) and of log, sqrt, cos and the product (a few
// ulps of r and z).
TEST(CpuConformance, NormalIsWithinItsBarOfADoubleComputationFromTheSameBits) {
  constexpr int64_t kN = int64_t{1} << 16;
  auto program = tensor::define("normal", std::vector<Spec>{}, [](Builder& b, std::span<const Value>) {
    const Value key = tensor::randomKey(b, 99);
    const Value counter = tensor::concat("word", {b.constant(0, DType::u32).broadcast("n", kN).broadcast("word", 1),
                                                  b.iota("n", kN, DType::u32).broadcast("word", 1)});
    return std::vector<Value>{tensor::normal(key, {{"n", kN}}), tensor::threefry2x32(key, counter)};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  auto cpu = tensor::CpuExecutable::compile(*program, {.threads = 2});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::vector<float> z(kN);
  std::vector<uint32_t> words(2 * kN);
  ASSERT_TRUE(cpu->launch({}, {writableBytes(z), writableBytes(words)}).ok());
  double worst = 0;
  int64_t over = 0;
  for (int64_t i = 0; i < kN; ++i) {
    const double u1 = std::ldexp(static_cast<double>(words[2 * i] >> 8), -24);
    const double u2 = std::ldexp(static_cast<double>(words[2 * i + 1] >> 8), -24);
    const double r = std::sqrt(-2 * std::log(1 - u1)), z64 = r * std::cos(2 * std::numbers::pi * u2);
    const double err = std::abs(static_cast<double>(z[i]) - z64) / (r + std::abs(z64));
    worst = std::max(worst, err);
    if (err > std::ldexp(1.0, -20)) ++over;
  }
  EXPECT_EQ(over, 0) << "worst error " << worst << " (r + |z|)";
  std::printf("normal f32 against double from the same bits: worst %.3g (r + |z|), bar %.3g\n", worst,
              std::ldexp(1.0, -20));
}

// Noise drawn where it is used (x + 0.1 * normal(key, n)) costs no pass
// over memory of its own: no temporary grows with n (the key's two words
// are the only scratch), and the samples come from the consumer's loop.
TEST(CpuConformance, SamplesFuseIntoTheirConsumer) {
  constexpr int64_t kN = int64_t{1} << 20;
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"n", kN}})};
  for (const char* sampler : {"normal", "uniform", "bernoulli"}) {
    auto program = tensor::define("noisy", specs, [&](Builder& b, std::span<const Value> a) {
      const Value key = tensor::randomKey(b, 5);
      const std::string_view s = sampler;
      const Value noise = s == "normal"    ? tensor::normal(key, {{"n", kN}})
                          : s == "uniform" ? tensor::uniform(key, {{"n", kN}})
                                           : tensor::bernoulli(key, 0.5, {{"n", kN}}).cast(DType::f32);
      return a[0] + noise * 0.1;
    });
    ASSERT_TRUE(program.ok()) << program.status();
    auto exe = x64::compileProgram(*program, {.threads = 2});
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_LE(exe->artifact_plan.scratch_bytes, 256) << sampler << ": a temporary of "
                                                     << exe->artifact_plan.scratch_bytes << " bytes";
    int64_t full = 0;  // kernels over all n points
    for (const executable::LaunchStep& step : exe->launch_plan.steps) full += step.work >= kN / 2 ? 1 : 0;
    EXPECT_EQ(full, 1) << sampler;
    std::printf("x + 0.1 * %s: %zu kernels, %lld over all points, %lld bytes of scratch\n", sampler,
                exe->launch_plan.steps.size(), static_cast<long long>(full),
                static_cast<long long>(exe->artifact_plan.scratch_bytes));
  }
}

// A sample that reads both words of its block (f64 uniform, f32 normal)
// costs one encryption: the walker computes the pair once. Measured by the
// machine code: a 20-round encryption is about 100 instructions, and an f64
// uniform adds a few to the raw bits' kernel, where evaluating the pair
// twice would double it. Three samples, fewer than one vector: both
// kernels run scalar (raw bits would otherwise run in vector lanes, with a
// second, vector encryption, and f64 samples cannot).
TEST(CpuConformance, BothWordsOfABlockCostOneEncryption) {
  auto sizeOf = [](bool f64) {
    auto program = tensor::define("draw", std::vector<Spec>{}, [&](Builder& b, std::span<const Value>) {
      const Value key = tensor::randomKey(b, 7);
      return f64 ? tensor::uniform(key, {{"n", 3}}, DType::f64) : tensor::randomBits(key, {{"n", 3}});
    });
    EXPECT_TRUE(program.ok()) << program.status();
    if (!program.ok()) return size_t{0};
    auto exe = x64::compileProgram(*program, {.threads = 1, .isa = x64::Isa::kSse41});
    EXPECT_TRUE(exe.ok()) << exe.status();
    return exe.ok() ? exe->code.size() : size_t{0};
  };
  const size_t bits = sizeOf(false), f64 = sizeOf(true);
  ASSERT_GT(bits, 0u);
  EXPECT_LT(f64, bits * 3 / 2) << "raw bits: " << bits << " bytes; f64 uniform: " << f64;
}

// The 32-bit integer lanes of vector loops (choir/passes/vectorize.h,
// lanes32): Threefry words and samplers, index values along the loop,
// signed and unsigned comparisons, min and max across 2^31, constant
// shifts in and out of range, negation and abs at INT_MIN, wrapping
// products, casts to f32 (rounding, ties) and between i32 and u32, and
// bitcasts, at rows of whole vectors, with a tail, and split between two
// threads, on every ISA of the host: the integer outputs and the uniform
// samples' bits equal the evaluator's exactly.
TEST(CpuConformance, IntegerLanesMatchTheEvaluator) {
  for (int64_t n : {8, 37, 1000}) {
    const std::vector<Spec> specs = {tensor::spec(DType::u32, {{"r", 3}, {"n", n}}),
                                     tensor::spec(DType::i32, {{"r", 3}, {"n", n}})};
    auto program = tensor::define("lanes", specs, [&](Builder& b, std::span<const Value> a) -> std::vector<Value> {
      const Value u = a[0], i = a[1];
      auto u32 = [&](double v) { return b.constant(v, DType::u32); };
      auto i32 = [&](double v) { return b.constant(v, DType::i32); };
      const Value v = u * 3.0 + 2147483647.0;  // wraps: both sides of 2^31
      const Value key = tensor::randomKey(b, 11);
      const Value position = b.iota("n", n, DType::u32) * 2654435761.0 + u;
      const Value compares = u.lt(v).where(u, v) + u.le(v).where(u32(1), u32(2)) + u.ge(v).where(u32(4), u32(8)) +
                             u.eq(v).where(u32(16), u32(32)) + u.ne(v).where(u32(64), u32(128)) +
                             u.gt(v).where(u.max(v), u.min(v) - 5.0);
      const Value j = i * 7.0 - 3.0;
      const Value signed_compares = i.lt(j).where(i, j) + i.le(j).where(i32(1), i32(2)) +
                                    i.ge(j).where(i32(4), i32(8)) + i.gt(j).where(i.max(j), i.min(j));
      const Value shifts = u.shiftRight(3.0).bitXor(u.shiftLeft(31.0)) + u.shiftRight(32.0) + u.shiftLeft(40.0);
      const Value signed_shifts = i.shiftRight(5.0) + i.shiftRight(33.0) + i.shiftLeft(7.0) + i.shiftLeft(-1.0) -
                                  b.iota("n", n, DType::i32) * 7.0;
      return {tensor::randomBits(tensor::randomSplit(key, "r", 3), {{"n", n}}),
              tensor::uniform(key, {{"r", 3}, {"n", n}}).bitcast(DType::u32),
              tensor::normal(key, {{"r", 3}, {"n", n}}),
              position,
              compares,
              signed_compares,
              shifts,
              signed_shifts,
              i.neg().bitXor(i.abs()) + i * i,
              u.cast(DType::f32) + i.cast(DType::f32).bitcast(DType::u32).cast(DType::f32),
              i.cast(DType::u32).bitXor(u.cast(DType::i32).bitcast(DType::u32)),
              (u.cast(DType::f32) * 0.5f).bitcast(DType::i32),
              // An f32 sum over integer lanes (unrolled: lanes at offsets);
              // whole numbers below 2^24, exact in any order.
              (b.iota("n", n, DType::i32) + i.shiftRight(28.0)).cast(DType::f32).sum("n")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    // Every 32-bit pattern is likely; the first columns hold the edges.
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::vector<std::vector<std::byte>> inputs = {std::vector<std::byte>(specs[0].byteSize()),
                                                  std::vector<std::byte>(specs[1].byteSize())};
    const uint32_t edges[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, 0xffffff80, 0x00ffffff, 0x01000001};
    for (size_t k = 0; k < 3 * static_cast<size_t>(n); ++k) {
      const uint32_t x = k < std::size(edges) ? edges[k] : static_cast<uint32_t>(rng());
      const uint32_t y = k < std::size(edges) ? edges[std::size(edges) - 1 - k] : static_cast<uint32_t>(rng());
      std::memcpy(&inputs[0][4 * k], &x, 4);
      std::memcpy(&inputs[1][4 * k], &y, 4);
    }
    for (x64::Isa isa : hostIsas()) {
      for (int threads : {1, 2}) {
        EXPECT_TRUE(runAndCompare(*program, inputs, isa, threads)) << "n=" << n << " threads=" << threads;
      }
    }
  }
  // Each row above is one vectorized loop (not the scalar form, which
  // would compare equal too).
  const std::vector<Spec> one = {tensor::spec(DType::u32, {{"n", 64}})};
  for (auto fn : std::vector<std::function<Value(Builder&, const Value&)>>{
           [](Builder& b, const Value& u) { return tensor::randomBits(tensor::randomKey(b, 1), {{"n", 64}}) + u; },
           [](Builder& b, const Value& u) { return b.iota("n", 64, DType::u32).bitXor(u.shiftRight(9.0)); },
           [](Builder&, const Value& u) { return u.cast(DType::f32) * 2.0f; },
           [](Builder& b, const Value& u) { return u.lt(b.constant(5, DType::u32)).where(u.max(7.0), u.neg()); }}) {
    auto program = tensor::define("one", one, [&](Builder& b, std::span<const Value> a) { return fn(b, a[0]); });
    ASSERT_TRUE(program.ok()) << program.status();
    std::string choir;
    auto exe = x64::compileProgram(*program, {.threads = 1, .isa = x64::Isa::kSse41, .choir_text = &choir});
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_NE(choir.find("[vectorized x4]"), std::string::npos) << choir;
  }
}

// Scalar integer code (i64 loops do not vectorize) with a constant on
// either side of every operation that takes one as an immediate, at the
// edges of a 32-bit immediate (which fit, which do not), against the
// evaluator: the constant's side decides the operand order and, for a
// comparison, the condition.
TEST(CpuConformance, ScalarIntegerConstantsOnEitherSideMatch) {
  const int64_t n = 41;
  const std::vector<Spec> specs = {tensor::spec(DType::i64, {{"n", n}}), tensor::spec(DType::i32, {{"n", n}})};
  auto program = tensor::define("constants", specs, [&](Builder& b, std::span<const Value> a) -> std::vector<Value> {
    // (the evaluator holds i64 in doubles: every value stays below 2^53)
    const Value x = a[0], w = a[1].cast(DType::i64), small = w.shiftRight(12.0);
    std::vector<Value> out;
    for (double k : {0.0, 5.0, -7.0, 2147483647.0, -2147483648.0, 2147483648.0, -4294967296.0}) {
      const Value c = b.constant(k, DType::i64);
      out.push_back(c.lt(x).where(x, w) + x.lt(c).where(w, x) + c.le(w).where(c, x) + w.ge(c).where(x, c) +
                    c.gt(x).where(w, c) + c.eq(w).where(x, w) + x.ne(c).where(c, w));
      out.push_back((c + x) + (x - c) * 3.0 + (c - w) + c * small + small * c);
      out.push_back(c.max(x) + x.min(c) * 3.0 + w.max(c) * 5.0 + c.min(w) * 7.0);  // (max + min is x + c)
      out.push_back(c.bitAnd(x) + x.bitOr(c) + c.bitXor(w) + w.bitAnd(c));
    }
    return out;
  });
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<std::vector<std::byte>> inputs = {std::vector<std::byte>(specs[0].byteSize()),
                                                std::vector<std::byte>(specs[1].byteSize())};
  const int64_t edges[] = {0, 5, -7, 4, 6, -8, -6, 2147483647, 2147483646, -2147483648, 2147483648, -4294967296, 1};
  std::mt19937_64 rng(41);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t x = k < static_cast<int64_t>(std::size(edges)) ? edges[k] : static_cast<int64_t>(rng()) >> (k % 30 + 30);
    const int32_t y = static_cast<int32_t>(k < static_cast<int64_t>(std::size(edges)) ? edges[std::size(edges) - 1 - k] : rng());
    std::memcpy(&inputs[0][8 * k], &x, 8);
    std::memcpy(&inputs[1][4 * k], &y, 4);
  }
  for (x64::Isa isa : hostIsas()) {
    for (int threads : {1, 2}) EXPECT_TRUE(runAndCompare(*program, inputs, isa, threads)) << "threads=" << threads;
  }
}

// f32 sums of 2^24 values on every ISA and thread count, relative error
// against a double sum of the same values at most PyTorch 1.13's on that
// data (tests/sum_data.h).
TEST(CpuConformance, SumsAtMostAsFarAsPyTorchs) {
  const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"n", kSumValues}})};
  auto program = tensor::define("sum", specs, [](Builder&, std::span<const Value> a) { return a[0].sum("n"); });
  ASSERT_TRUE(program.ok()) << program.status();
  for (const SumData& set : sumDataSets()) {
    for (x64::Isa isa : hostIsas()) {
      for (int threads : {1, 2}) {
        auto exe = x64::compileProgram(*program, {.threads = threads, .isa = isa});
        ASSERT_TRUE(exe.ok()) << exe.status();
        auto loaded = cpu::LoadedExecutable::load(*exe, threads);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        float sum = 0;
        const std::span<const std::byte> in[] = {std::as_bytes(std::span<const float>(set.values))};
        const std::span<std::byte> out[] = {std::as_writable_bytes(std::span<float>(&sum, 1))};
        ASSERT_TRUE(loaded->launch(in, out).ok());
        const double error = std::fabs(sum - set.exact) / std::fabs(set.exact);
        EXPECT_LE(error, set.pytorch) << set.name << " " << x64::isaName(isa) << " threads=" << threads;
        std::printf("sum of %s: relative error %.3g (%s, %d threads; PyTorch %.3g)\n", set.name, error,
                    x64::isaName(isa), threads, set.pytorch);
      }
    }
  }
}

TEST(CpuConformance, RandomSamplersHaveTheirDistributions) {
  constexpr int64_t kN = int64_t{1} << 20;
  auto program = tensor::define("samples", std::vector<Spec>{}, [](Builder& b, std::span<const Value>) {
    const Value key = tensor::randomKey(b, 2026);
    return std::vector<Value>{tensor::uniform(key, {{"n", kN}}),
                              tensor::normal(tensor::randomFoldIn(key, b.constant(1, DType::u32)), {{"n", kN}}),
                              tensor::uniform(tensor::randomSplit(key, "s", 2), {{"n", kN}}, DType::f64),
                              tensor::bernoulli(tensor::randomFoldIn(key, b.constant(2, DType::u32)), 0.3, {{"n", kN}}),
                              tensor::normal(key, {{"n", kN}}, DType::f64)};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  auto cpu = tensor::CpuExecutable::compile(*program, {.threads = 2});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::vector<float> u(kN), z(kN);
  std::vector<double> s(2 * kN), z64(kN);
  std::vector<uint8_t> c(kN);
  ASSERT_TRUE(cpu->launch({}, {writableBytes(u), writableBytes(z), writableBytes(s), writableBytes(c), writableBytes(z64)}).ok());
  const double n = static_cast<double>(kN), se = 1 / std::sqrt(n);
  auto moments = [&](auto& v, int64_t off) {
    double m = 0, m2 = 0;
    for (int64_t i = 0; i < kN; ++i) m += v[off + i];
    m /= n;
    for (int64_t i = 0; i < kN; ++i) m2 += (v[off + i] - m) * (v[off + i] - m);
    return std::pair{m, m2 / n};
  };
  // The largest distance between the empirical and the true distribution.
  auto ks = [&](auto v, auto cdf) {
    std::sort(v.begin(), v.end());
    double d = 0;
    for (int64_t i = 0; i < kN; ++i) {
      const double f = cdf(static_cast<double>(v[i]));
      d = std::max({d, f - i / n, (i + 1) / n - f});
    }
    return d;
  };
  const double ks_bound = 1.95 * se;
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  auto [um, uv] = moments(u, 0);
  EXPECT_NEAR(um, 0.5, 4 * std::sqrt(1 / 12.0) * se);
  EXPECT_NEAR(uv, 1 / 12.0, 4 * 0.075 * se);  // sd of the sample variance: sqrt(1/180)
  EXPECT_LT(ks(u, [](double x) { return x; }), ks_bound);
  EXPECT_GE(*std::min_element(u.begin(), u.end()), 0.0f);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0f);
  for (const auto* normal : {&z, static_cast<std::vector<float>*>(nullptr)}) {
    std::vector<double> v = normal ? std::vector<double>(z.begin(), z.end()) : z64;
    auto [zm, zv] = moments(v, 0);
    EXPECT_NEAR(zm, 0, 4 * se) << (normal ? "f32" : "f64");
    EXPECT_NEAR(zv, 1, 4 * std::sqrt(2.0) * se) << (normal ? "f32" : "f64");
    EXPECT_LT(ks(v, phi), ks_bound) << (normal ? "f32" : "f64");
  }
  // Two split streams (f64): each uniform, uncorrelated with the other.
  auto [s0m, s0v] = moments(s, 0);
  auto [s1m, s1v] = moments(s, kN);
  EXPECT_NEAR(s0m, 0.5, 4 * std::sqrt(1 / 12.0) * se);
  EXPECT_NEAR(s1m, 0.5, 4 * std::sqrt(1 / 12.0) * se);
  double cov = 0;
  for (int64_t i = 0; i < kN; ++i) cov += (s[i] - s0m) * (s[kN + i] - s1m);
  EXPECT_LT(std::abs(cov / n / std::sqrt(s0v * s1v)), 4 * se);
  double ones = 0;
  for (uint8_t v : c) ones += v;
  EXPECT_NEAR(ones / n, 0.3, 4 * std::sqrt(0.3 * 0.7) * se);
  // The same bits as the evaluator (a prefix: the evaluator is slow).
  auto small = tensor::define("bits", std::vector<Spec>{}, [](Builder& b, std::span<const Value>) {
    const Value key = tensor::randomSplit(tensor::randomKey(b, 2026), "s", 3);
    return std::vector<Value>{tensor::randomBits(key, {{"n", 1001}}), tensor::uniform(key, {{"n", 1001}})};
  });
  ASSERT_TRUE(small.ok()) << small.status();
  auto want = tensor::evaluate(*small, {});
  ASSERT_TRUE(want.ok()) << want.status();
  for (int threads : {1, 2}) {
    auto exe = tensor::CpuExecutable::compile(*small, {.threads = threads});
    ASSERT_TRUE(exe.ok()) << exe.status();
    std::vector<std::vector<std::byte>> got = {std::vector<std::byte>((*want)[0].size()),
                                               std::vector<std::byte>((*want)[1].size())};
    ASSERT_TRUE(exe->launch({}, {std::span<std::byte>(got[0]), std::span<std::byte>(got[1])}).ok());
    EXPECT_EQ(got[0], (*want)[0]) << threads << " threads";
    EXPECT_EQ(got[1], (*want)[1]) << threads << " threads";
  }
}

}  // namespace
}  // namespace accy::testing
