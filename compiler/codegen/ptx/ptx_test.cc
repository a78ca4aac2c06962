// Every PTX module of the test programs assembles with the real ptxas, for
// sm_90 and for sm_70 (CUDA 13's ptxas no longer generates code for sm_70,
// so sm_70 modules are assembled for sm_75, which PTX for .target sm_70
// allows; ptxas still checks every instruction against .target sm_70), and
// what the emitter cannot do is refused by name.
#include "compiler/codegen/ptx/compile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "accy/accy.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/codegen/ptx/pipeline.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
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

// ptxas from PATH, $CUDA_HOME/bin or /usr/local/cuda/bin; "" if none.
const std::string& ptxas() {
  static const std::string path = [] {
    auto executable = [](const std::string& p) { return access(p.c_str(), X_OK) == 0; };
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("PATH")) {
      std::stringstream ss(env);
      for (std::string d; std::getline(ss, d, ':');) dirs.push_back(d);
    }
    if (const char* cuda = std::getenv("CUDA_HOME")) dirs.push_back(std::string(cuda) + "/bin");
    dirs.push_back("/usr/local/cuda/bin");
    for (const std::string& d : dirs) {
      if (!d.empty() && executable(d + "/ptxas")) return d + "/ptxas";
    }
    return std::string();
  }();
  return path;
}

#define SKIP_WITHOUT_PTXAS() \
  if (ptxas().empty()) GTEST_SKIP() << "ptxas not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"

// How many modules ptxas accepted, per -arch (printed at the end).
std::map<std::string, int>& assembled() {
  static std::map<std::string, int> counts;
  return counts;
}

std::string moduleText(const executable::Executable& exe) { return std::string(exe.code.begin(), exe.code.end()); }

// Assembles `exe`'s module with `ptxas -arch=<arch>`; "" on success, else
// ptxas's complaint and the module.
std::string assemble(const executable::Executable& exe, const std::string& arch) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string path = dir + "/module.ptx";
  const std::string text = moduleText(exe);
  std::ofstream(path, std::ios::binary).write(text.data(), static_cast<std::streamsize>(text.size()));
  const std::string cmd = ptxas() + " -arch=" + arch + " " + path + " -o " + dir + "/module.cubin 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed: " + cmd;
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  if (status != 0) {
    std::string numbered;
    std::istringstream lines(text);
    int n = 0;
    for (std::string line; std::getline(lines, line);) numbered += std::to_string(++n) + ": " + line + "\n";
    return "ptxas -arch=" + arch + " failed (status " + std::to_string(status) + "):\n" + out + "\n" + numbered;
  }
  ++assembled()[arch];
  // ACCY_PTX_DUMP=DIR (running the test binary by hand) keeps every module.
  if (const char* dump = std::getenv("ACCY_PTX_DUMP")) {
    static int n = 0;
    std::ofstream(std::string(dump) + "/" + std::to_string(++n) + "_" + arch + ".ptx", std::ios::binary)
        .write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  return "";
}

TargetInfo target(int sm, ArithmeticMode mode = ArithmeticMode::kExact) {
  TargetInfo t;
  t.sm = sm;
  t.ptx_version = 78;
  t.mode = mode;
  return t;
}

// The ptxas -arch for a module made for `sm`.
std::string archFor(int sm) { return sm < 75 ? "sm_75" : "sm_" + std::to_string(sm); }

// Compiles for `t` and assembles; a gtest failure names `what`.
void compileAndAssemble(const tensor::Program& p, const TargetInfo& t, const std::string& what) {
  auto exe = compileProgram(p, t);
  ASSERT_TRUE(exe.ok()) << what << ": " << exe.status() << "\n" << tensor::toText(p);
  EXPECT_EQ(assemble(*exe, archFor(t.sm)), "") << what << "\n" << tensor::toText(p);
}

std::string kernelText(const executable::Executable& exe, size_t k) {
  const std::string text = moduleText(exe);
  const size_t begin = exe.launch_plan.steps[k].entry_offset;
  const size_t end = text.find("\n}\n", begin);
  return text.substr(begin, end - begin);
}

