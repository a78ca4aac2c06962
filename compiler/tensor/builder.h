// Recording array programs on placeholders.
//
// `define` creates one placeholder Value per input Spec, calls the user's
// function on them and keeps every operation the function performs as a
// Program. Ops never throw and never return errors directly: a failing op
// records the first error in its Builder (sticky) and returns a poisoned
// Value, and every later op on a poisoned Value is poisoned too. `define`
// then returns that first error, which names the op and the axes involved.
//
// Values are handles into their Builder and are valid only while the
// recording function runs.
#ifndef ACCY_COMPILER_TENSOR_BUILDER_H_
#define ACCY_COMPILER_TENSOR_BUILDER_H_

#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/tensor/program.h"

namespace accy::tensor {

class Builder;

// How sum and mean accumulate (Value::sum, Value::mean).
struct SumOptions {
  bool compensated = false;
};

class Value {
 public:
  Value() = default;  // an invalid value; ops on it fail with InvalidValue

  // False for a default-constructed or poisoned value.
  bool valid() const { return builder_ != nullptr && id_ >= 0; }
  Builder* builder() const { return builder_; }
  int32_t id() const { return id_; }
  // The dtype and axes; a scalar f32 with no axes when not valid().
  Spec spec() const;
  DType dtype() const { return spec().dtype; }
  std::vector<Axis> axes() const { return spec().axes; }

  // Binary elementwise, broadcasting by axis name. A number adopts this
  // value's dtype.
  Value add(const Value& o) const;
  Value sub(const Value& o) const;
  Value mul(const Value& o) const;
  Value div(const Value& o) const;
  Value max(const Value& o) const;
  Value min(const Value& o) const;
  Value pow(const Value& o) const;
  Value add(double o) const;
  Value sub(double o) const;
  Value mul(double o) const;
  Value div(double o) const;
  Value max(double o) const;
  Value min(double o) const;
  Value pow(double o) const;

  // Unary elementwise, one per unary row of the op table (ops.inc): neg,
  // abs, sin, cos, exp, log, sqrt, tanh, sigmoid, ...; the elementary ones
  // need f32 or f64 (the DTypes column).
#define ACCY_API_Unary(e, name) Value name() const;
#include "compiler/tensor/op_api.inc"

  // Comparisons, giving bool.
  Value lt(const Value& o) const;
  Value le(const Value& o) const;
  Value gt(const Value& o) const;
  Value ge(const Value& o) const;
  Value eq(const Value& o) const;
  Value ne(const Value& o) const;
  Value lt(double o) const;
  Value le(double o) const;
  Value gt(double o) const;
  Value ge(double o) const;
  Value eq(double o) const;
  Value ne(double o) const;

  // This value (bool) selects `a` where true and `b` where false.
  Value where(const Value& a, const Value& b) const;
  Value cast(DType dtype) const;

  // Bits, on i32, i64 and u32 (and, or, xor and bitNot on bool too). The
  // count of a shift has this value's dtype; shiftRight is logical on u32
  // and arithmetic on i32 and i64; a count that is negative or at least
  // the width gives 0 (or the sign on a signed shiftRight). bitNot is a
  // unary row above.
  Value bitAnd(const Value& o) const;
  Value bitOr(const Value& o) const;
  Value bitXor(const Value& o) const;
  Value shiftLeft(const Value& n) const;
  Value shiftRight(const Value& n) const;
  Value bitAnd(double o) const;
  Value bitOr(double o) const;
  Value bitXor(double o) const;
  Value shiftLeft(double n) const;
  Value shiftRight(double n) const;
  // The same bits as `dtype`, of the same width: f32, i32 and u32; f64
  // and i64.
  Value bitcast(DType dtype) const;

  // Reductions over named axes.
  Value sum(std::string_view axis) const;
  Value sum(std::initializer_list<std::string_view> axes) const;
  Value sum(const std::vector<std::string>& axes) const;
  // sum and mean of f32 or f64 with SumOptions{.compensated = true}: each
  // addition's rounding error is carried beside the sum (two-sum), so the
  // result is within about one ulp of the exact sum of the terms whatever
  // their number and signs (docs/SEMANTICS.md, "Sums"). On other dtypes a
  // sticky UnsupportedDType.
  Value sum(std::string_view axis, SumOptions options) const;
  Value sum(const std::vector<std::string>& axes, SumOptions options) const;
  Value mean(std::string_view axis, SumOptions options) const;
  Value mean(const std::vector<std::string>& axes, SumOptions options) const;
  Value max(std::string_view axis) const;
  Value max(std::initializer_list<std::string_view> axes) const;
  Value max(const std::vector<std::string>& axes) const;
  Value min(std::string_view axis) const;
  Value min(std::initializer_list<std::string_view> axes) const;
  Value min(const std::vector<std::string>& axes) const;
  Value mean(std::string_view axis) const;
  Value mean(std::initializer_list<std::string_view> axes) const;
  Value mean(const std::vector<std::string>& axes) const;
  Value prod(std::string_view axis) const;
  Value prod(std::initializer_list<std::string_view> axes) const;
  Value prod(const std::vector<std::string>& axes) const;

