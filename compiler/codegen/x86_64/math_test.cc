// Accuracy and special values of the inline math (math.h), JIT-compiled for
// every ISA the host has, every width and the scalar form, f32 and f64.
// Over 900 lines: one sweep and one table of special values per function,
// all sharing the JIT harness and the ulp measure at the top.
//
// Errors are in ulps of the output type at the exact value: |got - ref| /
// ulp(ref), with ref from libm in double (f32) or long double (f64). The
// measured maxima are printed; docs/MATH_ACCURACY.md records them.
//
// ACCY_MATH_EXHAUSTIVE=1 also runs every f32 input of the unary functions
// on every core (ACCY_MATH_THREADS=n to limit them; pass both with
// --test_env). docs/MATH_ACCURACY.md gives their times.
#include "compiler/codegen/x86_64/math.h"
#include "compiler/codegen/x86_64/runtime.h"
#include "compiler/codegen/x86_64/trig_large.h"

#include <asmjit/x86.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace accy::x64 {
namespace {

namespace x86 = asmjit::x86;

enum class Fn : uint8_t { kSin, kCos, kExp, kLog, kTanh, kSigmoid, kPow, kErf, kLog1p, kExpm1, kFloor, kCeil, kRound };

const char* fnName(Fn fn) {
  switch (fn) {
    case Fn::kSin:
      return "sin";
    case Fn::kCos:
      return "cos";
    case Fn::kExp:
      return "exp";
    case Fn::kLog:
      return "log";
    case Fn::kTanh:
      return "tanh";
    case Fn::kSigmoid:
      return "sigmoid";
    case Fn::kPow:
      return "pow";
    case Fn::kErf:
      return "erf";
    case Fn::kLog1p:
      return "log1p";
    case Fn::kExpm1:
      return "expm1";
    case Fn::kFloor:
      return "floor";
    case Fn::kCeil:
      return "ceil";
    case Fn::kRound:
      return "round";
  }
  return "?";
}

// The op of the functions reached through the one elementary dispatch
// (emitElementary); the others have emit functions of their own.
tensor::OpCode opOf(Fn fn) {
  switch (fn) {
    case Fn::kErf:
      return tensor::OpCode::kErf;
    case Fn::kLog1p:
      return tensor::OpCode::kLog1p;
    case Fn::kExpm1:
      return tensor::OpCode::kExpm1;
    case Fn::kFloor:
      return tensor::OpCode::kFloor;
    case Fn::kCeil:
      return tensor::OpCode::kCeil;
    case Fn::kRound:
      return tensor::OpCode::kRound;
    case Fn::kSin:
      return tensor::OpCode::kSin;
    case Fn::kCos:
      return tensor::OpCode::kCos;
    case Fn::kExp:
      return tensor::OpCode::kExp;
    case Fn::kLog:
      return tensor::OpCode::kLog;
    case Fn::kTanh:
      return tensor::OpCode::kTanh;
    case Fn::kSigmoid:
      return tensor::OpCode::kSigmoid;
    case Fn::kPow:
      return tensor::OpCode::kPow;
  }
  return tensor::OpCode::kSin;
}

struct Config {
  Isa isa;
  int width;
  bool scalar;
};

std::string configName(const Config& c) {
  return std::string(isaName(c.isa)) + (c.scalar ? "/scalar" : "/" + std::to_string(c.width));
}

// Every ISA up to the host's, every width, and the scalar form.
std::vector<Config> allConfigs() {
  std::vector<Config> out;
  const Isa best = detectIsa();
  for (Isa isa : {Isa::kSse41, Isa::kAvx2, Isa::kAvx512}) {
    if (isa > best) break;
    for (int w = 16; w <= vectorBytes(isa); w *= 2) out.push_back({isa, w, false});
    out.push_back({isa, 16, true});
  }
  return out;
}

// What a kernel stores: the result, the result computed into the first
// input's register, or an input register after the emit (to catch clobbers).
enum class Mode : uint8_t { kResult, kAliased, kFirstInput, kSecondInput };

template <typename T>
constexpr Lane laneOf() {
  return std::is_same_v<T, float> ? Lane::kF32 : Lane::kF64;
}

// out[i] = fn(in0[i], in1[i]) for i < n, n a multiple of lanes().
template <typename T>
class Kernel {
 public:
  using Entry = void (*)(const T*, const T*, T*, int64_t);

  Kernel(asmjit::JitRuntime& rt, const Config& c, Fn fn, Mode mode) : rt_(rt) {
    asmjit::CodeHolder code;
    code.init(rt.environment());
    x86::Compiler cc(&code);
    asmjit::FuncNode* func =
        cc.addFunc(asmjit::FuncSignatureT<void, const T*, const T*, T*, int64_t>());
    if (c.isa != Isa::kSse41) func->frame().setAvxEnabled();
    if (c.isa == Isa::kAvx512) func->frame().setAvx512Enabled();
    x86::Gp in0 = cc.newIntPtr("in0");
    x86::Gp in1 = cc.newIntPtr("in1");
    x86::Gp out = cc.newIntPtr("out");
    x86::Gp n = cc.newInt64("n");
    x86::Gp i = cc.newInt64("i");
    func->setArg(0, in0);
    func->setArg(1, in1);
    func->setArg(2, out);
    func->setArg(3, n);
    // The runtime table, as kernels receive it.
    x86::Gp runtime = cc.newIntPtr("runtime");
    cc.mov(runtime, asmjit::Imm(reinterpret_cast<uint64_t>(runtimeTable())));

    Simd s(cc, c.isa, laneOf<T>(), c.width, c.scalar);
    lanes_ = s.lanes();
    const int shift = sizeof(T) == 4 ? 2 : 3;
    x86::Vec a = s.newVec("a");
    x86::Vec b = s.newVec("b");
    x86::Vec r = s.newVec("r");
    asmjit::Label loop = cc.newLabel();
    asmjit::Label done = cc.newLabel();
    cc.xor_(i, i);
    cc.test(n, n);
    cc.jle(done);
    cc.bind(loop);
    s.load(a, x86::ptr(in0, i, shift));
    s.load(b, x86::ptr(in1, i, shift));
    const x86::Vec d = mode == Mode::kAliased ? a : r;
    emit(s, fn, d, a, b, runtime);
    const x86::Vec stored = mode == Mode::kFirstInput ? a : mode == Mode::kSecondInput ? b : d;
    s.store(x86::ptr(out, i, shift), stored);
    cc.add(i, lanes_);
    cc.cmp(i, n);
    cc.jl(loop);
    cc.bind(done);
    cc.endFunc();
    ok_ = cc.finalize() == asmjit::kErrorOk && rt.add(&entry_, &code) == asmjit::kErrorOk;
  }
  ~Kernel() {
    if (entry_ != nullptr) rt_.release(entry_);
  }
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  bool ok() const { return ok_; }

