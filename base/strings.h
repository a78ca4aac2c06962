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

// A client's string as an error message may quote it: at most `max_bytes`
// of it, with bytes outside printable ASCII escaped, and its length when
// it is longer ("abc...(1048576 bytes)"). Replies quote no more than this,
// so an error about a megabyte-long id is not itself a megabyte.
inline constexpr size_t kQuotedBytes = 64;
std::string quoted(std::string_view s, size_t max_bytes = kQuotedBytes);

}  // namespace accy

#endif  // ACCY_BASE_STRINGS_H_
