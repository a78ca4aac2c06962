#include "compiler/codegen/x86_64/simd.h"

#include <cstring>
#include <vector>

#include "base/check.h"

namespace accy::x64 {

namespace x86 = asmjit::x86;
using asmjit::InstId;
using x86::Vec;

Isa detectIsa() {
  const asmjit::CpuFeatures::X86& f = asmjit::CpuInfo::host().features().x86();
  if (f.hasAVX512_F() && f.hasAVX512_VL() && f.hasAVX512_DQ() && f.hasAVX512_BW()) {
    return Isa::kAvx512;
  }
  if (f.hasAVX2() && f.hasFMA()) return Isa::kAvx2;
  return Isa::kSse41;
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kSse41:
      return "sse4.1";
    case Isa::kAvx2:
      return "avx2+fma";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

int vectorBytes(Isa isa) {
  switch (isa) {
    case Isa::kSse41:
      return 16;
    case Isa::kAvx2:
      return 32;
    case Isa::kAvx512:
      return 64;
  }
  return 16;
}

Simd::Simd(x86::Compiler& cc, Isa isa, Lane lane, int width_bytes, bool scalar)
    : cc_(cc), isa_(isa), lane_(lane), width_(scalar ? 16 : width_bytes), scalar_(scalar) {
  ACCY_CHECK(width_ == 16 || width_ == 32 || width_ == 64, "bad width %d", width_);
  ACCY_CHECK(width_ <= vectorBytes(isa), "width %d beyond the ISA", width_);
}

Vec Simd::newVec(const char* name) {
  switch (width_) {
    case 64:
      return cc_.newZmm(name);
    case 32:
      return cc_.newYmm(name);
    default:
      return cc_.newXmm(name);
  }
}

Vec Simd::fit(Vec v) const {
  switch (width_) {
    case 64:
      return v.zmm();
    case 32:
      return v.ymm();
    default:
      return v.xmm();
  }
}

namespace {

struct Ids {
  InstId sse_ps, sse_pd, vex_ps, vex_pd;
};

}  // namespace

// Emits d = a OP b: the three-operand VEX/EVEX form `vex`, or the legacy
// SSE two-operand form `sse` (minding operand order when d aliases b).
void Simd::binary(InstId sse, InstId vex, Vec d, Vec a, Vec b, bool commutative) {
  d = fit(d), a = fit(a), b = fit(b);
  if (this->vex()) {
    cc_.emit(vex, d, a, b);
    return;
  }
  if (d == b && d != a) {
    if (commutative) {
      cc_.emit(sse, d, a);
      return;
    }
    Vec t = newVec("t");
    cc_.emit(x86::Inst::kIdMovaps, t, a);
    cc_.emit(sse, t, b);
    cc_.emit(x86::Inst::kIdMovaps, d, t);
    return;
  }
  if (d != a) cc_.emit(x86::Inst::kIdMovaps, d, a);
  cc_.emit(sse, d, b);
}

// Floating ops: the instruction depends on the lane type.
#define ACCY_SIMD_BINARY(method, sps, spd, vps, vpd, commutative)                              \
  void Simd::method(Vec d, Vec a, Vec b) {                                                     \
    binary(f32() ? x86::Inst::sps : x86::Inst::spd, f32() ? x86::Inst::vps : x86::Inst::vpd, d, a, b, \
           commutative);                                                                       \
  }

ACCY_SIMD_BINARY(add, kIdAddps, kIdAddpd, kIdVaddps, kIdVaddpd, true)
ACCY_SIMD_BINARY(sub, kIdSubps, kIdSubpd, kIdVsubps, kIdVsubpd, false)
ACCY_SIMD_BINARY(mul, kIdMulps, kIdMulpd, kIdVmulps, kIdVmulpd, true)
ACCY_SIMD_BINARY(div, kIdDivps, kIdDivpd, kIdVdivps, kIdVdivpd, false)
ACCY_SIMD_BINARY(minRaw, kIdMinps, kIdMinpd, kIdVminps, kIdVminpd, false)
ACCY_SIMD_BINARY(maxRaw, kIdMaxps, kIdMaxpd, kIdVmaxps, kIdVmaxpd, false)
#undef ACCY_SIMD_BINARY

// Integer and bitwise ops: AVX-512 uses the EVEX integer forms (any register).
#define ACCY_SIMD_INT_BINARY(method, sse32, sse64, vex32, vex64, evex32, evex64, commutative)   \
  void Simd::method(Vec d, Vec a, Vec b) {                                                      \
    const InstId vex_id = isa_ == Isa::kAvx512 ? (f32() ? x86::Inst::evex32 : x86::Inst::evex64) \
                                               : (f32() ? x86::Inst::vex32 : x86::Inst::vex64);  \
    binary(f32() ? x86::Inst::sse32 : x86::Inst::sse64, vex_id, d, a, b, commutative);          \
  }

ACCY_SIMD_INT_BINARY(bitAnd, kIdAndps, kIdAndpd, kIdVandps, kIdVandpd, kIdVpandd, kIdVpandq, true)
ACCY_SIMD_INT_BINARY(bitOr, kIdOrps, kIdOrpd, kIdVorps, kIdVorpd, kIdVpord, kIdVporq, true)
ACCY_SIMD_INT_BINARY(bitXor, kIdXorps, kIdXorpd, kIdVxorps, kIdVxorpd, kIdVpxord, kIdVpxorq, true)
ACCY_SIMD_INT_BINARY(bitAndNot, kIdAndnps, kIdAndnpd, kIdVandnps, kIdVandnpd, kIdVpandnd,
                     kIdVpandnq, false)
ACCY_SIMD_INT_BINARY(intAdd, kIdPaddd, kIdPaddq, kIdVpaddd, kIdVpaddq, kIdVpaddd, kIdVpaddq, true)
ACCY_SIMD_INT_BINARY(intSub, kIdPsubd, kIdPsubq, kIdVpsubd, kIdVpsubq, kIdVpsubd, kIdVpsubq, false)
ACCY_SIMD_INT_BINARY(intAnd, kIdPand, kIdPand, kIdVpand, kIdVpand, kIdVpandd, kIdVpandq, true)
ACCY_SIMD_INT_BINARY(intOr, kIdPor, kIdPor, kIdVpor, kIdVpor, kIdVpord, kIdVporq, true)
ACCY_SIMD_INT_BINARY(intXor, kIdPxor, kIdPxor, kIdVpxor, kIdVpxor, kIdVpxord, kIdVpxorq, true)
#undef ACCY_SIMD_INT_BINARY

void Simd::mov(Vec d, Vec a) {
  d = fit(d), a = fit(a);
  if (d == a) return;
  cc_.emit(vex() ? x86::Inst::kIdVmovaps : x86::Inst::kIdMovaps, d, a);
}

void Simd::fma(Vec d, Vec a, Vec b, Vec c) {
  if (!vex()) {
    Vec t = newVec("fma");
    mul(t, a, b);
    add(d, t, c);
    return;
  }
  d = fit(d), a = fit(a), b = fit(b), c = fit(c);
  const InstId f231 = f32() ? x86::Inst::kIdVfmadd231ps : x86::Inst::kIdVfmadd231pd;
  const InstId f213 = f32() ? x86::Inst::kIdVfmadd213ps : x86::Inst::kIdVfmadd213pd;
  if (d == c && d != a && d != b) {
    cc_.emit(f231, d, a, b);  // d = a*b + d
  } else if (d == a && d != c) {
    cc_.emit(f213, d, b, c);  // d = b*d + c
  } else if (d == b && d != c) {
    cc_.emit(f213, d, a, c);  // d = a*d + c
  } else if (d != a && d != b) {
    mov(d, c);
    cc_.emit(f231, d, a, b);
  } else {
    Vec t = newVec("fma");
    mov(t, c);
    cc_.emit(f231, t, a, b);
    mov(d, t);
  }
}

void Simd::ternaryLogic(Vec d, Vec b, Vec c, uint8_t imm) {
  ACCY_CHECK(isa_ == Isa::kAvx512, "ternary logic needs AVX-512");
  cc_.emit(f32() ? x86::Inst::kIdVpternlogd : x86::Inst::kIdVpternlogq, fit(d), fit(b), fit(c), imm);
}

void Simd::min(Vec d, Vec a, Vec b) {
  // minps returns b when either is NaN: fix the lanes where a is NaN.
  Vec r = newVec("min");
  minRaw(r, a, b);
  Mask nan = cmp(Cmp::kUnordered, a, a);
  select(d, nan, a, r);
}

void Simd::max(Vec d, Vec a, Vec b) {
  Vec r = newVec("max");
  maxRaw(r, a, b);
  Mask nan = cmp(Cmp::kUnordered, a, a);
  select(d, nan, a, r);
}

void Simd::sqrt(Vec d, Vec a) {
  d = fit(d), a = fit(a);
  if (vex()) {
    cc_.emit(f32() ? x86::Inst::kIdVsqrtps : x86::Inst::kIdVsqrtpd, d, a);
  } else {
    cc_.emit(f32() ? x86::Inst::kIdSqrtps : x86::Inst::kIdSqrtpd, d, a);
  }
}

void Simd::abs(Vec d, Vec a) {
  bitAnd(d, a, constantBitsValue(f32() ? 0x7fffffffu : 0x7fffffffffffffffull));
}

void Simd::neg(Vec d, Vec a) {
  bitXor(d, a, constantBitsValue(f32() ? 0x80000000u : 0x8000000000000000ull));
}

namespace {

void roundWith(x86::Compiler& cc, Isa isa, bool f32, Vec d, Vec a, int mode) {
  if (isa == Isa::kAvx512) {
    cc.emit(f32 ? x86::Inst::kIdVrndscaleps : x86::Inst::kIdVrndscalepd, d, a, 0x08 | mode);
  } else if (isa == Isa::kAvx2) {
    cc.emit(f32 ? x86::Inst::kIdVroundps : x86::Inst::kIdVroundpd, d, a, 0x08 | mode);
  } else {
    cc.emit(f32 ? x86::Inst::kIdRoundps : x86::Inst::kIdRoundpd, d, a, 0x08 | mode);
  }
}

}  // namespace

void Simd::round(Vec d, Vec a) { roundWith(cc_, isa_, f32(), fit(d), fit(a), 0); }
void Simd::trunc(Vec d, Vec a) { roundWith(cc_, isa_, f32(), fit(d), fit(a), 3); }

void Simd::hoisted(const std::string& key, Vec d, const std::function<void(Vec)>& emit) {
  if (hoist_ == nullptr || hoist_->point == nullptr) {
    emit(fit(d));
    return;
  }
  mov(d, hoistedValue(key, emit));
}

Vec Simd::hoistedValue(const std::string& key, const std::function<void(Vec)>& emit) {
  if (hoist_ == nullptr || hoist_->point == nullptr) {
    Vec r = newVec("value");
    emit(fit(r));
    return fit(r);
  }
  const std::string full = key + "/" + std::to_string(width_) + "/" + std::to_string(laneBytes());
  auto it = hoist_->cache.find(full);
  if (it == hoist_->cache.end()) {
    Vec r = newVec("hoisted");
    asmjit::BaseNode* here = cc_.cursor();
    asmjit::BaseNode* point = hoist_->point;
    cc_.setCursor(point);
    emit(fit(r));
    hoist_->point = cc_.cursor();
    // Emitting right at the hoist point: go on after what was hoisted, not
    // before it (the code that reads it would come first).
    cc_.setCursor(here == point ? hoist_->point : here);
    it = hoist_->cache.emplace(full, r).first;
  }
  return fit(it->second);
}

namespace {

// The bits of v in one lane of `lane_bytes`.
uint64_t laneBits(double v, bool f32) {
  uint64_t bits;
  if (f32) {
    const float f = static_cast<float>(v);
    uint32_t b32;
    std::memcpy(&b32, &f, 4);
    bits = b32;
  } else {
    std::memcpy(&bits, &v, 8);
  }
  return bits;
}

}  // namespace

std::function<void(Vec)> Simd::poolLoad(uint64_t bits) {
  return [this, bits](Vec r) {
    uint8_t data[64];
    const int size = laneBytes();
    for (int i = 0; i < width_; i += size) std::memcpy(data + i, &bits, size);
    x86::Mem m = cc_.newConst(asmjit::ConstPoolScope::kLocal, data, width_);
    cc_.emit(vex() ? x86::Inst::kIdVmovups : x86::Inst::kIdMovups, r, m);
  };
}

Vec Simd::constantBitsValue(uint64_t bits) { return hoistedValue("const:" + std::to_string(bits), poolLoad(bits)); }

Vec Simd::constantValue(double v) { return constantBitsValue(laneBits(v, f32())); }

void Simd::constantBits(Vec d, uint64_t bits) { hoisted("const:" + std::to_string(bits), d, poolLoad(bits)); }

void Simd::constant(Vec d, double v) { constantBits(d, laneBits(v, f32())); }

void Simd::zero(Vec d) {
  d = fit(d);
  if (isa_ == Isa::kAvx512) {
    cc_.emit(x86::Inst::kIdVpxord, d, d, d);
  } else if (vex()) {
    cc_.emit(x86::Inst::kIdVxorps, d, d, d);
  } else {
    cc_.emit(x86::Inst::kIdXorps, d, d);
  }
}

void Simd::intShl(Vec d, Vec a, int bits) {
  d = fit(d), a = fit(a);
  if (vex()) {
    cc_.emit(f32() ? x86::Inst::kIdVpslld : x86::Inst::kIdVpsllq, d, a, bits);
    return;
  }
  mov(d, a);
  cc_.emit(f32() ? x86::Inst::kIdPslld : x86::Inst::kIdPsllq, d, bits);
}

void Simd::intShr(Vec d, Vec a, int bits) {
  d = fit(d), a = fit(a);
  if (vex()) {
    cc_.emit(f32() ? x86::Inst::kIdVpsrld : x86::Inst::kIdVpsrlq, d, a, bits);
    return;
  }
  mov(d, a);
  cc_.emit(f32() ? x86::Inst::kIdPsrld : x86::Inst::kIdPsrlq, d, bits);
}

void Simd::intRotl(Vec d, Vec a, int bits) {
  ACCY_CHECK(f32() && bits > 0 && bits < 32, "rotates of 32-bit lanes by 1 to 31 only");
  d = fit(d), a = fit(a);
  if (isa_ == Isa::kAvx512) {
    cc_.emit(x86::Inst::kIdVprold, d, a, bits);
    return;
  }
  Vec hi = newVec("rotl");
  intShr(hi, a, 32 - bits);
  intShl(d, a, bits);
  intOr(d, d, hi);
}

void Simd::intMul(Vec d, Vec a, Vec b) {
  ACCY_CHECK(f32(), "32-bit integer lanes only");
  binary(x86::Inst::kIdPmulld, x86::Inst::kIdVpmulld, d, a, b, true);
}

void Simd::intSar(Vec d, Vec a, int bits) {
  ACCY_CHECK(f32(), "arithmetic shifts of 32-bit lanes only");
  d = fit(d), a = fit(a);
  if (vex()) {
    cc_.emit(x86::Inst::kIdVpsrad, d, a, bits);
    return;
  }
  mov(d, a);
  cc_.emit(x86::Inst::kIdPsrad, d, bits);
}

void Simd::intMinMax(bool max, bool is_unsigned, Vec d, Vec a, Vec b) {
  ACCY_CHECK(f32(), "32-bit integer lanes only");
  if (max) {
    binary(is_unsigned ? x86::Inst::kIdPmaxud : x86::Inst::kIdPmaxsd,
           is_unsigned ? x86::Inst::kIdVpmaxud : x86::Inst::kIdVpmaxsd, d, a, b, true);
  } else {
    binary(is_unsigned ? x86::Inst::kIdPminud : x86::Inst::kIdPminsd,
           is_unsigned ? x86::Inst::kIdVpminud : x86::Inst::kIdVpminsd, d, a, b, true);
  }
}

// SSE and AVX2 compare 32-bit lanes for equality and signed greater-than
// only: < swaps the operands, <=, >= and != negate the opposite test, and
// unsigned lanes compare as signed with their top bits flipped.
Mask Simd::intCmp(Cmp pred, bool is_unsigned, Vec a, Vec b) {
  ACCY_CHECK(f32(), "32-bit integer lanes only");
  ACCY_CHECK(pred != Cmp::kUnordered, "integers are always ordered");
  a = fit(a), b = fit(b);
  if (isa_ == Isa::kAvx512) {  // vpcmp[u]d's predicates: 0 ==, 1 <, 2 <=, 4 !=, 5 >=, 6 >
    int imm = 0;
    switch (pred) {
      case Cmp::kEq:
        imm = 0;
        break;
      case Cmp::kLt:
        imm = 1;
        break;
      case Cmp::kLe:
        imm = 2;
        break;
      case Cmp::kNe:
        imm = 4;
        break;
      case Cmp::kGe:
        imm = 5;
        break;
      case Cmp::kGt:
        imm = 6;
        break;
      case Cmp::kUnordered:
        break;
    }
    Mask m = newMask();
    cc_.emit(is_unsigned ? x86::Inst::kIdVpcmpud : x86::Inst::kIdVpcmpd, m.k, a, b, imm);
    return m;
  }
  if (is_unsigned && pred != Cmp::kEq && pred != Cmp::kNe) {
    const Vec top = constantBitsValue(0x80000000u);
    Vec fa = newVec("flip"), fb = newVec("flip");
    intXor(fa, a, top);
    intXor(fb, b, top);
    a = fit(fa), b = fit(fb);
  }
  Mask m = newMask();
  const Vec r = fit(m.v);
  bool negate = false;
  switch (pred) {
    case Cmp::kEq:
    case Cmp::kNe:
      binary(x86::Inst::kIdPcmpeqd, x86::Inst::kIdVpcmpeqd, r, a, b, true);
      negate = pred == Cmp::kNe;
      break;
    case Cmp::kGt:
    case Cmp::kLe:
      binary(x86::Inst::kIdPcmpgtd, x86::Inst::kIdVpcmpgtd, r, a, b, false);
      negate = pred == Cmp::kLe;
      break;
    case Cmp::kLt:
    case Cmp::kGe:
      binary(x86::Inst::kIdPcmpgtd, x86::Inst::kIdVpcmpgtd, r, b, a, false);
      negate = pred == Cmp::kGe;
      break;
    case Cmp::kUnordered:
      break;
  }
  if (negate) intXor(r, r, constantBitsValue(0xffffffffu));
  return m;
}

void Simd::intToFloat(Vec d, Vec a) {
  ACCY_CHECK(f32(), "i32 lanes to f32 only");
  cc_.emit(vex() ? x86::Inst::kIdVcvtdq2ps : x86::Inst::kIdCvtdq2ps, fit(d), fit(a));
}

void Simd::broadcastInt(Vec d, const x86::Gp& g) {
  ACCY_CHECK(f32(), "32-bit integer lanes only");
  if (isa_ == Isa::kAvx512) {
    cc_.vpbroadcastd(fit(d), g.r32());
    return;
  }
  if (vex()) {
    cc_.vmovd(d.xmm(), g.r32());
    if (width_ > 16) {
      cc_.vpbroadcastd(fit(d), d.xmm());
    } else {
      cc_.vpshufd(d.xmm(), d.xmm(), 0);
    }
    return;
  }
  cc_.movd(d.xmm(), g.r32());
  cc_.pshufd(d.xmm(), d.xmm(), 0);
}

void Simd::gather(Vec d, const x86::Gp& base, Vec offsets) {
  ACCY_CHECK(!scalar_ && isa_ != Isa::kSse41, "gathers need AVX2 or AVX-512");
  d = fit(d), offsets = fit(offsets);
  // The destination is read as well as written, so the register allocator
  // keeps it apart from the offsets (an instruction whose destination is
  // its index register is undefined).
  zero(d);
  // f64 lanes take 32-bit offsets too: the offsets' first half (lanes() of
  // them) indexes the lanes.
  const bool wide = !f32();
  const Vec index = !wide ? offsets : width_ == 64 ? Vec(offsets.ymm()) : Vec(offsets.xmm());
  x86::Mem m = x86::ptr(base, index, wide ? 3 : 2);
  m.setSize(wide ? 8 : 4);
  const asmjit::InstId inst = wide ? x86::Inst::kIdVgatherdpd : x86::Inst::kIdVgatherdps;
  if (isa_ == Isa::kAvx512) {
    x86::KReg k = cc_.newKw("all");
    cc_.kxnorw(k, k, k);
    cc_.k(k).emit(inst, d, m);
    return;
  }
  Vec all = newVec("all");
  cc_.vpcmpeqd(fit(all), fit(all), fit(all));
  cc_.emit(inst, d, m, fit(all));
}

// k * step in 32-bit lane k, for as many lanes as the width holds (f64
// lanes use the first half: gather's offsets).
Vec Simd::laneSteps(uint32_t step) {
  return hoistedValue("steps:" + std::to_string(step), [this, step](Vec r) {
    uint32_t data[16];
    for (int k = 0; k < 16; ++k) data[k] = static_cast<uint32_t>(k) * step;
    x86::Mem m = cc_.newConst(asmjit::ConstPoolScope::kLocal, data, width_);
    cc_.emit(isa_ == Isa::kAvx512 ? x86::Inst::kIdVmovdqu32 : vex() ? x86::Inst::kIdVmovdqu : x86::Inst::kIdMovdqu, r, m);
  });
}

Mask Simd::newMask() {
  Mask m;
  if (isa_ == Isa::kAvx512) {
    m.k = cc_.newKw("k");
  } else {
    m.v = newVec("mask");
  }
  return m;
}

Mask Simd::cmp(Cmp pred, Vec a, Vec b) {
  a = fit(a), b = fit(b);
  Mask m = newMask();
  int imm = 0;
  switch (pred) {
    case Cmp::kLt:
      imm = 0x11;
      break;
    case Cmp::kLe:
      imm = 0x12;
      break;
    case Cmp::kGt:
      imm = 0x1E;
      break;
    case Cmp::kGe:
      imm = 0x1D;
      break;
    case Cmp::kEq:
      imm = 0x00;
      break;
    case Cmp::kNe:
      imm = 0x04;
      break;
    case Cmp::kUnordered:
      imm = 0x03;
      break;
  }
  const InstId vcmp = f32() ? x86::Inst::kIdVcmpps : x86::Inst::kIdVcmppd;
  if (isa_ == Isa::kAvx512) {
    cc_.emit(vcmp, m.k, a, b, imm);
  } else if (vex()) {
    cc_.emit(vcmp, fit(m.v), a, b, imm);
  } else {
    // Legacy predicates 0..7 only: swap operands for > and >=.
    Vec x = a, y = b;
    int legacy = 0;
    switch (pred) {
      case Cmp::kLt: legacy = 1; break;
      case Cmp::kLe: legacy = 2; break;
      case Cmp::kGt: legacy = 1; std::swap(x, y); break;
      case Cmp::kGe: legacy = 2; std::swap(x, y); break;
      case Cmp::kEq: legacy = 0; break;
      case Cmp::kNe: legacy = 4; break;
      case Cmp::kUnordered: legacy = 3; break;
    }
    Vec d = fit(m.v);
    cc_.emit(x86::Inst::kIdMovaps, d, x);
    cc_.emit(f32() ? x86::Inst::kIdCmpps : x86::Inst::kIdCmppd, d, y, legacy);
  }
  return m;
}

Mask Simd::maskAnd(const Mask& a, const Mask& b) {
  Mask m = newMask();
  if (isa_ == Isa::kAvx512) {
    cc_.kandw(m.k, a.k, b.k);
  } else {
    bitAnd(m.v, a.v, b.v);
  }
  return m;
}

void Simd::jumpIfNone(const Mask& m, const asmjit::Label& target) {
  if (isa_ == Isa::kAvx512) {
    // Comparisons clear the mask bits above the vector's lanes.
    cc_.kortestw(m.k, m.k);
  } else {
    const Vec v = fit(m.v);
    cc_.emit(vex() ? x86::Inst::kIdVptest : x86::Inst::kIdPtest, v, v);
  }
  cc_.jz(target);
}

Mask Simd::maskOr(const Mask& a, const Mask& b) {
  Mask m = newMask();
  if (isa_ == Isa::kAvx512) {
    cc_.korw(m.k, a.k, b.k);
  } else {
    bitOr(m.v, a.v, b.v);
  }
  return m;
}

void Simd::select(Vec d, const Mask& m, Vec t, Vec f) {
  d = fit(d), t = fit(t), f = fit(f);
  if (isa_ == Isa::kAvx512) {
    // Under a merge mask the register allocator takes the destination as
    // read too: give it f first (a register copy) so that nothing
    // undefined is kept alive (or spilled) for it.
    Vec acc = d == t && d != f ? newVec("sel") : d;
    mov(acc, f);
    cc_.k(m.k).emit(f32() ? x86::Inst::kIdVblendmps : x86::Inst::kIdVblendmpd, acc, acc, t);
    mov(d, acc);
  } else if (vex()) {
    cc_.emit(f32() ? x86::Inst::kIdVblendvps : x86::Inst::kIdVblendvpd, d, f, t, fit(m.v));
  } else {
    Vec a = newVec("sel_t");
    Vec b = newVec("sel_f");
    bitAnd(a, m.v, t);
    bitAndNot(b, m.v, f);
    bitOr(d, a, b);
  }
}

void Simd::load(Vec d, const x86::Mem& m) {
  x86::Mem mem = m;
  if (scalar_) {
    mem.setSize(laneBytes());
    const InstId id = f32() ? (vex() ? x86::Inst::kIdVmovss : x86::Inst::kIdMovss)
                            : (vex() ? x86::Inst::kIdVmovsd : x86::Inst::kIdMovsd);
    cc_.emit(id, d.xmm(), mem);
    return;
  }
  mem.setSize(width_);
  cc_.emit(vex() ? x86::Inst::kIdVmovups : x86::Inst::kIdMovups, fit(d), mem);
}

void Simd::store(const x86::Mem& m, Vec a) {
  x86::Mem mem = m;
  if (scalar_) {
    mem.setSize(laneBytes());
    const InstId id = f32() ? (vex() ? x86::Inst::kIdVmovss : x86::Inst::kIdMovss)
                            : (vex() ? x86::Inst::kIdVmovsd : x86::Inst::kIdMovsd);
    cc_.emit(id, mem, a.xmm());
    return;
  }
  mem.setSize(width_);
  cc_.emit(vex() ? x86::Inst::kIdVmovups : x86::Inst::kIdMovups, mem, fit(a));
}

void Simd::streamStore(const x86::Mem& m, Vec a) {
  x86::Mem mem = m;
  mem.setSize(width_);
  const InstId id = f32() ? (vex() ? x86::Inst::kIdVmovntps : x86::Inst::kIdMovntps)
                          : (vex() ? x86::Inst::kIdVmovntpd : x86::Inst::kIdMovntpd);
  cc_.emit(id, mem, fit(a));
}

void Simd::broadcastLoad(Vec d, const x86::Mem& m) {
  x86::Mem mem = m;
  mem.setSize(laneBytes());
  if (scalar_) {
    load(d, m);
    return;
  }
  if (vex()) {
    if (f32()) {
      cc_.emit(x86::Inst::kIdVbroadcastss, fit(d), mem);
    } else if (width_ == 16) {
      cc_.emit(x86::Inst::kIdVmovddup, fit(d), mem);
    } else {
      cc_.emit(x86::Inst::kIdVbroadcastsd, fit(d), mem);
    }
    return;
  }
  if (f32()) {
    cc_.emit(x86::Inst::kIdMovss, d.xmm(), mem);
    cc_.emit(x86::Inst::kIdShufps, d.xmm(), d.xmm(), 0);
  } else {
    cc_.emit(x86::Inst::kIdMovddup, d.xmm(), mem);
  }
}

void Simd::combine(Horizontal op, Vec d, Vec a, Vec b) {
  switch (op) {
    case Horizontal::kSum:
      add(d, a, b);
      return;
    case Horizontal::kProd:
      mul(d, a, b);
      return;
    case Horizontal::kMin:
      min(d, a, b);
      return;
    case Horizontal::kMax:
      max(d, a, b);
      return;
  }
}

void Simd::horizontal(Horizontal op, Vec d, Vec a) {
  Vec cur = fit(a);
  if (width_ == 64) {
    Simd half(cc_, isa_, lane_, 32);
    Vec hi = cc_.newYmm("hi");
    cc_.vextractf64x4(hi, cur.zmm(), 1);
    Vec r = cc_.newYmm("h256");
    half.combine(op, r, cur.ymm(), hi);
    half.horizontal(op, d, r);
    return;
  }
  if (width_ == 32) {
    Simd half(cc_, isa_, lane_, 16);
    Vec hi = cc_.newXmm("hi");
    if (isa_ == Isa::kAvx512) {
      cc_.vextractf32x4(hi, cur.ymm(), 1);
    } else {
      cc_.vextractf128(hi, cur.ymm(), 1);
    }
    Vec r = cc_.newXmm("h128");
    half.combine(op, r, cur.xmm(), hi);
    half.horizontal(op, d, r);
    return;
  }
  // 16 bytes: fold lanes pairwise down to lane 0.
  Simd x(cc_, isa_, lane_, 16);
  Vec acc = cur.xmm();
  auto shuffled = [&](int imm, bool pd) {
    Vec t = cc_.newXmm("sh");
    if (vex()) {
      cc_.emit(pd ? x86::Inst::kIdVshufpd : x86::Inst::kIdVshufps, t, acc, acc, imm);
    } else {
      cc_.emit(x86::Inst::kIdMovaps, t, acc);
      cc_.emit(pd ? x86::Inst::kIdShufpd : x86::Inst::kIdShufps, t, t, imm);
    }
    return t;
  };
  if (f32()) {
    Vec r1 = cc_.newXmm("h64");
    x.combine(op, r1, acc, shuffled(0x4E, false));
    acc = r1;
    Vec r2 = cc_.newXmm("h32");
    x.combine(op, r2, acc, shuffled(0xB1, false));
    x.mov(d.xmm(), r2);
  } else {
    Vec r1 = cc_.newXmm("h64");
    x.combine(op, r1, acc, shuffled(0x1, true));
    x.mov(d.xmm(), r1);
  }
}

}  // namespace accy::x64
