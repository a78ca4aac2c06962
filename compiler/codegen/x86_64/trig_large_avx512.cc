// Compiled with AVX-512 (F, VL, DQ, BW: the kernels' own set) and
// -ffp-contract=off (BUILD.bazel): see trig_large.h.
#include <immintrin.h>

#include "compiler/codegen/x86_64/trig_large.h"

namespace accy::x64 {
namespace {

typedef float F16 __attribute__((vector_size(64)));
typedef double D8 __attribute__((vector_size(64)));

struct Avx512 {
  static constexpr bool kFused = true;
  static F16 fma(F16 a, F16 b, F16 c) { return _mm512_fmadd_ps(a, b, c); }
  static D8 fma(D8 a, D8 b, D8 c) { return _mm512_fmadd_pd(a, b, c); }
  // Nearest, ties to even (scale 2^0, the default rounding mode, which accy
  // never changes), as the kernels' vrndscaleps.
  static F16 round(F16 a) { return _mm512_roundscale_ps(a, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC); }
  static D8 round(D8 a) { return _mm512_roundscale_pd(a, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC); }
};

}  // namespace

void sinCosLargeAvx512(const float* a, float* r, int64_t lanes, bool cosine) {
  const int64_t done = sinCosLargeVectors<float, F16, Avx512>(a, r, lanes, cosine);
  if (done < lanes) sinCosLargeFma(a + done, r + done, lanes - done, cosine);
}
void sinCosLargeAvx512(const double* a, double* r, int64_t lanes, bool cosine) {
  const int64_t done = sinCosLargeVectors<double, D8, Avx512>(a, r, lanes, cosine);
  if (done < lanes) sinCosLargeFma(a + done, r + done, lanes - done, cosine);
}

}  // namespace accy::x64
