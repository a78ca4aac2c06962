// The checks of the device conformance suite (gpu_conformance.h).
#include "tests/gpu_conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "backends/compile_program.h"
#include "backends/plan_artifact.h"
#include "backends/staged_program.h"
#include "base/strings.h"
#include "examples/tone/tone.h"
#include "tests/conformance.h"
#include "tests/op_cases.h"
#include "tests/random_programs.h"
#include "tests/sum_data.h"

namespace accy::testing {

using tensor::DType;
using tensor::Spec;

int& programsLeftOutForDTypes() {
  static int n = 0;
  return n;
}

// Whether every value of `program` (its loops' bodies included) has a
// dtype the device has.
static bool dtypesFit(const GpuUnderTest& gpu, const tensor::Program& program) {
  for (const tensor::Node& n : program.nodes) {
    if ((n.dtype == DType::f64 && !gpu.float64) || (n.dtype == DType::i64 && !gpu.int64)) return false;
  }
  for (const tensor::Program& body : program.bodies) {
    if (!dtypesFit(gpu, body)) return false;
  }
  return true;
}

// runAndCompare, with the program's executable compiled already where
// `compiled` is set.
static ::testing::AssertionResult runAndCompareCompiled(const GpuUnderTest& gpu, const tensor::Program& program,
                                                        const std::vector<std::vector<std::byte>>& inputs,
                                                        const executable::Executable* compiled) {
  if (!dtypesFit(gpu, program)) {
    ++programsLeftOutForDTypes();  // counted and printed by the device's test
    return ::testing::AssertionSuccess();
  }
  // A program with loops runs as stages, each compiled and loaded as any
  // program is (backends/staged_program.h).
  std::shared_ptr<const backends::LoadedProgram> loaded;
  if (backends::hasLoops(program) && gpu.load_with_loops) {
    auto whole = gpu.load_with_loops(program);
    if (!whole.ok()) return ::testing::AssertionFailure() << whole.status();
    loaded = *whole;
  } else {
    // The one compile path (backends/compile_program.h); a program without
    // loops compiled ahead (prepare) is loaded as it is.
    auto one = backends::compileProgram(
        program, gpu.target,
        [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> {
          absl::StatusOr<executable::Executable> exe =
              compiled != nullptr && &stage == &program ? absl::StatusOr<executable::Executable>(*compiled)
                                                         : gpu.compile_for_gpu(stage);
          if (!exe.ok()) return exe.status();
          return gpu.backend->load(*exe);
        });
    if (!one.ok()) return ::testing::AssertionFailure() << one.status();
    loaded = *one;
  }
  std::vector<std::vector<std::byte>> outs;
  std::vector<std::span<std::byte>> out_views;
  for (const Spec& s : program.outputSpecs()) outs.push_back(poisonedOutput(s));
  for (auto& o : outs) out_views.emplace_back(o.data(), o.size());
  auto in = views(inputs);
  if (auto st = loaded->launch(in, out_views); !st.ok()) {
    return ::testing::AssertionFailure() << st;
  }
  auto expected = tensor::evaluate(program, in);
  for (size_t k = 0; k < outs.size(); ++k) {
    auto r = matches(program.outputSpecs()[k].dtype, outs[k], (*expected)[k]);
    if (!r) return r << " in output " << k << "\n" << tensor::toText(program);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult runAndCompare(const GpuUnderTest& gpu, const tensor::Program& program,
                                         const std::vector<std::vector<std::byte>>& inputs) {
  return runAndCompareCompiled(gpu, program, inputs, nullptr);
}

void runAndCompareEach(const GpuUnderTest& gpu, const std::vector<ProgramCase>& cases) {
  std::vector<std::optional<executable::Executable>> compiled(cases.size());
  if (gpu.prepare) {
    std::vector<executable::Executable> exes;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (!dtypesFit(gpu, cases[i].program)) continue;
      if (backends::hasLoops(cases[i].program)) {
        // Its stages, loaded with the rest, where the device runs loops as
        // stages from here.
        if (gpu.load_with_loops) continue;
        absl::StatusOr<std::vector<executable::Executable>> stages =
            backends::stageExecutables(cases[i].program, gpu.target, gpu.compile_for_gpu);
        if (stages.ok()) exes.insert(exes.end(), stages->begin(), stages->end());
        continue;
      }
      absl::StatusOr<executable::Executable> exe = gpu.compile_for_gpu(cases[i].program);
      if (!exe.ok()) continue;  // reported when the case runs
      compiled[i] = *exe;
      exes.push_back(*std::move(exe));
    }
    gpu.prepare(exes);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(runAndCompareCompiled(gpu, cases[i].program, cases[i].inputs, compiled[i] ? &*compiled[i] : nullptr))
        << cases[i].label;
  }
}

absl::StatusOr<tensor::Program> programWithFloat64() {
  const Spec specs[] = {tensor::spec(DType::f32, {{"i", 8}})};
  return tensor::define("widen", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0].cast(DType::f64) * 2).cast(DType::f32);
  });
}

