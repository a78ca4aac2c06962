#include "backends/backend.h"

#include "base/errors.h"
#include "base/strings.h"

namespace accy::backends {

absl::Status tf32NeedsCuda(std::string_view target) {
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("tf32 arithmetic runs on NVIDIA tensor cores and needs CUDA (target ptx); target ", target,
                          " has no tf32 mode"));
}

}  // namespace accy::backends
