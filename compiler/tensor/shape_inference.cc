// The type checker every producer of Programs shares: inferNode and
// validateProgram (program.h).
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "base/checked.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/tensor/program.h"

namespace accy::tensor {
namespace {

std::optional<size_t> findAxis(const std::vector<Axis>& axes, std::string_view name) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i].name == name) return i;
  }
  return std::nullopt;
}

absl::Status unknownAxis(std::string_view op, std::string_view name,
                         const std::vector<Axis>& axes, std::string_view which = "operand") {
  return makeError(ErrorKind::kUnknownAxis,
                   strCat(op, ": axis '", name, "' is not an axis of the ", which, " ",
                                axesText(axes)));
}

// Broadcasting by name: the left operand's axes, then the right's new ones.
absl::StatusOr<std::vector<Axis>> broadcastAxes(std::string_view op, const std::vector<Axis>& left,
                                                const std::vector<Axis>& right) {
  std::vector<Axis> out = left;
  for (const Axis& r : right) {
    auto at = findAxis(left, r.name);
    if (!at.has_value()) {
      out.push_back(r);
    } else if (left[*at].extent != r.extent) {
      return makeError(ErrorKind::kAxisExtentMismatch,
                       absl::StrFormat("%s: axis '%s' has extent %d on the left %s but %d on the "
                                       "right %s",
                                       op, r.name, left[*at].extent, axesText(left), r.extent,
                                       axesText(right)));
    }
  }
  return out;
}

absl::Status sameDType(std::string_view op, DType a, DType b) {
  if (a == b) return absl::OkStatus();
  return makeError(ErrorKind::kDTypeMismatch,
                   strCat(op, ": operands have dtypes ", dtypeName(a), " and ",
                                dtypeName(b), "; cast one so they match"));
}

absl::Status unsupported(std::string_view op, DType dtype, std::string_view needs) {
  return makeError(ErrorKind::kUnsupportedDType,
                   strCat(op, ": needs ", needs, " operands, got ", dtypeName(dtype)));
}

// The op table's DTypes column, checked against `dtype`.
absl::Status checkTakes(const Node& node, DType dtype) {
  if (opTakes(node.op, dtype)) return absl::OkStatus();
  switch (opDTypes(node.op)) {
    case OpDTypes::Any:
      break;
    case OpDTypes::Numeric:
      return unsupported(opName(node.op), dtype, "numeric");
    case OpDTypes::Floating:
      return unsupported(opName(node.op), dtype, "f32 or f64");
    case OpDTypes::Integer:
      return unsupported(opName(node.op), dtype, "integer (i32, i64 or u32)");
    case OpDTypes::Bits:
      return unsupported(opName(node.op), dtype, "integer or bool");
  }
  return absl::OkStatus();
}

absl::Status checkArity(const Node& node, size_t want) {
  if (node.operands.size() == want) return absl::OkStatus();
  return makeError(ErrorKind::kArityMismatch,
                   strCat(opName(node.op), ": takes ", want, " operands, got ",
                                node.operands.size()));
}

absl::Status checkAttrs(const Node& node, size_t names, size_t ints) {
  if (node.names.size() == names && node.ints.size() == ints) return absl::OkStatus();
  return makeError(ErrorKind::kInvalidArgument,
                   strCat(opName(node.op), ": expects ", names, " axis names and ", ints,
                                " integer attributes, got ", node.names.size(), " and ",
                                node.ints.size()));
}

absl::Status noDuplicates(std::string_view op, const std::vector<std::string>& names) {
  std::set<std::string_view> seen;
  for (const auto& n : names) {
    if (!seen.insert(n).second) {
      return makeError(ErrorKind::kAxisNameCollision,
                       strCat(op, ": axis '", n, "' is named twice"));
    }
  }
  return absl::OkStatus();
}

// The axes of take(x, axis, indices): x's axes with `axis` replaced, in
// place, by the axes of `indices` that x lacks (in their order). Axes the
// indices share with x are matched element by element and must agree in
// extent; `axis` itself may not be one of them.
absl::StatusOr<std::vector<Axis>> takeAxes(std::string_view op, const std::vector<Axis>& x,
                                           const std::string& axis, const Node& indices) {
  auto at = findAxis(x, axis);
  if (!at) return unknownAxis(op, axis, x);
  if (indices.dtype != DType::i32 && indices.dtype != DType::i64) {
    return makeError(ErrorKind::kUnsupportedDType,
                     strCat(op, ": indices must be i32 or i64, got ", dtypeName(indices.dtype)));
  }
  std::vector<Axis> fresh;
  for (const Axis& ax : indices.axes) {
    auto shared = findAxis(x, ax.name);
    if (!shared) {
      fresh.push_back(ax);
    } else if (*shared == *at) {
      return makeError(ErrorKind::kAxisNameCollision,
                       strCat(op, ": the indices ", axesText(indices.axes), " have the indexed axis '",
                              axis, "'; rename it"));
    } else if (x[*shared].extent != ax.extent) {
      return makeError(ErrorKind::kAxisExtentMismatch,
                       absl::StrFormat("%s: axis '%s' has extent %d in x %s but %d in the indices %s", op,
                                       ax.name, x[*shared].extent, axesText(x), ax.extent,
                                       axesText(indices.axes)));
    }
  }
  std::vector<Axis> out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i == *at) {
      out.insert(out.end(), fresh.begin(), fresh.end());
    } else {
      out.push_back(x[i]);
    }
  }
  return out;
}