TEST(Ptx, PtxasCatchesBadModules) {
  SKIP_WITHOUT_PTXAS();
  executable::Executable exe;
  const std::string bad = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k() { frobnicate.f32 %f1; }\n";
  exe.code.assign(bad.begin(), bad.end());
  EXPECT_THAT(assemble(exe, "sm_90"), ::testing::HasSubstr("failed"));
}

// Every op case (tests/op_cases.h) over f32, f64, i32, i64 and bool (one
// test per dtype, so the shards share the work), with extents that give one
// element, ragged blocks, and tree reductions: exact mode for sm_90 and
// sm_70, fast mode too for the float-only cases. A case recording refuses
// by design is asserted refused (tests/op_cases.h), never dropped.
class PtxOpCases : public ::testing::TestWithParam<DType> {};

TEST_P(PtxOpCases, EveryOpCaseAssembles) {
  SKIP_WITHOUT_PTXAS();
  const DType dtype = GetParam();
  int programs = 0;
  for (const testing::OpCase& c : testing::opCases()) {
    if (c.floats_only && !tensor::isFloating(dtype)) continue;  // written for floating operands
    for (int64_t p : {1, 17, 300}) {
      const std::vector<Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", 5}}), tensor::spec(dtype, {{"p", p}, {"q", 5}})};
      const std::optional<tensor::Program> program = testing::recordCase(c, dtype, p, specs);
      if (!program) continue;  // a refusal by design, asserted by recordCase
      ++programs;
      const std::string what = std::string(c.name) + " " + std::string(tensor::dtypeName(dtype)) + " p=" + std::to_string(p);
      compileAndAssemble(*program, target(90), what + " sm_90");
      if (p != 17) compileAndAssemble(*program, target(70), what + " sm_70");
      if (p == 300) {
        auto wide = compileProgramWith(*program, target(90), EmitOptions{.wide_indices = true});
        ASSERT_TRUE(wide.ok()) << what << ": " << wide.status();
        EXPECT_EQ(assemble(*wide, "sm_90"), "") << what << " 64-bit indices";
      }
      if (c.floats_only) {
        compileAndAssemble(*program, target(90, ArithmeticMode::kFast), what + " sm_90 fast");
        if (p == 17) compileAndAssemble(*program, target(70, ArithmeticMode::kFast), what + " sm_70 fast");
      }
    }
  }
  EXPECT_GT(programs, tensor::isFloating(dtype) ? 120 : 40);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PtxOpCases, ::testing::Values(DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(tensor::dtypeName(info.param));
                         });

// 120 random programs, in twelve tests of 10 seeds (so the shards share
// the work: a few seeds make large programs, slow to compile under TSan).
class PtxRandomPrograms : public ::testing::TestWithParam<uint32_t> {};

