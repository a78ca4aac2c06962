// The meaning of every elementwise op (docs/SEMANTICS.md, "Element
// semantics"), written once over a target's primitives: integer division and
// remainder by 0 and -1, integer pow, saturating float-to-integer casts,
// NaN-propagating max and min, bool arithmetic and comparisons, the
// identities of the reduction combiners, and the elementary-function
// dispatch (compiler/codegen/math/elementary.h in exact mode, the target's
// own form in fast mode). The GPU kernel emitter (every GPU target), the
// x86-64 emitter and the WebAssembly emitter all drive it; a target supplies
// primitives, never semantics.
//
// A primitives type P provides (the value subset of gpu::Target, which is
// one):
//   using Value = ...;                     handles, copyable
//   Value constant(DType, double);         the number converted to the dtype
//   Value arith(Arith, DType, Value, Value);
//       on integers kDiv is the machine's signed division: the layer never
//       gives it a divisor of 0 or -1; kAdd/kSub/kMul wrap in the dtype
//   Value negate(DType, Value);            wrapping on integers
//   Value absFloat(DType, Value);          clears the sign bit
//   Value sqrt(DType, Value);              correctly rounded
//   Value compare(Cmp, DType, Value, Value);
//       a bool; on floats ordered except kNe; the dtype is never bool
//   Value isNan(DType, Value);
//   Value select(DType, Value cond, Value yes, Value no);   any dtype
//   Value logicAnd(Value, Value), logicOr(Value, Value);   bools
//   Value bitAnd(DType, Value, Value), bitOr(...), bitXor(...);  integers
//   Value shiftRight(DType, Value, int n);
//       integers; arithmetic on i32 and i64, logical on u32
//   Value shiftLeftBy(DType, Value x, Value n), shiftRightBy(...);
//       integers, n of x's dtype and in [0, width): the layer gives no
//       other count; right shifts as shiftRight
//   Value bitcast(DType from, DType to, Value);
//       the same bits as another dtype of the same width (never bool)
// u32 values compare, divide, convert and take max and min as unsigned.
//   Value convert(DType from, DType to, Value);
//       between different non-bool dtypes: to float rounds to nearest,
//       integer to integer sign-extends or keeps the low bits, float to
//       integer truncates a value the layer has made finite and in range
//   Value variable(DType, Value init), read(DType, Value var),
//       write(DType, Value var, Value);  mutable variables (integer pow)
//   absl::Status loopWhile(const std::function<Value()>& cond,
//       const std::function<absl::Status()>& body, int64_t max_trips);
//   Value exactMath(OpCode, DType, Value x, Value y);
//       the elementary function of the op (elementaryOf below over the
//       target's math ops type); y is pow's exponent
//   std::optional<Value> fastForm(OpCode, DType, Value x, Value y);
//       fast mode: the target's own approximation, or nullopt
//   bool fastMode();
// and may provide, where one instruction has exactly the meaning the layer
// states (the layer uses it then instead of composing primitives):
//   Value greaterOrSecond(DType, Value a, Value b): a > b ? a : b (b when
//       unordered), lessOrSecond: a < b ? a : b (SSE's maxps and minps)
//   Value intMax(DType, Value, Value), intMin(...)
//   Value truncateSaturating(DType from, DType to, Value): float to
//       integer with this layer's cast meaning (NaN to 0, saturating)
//   Value shiftLeft(DType, Value, int n): x << n for n in [0, width) (a
//       shift by an immediate; without it, shiftLeftBy a constant)
// A primitive that cannot be expressed (a dtype the target lacks, an
// integer op in a vector loop) records the failure in the target and
// returns a placeholder; the caller checks the target's status.
#ifndef ACCY_COMPILER_CODEGEN_SEMANTICS_OP_SEMANTICS_H_
#define ACCY_COMPILER_CODEGEN_SEMANTICS_OP_SEMANTICS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/tensor/program.h"

