#include "runtime/statuses.h"

namespace accy::session {

Status statusOf(const absl::Status& status) {
  if (status.ok()) return Status::ok;
  const ErrorKind kind = errorKind(status);
  // kNone here is a failure Accy did not make, not ok.
  if (kind != ErrorKind::kNone) {
#define ACCY_STATUS(name, number, error_kind, grpc_code) \
  if (kind == ErrorKind::error_kind) return Status::name;
#include "runtime/statuses.inc"
#undef ACCY_STATUS
  }
  return status.code() == absl::StatusCode::kResourceExhausted ? Status::out_of_memory : Status::compile_failed;
}

const char* statusName(Status status) {
  switch (status) {
#define ACCY_STATUS(name, number, kind, grpc_code) \
  case Status::name:                               \
    return #name;
#include "runtime/statuses.inc"
#undef ACCY_STATUS
  }
  return "?";
}

ErrorKind kindOf(Status status) {
  switch (status) {
#define ACCY_STATUS(name, number, kind, grpc_code) \
  case Status::name:                               \
    return ErrorKind::kind;
#include "runtime/statuses.inc"
#undef ACCY_STATUS
  }
  return ErrorKind::kNone;
}

std::optional<Status> statusNumbered(int64_t n) {
  switch (n) {
#define ACCY_STATUS(name, number, kind, grpc_code) \
  case number:                                     \
    return Status::name;
#include "runtime/statuses.inc"
#undef ACCY_STATUS
  }
  return std::nullopt;
}

}  // namespace accy::session
