// Structural and type checks of a Choir module. Runs after every pass in
// debug builds (compiler/choir/pipeline.cc) and in tests; a failure is a
// compiler bug and comes back as an Internal error naming the kernel and
// the statement.
#ifndef ACCY_COMPILER_CHOIR_VERIFIER_H_
#define ACCY_COMPILER_CHOIR_VERIFIER_H_

#include "absl/status/status.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// Checks: buffer ids and ranks; every variable bound by an enclosing loop
// or reduction domain, and bound once; every access provably in bounds for
// all values of the bound variables; no stores to inputs; operand dtypes of
// every op; reduction combiners; vectorized loops innermost; CPU-parallel
// loops outermost.
absl::Status verifyModule(const Module& module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_VERIFIER_H_
