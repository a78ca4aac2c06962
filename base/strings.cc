#include "base/strings.h"

#include <algorithm>

#include "absl/strings/escaping.h"

namespace accy {

std::string quoted(std::string_view s, size_t max_bytes) {
  const std::string_view head = s.substr(0, std::min(s.size(), max_bytes));
  std::string out = absl::CHexEscape(absl::string_view(head.data(), head.size()));
  if (head.size() < s.size()) strAppend(&out, "...(", s.size(), " bytes)");
  return out;
}

}  // namespace accy
