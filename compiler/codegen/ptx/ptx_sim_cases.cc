// Writes the simulation cases that compiler/codegen/ptx/ptxsim.py runs on
// its PTX interpreter and compares with the reference evaluator
// (ptxsim_test): per case N, N.ptx, N.json (launch plan, buffers, output
// dtypes, tolerance scale), N.in<k> and N.out<k> (the evaluator's outputs),
// into the directory named by ACCY_PTX_SIM_DIR. A tool of ptxsim_test, not
// a test of its own: it fails when that variable is not set.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>

#include "accy/accy.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/codegen/ptx/pipeline.h"
#include "examples/tone/tone.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"
#include "tests/op_cases.h"
#include "tests/random_programs.h"

namespace accy::ptx {
namespace {

namespace tensor = accy::tensor;
using tensor::DType;
using tensor::Spec;
using Args = std::span<const tensor::Value>;

TargetInfo target(int sm, ArithmeticMode mode = ArithmeticMode::kExact) {
  TargetInfo t;
  t.sm = sm;
  t.ptx_version = 78;
  t.mode = mode;
  return t;
}

std::string moduleText(const executable::Executable& exe) { return std::string(exe.code.begin(), exe.code.end()); }

TEST(PtxSimulationCases, Dump) {
  const char* dir = std::getenv("ACCY_PTX_SIM_DIR");
  ASSERT_NE(dir, nullptr) << "set ACCY_PTX_SIM_DIR to the directory for the cases";
  int n = 0;
  auto dump = [&](const tensor::Program& p, const std::vector<std::vector<std::byte>>& inputs, const TargetInfo& t,
                  double scale, const std::string& what, EmitOptions emit = {}) {
    auto exe = compileProgramWith(p, t, emit);
    ASSERT_TRUE(exe.ok()) << what << ": " << exe.status();
    auto expected = tensor::evaluate(p, testing::views(inputs));
    ASSERT_TRUE(expected.ok()) << what << ": " << expected.status();
    const std::string base = std::string(dir) + "/" + std::to_string(++n);
    const std::string text = moduleText(*exe);
    std::ofstream(base + ".ptx").write(text.data(), static_cast<std::streamsize>(text.size()));
    std::string json = "{\"name\": \"" + what + "\", \"scale\": " + std::to_string(scale) + ", \"steps\": [";
    for (size_t k = 0; k < exe->launch_plan.steps.size(); ++k) {
      const auto& step = exe->launch_plan.steps[k];
      json += (k ? ", " : "") + std::string("[\"") + step.kernel + "\", " + std::to_string(step.parallel_extent) + ", " +
              std::to_string(step.group_size) + "]";
    }
    json += "], \"buffers\": [";
    for (size_t b = 0; b < exe->artifact_plan.buffers.size(); ++b) {
      const auto& buf = exe->artifact_plan.buffers[b];
      json += (b ? ", " : "") + std::string("[") + std::to_string(static_cast<int>(buf.role)) + ", " +
              std::to_string(buf.io_index) + ", " + std::to_string(buf.bytes) + "]";
    }
    json += "], \"outputs\": [";
    for (size_t o = 0; o < exe->outputs.size(); ++o) {
      json += (o ? ", \"" : "\"") + std::string(tensor::dtypeName(exe->outputs[o].dtype)) + "\"";
    }
    json += "]}\n";
    std::ofstream(base + ".json") << json;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::ofstream(base + ".in" + std::to_string(i), std::ios::binary)
          .write(reinterpret_cast<const char*>(inputs[i].data()), static_cast<std::streamsize>(inputs[i].size()));
    }
    for (size_t o = 0; o < expected->size(); ++o) {
      const auto& e = (*expected)[o];
      std::ofstream(base + ".out" + std::to_string(o), std::ios::binary)
          .write(reinterpret_cast<const char*>(e.data()), static_cast<std::streamsize>(e.size()));
    }
  };
  std::mt19937 rng(7);
  // Every op case in fast mode (floating cases, p = 17). The exact forms of
  // every case, dtype and extent run through the CUDA backend on this
  // interpreter in tests/cuda_fake_conformance_test (DeviceSuite EveryOp),
  // so they are not repeated here.
  for (const testing::OpCase& c : testing::opCases()) {
    if (!c.floats_only) continue;
    for (DType dtype : {DType::f32, DType::f64}) {
      const int64_t p = 17;
      const std::vector<Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", 5}}), tensor::spec(dtype, {{"p", p}, {"q", 5}})};
      const std::optional<tensor::Program> program = testing::recordCase(c, dtype, p, specs);
      if (!program) continue;  // a refusal by design, asserted by recordCase
      std::vector<std::vector<std::byte>> inputs = {testing::randomBytes(specs[0], rng, c.lo, c.hi),
                                                    testing::randomBytes(specs[1], rng, c.lo, c.hi)};
      const std::string what = std::string(c.name) + " " + std::string(tensor::dtypeName(dtype)) + " p=" + std::to_string(p);
      dump(*program, inputs, target(90, ArithmeticMode::kFast), 10, what + " fast");
    }
  }
  // The forms under other block sizes, few blocks (several grid-stride
  // steps per block) and 64-bit indices.
  const std::vector<testing::OpCase> cases = testing::opCases();
  for (const char* name : {"sum", "reduce_max", "reduce_min_outer", "mean", "prod", "dot", "div", "pow", "where", "cast_i32"}) {
    const testing::OpCase* c = nullptr;
    for (const testing::OpCase& x : cases) {
      if (std::string(x.name) == name) c = &x;
    }
    ASSERT_NE(c, nullptr) << name;
    for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
      if (c->floats_only && !tensor::isFloating(dtype)) continue;
      for (int64_t p : {17, 300}) {
        const std::vector<Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", 5}}), tensor::spec(dtype, {{"p", p}, {"q", 5}})};
        const std::optional<tensor::Program> program = testing::recordCase(*c, dtype, p, specs);
        if (!program) continue;  // a refusal by design, asserted by recordCase
        std::vector<std::vector<std::byte>> inputs = {testing::randomBytes(specs[0], rng, c->lo, c->hi),
                                                      testing::randomBytes(specs[1], rng, c->lo, c->hi)};
        const std::string what = std::string(c->name) + " " + std::string(tensor::dtypeName(dtype)) + " p=" + std::to_string(p);
        for (uint32_t threads : {64u, 32u, 8u}) {
          TargetInfo t = target(90);
          t.max_threads_per_block = threads;
          dump(*program, inputs, t, 1, what + " threads<=" + std::to_string(threads));
        }
        TargetInfo few = target(90);
        few.max_grid_x = 3;
        dump(*program, inputs, few, 1, what + " 3 blocks");
        dump(*program, inputs, target(90), 1, what + " 64-bit indices", EmitOptions{.wide_indices = true});
      }
    }
  }
  // Special values through casts, min/max, division, pow and the
  // transcendentals (exact mode).
  for (DType d : {DType::f32, DType::f64}) {
    const std::vector<double> special = {std::nan(""), INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 3e9, -3e9,
                                         1e19, -1e19, 2.5, -2.5, 0.5, 1e-40, -7.0, 700.0, -800.0, 89.0, 2.0};
    const std::vector<Spec> specs = {tensor::spec(d, {{"p", static_cast<int64_t>(special.size())}}),
                                     tensor::spec(d, {{"q", static_cast<int64_t>(special.size())}})};
    auto program = tensor::define("special", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      // (Not cast to i64: the evaluator holds i64 in doubles, and 2^63 does
      // not convert back; the emitter saturates to INT64_MAX as specified.)
      return {a[0].cast(DType::i32), a[0].cast(DType::bool_), a[0].max(a[1]), a[0].min(a[1]),
              a[0] / a[1], a[0].pow(a[1]), a[0].exp(), a[0].log(), a[0].min(100.0).max(-100.0).sin(), a[0].tanh(), a[0].sigmoid(), a[0].sqrt(),
              a[0].abs(), a[0].ne(a[1]), a[0].eq(a[0]), a[0].max("p"), a[1].min("q")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    std::vector<std::byte> in(specs[0].byteSize());
    for (size_t i = 0; i < special.size(); ++i) tensor::storeElement(d, special[i], &in[i * tensor::dtypeSize(d)]);
    dump(*program, {in, in}, target(90), 1, "special " + std::string(tensor::dtypeName(d)));
  }
  for (DType d : {DType::i32, DType::i64}) {
    // i64 within 2^53: the evaluator holds i64 values in doubles.
    const double min = d == DType::i32 ? -2147483648.0 : -9007199254740992.0;
    const std::vector<double> values = {0, 1, -1, 2, -2, 7, -7, min, -min - 1, 3, 31, 63, -3, 100};
    const std::vector<Spec> specs = {tensor::spec(d, {{"p", static_cast<int64_t>(values.size())}}),
                                     tensor::spec(d, {{"q", static_cast<int64_t>(values.size())}})};
    auto program = tensor::define("ints", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      return {a[0] / a[1], a[0].pow(a[1]), a[0].abs(), -a[0], a[0] * a[1], a[0].cast(DType::f32), a[0].cast(DType::bool_),
              a[0].sum("p"), a[0].prod("p"), a[1].mean("q")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    std::vector<std::byte> in(specs[0].byteSize());
    for (size_t i = 0; i < values.size(); ++i) tensor::storeElement(d, values[i], &in[i * tensor::dtypeSize(d)]);
    dump(*program, {in, in}, target(90), 1, "ints " + std::string(tensor::dtypeName(d)));
  }
  {
    const Spec specs[] = {tensor::spec(DType::bool_, {{"i", 300}}), tensor::spec(DType::f32, {{"i", 300}})};
    auto p = tensor::define("b", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      return {a[0].ne(a[1].gt(0.0)), a[0].max("i"), a[0].min("i"), tensor::where(a[0], a[1], -a[1]),
              tensor::where(a[1].lt(0.0), a[0], a[1].gt(1.0))};
    });
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<std::vector<std::byte>> inputs = {testing::randomBytes(specs[0], rng, 0, 1),
                                                  testing::randomBytes(specs[1], rng, -2, 2)};
    dump(*p, inputs, target(90), 1, "bools");
  }
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    testing::RandomOptions o;
    o.dtype = seed % 4 == 0 ? DType::f64 : DType::f32;
    if (seed > 40) o.max_extent = 40;
    auto c = testing::randomProgram(seed, o);
    dump(c.program, c.inputs, target(90), 1, "seed " + std::to_string(seed));
  }
  // Tiled dots with ragged edges, exact and tf32; rows and columns >= 32
  // are register-blocked 4x4 (blocks of 64 x 64 outputs), ragged in every
  // direction: rows, columns, each thread's strided rows and columns, the
  // domain's last slice, batch points.
  struct Shape {
    int64_t b, i, k, j;
  };
  for (const Shape& s : {Shape{1, 40, 24, 33}, Shape{2, 17, 21, 9}, Shape{1, 16, 16, 16}, Shape{1, 37, 70, 51},
                         Shape{3, 40, 21, 35}, Shape{1, 70, 19, 66}}) {
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64}) {
      if (d == DType::i64 && s.i < 32) continue;
      const std::vector<Spec> specs = {tensor::spec(d, {{"b", s.b}, {"i", s.i}, {"k", s.k}}),
                                       tensor::spec(d, {{"k", s.k}, {"j", s.j}})};
      auto p = tensor::define("dot", specs, [](tensor::Builder&, Args a) { return (a[0] + 1).dot(a[1], "k"); });
      std::vector<std::vector<std::byte>> inputs = {testing::randomBytes(specs[0], rng, -3, 3),
                                                    testing::randomBytes(specs[1], rng, -3, 3)};
      const std::string what = "dot " + std::string(tensor::dtypeName(d)) + " " + std::to_string(s.i) + "x" +
                               std::to_string(s.k) + "x" + std::to_string(s.j);
      dump(*p, inputs, target(90), 1, what);
      // tf32 keeps 10 mantissa bits of each operand: with k up to 70 and
      // products up to 12 in magnitude the error of a sum is a random walk
      // of about 0.02 (one sigma), up to about 0.07 over a few thousand
      // outputs; the scale of 500 allows 0.1 * (1 + |result|).
      if (d == DType::f32) dump(*p, inputs, target(80, ArithmeticMode::kTf32), 500, what + " tf32");
      if (d == DType::f32 && s.i == 37) dump(*p, inputs, target(90, ArithmeticMode::kFast), 1, what + " fast");
      if (d == DType::f64 && s.i == 70) {
        TargetInfo few = target(90);
        few.max_grid_x = 1;
        dump(*p, inputs, few, 1, what + " 1 block");
        dump(*p, inputs, target(90), 1, what + " 64-bit indices", EmitOptions{.wide_indices = true});
      }
    }
  }
  // A register-blocked mean of products (finishMean per output).
  for (DType d : {DType::f32, DType::f64}) {
    const std::vector<Spec> specs = {tensor::spec(d, {{"i", 45}, {"k", 23}}), tensor::spec(d, {{"k", 23}, {"j", 34}})};
    auto p = tensor::define("mean_of_products", specs, [](tensor::Builder&, Args a) { return (a[0] * a[1]).mean("k"); });
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<std::vector<std::byte>> inputs = {testing::randomBytes(specs[0], rng, -3, 3),
                                                  testing::randomBytes(specs[1], rng, -3, 3)};
    dump(*p, inputs, target(90), 1, "mean of products " + std::string(tensor::dtypeName(d)));
  }
  // The tone program through valueAndGrad and vmap.
  const Spec one[] = {tensor::spec(DType::f32, {}), tensor::spec(DType::f32, {{"point", 16}}),
                      tensor::spec(DType::f32, {{"point", 16}})};
  auto f = tensor::Function::define("mismatch", one, tone::mismatch);
  auto each = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  const tone::Samples data = tone::samples();
  std::vector<float> guesses = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  auto bytesOf = [](const auto& v) {
    const auto* b = reinterpret_cast<const std::byte*>(v.data());
    return std::vector<std::byte>(b, b + v.size() * sizeof(v[0]));
  };
  dump(each->program(), {bytesOf(guesses), bytesOf(data.time), bytesOf(data.sample)}, target(90), 1, "tone refine");
  std::printf("wrote %d cases to %s\n", n, dir);
}

}  // namespace
}  // namespace accy::ptx