TEST_P(PtxRandomPrograms, Assemble) {
  SKIP_WITHOUT_PTXAS();
  for (uint32_t seed = GetParam(); seed < GetParam() + 10; ++seed) {
    testing::RandomOptions o;
    o.dtype = seed % 3 ? DType::f32 : DType::f64;
    if (seed % 5 == 0) o.max_extent = 300;  // long domains: tree reductions, tiled dots
    auto c = testing::randomProgram(seed, o);
    const ArithmeticMode mode = seed % 2 ? ArithmeticMode::kExact : ArithmeticMode::kFast;
    compileAndAssemble(c.program, target(seed % 4 == 0 ? 70 : 90, mode), "seed " + std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PtxRandomPrograms, ::testing::Range(1u, 121u, 10u));

// The original's three tone programs, the last through valueAndGrad and vmap.
TEST(Ptx, ToneProgramsAssemble) {
  SKIP_WITHOUT_PTXAS();
  const Spec one[] = {tensor::spec(DType::f32, {}), tensor::spec(DType::f32, {{"point", 16}}),
                      tensor::spec(DType::f32, {{"point", 16}})};
  const Spec eight[] = {tensor::spec(DType::f32, {{"guess", 8}}), tensor::spec(DType::f32, {{"point", 16}}),
                        tensor::spec(DType::f32, {{"point", 16}})};
  auto p1 = tensor::define("mismatch", one, tone::mismatch);
  auto p8 = tensor::define("mismatch", eight, tone::mismatch);
  auto f = tensor::Function::define("mismatch", one, tone::mismatch);
  ASSERT_TRUE(p1.ok() && p8.ok() && f.ok());
  auto each = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  ASSERT_TRUE(each.ok()) << each.status();
  for (const tensor::Program* p : std::vector<const tensor::Program*>{&*p1, &*p8, &each->program()}) {
    for (ArithmeticMode mode : {ArithmeticMode::kExact, ArithmeticMode::kFast, ArithmeticMode::kTf32}) {
      compileAndAssemble(*p, target(90, mode), p->name);
    }
    compileAndAssemble(*p, target(70), p->name);
  }
  // A long tone: one block reduces the one output through the tree.
  const Spec long_specs[] = {tensor::spec(DType::f32, {}), tensor::spec(DType::f32, {{"point", 4096}}),
                             tensor::spec(DType::f32, {{"point", 4096}})};
  auto p = tensor::define("mismatch", long_specs, tone::mismatch);
  auto exe = compileProgram(*p, target(90));
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(assemble(*exe, "sm_90"), "");
  ASSERT_EQ(exe->launch_plan.steps.size(), 1u);
  EXPECT_EQ(exe->launch_plan.steps[0].parallel_extent, 1);
  const std::string k = kernelText(*exe, 0);
  EXPECT_THAT(k, ::testing::HasSubstr("shfl.sync.down.b32"));
  EXPECT_THAT(k, ::testing::HasSubstr("bar.sync 0"));
}

// Long reductions with few outputs are split across blocks (partials and
// a combining kernel, passes/gpu_map.h).
TEST(Ptx, LongReductionsAreSplitAcrossBlocks) {
  SKIP_WITHOUT_PTXAS();
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_}) {
    const Spec specs[] = {tensor::spec(d, {{"r", 3}, {"p", 100000}})};
    auto p = tensor::define("long", specs, [d](tensor::Builder&, Args a) {
      return d == DType::bool_ ? a[0].max("p") : a[0].sum("p");
    });
    ASSERT_TRUE(p.ok()) << p.status();
    auto exe = compileProgram(*p, target(90));
    ASSERT_TRUE(exe.ok()) << exe.status();
    ASSERT_EQ(exe->launch_plan.steps.size(), 2u) << moduleText(*exe);
    EXPECT_GT(exe->launch_plan.steps[0].parallel_extent, 3);
    EXPECT_EQ(exe->launch_plan.steps[1].kernel, exe->launch_plan.steps[0].kernel + "_parts");
    EXPECT_EQ(assemble(*exe, "sm_90"), "") << tensor::dtypeName(d);
    compileAndAssemble(*p, target(70), "long sm_70");
  }
}

// grad and vmap of programs with products: transposed dots, batch axes.
TEST(Ptx, TransformedProgramsAssemble) {
  SKIP_WITHOUT_PTXAS();
  for (DType d : {DType::f32, DType::f64}) {
    const Spec specs[] = {tensor::spec(d, {{"i", 40}, {"k", 24}}), tensor::spec(d, {{"k", 24}, {"j", 33}}),
                          tensor::spec(d, {{"i", 40}, {"j", 33}})};
    auto loss = tensor::Function::define("loss", specs, [](tensor::Builder&, Args a) {
      tensor::Value r = a[0].dot(a[1], "k") - a[2];
      return (r * r).mean({"i", "j"});
    });
    ASSERT_TRUE(loss.ok()) << loss.status();
    auto g = loss->valueAndGrad({.wrt = {0, 1}});
    ASSERT_TRUE(g.ok()) << g.status();
    compileAndAssemble(g->program(), target(90), "grad loss");
    compileAndAssemble(g->program(), target(70), "grad loss sm_70");
    auto batched = loss->vmap({.axis_size = 3,
                               .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::mappedAxis(0)},
                               .axis_name = "b"});
    ASSERT_TRUE(batched.ok()) << batched.status();
    compileAndAssemble(batched->program(), target(90), "vmap loss");
    auto vg = g->vmap({.axis_size = 3,
                       .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::mappedAxis(0)},
                       .axis_name = "b"});
    ASSERT_TRUE(vg.ok()) << vg.status();
    compileAndAssemble(vg->program(), target(90, ArithmeticMode::kFast), "vmap grad loss");
  }
}

