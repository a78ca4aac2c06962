// Simd: one face over SSE4.1, AVX2+FMA and AVX-512 for floating lanes.
//
// The x86-64 emitter and the inline math library (math.h) write every
// vector sequence once against this class; it picks the encoding (legacy
// SSE two-operand, VEX or EVEX three-operand) and the register width.
//
// A Simd works on one lane type (f32 or f64) at one width: 16, 32 or 64
// bytes. Scalar code is the 16-byte form with only lane 0 meaningful (loads
// and stores then move one element); every op is lane-wise, so the same
// sequences serve scalar tails. Integer ops act on same-width integer lanes
// (i32 lanes for f32, i64 lanes for f64), as the bit tricks in math need.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_SIMD_H_
#define ACCY_COMPILER_CODEGEN_X86_64_SIMD_H_

#include <asmjit/x86.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace accy::x64 {

// Instruction sets the emitter targets, in increasing order. kSse41 is the
// baseline (SSE4.1 gives roundps and blendvps); kAvx2 also requires FMA;
// kAvx512 requires AVX512F, VL, DQ and BW.
enum class Isa : uint8_t { kSse41, kAvx2, kAvx512 };

// The best Isa of the host CPU (asmjit's CpuInfo).
Isa detectIsa();
const char* isaName(Isa isa);
// Widest vector register in bytes: 16, 32, 64.
int vectorBytes(Isa isa);

enum class Lane : uint8_t { kF32, kF64 };

// A loop preheader: code that does not change inside a loop (constants,
// loads of loop-invariant elements) is emitted at `point` instead of in
// the loop body, once per key.
struct Hoist {
  asmjit::BaseNode* point = nullptr;
  std::map<std::string, asmjit::x86::Vec> cache;
};

enum class Cmp : uint8_t { kLt, kLe, kGt, kGe, kEq, kNe, kUnordered };

// A comparison result: an AVX-512 mask register, or an all-ones/all-zeros
// vector on SSE and AVX2.
struct Mask {
  asmjit::x86::KReg k;
  asmjit::x86::Vec v;
};

class Simd {
 public:
  // `width_bytes` is 16, 32 or 64 and at most vectorBytes(isa). `scalar`
  // makes loads and stores move one element (lane 0).
  Simd(asmjit::x86::Compiler& cc, Isa isa, Lane lane, int width_bytes, bool scalar = false);

  Isa isa() const { return isa_; }
  Lane lane() const { return lane_; }
  bool scalar() const { return scalar_; }
  int lanes() const { return scalar_ ? 1 : width_ / (lane_ == Lane::kF32 ? 4 : 8); }
  int laneBytes() const { return lane_ == Lane::kF32 ? 4 : 8; }
  asmjit::x86::Compiler& cc() { return cc_; }

  asmjit::x86::Vec newVec(const char* name = "v");

