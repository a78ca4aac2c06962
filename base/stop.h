// Asking work in progress on this thread to stop: a caller (accyd, for a
// call cancelled, past its deadline, or over its time limit) installs a
// check for the scope of the work; long work asks it between its pieces
// (the compile pipeline between passes, a CPU launch between the chunks of
// a kernel's parallel loop and between kernels) and returns the check's
// status when it says stop. Work started on other threads for the caller
// (a launch's pool workers) takes the check with it (stopCheck() on the
// calling thread, then call it from anywhere: it must be thread-safe).
#ifndef ACCY_BASE_STOP_H_
#define ACCY_BASE_STOP_H_

#include <functional>

#include "absl/status/status.h"

namespace accy {

// OK to go on; else why to stop.
using StopCheck = std::function<absl::Status()>;

namespace internal {
inline thread_local const StopCheck* current_stop_check = nullptr;
}  // namespace internal

// The check installed on this thread, or null.
inline const StopCheck* stopCheck() { return internal::current_stop_check; }

// OK when nothing asks to stop.
inline absl::Status checkStop() {
  const StopCheck* c = internal::current_stop_check;
  return c == nullptr ? absl::OkStatus() : (*c)();
}

// Installs `check` on this thread for the scope (nested scopes restore the
// outer one).
class ScopedStopCheck {
 public:
  explicit ScopedStopCheck(const StopCheck* check) : outer_(internal::current_stop_check) {
    internal::current_stop_check = check;
  }
  ~ScopedStopCheck() { internal::current_stop_check = outer_; }
  ScopedStopCheck(const ScopedStopCheck&) = delete;
  ScopedStopCheck& operator=(const ScopedStopCheck&) = delete;

 private:
  const StopCheck* outer_;
};

}  // namespace accy

#endif  // ACCY_BASE_STOP_H_