// Dots that hit the tiled form with ragged rows, columns and slices, with
// one output per thread and register-blocked 4x4 (rows and columns >= 2T:
// blocks of 64 x 64 outputs, ragged in every direction).
TEST(Ptx, TiledDotsWithRaggedEdgesAssemble) {
  SKIP_WITHOUT_PTXAS();
  struct Shape {
    int64_t b, i, k, j;
  };
  for (const Shape& s : {Shape{1, 40, 24, 33}, Shape{3, 17, 5 + 16, 9}, Shape{1, 64, 64, 64}, Shape{2, 8, 8, 8},
                         Shape{1, 100, 13, 30}, Shape{1, 37, 70, 19 + 32}, Shape{3, 40, 21, 35}, Shape{1, 130, 17, 97},
                         Shape{1, 32, 16, 32}}) {
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64}) {
      const Spec specs[] = {tensor::spec(d, {{"b", s.b}, {"i", s.i}, {"k", s.k}}), tensor::spec(d, {{"k", s.k}, {"j", s.j}})};
      auto p = tensor::define("dot", specs, [](tensor::Builder&, Args a) { return (a[0] + 1).dot(a[1], "k"); });
      ASSERT_TRUE(p.ok()) << p.status();
      const std::string what = std::string(tensor::dtypeName(d)) + " " + std::to_string(s.i) + "x" + std::to_string(s.k) +
                               "x" + std::to_string(s.j);
      // Register blocking when rows and columns are both at least 2T = 32.
      const int64_t micro = s.i >= 32 && s.j >= 32 ? 4 : 1, edge = 16 * micro;
      for (int sm : {90, 70}) {
        auto m = gpuModule(*p, target(sm));
        ASSERT_TRUE(m.ok()) << m.status();
        ASSERT_EQ(m->kernels.size(), 1u);
        auto nest = choir::describeGpuKernel(m->kernels[0]);
        ASSERT_TRUE(nest.ok()) << nest.status();
        EXPECT_EQ(nest->form, choir::GpuForm::kTiledProduct) << what;
        EXPECT_EQ(nest->micro, micro) << what;
        auto exe = compileProgram(*p, target(sm));
        ASSERT_TRUE(exe.ok()) << exe.status();
        ASSERT_EQ(exe->launch_plan.steps.size(), 1u);
        const auto& step = exe->launch_plan.steps[0];
        EXPECT_EQ(step.group_size, 256);
        const int64_t tiles = s.b * ((s.i + edge - 1) / edge) * ((s.j + edge - 1) / edge);
        EXPECT_EQ(step.parallel_extent, tiles) << what;
        const std::string k = kernelText(*exe, 0);
        EXPECT_THAT(moduleText(*exe), ::testing::HasSubstr("// kernel " + step.kernel + ": tiled product")) << what;
        EXPECT_THAT(k, ::testing::HasSubstr("ld.shared")) << what;
        EXPECT_EQ(assemble(*exe, archFor(sm)), "") << what;
      }
      if (d == DType::f32) {
        auto fast = compileProgram(*p, target(90, ArithmeticMode::kFast));
        ASSERT_TRUE(fast.ok()) << fast.status();
        EXPECT_EQ(assemble(*fast, "sm_90"), "") << what << " fast";
        for (int sm : {80, 90}) {
          // tf32: never register-blocked (the mma.sync path is 1x1).
          auto m = gpuModule(*p, target(sm, ArithmeticMode::kTf32));
          ASSERT_TRUE(m.ok()) << m.status();
          auto nest = choir::describeGpuKernel(m->kernels[0]);
          ASSERT_TRUE(nest.ok()) << nest.status();
          EXPECT_EQ(nest->micro, 1) << what;
          auto exe = compileProgram(*p, target(sm, ArithmeticMode::kTf32));
          ASSERT_TRUE(exe.ok()) << exe.status();
          EXPECT_THAT(moduleText(*exe), ::testing::HasSubstr("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
          EXPECT_THAT(moduleText(*exe), ::testing::HasSubstr("cvt.rna.tf32.f32"));
          EXPECT_EQ(exe->isa, "sm_" + std::to_string(sm) + "-tf32");
          EXPECT_EQ(assemble(*exe, archFor(sm)), "") << what << " tf32 sm_" << sm;
        }
      }
    }
  }
  // The tail slice's inner loop covers only the points in range: K = 21
  // is one full slice of 16 and a tail of 5 (5 products, not 16).
  const Spec specs[] = {tensor::spec(DType::f32, {{"i", 16}, {"k", 21}}), tensor::spec(DType::f32, {{"k", 21}, {"j", 16}})};
  auto p = tensor::define("dot", specs, [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); });
  auto exe = compileProgram(*p, target(90));
  ASSERT_TRUE(exe.ok());
  const std::string k = kernelText(*exe, 0);
  size_t muls = 0;
  for (size_t at = k.find("mul.rn.f32"); at != std::string::npos; at = k.find("mul.rn.f32", at + 1)) ++muls;
  EXPECT_EQ(muls, 16u + 5u);
}