static bool hasBool(const tensor::Program& program) {
  for (const std::vector<Spec>& specs : {program.inputSpecs(), program.outputSpecs()}) {
    for (const Spec& s : specs) {
      if (s.dtype == DType::bool_) return true;
    }
  }
  return false;
}

void checkEveryOp(const GpuUnderTest& gpu) {
  std::mt19937 rng(7);
  std::vector<DType> dtypes = {DType::f32, DType::i32, DType::bool_};
  if (gpu.float64) dtypes.push_back(DType::f64);
  if (gpu.int64) dtypes.push_back(DType::i64);
  std::map<std::string, int> ran;  // "op dtype" -> programs run
  int with_bool = 0;
  std::vector<ProgramCase> cases;
  for (const OpCase& c : opCases()) {
    for (DType dtype : dtypes) {
      if (c.floats_only && !tensor::isFloating(dtype)) continue;
      const bool scatter = std::string_view(c.name).starts_with("scatter_add");
      for (int64_t p : {int64_t{1}, int64_t{17}, scatter ? gpu.size.scatter_max_extent : gpu.size.op_max_extent}) {
        const std::vector<Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", 5}}), tensor::spec(dtype, {{"p", p}, {"q", 5}})};
        const std::optional<tensor::Program> program = recordCase(c, dtype, p, specs);
        if (!program) continue;  // a refusal by design, asserted by recordCase
        // Bool inputs: 0 and 1 about equally often.
        const double lo = dtype == DType::bool_ ? 0 : c.lo, hi = dtype == DType::bool_ ? 1 : c.hi;
        std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, lo, hi),
                                                      randomBytes(specs[1], rng, lo, hi)};
        cases.push_back({*program, std::move(inputs), strCat(c.name, " ", tensor::dtypeName(dtype), " p=", p)});
        ++ran[std::string(c.name) + " " + std::string(tensor::dtypeName(dtype))];
        if (hasBool(*program)) ++with_bool;
      }
    }
  }
  runAndCompareEach(gpu, cases);
  // The cases that once were refused (bool buffers, integer pow) ran.
  for (const char* key : {"pow i32", "lt f32", "eq i32", "ne f64", "where f32", "cast_bool f32", "cast_bool i32",
                          "lt bool", "eq bool", "max bool", "min bool", "cast_f32 bool", "cast_f64 bool",
                          "cast_bool bool", "reduce_max bool", "reduce_min_outer bool", "transpose f32", "slice bool"}) {
    if (!gpu.float64 && std::string_view(key).find("f64") != std::string_view::npos) continue;
    EXPECT_GE(ran[key], 2) << key;  // slice needs p >= 2
  }
  if (gpu.int64) {
    EXPECT_EQ(ran["pow i64"], 3);
    EXPECT_EQ(ran["lt i64"], 3);
  }
  int total = 0;
  for (const auto& [key, n] : ran) total += n;
  std::printf("%d op programs run, %d with bool buffers\n", total, with_bool);
  EXPECT_GE(with_bool, 100);
}