bool isLoop(OpCode op) { return op == OpCode::kScan || op == OpCode::kWhileLoop; }

absl::StatusOr<const Program*> loopBody(std::string_view op, absl::Span<const Program> bodies, int64_t index) {
  if (index < 0 || index >= static_cast<int64_t>(bodies.size())) {
    return makeError(ErrorKind::kInvalidProgram,
                     strCat(op, ": body ", index, " does not exist (the program has ", bodies.size(), ")"));
  }
  const Program& body = bodies[index];
  for (int32_t id : body.inputs) {
    if (id < 0 || static_cast<size_t>(id) >= body.nodes.size()) {
      return makeError(ErrorKind::kInvalidProgram, strCat(op, ": body ", index, " lists input node %", id));
    }
  }
  for (int32_t id : body.outputs) {
    if (id < 0 || static_cast<size_t>(id) >= body.nodes.size()) {
      return makeError(ErrorKind::kInvalidProgram, strCat(op, ": body ", index, " lists output node %", id));
    }
  }
  return &body;
}

Spec bodyInput(const Program& body, size_t i) { return body.nodes[body.inputs[i]].spec(); }
Spec bodyOutput(const Program& body, size_t i) { return body.nodes[body.outputs[i]].spec(); }

// The value a loop passes to its body's input `i` must have the input's spec.
absl::Status checkBodyInputs(std::string_view op, const Program& body, absl::Span<const Node> prior,
                             const Node& node, size_t carries, size_t xs, const std::string& axis) {
  if (body.inputs.size() != node.operands.size()) {
    return makeError(ErrorKind::kInvalidProgram,
                     strCat(op, ": the body takes ", body.inputs.size(), " inputs but the loop passes ",
                            node.operands.size()));
  }
  for (size_t i = 0; i < node.operands.size(); ++i) {
    Spec passed = prior[node.operands[i]].spec();
    if (i >= carries && i < carries + xs) {  // a scan's xs: the body sees one step's slice
      auto at = findAxis(passed.axes, axis);
      if (!at) return unknownAxis(op, axis, passed.axes, strCat("xs value ", i - carries));
      passed.axes.erase(passed.axes.begin() + *at);
    }
    if (passed != bodyInput(body, i)) {
      const ErrorKind kind = i < carries ? ErrorKind::kCarryMismatch : ErrorKind::kInvalidProgram;
      return makeError(kind, strCat(op, ": body input ", i, " is ", specText(bodyInput(body, i)), " but the loop passes ",
                                    specText(passed)));
    }
  }
  return absl::OkStatus();
}

// Each carry the body returns keeps its initial value's dtype and axes.
absl::Status checkCarriesOut(std::string_view op, const Program& body, absl::Span<const Node> prior,
                             const Node& node, size_t carries) {
  if (body.outputs.size() < carries) {
    return makeError(ErrorKind::kCarryMismatch, strCat(op, ": the body returns ", body.outputs.size(),
                                                       " values but the loop has ", carries, " carries"));
  }
  for (size_t i = 0; i < carries; ++i) {
    const Spec init = prior[node.operands[i]].spec();
    if (bodyOutput(body, i) != init) {
      return makeError(ErrorKind::kCarryMismatch,
                       strCat(op, ": carry ", i, " enters as ", specText(init), " but the body returns ",
                              specText(bodyOutput(body, i)), "; a carry keeps its dtype and axes"));
    }
  }
  return absl::OkStatus();
}

// A scalar attribute (a constant's value, pad's fill) of an integer or bool
// dtype must be a finite number the dtype holds: the same rule for every op,
// at recording and in the decoder (a NaN index read element 0 before, and
// 1e300 saturated). Integer dtypes take the integers of their range
// (fractions are truncated toward zero, as a cast does); bool takes any
// finite number (nonzero is true).
absl::Status checkScalarFits(std::string_view op, double value, DType dtype) {
  if (isFloating(dtype)) return absl::OkStatus();
  if (!std::isfinite(value)) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat(op, ": value ", value, " is not a ", dtypeName(dtype), " (only floating dtypes hold nan and inf)"));
  }
  double low = 0, high = 0;  // the range, as [low, high) of doubles
  std::string_view range;
  switch (dtype) {
    case DType::i32: low = -2147483648.0, high = 2147483648.0, range = "-2147483648 to 2147483647"; break;
    case DType::u32: low = 0.0, high = 4294967296.0, range = "0 to 4294967295"; break;
    case DType::i64:
      low = -9223372036854775808.0, high = 9223372036854775808.0;
      range = "-9223372036854775808 to 9223372036854775807";
      break;
    case DType::bool_:
    case DType::f32:
    case DType::f64: return absl::OkStatus();
  }
  // Truncated toward zero, as a cast would: -0.5 is 0, which u32 holds.
  const double whole = std::trunc(value);
  if (whole < low || whole >= high) {
    return makeError(ErrorKind::kInvalidArgument, absl::StrFormat("%s: value %.17g is outside the range of %s (%s)", op,
                                                                  value, std::string(dtypeName(dtype)), range));
  }
  return absl::OkStatus();
}