namespace accy::codegen {

using tensor::DType;
using tensor::OpCode;

// Primitive arithmetic and comparisons of a target.
enum class Arith : uint8_t { kAdd, kSub, kMul, kDiv };
enum class Cmp : uint8_t { kLt, kLe, kGt, kGe, kEq, kNe };

// The elementary function of `op` (its Elementary column, Fn(f): f from
// elementary.h) over a target's math ops type O; nullopt for an op without
// one. `y` is pow's exponent; a unary function does not read it.
template <class O>
std::optional<typename O::Vec> elementaryOf(O& o, OpCode op, const typename O::Vec& x, const typename O::Vec& y) {
  using Vec = typename O::Vec;
#define ACCY_ELEMENTARY_CALL_No std::nullopt
#define ACCY_ELEMENTARY_CALL_Fn(f)                                      \
  [&]() -> std::optional<Vec> {                                         \
    if constexpr (requires { math::f(o, x, y); }) {                     \
      return math::f(o, x, y);                                          \
    } else {                                                            \
      return math::f(o, x);                                             \
    }                                                                   \
  }()
  switch (op) {
#define ACCY_OP(e, name, cat, grad, dtypes, cost, fn) \
  case OpCode::e:                                    \
    return ACCY_ELEMENTARY_CALL_##fn;
#include "compiler/tensor/ops.inc"
#undef ACCY_OP
  }
#undef ACCY_ELEMENTARY_CALL_No
#undef ACCY_ELEMENTARY_CALL_Fn
  (void)x;
  (void)y;
  return std::nullopt;
}

template <class P>
class OpSemantics {
 public:
  using Value = typename P::Value;

  // `where` names the emitter in messages ("x86-64 emitter").
  OpSemantics(P& p, std::string where) : p_(p), where_(std::move(where)) {}

  // The first op the layer could not give a meaning (an op no expression
  // may hold, an elementary function on integers).
  const absl::Status& status() const { return error_; }

  // `op` on `a`: `d` is the result's dtype, `arg` the first operand's.
  Value op(OpCode o, DType d, DType arg, std::span<const Value> a) {
    switch (o) {
#define ACCY_CASES_Binary 1
#include "compiler/tensor/op_cases.inc"
        return binary(o, d, a[0], a[1]);
      case OpCode::kNeg:
        return p_.negate(d, a[0]);
      case OpCode::kAbs:
        if (tensor::isFloating(d)) return p_.absFloat(d, a[0]);
        if (tensor::isUnsigned(d)) return a[0];
        // Wrapping: abs(INT_MIN) = INT_MIN.
        return p_.select(d, p_.compare(Cmp::kLt, d, a[0], p_.constant(d, 0)), p_.negate(d, a[0]), a[0]);
      case OpCode::kSqrt:
        if (!tensor::isFloating(d)) return refuse(o, d);
        return p_.sqrt(d, a[0]);
#define ACCY_CASES_Unary 1
#define ACCY_CASES_ELEMENTARY Yes
#include "compiler/tensor/op_cases.inc"
        return elementary(o, d, a[0], a[0]);
#define ACCY_CASES_Compare 1
#include "compiler/tensor/op_cases.inc"
        return compare(cmpOf(o), arg, a[0], a[1]);
      case OpCode::kWhere:
        return p_.select(d, a[0], a[1], a[2]);
      case OpCode::kCast:
        return convert(a[0], arg, d);
      case OpCode::kBitcast:
        return arg == d ? a[0] : p_.bitcast(arg, d, a[0]);
      case OpCode::kBitNot:
        if (d == DType::bool_) return p_.select(d, a[0], p_.constant(d, 0), p_.constant(d, 1));
        return p_.bitXor(d, a[0], allOnes(d));
#define ACCY_CASES_Leaf 1
#define ACCY_CASES_Reduce 1
#define ACCY_CASES_Dot 1
#define ACCY_CASES_Layout 1
#define ACCY_CASES_Index 1
#define ACCY_CASES_Loop 1
#include "compiler/tensor/op_cases.inc"
        break;
      case OpCode::kThreefryWord0:
      case OpCode::kThreefryWord1:
        return threefry(o == OpCode::kThreefryWord1, a[0], a[1], a[2], a[3]);
    }
    return refuse(o, d);
  }