// Integer pow over the edge cases of docs/SEMANTICS.md: negative exponents
// (base 1, -1, 0 and others), zero, and results that wrap.
void checkIntegerPowEdgeCases(const GpuUnderTest& gpu) {
  std::vector<DType> dtypes = {DType::i32};
  if (gpu.int64) dtypes.push_back(DType::i64);
  std::vector<double> base, exponent;
  for (int b = -7; b <= 7; ++b) {
    for (int e = -5; e <= 66; ++e) {
      base.push_back(b);
      exponent.push_back(e);
    }
  }
  for (double b : {2147483647.0, -2147483648.0, 65536.0, 123456.0}) {
    for (double e : {-1.0, 0.0, 1.0, 2.0, 3.0, 31.0, 2147483647.0}) {
      base.push_back(b);
      exponent.push_back(e);
    }
  }
  const int64_t n = static_cast<int64_t>(base.size());
  for (DType dtype : dtypes) {
    const std::vector<Spec> specs = {tensor::spec(dtype, {{"i", n}}), tensor::spec(dtype, {{"i", n}})};
    std::vector<std::vector<std::byte>> inputs(2, std::vector<std::byte>(specs[0].byteSize()));
    for (int64_t i = 0; i < n; ++i) {
      tensor::storeElement(dtype, base[i], &inputs[0][i * tensor::dtypeSize(dtype)]);
      tensor::storeElement(dtype, exponent[i], &inputs[1][i * tensor::dtypeSize(dtype)]);
    }
    auto program = tensor::define("ipow", specs, [dtype](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      // Elementwise, and inside a sequential reduction and a workgroup
      // tree. The evaluator holds i64 in doubles (exact to 2^53), so an i64
      // sum of wrapped powers is not checkable: min and max are.
      tensor::Value p = a[0].pow(a[1]);
      return {p, dtype == DType::i32 ? p.sum("i") : p.min("i"), a[0].pow(2).max("i"),
              p.broadcast("j", 2).max("i")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_TRUE(runAndCompare(gpu, *program, inputs)) << tensor::dtypeName(dtype);
  }
}

// Bool buffers with other dtypes: bool inputs feeding where, logical
// max/min, comparisons, casts; bool outputs of comparisons and casts; bool
// reductions (a sequential one and a workgroup tree).
void checkBoolBuffersMixedWithNumbers(const GpuUnderTest& gpu) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 17, 300, 4096}) {
    const std::vector<Spec> specs = {tensor::spec(DType::bool_, {{"i", n}}), tensor::spec(DType::bool_, {{"i", n}}),
                                     tensor::spec(DType::f32, {{"i", n}}), tensor::spec(DType::i32, {{"i", n}})};
    std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, 0, 1), randomBytes(specs[1], rng, 0, 1),
                                                  randomBytes(specs[2], rng, -3, 3), randomBytes(specs[3], rng, -2, 2)};
    auto program = tensor::define("bools", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      return {tensor::where(a[0], a[2], a[2] * 2), tensor::where(a[1], a[3], -a[3]), a[0].max(a[1]), a[0].min(a[1]),
              a[0].ne(a[1]), a[0].ge(a[1]), a[2].gt(0.0), a[3].cast(DType::bool_), a[0].cast(DType::f32),
              a[1].cast(DType::i32) + a[3], a[0].max("i"), a[1].min("i"), a[3].lt(1).min("i"),
              a[0].cast(DType::i32).sum("i")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_TRUE(runAndCompare(gpu, *program, inputs)) << "n=" << n;
  }
  // All true / all false reductions (the identities of bool max and min).
  for (uint8_t fill : {0, 1}) {
    const std::vector<Spec> specs = {tensor::spec(DType::bool_, {{"i", 4096}})};
    std::vector<std::vector<std::byte>> inputs = {std::vector<std::byte>(4096, std::byte{fill})};
    auto program = tensor::define("all", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      return {a[0].max("i"), a[0].min("i"), a[0].broadcast("j", 3).max("i"), a[0].broadcast("j", 3).min("i")};
    });
    ASSERT_TRUE(program.ok()) << program.status();
    EXPECT_TRUE(runAndCompare(gpu, *program, inputs)) << "fill " << int{fill};
  }
}