TEST(Ptx, Tf32IsRefusedByNameWhereADotCannotUseIt) {
  auto refused = [](const tensor::Program& p, const TargetInfo& t, const std::string& why) {
    auto exe = compileProgram(p, t);
    ASSERT_FALSE(exe.ok());
    EXPECT_EQ(errorKind(exe.status()), ErrorKind::kInvalidArgument);
    EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("_dot"));
    EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr(why));
  };
  auto dot = [](DType d, int64_t i, int64_t k, int64_t j) {
    const Spec specs[] = {tensor::spec(d, {{"i", i}, {"k", k}}), tensor::spec(d, {{"k", k}, {"j", j}})};
    return *tensor::define("dot", specs, [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); });
  };
  refused(dot(DType::f64, 32, 32, 32), target(90, ArithmeticMode::kTf32), "f64, not f32");
  refused(dot(DType::f32, 32, 32, 32), target(75, ArithmeticMode::kTf32), "sm_80");
  refused(dot(DType::f32, 4, 32, 32), target(90, ArithmeticMode::kTf32), "serial reduction");
  TargetInfo small = target(90, ArithmeticMode::kTf32);
  small.max_threads_per_block = 128;
  refused(dot(DType::f32, 32, 32, 32), small, "16x16 tiles");
  // Matrix-vector: no column axis.
  const Spec mv[] = {tensor::spec(DType::f32, {{"i", 64}, {"k", 64}}), tensor::spec(DType::f32, {{"k", 64}})};
  auto p = tensor::define("mv", mv, [](tensor::Builder&, Args a) { return a[0].dot(a[1], "k"); });
  refused(*p, target(90, ArithmeticMode::kTf32), "not a tiled product");
  // A sum of products that is not a `dot` is not affected; nor is exact mode.
  const Spec sq[] = {tensor::spec(DType::f64, {{"p", 300}})};
  auto sum = tensor::define("s", sq, [](tensor::Builder&, Args a) { return (a[0] * a[0]).sum("p"); });
  EXPECT_TRUE(compileProgram(*sum, target(90, ArithmeticMode::kTf32)).ok());
  EXPECT_TRUE(compileProgram(dot(DType::f64, 32, 32, 32), target(90)).ok());
}