  // A binary op, also a reduction's combiner step.
  Value binary(OpCode o, DType d, Value x, Value y) {
    const bool flt = tensor::isFloating(d);
    switch (o) {
      case OpCode::kAdd:
        return p_.arith(Arith::kAdd, d, x, y);
      case OpCode::kSub:
        return p_.arith(Arith::kSub, d, x, y);
      case OpCode::kMul:
        return p_.arith(Arith::kMul, d, x, y);
      case OpCode::kDiv: {
        if (flt) return p_.arith(Arith::kDiv, d, x, y);
        if (tensor::isUnsigned(d)) {  // x / 0 = 0
          const Value zero = p_.constant(d, 0), is_zero = p_.compare(Cmp::kEq, d, y, zero);
          return p_.select(d, is_zero, zero, p_.arith(Arith::kDiv, d, x, p_.select(d, is_zero, p_.constant(d, 1), y)));
        }
        // x / 0 = 0 and x / -1 = -x (wrapping); the divisor given to the
        // machine's division is never 0 or -1.
        const Value zero = p_.constant(d, 0), one = p_.constant(d, 1), minus_one = p_.constant(d, -1);
        const Value is_zero = p_.compare(Cmp::kEq, d, y, zero), is_m1 = p_.compare(Cmp::kEq, d, y, minus_one);
        const Value safe = p_.select(d, p_.logicOr(is_zero, is_m1), one, y);
        const Value q = p_.arith(Arith::kDiv, d, x, safe);
        return p_.select(d, is_zero, zero, p_.select(d, is_m1, p_.negate(d, x), q));
      }
      case OpCode::kMax:
      case OpCode::kMin:
        return minMax(o == OpCode::kMax, d, x, y);
      case OpCode::kPow:
        return flt ? elementary(o, d, x, y) : intPow(d, x, y);
      case OpCode::kBitAnd:
        return d == DType::bool_ ? p_.logicAnd(x, y) : p_.bitAnd(d, x, y);
      case OpCode::kBitOr:
        return d == DType::bool_ ? p_.logicOr(x, y) : p_.bitOr(d, x, y);
      case OpCode::kBitXor:
        return d == DType::bool_ ? compare(Cmp::kNe, d, x, y) : p_.bitXor(d, x, y);
      case OpCode::kShiftLeft:
      case OpCode::kShiftRight:
        return shift(o == OpCode::kShiftLeft, d, x, y);
#define ACCY_CASES_ALL
#define ACCY_CASES_Binary 0
#include "compiler/tensor/op_cases.inc"
        break;
    }
    return refuse(o, d);
  }

  // Cast semantics: NaN to integer is 0, float to integer saturates at the
  // range, anything to bool is x != 0 (NaN too), bool to a number 0 or 1.
  Value convert(Value v, DType from, DType to) {
    if (from == to) return v;
    if (to == DType::bool_) return p_.compare(Cmp::kNe, from, v, p_.constant(from, 0));  // NaN != 0
    if (from == DType::bool_) return p_.select(to, v, p_.constant(to, 1), p_.constant(to, 0));
    if (!tensor::isFloating(from) || tensor::isFloating(to)) return p_.convert(from, to, v);
    if constexpr (requires { p_.truncateSaturating(from, to, v); }) return p_.truncateSaturating(from, to, v);
    // Float to integer: truncation of a value made finite and in range
    // first, then the saturated ends and NaN put back.
    const bool i64 = to == DType::i64, u32 = to == DType::u32;
    const double lo = i64 ? -9223372036854775808.0 : u32 ? 0.0 : -2147483648.0;
    const double hi = i64 ? 9223372036854775808.0 : u32 ? 4294967296.0 : 2147483648.0;
    const Value too_low = p_.compare(Cmp::kLt, from, v, p_.constant(from, lo));
    const Value too_high = p_.compare(Cmp::kGe, from, v, p_.constant(from, hi));
    const Value nan = p_.isNan(from, v);
    const Value out_of_range = p_.logicOr(p_.logicOr(too_low, too_high), nan);
    const Value safe = p_.select(from, out_of_range, p_.constant(from, 0), v);
    Value r = p_.convert(from, to, safe);
    r = p_.select(to, too_low, p_.constant(to, lo), r);
    r = p_.select(to, too_high, p_.constant(to, i64 ? 9223372036854775807.0 : u32 ? 4294967295.0 : 2147483647.0), r);
    return p_.select(to, nan, p_.constant(to, 0), r);
  }