// Products tiled through workgroup memory (passes/gpu_map): ragged edges in
// every direction, a batch loop, a producer fused into the staged operand,
// f32, f64 and i32; the executable shows the tiled form was used.
void checkTiledProducts(const GpuUnderTest& gpu) {
  std::mt19937 rng(11);
  struct Shape {
    int64_t b, m, k, n;
  };
  int tiled = 0;
  for (DType d : {DType::f32, DType::f64, DType::i32}) {
    if (d == DType::f64 && !gpu.float64) continue;
    for (Shape sh : {Shape{1, 8, 8, 8}, Shape{1, 16, 16, 16}, Shape{1, 17, 33, 9}, Shape{3, 40, 21, 35},
                     Shape{1, 64, 100, 48}}) {
      const std::vector<Spec> specs = {tensor::spec(d, {{"b", sh.b}, {"i", sh.m}, {"k", sh.k}}),
                                       tensor::spec(d, {{"k", sh.k}, {"j", sh.n}})};
      auto program = tensor::define("mm", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
        return {a[0].dot(a[1], "k"), (a[0] * 2).dot(a[1] - 1, "k")};
      });
      ASSERT_TRUE(program.ok()) << program.status();
      std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -3, 3), randomBytes(specs[1], rng, -3, 3)};
      EXPECT_TRUE(runAndCompare(gpu, *program, inputs)) << tensor::dtypeName(d) << " " << sh.b << "x" << sh.m << "x" << sh.k
                                                   << "x" << sh.n;
      auto exe = gpu.compile_for_gpu(*program);
      ASSERT_TRUE(exe.ok());
      tiled += exe->launch_plan.steps[0].group_size == 256 || exe->launch_plan.steps[0].group_size == 64;
    }
  }
  if (gpu.gpu_forms) {
    EXPECT_EQ(tiled, gpu.float64 ? 15 : 10);
  }
}

// Long reductions use the workgroup tree, finished with subgroup shuffles
// where the device has them: sums, NaN-propagating max/min, integers, means.
void checkTreeReductions(const GpuUnderTest& gpu) {
  std::mt19937 rng(12);
  for (DType d : {DType::f32, DType::f64, DType::i32}) {
    if (d == DType::f64 && !gpu.float64) continue;
    for (int64_t p : gpu.size.tree_extents) {
      const std::vector<Spec> specs = {tensor::spec(d, {{"g", 3}, {"p", p}})};
      auto program = tensor::define("tree", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
        return {a[0].sum("p"), a[0].max("p"), a[0].min("p"), a[0].mean("p"), a[0].sum("p").sum("g")};
      });
      ASSERT_TRUE(program.ok()) << program.status();
      std::vector<std::vector<std::byte>> inputs = {randomBytes(specs[0], rng, -3, 3)};
      if (d != DType::i32 && p == 1000) {
        // A NaN in the middle of one row.
        if (d == DType::f32) {
          const float nan = NAN;
          std::memcpy(inputs[0].data() + 4 * 1500, &nan, 4);
        } else {
          const double nan = NAN;
          std::memcpy(inputs[0].data() + 8 * 1500, &nan, 8);
        }
      }
      EXPECT_TRUE(runAndCompare(gpu, *program, inputs)) << tensor::dtypeName(d) << " p=" << p;
    }
  }
  if (!gpu.note.empty()) std::printf("%s\n", gpu.note.c_str());
}

void checkReductionsAsTheDeviceChooses(const GpuUnderTest& gpu) {
  std::mt19937 rng(14);
  GpuUnderTest own = gpu;
  own.compile_for_gpu = [&gpu](const tensor::Program& program) { return backends::compileOn(*gpu.backend, program, gpu.target); };
  for (DType d : {DType::f32, DType::f64}) {
    if (d == DType::f64 && !gpu.float64) continue;
    for (int64_t p : {int64_t{256}, int64_t{70000}, int64_t{1} << 22}) {
      const std::vector<Spec> specs = {tensor::spec(d, {{"p", p}})};
      auto program = tensor::define("long", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
        return {a[0].sum("p"), a[0].max("p"), (a[0] * a[0]).mean("p")};
      });
      ASSERT_TRUE(program.ok()) << program.status();
      EXPECT_TRUE(runAndCompare(own, *program, {randomBytes(specs[0], rng, -1, 1)})) << tensor::dtypeName(d) << " p=" << p;
    }
  }
}

void checkRandomPrograms(const GpuUnderTest& gpu) {
  const uint32_t seeds = static_cast<uint32_t>(std::max(gpu.size.random_programs, 0));
  std::vector<ProgramCase> cases;
  int with_loops = 0;
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    RandomOptions o;
    o.dtype = seed % 4 == 0 && gpu.float64 ? DType::f64 : DType::f32;
    // Every third program may hold loops (scans and while loops, nested,
    // with captures, xs and ys), run as the device runs loops.
    if (seed % 3 == 0) o.loop_percent = 15;
    RandomCase c = randomProgram(seed, o);
    with_loops += backends::hasLoops(c.program);
    cases.push_back({std::move(c.program), std::move(c.inputs), strCat("seed ", seed)});
  }
  runAndCompareEach(gpu, cases);
  std::printf("%d of %zu random programs hold loops\n", with_loops, cases.size());
}

