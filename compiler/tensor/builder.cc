#include "compiler/tensor/builder.h"

#include <atomic>
#include <cmath>

#include "base/strings.h"
#include "base/errors.h"

namespace accy::tensor {
namespace {

Node makeNode(OpCode op, std::vector<std::string> names = {}, std::vector<int64_t> ints = {}) {
  Node node;
  node.op = op;
  node.names = std::move(names);
  node.ints = std::move(ints);
  return node;
}

std::vector<std::string> toStrings(std::initializer_list<std::string_view> list) {
  return std::vector<std::string>(list.begin(), list.end());
}

Value literalLike(const Value& like, double number) {
  if (like.builder() == nullptr) return Value();
  return like.builder()->constant(number, like.valid() ? like.dtype() : DType::f32);
}

}  // namespace

Spec Value::spec() const {
  if (!valid()) return Spec{};
  return builder_->nodes()[id_].spec();
}

uint64_t Builder::nextSerial() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

Value Builder::fail(absl::Status status) {
  if (status_.ok()) status_ = std::move(status);
  return make(-1);
}

Value Builder::record(Node node, std::initializer_list<Value> operands) {
  return record(std::move(node), absl::Span<const Value>(operands.begin(), operands.size()));
}

Value Builder::record(Node node, absl::Span<const Value> operands) {
  if (!status_.ok()) return make(-1);
  if (static_cast<int64_t>(nodes_.size()) >= kMaxProgramNodes) {
    return fail(makeError(ErrorKind::kProgramTooLarge,
                          strCat(opName(node.op), ": the program already has ", nodes_.size(),
                                 " nodes, the language's limit")));
  }
  if (static_cast<int64_t>(operands.size()) > kMaxOperands) {
    return fail(makeError(ErrorKind::kProgramTooLarge,
                          strCat(opName(node.op), ": ", operands.size(), " operands; an op takes at most ",
                                 kMaxOperands)));
  }
  node.operands.clear();
  for (size_t i = 0; i < operands.size(); ++i) {
    Value v = operands[i];
    if (v.builder() != nullptr && !owns(v) && encloses(v)) v = capture(v);
    if (!status_.ok()) return make(-1);
    if (v.builder() != nullptr && !owns(v)) {
      return fail(makeError(ErrorKind::kForeignValue,
                            strCat(opName(node.op), ": operand ", i,
                                         " was recorded by another builder")));
    }
    if (!v.valid()) {
      return fail(makeError(ErrorKind::kInvalidValue,
                            strCat(opName(node.op), ": operand ", i,
                                         " is not a recorded value (default-constructed)")));
    }
    node.operands.push_back(v.id());
  }
  auto spec = inferNode(nodes_, node, bodies_);
  if (!spec.ok()) return fail(spec.status());
  node.dtype = spec->dtype;
  node.axes = std::move(spec->axes);
  nodes_.push_back(std::move(node));
  return make(static_cast<int32_t>(nodes_.size() - 1));
}

bool Builder::encloses(const Value& v) const {
  for (const Builder* b = parent_; b != nullptr; b = b->parent_) {
    if (b->owns(v)) return true;
  }
  return false;
}

Value Builder::capture(const Value& v) {
  if (!v.valid()) return v;
  Value outer = v;
  if (!parent_->owns(outer)) outer = parent_->capture(outer);  // through each body between
  if (!outer.valid()) return fail(parent_->status());
  for (size_t i = 0; i < captures_.size(); ++i) {
    if (captures_[i].id() == outer.id()) return make(captured_ids_[i]);
  }
  int64_t index = 0;
  for (const Node& n : nodes_) index += n.op == OpCode::kInput ? 1 : 0;
  Value local = input(outer.spec(), index);
  if (!local.valid()) return local;
  captures_.push_back(outer);
  captured_ids_.push_back(local.id());
  return local;
}

Value Builder::local(const Value& v) {
  if (!status_.ok()) return make(-1);
  if (owns(v) && v.valid()) return v;
  if (encloses(v)) return capture(v);
  return fail(makeError(v.builder() == nullptr || !v.valid() ? ErrorKind::kInvalidValue : ErrorKind::kForeignValue,
                        "the value is not one of this recording's (default-constructed, poisoned, or recorded "
                        "by another builder)"));
}

int64_t Builder::addBody(Program body) {
  bodies_.push_back(std::move(body));
  return static_cast<int64_t>(bodies_.size()) - 1;
}

Value Builder::input(const Spec& spec, int64_t index) {
  Node node = makeNode(OpCode::kInput, {}, {index});
  node.dtype = spec.dtype;
  node.axes = spec.axes;
  return record(std::move(node), {});
}

Value Builder::constant(double value, DType dtype) {
  Node node = makeNode(OpCode::kConstant);
  node.dtype = dtype;
  node.scalar = value;
  return record(std::move(node), {});
}

Value Builder::iota(std::string_view axis, int64_t extent, DType dtype) {
  Node node = makeNode(OpCode::kIota, {std::string(axis)}, {extent});
  node.dtype = dtype;
  return record(std::move(node), {});
}

namespace {

// Records a node whose operands may come from no builder at all (all
// default-constructed): then there is nowhere to record and the result is an
// invalid Value, which fails wherever it is recorded or returned.
Value recordOp(Node node, absl::Span<const Value> operands) {
  Builder* b = ownerOf(operands);
  if (b == nullptr) return Value();
  return b->record(std::move(node), operands);
}

Value recordOp(Node node, std::initializer_list<Value> operands) {
  return recordOp(std::move(node), absl::Span<const Value>(operands.begin(), operands.size()));
}

}  // namespace

#define ACCY_VALUE_BINARY(method, code)                                                  \
  Value Value::method(const Value& o) const { return recordOp(makeNode(code), {*this, o}); } \
  Value Value::method(double o) const { return method(literalLike(*this, o)); }
ACCY_VALUE_BINARY(add, OpCode::kAdd)
ACCY_VALUE_BINARY(sub, OpCode::kSub)
ACCY_VALUE_BINARY(mul, OpCode::kMul)
ACCY_VALUE_BINARY(div, OpCode::kDiv)
ACCY_VALUE_BINARY(max, OpCode::kMax)
ACCY_VALUE_BINARY(min, OpCode::kMin)
ACCY_VALUE_BINARY(pow, OpCode::kPow)
ACCY_VALUE_BINARY(lt, OpCode::kLt)
ACCY_VALUE_BINARY(le, OpCode::kLe)
ACCY_VALUE_BINARY(gt, OpCode::kGt)
ACCY_VALUE_BINARY(ge, OpCode::kGe)
ACCY_VALUE_BINARY(eq, OpCode::kEq)
ACCY_VALUE_BINARY(ne, OpCode::kNe)
ACCY_VALUE_BINARY(bitAnd, OpCode::kBitAnd)
ACCY_VALUE_BINARY(bitOr, OpCode::kBitOr)
ACCY_VALUE_BINARY(bitXor, OpCode::kBitXor)
ACCY_VALUE_BINARY(shiftLeft, OpCode::kShiftLeft)
ACCY_VALUE_BINARY(shiftRight, OpCode::kShiftRight)
#undef ACCY_VALUE_BINARY

#define ACCY_API_Unary(e, name) \
  Value Value::name() const { return recordOp(makeNode(OpCode::e), {*this}); }
#include "compiler/tensor/op_api.inc"

#define ACCY_VALUE_REDUCE(method, code)                                                 \
  Value Value::method(std::string_view axis) const {                                    \
    return recordOp(makeNode(code, {std::string(axis)}), {*this});                      \
  }                                                                                     \
  Value Value::method(std::initializer_list<std::string_view> axes) const {             \
    return recordOp(makeNode(code, toStrings(axes)), {*this});                          \
  }                                                                                     \
  Value Value::method(const std::vector<std::string>& axes) const {                     \
    return recordOp(makeNode(code, axes), {*this});                                     \
  }
ACCY_VALUE_REDUCE(sum, OpCode::kReduceSum)
Value Value::sum(std::string_view axis, SumOptions options) const {
  return sum(std::vector<std::string>{std::string(axis)}, options);
}
// A compensated sum or mean carries ints = {1} (ops.inc).
Value Value::sum(const std::vector<std::string>& axes, SumOptions options) const {
  return recordOp(makeNode(OpCode::kReduceSum, axes, options.compensated ? std::vector<int64_t>{1} : std::vector<int64_t>{}),
                  {*this});
}
Value Value::mean(std::string_view axis, SumOptions options) const {
  return mean(std::vector<std::string>{std::string(axis)}, options);
}
Value Value::mean(const std::vector<std::string>& axes, SumOptions options) const {
  return recordOp(makeNode(OpCode::kReduceMean, axes, options.compensated ? std::vector<int64_t>{1} : std::vector<int64_t>{}),
                  {*this});
}
ACCY_VALUE_REDUCE(max, OpCode::kReduceMax)
ACCY_VALUE_REDUCE(min, OpCode::kReduceMin)
ACCY_VALUE_REDUCE(mean, OpCode::kReduceMean)
ACCY_VALUE_REDUCE(prod, OpCode::kReduceProd)
#undef ACCY_VALUE_REDUCE

Value Value::where(const Value& a, const Value& b) const {
  return recordOp(makeNode(OpCode::kWhere), {*this, a, b});
}

Value Value::cast(DType dtype) const {
  Node node = makeNode(OpCode::kCast);
  node.dtype = dtype;
  return recordOp(std::move(node), {*this});
}

Value Value::bitcast(DType dtype) const {
  Node node = makeNode(OpCode::kBitcast);
  node.dtype = dtype;
  return recordOp(std::move(node), {*this});
}

Value Value::dot(const Value& o, std::string_view k) const {
  return recordOp(makeNode(OpCode::kDot, {std::string(k)}), {*this, o});
}

Value Value::dot(const Value& o, std::initializer_list<std::string_view> axes) const {
  return recordOp(makeNode(OpCode::kDot, toStrings(axes)), {*this, o});
}

Value Value::dot(const Value& o, const std::vector<std::string>& axes) const {
  return recordOp(makeNode(OpCode::kDot, axes), {*this, o});
}

namespace {

// argmax and argmin, recorded as reductions and a compare: the extreme
// along `axis`, the elements equal to it (NaN handled as the order says),
// then the smallest iota among them.
Value argExtreme(const Value& x, std::string_view axis, bool largest) {
  const std::string_view op = largest ? "argmax" : "argmin";
  Builder* b = x.builder();
  if (b == nullptr) return Value();
  if (!x.valid()) return x.add(x);  // records the operand's error
  const int64_t extent = axisExtent(x.axes(), axis);
  if (extent == 0) {
    return b->poison(makeError(ErrorKind::kUnknownAxis, strCat(op, ": axis '", quoted(axis),
                                                               "' is not an axis of the operand ",
                                                               axesText(x.axes()))));
  }
  if (extent >= int64_t{1} << 31) {  // `extent` itself is the i32 answer when no element matches
    return b->poison(makeError(ErrorKind::kInvalidExtent,
                               strCat(op, ": axis '", axis, "' has extent ", extent,
                                      "; an i32 position holds at most 2^31 - 1")));
  }
  Value hit;
  if (isFloating(x.dtype())) {
    Value nan = x.ne(x);
    if (largest) {
      hit = nan.max(axis).where(nan, x.eq(x.max(axis)));
    } else {
      Value finite_min = nan.where(b->constant(INFINITY, x.dtype()), x).min(axis);
      hit = nan.min(axis).where(nan, x.eq(finite_min));
    }
  } else {
    hit = x.eq(largest ? x.max(axis) : x.min(axis));
  }
  Value position = b->iota(axis, extent, DType::i32);
  return hit.where(position, b->constant(static_cast<double>(extent), DType::i32)).min(axis);
}

}  // namespace

Value Value::argmax(std::string_view axis) const { return argExtreme(*this, axis, true); }
Value Value::argmin(std::string_view axis) const { return argExtreme(*this, axis, false); }

Value Value::pad(std::string_view axis, int64_t before, int64_t after, double value) const {
  Node node = makeNode(OpCode::kPad, {std::string(axis)}, {before, after});
  node.scalar = value;
  return recordOp(std::move(node), {*this});
}

Value Value::window(std::string_view axis, std::string_view window_axis, int64_t size, int64_t stride,
                    int64_t dilation) const {
  return recordOp(makeNode(OpCode::kWindow, {std::string(axis), std::string(window_axis)},
                           {size, stride, dilation}),
                  {*this});
}

Value take(const Value& x, std::string_view axis, const Value& indices) {
  return recordOp(makeNode(OpCode::kTake, {std::string(axis)}), {x, indices});
}

Value scatterAdd(const Value& x, std::string_view axis, const Value& indices, const Value& updates) {
  return recordOp(makeNode(OpCode::kScatterAdd, {std::string(axis)}), {x, indices, updates});
}

Value Value::transpose(std::initializer_list<std::string_view> order) const {
  return recordOp(makeNode(OpCode::kTranspose, toStrings(order)), {*this});
}

Value Value::transpose(const std::vector<std::string>& order) const {
  return recordOp(makeNode(OpCode::kTranspose, order), {*this});
}

Value Value::rename(std::string_view from, std::string_view to) const {
  return recordOp(makeNode(OpCode::kRename, {std::string(from), std::string(to)}), {*this});
}

Value Value::broadcast(std::string_view axis, int64_t extent) const {
  return recordOp(makeNode(OpCode::kBroadcast, {std::string(axis)}, {extent}), {*this});
}

Value Value::split(std::string_view axis, std::string_view outer, std::string_view inner,
                   int64_t inner_extent) const {
  return recordOp(makeNode(OpCode::kSplit,
                           {std::string(axis), std::string(outer), std::string(inner)},
                           {inner_extent}),
                  {*this});
}

Value Value::merge(std::initializer_list<std::string_view> axes, std::string_view merged) const {
  return merge(toStrings(axes), merged);
}

Value Value::merge(const std::vector<std::string>& axes, std::string_view merged) const {
  std::vector<std::string> names = axes;
  names.emplace_back(merged);
  return recordOp(makeNode(OpCode::kMerge, std::move(names)), {*this});
}

Value Value::slice(std::string_view axis, int64_t start, int64_t stop, int64_t step) const {
  return recordOp(makeNode(OpCode::kSlice, {std::string(axis)}, {start, stop, step}), {*this});
}

Value Value::concat(std::string_view axis, std::initializer_list<Value> others) const {
  std::vector<Value> pieces{*this};
  pieces.insert(pieces.end(), others.begin(), others.end());
  return tensor::concat(axis, pieces);
}

Value concat(std::string_view axis, absl::Span<const Value> pieces) {
  return recordOp(makeNode(OpCode::kConcat, {std::string(axis)}), pieces);
}

Value operator+(const Value& a, const Value& b) { return a.add(b); }
Value operator-(const Value& a, const Value& b) { return a.sub(b); }
Value operator*(const Value& a, const Value& b) { return a.mul(b); }
Value operator/(const Value& a, const Value& b) { return a.div(b); }
Value operator+(const Value& a, double b) { return a.add(b); }
Value operator-(const Value& a, double b) { return a.sub(b); }
Value operator*(const Value& a, double b) { return a.mul(b); }
Value operator/(const Value& a, double b) { return a.div(b); }
Value operator+(double a, const Value& b) { return add(a, b); }
Value operator-(double a, const Value& b) { return sub(a, b); }
Value operator*(double a, const Value& b) { return mul(a, b); }
Value operator/(double a, const Value& b) { return div(a, b); }
Value operator-(const Value& a) { return a.neg(); }

absl::StatusOr<Program> defineProgram(std::string_view name, absl::Span<const Spec> inputs,
                                      const RecordFn& fn) {
  if (static_cast<int64_t>(name.size()) > kMaxProgramNameBytes) {
    return makeError(ErrorKind::kProgramTooLarge, strCat("define: the program's name '", quoted(name), "' has ",
                                                         name.size(), " bytes; at most ", kMaxProgramNameBytes));
  }
  Builder builder;
  std::vector<Value> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (auto st = checkAxes(strCat("define: input ", i), inputs[i].dtype, inputs[i].axes);
        !st.ok()) {
      return st;
    }
    args.push_back(builder.input(inputs[i], static_cast<int64_t>(i)));
  }
  auto results = fn(builder, std::span<const Value>(args.data(), args.size()));
  if (!builder.status().ok()) return builder.status();
  if (!results.ok()) return results.status();
  if (results->empty()) {
    return makeError(ErrorKind::kInvalidValue,
                     strCat("define ", name, ": the function returned no values"));
  }
  Program program;
  program.name = std::string(name);
  for (size_t i = 0; i < results->size(); ++i) {
    const Value& v = (*results)[i];
    if (!builder.owns(v) || !v.valid()) {
      return makeError(ErrorKind::kInvalidValue,
                       strCat("define ", name, ": result ", i,
                                    " is not a value recorded by this definition"));
    }
    program.outputs.push_back(v.id());
  }
  program.nodes = builder.nodes();
  program.bodies = builder.bodies();
  for (size_t i = 0; i < program.nodes.size(); ++i) {
    if (program.nodes[i].op == OpCode::kInput) program.inputs.push_back(static_cast<int32_t>(i));
  }
  if (program.inputs.size() != inputs.size()) {
    return makeError(ErrorKind::kInvalidValue,
                     strCat("define ", name, ": the function recorded ",
                                  static_cast<int64_t>(program.inputs.size() - inputs.size()),
                                  " placeholder(s) of its own; inputs come from the specs"));
  }
  return program;
}

Builder* ownerOf(absl::Span<const Value> operands) {
  Builder* owner = nullptr;
  int32_t depth = 0;
  for (const Value& v : operands) {
    if (v.builder() != nullptr && (owner == nullptr || v.depth_ > depth)) {
      owner = v.builder();
      depth = v.depth_;
    }
  }
  return owner;
}

}  // namespace accy::tensor
