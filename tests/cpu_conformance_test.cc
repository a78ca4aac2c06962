// CPU backend conformance: every op and thousands of random programs,
// compiled to x86-64 and run, against the reference evaluator; every
// instruction set the host has.
#include <random>

#include "accy/accy.h"
#include "backends/cpu/cpu_backend.h"
#include "compiler/codegen/x86_64/compile.h"
#include "tests/conformance.h"
#include "tests/random_programs.h"

namespace accy::testing {
namespace {

using tensor::Builder;
using tensor::DType;
using tensor::Spec;
using tensor::Value;
using Args = std::span<const Value>;

// Compiles for `isa`, runs, and compares with the evaluator.
::testing::AssertionResult runAndCompare(const tensor::Program& program,
                                         const std::vector<std::vector<std::byte>>& inputs,
                                         x64::Isa isa, int threads = 1) {
  x64::CompileOptions o;
  o.isa = isa;
  o.threads = threads;
  auto exe = x64::compileProgram(program, o);
  if (!exe.ok()) return ::testing::AssertionFailure() << exe.status();
  auto loaded = cpu::LoadedExecutable::load(*exe, threads);
  if (!loaded.ok()) return ::testing::AssertionFailure() << loaded.status();
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::span<std::byte>> out_views;
  for (const Spec& s : program.outputSpecs()) outs.emplace_back(s.byteSize());
  for (auto& o2 : outs) out_views.emplace_back(o2.data(), o2.size());
  auto in = views(inputs);
  if (auto st = loaded->launch(in, out_views); !st.ok()) return ::testing::AssertionFailure() << st;
  auto expected = tensor::evaluate(program, in);
  if (!expected.ok()) return ::testing::AssertionFailure() << expected.status();
  for (size_t k = 0; k < outs.size(); ++k) {
    auto r = matches(program.outputSpecs()[k].dtype, outs[k], (*expected)[k]);
    if (!r) return r << " in output " << k << " (" << x64::isaName(isa) << ")\n" << tensor::toText(program);
  }
  return ::testing::AssertionSuccess();
}

std::vector<x64::Isa> hostIsas() {
  std::vector<x64::Isa> isas = {x64::Isa::kSse41};
  const x64::Isa best = x64::detectIsa();
  if (best != x64::Isa::kSse41) isas.push_back(x64::Isa::kAvx2);
  if (best == x64::Isa::kAvx512) isas.push_back(x64::Isa::kAvx512);
  return isas;
}

std::vector<std::byte> randomBytes(const Spec& s, std::mt19937& rng, double lo, double hi) {
  std::vector<std::byte> bytes(s.byteSize());
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t e = 0; e < s.elementCount(); ++e) {
    double v = dist(rng);
    if (!tensor::isFloating(s.dtype)) v = std::round(v);
    tensor::storeElement(s.dtype, v, &bytes[e * tensor::dtypeSize(s.dtype)]);
  }
  return bytes;
}

struct OpCase {
  const char* name;
  std::function<Value(Builder&, Args)> fn;
  double lo, hi;  // input range
  bool floats_only = true;
};

std::vector<OpCase> opCases() {
  return {
      {"add", [](Builder&, Args a) { return a[0] + a[1]; }, -3, 3, false},
      {"sub", [](Builder&, Args a) { return a[0] - a[1]; }, -3, 3, false},
      {"mul", [](Builder&, Args a) { return a[0] * a[1]; }, -3, 3, false},
      {"div", [](Builder&, Args a) { return a[0] / a[1]; }, -9, 9, false},
      {"max", [](Builder&, Args a) { return a[0].max(a[1]); }, -3, 3, false},
      {"min", [](Builder&, Args a) { return a[0].min(a[1]); }, -3, 3, false},
      {"pow", [](Builder&, Args a) { return a[0].abs().pow(a[1]); }, -3, 3, false},
      {"neg", [](Builder&, Args a) { return -a[0]; }, -3, 3, false},
      {"abs", [](Builder&, Args a) { return a[0].abs(); }, -3, 3, false},
      {"sin", [](Builder&, Args a) { return a[0].sin(); }, -20, 20},
      {"cos", [](Builder&, Args a) { return a[0].cos(); }, -20, 20},
      {"exp", [](Builder&, Args a) { return a[0].exp(); }, -20, 20},
      {"log", [](Builder&, Args a) { return a[0].abs().log(); }, -20, 20},
      {"sqrt", [](Builder&, Args a) { return a[0].abs().sqrt(); }, -20, 20},
      {"tanh", [](Builder&, Args a) { return a[0].tanh(); }, -5, 5},
      {"sigmoid", [](Builder&, Args a) { return a[0].sigmoid(); }, -9, 9},
      {"lt", [](Builder&, Args a) { return a[0].lt(a[1]); }, -2, 2, false},
      {"le", [](Builder&, Args a) { return a[0].le(a[1]); }, -2, 2, false},
      {"gt", [](Builder&, Args a) { return a[0].gt(a[1]); }, -2, 2, false},
      {"ge", [](Builder&, Args a) { return a[0].ge(a[1]); }, -2, 2, false},
      {"eq", [](Builder&, Args a) { return a[0].eq(a[1]); }, -2, 2, false},
      {"ne", [](Builder&, Args a) { return a[0].ne(a[1]); }, -2, 2, false},
      {"where", [](Builder&, Args a) { return where(a[0].gt(a[1]), a[0], a[1] * 2); }, -3, 3, false},
      {"cast_i32", [](Builder&, Args a) { return (a[0] * 7).cast(DType::i32); }, -3, 3},
      {"cast_bool", [](Builder&, Args a) { return a[0].cast(DType::bool_); }, -1, 1, false},
      {"cast_f64", [](Builder&, Args a) { return a[0].cast(DType::f64); }, -3, 3, false},
      {"cast_f32", [](Builder&, Args a) { return a[0].cast(DType::f32); }, -3, 3, false},
      {"sum", [](Builder&, Args a) { return a[0].sum("p"); }, -3, 3, false},
      {"reduce_max", [](Builder&, Args a) { return a[0].max({"p", "q"}); }, -3, 3, false},
      {"reduce_min", [](Builder&, Args a) { return a[0].min("q"); }, -3, 3, false},
      {"mean", [](Builder&, Args a) { return a[0].mean("p"); }, -3, 3, false},
      {"prod", [](Builder&, Args a) { return a[0].prod("q"); }, 0.5, 1.5},
      {"dot", [](Builder&, Args a) { return a[0].dot(a[1].rename("q", "r"), "p"); }, -3, 3, false},
      {"transpose", [](Builder&, Args a) { return (a[0] + 1).transpose({"q", "p"}); }, -3, 3, false},
      {"rename", [](Builder&, Args a) { return a[0].rename("p", "z"); }, -3, 3, false},
      {"broadcast", [](Builder&, Args a) { return a[0].broadcast("z", 5); }, -3, 3, false},
      {"split", [](Builder&, Args a) { return a[0].slice("p", 0, 2).split("p", "x", "y", 2); }, -3, 3, false},
      {"merge", [](Builder&, Args a) { return a[0].merge({"q", "p"}, "m"); }, -3, 3, false},
      {"slice", [](Builder&, Args a) { return a[0].slice("p", 1, a[0].axes()[0].extent, 2); }, -3, 3, false},
      {"concat", [](Builder&, Args a) { return tensor::concat("p", {a[0], a[1] * 3}); }, -3, 3, false},
      {"iota", [](Builder& b, Args a) { return a[0] + b.iota("p", a[0].axes()[0].extent, a[0].dtype()); }, -3, 3, false},
  };
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
          auto program = tensor::define(c.name, specs, c.fn);
          if (!program.ok()) {
            // Some ops need floating operands, and the slicing cases need
            // p >= 2; both get a clear error instead.
            const ErrorKind kind = errorKind(program.status());
            EXPECT_TRUE(kind == ErrorKind::kUnsupportedDType || (kind == ErrorKind::kInvalidSlice && p < 2))
                << c.name << " " << tensor::dtypeName(dtype) << ": " << program.status();
            continue;
          }
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

}  // namespace
}  // namespace accy::testing