// Random inputs for `specs`, in [-2, 2].
static std::vector<std::vector<std::byte>> randomInputs(const std::vector<Spec>& specs, std::mt19937& rng) {
  std::vector<std::vector<std::byte>> inputs;
  for (const Spec& s : specs) inputs.push_back(randomBytes(s, rng, -2, 2));
  return inputs;
}

// Random programs batched (vmap over a new leading axis of every input)
// and differentiated (value and gradient of the sum of every output, with
// respect to every input).
void checkTransformedPrograms(const GpuUnderTest& gpu) {
  std::mt19937 rng(13);
  int batched = 0, differentiated = 0, with_loops = 0;
  std::vector<ProgramCase> cases;
  const uint32_t seeds = static_cast<uint32_t>(std::max(gpu.size.transformed_programs, 0));
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    RandomOptions o;
    o.dtype = seed % 3 == 0 && gpu.float64 ? DType::f64 : DType::f32;
    o.max_extent = 9;
    // Every fourth may hold scans (a while loop has no gradient): vmap of
    // a scan, and its gradient, a scan run backwards.
    if (seed % 4 == 0) {
      o.loop_percent = 15;
      o.while_loops = false;
    }
    RandomCase c = randomProgram(seed, o);
    with_loops += backends::hasLoops(c.program);
    auto f = tensor::Function::fromProgram(c.program);
    ASSERT_TRUE(f.ok()) << f.status();
    std::vector<tensor::InAxis> in_axes(c.program.inputSpecs().size(), tensor::mappedAxis(0));
    auto v = f->vmap({.axis_size = 3, .in_axes = in_axes, .axis_name = "batch"});
    ASSERT_TRUE(v.ok()) << "seed " << seed << ": " << v.status();
    cases.push_back({v->program(), randomInputs(v->program().inputSpecs(), rng), strCat("vmap, seed ", seed)});
    ++batched;
    auto loss = tensor::Function::define("loss", c.program.inputSpecs(),
                                         [&](tensor::Builder& b, std::span<const tensor::Value> args) {
                                           std::vector<tensor::Value> outs = f->call(b, args);
                                           tensor::Value total = b.constant(0, o.dtype);
                                           for (const tensor::Value& out : outs) {
                                             std::vector<std::string> names;
                                             for (const tensor::Axis& a : out.axes()) names.push_back(a.name);
                                             total = total + (names.empty() ? out : out.sum(names)).cast(o.dtype);
                                           }
                                           return total;
                                         });
    ASSERT_TRUE(loss.ok()) << "seed " << seed << ": " << loss.status();
    std::vector<int> wrt(c.program.inputSpecs().size());
    for (size_t i = 0; i < wrt.size(); ++i) wrt[i] = static_cast<int>(i);
    auto g = loss->valueAndGrad({.wrt = wrt});
    ASSERT_TRUE(g.ok()) << "seed " << seed << ": " << g.status();
    cases.push_back({g->program(), c.inputs, strCat("valueAndGrad, seed ", seed)});
    ++differentiated;
  }
  runAndCompareEach(gpu, cases);
  EXPECT_EQ(batched, static_cast<int>(seeds));
  EXPECT_EQ(differentiated, static_cast<int>(seeds));
  std::printf("%d of %u programs batched and differentiated hold scans\n", with_loops, seeds);
}

