// Fusion: inlines a kernel that computes a temporary elementwise into the
// kernels that read it, so elementwise chains become one kernel and
// producers fold into the reductions and dots that consume them.
#ifndef ACCY_COMPILER_CHOIR_PASSES_FUSE_H_
#define ACCY_COMPILER_CHOIR_PASSES_FUSE_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// A producer is inlined when it is a perfect loop nest storing a temporary
// at its own loop variables and no other kernel writes that temporary. An
// expensive producer (transcendentals, division) is kept as its own kernel
// when inlining would evaluate it more often than it has elements: at
// several distinct sites, or under loops its result does not depend on.
absl::StatusOr<Module> fuseKernels(Module module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_FUSE_H_
