#include "compiler/executable/build_record.h"
#include "base/errors.h"
#include "base/strings.h"

namespace accy::executable {

std::string buildRecordText(const BuildRecord& record) {
  std::string out = record.stamped ? "stamped\n" : "unstamped\n";
  for (const auto& [k, v] : record.entries) out += k + "=" + v + "\n";
  return out;
}

absl::Status requireRecordedBuild(const BuildRecord& record, const char* what) {
  if (record.stamped) return absl::OkStatus();
  return makeError(ErrorKind::kUnrecordedCompilerBuild,
                   strCat(what, " needs a record of how the compiler was built; this build is unstamped "
                                "(build with --stamp --workspace_status_command=tools/build_record_status.sh)"));
}

}  // namespace accy::executable
