#include "compiler/choir/work.h"

#include "base/stop.h"

namespace accy::choir {
namespace internal {

void lookForStop() {
  next_stop_look = work_units + kStopLookEvery;
  absl::Status st = checkStop();
  if (!st.ok()) throw StopRequested{std::move(st)};
}

}  // namespace internal

StopInsideCompile::StopInsideCompile() : outer_(internal::next_stop_look) {
  internal::next_stop_look = work_units + kStopLookEvery;
}

StopInsideCompile::~StopInsideCompile() { internal::next_stop_look = outer_; }

}  // namespace accy::choir