  // Floating arithmetic; `d` may alias any input.
  void mov(asmjit::x86::Vec d, asmjit::x86::Vec a);
  void add(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void sub(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void mul(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void div(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  // d = a * b + c, fused where the ISA has FMA (AVX2, AVX-512). No copy
  // when d aliases one of the inputs (the 231 or 213 form overwrites it).
  void fma(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b, asmjit::x86::Vec c);
  // Hardware min/max: if either input is NaN the result is `b`.
  void minRaw(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void maxRaw(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  // min/max that return NaN when either input is NaN.
  void min(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void max(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void sqrt(asmjit::x86::Vec d, asmjit::x86::Vec a);
  void abs(asmjit::x86::Vec d, asmjit::x86::Vec a);
  void neg(asmjit::x86::Vec d, asmjit::x86::Vec a);
  // Round to nearest, ties to even.
  void round(asmjit::x86::Vec d, asmjit::x86::Vec a);
  // Round toward zero.
  void trunc(asmjit::x86::Vec d, asmjit::x86::Vec a);

  // Every lane = v (from the constant pool).
  void constant(asmjit::x86::Vec d, double v);
  // Every integer lane = bits.
  void constantBits(asmjit::x86::Vec d, uint64_t bits);
  // The register holding the constant: the hoisted one while a hoist is set
  // (no copy per use), else loaded here. Read it, never write it.
  asmjit::x86::Vec constantValue(double v);
  asmjit::x86::Vec constantBitsValue(uint64_t bits);
  void zero(asmjit::x86::Vec d);

  // Bitwise.
  void bitAnd(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void bitOr(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void bitXor(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  // d = ~a & b
  void bitAndNot(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);

  // AVX-512 only. d = the bitwise function `imm` of (d, b, c) (vpternlog:
  // imm's bit (d << 2 | b << 1 | c) is the result bit).
  void ternaryLogic(asmjit::x86::Vec d, asmjit::x86::Vec b, asmjit::x86::Vec c, uint8_t imm);

  // Integer lanes (i32 for f32, i64 for f64).
  void intAdd(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void intShl(asmjit::x86::Vec d, asmjit::x86::Vec a, int bits);
  void intShr(asmjit::x86::Vec d, asmjit::x86::Vec a, int bits);  // logical

  // 32-bit integer lanes of an f32 Simd, in every encoding (AVX-512:
  // comparisons into mask registers, rotates in one instruction): wrapping
  // arithmetic, bitwise ops in the integer domain, arithmetic shifts,
  // rotates, comparisons and min/max, signed or unsigned, conversion to
  // f32, lanes from a general register. intSub and the bitwise ops also act
  // on the i64 lanes of an f64 Simd.
  void intSub(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void intMul(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);  // the low 32 bits
  void intAnd(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void intOr(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void intXor(asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void intSar(asmjit::x86::Vec d, asmjit::x86::Vec a, int bits);
  void intRotl(asmjit::x86::Vec d, asmjit::x86::Vec a, int bits);  // bits in [1, 32)
  void intMinMax(bool max, bool is_unsigned, asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  Mask intCmp(Cmp pred, bool is_unsigned, asmjit::x86::Vec a, asmjit::x86::Vec b);  // not kUnordered
  void intToFloat(asmjit::x86::Vec d, asmjit::x86::Vec a);  // i32 to f32, rounded to nearest
  // Every lane = the low 32 bits of g.
  void broadcastInt(asmjit::x86::Vec d, const asmjit::x86::Gp& g);
  // Lane k = k * step (mod 2^32), from the constant pool.
  asmjit::x86::Vec laneSteps(uint32_t step);

  Mask newMask();
  // Ordered comparisons (false on NaN) except kNe, which is true on NaN.
  Mask cmp(Cmp pred, asmjit::x86::Vec a, asmjit::x86::Vec b);
  Mask maskAnd(const Mask& a, const Mask& b);
  Mask maskOr(const Mask& a, const Mask& b);
  // Jumps to `target` when no lane of `m` is set.
  void jumpIfNone(const Mask& m, const asmjit::Label& target);
  // d = m ? t : f, lane-wise.
  void select(asmjit::x86::Vec d, const Mask& m, asmjit::x86::Vec t, asmjit::x86::Vec f);

  // Memory: width-wide unaligned (or one element when scalar()).
  void load(asmjit::x86::Vec d, const asmjit::x86::Mem& m);
  void store(const asmjit::x86::Mem& m, asmjit::x86::Vec a);
  // A non-temporal (streaming) full-width store; `m` must be aligned to the
  // width. Not for the scalar form.
  void streamStore(const asmjit::x86::Mem& m, asmjit::x86::Vec a);
  // Every lane = the element at m.
  void broadcastLoad(asmjit::x86::Vec d, const asmjit::x86::Mem& m);
  // Lane k = the element at base + size * offsets[k], offsets in 32-bit
  // lanes: 4-byte lanes (vgatherdps) or f64 lanes by the first half of the
  // offsets (vgatherdpd); AVX2 and AVX-512. `d` is written, `offsets` kept.
  void gather(asmjit::x86::Vec d, const asmjit::x86::Gp& base, asmjit::x86::Vec offsets);

  // Horizontal combine of every lane of `a` into lane 0 of `d` (width 16
  // register). Sum adds pairwise; min/max propagate NaN like min()/max().
  enum class Horizontal : uint8_t { kSum, kProd, kMin, kMax };
  void horizontal(Horizontal op, asmjit::x86::Vec d, asmjit::x86::Vec a);

  // While set, constants are loaded once at the hoist point.
  void setHoist(Hoist* hoist) { hoist_ = hoist; }
  Hoist* hoist() const { return hoist_; }
  // Emits `emit(v)` into a fresh register at the hoist point (once per
  // `key`) and copies it into `d`; emits in place when no hoist is set.
  void hoisted(const std::string& key, asmjit::x86::Vec d,
               const std::function<void(asmjit::x86::Vec)>& emit);
  // The same, returning the hoisted register itself (a fresh one emitted in
  // place when no hoist is set): for values only read, which then cost no
  // copy per use.
  asmjit::x86::Vec hoistedValue(const std::string& key, const std::function<void(asmjit::x86::Vec)>& emit);

  // A Simd of the same ISA and lane at 16 bytes, scalar loads/stores.
  Simd scalarForm() const { return Simd(cc_, isa_, lane_, 16, true); }

 private:
  asmjit::x86::Vec fit(asmjit::x86::Vec v) const;  // view at this width
  // Loads `bits` in every lane from the constant pool into its argument.
  std::function<void(asmjit::x86::Vec)> poolLoad(uint64_t bits);
  bool vex() const { return isa_ != Isa::kSse41; }
  bool f32() const { return lane_ == Lane::kF32; }
  void combine(Horizontal op, asmjit::x86::Vec d, asmjit::x86::Vec a, asmjit::x86::Vec b);
  void binary(asmjit::InstId sse, asmjit::InstId vex, asmjit::x86::Vec d, asmjit::x86::Vec a,
              asmjit::x86::Vec b, bool commutative);

  asmjit::x86::Compiler& cc_;
  Isa isa_;
  Lane lane_;
  int width_;
  bool scalar_;
  Hoist* hoist_ = nullptr;
};

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_SIMD_H_
