// The record of how this compiler was built: source tree hash, compiler id
// and flags, dependency versions. A stamped Bazel build embeds it
// (--stamp --workspace_status_command=tools/build_record_status.sh); an
// unstamped build has none, and then compiled programs cannot be saved or
// restored (UnrecordedCompilerBuild), though in-memory reuse still works.
#ifndef ACCY_COMPILER_EXECUTABLE_BUILD_RECORD_H_
#define ACCY_COMPILER_EXECUTABLE_BUILD_RECORD_H_

#include <map>
#include <string>

#include "absl/status/status.h"

namespace accy::executable {

struct BuildRecord {
  bool stamped = false;
  std::map<std::string, std::string> entries;  // SOURCE_HASH, COMPILER, FLAGS, DEPS
};

// This binary's record.
const BuildRecord& buildRecord();

// A stable text of the record ("KEY=value\n" sorted), hashed into cache keys.
std::string buildRecordText(const BuildRecord& record);

// Ok for a stamped record; UnrecordedCompilerBuild otherwise, naming `what`
// (e.g. "saving a compiled program").
absl::Status requireRecordedBuild(const BuildRecord& record, const char* what);

}  // namespace accy::executable

#endif  // ACCY_COMPILER_EXECUTABLE_BUILD_RECORD_H_