  // Multiplies by `o` (broadcasting by name) and sums over axis `k`, which
  // both operands must have.
  Value dot(const Value& o, std::string_view k) const;
  // Sums over several axes, which both operands must have.
  Value dot(const Value& o, std::initializer_list<std::string_view> axes) const;
  Value dot(const Value& o, const std::vector<std::string>& axes) const;

  // The first index (i32) along `axis` of the largest (smallest) element;
  // NaN counts as larger than every number, so argmax finds the first NaN
  // and argmin skips NaNs (index 0 when every element is NaN).
  Value argmax(std::string_view axis) const;
  Value argmin(std::string_view axis) const;

  // Layout by name.
  Value transpose(std::initializer_list<std::string_view> order) const;
  Value transpose(const std::vector<std::string>& order) const;
  Value rename(std::string_view from, std::string_view to) const;
  // Repeats the value along a new last axis.
  Value broadcast(std::string_view axis, int64_t extent) const;
  // Replaces `axis` by `outer` (extent / inner_extent) then `inner`.
  Value split(std::string_view axis, std::string_view outer, std::string_view inner,
              int64_t inner_extent) const;
  // Replaces the listed axes by one axis `merged` at the first one's place;
  // merged index = row-major index over the listed axes in the listed order.
  Value merge(std::initializer_list<std::string_view> axes, std::string_view merged) const;
  Value merge(const std::vector<std::string>& axes, std::string_view merged) const;
  // Elements start, start+step, ... < stop along `axis`.
  Value slice(std::string_view axis, int64_t start, int64_t stop, int64_t step = 1) const;
  // Joins this value and `others` along `axis`.
  Value concat(std::string_view axis, std::initializer_list<Value> others) const;
  // `before` elements of `value` (in this value's dtype), this value, then
  // `after` more along `axis`. A view: consumers read through it.
  Value pad(std::string_view axis, int64_t before, int64_t after, double value = 0) const;
  // Replaces `axis` (extent n) by `axis` of extent
  // (n - (size - 1) * dilation - 1) / stride + 1 followed by `window_axis`
  // of extent `size`: element [i, k] is this value's [i * stride + k * dilation].
  // WindowTooLarge when the window spans more than the axis. A view.
  Value window(std::string_view axis, std::string_view window_axis, int64_t size, int64_t stride = 1,
               int64_t dilation = 1) const;

 private:
  friend class Builder;
  Value(Builder* builder, uint64_t serial, int32_t id, int32_t depth)
      : builder_(builder), serial_(serial), id_(id), depth_(depth) {}
  friend Builder* ownerOf(absl::Span<const Value> operands);
  Builder* builder_ = nullptr;
  uint64_t serial_ = 0;  // the recording's serial number; see Builder
  int32_t id_ = -1;
  int32_t depth_ = 0;    // the builder's loop depth, read without the builder

};

Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);
Value operator+(const Value& a, double b);
Value operator-(const Value& a, double b);
Value operator*(const Value& a, double b);
Value operator/(const Value& a, double b);
Value operator+(double a, const Value& b);
Value operator-(double a, const Value& b);
Value operator*(double a, const Value& b);
Value operator/(double a, const Value& b);
Value operator-(const Value& a);

class Builder {
 public:
  Builder() = default;
  // A loop body's builder (scan, whileLoop): values of `parent` and its
  // ancestors used here become the body's captured inputs.
  explicit Builder(Builder* parent) : parent_(parent), depth_(parent ? parent->depth_ + 1 : 0) {}
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  // A scalar constant of `dtype`.
  Value constant(double value, DType dtype);
  // 0, 1, ..., extent-1 along a new axis.
  Value iota(std::string_view axis, int64_t extent, DType dtype = DType::i32);

