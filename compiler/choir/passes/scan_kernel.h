// A scan as one kernel: the time loop inside the kernel.
//
// A scan whose body is loop-free and small (no loop of the compiled body
// splits across threads) runs best as one kernel: the step loop inside it,
// each step the body's own scheduled kernels one after another, the
// carries in two buffers of their own that the steps write in turn (a
// step reads the one the step before wrote), so nothing is copied and no
// launch, stop check or plan bookkeeping sits between steps. The carries
// of a few lanes stay in the first-level cache (their loads forwarded from
// the stores of the step before). The step loop is unrolled twice so each
// of its iterations runs two steps with the buffers swapped at compile
// time; the first step reads the initial carries, and the last writes the
// scan's own outputs. Code size does not depend on the length.
//
// The CPU targets use it where the staged plan (backends/staged_program.h)
// would launch the body once a step; docs/SEMANTICS.md, "Loops".
#ifndef ACCY_COMPILER_CHOIR_PASSES_SCAN_KERNEL_H_
#define ACCY_COMPILER_CHOIR_PASSES_SCAN_KERNEL_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/tensor/program.h"

namespace accy::choir {

// The most work (steps x points of the body's statements) one scan kernel
// may hold: a kernel runs without the stop checks a staged loop makes
// between steps, so a caller's deadline waits at most this long (tens of
// milliseconds). Longer scans run step by step.
inline constexpr int64_t kMaxScanKernelWork = int64_t{1} << 25;

// Whether `program` is one scan: its inputs are the scan's operands in
// order, its nodes those inputs, the scan, and one loop_result per result
// in order, which are its outputs in order. StagedProgram makes such
// programs for the scans it offers a CPU loader.
bool isScanProgram(const tensor::Program& program);

// The kernel for the scan program `program`, whose body was compiled to
// `body` (every pass run). Unimplemented, naming why, when the scan does
// not fit one kernel: a body with a parallel loop, a length of 0, or more
// work than kMaxScanKernelWork; the caller then runs it step by step.
absl::StatusOr<Module> scanKernel(const tensor::Program& program, const Module& body);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_SCAN_KERNEL_H_