void checkTf32Products(const GpuUnderTest& gpu, const CompileFn& compile_tf32, std::string_view instruction) {
  std::mt19937 rng(21);
  for (int64_t m : {16, 17, 64, 129}) {
    const int64_t k = m + 3, n = m - 1;
    const std::vector<Spec> specs = {tensor::spec(DType::f32, {{"i", m}, {"k", k}}),
                                     tensor::spec(DType::f32, {{"k", k}, {"j", n}})};
    auto program = tensor::define("tf32", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
      return a[0].dot(a[1], "k");
    });
    ASSERT_TRUE(program.ok()) << program.status();
    auto exe = compile_tf32(*program);
    ASSERT_TRUE(exe.ok()) << exe.status();
    const std::string text(exe->code.begin(), exe->code.end());
    EXPECT_NE(text.find(instruction), std::string::npos) << "no " << instruction << " in the module";
    auto loaded = gpu.backend->load(*exe);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    std::vector<float> a(m * k), b(k * n), c(m * n);
    std::uniform_real_distribution<float> u(-2, 2);
    for (float& x : a) x = u(rng);
    for (float& x : b) x = u(rng);
    poison(std::span<float>(c));
    const absl::Status launched = (*loaded)->launch({bytes(a), bytes(b)}, {writableBytes(c)});
    ASSERT_TRUE(launched.ok()) << launched;
    int bad = 0, rounded = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          exact += double(a[i * k + p]) * b[p * n + j];
          magnitude += std::abs(double(a[i * k + p]) * b[p * n + j]);
        }
        const double bound = magnitude * (std::ldexp(1.0, -9) + k * std::ldexp(1.0, -23)) + 1e-30;
        bad += !(std::abs(c[i * n + j] - exact) <= bound);  // a NaN (poison left) counts
        // tf32's rounding shows: f32 products would be within about k ulp.
        rounded += std::abs(c[i * n + j] - exact) > magnitude * k * std::ldexp(1.0, -23);
      }
    }
    EXPECT_EQ(bad, 0) << m << "x" << k << "x" << n;
    EXPECT_GT(rounded, 0) << m << "x" << k << "x" << n << ": no tf32 rounding seen; were the products f32?";
  }
}

