// Lowering: tensor::Program -> Choir module, one kernel per op that needs
// memory of its own.
//
// Layout ops that only re-index (transpose, rename, broadcast, slice,
// split), constants, iota and inputs become index arithmetic at their uses;
// every other op gets a kernel writing a buffer: a loop nest over the
// result's axes for elementwise ops, a kReduce for reductions and dot, a
// loop nest over the operand's axes for merge, one nest per piece for
// concat. Outputs are written straight into output buffers. Dead nodes are
// dropped. The fusion pass then merges kernels.
#ifndef ACCY_COMPILER_CHOIR_LOWER_H_
#define ACCY_COMPILER_CHOIR_LOWER_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/tensor/program.h"

namespace accy::choir {

struct LowerOptions {
  // scatter_add as an ordered scatter into sums (a store at data-dependent
  // positions under a serial loop over the indices): what CPU targets run.
  // Off, the target-neutral form: a reduction per element over every index.
  bool serial_scatter = false;
};

absl::StatusOr<Module> lowerProgram(const tensor::Program& program, const LowerOptions& options = {});

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_LOWER_H_
