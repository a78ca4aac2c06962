// Host functions that JIT-compiled kernels call through a table: the table's
// address is every kernel's fourth argument, so machine code holds no
// process-local addresses and can be cached and reloaded.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_RUNTIME_H_
#define ACCY_COMPILER_CODEGEN_X86_64_RUNTIME_H_

#include <cstdint>

namespace accy::x64 {

// Slots of the runtime table.
enum RuntimeSlot : int {
  kRtPowI64 = 0,     // int64_t (*)(int64_t base, int64_t exponent), wrapping
  kRtSinCosLargeF32,  // void (*)(const float* a, float* r, int64_t lanes, int64_t flags)
  kRtSinCosLargeF64,  // void (*)(const double* a, double* r, int64_t lanes, int64_t flags)
  kRtSlotCount,
};

// Flags of the kRtSinCosLarge functions.
inline constexpr int64_t kRtFused = 1;   // the kernel's ISA fuses multiply-add
inline constexpr int64_t kRtCosine = 2;  // cos, else sin
inline constexpr int64_t kRtAvx512 = 4;  // the kernel's ISA is AVX-512 (so the host may use it)

// The table the CPU backend passes (process-local function addresses).
const void* const* runtimeTable();

// For lanes i < `lanes` with a[i] beyond the fast trig range, r[i] =
// sin(a[i]) (cos with kRtCosine) by the exact reduction of
// compiler/codegen/math/elementary.h, rounded as the kernel's own
// instructions would (kRtFused); other lanes of r are left as they are.
// The host evaluates them with the kernel's ISA family (kRtAvx512,
// kRtFused, else SSE4.1): compiler/codegen/x86_64/trig_large.h.
void sinCosLargeF32(const float* a, float* r, int64_t lanes, int64_t flags);
void sinCosLargeF64(const double* a, double* r, int64_t lanes, int64_t flags);

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_RUNTIME_H_
