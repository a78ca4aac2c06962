// The session status numbers, with the error kind each carries and their
// names: one table (runtime/statuses.inc) read by the in-process session,
// the C ABI, accyd (which also maps each to a gRPC code) and the accyd
// client.
#ifndef ACCY_RUNTIME_STATUSES_H_
#define ACCY_RUNTIME_STATUSES_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "base/errors.h"

namespace accy::session {

// Fixed forever; the C ABI (accy/accy_c.h) uses the same numbers.
enum class Status : uint32_t {
#define ACCY_STATUS(name, number, kind, grpc_code) name = number,
#include "runtime/statuses.inc"
#undef ACCY_STATUS
};

// The number of a status a Session call returned (each carries one of the
// eight kinds). Statuses from elsewhere map by absl code: ok to ok,
// ResourceExhausted to out_of_memory, anything else to compile_failed.
Status statusOf(const absl::Status& status);
// "ok", "invalid_program", ...: the table's names.
const char* statusName(Status status);
// The error kind a failure of `status` carries; kNone for ok.
ErrorKind kindOf(Status status);
// The status numbered `number`; nullopt for a number no status has (a
// newer peer's, or a damaged one).
std::optional<Status> statusNumbered(int64_t number);

}  // namespace accy::session

#endif  // ACCY_RUNTIME_STATUSES_H_
