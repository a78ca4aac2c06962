#include "compiler/codegen/msl/artifact.h"

#include <charconv>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/executable/artifact_json.h"
#include "compiler/codegen/msl/compile.h"

namespace accy::msl {
namespace {

constexpr std::string_view kInfoHead = "// accy-msl ";

absl::Status malformed(std::string_view why) {
  return makeError(ErrorKind::kInvalidArgument, strCat("MSL kernel source: ", why));
}

// The pieces of `text` between `sep`s, empty ones left out.
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (size_t at = 0; at <= text.size();) {
    const size_t next = std::min(text.find(sep, at), text.size());
    if (next > at) parts.push_back(text.substr(at, next - at));
    at = next + 1;
  }
  return parts;
}

template <typename T>
bool number(std::string_view text, T* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

absl::StatusOr<tensor::DType> dtypeNamed(std::string_view name) {
  for (tensor::DType d : {tensor::DType::f32, tensor::DType::f64, tensor::DType::i32, tensor::DType::i64,
                          tensor::DType::bool_, tensor::DType::u32}) {
    if (tensor::dtypeName(d) == name) return d;
  }
  return malformed(strCat("unknown dtype '", name, "' in its threadgroup arrays"));
}

}  // namespace

std::string infoLine(const KernelInfo& info) {
  std::string bindings, arrays;
  for (int b : info.bindings) strAppend(&bindings, bindings.empty() ? "" : ",", b);
  for (const auto& [d, count] : info.threadgroup) {
    strAppend(&arrays, arrays.empty() ? "" : ",", tensor::dtypeName(d), ":", count);
  }
  return strCat(kInfoHead, "bindings=", bindings, " threadgroup=", arrays, " simdgroups=", info.simdgroups ? 1 : 0,
                "\n");
}

absl::StatusOr<KernelInfo> kernelInfo(std::string_view source) {
  if (!source.starts_with(kInfoHead)) return malformed(strCat("does not start with '", kInfoHead, "'"));
  const size_t end = source.find('\n');
  if (end == std::string_view::npos) return malformed("its first line has no end");
  KernelInfo info;
  bool seen[3] = {false, false, false};
  for (std::string_view field : split(source.substr(kInfoHead.size(), end - kInfoHead.size()), ' ')) {
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos) return malformed(strCat("field '", field, "' has no '='"));
    const std::string_view key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "bindings") {
      seen[0] = true;
      for (std::string_view b : split(value, ',')) {
        int index;
        if (!number(b, &index) || index < 0) return malformed(strCat("binding '", b, "' is not a number"));
        info.bindings.push_back(index);
      }
    } else if (key == "threadgroup") {
      seen[1] = true;
      for (std::string_view a : split(value, ',')) {
        const size_t colon = a.find(':');
        int64_t count;
        if (colon == std::string_view::npos || !number(a.substr(colon + 1), &count) || count <= 0) {
          return malformed(strCat("threadgroup array '", a, "' is not DTYPE:COUNT"));
        }
        ACCY_ASSIGN_OR_RETURN(const tensor::DType d, dtypeNamed(a.substr(0, colon)));
        info.threadgroup.emplace_back(d, count);
      }
    } else if (key == "simdgroups") {
      seen[2] = true;
      if (value != "0" && value != "1") return malformed(strCat("simdgroups=", value, " is not 0 or 1"));
      info.simdgroups = value == "1";
    } else {
      return malformed(strCat("unknown field '", key, "'"));
    }
  }
  if (!seen[0] || !seen[1] || !seen[2]) return malformed("its first line lacks bindings, threadgroup or simdgroups");
  return info;
}

absl::StatusOr<std::string> artifactJson(const executable::Executable& exe) {
  const bool fast = exe.isa == "metal-fast";
  return executable::artifactJson(
      exe, "msl", "accy-msl-1", [&](size_t, std::string_view text) -> absl::StatusOr<std::string> {
        ACCY_ASSIGN_OR_RETURN(const KernelInfo info, kernelInfo(text));
        std::string bindings, arrays;
        for (int b : info.bindings) strAppend(&bindings, bindings.empty() ? "" : ", ", b);
        for (const auto& [d, count] : info.threadgroup) {
          strAppend(&arrays, arrays.empty() ? "" : ", ", "{\"dtype\": \"", tensor::dtypeName(d),
                    "\", \"elements\": ", count, "}");
        }
        return strCat(", \"function\": \"", kEntryName, "\", \"math_mode\": \"", fast ? "fast" : "safe",
                      "\", \"bindings\": [", bindings, "], \"threadgroup\": [", arrays,
                      "], \"simdgroups\": ", info.simdgroups ? "true" : "false", ",\n     \"msl\": ",
                      executable::jsonString(text));
      });
}

}  // namespace accy::msl
