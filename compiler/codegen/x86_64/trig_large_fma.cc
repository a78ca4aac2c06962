// Compiled with -mavx2 -mfma -ffp-contract=off (BUILD.bazel): see trig_large.h.
#include <immintrin.h>

#include "compiler/codegen/x86_64/trig_large.h"

namespace accy::x64 {
namespace {

typedef float F8 __attribute__((vector_size(32)));
typedef double D4 __attribute__((vector_size(32)));

struct Fma {
  static constexpr bool kFused = true;
  static F8 fma(F8 a, F8 b, F8 c) { return _mm256_fmadd_ps(a, b, c); }
  static D4 fma(D4 a, D4 b, D4 c) { return _mm256_fmadd_pd(a, b, c); }
  // Nearest, ties to even, as the kernels' vroundps (the default rounding
  // mode, which accy never changes).
  static F8 round(F8 a) { return _mm256_round_ps(a, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC); }
  static D4 round(D4 a) { return _mm256_round_pd(a, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC); }
};

}  // namespace

void sinCosLargeFma(const float* a, float* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<float, F8, Fma>(a, r, lanes, cosine);
}
void sinCosLargeFma(const double* a, double* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<double, D4, Fma>(a, r, lanes, cosine);
}

}  // namespace accy::x64
