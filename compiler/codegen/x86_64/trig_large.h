// The host side of sin and cos beyond the fast range, built three times:
// for SSE4.1 kernels (no fused multiply-add; round() is one roundps), for
// AVX2+FMA kernels (fma() is one vfmadd) and for AVX-512 kernels (the same
// on 64-byte vectors). Kernels reach these through the runtime table
// (runtime.h), which picks by the kernel's flags.
//
// A kernel hands over a whole vector of lanes; they are evaluated here a
// host vector at a time (HostVecOps, below: the operations of HostOps on
// GCC vector types, each rounding as the scalar one does, so the bits are
// those of HostOps lane by lane), and the lanes left over (a kernel's
// scalar form) one by one with HostOps.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_TRIG_LARGE_H_
#define ACCY_COMPILER_CODEGEN_X86_64_TRIG_LARGE_H_

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/math/host_ops.h"

namespace accy::x64 {

// elementary.h's ops over V, a GCC vector of T. `Isa` (the including file's
// own type, so these instantiations stay apart as HostOps's do) gives
// kFused, fma(a, b, c) when kFused, and round(a) to nearest, ties to even.
template <class T, class V, class Isa>
class HostVecOps {
  using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
  typedef Bits IV __attribute__((vector_size(sizeof(V))));
  static constexpr int kLanes = int(sizeof(V) / sizeof(T));

 public:
  using Vec = V;
  using Mask = decltype(V{} < V{});

  const math::LaneMath& c() const { return std::is_same_v<T, float> ? math::kF32 : math::kF64; }
  bool fusedMultiplyAdd() const { return Isa::kFused; }

  V num(double v) const { return V{} + static_cast<T>(v); }
  V bits(uint64_t b) const { return std::bit_cast<V>(IV{} + static_cast<Bits>(b)); }
  V zero() const { return V{}; }

  V add(V a, V b) const { return a + b; }
  V sub(V a, V b) const { return a - b; }
  V mul(V a, V b) const { return a * b; }
  V div(V a, V b) const { return a / b; }
  V bitAnd(V a, V b) const { return std::bit_cast<V>(toBits(a) & toBits(b)); }
  V bitOr(V a, V b) const { return std::bit_cast<V>(toBits(a) | toBits(b)); }
  V bitXor(V a, V b) const { return std::bit_cast<V>(toBits(a) ^ toBits(b)); }
  V intAdd(V a, V b) const { return std::bit_cast<V>(toBits(a) + toBits(b)); }
  V minRaw(V a, V b) const { return a < b ? a : b; }
  V maxRaw(V a, V b) const { return a > b ? a : b; }
  V fma(V a, V b, V c) const {
    if constexpr (Isa::kFused) {
      return Isa::fma(a, b, c);
    } else {
      const V p = a * b;
      return p + c;
    }
  }
  V abs(V a) const { return std::bit_cast<V>(toBits(a) & ~kSign); }
  V neg(V a) const { return std::bit_cast<V>(toBits(a) ^ kSign); }
  V round(V a) const { return Isa::round(a); }
  V shl(V a, int n) const { return std::bit_cast<V>(toBits(a) << n); }
  V shr(V a, int n) const { return std::bit_cast<V>(toBits(a) >> n); }

  Mask cmp(math::Cmp p, V a, V b) const {
    switch (p) {
      case math::Cmp::kLt:
        return a < b;
      case math::Cmp::kLe:
        return a <= b;
      case math::Cmp::kGt:
        return a > b;
      case math::Cmp::kGe:
        return a >= b;
      case math::Cmp::kEq:
        return a == b;
      case math::Cmp::kNe:
        return a != b;
    }
    return Mask{};
  }
  Mask both(Mask a, Mask b) const { return a & b; }
  Mask either(Mask a, Mask b) const { return a | b; }
  V select(Mask m, V t, V f) const { return m ? t : f; }

  V horner(V x, std::span<const double> c) const { return math::hostHorner(*this, x, c); }

  template <class F>
  void whenAny(Mask m, std::span<V>, F&& body) const {
    for (int i = 0; i < kLanes; ++i) {
      if (m[i] != 0) return body();
    }
  }

 private:
  static constexpr Bits kSign = Bits{1} << (sizeof(T) * 8 - 1);
  static IV toBits(V v) { return std::bit_cast<IV>(v); }
};

// r[i] = sin(a[i]) (cos when `cosine`) for the lanes beyond the fast range,
// by elementary.h's exact reduction, V's lanes at a time, for as many
// whole vectors as `lanes` holds; returns how many lanes that was. The
// other lanes of r are left as they are. Flattened: every op is inlined,
// so the ISA's instructions replace the calls.
template <class T, class V, class Isa>
[[gnu::flatten]] int64_t sinCosLargeVectors(const T* a, T* r, int64_t lanes, bool cosine) {
  constexpr int64_t kLanes = int64_t(sizeof(V) / sizeof(T));
  const HostVecOps<T, V, Isa> vo;
  int64_t i = 0;
  for (; i + kLanes <= lanes; i += kLanes) {
    V x, fast;
    std::memcpy(&x, a + i, sizeof(V));
    std::memcpy(&fast, r + i, sizeof(V));
    const V y = math::sinCosLarge(vo, x, fast, cosine);
    std::memcpy(r + i, &y, sizeof(V));
  }
  return i;
}

// The same lane by lane with HostOps<T, Isa>.
template <class T, class Isa>
[[gnu::flatten]] void sinCosLargeEach(const T* a, T* r, int64_t lanes, bool cosine) {
  const math::HostOps<T, Isa> o(Isa::kFused);
  for (int64_t i = 0; i < lanes; ++i) r[i] = math::sinCosLarge(o, a[i], r[i], cosine);
}

// Vectors of V, then the lanes left over (a kernel's scalar form) one by one.
template <class T, class V, class Isa>
void sinCosLargeLanes(const T* a, T* r, int64_t lanes, bool cosine) {
  const int64_t done = sinCosLargeVectors<T, V, Isa>(a, r, lanes, cosine);
  sinCosLargeEach<T, Isa>(a + done, r + done, lanes - done, cosine);
}

// Built with -msse4.1 (trig_large_sse41.cc).
void sinCosLargeSse41(const float* a, float* r, int64_t lanes, bool cosine);
void sinCosLargeSse41(const double* a, double* r, int64_t lanes, bool cosine);
// Built with -mavx2 -mfma (trig_large_fma.cc): only for kernels whose ISA
// fuses multiply-add, so only on machines that have it.
void sinCosLargeFma(const float* a, float* r, int64_t lanes, bool cosine);
void sinCosLargeFma(const double* a, double* r, int64_t lanes, bool cosine);
// Built for AVX-512 (trig_large_avx512.cc): only for AVX-512 kernels. What
// is left of `lanes` after whole 64-byte vectors goes to sinCosLargeFma.
void sinCosLargeAvx512(const float* a, float* r, int64_t lanes, bool cosine);
void sinCosLargeAvx512(const double* a, double* r, int64_t lanes, bool cosine);

// The same lane by lane with HostOps alone, for the tests that hold the
// vector evaluation to it bit for bit.
void sinCosLargeScalar(const float* a, float* r, int64_t lanes, bool fused, bool cosine);
void sinCosLargeScalar(const double* a, double* r, int64_t lanes, bool fused, bool cosine);

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_TRIG_LARGE_H_
