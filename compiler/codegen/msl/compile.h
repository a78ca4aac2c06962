// Program -> MSL Executable: Metal Shading Language compute kernels, which a
// Metal device compiles when it loads them (docs/GPU.md, "Metal").
//
// Executable layout for target "msl":
//   - code: the MSL sources of the kernels, one after another, each a whole
//     source (UTF-8 text) with one `kernel` function named kEntryName; its
//     first line describes the kernel (kernelInfo, artifact.h);
//   - launch_plan.steps[k].entry_offset: byte offset of kernel k's source
//     (its end is the next step's offset, or the end of the code);
//   - launch_plan.steps[k].parallel_extent: threadgroups along x;
//     group_size: threads per threadgroup;
//   - artifact_plan.buffers[b]: `[[buffer(b)]]`; a kernel takes only the
//     buffers it uses, in ascending order, then the thread position
//     builtins; its threadgroup arrays are declared in its body. Bools are
//     one byte per element (uchar), as outside.
// Metal has no f64: programs that use it are refused with Unimplemented
// naming the dtype and where. i64 is `long`.
#ifndef ACCY_COMPILER_CODEGEN_MSL_COMPILE_H_
#define ACCY_COMPILER_CODEGEN_MSL_COMPILE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::msl {

using codegen::ArithmeticMode;

// Every kernel's function name.
inline constexpr char kEntryName[] = "accy_kernel";

// What the device allows (an Apple GPU's limits, with the threadgroup size
// the mapping pass aims for).
struct TargetInfo {
  uint32_t max_workgroup_size = 256;  // of 1024 threads per threadgroup
  uint32_t max_workgroups = 65535;    // a grid-stride loop covers the rest
  uint32_t workgroup_memory = 32768;  // maxThreadgroupMemoryLength
  // kExact (default): the elementary functions of compiler/codegen/math,
  // for a library compiled with math mode "safe"; kFast: metal::fast::.
  ArithmeticMode mode = ArithmeticMode::kExact;
  // Tree reductions finish with SIMD-group shuffles (simd_shuffle_down);
  // off: in threadgroup memory only.
  bool simdgroups = true;
};

// The MSL element type of a buffer of `d`: "float", "int", "long", "uchar"
// (bools, one byte each).
const char* storedType(tensor::DType d);

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump = {});

}  // namespace accy::msl

#endif  // ACCY_COMPILER_CODEGEN_MSL_COMPILE_H_