  // out[i] = fn(a[i], b[i]) for i < n, n a multiple of lanes(), with no
  // copies: the exhaustive runs reuse their buffers.
  void runInto(const T* a, const T* b, T* out, size_t n) const {
    entry_(a, b, out, int64_t(n));
  }

  // Pads to a whole number of lanes with 1.
  std::vector<T> run(const std::vector<T>& a, const std::vector<T>& b) const {
    const size_t n = (a.size() + lanes_ - 1) / lanes_ * lanes_;
    std::vector<T> in0(a), in1(b), out(n);
    in0.resize(n, T(1));
    in1.resize(n, T(1));
    entry_(in0.data(), in1.data(), out.data(), int64_t(n));
    out.resize(a.size());
    return out;
  }

 private:
  static void emit(Simd& s, Fn fn, x86::Vec d, x86::Vec a, x86::Vec b, x86::Gp runtime) {
    switch (fn) {
      case Fn::kSin:
        return s.mov(d, emitSin(s, a, runtime));
      case Fn::kCos:
        return s.mov(d, emitCos(s, a, runtime));
      case Fn::kExp:
        return s.mov(d, emitExp(s, a));
      case Fn::kLog:
        return s.mov(d, emitLog(s, a));
      case Fn::kTanh:
        return s.mov(d, emitTanh(s, a));
      case Fn::kSigmoid:
        return s.mov(d, emitSigmoid(s, a));
      case Fn::kPow:
        return s.mov(d, emitPow(s, a, b));
      case Fn::kErf:
      case Fn::kLog1p:
      case Fn::kExpm1:
      case Fn::kFloor:
      case Fn::kCeil:
      case Fn::kRound:
        return s.mov(d, *emitElementary(s, opOf(fn), a, b, runtime));
    }
  }

  asmjit::JitRuntime& rt_;
  Entry entry_ = nullptr;
  int lanes_ = 1;
  bool ok_ = false;
};

// The reference type: double for f32 results, long double for f64.
template <typename T>
using Ref = std::conditional_t<std::is_same_v<T, float>, double, long double>;

template <typename T>
Ref<T> reference(Fn fn, Ref<T> a, Ref<T> b) {
  switch (fn) {
    case Fn::kSin:
      return std::sin(a);
    case Fn::kCos:
      return std::cos(a);
    case Fn::kExp:
      return std::exp(a);
    case Fn::kLog:
      return std::log(a);
    case Fn::kTanh:
      return std::tanh(a);
    case Fn::kSigmoid:
      return 1 / (1 + std::exp(-a));
    case Fn::kPow:
      return std::pow(a, b);
    case Fn::kErf:
      return std::erf(a);
    case Fn::kLog1p:
      return std::log1p(a);
    case Fn::kExpm1:
      return std::expm1(a);
    case Fn::kFloor:
      return std::floor(a);
    case Fn::kCeil:
      return std::ceil(a);
    case Fn::kRound:
      return std::nearbyint(a);
  }
  return 0;
}

// |got - ref| in ulps of T at ref. NaN must meet NaN; a result that rounds
// to infinity must be that infinity; a finite ref against an infinite result
// counts the infinity as the next power of two past the largest finite.
template <typename T>
double ulpError(T got, Ref<T> ref) {
  using L = std::numeric_limits<T>;
  const double kFail = std::numeric_limits<double>::infinity();
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got) ? 0 : kFail;
  const T rounded = T(ref);
  if (std::isinf(rounded)) return got == rounded ? 0 : kFail;
  long double g = got;
  if (std::isinf(got)) g = std::copysign(std::ldexp(1.0L, L::max_exponent), (long double)got);
  const int exponent =
      ref == 0 ? L::min_exponent - 1 : std::max(std::ilogb(ref), L::min_exponent - 1);
  const long double ulp = std::ldexp(1.0L, exponent - (L::digits - 1));
  return double(std::fabs(g - (long double)ref) / ulp);
}

template <typename T>
using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;

// `count` values spread evenly over the bit patterns of [lo, hi], 0 <= lo <
// hi: every binade gets its share (log-uniform), subnormals included.
template <typename T>
void addBitSpread(std::vector<T>& v, T lo, T hi, size_t count, bool both_signs) {
  const Bits<T> a = std::bit_cast<Bits<T>>(lo);
  const Bits<T> b = std::bit_cast<Bits<T>>(hi);
  for (size_t i = 0; i <= count; ++i) {
    const T x = std::bit_cast<T>(Bits<T>(a + (long double)(b - a) * i / count));
    v.push_back(x);
    if (both_signs) v.push_back(-x);
  }
}

template <typename T>
void addLinear(std::vector<T>& v, double lo, double hi, size_t count) {
  for (size_t i = 0; i <= count; ++i) v.push_back(T(lo + (hi - lo) * double(i) / double(count)));
}

