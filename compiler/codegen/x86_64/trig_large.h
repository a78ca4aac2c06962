// The host side of sin and cos beyond the fast range, built twice: once for
// SSE4.1 kernels (no fused multiply-add; round() is one roundss) and once
// for AVX2+FMA and AVX-512 kernels (fma() is one vfmadd). Kernels reach
// these through the runtime table (runtime.h), which picks by kRtFused.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_TRIG_LARGE_H_
#define ACCY_COMPILER_CODEGEN_X86_64_TRIG_LARGE_H_

#include <cstdint>

#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/math/host_ops.h"

namespace accy::x64 {

// r[i] = sin(a[i]) (cos when `cosine`) for the lanes beyond the fast range,
// by elementary.h's exact reduction over HostOps<T, Tag>; the other lanes
// of r are left as they are. `Tag` is the calling file's own (host_ops.h).
// Flattened: every HostOps call is inlined, so `kFused` folds away the
// branch of the other ISA and twoProd's calls.
template <class T, class Tag, bool kFused>
[[gnu::flatten]] void sinCosLargeLanes(const T* a, T* r, int64_t lanes, bool cosine) {
  const math::HostOps<T, Tag> o(kFused);
  for (int64_t i = 0; i < lanes; ++i) r[i] = math::sinCosLarge(o, a[i], r[i], cosine);
}

// Built with -msse4.1 (trig_large_sse41.cc).
void sinCosLargeSse41(const float* a, float* r, int64_t lanes, bool cosine);
void sinCosLargeSse41(const double* a, double* r, int64_t lanes, bool cosine);
// Built with -mavx2 -mfma (trig_large_fma.cc): only for kernels whose ISA
// fuses multiply-add, so only on machines that have it.
void sinCosLargeFma(const float* a, float* r, int64_t lanes, bool cosine);
void sinCosLargeFma(const double* a, double* r, int64_t lanes, bool cosine);

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_TRIG_LARGE_H_
