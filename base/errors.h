// Stable error kinds carried by absl::Status values.
//
// Every error Accy returns to a user is an absl::Status whose message starts
// with the kind's name ("AxisExtentMismatch: mul: ...") and which carries the
// kind as a payload, so `accy::errorKind(status)` recovers it without parsing
// text. Kinds are stable: tests and hosts may compare against them.
#ifndef ACCY_BASE_ERRORS_H_
#define ACCY_BASE_ERRORS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace accy {

enum class ErrorKind {
  kNone,  // an ok status, or a status Accy did not make
#define ACCY_ERROR_KIND(name, code) k##name,
#include "base/error_kinds.inc"
#undef ACCY_ERROR_KIND
};

// The kind recorded in `status`; kNone for ok or foreign statuses.
ErrorKind errorKind(const absl::Status& status);

// "AxisExtentMismatch" for kAxisExtentMismatch, "None" for kNone.
std::string_view errorKindName(ErrorKind kind);

// Makes a status of `kind` (its absl code comes from error_kinds.inc) whose
// message is "<KindName>: <message>".
absl::Status makeError(ErrorKind kind, std::string_view message);

// `message` without a leading "<KindName>: " of `kind` (makeError's prefix),
// for a message passed on under another kind or another context.
std::string withoutKindPrefix(ErrorKind kind, std::string_view message);
// The message of `status` without its own kind's prefix.
std::string messageWithoutKind(const absl::Status& status);

}  // namespace accy

#endif  // ACCY_BASE_ERRORS_H_