// Floats next to multiples of pi/2, where the reduced argument is tiniest.
template <typename T>
void addNearHalfPiMultiples(std::vector<T>& v, double max_abs, int every) {
  const long double half_pi = 1.570796326794896619231321691639751442L;
  for (int64_t j = 1; j * half_pi <= max_abs; j += (j < 20000 ? 1 : every)) {
    T x = T(j * half_pi);
    for (int k = 0; k < 2; ++k) x = std::nextafter(x, T(0));
    for (int k = 0; k < 5; ++k, x = std::nextafter(x, T(max_abs))) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
}

template <typename T>
constexpr bool kF32 = std::is_same_v<T, float>;

template <typename T>
const char* laneName() {
  return kF32<T> ? "f32" : "f64";
}

struct Worst {
  double ulp = 0;
  size_t at = 0;
};

template <typename T>
Worst worstError(const std::vector<T>& got, const std::vector<Ref<T>>& ref) {
  Worst w;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = ulpError<T>(got[i], ref[i]);
    if (!(e <= w.ulp)) w = {e, i};
  }
  return w;
}

template <typename T>
bool sameBits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](T p, T q) {
           return std::bit_cast<Bits<T>>(p) == std::bit_cast<Bits<T>>(q);
         });
}

// Runs fn over (a, b) on every config and checks the max error <= bound.
// Results must not depend on the width (scalar included) nor, among the
// ISAs with FMA, on the ISA: a vector loop and its scalar tail agree.
template <typename T>
void checkAccuracy(Fn fn, const std::vector<T>& a, const std::vector<T>& b, double bound) {
  std::vector<Ref<T>> ref(a.size());
  for (size_t i = 0; i < a.size(); ++i) ref[i] = reference<T>(fn, a[i], b[i]);
  asmjit::JitRuntime rt;
  std::vector<T> first_sse, first_fma;
  for (const Config& c : allConfigs()) {
    Kernel<T> k(rt, c, fn, Mode::kResult);
    ASSERT_TRUE(k.ok()) << configName(c);
    const std::vector<T> got = k.run(a, b);
    std::vector<T>& first = c.isa == Isa::kSse41 ? first_sse : first_fma;
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_TRUE(sameBits(got, first)) << fnName(fn) << " " << configName(c) << " differs";
    }
    const Worst w = worstError(got, ref);
    const size_t i = w.at;
    std::printf(
        "%s %-7s %-16s %9zu points  max %.3f ulp  at a=%.17g b=%.17g got %.17g want %.17Lg\n",
        laneName<T>(), fnName(fn), configName(c).c_str(), a.size(), w.ulp, double(a[i]),
        double(b[i]), double(got[i]), (long double)ref[i]);
    EXPECT_LE(w.ulp, bound) << laneName<T>() << " " << fnName(fn) << " " << configName(c)
                            << " at a=" << a[i] << " b=" << b[i];
  }
}

template <typename T>
void checkUnary(Fn fn, const std::vector<T>& a, double bound) {
  checkAccuracy<T>(fn, a, std::vector<T>(a.size(), T(1)), bound);
}

// Documented bounds in ulps, f32 and f64 alike (docs/MATH_ACCURACY.md).
// The f32 ones are within the 4 ulp the f32 math must meet.
double bound(Fn fn) {
  switch (fn) {
    case Fn::kSin:
    case Fn::kCos:
      return 3;
    case Fn::kExp:
    case Fn::kLog:
      return 1.5;
    case Fn::kTanh:
      return 2;
    case Fn::kSigmoid:
      return 3;
    case Fn::kPow:
      return 2.5;
    case Fn::kErf:
      return 2;
    case Fn::kLog1p:
    case Fn::kExpm1:
      return 3;
    case Fn::kFloor:
    case Fn::kCeil:
    case Fn::kRound:
      return 0;  // exact
  }
  return 0;
}

template <typename T>
constexpr size_t density() {
  return kF32<T> ? 400000 : 150000;
}

template <typename T>
constexpr double trigRange() {
  return kF32<T> ? 8192.0 : 1048576.0;
}

// Arguments closest to a multiple of pi/2 relative to their size: for f32
// the closest of all floats above 8192 (within 2^-29.9 of a multiple, in
// units of pi/2; an exact search of every binade) and three runners-up;
// for f64 the classic worst case of argument reduction,
// 6381956970095103 * 2^797.
template <typename T>
std::vector<T> hardTrigCases() {
  if constexpr (kF32<T>) {
    return {0x1.f37c8ap+95f, 0x1.47d0fep+34f, 0x1.32ede2p+85f, 0x1.4ac55cp+22f};
  } else {
    return {0x1.6ac5b262ca1ffp+849};
  }
}

template <typename T>
std::vector<T> trigInputs() {
  std::vector<T> v;
  addBitSpread<T>(v, T(0), T(trigRange<T>()), density<T>(), true);
  addLinear<T>(v, -trigRange<T>(), trigRange<T>(), 2 * density<T>());
  addLinear<T>(v, -8, 8, density<T>());
  addNearHalfPiMultiples<T>(v, trigRange<T>(), 97);
  // Beyond the fast range: the exact reduction, every binade up to the
  // largest finite value, and the hardest cases.
  addBitSpread<T>(v, T(trigRange<T>()), std::numeric_limits<T>::max(), density<T>(), true);
  for (T x : hardTrigCases<T>()) {
    for (int k = -2; k <= 2; ++k) {
      T y = x;
      for (int i = 0; i < std::abs(k); ++i) y = std::nextafter(y, k < 0 ? T(0) : std::numeric_limits<T>::max());
      v.push_back(y);
      v.push_back(-y);
    }
  }
  return v;
}

template <typename T>
std::vector<T> everywhereInputs(double linear) {
  std::vector<T> v;
  addBitSpread<T>(v, T(0), std::numeric_limits<T>::max(), 2 * density<T>(), true);
  addLinear<T>(v, -linear, linear, 2 * density<T>());
  return v;
}

