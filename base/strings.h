// String concatenation that accepts std::string_view.
//
// Debian's Abseil is built with its own absl::string_view (not an alias of
// std::string_view), so absl::StrCat rejects std::string_view arguments.
// accy::strCat forwards to absl::StrCat after converting them.
#ifndef ACCY_BASE_STRINGS_H_
#define ACCY_BASE_STRINGS_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace accy {

template <typename T>
decltype(auto) toAlphaNum(const T& v) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return absl::string_view(v.data(), v.size());
  } else {
    return (v);
  }
}

template <typename... Args>
std::string strCat(const Args&... args) {
  return absl::StrCat(toAlphaNum(args)...);
}

template <typename... Args>
void strAppend(std::string* out, const Args&... args) {
  absl::StrAppend(out, toAlphaNum(args)...);
}

}  // namespace accy

#endif  // ACCY_BASE_STRINGS_H_
