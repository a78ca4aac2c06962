// Programs as text and as Graphviz digraphs (toText, toDot in program.h).
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/strings.h"
#include "compiler/tensor/program.h"

namespace accy::tensor {

std::string axesText(const std::vector<Axis>& axes) {
  return strCat("(", absl::StrJoin(axes, ", ", [](std::string* s, const Axis& a) {
                        strAppend(s, a.name, "=", a.extent);
                      }),
                      ")");
}

std::string specText(const Spec& s) {
  return strCat(dtypeName(s.dtype), "[",
                      absl::StrJoin(s.axes, ", ", [](std::string* out, const Axis& a) {
                        strAppend(out, a.name, "=", a.extent);
                      }),
                      "]");
}

namespace {

std::string attributeText(const Node& node) {
  std::vector<std::string> parts;
  switch (node.op) {
    case OpCode::kInput:
      parts.push_back(strCat("index=", node.ints[0]));
      break;
    case OpCode::kConstant:
      parts.push_back(absl::StrFormat("value=%.17g", node.scalar));
      break;
    case OpCode::kIota:
#define ACCY_CASES_ALL
#define ACCY_CASES_Leaf 0
#include "compiler/tensor/op_cases.inc"
      if (!node.names.empty()) {
        parts.push_back(strCat("axes=[", absl::StrJoin(node.names, ", "), "]"));
      }
      if (!node.ints.empty()) {
        parts.push_back(strCat("ints=[", absl::StrJoin(node.ints, ", "), "]"));
      }
  }
  if (parts.empty()) return "";
  return strCat(" {", absl::StrJoin(parts, ", "), "}");
}

std::string operandsText(const Node& node) {
  return absl::StrJoin(node.operands, ", ",
                       [](std::string* s, int32_t id) { strAppend(s, "%", id); });
}

std::string dotEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string toText(const Program& program) {
  std::string out = strCat("program ", program.name, "(");
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    strAppend(&out, i ? ", " : "", "%", program.inputs[i], ": ",
                    specText(program.nodes[program.inputs[i]].spec()));
  }
  strAppend(&out, ") {\n");
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& node = program.nodes[i];
    if (node.op == OpCode::kInput) continue;
    strAppend(&out, "  %", i, " = ", opName(node.op));
    if (!node.operands.empty()) strAppend(&out, " ", operandsText(node));
    strAppend(&out, attributeText(node), " : ", specText(node.spec()), "\n");
  }
  strAppend(&out, "  return ",
                  absl::StrJoin(program.outputs, ", ",
                                [](std::string* s, int32_t id) { strAppend(s, "%", id); }),
                  "\n}\n");
  return out;
}

std::string toDot(const Program& program) {
  std::string out = strCat("digraph \"", dotEscape(program.name), "\" {\n",
                                 "  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& node = program.nodes[i];
    std::string label;
    std::string shape = "box";
    if (node.op == OpCode::kInput) {
      label = strCat("input ", node.ints[0]);
      shape = "ellipse";
    } else if (node.op == OpCode::kConstant) {
      label = absl::StrFormat("%g", node.scalar);
      shape = "plaintext";
    } else {
      label = strCat(opName(node.op), attributeText(node));
    }
    const bool is_output =
        std::find(program.outputs.begin(), program.outputs.end(), int32_t(i)) != program.outputs.end();
    strAppend(&out, "  n", i, " [shape=", shape, is_output ? ", peripheries=2" : "",
                    ", label=\"", dotEscape(label), "\\n", dotEscape(specText(node.spec())),
                    "\"];\n");
    for (size_t k = 0; k < node.operands.size(); ++k) {
      strAppend(&out, "  n", node.operands[k], " -> n", i,
                      node.operands.size() > 1 ? strCat(" [label=\"", k, "\"]") : "",
                      ";\n");
    }
  }
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    strAppend(&out, "  out", k, " [shape=plaintext, label=\"output ", k, "\"];\n  n",
                    program.outputs[k], " -> out", k, ";\n");
  }
  strAppend(&out, "}\n");
  return out;
}

}  // namespace accy::tensor
