// The checks of the device conformance suite (registered per device by
// tests/device_suite.h), against the reference evaluator with the
// tolerances of docs/CONFORMANCE.md: every op (f32, f64, i32, bool, i64
// where the device has it), integer pow's edge cases, bool buffers mixed
// with numbers, tiled products, tree reductions, random programs,
// transformed (batched, differentiated) random programs and the original's
// three tone tests. Programs are compiled with the device's compile_for_gpu
// (the cooperative forms on, for a GPU); the tone tests and the reductions
// as the device chooses go through the backend's own compile.
#ifndef ACCY_TESTS_GPU_CONFORMANCE_H_
#define ACCY_TESTS_GPU_CONFORMANCE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "accy/accy.h"
#include "backends/backend.h"
#include "gtest/gtest.h"

namespace accy::testing {

// How much of the suite runs. The defaults are the whole suite, what every
// device's own test runs; a slow stand-in for a device (the fake CUDA
// driver running every kernel on the PTX interpreter,
// tests/cuda_fake_conformance_test.cc) runs a deterministic part.
struct GpuSuiteSize {
  std::vector<int64_t> tree_extents = {256, 1000, 4099, 70000};  // checkTreeReductions' reduced extents
  int random_programs = 200;                                     // checkRandomPrograms: seeds 1 to this
  int transformed_programs = 60;                                 // checkTransformedPrograms: seeds 1 to this
  // checkEveryOp's largest extent p for the scatterAdd cases, whose GPU form
  // reduces every update for every output row (p * 5 rows of p updates: at
  // p = 300, 35 s a dtype on the PTX interpreter), and for every other case
  // (which runs at p = 1, 17 and this).
  int64_t scatter_max_extent = 300;
  int64_t op_max_extent = 300;
};

struct GpuUnderTest {
  backends::Backend* backend = nullptr;  // loads and launches
  std::string target;                    // the backend's artifact target: "spirv", "ptx"
  // Compiles with every cooperative form on (tree reductions, tiled
  // products, subgroup operations).
  std::function<absl::StatusOr<executable::Executable>(const tensor::Program&)> compile_for_gpu;
  bool int64 = false;   // the device runs i64
  bool float64 = true;  // the device runs f64 (WGSL: no; f64 cases are left out, random programs are f32)
  std::string note;    // printed by checkTreeReductions (e.g. the subgroup size)
  // compile_for_gpu maps programs onto workgroups (tiled products, trees);
  // false for a target scheduled as a CPU (wasm), whose forms are loops.
  bool gpu_forms = true;
  GpuSuiteSize size;   // the whole suite unless changed
  // checkAccurateSums' compiles, each named; empty: the backend's own
  // compile for `target` (what the device chooses). `whole_only`: the
  // plain sums of all the values alone (not the rows or the compensated).
  struct SumCompile {
    std::string name;
    std::function<absl::StatusOr<executable::Executable>(const tensor::Program&)> compile;
    bool whole_only = false;
  };
  std::vector<SumCompile> sum_compiles;
  // Loads many executables at once where the device can (the MSL shim:
  // one clang++ run for many), before runAndCompareEach runs them; null:
  // each loads alone.
  std::function<void(std::span<const executable::Executable>)> prepare;
  // Loads a program with loops whole, where the device runs loops itself
  // (the web runtimes run a plan artifact: web/accy_plan.js); null: the
  // program runs as stages driven from here (backends/staged_program.h),
  // each stage loaded as any program is.
  std::function<absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>>(const tensor::Program&)> load_with_loops;
};

// Programs runAndCompare left out because they hold a dtype the device
// lacks (GpuUnderTest::float64, int64: casts to f64, gradients with i64
// indices); the device's test prints the count.
int& programsLeftOutForDTypes();

// Compiles, runs and compares one program; the failure names the output.
::testing::AssertionResult runAndCompare(const GpuUnderTest& gpu, const tensor::Program& program,
                                         const std::vector<std::vector<std::byte>>& inputs);

// f32[i=8] -> f64 -> * 2 -> f32: an f64 multiply in a kernel, for targets
// that refuse f64 by name ("op mul in kernel ...").
// Programs checked together (runAndCompareEach), each named by `label`.
struct ProgramCase {
  tensor::Program program;
  std::vector<std::vector<std::byte>> inputs;
  std::string label;
};

// runAndCompare for each case, expecting each to match; the device's
// prepare sees every loop-free case's executable first.
void runAndCompareEach(const GpuUnderTest& gpu, const std::vector<ProgramCase>& cases);

absl::StatusOr<tensor::Program> programWithFloat64();

void checkEveryOp(const GpuUnderTest& gpu);
void checkIntegerPowEdgeCases(const GpuUnderTest& gpu);
void checkBoolBuffersMixedWithNumbers(const GpuUnderTest& gpu);
void checkTiledProducts(const GpuUnderTest& gpu);
void checkTreeReductions(const GpuUnderTest& gpu);
// Long reductions as the backend compiles them for its own device (its
// choice of forms, not the forced cooperative ones), up to 2^22 elements.
void checkReductionsAsTheDeviceChooses(const GpuUnderTest& gpu);
void checkRandomPrograms(const GpuUnderTest& gpu);
void checkTransformedPrograms(const GpuUnderTest& gpu);
void checkTheThreeToneTests(const GpuUnderTest& gpu);
// The f32 sums of tests/sum_data.h (2^24 values each, and the same values
// as 8192 rows of 2048 summed along the row): every sum's relative error
// against the double sum at most PyTorch's on the same values (the rows on
// GPU forms only: a CPU schedule's row sums are printed, not held); the
// compensated sum (tensor::SumOptions) of each within two ulps of the exact.
void checkAccurateSums(const GpuUnderTest& gpu);
// Programs with loops (scan with xs and ys of every length parity and 0,
// while_loop of 0, 1 and several trips, a scan's gradient) run as stages
// (backends/staged_program.h), each compiled for the device.
void checkLoops(const GpuUnderTest& gpu);

// A directory for the test's files: $TEST_TMPDIR (or /tmp), with `sub`
// below it made when given.
std::string testDir(std::string_view sub = "");

// `dot` with tf32 operands (10 of f32's 23 mantissa bits, rounded to
// nearest) accumulated in f32: every output within 2^-9 sum |a||b| (plus
// f32's accumulation error) of the exact sum, tf32's rounding visible in
// some, and `instruction` (e.g. "mma.sync") in the module; ragged shapes.
using CompileFn = std::function<absl::StatusOr<executable::Executable>(const tensor::Program&)>;
void checkTf32Products(const GpuUnderTest& gpu, const CompileFn& compile_tf32, std::string_view instruction);

}  // namespace accy::testing

#endif  // ACCY_TESTS_GPU_CONFORMANCE_H_
