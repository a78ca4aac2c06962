// The tf32 request: marks the kernels whose product is asked to run on
// tensor cores with TF32 inputs (Kernel::tf32), for targets that have them
// (PTX, mode tf32). A kernel is marked when its reduction was lowered from a
// `dot` (Stmt::from_dot), fused producers included; sums of products written
// by hand keep full f32 arithmetic. The target refuses a marked kernel it
// cannot run that way (a dot of f64, say), naming it.
#ifndef ACCY_COMPILER_CHOIR_PASSES_TF32_H_
#define ACCY_COMPILER_CHOIR_PASSES_TF32_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

absl::StatusOr<Module> requestTf32(Module module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_TF32_H_
