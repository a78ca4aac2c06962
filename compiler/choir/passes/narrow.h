// Producers narrowed to what is read: a kernel that computes a temporary
// over its whole shape, when every reader reads only a box of it (the
// gradient of a padded input, whose padding rows the slice drops), runs
// its loops over that box only.
#ifndef ACCY_COMPILER_CHOIR_PASSES_NARROW_H_
#define ACCY_COMPILER_CHOIR_PASSES_NARROW_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// For each temporary T written by exactly one kernel, whose body is one
// perfect nest ending in one store or reduce to T with every dimension of
// T indexed by a loop variable of its own (coefficient 1, over T's whole
// extent), and which that kernel does not read: the range of each
// dimension that the other kernels' loads can reach (over their loops'
// extents; a dimension indexed by data, or by anything else than loop
// variables, counts as read whole) bounds that dimension's loop, shifted
// to start at the range's first element. The elements left out are never
// read, so T's other elements are left unwritten (temporaries start
// undefined). Runs on the CPU pipeline, after fusion.
absl::StatusOr<Module> narrowProducers(Module module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_NARROW_H_
