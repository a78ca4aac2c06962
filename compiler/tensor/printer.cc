// Programs as text and as Graphviz digraphs (toText, toDot in program.h).
#include <algorithm>
#include <string>
#include <utility>

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
    case OpCode::kScan:
      parts.push_back(strCat("axis=", node.names[0], ", length=", node.ints[3], ", carries=", node.ints[1],
                             ", xs=", node.ints[2], ", body=", node.ints[0]));
      break;
    case OpCode::kWhileLoop:
      parts.push_back(strCat("carries=", node.ints[2], ", condition=", node.ints[0], ", body=", node.ints[1]));
      break;
    case OpCode::kLoopResult:
      parts.push_back(strCat("result=", node.ints[0]));
      break;
    case OpCode::kIota:
#define ACCY_CASES_ALL
#define ACCY_CASES_Leaf 0
#define ACCY_CASES_Loop 0
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

namespace {

bool isLoopNode(const Node& node) { return node.op == OpCode::kScan || node.op == OpCode::kWhileLoop; }

// The value's spec, or "loop" for a loop node (whose results are read
// through loop_result).
std::string nodeSpecText(const Node& node) { return isLoopNode(node) ? "loop" : specText(node.spec()); }

void appendText(std::string& out, const Program& program, std::string_view header, const std::string& indent);

// A loop's bodies, indented under it.
void appendBodies(std::string& out, const Program& program, const Node& node, const std::string& indent) {
  auto body = [&](std::string_view role, int64_t index) {
    if (index < 0 || index >= static_cast<int64_t>(program.bodies.size())) return;
    appendText(out, program.bodies[index], strCat(role, " #", index), indent + "  ");
  };
  if (node.op == OpCode::kScan) {
    body("body", node.ints[0]);
  } else {
    body("condition", node.ints[0]);
    body("body", node.ints[1]);
  }
}

void appendText(std::string& out, const Program& program, std::string_view header, const std::string& indent) {
  strAppend(&out, indent, header, "(");
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    strAppend(&out, i ? ", " : "", "%", program.inputs[i], ": ",
                    specText(program.nodes[program.inputs[i]].spec()));
  }
  strAppend(&out, ") {\n");
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& node = program.nodes[i];
    if (node.op == OpCode::kInput) continue;
    strAppend(&out, indent, "  %", i, " = ", opName(node.op));
    if (!node.operands.empty()) strAppend(&out, " ", operandsText(node));
    strAppend(&out, attributeText(node), " : ", nodeSpecText(node), "\n");
    if (isLoopNode(node)) appendBodies(out, program, node, indent + "  ");
  }
  strAppend(&out, indent, "  return ",
                  absl::StrJoin(program.outputs, ", ",
                                [](std::string* s, int32_t id) { strAppend(s, "%", id); }),
                  "\n", indent, "}\n");
}

void appendDot(std::string& out, const Program& program, const std::string& prefix, const std::string& indent);

}  // namespace

std::string toText(const Program& program) {
  std::string out;
  appendText(out, program, strCat("program ", program.name), "");
  return out;
}

namespace {

void appendDot(std::string& out, const Program& program, const std::string& prefix, const std::string& indent) {
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
    strAppend(&out, indent, prefix, "n", i, " [shape=", shape, is_output ? ", peripheries=2" : "",
                    ", label=\"", dotEscape(label), "\\n", dotEscape(nodeSpecText(node)),
                    "\"];\n");
    for (size_t k = 0; k < node.operands.size(); ++k) {
      strAppend(&out, indent, prefix, "n", node.operands[k], " -> ", prefix, "n", i,
                      node.operands.size() > 1 ? strCat(" [label=\"", k, "\"]") : "",
                      ";\n");
    }
    if (!isLoopNode(node)) continue;
    // Each body as a cluster, its outputs joined to the loop by dashed edges.
    const std::vector<std::pair<std::string, int64_t>> bodies =
        node.op == OpCode::kScan ? std::vector<std::pair<std::string, int64_t>>{{"body", node.ints[0]}}
                                 : std::vector<std::pair<std::string, int64_t>>{{"condition", node.ints[0]},
                                                                                {"body", node.ints[1]}};
    for (const auto& [role, index] : bodies) {
      if (index < 0 || index >= static_cast<int64_t>(program.bodies.size())) continue;
      const Program& body = program.bodies[index];
      const std::string inner = strCat(prefix, "b", index, "_");
      strAppend(&out, indent, "subgraph \"cluster_", inner, "\" {\n", indent, "  label=\"", role, " #", index,
                "\";\n  ", indent, "style=dashed;\n");
      appendDot(out, body, inner, indent + "  ");
      strAppend(&out, indent, "}\n");
      for (int32_t id : body.outputs) {
        strAppend(&out, indent, inner, "n", id, " -> ", prefix, "n", i, " [style=dashed];\n");
      }
    }
  }
}

}  // namespace

std::string toDot(const Program& program) {
  std::string out = strCat("digraph \"", dotEscape(program.name), "\" {\n",
                                 "  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
  appendDot(out, program, "", "  ");
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    strAppend(&out, "  out", k, " [shape=plaintext, label=\"output ", k, "\"];\n  n",
                    program.outputs[k], " -> out", k, ";\n");
  }
  strAppend(&out, "}\n");
  return out;
}

}  // namespace accy::tensor