TEST(Ptx, EntriesCarryReqntidAndOneParamPerBuffer) {
  const Spec specs[] = {tensor::spec(DType::f32, {{"i", 40}, {"k", 24}}), tensor::spec(DType::f32, {{"k", 24}, {"j", 33}})};
  auto p = tensor::define("mixed", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
    return {a[0].dot(a[1], "k").exp(), a[0].sum("k"), a[1].max({"k", "j"}), a[0].gt(0.5)};
  });
  ASSERT_TRUE(p.ok()) << p.status();
  for (uint32_t limit : {1024u, 64u, 32u, 8u}) {
    TargetInfo t = target(90);
    t.max_threads_per_block = limit;
    auto exe = compileProgram(*p, t);
    ASSERT_TRUE(exe.ok()) << exe.status();
    const std::string text = moduleText(*exe);
    EXPECT_EQ(text.rfind(".version 7.8\n.target sm_90\n.address_size 64\n", 0), 0u) << text.substr(0, 80);
    EXPECT_EQ(exe->target, "ptx");
    EXPECT_EQ(text.find('\0'), std::string::npos);
    ASSERT_GE(exe->launch_plan.steps.size(), 4u);
    for (size_t k = 0; k < exe->launch_plan.steps.size(); ++k) {
      const auto& step = exe->launch_plan.steps[k];
      const std::string entry = kernelText(*exe, k);
      EXPECT_EQ(entry.rfind(".visible .entry " + step.kernel + "(", 0), 0u) << entry.substr(0, 80);
      EXPECT_THAT(entry, ::testing::HasSubstr(")\n.reqntid " + std::to_string(step.group_size) + "\n{"));
      EXPECT_LE(step.group_size, static_cast<int64_t>(limit));
      EXPECT_GE(step.parallel_extent, 1);
      size_t params = 0;
      for (size_t at = entry.find(".param .u64"); at != std::string::npos; at = entry.find(".param .u64", at + 1)) ++params;
      EXPECT_EQ(params, exe->artifact_plan.buffers.size());
    }
    EXPECT_TRUE(executable::validateExecutable(*exe).ok());
    if (!ptxas().empty()) {
      EXPECT_EQ(assemble(*exe, "sm_90"), "") << "limit " << limit;
    }
  }
}

TEST(Ptx, GridStrideLoopsNeverAskForMoreBlocksThanTheDeviceHas) {
  const Spec specs[] = {tensor::spec(DType::f32, {{"i", 100000}})};
  auto p = tensor::define("big", specs, [](tensor::Builder&, Args a) { return a[0] * 2; });
  TargetInfo t = target(90);
  t.max_grid_x = 7;
  auto exe = compileProgram(*p, t);
  ASSERT_TRUE(exe.ok());
  EXPECT_EQ(exe->launch_plan.steps[0].parallel_extent, 7);
  t.max_grid_x = 1u << 30;
  exe = compileProgram(*p, t);
  EXPECT_EQ(exe->launch_plan.steps[0].parallel_extent, (100000 + 255) / 256);
}

TEST(Ptx, ConstantsAreExactHexLiterals) {
  for (DType d : {DType::f32, DType::f64}) {
    const Spec specs[] = {tensor::spec(d, {{"i", 8}})};
    auto p = tensor::define("special", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
      return {a[0] + std::numeric_limits<double>::quiet_NaN(), a[0].max(std::numeric_limits<double>::infinity()),
              a[0] - (-std::numeric_limits<double>::infinity()), a[0] * 0.1};
    });
    ASSERT_TRUE(p.ok()) << p.status();
    auto exe = compileProgram(*p, target(90));
    ASSERT_TRUE(exe.ok()) << exe.status();
    const std::string text = moduleText(*exe);
    if (d == DType::f32) {
      EXPECT_THAT(text, ::testing::HasSubstr("0f7FC00000"));  // NaN
      EXPECT_THAT(text, ::testing::HasSubstr("0f7F800000"));  // inf
      EXPECT_THAT(text, ::testing::HasSubstr("0fFF800000"));  // -inf
      EXPECT_THAT(text, ::testing::HasSubstr("0f3DCCCCCD"));  // 0.1f
    } else {
      EXPECT_THAT(text, ::testing::HasSubstr("0d7FF8000000000000"));
      EXPECT_THAT(text, ::testing::HasSubstr("0d7FF0000000000000"));
      EXPECT_THAT(text, ::testing::HasSubstr("0dFFF0000000000000"));
      EXPECT_THAT(text, ::testing::HasSubstr("0d3FB999999999999A"));
    }
    if (!ptxas().empty()) {
      EXPECT_EQ(assemble(*exe, "sm_90"), "");
    }
  }
}

