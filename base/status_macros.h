// Small status-propagation macros (the Abseil release in Debian 12 has none).
#ifndef ACCY_BASE_STATUS_MACROS_H_
#define ACCY_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ACCY_CONCAT_INNER_(a, b) a##b
#define ACCY_CONCAT_(a, b) ACCY_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not ok.
#define ACCY_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::absl::Status accy_status_ = (expr);          \
    if (!accy_status_.ok()) return accy_status_;   \
  } while (0)

// `ACCY_ASSIGN_OR_RETURN(auto x, StatusOrExpr())` declares `x` from the value
// or returns the error.
#define ACCY_ASSIGN_OR_RETURN(lhs, expr) \
  ACCY_ASSIGN_OR_RETURN_IMPL_(ACCY_CONCAT_(accy_statusor_, __LINE__), lhs, expr)
#define ACCY_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#endif  // ACCY_BASE_STATUS_MACROS_H_