absl::Status inferLoop(absl::Span<const Node> prior, const Node& node, absl::Span<const Program> bodies) {
  const std::string_view op = opName(node.op);
  if (node.op == OpCode::kScan) {
    ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 4));
    const std::string& axis = node.names[0];
    ACCY_RETURN_IF_ERROR(checkAxisName(op, axis));
    const int64_t carries = node.ints[1], xs = node.ints[2], length = node.ints[3];
    // carries + xs is summed exactly: two counts near 2^62 must not wrap
    // past the comparison with the operands.
    const std::optional<int64_t> passed = checkedAdd(carries, xs);
    if (carries < 0 || xs < 0 || length < 0 || !passed.has_value() ||
        *passed > static_cast<int64_t>(node.operands.size())) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("scan: ", carries, " carries, ", xs, " xs and length ", length, " over ",
                              node.operands.size(), " operands"));
    }
    if (length == 0 && xs > 0) {
      return makeError(ErrorKind::kInvalidExtent, "scan: a loop of length 0 takes no xs (no axis has extent 0)");
    }
    for (int64_t j = 0; j < xs; ++j) {
      const Node& x = prior[node.operands[carries + j]];
      auto at = findAxis(x.axes, axis);
      if (!at) return unknownAxis(op, axis, x.axes, strCat("xs value ", j));
      if (x.axes[*at].extent != length) {
        return makeError(ErrorKind::kAxisExtentMismatch,
                         strCat("scan: xs value ", j, " ", axesText(x.axes), " has '", axis, "' of extent ",
                                x.axes[*at].extent, " but the loop has length ", length));
      }
    }
    ACCY_ASSIGN_OR_RETURN(const Program* body, loopBody(op, bodies, node.ints[0]));
    ACCY_RETURN_IF_ERROR(checkBodyInputs(op, *body, prior, node, carries, xs, axis));
    ACCY_RETURN_IF_ERROR(checkCarriesOut(op, *body, prior, node, carries));
    for (size_t j = carries; j < body->outputs.size(); ++j) {
      const Spec y = bodyOutput(*body, j);
      if (findAxis(y.axes, axis)) {
        return makeError(ErrorKind::kAxisNameCollision,
                         strCat("scan: y ", j - carries, " ", axesText(y.axes), " already has the loop's axis '",
                                axis, "'"));
      }
      if (length == 0) {
        return makeError(ErrorKind::kInvalidExtent, "scan: a loop of length 0 returns no ys (no axis has extent 0)");
      }
      std::vector<Axis> axes = {Axis{axis, length}};
      axes.insert(axes.end(), y.axes.begin(), y.axes.end());
      ACCY_RETURN_IF_ERROR(checkAxes(strCat("scan: y ", j - carries), y.dtype, axes));
    }
    return absl::OkStatus();
  }
  if (node.op == OpCode::kWhileLoop) {
    ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 3));
    const int64_t carries = node.ints[2];
    if (carries < 0 || carries > static_cast<int64_t>(node.operands.size())) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("while_loop: ", carries, " carries over ", node.operands.size(), " operands"));
    }
    if (carries == 0) {
      return makeError(ErrorKind::kCarryMismatch,
                       "while_loop: the loop has no carries; it needs at least one (the condition reads the carries "
                       "and the body returns them: with none, the loop could only end at once or never)");
    }
    ACCY_ASSIGN_OR_RETURN(const Program* cond, loopBody(op, bodies, node.ints[0]));
    ACCY_ASSIGN_OR_RETURN(const Program* step, loopBody(op, bodies, node.ints[1]));
    ACCY_RETURN_IF_ERROR(checkBodyInputs("while_loop condition", *cond, prior, node, carries, 0, ""));
    ACCY_RETURN_IF_ERROR(checkBodyInputs("while_loop body", *step, prior, node, carries, 0, ""));
    if (cond->outputs.size() != 1 || bodyOutput(*cond, 0) != Spec{DType::bool_, {}}) {
      return makeError(ErrorKind::kDTypeMismatch,
                       strCat("while_loop: the condition must return one bool scalar, got ", cond->outputs.size(),
                              cond->outputs.empty() ? " values" : strCat(" values, the first ", specText(bodyOutput(*cond, 0)))));
    }
    ACCY_RETURN_IF_ERROR(checkCarriesOut("while_loop body", *step, prior, node, carries));
    if (step->outputs.size() != static_cast<size_t>(carries)) {
      return makeError(ErrorKind::kCarryMismatch, strCat("while_loop: the body returns ", step->outputs.size(),
                                                         " values but the loop has ", carries, " carries"));
    }
    return absl::OkStatus();
  }
  return makeError(ErrorKind::kInvalidProgram, strCat(op, ": not a loop"));
}

}  // namespace

