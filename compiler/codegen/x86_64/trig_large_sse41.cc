// Compiled with -msse4.1 -ffp-contract=off (BUILD.bazel): see trig_large.h.
#include "compiler/codegen/x86_64/trig_large.h"

namespace accy::x64 {
namespace {
struct Sse41 {};
}  // namespace

void sinCosLargeSse41(const float* a, float* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<float, Sse41, false>(a, r, lanes, cosine);
}
void sinCosLargeSse41(const double* a, double* r, int64_t lanes, bool cosine) {
  sinCosLargeLanes<double, Sse41, false>(a, r, lanes, cosine);
}

}  // namespace accy::x64