  // shiftLeft or shiftRight of `x` by a count known when emitting (a
  // constant, as a double of d's value): the target's shift by an
  // immediate, or the result of a count out of range (binary's meaning).
  Value shiftByConstant(bool left, DType d, Value x, double count) {
    const int width = tensor::integerBits(d);
    if (count < 0 || count >= width) {
      return left || tensor::isUnsigned(d) ? p_.constant(d, 0) : p_.shiftRight(d, x, width - 1);
    }
    const int n = static_cast<int>(count);
    return left ? shiftLeftConstant(d, x, n) : p_.shiftRight(d, x, n);
  }

  // The identity a reduction with `combiner` starts from.
  Value identity(OpCode combiner, DType d) { return p_.constant(d, choir::combinerIdentity(combiner, d)); }

  // a + b on floats and its rounding error (math::twoSum), for compensated
  // sums (choir::Stmt::compensated).
  std::pair<Value, Value> twoSum(DType d, Value a, Value b) {
    SumOps ops{*this, d};
    const math::Pair<Value> p = math::twoSum(ops, a, b);
    return {p.hi, p.lo};
  }

 private:
  // Addition and subtraction in `d`: the ops type math::twoSum needs.
  struct SumOps {
    using Vec = Value;
    OpSemantics& s;
    DType d;
    Value add(Value x, Value y) { return s.binary(OpCode::kAdd, d, x, y); }
    Value sub(Value x, Value y) { return s.binary(OpCode::kSub, d, x, y); }
  };

  static Cmp cmpOf(OpCode o) {
    switch (o) {
      case OpCode::kLt:
        return Cmp::kLt;
      case OpCode::kLe:
        return Cmp::kLe;
      case OpCode::kGt:
        return Cmp::kGt;
      case OpCode::kGe:
        return Cmp::kGe;
      case OpCode::kEq:
        return Cmp::kEq;
      case OpCode::kNe:  // NaN != NaN
#define ACCY_CASES_ALL
#define ACCY_CASES_Compare 0
#include "compiler/tensor/op_cases.inc"
        return Cmp::kNe;
    }
    return Cmp::kNe;
  }

  Value compare(Cmp c, DType d, Value x, Value y) {
    if (d == DType::bool_) {
      // Bools compare as the integers 0 and 1.
      const Value one = p_.constant(DType::i32, 1), zero = p_.constant(DType::i32, 0);
      return p_.compare(c, DType::i32, p_.select(DType::i32, x, one, zero), p_.select(DType::i32, y, one, zero));
    }
    return p_.compare(c, d, x, y);
  }

  Value minMax(bool mx, DType d, Value x, Value y) {
    if (d == DType::bool_) return mx ? p_.logicOr(x, y) : p_.logicAnd(x, y);
    if (!tensor::isFloating(d)) {
      if constexpr (requires { p_.intMax(d, x, y); }) return mx ? p_.intMax(d, x, y) : p_.intMin(d, x, y);
      return p_.select(d, p_.compare(mx ? Cmp::kGt : Cmp::kLt, d, x, y), x, y);
    }
    // NaN in either operand gives NaN, and a tie gives x (the evaluator's
    // std::max and std::min): x >= y picks x, a NaN y fails the comparison
    // and is picked, a NaN x is picked last.
    if constexpr (requires { p_.greaterOrSecond(d, x, y); }) {
      // y > x ? y : x, with x for a NaN x, and then a NaN y put back.
      const Value chosen = mx ? p_.greaterOrSecond(d, y, x) : p_.lessOrSecond(d, y, x);
      return p_.select(d, p_.isNan(d, y), y, chosen);
    }
    const Value chosen = p_.select(d, p_.compare(mx ? Cmp::kGe : Cmp::kLe, d, x, y), x, y);
    return p_.select(d, p_.isNan(d, x), x, chosen);
  }