absl::StatusOr<Spec> loopResultSpec(absl::Span<const Node> prior, const Node& loop, int64_t k,
                                    absl::Span<const Program> bodies) {
  if (!isLoop(loop.op)) {
    return makeError(ErrorKind::kInvalidProgram, strCat("loop_result: reads ", opName(loop.op), ", not a loop"));
  }
  const bool scan = loop.op == OpCode::kScan;
  // The loop node itself is checked before its results (validateProgram
  // checks nodes in order); this function may also be asked of one that was
  // not, and then refuses it instead of reading past its attributes.
  if (loop.ints.size() != (scan ? 4u : 3u) || loop.names.size() != (scan ? 1u : 0u)) {
    return makeError(ErrorKind::kInvalidProgram, strCat("loop_result: reads a ", opName(loop.op), " with ",
                                                        loop.ints.size(), " integer and ", loop.names.size(),
                                                        " name attributes"));
  }
  const int64_t carries = scan ? loop.ints[1] : loop.ints[2];
  if (carries < 0 || carries > static_cast<int64_t>(loop.operands.size())) {
    return makeError(ErrorKind::kInvalidProgram, strCat("loop_result: reads a ", opName(loop.op), " of ", carries,
                                                        " carries over ", loop.operands.size(), " operands"));
  }
  ACCY_ASSIGN_OR_RETURN(const Program* body, loopBody("loop_result", bodies, scan ? loop.ints[0] : loop.ints[1]));
  const int64_t results = scan ? static_cast<int64_t>(body->outputs.size()) : carries;
  if (k < 0 || k >= results) {
    return makeError(ErrorKind::kInvalidProgram,
                     strCat("loop_result: result ", k, " of a ", opName(loop.op), " with ", results, " results"));
  }
  if (k < carries) return prior[loop.operands[k]].spec();
  Spec y = bodyOutput(*body, k);
  y.axes.insert(y.axes.begin(), Axis{loop.names[0], loop.ints[3]});
  return y;
}


int64_t axisExtent(const std::vector<Axis>& axes, std::string_view name) {
  for (const Axis& a : axes) {
    if (a.name == name) return a.extent;
  }
  return 0;
}

absl::Status checkAxisName(std::string_view op, std::string_view name) {
  bool ok = !name.empty() && static_cast<int64_t>(name.size()) <= kMaxAxisNameBytes &&
            ((name[0] >= 'a' && name[0] <= 'z') || name[0] == '_');
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  }
  if (ok) return absl::OkStatus();
  return makeError(ErrorKind::kInvalidAxisName,
                   strCat(op, ": axis name '", quoted(name), "' must match [a-z_][a-z0-9_]* (at most ",
                          kMaxAxisNameBytes, " characters)"));
}

absl::Status checkAxes(std::string_view op, DType dtype, const std::vector<Axis>& axes, int64_t max_bytes) {
  if (static_cast<int64_t>(axes.size()) > kMaxAxes) {
    return makeError(ErrorKind::kProgramTooLarge,
                     strCat(op, ": ", axes.size(), " axes; a value has at most ", kMaxAxes, " (the language's limit)"));
  }
  max_bytes = std::min(max_bytes, kMaxValueBytes);
  std::set<std::string_view> seen;
  int64_t bytes = dtypeSize(dtype);
  for (const Axis& a : axes) {
    ACCY_RETURN_IF_ERROR(checkAxisName(op, a.name));
    if (!seen.insert(a.name).second) {
      return makeError(ErrorKind::kAxisNameCollision,
                       strCat(op, ": axis '", a.name, "' appears twice in ", axesText(axes)));
    }
    if (a.extent <= 0) {
      return makeError(ErrorKind::kInvalidExtent,
                       strCat(op, ": axis '", a.name, "' has extent ", a.extent,
                                    "; extents must be positive"));
    }
    if (a.extent > max_bytes / bytes) {
      return makeError(ErrorKind::kInvalidExtent,
                       strCat(op, ": axes ", axesText(axes), " of ", dtypeName(dtype), " exceed the ", max_bytes,
                              "-byte limit of one value"));
    }
    bytes *= a.extent;
  }
  return absl::OkStatus();
}

