#include "compiler/codegen/x86_64/runtime.h"

#include "compiler/codegen/x86_64/trig_large.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::x64 {
namespace {

// The integer pow of docs/SEMANTICS.md, the evaluator's own (wrapping).
int64_t powI64(int64_t base, int64_t exponent) { return tensor::intPow(base, exponent); }

template <class T>
void sinCosLarge(const T* a, T* r, int64_t lanes, int64_t flags) {
  const bool cosine = (flags & kRtCosine) != 0;
  if ((flags & kRtAvx512) != 0) {
    sinCosLargeAvx512(a, r, lanes, cosine);
  } else if ((flags & kRtFused) != 0) {
    sinCosLargeFma(a, r, lanes, cosine);
  } else {
    sinCosLargeSse41(a, r, lanes, cosine);
  }
}

const void* const kRuntimeTable[kRtSlotCount] = {
    reinterpret_cast<const void*>(&powI64),
    reinterpret_cast<const void*>(&sinCosLargeF32),
    reinterpret_cast<const void*>(&sinCosLargeF64),
};

}  // namespace

void sinCosLargeF32(const float* a, float* r, int64_t lanes, int64_t flags) {
  sinCosLarge(a, r, lanes, flags);
}
void sinCosLargeF64(const double* a, double* r, int64_t lanes, int64_t flags) {
  sinCosLarge(a, r, lanes, flags);
}

const void* const* runtimeTable() { return kRuntimeTable; }

}  // namespace accy::x64