  // True when `v` was recorded by this builder.
  bool owns(const Value& v) const { return v.builder_ == this && v.serial_ == serial_; }
  // True when `v` was recorded by an enclosing builder (this one's parent,
  // its parent, ...), whose values this builder captures.
  bool encloses(const Value& v) const;
  // How deep this builder's loop bodies nest (0 for a program's own).
  int64_t depth() const { return depth_; }
  // The values of the enclosing builder this body captured, in the order of
  // the body's captured inputs (after the inputs the loop itself declared).
  const std::vector<Value>& captures() const { return captures_; }
  // Loop bodies recorded so far (Program::bodies).
  const std::vector<Program>& bodies() const { return bodies_; }
  // Adds a loop body; returns its index.
  int64_t addBody(Program body);
  // `v` as a value of this builder: itself when recorded here, a captured
  // input when recorded by an enclosing builder, else a poisoned value (the
  // error recorded).
  Value local(const Value& v);

  // The first error recorded, or ok.
  const absl::Status& status() const { return status_; }
  const std::vector<Node>& nodes() const { return nodes_; }

  // Records `node` after type-checking it. Returns a poisoned Value if the
  // builder already failed, an operand is invalid or foreign, or the check
  // fails (the error is recorded). Used by ops and transforms.
  Value record(Node node, std::initializer_list<Value> operands);
  Value record(Node node, absl::Span<const Value> operands);
  // Records `status` as the builder's error (if it has none yet) and
  // returns a poisoned value: for composite ops written outside this class.
  Value poison(absl::Status status) { return fail(std::move(status)); }
  // Records an input placeholder; `index` is its position among inputs.
  Value input(const Spec& spec, int64_t index);

 private:
  Value fail(absl::Status status);
  Value make(int32_t id) { return Value(this, serial_, id, static_cast<int32_t>(depth_)); }
  // Unique per Builder in the process, so a Value kept from an earlier
  // recording is recognised as foreign even if a new Builder reuses the
  // same address.
  const uint64_t serial_ = nextSerial();
  static uint64_t nextSerial();
  // The value of this builder standing for `v`, recorded by an enclosing
  // builder: a captured input, made once per value.
  Value capture(const Value& v);
  std::vector<Node> nodes_;
  std::vector<Program> bodies_;
  absl::Status status_;
  Builder* const parent_ = nullptr;
  const int64_t depth_ = 0;
  std::vector<Value> captures_;       // enclosing builder's values, in capture order
  std::vector<int32_t> captured_ids_; // this builder's input node for each
};

// Free-function forms of every op.
#define ACCY_FREE_BINARY(name)                                                         \
  inline Value name(const Value& a, const Value& b) { return a.name(b); }             \
  inline Value name(const Value& a, double b) { return a.name(b); }                   \
  inline Value name(double a, const Value& b) {                                       \
    return b.builder() ? b.builder()->constant(a, b.dtype()).name(b) : Value().name(b); \
  }
ACCY_FREE_BINARY(add)
ACCY_FREE_BINARY(sub)
ACCY_FREE_BINARY(mul)
ACCY_FREE_BINARY(div)
ACCY_FREE_BINARY(max)
ACCY_FREE_BINARY(min)
ACCY_FREE_BINARY(pow)
ACCY_FREE_BINARY(lt)
ACCY_FREE_BINARY(le)
ACCY_FREE_BINARY(gt)
ACCY_FREE_BINARY(ge)
ACCY_FREE_BINARY(eq)
ACCY_FREE_BINARY(ne)
ACCY_FREE_BINARY(bitAnd)
ACCY_FREE_BINARY(bitOr)
ACCY_FREE_BINARY(bitXor)
ACCY_FREE_BINARY(shiftLeft)
ACCY_FREE_BINARY(shiftRight)
#undef ACCY_FREE_BINARY

#define ACCY_API_Unary(e, name) \
  inline Value name(const Value& a) { return a.name(); }
#include "compiler/tensor/op_api.inc"

#define ACCY_FREE_REDUCE(name)                                                           \
  inline Value name(const Value& a, std::string_view axis) { return a.name(axis); }     \
  inline Value name(const Value& a, std::initializer_list<std::string_view> axes) {     \
    return a.name(axes);                                                               \
  }                                                                                    \
  inline Value name(const Value& a, const std::vector<std::string>& axes) {             \
    return a.name(axes);                                                               \
  }
ACCY_FREE_REDUCE(sum)
ACCY_FREE_REDUCE(max)
ACCY_FREE_REDUCE(min)
ACCY_FREE_REDUCE(mean)
ACCY_FREE_REDUCE(prod)
#undef ACCY_FREE_REDUCE