void checkTheThreeToneTests(const GpuUnderTest& gpu) {
  const tone::Samples data = tone::samples();
  auto mismatch = [](double f) { return tone::referenceMismatch(f); };
  auto run = [&](const tensor::Program& p) {
    auto exe = backends::compileOn(*gpu.backend, p, gpu.target);
    EXPECT_TRUE(exe.ok()) << exe.status();
    auto loaded = gpu.backend->load(*exe);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded;
  };
  const Spec one[] = {tensor::spec(DType::f32, {}), tensor::spec(DType::f32, {{"point", 16}}),
                      tensor::spec(DType::f32, {{"point", 16}})};
  // measure one frequency guess
  auto p1 = tensor::define("mismatch", one, tone::mismatch);
  float f1[1] = {2.5f}, v1[1];
  poison(std::span<float>(v1));
  auto l1 = run(*p1);
  ASSERT_TRUE((*l1)->launch({bytes(f1), bytes(data.time), bytes(data.sample)}, {writableBytes(v1)}).ok());
  EXPECT_NEAR(mismatch(2.5), v1[0], 1e-4);
  // compare eight frequency guesses
  const Spec eight[] = {tensor::spec(DType::f32, {{"guess", 8}}), tensor::spec(DType::f32, {{"point", 16}}),
                        tensor::spec(DType::f32, {{"point", 16}})};
  auto p8 = tensor::define("mismatch", eight, tone::mismatch);
  float f8[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, v8[8];
  poison(std::span<float>(v8));
  auto l8 = run(*p8);
  ASSERT_TRUE((*l8)->launch({bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(mismatch(f8[g]), v8[g], 1e-4);
  // refine eight frequency guesses
  auto f = tensor::Function::define("mismatch", one, tone::mismatch);
  auto each = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  auto lr = run(each->program());
  float value[8], slope[8];
  for (int step = 0; step < 100; ++step) {
    poison(std::span<float>(value));
    poison(std::span<float>(slope));
    ASSERT_TRUE((*lr)->launch({bytes(f8), bytes(data.time), bytes(data.sample)},
                              {writableBytes(value), writableBytes(slope)})
                    .ok());
    for (int g = 0; g < 8; ++g) f8[g] -= 0.005f * slope[g];
  }
  EXPECT_NEAR(3.0f, f8[2], 1e-6);
  EXPECT_NEAR(3.0f, f8[3], 1e-6);
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(mismatch(f8[g]), value[g], 1e-3) << "the last step's value, guess " << g;
}

void checkAccurateSums(const GpuUnderTest& gpu) {
  auto compiles = gpu.sum_compiles;
  if (compiles.empty()) {
    compiles.push_back({"as the device chooses",
                        [&gpu](const tensor::Program& p) { return backends::compileOn(*gpu.backend, p, gpu.target); }, false});
  }
  constexpr int64_t kRows = kSumRows, kRow = kSumValues / kRows;
  const Spec flat[] = {tensor::spec(DType::f32, {{"n", kSumValues}})};
  const Spec rows[] = {tensor::spec(DType::f32, {{"row", kRows}, {"col", kRow}})};
  auto total = tensor::define("total", flat, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("n"); });
  auto by_row = tensor::define("rows", rows, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0].sum("col"); });
  auto compensated = tensor::define("compensated", flat, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0].sum("n", tensor::SumOptions{.compensated = true});
  });
  ASSERT_TRUE(total.ok()) << total.status();
  ASSERT_TRUE(by_row.ok()) << by_row.status();
  ASSERT_TRUE(compensated.ok()) << compensated.status();
  const std::vector<SumData> sets = sumDataSets();
  for (const auto& [how, compile, whole_only] : compiles) {
    for (const tensor::Program* program : {&*total, &*by_row, &*compensated}) {
      if (whole_only && program != &*total) continue;
      const bool whole = program != &*by_row;
      auto exe = compile(*program);
      ASSERT_TRUE(exe.ok()) << exe.status();
      auto loaded = gpu.backend->load(*exe);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      for (const SumData& set : sets) {
        std::vector<float> out(whole ? 1 : kRows);
        poison(std::span<float>(out));
        const std::span<const std::byte> in[] = {std::as_bytes(std::span<const float>(set.values))};
        const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span<float>(out))};
        ASSERT_TRUE((*loaded)->launch(in, outs).ok()) << set.name;
        // The whole sum's relative error; the rows' largest error relative
        // to the largest row.
        double error = 0, largest = 0;
        for (size_t k = 0; k < out.size(); ++k) {
          double exact = set.exact;
          if (!whole) {
            exact = 0;
            for (int64_t j = 0; j < kRow; ++j) exact += set.values[static_cast<size_t>(k * kRow + j)];
          }
          error = std::max(error, std::fabs(out[k] - exact));
          largest = std::max(largest, std::fabs(exact));
        }
        error /= largest;
        if (program == &*compensated) {
          // Within two ulps of the exact sum (SumOptions::compensated: the
          // rounding of each thread's or workgroup's part, up to a few
          // thousand of them, adds a little to the one of the result).
          const float rounded = static_cast<float>(set.exact);
          const double ulp = std::nextafter(std::fabs(rounded), INFINITY) - std::fabs(rounded);
          const double off = error * largest;
          EXPECT_LE(off, 2 * ulp) << set.name << ", compensated, " << how;
          std::printf("%s: f32 compensated sum of %s: %.3g ulps off (relative error %.3g; %s)\n", gpu.target.c_str(),
                      set.name, off / ulp, error, how.c_str());
          continue;
        }
        const double bar = whole ? set.pytorch : set.pytorch_rows;
        // The row sums are held to PyTorch's on a GPU's forms (the serial
        // reduction's compensated sum); a CPU schedule's vector lanes split
        // each row by position, as PyTorch's do, and its figures are
        // recorded (docs/MATH_ACCURACY.md, "Sums"), not held.
        const bool held = whole || gpu.gpu_forms;
        if (held) {
          EXPECT_LE(error, bar) << set.name << ", " << program->name << ", " << how;
        }
        std::printf("%s: f32 %s of %s: relative error %.3g (%s; PyTorch %.3g%s)\n", gpu.target.c_str(),
                    whole ? "sum" : "row sums", set.name, error, how.c_str(), bar, held ? "" : ", not held");
      }
    }
  }
}

std::string testDir(std::string_view sub) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = tmp != nullptr ? tmp : "/tmp";
  if (!sub.empty()) {
    dir += "/";
    dir += sub;
    std::filesystem::create_directories(dir);
  }
  return dir;
}

}  // namespace accy::testing