template <typename T>
void testSin() {
  checkUnary<T>(Fn::kSin, trigInputs<T>(), bound(Fn::kSin));
}
template <typename T>
void testCos() {
  checkUnary<T>(Fn::kCos, trigInputs<T>(), bound(Fn::kCos));
}
template <typename T>
void testExp() {
  // The whole line: overflow, underflow and subnormal results included.
  std::vector<T> v = everywhereInputs<T>(kF32<T> ? 110.0 : 750.0);
  addLinear<T>(v, -1, 1, density<T>());
  checkUnary<T>(Fn::kExp, v, bound(Fn::kExp));
}
template <typename T>
void testLog() {
  // Every positive float (subnormals included) and densely around 1.
  std::vector<T> v;
  addBitSpread<T>(v, std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(),
                  4 * density<T>(), false);
  addLinear<T>(v, 0.5, 2, 2 * density<T>());
  addLinear<T>(v, 0.99, 1.01, density<T>());
  checkUnary<T>(Fn::kLog, v, bound(Fn::kLog));
}
template <typename T>
void testTanh() {
  std::vector<T> v = everywhereInputs<T>(kF32<T> ? 10.0 : 20.0);
  addLinear<T>(v, -1, 1, density<T>());
  checkUnary<T>(Fn::kTanh, v, bound(Fn::kTanh));
}
template <typename T>
void testSigmoid() {
  std::vector<T> v = everywhereInputs<T>(kF32<T> ? 110.0 : 750.0);
  addLinear<T>(v, -20, 20, density<T>());
  checkUnary<T>(Fn::kSigmoid, v, bound(Fn::kSigmoid));
}

template <typename T>
void testErf() {
  std::vector<T> v = everywhereInputs<T>(7.0);
  addLinear<T>(v, -1, 1, density<T>());
  addLinear<T>(v, 0.5, 1.5, density<T>());  // the joins of the two forms
  checkUnary<T>(Fn::kErf, v, bound(Fn::kErf));
}
template <typename T>
void testLog1p() {
  // x > -1: tiny and huge magnitudes, densely near 0 and near -1.
  std::vector<T> v;
  addBitSpread<T>(v, std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max(), 2 * density<T>(), false);
  addBitSpread<T>(v, std::numeric_limits<T>::denorm_min(), T(1), density<T>(), false);
  for (size_t i = 0, n = v.size(); i < n; ++i) {
    if (v[i] < T(1)) v.push_back(-v[i]);
  }
  addLinear<T>(v, -0.999, 1, density<T>());
  checkUnary<T>(Fn::kLog1p, v, bound(Fn::kLog1p));
}
template <typename T>
void testExpm1() {
  std::vector<T> v = everywhereInputs<T>(kF32<T> ? 110.0 : 750.0);
  addLinear<T>(v, -1, 1, density<T>());
  addLinear<T>(v, -1e-3, 1e-3, density<T>());
  checkUnary<T>(Fn::kExpm1, v, bound(Fn::kExpm1));
}
template <typename T>
void testRounding() {
  std::vector<T> v = everywhereInputs<T>(20.0);
  for (int k = -40; k <= 40; ++k) {  // the halves, where round ties to even
    v.push_back(T(k * 0.5));
    v.push_back(std::nextafter(T(k * 0.5), T(-100)));
    v.push_back(std::nextafter(T(k * 0.5), T(100)));
  }
  for (Fn fn : {Fn::kFloor, Fn::kCeil, Fn::kRound}) checkUnary<T>(fn, v, bound(fn));
}

// a in (0, 1e4], |b log a| <= kPowLogMax: a spread over the bit patterns and
// b = y / log a for y uniform; also a near 1 with large b and integral b.
template <typename T>
constexpr double powLogMax() {
  return kF32<T> ? 80.0 : 700.0;
}

template <typename T>
void testPow() {
  std::vector<T> a, b;
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<Bits<T>> pattern(
      std::bit_cast<Bits<T>>(std::numeric_limits<T>::denorm_min()), std::bit_cast<Bits<T>>(T(1e4)));
  std::uniform_real_distribution<double> y(-powLogMax<T>(), powLogMax<T>());
  std::uniform_real_distribution<double> near1(0.5, 2);
  const size_t n = 2 * density<T>();
  auto push = [&](T x, double target) {
    const Ref<T> lg = std::log(Ref<T>(x));
    if (lg == 0) return;
    const T e = T(target / lg);
    if (std::fabs(e * lg) > powLogMax<T>()) return;
    a.push_back(x);
    b.push_back(e);
  };
  for (size_t i = 0; i < n; ++i) push(std::bit_cast<T>(pattern(rng)), y(rng));
  for (size_t i = 0; i < n; ++i) push(T(near1(rng)), y(rng));
  for (int k = -300; k <= 300; ++k) {
    for (T x : {T(0.5), T(0.75), T(1.5), T(2), T(3), T(10), T(1e4)}) {
      if (std::fabs(k * std::log(Ref<T>(x))) > powLogMax<T>()) continue;
      a.push_back(x);
      b.push_back(T(k));
    }
  }
  // Negative bases with integral exponents.
  std::uniform_real_distribution<double> base(-1e4, 0);
  for (size_t i = 0; i < n / 8; ++i) {
    const T x = T(base(rng));
    const Ref<T> lg = std::log(-Ref<T>(x));
    if (lg == 0) continue;
    const T e = T(std::nearbyint(y(rng) / lg));
    if (std::fabs(e * lg) > powLogMax<T>()) continue;
    a.push_back(x);
    b.push_back(e);
  }
  checkAccuracy<T>(Fn::kPow, a, b, bound(Fn::kPow));
}

// sin and cos stay in [-1, 1] over the whole range.
template <typename T>
void checkTrigBounded() {
  std::vector<T> v;
  addBitSpread<T>(v, T(trigRange<T>()), std::numeric_limits<T>::max(), 20000, true);
  asmjit::JitRuntime rt;
  for (const Config& c : allConfigs()) {
    for (Fn fn : {Fn::kSin, Fn::kCos}) {
      Kernel<T> k(rt, c, fn, Mode::kResult);
      ASSERT_TRUE(k.ok());
      const std::vector<T> got = k.run(v, v);
      for (size_t i = 0; i < v.size(); ++i) {
        ASSERT_LE(std::fabs(got[i]), T(1)) << fnName(fn) << "(" << v[i] << ") on " << configName(c);
      }
    }
  }
}

