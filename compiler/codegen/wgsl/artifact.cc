#include "compiler/codegen/wgsl/artifact.h"

#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#include "base/strings.h"
#include "compiler/executable/artifact_json.h"
#include "compiler/codegen/wgsl/compile.h"

namespace accy::wgsl {

absl::StatusOr<std::string> artifactJson(const executable::Executable& exe) {
  return executable::artifactJson(
      exe, "wgsl", "accy-wgsl-1", [](size_t, std::string_view text) -> absl::StatusOr<std::string> {
        std::string_view with_subgroups;
        if (const size_t at = text.find(kSubgroupsMarker); at != std::string_view::npos) {
          with_subgroups = text.substr(at + std::strlen(kSubgroupsMarker));
          text = text.substr(0, at);
        }
        // The buffers the module declares: its bindings.
        std::set<int> bindings;
        for (size_t at = text.find("@binding("); at != std::string_view::npos; at = text.find("@binding(", at + 1)) {
          bindings.insert(std::atoi(std::string(text.substr(at + 9, 8)).c_str()));
        }
        std::string list;
        for (int b : bindings) strAppend(&list, list.empty() ? "" : ", ", b);
        return strCat(", \"bindings\": [", list, "],\n     \"wgsl\": ", executable::jsonString(text),
                      with_subgroups.empty() ? "" : strCat(",\n     \"wgsl_subgroups\": ", executable::jsonString(with_subgroups)));
      });
}

}  // namespace accy::wgsl