namespace accy::testing {

namespace {

template <typename T>
std::vector<std::byte> bytesOf(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

void checkLoops(const GpuUnderTest& gpu) {
  using tensor::Builder;
  using tensor::ScanStep;
  using tensor::Value;
  using Args = std::span<const Value>;
  const Spec n3 = tensor::spec(DType::f32, {{"n", 3}});
  int ran = 0;
  // A scan over xs sliced along an axis in the middle, with an integer
  // carry and two ys; every length's parity, zero included.
  for (int64_t length : {0, 1, 4}) {
    const std::vector<Spec> specs = {n3, tensor::spec(DType::f32, {{"m", 2}, {"step", std::max<int64_t>(length, 1)}, {"n", 3}})};
    auto p = tensor::define("running", specs, [&](Builder& b, Args a) {
      const bool any = length > 0;
      tensor::ScanResult r = tensor::scan(
          b, {.length = length}, {a[0], b.constant(1, DType::i32)}, any ? std::vector<Value>{a[1]} : std::vector<Value>{},
          [&](Builder&, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<ScanStep> {
            const Value next = c[0] * 0.5f + (x.empty() ? c[0] : x[0].sum("m"));
            return ScanStep{{next, c[1] * 3.0}, any ? std::vector<Value>{next * c[1].cast(DType::f32), c[1]}
                                                    : std::vector<Value>{}};
          });
      std::vector<Value> out = r.carry;
      out.insert(out.end(), r.ys.begin(), r.ys.end());
      return out;
    });
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<float> xs(specs[1].elementCount());
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.9f * static_cast<float>(i));
    EXPECT_TRUE(runAndCompare(gpu, *p, {bytesOf(std::vector<float>{1, -2, 0.5f}), bytesOf(xs)})) << "length " << length;
    ++ran;
  }
  // A while loop with a captured limit: 0, 1 and several trips.
  auto doubling = tensor::define("doubling", {tensor::spec(DType::f32, {}), tensor::spec(DType::f32, {})},
                                 [](Builder& b, Args a) {
    const Value limit = a[1];
    return tensor::whileLoop(
        b, {a[0], b.constant(0, DType::i32)},
        [&](Builder&, std::span<const Value> c) -> absl::StatusOr<Value> { return c[0].lt(limit); },
        [](Builder&, std::span<const Value> c) -> absl::StatusOr<std::vector<Value>> {
          return std::vector<Value>{c[0] * 2.0f, c[1] + 1.0};
        });
  });
  ASSERT_TRUE(doubling.ok()) << doubling.status();
  for (float x0 : {500.0f, 60.0f, 7.5f}) {
    EXPECT_TRUE(runAndCompare(gpu, *doubling, {bytesOf(std::vector<float>{x0}), bytesOf(std::vector<float>{100})}))
        << "doubling " << x0;
    ++ran;
  }
  // Loops nested: a scan whose body runs a while loop on its carry (and
  // captures a value of the outer program).
  auto nested = tensor::define("nested", {n3, tensor::spec(DType::f32, {})}, [](Builder& b, Args a) {
    const Value scale = a[1];
    tensor::ScanResult r = tensor::scan(
        b, {.length = 3}, {a[0]}, {},
        [&](Builder& b, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
          const std::vector<Value> grown = tensor::whileLoop(
              b, {c[0]}, [](Builder&, std::span<const Value> d) -> absl::StatusOr<Value> { return d[0].sum("n").lt(40.0); },
              [&](Builder&, std::span<const Value> d) -> absl::StatusOr<std::vector<Value>> {
                return std::vector<Value>{d[0] * scale + 1.0f};
              });
          return ScanStep{{grown[0] * 0.25f}, {grown[0]}};
        });
    return std::vector<Value>{r.carry[0], r.ys[0]};
  });
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_TRUE(runAndCompare(gpu, *nested, {bytesOf(std::vector<float>{0.5f, 1, 2}), bytesOf(std::vector<float>{1.5f})}))
      << "nested";
  ++ran;
  // The gradient of a scan: a backward scan over stacked carries read
  // reversed (take at L-1-t).
  auto f = tensor::Function::define("decay", {n3, tensor::spec(DType::f32, {})}, [](Builder& b, Args a) {
    const Value w = a[1];
    return tensor::scan(b, {.length = 3}, {a[0]}, {},
                        [&](Builder&, std::span<const Value> c, std::span<const Value>) -> absl::StatusOr<ScanStep> {
                          return ScanStep{{c[0] * w + c[0].sin()}, {}};
                        })
        .carry[0]
        .sum("n");
  });
  ASSERT_TRUE(f.ok()) << f.status();
  auto g = f->valueAndGrad({.wrt = {0, 1}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(runAndCompare(gpu, g->program(), {bytesOf(std::vector<float>{0.2f, -0.4f, 0.9f}), bytesOf(std::vector<float>{0.8f})}));
  ++ran;
  std::printf("%d programs with loops run %s\n", ran,
              gpu.load_with_loops ? "whole, by the device's own runtime" : "as stages driven from here");
}

}  // namespace accy::testing
