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
#include <limits>

#include "absl/status/status.h"

namespace accy::choir {

// Work done on this thread so far (it only grows).
inline thread_local int64_t work_units = 0;

namespace internal {
// The work count at which countWork next asks the installed stop check
// (base/stop.h); never while no StopInsideCompile scope is open.
inline thread_local int64_t next_stop_look = std::numeric_limits<int64_t>::max();
void lookForStop();
}  // namespace internal

inline void countWork(int64_t n = 1) {
  work_units += n;
  if (work_units >= internal::next_stop_look) internal::lookForStop();
}
inline int64_t workUnits() { return work_units; }

// Compiles stop inside their passes, not only between them: within a
// StopInsideCompile scope, every kStopLookEvery work units (tens of
// microseconds of compiling) countWork asks the thread's stop check
// (base/stop.h: accyd's time limit, the call's cancellation or deadline),
// and when it says stop, unwinds the compile by throwing StopRequested
// with its status. The scope's owner (codegen::compileFor, the one entry
// of every target's compile) catches it and returns the status: the throw
// never crosses an API, and nothing else ever sees it (outside a scope
// countWork never looks). Every pass and emitter holds its state in
// values that unwind cleanly.
inline constexpr int64_t kStopLookEvery = 4096;

struct StopRequested {
  absl::Status status;
};

class StopInsideCompile {
 public:
  StopInsideCompile();
  ~StopInsideCompile();
  StopInsideCompile(const StopInsideCompile&) = delete;
  StopInsideCompile& operator=(const StopInsideCompile&) = delete;

 private:
  int64_t outer_;
};

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_WORK_H_