  // Exact mode: elementary.h's algorithm over the target's ops; fast mode:
  // the target's approximation where it has one.
  Value elementary(OpCode o, DType d, Value x, Value y) {
    if (!tensor::isFloating(d)) return refuse(o, d);
    if (p_.fastMode()) {
      if (std::optional<Value> v = p_.fastForm(o, d, x, y)) return *v;
    }
    return p_.exactMath(o, d, x, y);
  }

  // Integer pow (compiler/tensor/scalar_ops.cc's intPow): a negative
  // exponent gives 1 for base 1, +-1 for base -1 (by the exponent's
  // parity), 0 otherwise; else square-and-multiply, wrapping in the dtype:
  //   r = 1; b = base; e = exponent;
  //   while (e > 0) { if (e & 1) r *= b; b *= b; e >>= 1; }
  Value intPow(DType d, Value base, Value exponent) {
    const Value zero = p_.constant(d, 0), one = p_.constant(d, 1), minus_one = p_.constant(d, -1);
    const Value r = p_.variable(d, one), b = p_.variable(d, base), e = p_.variable(d, exponent);
    const absl::Status looped = p_.loopWhile(
        [&]() { return p_.compare(Cmp::kGt, d, p_.read(d, e), zero); },
        [&]() {
          const Value ev = p_.read(d, e), rv = p_.read(d, r), bv = p_.read(d, b);
          const Value odd = p_.compare(Cmp::kNe, d, p_.bitAnd(d, ev, one), zero);
          const Value next_r = p_.select(d, odd, p_.arith(Arith::kMul, d, rv, bv), rv);
          const Value next_b = p_.arith(Arith::kMul, d, bv, bv);
          const Value next_e = p_.shiftRight(d, ev, 1);
          p_.write(d, r, next_r);
          p_.write(d, b, next_b);
          p_.write(d, e, next_e);
          return absl::OkStatus();
        },
        /*max_trips=*/d == DType::i64 ? 63 : 31);
    if (!looped.ok() && error_.ok()) error_ = looped;
    const Value positive = p_.read(d, r);
    // Negative exponents (the loop ran no step).
    const Value even = p_.compare(Cmp::kEq, d, p_.bitAnd(d, exponent, one), zero);
    const Value for_minus_one = p_.select(d, even, one, minus_one);
    Value negative = p_.select(d, p_.compare(Cmp::kEq, d, base, minus_one), for_minus_one, zero);
    negative = p_.select(d, p_.compare(Cmp::kEq, d, base, one), one, negative);
    return p_.select(d, p_.compare(Cmp::kLt, d, exponent, zero), negative, positive);
  }

  // u32 `x` rotated left by n in [1, 32): the target's rotate where its
  // primitives have one, else two shifts and an or.
  Value rotateLeft(DType d, Value x, int n) {
    if constexpr (requires { p_.rotateLeft(d, x, n); }) {
      return p_.rotateLeft(d, x, n);
    } else {
      return p_.bitOr(d, shiftLeftConstant(d, x, n), p_.shiftRight(d, x, 32 - n));
    }
  }

  // Threefry-2x32, 20 rounds (Random123; compiler/tensor/scalar_ops.cc's
  // threefry2x32): word 0 or 1 of counter (c0, c1) under key (k0, k1), in
  // u32 registers.
  Value threefry(bool second, Value k0, Value k1, Value c0, Value c1) {
    const std::pair<Value, Value> w = threefryWords(k0, k1, c0, c1);
    return second ? w.second : w.first;
  }