TEST(MathF32, TrigBoundedEverywhere) { checkTrigBounded<float>(); }
TEST(MathF64, TrigBoundedEverywhere) { checkTrigBounded<double>(); }

TEST(MathF32, Sin) { testSin<float>(); }
TEST(MathF32, Cos) { testCos<float>(); }
TEST(MathF32, Exp) { testExp<float>(); }
TEST(MathF32, Log) { testLog<float>(); }
TEST(MathF32, Tanh) { testTanh<float>(); }
TEST(MathF32, Sigmoid) { testSigmoid<float>(); }
TEST(MathF32, Pow) { testPow<float>(); }
TEST(MathF64, Sin) { testSin<double>(); }
TEST(MathF64, Cos) { testCos<double>(); }
TEST(MathF64, Exp) { testExp<double>(); }
TEST(MathF64, Log) { testLog<double>(); }
TEST(MathF64, Tanh) { testTanh<double>(); }
TEST(MathF64, Sigmoid) { testSigmoid<double>(); }
TEST(MathF64, Pow) { testPow<double>(); }
TEST(MathF32, Erf) { testErf<float>(); }
TEST(MathF64, Erf) { testErf<double>(); }
TEST(MathF32, Log1p) { testLog1p<float>(); }
TEST(MathF64, Log1p) { testLog1p<double>(); }
TEST(MathF32, Expm1) { testExpm1<float>(); }
TEST(MathF64, Expm1) { testExpm1<double>(); }
TEST(MathF32, FloorCeilRound) { testRounding<float>(); }
TEST(MathF64, FloorCeilRound) { testRounding<double>(); }

// ---------------------------------------------------------------------------
// Special values: exact, with the sign of zeros and infinities.

struct Special {
  Fn fn;
  double a, b, want;
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<Special> specialsFor(bool f32) {
  const double big = f32 ? 200 : 2000;  // 2^big overflows, 2^-big underflows
  const double huge_exp = f32 ? 89 : 710;
  const double tiny_exp = f32 ? -104 : -746;
  return {
      {Fn::kSin, kNaN, 1, kNaN},
      {Fn::kSin, kInf, 1, kNaN},
      {Fn::kSin, -kInf, 1, kNaN},
      {Fn::kSin, 0.0, 1, 0.0},
      {Fn::kSin, -0.0, 1, -0.0},
      {Fn::kSin, 1e-30, 1, 1e-30},
      {Fn::kCos, kNaN, 1, kNaN},
      {Fn::kCos, kInf, 1, kNaN},
      {Fn::kCos, -kInf, 1, kNaN},
      {Fn::kCos, 0.0, 1, 1},
      {Fn::kCos, -0.0, 1, 1},

      {Fn::kExp, kNaN, 1, kNaN},
      {Fn::kExp, kInf, 1, kInf},
      {Fn::kExp, -kInf, 1, 0.0},
      {Fn::kExp, 0.0, 1, 1},
      {Fn::kExp, -0.0, 1, 1},
      {Fn::kExp, huge_exp, 1, kInf},
      {Fn::kExp, tiny_exp, 1, 0.0},
      {Fn::kExp, 1e30, 1, kInf},
      {Fn::kExp, -1e30, 1, 0.0},

      {Fn::kLog, kNaN, 1, kNaN},
      {Fn::kLog, kInf, 1, kInf},
      {Fn::kLog, -kInf, 1, kNaN},
      {Fn::kLog, 0.0, 1, -kInf},
      {Fn::kLog, -0.0, 1, -kInf},
      {Fn::kLog, -1, 1, kNaN},
      {Fn::kLog, -1e-30, 1, kNaN},
      {Fn::kLog, 1, 1, 0.0},

      {Fn::kTanh, kNaN, 1, kNaN},
      {Fn::kTanh, kInf, 1, 1},
      {Fn::kTanh, -kInf, 1, -1},
      {Fn::kTanh, 0.0, 1, 0.0},
      {Fn::kTanh, -0.0, 1, -0.0},
      {Fn::kTanh, 30, 1, 1},
      {Fn::kTanh, -30, 1, -1},
      {Fn::kTanh, 1e-30, 1, 1e-30},
      {Fn::kTanh, -1e-30, 1, -1e-30},

      {Fn::kSigmoid, kNaN, 1, kNaN},
      {Fn::kSigmoid, kInf, 1, 1},
      {Fn::kSigmoid, -kInf, 1, 0.0},
      {Fn::kSigmoid, 0.0, 1, 0.5},
      {Fn::kSigmoid, -0.0, 1, 0.5},
      {Fn::kSigmoid, 1e30, 1, 1},
      {Fn::kSigmoid, -1e30, 1, 0.0},

      // pow(x, +-0) = 1 and pow(1, y) = 1 for every x and y, NaN included.
      {Fn::kPow, 2, 0.0, 1},
      {Fn::kPow, kNaN, 0.0, 1},
      {Fn::kPow, kInf, -0.0, 1},
      {Fn::kPow, 0.0, 0.0, 1},
      {Fn::kPow, -3, -0.0, 1},
      {Fn::kPow, 1, kNaN, 1},
      {Fn::kPow, 1, kInf, 1},
      {Fn::kPow, 1, -kInf, 1},
      {Fn::kPow, -1, kInf, 1},
      {Fn::kPow, -1, -kInf, 1},
      {Fn::kPow, kNaN, 2, kNaN},
      {Fn::kPow, 2, kNaN, kNaN},
      // Zero base.
      {Fn::kPow, 0.0, 3, 0.0},
      {Fn::kPow, -0.0, 3, -0.0},
      {Fn::kPow, -0.0, 2, 0.0},
      {Fn::kPow, -0.0, 0.5, 0.0},
      {Fn::kPow, 0.0, -3, kInf},
      {Fn::kPow, -0.0, -3, -kInf},
      {Fn::kPow, -0.0, -2, kInf},
      {Fn::kPow, 0.0, -0.5, kInf},
      {Fn::kPow, 0.0, kInf, 0.0},
      {Fn::kPow, 0.0, -kInf, kInf},
      // Negative base: integral exponents only.
      {Fn::kPow, -2, 3, -8},
      {Fn::kPow, -2, 2, 4},
      {Fn::kPow, -2, -1, -0.5},
      {Fn::kPow, -2, 0.5, kNaN},
      {Fn::kPow, -kInf, 3, -kInf},
      {Fn::kPow, -kInf, 2, kInf},
      {Fn::kPow, -kInf, -3, -0.0},
      {Fn::kPow, -kInf, 0.5, kInf},
      {Fn::kPow, -kInf, -0.5, 0.0},
      {Fn::kPow, -0.5, kInf, 0.0},
      {Fn::kPow, -2, kInf, kInf},
      // Infinities.
      {Fn::kPow, 0.5, kInf, 0.0},
      {Fn::kPow, 2, kInf, kInf},
      {Fn::kPow, 0.5, -kInf, kInf},
      {Fn::kPow, 2, -kInf, 0.0},
      {Fn::kPow, kInf, 2, kInf},
      {Fn::kPow, kInf, -2, 0.0},
      // Overflow and underflow.
      {Fn::kPow, 2, big, kInf},
      {Fn::kPow, 2, -big, 0.0},
      {Fn::kPow, -2, big + 1, -kInf},
      {Fn::kPow, 10, 1e30, kInf},
      // Ordinary values (within the accuracy bound).
      {Fn::kPow, 2, 10, 1024},
      {Fn::kPow, 9, 0.5, 3},

      {Fn::kErf, kNaN, 1, kNaN},
      {Fn::kErf, kInf, 1, 1},
      {Fn::kErf, -kInf, 1, -1},
      {Fn::kErf, 0.0, 1, 0.0},
      {Fn::kErf, -0.0, 1, -0.0},
      {Fn::kErf, 10, 1, 1},
      {Fn::kErf, -10, 1, -1},
      {Fn::kErf, 1e-30, 1, 1.1283791670955126e-30},

      {Fn::kLog1p, kNaN, 1, kNaN},
      {Fn::kLog1p, kInf, 1, kInf},
      {Fn::kLog1p, -kInf, 1, kNaN},
      {Fn::kLog1p, 0.0, 1, 0.0},
      {Fn::kLog1p, -0.0, 1, -0.0},
      {Fn::kLog1p, -1, 1, -kInf},
      {Fn::kLog1p, -2, 1, kNaN},
      {Fn::kLog1p, 1e-30, 1, 1e-30},
      {Fn::kLog1p, -1e-30, 1, -1e-30},

      {Fn::kExpm1, kNaN, 1, kNaN},
      {Fn::kExpm1, kInf, 1, kInf},
      {Fn::kExpm1, -kInf, 1, -1},
      {Fn::kExpm1, 0.0, 1, 0.0},
      {Fn::kExpm1, -0.0, 1, -0.0},
      {Fn::kExpm1, huge_exp, 1, kInf},
      {Fn::kExpm1, -1e30, 1, -1},
      {Fn::kExpm1, 1e-30, 1, 1e-30},
      {Fn::kExpm1, -1e-30, 1, -1e-30},

      {Fn::kFloor, kNaN, 1, kNaN},
      {Fn::kFloor, -kInf, 1, -kInf},
      {Fn::kFloor, -0.0, 1, -0.0},
      {Fn::kFloor, -0.5, 1, -1},
      {Fn::kFloor, 0.5, 1, 0.0},
      {Fn::kCeil, kInf, 1, kInf},
      {Fn::kCeil, -0.5, 1, -0.0},
      {Fn::kCeil, 0.5, 1, 1},
      {Fn::kCeil, -0.0, 1, -0.0},
      {Fn::kRound, 0.5, 1, 0.0},
      {Fn::kRound, 1.5, 1, 2},
      {Fn::kRound, 2.5, 1, 2},
      {Fn::kRound, -0.5, 1, -0.0},
      {Fn::kRound, -kInf, 1, -kInf},
      {Fn::kRound, kNaN, 1, kNaN},
  };
}

template <typename T>
bool sameSpecial(Fn fn, T got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want) || want == 0 || std::fabs(want) == 1) {
    return got == T(want) && std::signbit(got) == std::signbit(want);
  }
  return ulpError<T>(got, Ref<T>(want)) <= bound(fn) && std::signbit(got) == std::signbit(want);
}