inline Value where(const Value& cond, const Value& a, const Value& b) { return cond.where(a, b); }
inline Value cast(const Value& a, DType dtype) { return a.cast(dtype); }
inline Value bitcast(const Value& a, DType dtype) { return a.bitcast(dtype); }
inline Value dot(const Value& a, const Value& b, std::string_view k) { return a.dot(b, k); }
inline Value dot(const Value& a, const Value& b, std::initializer_list<std::string_view> axes) {
  return a.dot(b, axes);
}
inline Value dot(const Value& a, const Value& b, const std::vector<std::string>& axes) { return a.dot(b, axes); }
inline Value argmax(const Value& a, std::string_view axis) { return a.argmax(axis); }
inline Value argmin(const Value& a, std::string_view axis) { return a.argmin(axis); }
inline Value pad(const Value& a, std::string_view axis, int64_t before, int64_t after, double value = 0) {
  return a.pad(axis, before, after, value);
}
inline Value window(const Value& a, std::string_view axis, std::string_view window_axis, int64_t size,
                    int64_t stride = 1, int64_t dilation = 1) {
  return a.window(axis, window_axis, size, stride, dilation);
}

// Indexing by data (docs/SEMANTICS.md, "Indexing by data"). `indices` is
// i32 or i64. Axes of `indices` that `x` also has are matched element by
// element; the others replace `axis` in place, in their order. Indices
// outside [0, extent) are clamped: take never reads outside `x`.
Value take(const Value& x, std::string_view axis, const Value& indices);
// x plus `updates` added at the positions take(x, axis, indices) reads;
// `updates` has the axes that take returns, in any order. Out-of-range
// indices are dropped; duplicates add up in the indices' row-major order,
// the same bits on every run, thread count and target.
Value scatterAdd(const Value& x, std::string_view axis, const Value& indices, const Value& updates);
inline Value transpose(const Value& a, std::initializer_list<std::string_view> order) {
  return a.transpose(order);
}
inline Value transpose(const Value& a, const std::vector<std::string>& order) {
  return a.transpose(order);
}
inline Value rename(const Value& a, std::string_view from, std::string_view to) {
  return a.rename(from, to);
}
inline Value broadcast(const Value& a, std::string_view axis, int64_t extent) {
  return a.broadcast(axis, extent);
}
inline Value split(const Value& a, std::string_view axis, std::string_view outer,
                   std::string_view inner, int64_t inner_extent) {
  return a.split(axis, outer, inner, inner_extent);
}
inline Value merge(const Value& a, std::initializer_list<std::string_view> axes,
                   std::string_view merged) {
  return a.merge(axes, merged);
}
inline Value slice(const Value& a, std::string_view axis, int64_t start, int64_t stop,
                   int64_t step = 1) {
  return a.slice(axis, start, stop, step);
}
// The builder an op on `operands` records into: of the operands' builders,
// the most deeply nested loop body's (values of enclosing recordings are
// captured there); null when no operand has one.
Builder* ownerOf(absl::Span<const Value> operands);
inline Builder* ownerOf(std::initializer_list<Value> operands) {
  return ownerOf(absl::Span<const Value>(operands.begin(), operands.size()));
}

// Joins `pieces` (at least one) along `axis`.
Value concat(std::string_view axis, absl::Span<const Value> pieces);
inline Value concat(std::string_view axis, std::initializer_list<Value> pieces) {
  return concat(axis, absl::Span<const Value>(pieces.begin(), pieces.size()));
}
inline Value iota(Builder& b, std::string_view axis, int64_t extent, DType dtype = DType::i32) {
  return b.iota(axis, extent, dtype);
}

// A recording function's type when it returns several values.
using RecordFn =
    std::function<absl::StatusOr<std::vector<Value>>(Builder&, std::span<const Value>)>;

// Records `fn` on placeholders for `inputs`. Fails with the first recording
// error, with the function's own error, with InvalidValue when it returns a
// value of another recording, or on invalid specs.
absl::StatusOr<Program> defineProgram(std::string_view name, absl::Span<const Spec> inputs,
                                      const RecordFn& fn);

// `fn` may return Value, std::vector<Value>, or absl::StatusOr of either.
template <typename F>
absl::StatusOr<Program> define(std::string_view name, absl::Span<const Spec> inputs, F&& fn) {
  return defineProgram(
      name, inputs,
      [&fn](Builder& b, std::span<const Value> args) -> absl::StatusOr<std::vector<Value>> {
        auto result = fn(b, args);
        using R = std::decay_t<decltype(result)>;
        if constexpr (std::is_same_v<R, Value>) {
          return std::vector<Value>{result};
        } else if constexpr (std::is_same_v<R, std::vector<Value>>) {
          return result;
        } else if constexpr (std::is_same_v<R, absl::StatusOr<Value>>) {
          if (!result.ok()) return result.status();
          return std::vector<Value>{*result};
        } else {
          static_assert(std::is_same_v<R, absl::StatusOr<std::vector<Value>>>,
                        "a recording function returns Value, std::vector<Value> or "
                        "absl::StatusOr of either");
          return result;
        }
      });
}

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_BUILDER_H_
