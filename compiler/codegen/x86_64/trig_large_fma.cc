// Compiled with -mavx2 -mfma -ffp-contract=off (BUILD.bazel): see trig_large.h.
#include "compiler/codegen/x86_64/trig_large.h"

namespace accy::x64 {
namespace {
struct Fma {};
}  // namespace

void sinCosLargeFma(const float* a, float* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<float, Fma, true>(a, r, lanes, cosine);
}
void sinCosLargeFma(const double* a, double* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<double, Fma, true>(a, r, lanes, cosine);
}

}  // namespace accy::x64