template <typename T>
void checkSpecials() {
  asmjit::JitRuntime rt;
  const std::vector<Special> specials = specialsFor(kF32<T>);
  for (const Config& c : allConfigs()) {
    for (Fn fn : {Fn::kSin, Fn::kCos, Fn::kExp, Fn::kLog, Fn::kTanh, Fn::kSigmoid, Fn::kPow, Fn::kErf,
                  Fn::kLog1p, Fn::kExpm1, Fn::kFloor, Fn::kCeil, Fn::kRound}) {
      std::vector<T> a, b;
      std::vector<double> want;
      for (const Special& s : specials) {
        if (s.fn != fn) continue;
        a.push_back(T(s.a));
        b.push_back(T(s.b));
        want.push_back(s.want);
      }
      // d aliasing the first input must give the same results.
      for (Mode mode : {Mode::kResult, Mode::kAliased}) {
        Kernel<T> k(rt, c, fn, mode);
        ASSERT_TRUE(k.ok());
        const std::vector<T> got = k.run(a, b);
        for (size_t i = 0; i < a.size(); ++i) {
          EXPECT_TRUE(sameSpecial(fn, got[i], want[i]))
              << laneName<T>() << " " << fnName(fn) << "(" << a[i] << ", " << b[i] << ") on "
              << configName(c) << (mode == Mode::kAliased ? " aliased" : "") << ": got " << got[i]
              << ", want " << want[i];
        }
      }
    }
  }
}

TEST(MathF32, SpecialValues) { checkSpecials<float>(); }
TEST(MathF64, SpecialValues) { checkSpecials<double>(); }

