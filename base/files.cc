#include "base/files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/strings.h"

namespace accy::files {
namespace {

struct Closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, Closer>;

std::string errnoText(int e) { return std::strerror(e); }

}  // namespace

absl::StatusOr<std::string> readFile(const std::string& path, int64_t max_bytes) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    const int e = errno;
    const std::string what = strCat(path, ": cannot open: ", errnoText(e));
    if (e == ENOENT) return absl::NotFoundError(what);
    return absl::InvalidArgumentError(what);
  }
  struct stat st {};
  if (fstat(fileno(f.get()), &st) != 0) {
    return absl::InvalidArgumentError(strCat(path, ": cannot stat: ", errnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(strCat(path, ": not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(
        strCat(path, ": ", static_cast<int64_t>(st.st_size), " bytes exceed the limit of ", max_bytes));
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f.get());
  if (got != bytes.size() || std::ferror(f.get())) {
    return absl::InvalidArgumentError(strCat(path, ": read ", got, " of ", bytes.size(), " bytes"));
  }
  return bytes;
}

absl::Status writeFile(const std::string& path, std::string_view bytes) {
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) {
    return absl::InvalidArgumentError(strCat(path, ": cannot create: ", errnoText(errno)));
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    return absl::InvalidArgumentError(strCat(path, ": write failed: ", errnoText(errno)));
  }
  std::FILE* raw = f.release();
  if (std::fclose(raw) != 0) {
    return absl::InvalidArgumentError(strCat(path, ": write failed: ", errnoText(errno)));
  }
  return absl::OkStatus();
}

}  // namespace accy::files
