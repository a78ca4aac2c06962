#include "compiler/executable/artifact_json.h"

#include "absl/strings/str_format.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/tensor/dtype.h"

namespace accy::executable {
namespace {

const char* roleName(choir::BufferRole r) {
  switch (r) {
    case choir::BufferRole::kInput:
      return "input";
    case choir::BufferRole::kOutput:
      return "output";
    case choir::BufferRole::kTemp:
      return "temp";
  }
  return "temp";
}

}  // namespace

std::string specJson(const tensor::Spec& s) {
  std::string axes;
  for (const tensor::Axis& a : s.axes) {
    strAppend(&axes, axes.empty() ? "" : ", ", "{\"name\": ", jsonString(a.name), ", \"extent\": ", a.extent, "}");
  }
  return strCat("{\"dtype\": \"", tensor::dtypeName(s.dtype), "\", \"axes\": [", axes, "]}");
}

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string_view kernelSource(const executable::Executable& exe, size_t k) {
  const auto& steps = exe.launch_plan.steps;
  const uint64_t begin = std::min<uint64_t>(steps[k].entry_offset, exe.code.size());
  const uint64_t end = k + 1 < steps.size() ? std::min<uint64_t>(steps[k + 1].entry_offset, exe.code.size())
                                            : exe.code.size();
  return std::string_view(reinterpret_cast<const char*>(exe.code.data()) + begin, end > begin ? end - begin : 0);
}

absl::StatusOr<std::string> artifactJson(
    const executable::Executable& exe, std::string_view target, std::string_view format,
    const std::function<absl::StatusOr<std::string>(size_t k, std::string_view source)>& kernel_fields,
    std::string_view extra_fields) {
  if (exe.target != target) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("a ", target, " artifact needs a ", target, " executable, not ", exe.target));
  }
  std::string out =
      strCat("{\n  \"format\": ", jsonString(format), ",\n  \"isa\": ", jsonString(exe.isa), extra_fields, ",\n  \"buffers\": [");
  const auto& buffers = exe.artifact_plan.buffers;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const executable::BufferPlan& p = buffers[b];
    strAppend(&out, b ? ",\n    " : "\n    ", "{\"role\": \"", roleName(p.role), "\", \"io\": ", p.io_index,
              ", \"dtype\": \"", tensor::dtypeName(p.dtype), "\", \"elements\": ",
              p.bytes / static_cast<int64_t>(tensor::dtypeSize(p.dtype)), "}");
  }
  strAppend(&out, "\n  ],\n  \"kernels\": [");
  const auto& steps = exe.launch_plan.steps;
  for (size_t k = 0; k < steps.size(); ++k) {
    ACCY_ASSIGN_OR_RETURN(const std::string fields, kernel_fields(k, kernelSource(exe, k)));
    strAppend(&out, k ? ",\n    " : "\n    ", "{\"name\": ", jsonString(steps[k].kernel), ", \"workgroups\": ",
              steps[k].parallel_extent, ", \"workgroup_size\": ", steps[k].group_size, fields, "}");
  }
  strAppend(&out, "\n  ],\n  \"inputs\": [");
  for (size_t i = 0; i < exe.inputs.size(); ++i) strAppend(&out, i ? ", " : "", specJson(exe.inputs[i]));
  strAppend(&out, "],\n  \"outputs\": [");
  for (size_t i = 0; i < exe.outputs.size(); ++i) strAppend(&out, i ? ", " : "", specJson(exe.outputs[i]));
  strAppend(&out, "]\n}\n");
  return out;
}

}  // namespace accy::executable