absl::StatusOr<Spec> inferNode(absl::Span<const Node> prior, const Node& node,
                               absl::Span<const Program> bodies) {
  const std::string_view op = opName(node.op);
  for (int32_t id : node.operands) {
    if (id < 0 || static_cast<size_t>(id) >= prior.size()) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat(op, ": operand %", id, " does not precede the node"));
    }
    if (isLoop(prior[id].op) && node.op != OpCode::kLoopResult) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat(op, ": reads the ", opName(prior[id].op), " %", id,
                              " directly; a loop's results are read through loop_result"));
    }
  }
  auto operand = [&](size_t i) -> const Node& { return prior[node.operands[i]]; };
  Spec out;
  switch (opCategory(node.op)) {
    case OpCategory::Leaf:
      ACCY_RETURN_IF_ERROR(checkArity(node, 0));
      out.dtype = node.dtype;
      if (node.op == OpCode::kInput) {
        ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 1));
        if (node.ints[0] < 0) {
          return makeError(ErrorKind::kInvalidArgument, "input: negative input index");
        }
        out.axes = node.axes;
      } else if (node.op == OpCode::kIota) {
        ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 1));
        ACCY_RETURN_IF_ERROR(checkTakes(node, node.dtype));
        out.axes = {Axis{node.names[0], node.ints[0]}};
      } else {
        ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 0));
        if (node.op == OpCode::kConstant) ACCY_RETURN_IF_ERROR(checkScalarFits("constant", node.scalar, node.dtype));
      }
      break;
    case OpCategory::Unary: {
      ACCY_RETURN_IF_ERROR(checkArity(node, 1));
      ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 0));
      out = operand(0).spec();
      ACCY_RETURN_IF_ERROR(checkTakes(node, out.dtype));
      break;
    }
    case OpCategory::Binary:
    case OpCategory::Compare: {
      ACCY_RETURN_IF_ERROR(checkArity(node, 2));
      ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 0));
      const Node& a = operand(0);
      const Node& b = operand(1);
      ACCY_RETURN_IF_ERROR(sameDType(op, a.dtype, b.dtype));
      ACCY_RETURN_IF_ERROR(checkTakes(node, a.dtype));
      ACCY_ASSIGN_OR_RETURN(out.axes, broadcastAxes(op, a.axes, b.axes));
      out.dtype = opCategory(node.op) == OpCategory::Compare ? DType::bool_ : a.dtype;
      break;
    }
    case OpCategory::Loop:
      if (node.op == OpCode::kLoopResult) {
        ACCY_RETURN_IF_ERROR(checkArity(node, 1));
        ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 1));
        ACCY_ASSIGN_OR_RETURN(out, loopResultSpec(prior, operand(0), node.ints[0], bodies));
        break;
      }
      ACCY_RETURN_IF_ERROR(inferLoop(prior, node, bodies));
      out = Spec{DType::bool_, {}};  // a loop's own value is no array (ops.inc)
      break;
    case OpCategory::Random: {
      ACCY_RETURN_IF_ERROR(checkArity(node, 4));
      ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 0));
      for (size_t k = 0; k < 4; ++k) {
        if (operand(k).dtype != DType::u32) {
          return unsupported(op, operand(k).dtype, "u32 (key words k0 k1, counter words c0 c1)");
        }
        ACCY_ASSIGN_OR_RETURN(out.axes, broadcastAxes(op, out.axes, operand(k).axes));
      }
      out.dtype = DType::u32;
      break;
    }
    case OpCategory::Select: {
      ACCY_RETURN_IF_ERROR(checkArity(node, 3));
      ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 0));
      if (operand(0).dtype != DType::bool_) {
        return makeError(ErrorKind::kDTypeMismatch,
                         strCat("where: the condition must be bool, got ",
                                      dtypeName(operand(0).dtype)));
      }
      ACCY_RETURN_IF_ERROR(sameDType(op, operand(1).dtype, operand(2).dtype));
      ACCY_ASSIGN_OR_RETURN(auto ca, broadcastAxes(op, operand(0).axes, operand(1).axes));
      ACCY_ASSIGN_OR_RETURN(out.axes, broadcastAxes(op, ca, operand(2).axes));
      out.dtype = operand(1).dtype;
      break;
    }
    case OpCategory::Cast:
      ACCY_RETURN_IF_ERROR(checkArity(node, 1));
      ACCY_RETURN_IF_ERROR(checkAttrs(node, 0, 0));
      if (node.op == OpCode::kBitcast) {
        const DType from = operand(0).dtype;
        if (from == DType::bool_ || node.dtype == DType::bool_ || dtypeSize(from) != dtypeSize(node.dtype)) {
          return makeError(ErrorKind::kUnsupportedDType,
                           strCat("bitcast: ", dtypeName(from), " to ", dtypeName(node.dtype),
                                  " changes the width (f32, i32 and u32 are 4 bytes, f64 and i64 are 8; bool has "
                                  "no bitcast)"));
        }
      }
      out = Spec{node.dtype, operand(0).axes};
      break;
    case OpCategory::Reduce: {
      ACCY_RETURN_IF_ERROR(checkArity(node, 1));
      const Node& a = operand(0);
      if (node.names.empty()) {
        return makeError(ErrorKind::kInvalidArgument,
                         strCat(op, ": name at least one axis to reduce"));
      }
      if (!node.ints.empty()) {
        const bool sum_or_mean = node.op == OpCode::kReduceSum || node.op == OpCode::kReduceMean;
        if (!sum_or_mean || node.ints != std::vector<int64_t>{1}) {
          return makeError(ErrorKind::kInvalidArgument,
                           strCat(op, ": the only attribute a reduction takes is compensated (ints = [1]) on sum and "
                                      "mean"));
        }
        if (!isFloating(a.dtype)) {
          return makeError(ErrorKind::kUnsupportedDType,
                           strCat(op, ": compensated accumulation is for f32 and f64 values, not ", dtypeName(a.dtype)));
        }
      }
      ACCY_RETURN_IF_ERROR(noDuplicates(op, node.names));
      ACCY_RETURN_IF_ERROR(checkTakes(node, a.dtype));
      for (const auto& n : node.names) {
        if (!findAxis(a.axes, n)) return unknownAxis(op, n, a.axes);
      }
      out.dtype = a.dtype;
      for (const Axis& ax : a.axes) {
        if (std::find(node.names.begin(), node.names.end(), ax.name) == node.names.end()) {
          out.axes.push_back(ax);
        }
      }
      break;
    }
    case OpCategory::Dot: {
      ACCY_RETURN_IF_ERROR(checkArity(node, 2));
      if (node.names.empty() || !node.ints.empty()) {
        return makeError(ErrorKind::kInvalidArgument, "dot: name at least one axis to contract");
      }
      ACCY_RETURN_IF_ERROR(noDuplicates(op, node.names));
      const Node& a = operand(0);
      const Node& b = operand(1);
      ACCY_RETURN_IF_ERROR(sameDType(op, a.dtype, b.dtype));
      ACCY_RETURN_IF_ERROR(checkTakes(node, a.dtype));
      for (const std::string& k : node.names) {
        if (!findAxis(a.axes, k)) return unknownAxis(op, k, a.axes, "left operand");
        if (!findAxis(b.axes, k)) return unknownAxis(op, k, b.axes, "right operand");
      }
      ACCY_ASSIGN_OR_RETURN(auto both, broadcastAxes(op, a.axes, b.axes));
      out.dtype = a.dtype;
      for (Axis& ax : both) {
        if (std::find(node.names.begin(), node.names.end(), ax.name) == node.names.end()) {
          out.axes.push_back(std::move(ax));
        }
      }
      break;
    }
    case OpCategory::Index: {
      ACCY_RETURN_IF_ERROR(checkArity(node, node.op == OpCode::kScatterAdd ? 3 : 2));
      ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 0));
      const Node& x = operand(0);
      ACCY_RETURN_IF_ERROR(checkTakes(node, x.dtype));
      ACCY_ASSIGN_OR_RETURN(std::vector<Axis> taken, takeAxes(op, x.axes, node.names[0], operand(1)));
      out = x.spec();
      if (node.op == OpCode::kTake) {
        out.axes = std::move(taken);
        break;
      }
      const Node& u = operand(2);
      ACCY_RETURN_IF_ERROR(sameDType(op, x.dtype, u.dtype));
      bool same = u.axes.size() == taken.size();
      for (const Axis& ax : taken) {
        auto at = findAxis(u.axes, ax.name);
        same = same && at.has_value() && u.axes[*at].extent == ax.extent;
      }
      if (!same) {
        return makeError(ErrorKind::kAxisExtentMismatch,
                         strCat("scatter_add: updates have axes ", axesText(u.axes), " but take(x, '",
                                node.names[0], "', indices) has ", axesText(taken),
                                " (the same axes, in any order)"));
      }
      break;
    }
    case OpCategory::Layout: {
      if (node.op == OpCode::kConcat) {
        if (node.operands.empty()) {
          return makeError(ErrorKind::kArityMismatch, "concat: needs at least one piece");
        }
      } else {
        ACCY_RETURN_IF_ERROR(checkArity(node, 1));
      }
      const Node& a = operand(0);
      out.dtype = a.dtype;
      switch (node.op) {
        case OpCode::kTranspose: {
          ACCY_RETURN_IF_ERROR(noDuplicates(op, node.names));
          for (const auto& n : node.names) {
            auto at = findAxis(a.axes, n);
            if (!at) return unknownAxis(op, n, a.axes);
            out.axes.push_back(a.axes[*at]);
          }
          if (node.names.size() != a.axes.size() || !node.ints.empty()) {
            return makeError(ErrorKind::kInvalidArgument,
                             strCat("transpose: the new order must list every axis of ",
                                          axesText(a.axes), " once"));
          }
          break;
        }
        case OpCode::kRename: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 2, 0));
          auto at = findAxis(a.axes, node.names[0]);
          if (!at) return unknownAxis(op, node.names[0], a.axes);
          ACCY_RETURN_IF_ERROR(checkAxisName(op, node.names[1]));
          auto clash = findAxis(a.axes, node.names[1]);
          if (clash && *clash != *at) {
            return makeError(ErrorKind::kAxisNameCollision,
                             strCat("rename: '", node.names[1], "' is already an axis of ",
                                          axesText(a.axes)));
          }
          out.axes = a.axes;
          out.axes[*at].name = node.names[1];
          break;
        }
        case OpCode::kBroadcast: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 1));
          ACCY_RETURN_IF_ERROR(checkAxisName(op, node.names[0]));
          if (findAxis(a.axes, node.names[0])) {
            return makeError(ErrorKind::kAxisNameCollision,
                             strCat("broadcast: '", node.names[0],
                                          "' is already an axis of ", axesText(a.axes)));
          }
          out.axes = a.axes;
          out.axes.push_back(Axis{node.names[0], node.ints[0]});
          break;
        }
        case OpCode::kSplit: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 3, 1));
          auto at = findAxis(a.axes, node.names[0]);
          if (!at) return unknownAxis(op, node.names[0], a.axes);
          const int64_t extent = a.axes[*at].extent;
          const int64_t inner = node.ints[0];
          if (inner <= 0 || extent % inner != 0) {
            return makeError(ErrorKind::kInvalidExtent,
                             strCat("split: inner extent ", inner, " does not divide axis '",
                                          node.names[0], "' of extent ", extent));
          }
          for (size_t i = 0; i < a.axes.size(); ++i) {
            if (i == *at) {
              out.axes.push_back(Axis{node.names[1], extent / inner});
              out.axes.push_back(Axis{node.names[2], inner});
            } else {
              out.axes.push_back(a.axes[i]);
            }
          }
          break;
        }
        case OpCode::kMerge: {
          if (node.names.size() < 3 || !node.ints.empty()) {
            return makeError(ErrorKind::kInvalidArgument,
                             "merge: name at least two axes and the merged axis");
          }
          std::vector<std::string> parts(node.names.begin(), node.names.end() - 1);
          ACCY_RETURN_IF_ERROR(noDuplicates(op, parts));
          int64_t extent = 1;
          std::vector<size_t> at;
          for (const auto& n : parts) {
            auto p = findAxis(a.axes, n);
            if (!p) return unknownAxis(op, n, a.axes);
            at.push_back(*p);
            extent *= a.axes[*p].extent;
          }
          for (size_t i = 0; i < a.axes.size(); ++i) {
            if (i == at[0]) {
              out.axes.push_back(Axis{node.names.back(), extent});
            } else if (std::find(at.begin(), at.end(), i) == at.end()) {
              out.axes.push_back(a.axes[i]);
            }
          }
          break;
        }
        case OpCode::kSlice: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 3));
          auto at = findAxis(a.axes, node.names[0]);
          if (!at) return unknownAxis(op, node.names[0], a.axes);
          const int64_t extent = a.axes[*at].extent;
          const int64_t start = node.ints[0], stop = node.ints[1], step = node.ints[2];
          // Any step >= 1: one past the extent takes a single element (lowering
          // then uses step 1, so views of views never multiply huge steps).
          if (step < 1 || start < 0 || start >= stop || stop > extent) {
            return makeError(ErrorKind::kInvalidSlice,
                             absl::StrFormat("slice: [%d:%d:%d] of axis '%s' (extent %d) needs "
                                             "0 <= start < stop <= extent and step >= 1",
                                             start, stop, step, node.names[0], extent));
          }
          out.axes = a.axes;
          out.axes[*at].extent = (stop - start - 1) / step + 1;  // ceil((stop - start) / step), without overflow
          break;
        }
        case OpCode::kConcat: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 0));
          const std::string& name = node.names[0];
          auto at = findAxis(a.axes, name);
          if (!at) return unknownAxis(op, name, a.axes, "first piece");
          out.axes = a.axes;
          for (size_t i = 1; i < node.operands.size(); ++i) {
            const Node& p = operand(i);
            ACCY_RETURN_IF_ERROR(sameDType(op, a.dtype, p.dtype));
            if (p.axes.size() != a.axes.size()) {
              return makeError(ErrorKind::kAxisExtentMismatch,
                               strCat("concat: piece ", i, " has axes ", axesText(p.axes),
                                            " but the first piece has ", axesText(a.axes)));
            }
            for (const Axis& ax : a.axes) {
              auto q = findAxis(p.axes, ax.name);
              if (!q) return unknownAxis(op, ax.name, p.axes, strCat("piece ", i));
              if (ax.name == name) {
                out.axes[*at].extent += p.axes[*q].extent;
              } else if (p.axes[*q].extent != ax.extent) {
                return makeError(
                    ErrorKind::kAxisExtentMismatch,
                    strCat("concat: axis '", ax.name, "' has extent ", p.axes[*q].extent,
                                 " in piece ", i, " but ", ax.extent, " in the first piece"));
              }
            }
          }
          break;
        }
        case OpCode::kPad: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 1, 2));
          auto at = findAxis(a.axes, node.names[0]);
          if (!at) return unknownAxis(op, node.names[0], a.axes);
          const int64_t before = node.ints[0], after = node.ints[1];
          if (before < 0 || after < 0 || before > kMaxValueBytes || after > kMaxValueBytes) {
            return makeError(ErrorKind::kInvalidArgument,
                             absl::StrFormat("pad: before %d and after %d of axis '%s' must be "
                                             "between 0 and 2^40",
                                             before, after, node.names[0]));
          }
          ACCY_RETURN_IF_ERROR(checkScalarFits("pad", node.scalar, a.dtype));
          out.axes = a.axes;
          out.axes[*at].extent += before + after;
          break;
        }
        case OpCode::kWindow: {
          ACCY_RETURN_IF_ERROR(checkAttrs(node, 2, 3));
          auto at = findAxis(a.axes, node.names[0]);
          if (!at) return unknownAxis(op, node.names[0], a.axes);
          ACCY_RETURN_IF_ERROR(checkAxisName(op, node.names[1]));
          if (findAxis(a.axes, node.names[1])) {
            return makeError(ErrorKind::kAxisNameCollision,
                             strCat("window: '", node.names[1], "' is already an axis of ",
                                    axesText(a.axes)));
          }
          const int64_t extent = a.axes[*at].extent;
          const int64_t size = node.ints[0], stride = node.ints[1], dilation = node.ints[2];
          // Any stride and dilation >= 1 (past the extent they take one window,
          // or one element of it; lowering then uses 1, as for a slice's step).
          if (size < 1 || stride < 1 || dilation < 1) {
            return makeError(ErrorKind::kInvalidArgument,
                             absl::StrFormat("window: size %d, stride %d and dilation %d of axis "
                                             "'%s' must be at least 1",
                                             size, stride, dilation, node.names[0]));
          }
          // (size - 1) * dilation + 1 <= extent, without overflow.
          if (size - 1 > (extent - 1) / dilation) {
            return makeError(ErrorKind::kWindowTooLarge,
                             absl::StrFormat("window: %d elements %d apart along axis '%s' span "
                                             "more than its extent %d",
                                             size, dilation, node.names[0], extent));
          }
          for (size_t i = 0; i < a.axes.size(); ++i) {
            if (i == *at) {
              out.axes.push_back(Axis{node.names[0], (extent - (size - 1) * dilation - 1) / stride + 1});
              out.axes.push_back(Axis{node.names[1], size});
            } else {
              out.axes.push_back(a.axes[i]);
            }
          }
          break;
        }
