// Loop order: puts the loop that walks memory contiguously innermost.
#ifndef ACCY_COMPILER_CHOIR_PASSES_LOOP_ORDER_H_
#define ACCY_COMPILER_CHOIR_PASSES_LOOP_ORDER_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// For a perfect nest ending in a store, the loop whose variable has stride
// 1 in the stored buffer moves innermost (the others keep their order). For
// a reduction, the domain loop with the most unit-stride loads moves
// innermost. When no reduction loop walks memory contiguously but the
// innermost output loop does (a matrix product's j), the reduction is
// rewritten to accumulate in the output buffer with that loop innermost
// (i-k-j order). Results are identical up to the reassociation of floating
// reductions.
absl::StatusOr<Module> orderLoops(Module module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_LOOP_ORDER_H_
