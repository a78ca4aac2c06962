// The status table (statuses.inc) read every way: by number, by error
// kind, by name, and the fallbacks for what the table lacks.
#include "runtime/statuses.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace accy::session {
namespace {

struct Row {
  Status status;
  int64_t number;
  ErrorKind kind;
  const char* name;
};

constexpr Row kRows[] = {
#define ACCY_STATUS(name, number, kind, grpc_code) {Status::name, number, ErrorKind::kind, #name},
#include "runtime/statuses.inc"
#undef ACCY_STATUS
};

TEST(Statuses, EveryRowReadsBackByNumberKindAndName) {
  std::set<std::string> names;
  for (const Row& r : kRows) {
    EXPECT_EQ(static_cast<int64_t>(r.status), r.number);
    EXPECT_EQ(statusNumbered(r.number), r.status) << r.name;
    EXPECT_EQ(kindOf(r.status), r.kind) << r.name;
    EXPECT_EQ(std::string(statusName(r.status)), r.name);
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    if (r.status != Status::ok) {
      EXPECT_EQ(statusOf(makeError(r.kind, "x")), r.status) << r.name;
    }
  }
}

TEST(Statuses, TheNumbersAreFixed) {
  EXPECT_EQ(static_cast<uint32_t>(Status::ok), 0u);
  EXPECT_EQ(static_cast<uint32_t>(Status::invalid_program), 1u);
  EXPECT_EQ(static_cast<uint32_t>(Status::unsupported_version), 2u);
  EXPECT_EQ(static_cast<uint32_t>(Status::invalid_handle), 3u);
  EXPECT_EQ(static_cast<uint32_t>(Status::invalid_buffer), 4u);
  EXPECT_EQ(static_cast<uint32_t>(Status::too_many_programs), 5u);
  EXPECT_EQ(static_cast<uint32_t>(Status::out_of_memory), 6u);
  EXPECT_EQ(static_cast<uint32_t>(Status::compile_failed), 7u);
  EXPECT_EQ(static_cast<uint32_t>(Status::launch_failed), 8u);
}

TEST(Statuses, WhatTheTableLacksHasItsFallback) {
  EXPECT_EQ(statusNumbered(-1), std::nullopt);
  EXPECT_EQ(statusNumbered(9), std::nullopt);
  EXPECT_EQ(statusOf(absl::OkStatus()), Status::ok);
  // Kinds of no row, and statuses Accy did not make, map by absl code.
  EXPECT_EQ(statusOf(makeError(ErrorKind::kAxisExtentMismatch, "x")), Status::compile_failed);
  EXPECT_EQ(statusOf(absl::ResourceExhaustedError("x")), Status::out_of_memory);
  EXPECT_EQ(statusOf(absl::InternalError("x")), Status::compile_failed);
  EXPECT_EQ(statusOf(absl::UnknownError("x")), Status::compile_failed);
}

}  // namespace
}  // namespace accy::session