TEST(Ptx, BoolBuffersAreBytes) {
  const Spec specs[] = {tensor::spec(DType::bool_, {{"i", 300}}), tensor::spec(DType::f32, {{"i", 300}})};
  auto p = tensor::define("b", specs, [](tensor::Builder&, Args a) -> std::vector<tensor::Value> {
    return {a[0].ne(a[1].gt(0.0)), a[0].max("i"), a[0].min("i"), tensor::where(a[0], a[1], -a[1])};
  });
  ASSERT_TRUE(p.ok()) << p.status();
  auto exe = compileProgram(*p, target(90));
  ASSERT_TRUE(exe.ok()) << exe.status();
  const std::string text = moduleText(*exe);
  EXPECT_THAT(text, ::testing::HasSubstr("ld.global.nc.u8"));
  EXPECT_THAT(text, ::testing::HasSubstr("st.global.u8"));
  if (!ptxas().empty()) {
    EXPECT_EQ(assemble(*exe, "sm_90"), "");
    }
}

TEST(Ptx, ModesAndTargetsAreChecked) {
  const Spec specs[] = {tensor::spec(DType::f32, {{"i", 8}})};
  auto p = tensor::define("t", specs, [](tensor::Builder&, Args a) { return a[0].sin().tanh(); });
  auto exact = compileProgram(*p, target(90));
  auto fast = compileProgram(*p, target(90, ArithmeticMode::kFast));
  auto fast70 = compileProgram(*p, target(70, ArithmeticMode::kFast));
  ASSERT_TRUE(exact.ok() && fast.ok() && fast70.ok());
  EXPECT_EQ(exact->isa, "sm_90");
  EXPECT_EQ(fast->isa, "sm_90-fast");
  EXPECT_THAT(moduleText(*exact), ::testing::Not(::testing::HasSubstr(".approx")));
  EXPECT_THAT(moduleText(*fast), ::testing::HasSubstr("sin.approx.f32"));
  EXPECT_THAT(moduleText(*fast), ::testing::HasSubstr("tanh.approx.f32"));
  // tanh.approx needs sm_75: on sm_70 fast tanh is the exact sequence.
  EXPECT_THAT(moduleText(*fast70), ::testing::Not(::testing::HasSubstr("tanh.approx")));
  EXPECT_EQ(moduleText(*fast70).rfind(".version 6.0\n.target sm_70\n", 0), 0u);
  // Newer devices get the newest .target known; older ones are refused.
  auto future = compileProgram(*p, target(95));
  ASSERT_TRUE(future.ok());
  EXPECT_THAT(moduleText(*future), ::testing::HasSubstr(".target sm_90\n"));
  EXPECT_EQ(errorKind(compileProgram(*p, target(61)).status()), ErrorKind::kInvalidArgument);
  TargetInfo old_driver = target(90);
  old_driver.ptx_version = 70;
  auto too_old = compileProgram(*p, old_driver);
  EXPECT_EQ(errorKind(too_old.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(std::string(too_old.status().message()), ::testing::HasSubstr("PTX ISA 7.8"));
  TargetInfo odd_warp = target(90);
  odd_warp.warp_size = 64;
  EXPECT_EQ(errorKind(compileProgram(*p, odd_warp).status()), ErrorKind::kInvalidArgument);
}

TEST(Ptx, Summary) {
  for (const auto& [arch, n] : assembled()) std::printf("ptxas -arch=%s accepted %d modules\n", arch.c_str(), n);
}

}  // namespace
}  // namespace accy::ptx