#define ACCY_CASES_ALL
#define ACCY_CASES_Layout 0
#include "compiler/tensor/op_cases.inc"
          return makeError(ErrorKind::kInvalidProgram, strCat(op, ": not a layout op"));
      }
      break;
    }
  }
  ACCY_RETURN_IF_ERROR(checkAxes(op, out.dtype, out.axes));
  return out;
}

namespace {

absl::Status validateAt(const Program& program, int64_t depth, int64_t& total_nodes);

absl::Status validateBodies(const Program& program, int64_t depth, int64_t& total_nodes) {
  if (!program.bodies.empty() && depth >= kMaxLoopDepth) {
    return makeError(ErrorKind::kInvalidProgram,
                     strCat("loops nest more than ", kMaxLoopDepth, " deep (the language's limit)"));
  }
  for (size_t i = 0; i < program.bodies.size(); ++i) {
    if (auto st = validateAt(program.bodies[i], depth + 1, total_nodes); !st.ok()) {
      return makeError(ErrorKind::kInvalidProgram, strCat("body ", i, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status validateAt(const Program& program, int64_t depth, int64_t& total_nodes) {
  total_nodes += static_cast<int64_t>(program.nodes.size());
  if (static_cast<int64_t>(program.nodes.size()) > kMaxProgramNodes || total_nodes > kMaxProgramNodes) {
    return makeError(ErrorKind::kInvalidProgram, strCat("the program has ", total_nodes,
                                                        " nodes with its bodies; the language's limit is ",
                                                        kMaxProgramNodes));
  }
  ACCY_RETURN_IF_ERROR(validateBodies(program, depth, total_nodes));
  if (static_cast<int64_t>(program.name.size()) > kMaxProgramNameBytes) {
    return makeError(ErrorKind::kInvalidProgram, strCat("the program's name has ", program.name.size(),
                                                        " bytes; the language's limit is ", kMaxProgramNameBytes));
  }
  const absl::Span<const Node> nodes(program.nodes);
  int64_t input_count = 0;
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    const Node& node = program.nodes[i];
    if (static_cast<int64_t>(node.operands.size()) > kMaxOperands ||
        static_cast<int64_t>(node.names.size()) > kMaxNameAttributes ||
        static_cast<int64_t>(node.ints.size()) > kMaxIntAttributes) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat("node %", i, " has more operands or attributes than the language allows"));
    }
    auto inferred = inferNode(nodes.subspan(0, i), node, program.bodies);
    if (!inferred.ok()) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat("node %", i, ": ", inferred.status().message()));
    }
    if (inferred->dtype != node.dtype || inferred->axes != node.axes) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat("node %", i, " (", opName(node.op), ") records ",
                                    specText(node.spec()), " but its operands give ",
                                    specText(*inferred)));
    }
    if (node.op == OpCode::kInput) ++input_count;
  }
  if (static_cast<int64_t>(program.inputs.size()) != input_count) {
    return makeError(ErrorKind::kInvalidProgram,
                     strCat("the program lists ", program.inputs.size(), " inputs but has ",
                                  input_count, " input nodes"));
  }
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    const int32_t id = program.inputs[i];
    if (id < 0 || static_cast<size_t>(id) >= program.nodes.size() ||
        program.nodes[id].op != OpCode::kInput || program.nodes[id].ints[0] != int64_t(i)) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat("input ", i, " does not name input node number ", i));
    }
  }
  if (program.outputs.empty()) {
    return makeError(ErrorKind::kInvalidProgram, "the program has no outputs");
  }
  for (int32_t id : program.outputs) {
    if (id < 0 || static_cast<size_t>(id) >= program.nodes.size()) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat("output names node %", id, ", which does not exist"));
    }
    if (isLoop(program.nodes[id].op)) {
      return makeError(ErrorKind::kInvalidProgram,
                       strCat("output names the loop %", id, "; a loop's results are read through loop_result"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status validateProgram(const Program& program) {
  int64_t total_nodes = 0;
  return validateAt(program, 0, total_nodes);
}

}  // namespace accy::tensor
