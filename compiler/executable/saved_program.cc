#include "compiler/executable/saved_program.h"

#include <openssl/sha.h>

#include <cstring>
#include <map>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/executable/codec.h"

namespace accy::executable {
namespace {

absl::Status bad(std::string_view why) {
  return makeError(ErrorKind::kInvalidArgument, strCat("restoring a compiled program: ", why));
}

template <typename T>
void put(std::string* out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

template <typename T>
bool take(std::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  uint64_t x = 0;
  for (size_t i = 0; i < sizeof(T); ++i) x |= static_cast<uint64_t>(static_cast<uint8_t>((*in)[i])) << (8 * i);
  *v = static_cast<T>(x);
  in->remove_prefix(sizeof(T));
  return true;
}

std::map<std::string, std::string> entriesOf(std::string_view text) {
  std::map<std::string, std::string> entries;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    const size_t eq = line.find('=');
    if (eq != std::string_view::npos) entries[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return entries;
}

std::string shortValue(const std::string& v) { return v.size() > 16 ? v.substr(0, 16) + "..." : v; }

}  // namespace

std::string sha256(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

absl::StatusOr<std::string> saveProgram(const Executable& exe, const BuildRecord& record) {
  ACCY_RETURN_IF_ERROR(requireRecordedBuild(record, "saving a compiled program"));
  const std::string text = buildRecordText(record);
  const std::string body = serializeExecutable(exe);
  std::string out(kSavedMagic);
  put<uint32_t>(&out, static_cast<uint32_t>(text.size()));
  out += text;
  put<uint64_t>(&out, body.size());
  out += body;
  out += sha256(out);
  return out;
}

absl::StatusOr<Executable> restoreProgram(std::string_view bytes, const BuildRecord& record) {
  ACCY_RETURN_IF_ERROR(requireRecordedBuild(record, "restoring a compiled program"));
  if (!bytes.starts_with(kSavedMagic)) {
    return bad("these bytes are not a saved Accy program (they do not start with ACCYSAVED1)");
  }
  if (bytes.size() < kSavedMagic.size() + 32) return bad(strCat("truncated: ", bytes.size(), " bytes"));
  const std::string_view signed_part = bytes.substr(0, bytes.size() - 32);
  if (sha256(signed_part) != bytes.substr(bytes.size() - 32)) {
    return bad("damaged: its SHA-256 does not match its contents");
  }
  std::string_view in = signed_part.substr(kSavedMagic.size());
  uint32_t text_size = 0;
  uint64_t body_size = 0;
  if (!take(&in, &text_size) || in.size() < text_size) return bad("truncated in its build record");
  const std::string_view text = in.substr(0, text_size);
  in.remove_prefix(text_size);
  if (!take(&in, &body_size) || in.size() != body_size) return bad("truncated in its executable");
  // The compiler that saved it must be this one.
  const std::string here = buildRecordText(record);
  if (text != here) {
    const std::map<std::string, std::string> saved = entriesOf(text), mine = entriesOf(here);
    std::string diff;
    for (const auto& [key, value] : mine) {
      auto it = saved.find(key);
      const std::string theirs = it == saved.end() ? "(none)" : it->second;
      if (theirs != value) strAppend(&diff, diff.empty() ? "" : "; ", key, " ", shortValue(theirs), " there, ", shortValue(value), " here");
    }
    for (const auto& [key, value] : saved) {
      if (!mine.contains(key)) strAppend(&diff, diff.empty() ? "" : "; ", key, " ", shortValue(value), " there, (none) here");
    }
    return makeError(ErrorKind::kUnsupportedVersion,
                     strCat("restoring a compiled program: it was saved by a different compiler build (", diff,
                            "); compile the program again"));
  }
  return parseExecutable(in);
}

}  // namespace accy::executable