  // Both words of one encryption (docs/SEMANTICS.md, "Random numbers").
 public:
  std::pair<Value, Value> threefryWords(Value k0, Value k1, Value c0, Value c1) {
    const std::array<Value, 4> in[1] = {{k0, k1, c0, c1}};
    return threefryWords(in)[0];
  }
  // The words of several encryptions ({k0, k1, c0, c1} each) emitted round
  // by round, the encryptions' instructions interleaved: each is a chain of
  // 20 dependent rounds, and a core overlaps independent chains only when
  // their instructions are near one another.
  std::vector<std::pair<Value, Value>> threefryWords(std::span<const std::array<Value, 4>> in) {
    static constexpr int kRotations[8] = {13, 15, 26, 6, 17, 29, 16, 24};
    const DType d = DType::u32;
    struct State {
      Value ks[3], x0, x1;
    };
    std::vector<State> st;
    st.reserve(in.size());
    for (const std::array<Value, 4>& w : in) {
      st.push_back(State{{w[0], w[1], p_.bitXor(d, p_.bitXor(d, w[0], w[1]), p_.constant(d, 0x1BD11BDA))},
                         p_.arith(Arith::kAdd, d, w[2], w[0]), p_.arith(Arith::kAdd, d, w[3], w[1])});
    }
    for (int r = 0; r < 20; ++r) {
      const int n = kRotations[r % 8];
      for (State& x : st) {
        x.x0 = p_.arith(Arith::kAdd, d, x.x0, x.x1);
        const Value rotated = rotateLeft(d, x.x1, n);
        x.x1 = p_.bitXor(d, rotated, x.x0);
        if (r % 4 == 3) {
          const int s = r / 4 + 1;
          x.x0 = p_.arith(Arith::kAdd, d, x.x0, x.ks[s % 3]);
          x.x1 = p_.arith(Arith::kAdd, d, x.x1, p_.arith(Arith::kAdd, d, x.ks[(s + 1) % 3], p_.constant(d, s)));
        }
      }
    }
    std::vector<std::pair<Value, Value>> out;
    out.reserve(st.size());
    for (const State& x : st) out.emplace_back(x.x0, x.x1);
    return out;
  }

 private:

  // Every bit set: -1, or 2^32 - 1 on u32 (constants are converted to the
  // dtype, and -1 saturates to 0 there).
  Value allOnes(DType d) { return p_.constant(d, tensor::isUnsigned(d) ? 4294967295.0 : -1.0); }

  // x << n and x >> n with every count defined: n read as unsigned in the
  // dtype's width, and a count at or above the width gives 0 (left, and
  // right on u32) or the sign fill (right on i32 and i64). The target's
  // shift only ever sees counts in [0, width).
  Value shift(bool left, DType d, Value x, Value n) {
    const int width = tensor::integerBits(d);
    const Value zero = p_.constant(d, 0);
    Value out_of_range = p_.compare(Cmp::kGe, d, n, p_.constant(d, width));
    if (!tensor::isUnsigned(d)) out_of_range = p_.logicOr(out_of_range, p_.compare(Cmp::kLt, d, n, zero));
    const Value safe = p_.select(d, out_of_range, zero, n);
    const Value shifted = left ? p_.shiftLeftBy(d, x, safe) : p_.shiftRightBy(d, x, safe);
    const Value fill = left || tensor::isUnsigned(d) ? zero : p_.shiftRight(d, x, width - 1);
    return p_.select(d, out_of_range, fill, shifted);
  }

  Value shiftLeftConstant(DType d, Value x, int n) {
    if constexpr (requires { p_.shiftLeft(d, x, n); }) {
      return p_.shiftLeft(d, x, n);
    } else {
      return p_.shiftLeftBy(d, x, p_.constant(d, n));
    }
  }

  Value refuse(OpCode o, DType d) {
    if (error_.ok()) {
      error_ = makeError(ErrorKind::kUnimplemented,
                         strCat(where_, ": op ", tensor::opName(o), " on ", tensor::dtypeName(d)));
    }
    return p_.constant(d, 0);
  }

  P& p_;
  std::string where_;
  absl::Status error_;
};

}  // namespace accy::codegen

#endif  // ACCY_COMPILER_CODEGEN_SEMANTICS_OP_SEMANTICS_H_
