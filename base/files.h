// Whole-file reads and writes (the accy tool, the generators of test data
// and benchmark artifacts), with errors that name the file and say what went
// wrong (NotFound, InvalidArgument, ...).
#ifndef ACCY_BASE_FILES_H_
#define ACCY_BASE_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace accy::files {

// The contents of the regular file `path`; files larger than `max_bytes`
// fail before anything is read.
absl::StatusOr<std::string> readFile(const std::string& path, int64_t max_bytes);

// Writes `bytes` to `path`, replacing it.
absl::Status writeFile(const std::string& path, std::string_view bytes);

}  // namespace accy::files

#endif  // ACCY_BASE_FILES_H_