// The emitters leave their input registers as they were.
template <typename T>
void checkInputsKept() {
  asmjit::JitRuntime rt;
  std::vector<T> a, b;
  addLinear<T>(a, -20, 20, 63);
  addLinear<T>(b, 3, -3, 63);
  for (const Config& c : allConfigs()) {
    for (Fn fn : {Fn::kSin, Fn::kCos, Fn::kExp, Fn::kLog, Fn::kTanh, Fn::kSigmoid, Fn::kPow, Fn::kErf,
                  Fn::kLog1p, Fn::kExpm1, Fn::kFloor, Fn::kCeil, Fn::kRound}) {
      Kernel<T> first(rt, c, fn, Mode::kFirstInput);
      Kernel<T> second(rt, c, fn, Mode::kSecondInput);
      ASSERT_TRUE(first.ok() && second.ok());
      EXPECT_EQ(first.run(a, b), a) << fnName(fn) << " " << configName(c);
      EXPECT_EQ(second.run(a, b), b) << fnName(fn) << " " << configName(c);
    }
  }
}

TEST(MathF32, InputsKept) { checkInputsKept<float>(); }
TEST(MathF64, InputsKept) { checkInputsKept<double>(); }

// The host's vector evaluation of the exact trig reduction (trig_large.h)
// gives HostOps's bits lane by lane, on each ISA family: magnitudes spread
// over every binade past the fast range, +inf and NaN, with lanes of the
// fast range between them, whose results must be left as they were. The
// count is no multiple of a vector, so the scalar tail runs too.
template <typename T>
void checkLargeTrigVectorBits() {
  std::vector<T> a;
  addBitSpread<T>(a, T(kF32<T> ? 8192 : 1048576), std::numeric_limits<T>::max(), 20000, false);
  for (T v : {T(0), T(1), T(-0.0), T(3.5), std::numeric_limits<T>::infinity(), std::numeric_limits<T>::quiet_NaN()}) {
    a.insert(a.begin() + a.size() / 3, v);
    a.push_back(v);
  }
  const T untouched = T(7);
  for (Isa isa : {Isa::kSse41, Isa::kAvx2, Isa::kAvx512}) {
    if (isa > detectIsa()) continue;  // not on this machine
    const bool fused = isa != Isa::kSse41;
    for (bool cosine : {false, true}) {
      std::vector<T> vec(a.size(), untouched), scalar(a.size(), untouched);
      if (isa == Isa::kAvx512) {
        sinCosLargeAvx512(a.data(), vec.data(), int64_t(a.size()), cosine);
      } else if (fused) {
        sinCosLargeFma(a.data(), vec.data(), int64_t(a.size()), cosine);
      } else {
        sinCosLargeSse41(a.data(), vec.data(), int64_t(a.size()), cosine);
      }
      sinCosLargeScalar(a.data(), scalar.data(), int64_t(a.size()), fused, cosine);
      size_t differ = 0, kept = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        differ += std::bit_cast<Bits<T>>(vec[i]) != std::bit_cast<Bits<T>>(scalar[i]);
        // Past the fast range (its bound excluded, NaN not past it): a result,
        // NaN for +inf alone; elsewhere r as it was.
        const bool large = a[i] > T(kF32<T> ? 8192 : 1048576);
        kept += large ? std::isnan(vec[i]) == std::isinf(a[i]) : vec[i] == untouched;
      }
      EXPECT_EQ(differ, 0u) << laneName<T>() << (cosine ? " cos " : " sin ") << isaName(isa);
      EXPECT_EQ(kept, a.size()) << laneName<T>() << (cosine ? " cos " : " sin ") << isaName(isa);
    }
  }
}

TEST(MathF32, LargeTrigVectorBitsAreScalar) { checkLargeTrigVectorBits<float>(); }
TEST(MathF64, LargeTrigVectorBitsAreScalar) { checkLargeTrigVectorBits<double>(); }

// The sign symmetry of fn: f(-x) = parity * f(x) exactly for -1 (odd) and
// +1 (even), 0 for neither. The exhaustive runs take the reference of -x
// from that of x, which halves their libm time.
int parity(Fn fn) {
  switch (fn) {
    case Fn::kSin:
    case Fn::kTanh:
    case Fn::kErf:
      return -1;
    case Fn::kCos:
      return 1;
    default:
      return 0;
  }
}

// ulpError's value to within a few parts in 2^50, in double and bit
// operations only: the exhaustive runs compute the exact error (long
// double, ilogb) only where this one reaches the worst seen so far.
// Returns +inf where got or ref is not finite, which sends those inputs to
// ulpError.
double quickUlpError(float got, double ref) {
  if (!std::isfinite(ref) || !std::isfinite(got)) return std::numeric_limits<double>::infinity();
  const int biased = int((std::bit_cast<uint64_t>(ref) >> 52) & 0x7ff);
  // 1 / float's ulp at ref: 2^(23 - e), e = max(exponent of ref, -126).
  const int e = std::max(biased - 1023, -126);
  const double inverse_ulp = std::bit_cast<double>(uint64_t(23 - e + 1023) << 52);
  return std::fabs(double(got) - ref) * inverse_ulp;
}

