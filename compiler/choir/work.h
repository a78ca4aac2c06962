// Work counts of the compiler, for the tests that check that compile time
// grows linearly with the program (tests/compile_scaling_test.cc).
//
// The counts are kept by the primitives every pass and emitter goes
// through: each expression node made, copied, visited, printed or given a
// value number adds one, and each affine term substituted adds one. A pass
// that rescans the module per node, or copies an expression tree per use,
// shows up as counts that grow faster than the program; a count never
// depends on the machine or its load, so the tests assert ratios of counts
// instead of timing anything.
#ifndef ACCY_COMPILER_CHOIR_WORK_H_
#define ACCY_COMPILER_CHOIR_WORK_H_

#include <cstdint>

namespace accy::choir {

// Work done on this thread so far (it only grows).
inline thread_local int64_t work_units = 0;

inline void countWork(int64_t n = 1) { work_units += n; }
inline int64_t workUnits() { return work_units; }

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_WORK_H_
