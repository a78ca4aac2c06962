#include "base/errors.h"

#include "absl/strings/cord.h"
#include "base/strings.h"

namespace accy {
namespace {

constexpr absl::string_view kPayloadUrl = "type.accy.dev/accy.ErrorKind";

absl::StatusCode codeOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return absl::StatusCode::kUnknown;
#define ACCY_ERROR_KIND(name, code) \
  case ErrorKind::k##name:          \
    return absl::StatusCode::code;
#include "base/error_kinds.inc"
#undef ACCY_ERROR_KIND
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

std::string_view errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNone:
      return "None";
#define ACCY_ERROR_KIND(name, code) \
  case ErrorKind::k##name:          \
    return #name;
#include "base/error_kinds.inc"
#undef ACCY_ERROR_KIND
  }
  return "None";
}

absl::Status makeError(ErrorKind kind, std::string_view message) {
  absl::Status status(codeOf(kind), strCat(errorKindName(kind), ": ", message));
  status.SetPayload(kPayloadUrl, absl::Cord(absl::string_view(errorKindName(kind).data(), errorKindName(kind).size())));
  return status;
}

ErrorKind errorKind(const absl::Status& status) {
  if (status.ok()) return ErrorKind::kNone;
  auto payload = status.GetPayload(kPayloadUrl);
  if (!payload.has_value()) return ErrorKind::kNone;
  const std::string name(*payload);
#define ACCY_ERROR_KIND(kind_name, code) \
  if (name == #kind_name) return ErrorKind::k##kind_name;
#include "base/error_kinds.inc"
#undef ACCY_ERROR_KIND
  return ErrorKind::kNone;
}

std::string withoutKindPrefix(ErrorKind kind, std::string_view message) {
  const std::string_view name = errorKindName(kind);
  if (message.size() >= name.size() + 2 && message.substr(0, name.size()) == name &&
      message.substr(name.size(), 2) == ": ") {
    message.remove_prefix(name.size() + 2);
  }
  return std::string(message);
}

std::string messageWithoutKind(const absl::Status& status) {
  return withoutKindPrefix(errorKind(status), std::string_view(status.message().data(), status.message().size()));
}

}  // namespace accy
