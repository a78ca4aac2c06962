// Compiled with -msse4.1 -ffp-contract=off (BUILD.bazel): see trig_large.h.
#include <smmintrin.h>

#include "compiler/codegen/x86_64/trig_large.h"

namespace accy::x64 {
namespace {

typedef float F4 __attribute__((vector_size(16)));
typedef double D2 __attribute__((vector_size(16)));

struct Sse41 {
  static constexpr bool kFused = false;
  // Nearest, ties to even, as the kernels' roundps (the default rounding
  // mode, which accy never changes).
  static F4 round(F4 a) { return _mm_round_ps(a, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC); }
  static D2 round(D2 a) { return _mm_round_pd(a, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC); }
};

}  // namespace

void sinCosLargeSse41(const float* a, float* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<float, F4, Sse41>(a, r, lanes, cosine);
}
void sinCosLargeSse41(const double* a, double* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<double, D2, Sse41>(a, r, lanes, cosine);
}

namespace {
// Scalar, with fma() the C library's (no -mfma here).
struct ScalarFused {
  static constexpr bool kFused = true;
};
}  // namespace

void sinCosLargeScalar(const float* a, float* r, int64_t lanes, bool fused, bool cosine) {
  fused ? sinCosLargeEach<float, ScalarFused>(a, r, lanes, cosine) : sinCosLargeEach<float, Sse41>(a, r, lanes, cosine);
}
void sinCosLargeScalar(const double* a, double* r, int64_t lanes, bool fused, bool cosine) {
  fused ? sinCosLargeEach<double, ScalarFused>(a, r, lanes, cosine)
        : sinCosLargeEach<double, Sse41>(a, r, lanes, cosine);
}

}  // namespace accy::x64
