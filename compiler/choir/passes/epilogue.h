// Product epilogues: an elementwise kernel that reads the result of a
// matrix product (tanh(dot(x, w) + b), say) runs inside the product's row
// loop, right after the row is complete, instead of as a kernel of its own
// that reads the product back from memory. The x86-64 emitter then applies
// it while each tile of the product is still in cache
// (kernel_emitter.h, Product).
#ifndef ACCY_COMPILER_CHOIR_PASSES_EPILOGUE_H_
#define ACCY_COMPILER_CHOIR_PASSES_EPILOGUE_H_

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// A product in the accumulate-in-output form loop_order makes,
//   outer... { for i { for j: C = 0;  for k { for j: C = C + ... } } }
// followed directly by a kernel that is a perfect nest over the same
// extents storing Out[...] = f(C[same element], other loads), gets that
// store as a third statement of its row loop:
//   ... for i { ...; for j': Out[...] = f(C[i, j'], ...) }
// when f reads C only at the element being stored and the product does not
// read Out. C is still stored (it may have other readers). Runs on the CPU
// pipeline after loop order.
absl::StatusOr<Module> fuseProductEpilogues(Module module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_EPILOGUE_H_
