// Compiled programs saved as bytes for reuse (tensor::CpuExecutable::save,
// restore): the executable (its machine code and plans), the build record
// of the compiler that made it, and a SHA-256 over both.
//
//   "ACCYSAVED1\n"
//   u32 little endian: the build record's text length, then the text
//     (executable::buildRecordText: "KEY=value\n" sorted)
//   u64 little endian: the executable's length, then serializeExecutable
//   32 bytes: SHA-256 of everything before
//
// Both directions need a stamped build (UnrecordedCompilerBuild
// otherwise); restoring refuses, naming what differs, bytes that are not a
// saved program, are truncated or damaged (the SHA-256), or were saved by
// a different compiler build. The SHA-256 finds damage, not forgery:
// restored bytes become machine code that runs, so restore only bytes you
// trust as you trust a library you load.
#ifndef ACCY_COMPILER_EXECUTABLE_SAVED_PROGRAM_H_
#define ACCY_COMPILER_EXECUTABLE_SAVED_PROGRAM_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/executable/build_record.h"
#include "compiler/executable/executable.h"

namespace accy::executable {

inline constexpr std::string_view kSavedMagic = "ACCYSAVED1\n";

absl::StatusOr<std::string> saveProgram(const Executable& exe, const BuildRecord& record);
absl::StatusOr<Executable> restoreProgram(std::string_view bytes, const BuildRecord& record);

// The SHA-256 of `bytes` (32 bytes).
std::string sha256(std::string_view bytes);

}  // namespace accy::executable

#endif  // ACCY_COMPILER_EXECUTABLE_SAVED_PROGRAM_H_
