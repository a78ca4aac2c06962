// Program -> WebAssembly Executable (docs/WASM.md): the CPU pipeline
// scheduled for 16-byte vectors (f32x4, f64x2), each kernel one exported
// function of one module that imports its memory (env.memory), run by
// web/accy_wasm.js in a browser or in node.
//
// Executable layout for target "wasm":
//   - code: the whole module (binary);
//   - launch_plan.steps[k]: kernel k is the function exported as "k<k>"
//     (entry_offset = k), taking (table, begin, end): the address of an i32
//     array with every buffer's address, and the part [begin, end) of its
//     outermost parallel loop (parallel_extent iterations; 0: call it once
//     with [0, 1));
//   - artifact_plan.buffers[b]: buffer b of the table; bools one byte per
//     element; temps are placed by the host like the other buffers.
// Every dtype (f32, f64, i32, i64, bool) and every op compiles.
#ifndef ACCY_COMPILER_CODEGEN_WASM_COMPILE_H_
#define ACCY_COMPILER_CODEGEN_WASM_COMPILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::wasm {

using codegen::ArithmeticMode;

struct TargetInfo {
  // kExact and kFast compile the same code: WebAssembly has no
  // transcendental instructions, so both use compiler/codegen/math.
  ArithmeticMode mode = ArithmeticMode::kExact;
  // Workers a launch may split its outermost parallel loops across (Web
  // Workers or node's worker threads over one shared memory); 1: no
  // parallel loops, and an unshared memory.
  int threads = 1;
};

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump = {});

// The JSON artifact (format accy-wasm-1, the WGSL artifact's form): buffers,
// kernels with their exports and parallel extents, the specs, and the module
// in base64.
absl::StatusOr<std::string> artifactJson(const executable::Executable& exe);

// The threads an executable was compiled for (its isa names them:
// "wasm-simd128-threads-4"); 1 without threads.
int threadsOf(const executable::Executable& exe);

}  // namespace accy::wasm

#endif  // ACCY_COMPILER_CODEGEN_WASM_COMPILE_H_
