// The ops type of elementary.h over plain C++ scalars (float or double):
// the same algorithms, operation for operation, evaluated on the host. The
// x86-64 code calls it for the rarely taken exact trig reduction
// (compiler/codegen/x86_64/runtime.cc) instead of inlining that path into
// every kernel.
//
// Every operation rounds exactly as the emitted instruction does, so code
// that includes this header must be compiled with -ffp-contract=off (a
// contracted a * b + c would turn Dekker's exact product inexact).
//
// `Tag` keeps the copies of differently compiled translation units apart: a
// file built for an ISA (-msse4.1 makes round() one instruction, -mfma
// fma()) instantiates HostOps with a tag of its own anonymous namespace, so
// its inline functions have internal linkage and the linker never hands
// one file's AVX2 copy to another's SSE4.1 caller.
#ifndef ACCY_COMPILER_CODEGEN_MATH_HOST_OPS_H_
#define ACCY_COMPILER_CODEGEN_MATH_HOST_OPS_H_

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "compiler/codegen/math/elementary.h"

namespace accy::math {

// c[0] + x * (c[1] + x * (...)) as the emitters evaluate it: acc = acc * x +
// c[i], from the top, with o's fma. For the host ops types (HostOps here,
// HostVecOps in compiler/codegen/x86_64/trig_large.h).
template <class O>
typename O::Vec hostHorner(const O& o, typename O::Vec x, std::span<const double> c) {
  typename O::Vec acc = o.num(c.back());
  for (size_t i = c.size() - 1; i-- > 0;) acc = o.fma(acc, x, o.num(c[i]));
  return acc;
}

template <class T, class Tag = void>
class HostOps {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;

 public:
  using Vec = T;
  using Mask = bool;

  // `fused`: fma() rounds once (the lanes of an ISA with FMA), else a
  // product and a sum, each rounded.
  explicit HostOps(bool fused) : fused_(fused) {}

  const LaneMath& c() const { return std::is_same_v<T, float> ? kF32 : kF64; }
  bool fusedMultiplyAdd() const { return fused_; }

  T num(double v) const { return static_cast<T>(v); }
  T bits(uint64_t b) const { return std::bit_cast<T>(static_cast<Bits>(b)); }
  T zero() const { return T(0); }

  T add(T a, T b) const { return a + b; }
  T sub(T a, T b) const { return a - b; }
  T mul(T a, T b) const { return a * b; }
  T div(T a, T b) const { return a / b; }
  T bitAnd(T a, T b) const { return fromBits(toBits(a) & toBits(b)); }
  T bitOr(T a, T b) const { return fromBits(toBits(a) | toBits(b)); }
  T bitXor(T a, T b) const { return fromBits(toBits(a) ^ toBits(b)); }
  T intAdd(T a, T b) const { return fromBits(toBits(a) + toBits(b)); }
  // As the x86 instructions: the second operand when either is NaN.
  T minRaw(T a, T b) const { return a < b ? a : b; }
  T maxRaw(T a, T b) const { return a > b ? a : b; }
  T fma(T a, T b, T c) const {
    if (fused_) return std::fma(a, b, c);
    const T p = a * b;
    return p + c;
  }
  T abs(T a) const { return fromBits(toBits(a) & ~kSign); }
  T neg(T a) const { return fromBits(toBits(a) ^ kSign); }
  // Ties to even: the default rounding mode, which accy never changes.
  T round(T a) const { return std::nearbyint(a); }
  T shl(T a, int n) const { return fromBits(toBits(a) << n); }
  T shr(T a, int n) const { return fromBits(toBits(a) >> n); }

  bool cmp(Cmp p, T a, T b) const {
    switch (p) {
      case Cmp::kLt:
        return a < b;
      case Cmp::kLe:
        return a <= b;
      case Cmp::kGt:
        return a > b;
      case Cmp::kGe:
        return a >= b;
      case Cmp::kEq:
        return a == b;
      case Cmp::kNe:
        return a != b;
    }
    return false;
  }
  bool both(bool a, bool b) const { return a && b; }
  bool either(bool a, bool b) const { return a || b; }
  T select(bool m, T t, T f) const { return m ? t : f; }

  T horner(T x, std::span<const double> c) const { return hostHorner(*this, x, c); }

  template <class F>
  void whenAny(bool m, std::span<T>, F&& body) const {
    if (m) body();
  }

 private:
  static constexpr Bits kSign = Bits{1} << (sizeof(T) * 8 - 1);
  static Bits toBits(T v) { return std::bit_cast<Bits>(v); }
  static T fromBits(Bits b) { return std::bit_cast<T>(b); }

  bool fused_;
};

}  // namespace accy::math

#endif  // ACCY_COMPILER_CODEGEN_MATH_HOST_OPS_H_
