// tensor::Program: a recorded graph of named-axis array operations.
//
// A Program is a plain value: nodes in topological order (every operand id is
// smaller than the node's own id), the node ids of its inputs in order, and
// the node ids of its outputs in order. Recording (builder.h), transforms and
// the wire decoder produce Programs; `inferNode` is the one type checker they
// all share, so a Program that passes `validateProgram` is well typed.
#ifndef ACCY_COMPILER_TENSOR_PROGRAM_H_
#define ACCY_COMPILER_TENSOR_PROGRAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/tensor/dtype.h"

namespace accy::tensor {

enum class OpCode : uint8_t {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) e,
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
};

// The columns of the op table (ops.inc explains each).
enum class OpCategory : uint8_t { Leaf, Unary, Binary, Compare, Select, Cast, Reduce, Dot, Layout, Index, Random, Loop };
enum class OpGradient : uint8_t { None, Smooth, Piecewise, Layout, Loop };
enum class OpDTypes : uint8_t { Any, Numeric, Floating, Integer, Bits };
enum class OpCost : uint8_t { Free, Cheap, Expensive };

std::string_view opName(OpCode op);
OpCategory opCategory(OpCode op);
OpGradient opGradient(OpCode op);
OpDTypes opDTypes(OpCode op);
OpCost opCost(OpCode op);
// Whether the op computes a function of compiler/codegen/math/elementary.h
// on floating operands (its Elementary column is Fn(...)).
bool opIsElementary(OpCode op);
// Whether `op` takes operands of `dtype` (its DTypes column).
bool opTakes(OpCode op, DType dtype);
inline constexpr int kOpCount = 0
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) +1
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
    ;

// One named dimension. Names match [a-z_][a-z0-9_]*; extents are positive.
struct Axis {
  std::string name;
  int64_t extent = 0;
  friend bool operator==(const Axis&, const Axis&) = default;
};

// The type of a value: element type and ordered axes (row-major memory).
struct Spec {
  DType dtype = DType::f32;
  std::vector<Axis> axes;  // empty for a scalar
  friend bool operator==(const Spec&, const Spec&) = default;

  int64_t elementCount() const;
  int64_t byteSize() const { return elementCount() * dtypeSize(dtype); }
};

// `spec(DType::f32, {{"point", 16}})`; `spec(DType::f32, {})` is a scalar.
Spec spec(DType dtype, std::vector<Axis> axes);

// Largest byte size any one value may have (1 TiB); larger extents fail with
// InvalidExtent so sizes never overflow 64 bits. accyd and the wire
// decoder take a smaller limit of their own (wire::DecodeLimits).
inline constexpr int64_t kMaxValueBytes = int64_t{1} << 40;

// Limits of the language (docs/SEMANTICS.md, "Limits"), checked when a
// program is recorded and when it is decoded, before anything is built:
// axes of one value (ProgramTooLarge), characters of an axis name
// (InvalidAxisName), nodes of one program (ProgramTooLarge). Every compiler
// stage may nest as deep as these allow and no deeper: loop nests and
// reduction domains have at most kMaxAxes levels, fused expressions at most
// choir::FuseLimits::max_nodes nodes.
inline constexpr int64_t kMaxAxes = 64;
inline constexpr int64_t kMaxAxisNameBytes = 64;
inline constexpr int64_t kMaxProgramNodes = int64_t{1} << 20;
inline constexpr int64_t kMaxProgramNameBytes = 256;
// Attributes and operands of one node: what the widest op takes (a
// transpose names every axis; a concat has many pieces).
inline constexpr int64_t kMaxNameAttributes = kMaxAxes + 2;
inline constexpr int64_t kMaxIntAttributes = 16;
inline constexpr int64_t kMaxOperands = 4096;
// Loops nest at most this deep (a body's body's ... body), and a program
// with its bodies, theirs and so on holds at most kMaxProgramNodes nodes.
inline constexpr int64_t kMaxLoopDepth = 16;

struct Node {
  OpCode op = OpCode::kConstant;
  DType dtype = DType::f32;
  std::vector<Axis> axes;
  std::vector<int32_t> operands;
  std::vector<std::string> names;  // axis-name attributes (see ops.inc)
  std::vector<int64_t> ints;       // integer attributes (see ops.inc)
  double scalar = 0;               // constant value
  friend bool operator==(const Node&, const Node&) = default;

  Spec spec() const { return Spec{dtype, axes}; }
};

struct Program {
  std::string name;
  std::vector<Node> nodes;
  std::vector<int32_t> inputs;   // node ids of kInput nodes, in input order
  std::vector<int32_t> outputs;  // node ids, in output order
  // The bodies of this program's loops (scan, while_loop), each a Program
  // whose inputs are the loop's carries, then its slices of xs (scan),
  // then its captures; loop nodes name them by index.
  std::vector<Program> bodies;
  friend bool operator==(const Program&, const Program&) = default;

  std::vector<Spec> inputSpecs() const;
  std::vector<Spec> outputSpecs() const;
};

// The extent of the axis named `name` in `axes`; 0 when there is none.
int64_t axisExtent(const std::vector<Axis>& axes, std::string_view name);

// Checks an axis name against [a-z_][a-z0-9_]* (InvalidAxisName).
absl::Status checkAxisName(std::string_view op, std::string_view name);
// Checks a list of axes: at most kMaxAxes of them, valid names, unique
// names, positive extents, and a byte size under `max_bytes` (at most
// kMaxValueBytes) for `dtype`.
absl::Status checkAxes(std::string_view op, DType dtype, const std::vector<Axis>& axes,
                       int64_t max_bytes = kMaxValueBytes);

// Computes the dtype and axes of `node` from its op, attributes and operands
// (`prior` holds every node before it). For input, constant, iota and cast
// the dtype attribute is `node.dtype`; for input the axes are `node.axes`.
// Errors carry a stable kind and name the op and the axes involved.
// Loop nodes (scan, while_loop) check their bodies' inputs and outputs
// against their operands: `bodies` are the enclosing program's.
absl::StatusOr<Spec> inferNode(absl::Span<const Node> prior, const Node& node,
                               absl::Span<const Program> bodies = {});

// The spec of result `k` of the loop node `loop` (a scan's carries, then its
// ys, each with the loop's axis first; a while_loop's carries).
absl::StatusOr<Spec> loopResultSpec(absl::Span<const Node> prior, const Node& loop, int64_t k,
                                    absl::Span<const Program> bodies);

// Re-checks a whole program: topological order, operands in range, every
// node's recorded type equal to the inferred one, inputs numbered 0..n-1,
// outputs in range, every body valid (recursively, at most kMaxLoopDepth
// deep, kMaxProgramNodes nodes in all). Failures are InvalidProgram naming
// the node.
absl::Status validateProgram(const Program& program);

// "(point=16, guess=8)"; "()" for a scalar.
std::string axesText(const std::vector<Axis>& axes);
// "f32[point=16]"; "f32[]" for a scalar.
std::string specText(const Spec& spec);

// A readable listing, one node per line:
//   program mismatch(%0: f32[], %1: f32[point=16], ...) {
//     %3 = mul %0, %1 : f32[point=16]
//     ...
//     return %7
//   }
std::string toText(const Program& program);
// A Graphviz digraph: inputs as ellipses, ops as boxes, outputs doubled.
std::string toDot(const Program& program);

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_PROGRAM_H_