// Every f32 input of `fns` on the widest vector of the best ISA and on
// SSE4.1, which has no FMA; on an AVX-512 host also on AVX2, whose bits
// AVX-512's must equal input by input.
// Every float of magnitude in [first, last] (bit patterns), both signs;
// all finite floats and +inf by default. The magnitudes are split into
// chunks that every core of the host takes in turn (ACCY_MATH_THREADS=n
// limits them).
void checkExhaustive(std::initializer_list<Fn> fn_list, float first = 0.0f,
                     float last = std::numeric_limits<float>::infinity()) {
  const char* env = std::getenv("ACCY_MATH_EXHAUSTIVE");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "set ACCY_MATH_EXHAUSTIVE=1";
  const std::vector<Fn> fns(fn_list);
  const Isa best = detectIsa();
  std::vector<Config> configs = {{best, vectorBytes(best), false}, {Isa::kSse41, 16, false}};
  // AVX-512 takes other instructions for some steps (ternary logic): its
  // bits must still be AVX2's, input by input.
  const bool twin = best == Isa::kAvx512;
  if (twin) configs.push_back({Isa::kAvx2, vectorBytes(Isa::kAvx2), false});
  asmjit::JitRuntime rt;
  // kernels[f][k]: fns[f] on configs[k].
  std::vector<std::vector<std::unique_ptr<Kernel<float>>>> kernels(fns.size());
  for (size_t f = 0; f < fns.size(); ++f) {
    for (const Config& c : configs) {
      kernels[f].push_back(std::make_unique<Kernel<float>>(rt, c, fns[f], Mode::kResult));
      ASSERT_TRUE(kernels[f].back()->ok()) << fnName(fns[f]) << " " << configName(c);
    }
  }
  // What a worker found, merged under `mu`.
  struct Found {
    double ulp = 0;
    float at = 0;
  };
  std::vector<std::vector<Found>> worst(fns.size(), std::vector<Found>(configs.size()));
  std::vector<uint64_t> differ(fns.size(), 0);
  std::mutex mu;
  const uint64_t lo = std::bit_cast<uint32_t>(first);
  const uint64_t hi = uint64_t(std::bit_cast<uint32_t>(last)) + 1;  // one past
  const uint64_t chunk = uint64_t{1} << 20;  // a multiple of every width's lanes
  std::atomic<uint64_t> next{lo};
  auto work = [&] {
    std::vector<float> a(chunk), ones(chunk, 1.0f), got(chunk), best_got(chunk);
    std::vector<std::vector<double>> ref(fns.size(), std::vector<double>(chunk));
    std::vector<std::vector<Found>> mine(fns.size(), std::vector<Found>(configs.size()));
    std::vector<uint64_t> my_differ(fns.size(), 0);
    for (uint64_t start; (start = next.fetch_add(chunk)) < hi;) {
      const size_t n = size_t(std::min(chunk, hi - start));
      // Padded to whole vectors with 1, which every function takes.
      const size_t padded = (n + 15) / 16 * 16;
      for (size_t f = 0; f < fns.size(); ++f) {
        for (size_t i = 0; i < n; ++i) {
          ref[f][i] = reference<float>(fns[f], std::bit_cast<float>(uint32_t(start + i)), 1);
        }
      }
      for (uint32_t sign : {0u, 0x80000000u}) {
        for (size_t i = 0; i < padded; ++i) {
          a[i] = i < n ? std::bit_cast<float>(uint32_t(start + i) | sign) : 1.0f;
        }
        for (size_t f = 0; f < fns.size(); ++f) {
          std::vector<double>& want = ref[f];
          if (sign != 0) {
            const int p = parity(fns[f]);
            for (size_t i = 0; i < n; ++i) want[i] = p != 0 ? p * want[i] : reference<float>(fns[f], a[i], 1);
          }
          for (size_t k = 0; k < configs.size(); ++k) {
            std::vector<float>& out = k == 0 ? best_got : got;
            kernels[f][k]->runInto(a.data(), ones.data(), out.data(), padded);
            Found& w = mine[f][k];
            // Kept apart from w: the compiler cannot tell w.at from out[i].
            double bar = w.ulp * (1 - 1e-9);
            for (size_t i = 0; i < n; ++i) {
              if (!(quickUlpError(out[i], want[i]) >= bar)) continue;
              const double e = ulpError<float>(out[i], want[i]);
              if (!(e <= w.ulp)) w = {e, a[i]}, bar = e * (1 - 1e-9);
            }
            if (twin && k == 2) {
              for (size_t i = 0; i < n; ++i) {
                my_differ[f] += std::bit_cast<uint32_t>(out[i]) != std::bit_cast<uint32_t>(best_got[i]);
              }
            }
          }
          if (sign != 0 && parity(fns[f]) != 0) {
            const int p = parity(fns[f]);
            for (size_t i = 0; i < n; ++i) want[i] *= p;  // back to +x's, for the next sign
          }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (size_t f = 0; f < fns.size(); ++f) {
      differ[f] += my_differ[f];
      for (size_t k = 0; k < configs.size(); ++k) {
        if (!(mine[f][k].ulp <= worst[f][k].ulp)) worst[f][k] = mine[f][k];
      }
    }
  };
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char* t = std::getenv("ACCY_MATH_THREADS"); t != nullptr && std::atoi(t) > 0) threads = unsigned(std::atoi(t));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (std::thread& t : pool) t.join();
  for (size_t f = 0; f < fns.size(); ++f) {
    for (size_t k = 0; k < configs.size(); ++k) {
      std::printf("f32 %-7s %-16s exhaustive  max %.3f ulp  at a=%.9g\n", fnName(fns[f]),
                  configName(configs[k]).c_str(), worst[f][k].ulp, double(worst[f][k].at));
      EXPECT_LE(worst[f][k].ulp, bound(fns[f])) << fnName(fns[f]) << " " << configName(configs[k]);
    }
    if (twin) {
      std::printf("f32 %-7s avx512 and avx2+fma differ on %llu inputs\n", fnName(fns[f]),
                  static_cast<unsigned long long>(differ[f]));
      EXPECT_EQ(differ[f], 0u) << fnName(fns[f]);
    }
  }
  std::fflush(stdout);
}

TEST(MathF32, Exhaustive) { checkExhaustive({Fn::kExp, Fn::kLog, Fn::kTanh, Fn::kSigmoid}); }
// tanh's exponential branch and its clamp (|x| from 0.625 to 9.5): every
// float of +-[0.5, 10], a minute instead of the half hour of the above.
TEST(MathF32, ExhaustiveTanhLarge) { checkExhaustive({Fn::kTanh}, 0.5f, 10.0f); }
// Every finite float, the exact reduction beyond 8192 included.
TEST(MathF32, ExhaustiveTrig) { checkExhaustive({Fn::kSin, Fn::kCos}); }
TEST(MathF32, ExhaustiveErfLog1pExpm1) { checkExhaustive({Fn::kErf, Fn::kLog1p, Fn::kExpm1}); }

}  // namespace
}  // namespace accy::x64
