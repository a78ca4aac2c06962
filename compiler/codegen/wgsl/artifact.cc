#include "compiler/codegen/wgsl/artifact.h"

#include <cstring>
#include <set>
#include <string_view>

#include "absl/strings/str_format.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/wgsl/compile.h"
#include "compiler/tensor/dtype.h"

namespace accy::wgsl {
namespace {

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

std::string specJson(const tensor::Spec& s) {
  std::string axes;
  for (const tensor::Axis& a : s.axes) {
    strAppend(&axes, axes.empty() ? "" : ", ", "{\"name\": ", jsonString(a.name), ", \"extent\": ", a.extent, "}");
  }
  return strCat("{\"dtype\": \"", tensor::dtypeName(s.dtype), "\", \"axes\": [", axes, "]}");
}

}  // namespace

absl::StatusOr<std::string> artifactJson(const executable::Executable& exe) {
  if (exe.target != "wgsl") {
    return makeError(ErrorKind::kInvalidArgument, strCat("a WGSL artifact needs a wgsl executable, not ", exe.target));
  }
  std::string out = strCat("{\n  \"format\": \"accy-wgsl-1\",\n  \"isa\": ", jsonString(exe.isa), ",\n  \"buffers\": [");
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
    const uint64_t end = k + 1 < steps.size() ? steps[k + 1].entry_offset : exe.code.size();
    std::string_view text(reinterpret_cast<const char*>(exe.code.data()) + steps[k].entry_offset,
                          end - steps[k].entry_offset);
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
    strAppend(&out, k ? ",\n    " : "\n    ", "{\"name\": ", jsonString(steps[k].kernel), ", \"workgroups\": ",
              steps[k].parallel_extent, ", \"workgroup_size\": ", steps[k].group_size, ", \"bindings\": [", list,
              "],\n     \"wgsl\": ", jsonString(text),
              with_subgroups.empty() ? "" : strCat(",\n     \"wgsl_subgroups\": ", jsonString(with_subgroups)), "}");
  }
  strAppend(&out, "\n  ],\n  \"inputs\": [");
  for (size_t i = 0; i < exe.inputs.size(); ++i) strAppend(&out, i ? ", " : "", specJson(exe.inputs[i]));
  strAppend(&out, "],\n  \"outputs\": [");
  for (size_t i = 0; i < exe.outputs.size(); ++i) strAppend(&out, i ? ", " : "", specJson(exe.outputs[i]));
  strAppend(&out, "]\n}\n");
  return out;
}

}  // namespace accy::wgsl
