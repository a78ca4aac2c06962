// Elementary functions as instruction-level algorithms, written once over an
// "ops" type and instantiated by each emitter: x86-64 (Simd registers,
// compiler/codegen/x86_64/math.cc), PTX (virtual registers,
// compiler/codegen/ptx/ptx_ops.h) and SPIR-V (SSA ids,
// compiler/codegen/spirv/spirv_ops.h). Accuracy, ranges and special
// values are measured in compiler/codegen/x86_64/math_test.cc and recorded
// in docs/MATH_ACCURACY.md.
//
// An ops type O provides: types Vec and Mask; c() -> const LaneMath&;
// fusedMultiplyAdd(); num(double), bits(uint64), zero(); add sub mul div
// bitAnd bitOr bitXor intAdd minRaw maxRaw (minRaw/maxRaw return their second
// operand when either is NaN); fma(a, b, c) = a*b + c (rounded once where
// fusedMultiplyAdd()); abs neg round (to nearest even); shl(v, n), shr(v, n)
// on the same-width integer lanes; cmp(Cmp, a, b) -> Mask (ordered, except
// kNe); both, either on masks; select(mask, t, f); horner(x, coefficients);
// whenAny(mask, span<Vec> vars, body): runs body() only when some lane of
// the mask is set (a branch; a GPU thread's one lane), body replacing values
// of vars, which hold the replacements afterwards. Optional:
// sinCosLarge(a, fast, cosine), sinCos's slow path out of line; fmaLast,
// ternaryLogic, xorAnd, orAnd, xor3 (below), fewer instructions for the same bits.
#ifndef ACCY_COMPILER_CODEGEN_MATH_ELEMENTARY_H_
#define ACCY_COMPILER_CODEGEN_MATH_ELEMENTARY_H_

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

namespace accy::math {

enum class Cmp { kLt, kLe, kGt, kGe, kEq, kNe };

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Polynomial coefficients, lowest degree first. Each set is a weighted
// minimax fit (Remez exchange in 50-digit arithmetic) minimizing the relative
// error of the final function value, with the coefficients rounded to the
// lane type one at a time and the remaining ones refitted.

// e^r ~ 1 + r + r^2 * P(r), r in [-0.3475, 0.3475].
inline constexpr double kExpF32[] = {0.4999999403953552, 0.16666515171527863, 0.041668087244033813,
                              0.00836929865181446, 0.0013838307932019234};
inline constexpr double kExpF64[] = {0.5000000000000011,    0.16666666666666405,   0.04166666666652737,
                              0.008333333333497811,  0.0013888888944469794, 0.00019841269501356707,
                              2.480149213568412e-05, 2.755758916443948e-06, 2.7630621013728803e-07,
                              2.4999781231785314e-08};

// sin(r) ~ r + r * z * P(z), z = r^2, |r| <= 0.788.
inline constexpr double kSinF32[] = {-0.16666653752326965, 0.008332106284797192, -0.00019507882825564593};
inline constexpr double kSinF64[] = {-0.1666666666666663,     0.00833333333332181,
                              -0.00019841269829319,    2.7557313521379448e-06,
                              -2.5050731307319135e-08, 1.5895236337365907e-10};

// sin(r) ~ r + r * z * P(z), z = r^2, |r| <= 1.5708 (a half period): the
// fast path's one polynomial.
inline constexpr double kSinHalfF32[] = {-0.16666659712791443, 0.00833306647837162, -0.00019809602235909551,
                                         2.6057798550027655e-06};
inline constexpr double kSinHalfF64[] = {-0.16666666666666666,    0.008333333333333194,  -0.00019841269841209218,
                                         2.7557319211136987e-06,  -2.5052106872775085e-08, 1.6058939704493991e-10,
                                         -7.642991451893077e-13, 2.721174559489177e-15};

// cos(r) ~ 1 - z / 2 + z^2 * P(z), z = r^2, |r| <= 0.788.
inline constexpr double kCosF32[] = {0.04166664555668831, -0.001388730714097619, 2.4431870770058595e-05};
inline constexpr double kCosF64[] = {0.04166666666666659,    -0.0013888888888872186,
                              2.480158728829539e-05,  -2.7557314015122453e-07,
                              2.0875678084786974e-09, -1.1357336717483397e-11};

// 2 atanh(s) ~ 2s + s * z * P(z), z = s^2, |s| <= 0.1716 (log1p(f) with
// s = f / (2 + f), 1 + f in [sqrt(1/2), sqrt(2))).
inline constexpr double kLogF32[] = {0.6666666269302368, 0.40000972151756287, 0.2849879264831543,
                              0.24278856813907623};
inline constexpr double kLogF64[] = {0.6666666666666666,  0.40000000000004926, 0.2857142856940952,
                              0.22222222607316675, 0.1818177832101962,  0.1538699056741479,
                              0.1325210576855585,  0.13235187009936467};

// tanh(x) ~ x + x * z * P(z), z = x^2, |x| < 0.625.
inline constexpr double kTanhF32[] = {-0.3333333134651184,  0.13333220779895782,   -0.05394817888736725,
                               0.021706894040107727, -0.008190013468265533, 0.002152683911845088};
inline constexpr double kTanhF64[] = {
    -0.33333333333333315,    0.1333333333332996,    -0.053968253966149446,  0.021869488470699014,
    -0.008863234338748284,   0.0035921142223555623, -0.0014557272091690959, 0.0005894566158556033,
    -0.00023702398046040682, 9.157829768025825e-05, -3.020586355882922e-05, 6.050148845089078e-06};
inline constexpr double kTanhSmall = 0.625;

// erf (tools/math/fit_erf.py, docs/MATH_ACCURACY.md): erf(x) = x + x S1(x^2)
// for |x| < kErfSmallBound; 1 - exp(L(|x| - c)) on the tail's intervals, L
// fitting log erfc there; 1 from kErfOneBound, where erf rounds to 1.
inline constexpr double kErfSmallBoundF32 = 0.84375;
inline constexpr double kErfOneBoundF32 = 3.921875;
inline constexpr double kErfSmallF32[] = {0.12837916612625122,  -0.37612593173980713,   0.11282911896705627,
                                          -0.026809535920619965, 0.0050618816167116165, -0.00063749635592103004};
inline constexpr double kErfTailStartsF32[] = {0.84375};
inline constexpr double kErfTailCentersF32[] = {1.125};
inline constexpr double kErfTailF32[] = {-2.1927287578582764,   -2.851616382598877,    -0.85779052972793579,
                                         -0.036848787218332291, 0.0088600842282176018, -0.0017647269414737821,
                                         0.00021262990776449442};
inline constexpr double kErfSmallBoundF64 = 1;
inline constexpr double kErfOneBoundF64 = 5.9375;
inline constexpr double kErfSmallF64[] = {
    0.12837916709551259,    -0.37612638903183865,  0.11283791670955329,    -0.02686617064460475,
    0.005223977616757359,   -0.00085483263820597063, 0.0001205530578940241, -1.4924926468340139e-05,
    1.644956688352445e-06,  -1.6223635550446846e-07, 1.3781016112784433e-08, -7.9023364889690254e-10};
inline constexpr double kErfTailStartsF64[] = {1};
inline constexpr double kErfTailCentersF64[] = {1.25};
inline constexpr double kErfTailF64[] = {
    -2.5626536619221256,    -3.0677239416692372,    -0.87081016405880551,   -0.032687008682896035,
    0.0077919616130214565,  -0.0016069509548120088, 0.0002467839590014415,  -1.0041729168759417e-05,
    -1.0830479414769847e-05, 5.1660790940112589e-06, -1.4469312467860016e-06, 2.5523167065750267e-07,
    -8.3091507997704245e-09, -1.2505465749779401e-08, 4.8752177766717454e-09, -9.8828425979500497e-10,
    1.1243551489765319e-10, -5.6544394155112609e-12};

// Cody-Waite pieces of pi/2: every piece but the last has few enough bits
// that j * piece is exact for the quadrant counts j of the documented range
// (13 bits for f32, |x| < 12867; 20 bits for f64, |x| < 1.6e6).
inline constexpr double kPio2F32[] = {1.5703125, 0.0004837512969970703, 7.549533620476723e-08,
                               2.5632829192545614e-12, 6.123234262925839e-17};
inline constexpr double kPio2F64[] = {1.5707963267341256, 6.077100506303966e-11, 2.0222662487111665e-21,
                               8.4784276603689e-32};
// pi/2 in three pieces of full precision, for lanes with a fused
// multiply-add: k * piece1 is exact inside the fma and x - k * piece1 is
// representable, so the first step is exact and the others round once.
inline constexpr double kPio2FmaF32[] = {0x1.921fb6p+0, -0x1.777a5cp-25, -0x1.ee59dap-50};
inline constexpr double kPio2FmaF64[] = {0x1.921fb54442d18p+0, 0x1.1a62633145c07p-54, -0x1.f1976b7ed8fbcp-110};

// 2/pi as a sum of chunks, each a value of the lane type, scaled by
// 2^kTwoOverPiScale{F32,F64} so that the smallest stays normal: the large
// argument reduction multiplies |x| * 2^-scale by each chunk. What the sum
// leaves out is below 2^-204 (f32) and 2^-1220 (f64) of 2/pi, small enough
// for the largest finite argument.
inline constexpr int kTwoOverPiScaleF32 = 64;
inline constexpr double kTwoOverPiF32[] = {0x1.45f306p+63,  0x1.b93910p+38, 0x1.529fc2p+12,
                                           0x1.d5f47ep-14,  -0x1.659120p-39, 0x1.b6c52cp-65,
                                           -0x1.9b0ef2p-90, 0x1.041fe6p-116};
inline constexpr int kTwoOverPiScaleF64 = 600;
inline constexpr double kTwoOverPiF64[] = {
    0x1.45f306dc9c883p+599,  -0x1.6b01ec5417056p+545, -0x1.6447e493ad4cep+491, 0x1.e21c820ff28b2p+437,
    -0x1.508510ea79237p+382, 0x1.b8e909374b802p+326,  -0x1.b6d115f62e6dep+272, -0x1.80f10a71a76b3p+217,
    0x1.cfba208d7d4bbp+162,  -0x1.2edec598e3f65p+106, -0x1.741037d8cdc54p+51,  0x1.cc1a99cfa4e42p-3,
    0x1.7e2ef7e4a0ec8p-58,   -0x1.da00087e99fc0p-118, -0x1.0d0ee74a5f593p-172, 0x1.f6d367ecf27cbp-228,
    0x1.36e9e8c7ecd3dp-285,  -0x1.00ae9456c229cp-339, -0x1.41a0e84c2f8c6p-396, -0x1.0eb5ada2b2809p-453,
    -0x1.0277039517bd5p-507};

// The bits of `v` as a lane value: f64's 64, or f32's 32 (v rounded to
// f32) in the low half. What an emitter writes for a constant.
inline uint64_t laneBits(double v, bool f64) {
  if (f64) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  const float x = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// P(x) by Horner's rule with the ops type's fma, coefficients lowest degree
// first: the horner() of ops types without a faster form of their own.
template <class O>
typename O::Vec hornerByFma(O& o, typename O::Vec x, std::span<const double> coefficients) {
  typename O::Vec acc = o.num(coefficients.back());
  for (size_t i = coefficients.size() - 1; i-- > 0;) acc = o.fma(acc, x, o.num(coefficients[i]));
  return acc;
}

// Constants that depend on the lane type.
struct LaneMath {
  int mantissa_bits;
  int lane_bits;
  uint64_t sign_mask;
  uint64_t mantissa_mask;
  double magic;  // 1.5 * 2^mantissa_bits: adding it rounds to an integer
  int exponent_bias;
  double split;  // Veltkamp splitter 2^ceil(p / 2) + 1
  // ln 2 = ln2_hi + ln2_lo with ln2_hi * n exact for every exponent n.
  double ln2_hi, ln2_lo;
  // exp clamps its argument to [exp_min, exp_max]: beyond, the result is 0 or inf.
  double exp_min, exp_max;
  // log: inputs below min_normal are scaled by 2^subnormal_shift first.
  double min_normal;
  int subnormal_shift;
  uint64_t sqrt_half_bits;
  std::span<const double> exp_poly, sin_poly, cos_poly, log_poly, tanh_poly, pio2;
  std::span<const double> sin_half_poly, pio2_fma;
  // sin and cos reduce |x| > trig_fast_limit with the chunks of 2/pi
  // (scaled by 2^two_over_pi_scale) instead of Cody-Waite.
  double trig_fast_limit;
  int two_over_pi_scale;
  std::span<const double> two_over_pi;
  // tanh clamps |x| to tanh_max, beyond which tanh rounds to 1 (and e^(2x)
  // stays finite).
  double tanh_max;
  // erf (erfOf): below erf_small_bound x + x S1(x^2); the tail from the
  // starts of its intervals (the first is erf_small_bound) with centers and
  // polynomials of one length, concatenated; 1 from erf_one_bound.
  double erf_small_bound, erf_one_bound;
  std::span<const double> erf_small_poly, erf_tail_starts, erf_tail_centers, erf_tail_poly;
};

inline const LaneMath kF32 = {
    .mantissa_bits = 23,
    .lane_bits = 32,
    .sign_mask = 0x80000000u,
    .mantissa_mask = 0x007fffffu,
    .magic = 12582912.0,
    .exponent_bias = 127,
    .split = 4097.0,
    .ln2_hi = 0.693145751953125,
    .ln2_lo = 1.428606765330187e-06,
    .exp_min = -104.0,
    .exp_max = 89.0,
    .min_normal = 0x1p-126,
    .subnormal_shift = 24,
    .sqrt_half_bits = 0x3f3504f3u,
    .exp_poly = kExpF32,
    .sin_poly = kSinF32,
    .cos_poly = kCosF32,
    .log_poly = kLogF32,
    .tanh_poly = kTanhF32,
    .pio2 = kPio2F32,
    .sin_half_poly = kSinHalfF32,
    .pio2_fma = kPio2FmaF32,
    .trig_fast_limit = 8192.0,
    .two_over_pi_scale = kTwoOverPiScaleF32,
    .two_over_pi = kTwoOverPiF32,
    .tanh_max = 9.5,
    .erf_small_bound = kErfSmallBoundF32,
    .erf_one_bound = kErfOneBoundF32,
    .erf_small_poly = kErfSmallF32,
    .erf_tail_starts = kErfTailStartsF32,
    .erf_tail_centers = kErfTailCentersF32,
    .erf_tail_poly = kErfTailF32,
};

inline const LaneMath kF64 = {
    .mantissa_bits = 52,
    .lane_bits = 64,
    .sign_mask = 0x8000000000000000ull,
    .mantissa_mask = 0x000fffffffffffffull,
    .magic = 6755399441055744.0,
    .exponent_bias = 1023,
    .split = 134217729.0,
    .ln2_hi = 0.6931471805598903,
    .ln2_lo = 5.497923018708371e-14,
    .exp_min = -746.0,
    .exp_max = 710.0,
    .min_normal = 0x1p-1022,
    .subnormal_shift = 54,
    .sqrt_half_bits = 0x3fe6a09e667f3bcdull,
    .exp_poly = kExpF64,
    .sin_poly = kSinF64,
    .cos_poly = kCosF64,
    .log_poly = kLogF64,
    .tanh_poly = kTanhF64,
    .pio2 = kPio2F64,
    .sin_half_poly = kSinHalfF64,
    .pio2_fma = kPio2FmaF64,
    .trig_fast_limit = 1048576.0,
    .two_over_pi_scale = kTwoOverPiScaleF64,
    .two_over_pi = kTwoOverPiF64,
    .tanh_max = 20.0,
    .erf_small_bound = kErfSmallBoundF64,
    .erf_one_bound = kErfOneBoundF64,
    .erf_small_poly = kErfSmallF64,
    .erf_tail_starts = kErfTailStartsF64,
    .erf_tail_centers = kErfTailCentersF64,
    .erf_tail_poly = kErfTailF64,
};

// An unevaluated sum hi + lo with |lo| <= ulp(hi) / 2.
template <class V>
struct Pair {
  V hi, lo;
};

// a + b exactly, given |a| >= |b| (or a == 0).
template <class O>
Pair<typename O::Vec> fastTwoSum(O& o, typename O::Vec a, typename O::Vec b) {
  using Vec = typename O::Vec;
  Vec s = o.add(a, b);
  return {s, o.sub(b, o.sub(s, a))};
}

// a + b exactly, whatever their magnitudes (Knuth's two-sum).
template <class O>
Pair<typename O::Vec> twoSum(O& o, typename O::Vec a, typename O::Vec b) {
  using Vec = typename O::Vec;
  const Vec s = o.add(a, b);
  const Vec b_part = o.sub(s, a);
  const Vec a_part = o.sub(s, b_part);
  return {s, o.add(o.sub(a, a_part), o.sub(b, b_part))};
}

// a * b exactly (barring overflow): FMA where fused, else Dekker's product.
template <class O>
Pair<typename O::Vec> twoProd(O& o, typename O::Vec a, typename O::Vec b) {
  using Vec = typename O::Vec;
  Vec p = o.mul(a, b);
  if (o.fusedMultiplyAdd()) return {p, o.fma(a, b, o.neg(p))};
  Vec k = o.num(o.c().split);
  auto halves = [&](Vec v) {
    Vec t = o.mul(k, v);
    Vec hi = o.sub(t, o.sub(t, v));
    return Pair<Vec>{hi, o.sub(v, hi)};
  };
  const Pair<Vec> x = halves(a);
  const Pair<Vec> y = halves(b);
  Vec e = o.sub(o.mul(x.hi, y.hi), p);
  e = o.add(e, o.mul(x.hi, y.lo));
  e = o.add(e, o.mul(x.lo, y.hi));
  return {p, o.add(e, o.mul(x.lo, y.lo))};
}

// scale * 2^n for integral |n| <= 2 * bias - 2, as (scale * 2^n1) * 2^n2
// with both powers normal: results that overflow become inf, subnormal ones
// are rounded once.
template <class O>
typename O::Vec scaleByPow2(O& o, typename O::Vec scale, typename O::Vec n) {
  using Vec = typename O::Vec;
  const LaneMath& c = o.c();
  // Adding magic + bias rounds to an integer whose bits, shifted into the
  // exponent field, are 2^integer (the magic's own bits shift out).
  Vec magic = o.num(c.magic + c.exponent_bias);
  Vec t1 = o.fma(n, o.num(0.5), magic);
  Vec n1 = o.sub(t1, magic);
  Vec t2 = o.add(o.sub(n, n1), magic);
  Vec half = o.mul(scale, o.shl(t1, c.mantissa_bits));
  return o.mul(half, o.shl(t2, c.mantissa_bits));
}

// e^(x + xlo); xlo (optional) is a small low-order part of the argument.
template <class O>
typename O::Vec expCore(O& o, typename O::Vec x, const typename O::Vec* xlo) {
  using Vec = typename O::Vec;
  const LaneMath& c = o.c();
  Vec xc = o.minRaw(o.num(c.exp_max), o.maxRaw(o.num(c.exp_min), x));
  Vec magic = o.num(c.magic);
  Vec n = o.sub(o.fma(xc, o.num(1.4426950408889634), magic), magic);
  Vec r = o.fma(n, o.num(-c.ln2_hi), xc);
  r = o.fma(n, o.num(-c.ln2_lo), r);
  if (xlo != nullptr) r = o.add(r, *xlo);
  Vec q = o.fma(o.mul(r, r), o.horner(r, c.exp_poly), r);
  return scaleByPow2(o, o.add(q, o.num(1.0)), n);
}

// m * 2^e = x for positive finite x (subnormals included), with m in
// [sqrt(1/2), sqrt(2)) and e integral. Other inputs give finite garbage.
template <class V>
struct Frexp {
  V m, e;
};

template <class O>
Frexp<typename O::Vec> decompose(O& o, typename O::Vec x) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const LaneMath& c = o.c();
  const Mask tiny = o.cmp(Cmp::kLt, x, o.num(c.min_normal));
  Vec xs = o.select(tiny, o.mul(x, o.num(double(uint64_t{1} << c.subnormal_shift))), x);
  // Offsetting the bits by 1.0 - sqrt(1/2) carries into the exponent exactly
  // when the mantissa is >= sqrt(2).
  const uint64_t one_bits = uint64_t(c.exponent_bias) << c.mantissa_bits;
  Vec u = o.intAdd(xs, o.bits(one_bits - c.sqrt_half_bits));
  Vec m = o.intAdd(o.bitAnd(u, o.bits(c.mantissa_mask)), o.bits(c.sqrt_half_bits));
  // The biased exponent as a float: OR it into the mantissa of 2^p.
  const double two_p = double(uint64_t{1} << c.mantissa_bits);
  Vec biased = o.bitOr(o.shr(u, c.mantissa_bits), o.num(two_p));
  const double base = two_p + c.exponent_bias;
  Vec e = o.sub(biased, o.select(tiny, o.num(base + c.subnormal_shift), o.num(base)));
  return {m, e};
}

// log(x) for positive finite x.
template <class O>
typename O::Vec logCore(O& o, typename O::Vec x) {
  using Vec = typename O::Vec;
  const LaneMath& c = o.c();
  const Frexp<Vec> fr = decompose(o, x);
  Vec one = o.num(1.0);
  Vec f = o.sub(fr.m, one);
  Vec s = o.div(f, o.add(f, o.num(2.0)));
  Vec z = o.mul(s, s);
  Vec r = o.mul(z, o.horner(z, c.log_poly));
  // log1p(f) = 2s + s * r = f - s * (f - r), since 2s = f - s * f.
  Vec lo = o.fma(fr.e, o.num(c.ln2_lo), o.neg(o.mul(s, o.sub(f, r))));
  return o.fma(fr.e, o.num(c.ln2_hi), o.add(lo, f));
}

// log(x) as hi + lo, accurate to a few units of 2^-2p relative for positive
// finite x: s = f / (2 + f) and the s^3 term are carried as pairs.
template <class O>
Pair<typename O::Vec> logExtCore(O& o, typename O::Vec x) {
  using Vec = typename O::Vec;
  const LaneMath& c = o.c();
  const Frexp<Vec> fr = decompose(o, x);
  Vec two = o.num(2.0);
  Vec f = o.sub(fr.m, o.num(1.0));
  const Pair<Vec> d = fastTwoSum(o, two, f);
  Vec s_hi = o.div(f, d.hi);
  const Pair<Vec> p = twoProd(o, s_hi, d.hi);
  Vec rem = o.sub(o.sub(o.sub(f, p.hi), p.lo), o.mul(s_hi, d.lo));
  Vec s_lo = o.div(rem, d.hi);
  // s^3 * c0 as a pair.
  const Pair<Vec> z = twoProd(o, s_hi, s_hi);
  Vec z_lo = o.fma(o.mul(two, s_hi), s_lo, z.lo);
  const Pair<Vec> cube = twoProd(o, z.hi, s_hi);
  Vec cube_lo = o.fma(z.hi, s_lo, o.fma(z_lo, s_hi, cube.lo));
  Vec c0 = o.num(c.log_poly[0]);
  const Pair<Vec> lead = twoProd(o, cube.hi, c0);
  Vec lead_lo = o.fma(cube_lo, c0, lead.lo);
  // The rest of the series, s^5 * P1(z), is small enough for plain arithmetic.
  Vec rest = o.mul(o.mul(cube.hi, z.hi), o.horner(z.hi, c.log_poly.subspan(1)));
  // log1p(f) = 2 s + lead + rest.
  const Pair<Vec> l = fastTwoSum(o, o.add(s_hi, s_hi), lead.hi);
  Vec l_lo = o.add(o.add(l.lo, o.add(s_lo, s_lo)), o.add(lead_lo, rest));
  // + e * ln2, e * ln2_hi exact.
  const Pair<Vec> sum = fastTwoSum(o, o.mul(fr.e, o.num(c.ln2_hi)), l.hi);
  Vec lo = o.add(sum.lo, o.fma(fr.e, o.num(c.ln2_lo), l_lo));
  return fastTwoSum(o, sum.hi, lo);
}

// The reduction of a large finite a >= 0 (Payne-Hanek): a * 2/pi = j + f
// with j integral and |f| <= 1/2, from the products of a with the chunks of
// 2/pi, each taken exactly (twoProd) and reduced modulo 4. Every bit of the
// products that matters is summed exactly in three fixed-point limbs: s1
// holds multiples of g, s2 multiples of g^2 (carried into s1), s3 the rest
// (rounded, far below the last bit of the result). Returns r = f * pi/2 and
// t = j + magic, whose low bits hold j mod 4 as in the fast path.
template <class V>
struct Reduced {
  V r, t;
};

template <class O>
Reduced<typename O::Vec> reduceLarge(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  const LaneMath& c = o.c();
  const int p = c.mantissa_bits + 1;
  const double g = std::ldexp(1.0, 3 - p);
  const double g2 = g * g;
  // v rounded to a multiple of `grid`, exactly, for |v| <= 2^(p-2) * grid:
  // adding 1.5 * 2^(p-1) * grid lands in the binade whose ulp is `grid`.
  auto onGrid = [&](Vec v, double grid) {
    Vec m = o.num(1.5 * std::ldexp(grid, p - 1));
    return o.sub(o.add(v, m), m);
  };
  Vec zero = o.zero();
  Vec q = zero, s1 = zero, s2 = zero, s3 = zero;
  Vec quarter = o.num(0.25), minus_four = o.num(-4.0);
  // One exact term of the sum: its multiple of 4 dropped (|t| <= 2), g's
  // part into s1, g^2's part into s2, the rest into s3.
  auto add = [&](Vec t) {
    t = o.fma(o.round(o.mul(t, quarter)), minus_four, t);
    Vec hi = onGrid(t, g);
    Vec rest = o.sub(t, hi);
    Vec mid = onGrid(rest, g2);
    s3 = o.add(s3, o.sub(rest, mid));
    s1 = o.add(s1, hi);
    s2 = o.add(s2, mid);
  };
  Vec scaled = o.mul(a, o.num(std::ldexp(1.0, -c.two_over_pi_scale)));
  for (double chunk : c.two_over_pi) {
    const Pair<Vec> prod = twoProd(o, scaled, o.num(chunk));
    add(prod.hi);
    add(prod.lo);
    // Once per chunk (two terms): s2's multiple of g into s1 (|s2| <= 3g/2
    // before, g/2 after), then s1's integer into q (|s1| <= 9/2 + g before,
    // a multiple of g with at most p bits, 1/2 + g after).
    Vec carry = onGrid(s2, g);
    s2 = o.sub(s2, carry);
    s1 = o.add(s1, carry);
    Vec n = o.round(s1);
    s1 = o.sub(s1, n);
    q = o.add(q, n);
  }
  // f = s1 + s2 + s3 as a pair (|s1| >= |s2| unless s1 == 0), then times pi/2.
  const Pair<Vec> f = fastTwoSum(o, s1, s2);
  Vec f_lo = o.add(f.lo, s3);
  // pi/2 to twice the lane precision: the first two full pieces.
  Vec pio2_hi = o.num(c.pio2_fma[0]), pio2_lo = o.num(c.pio2_fma[1]);
  const Pair<Vec> r = twoProd(o, f.hi, pio2_hi);
  Vec r_lo = o.fma(f.hi, pio2_lo, o.fma(f_lo, pio2_hi, r.lo));
  // j mod 4 in [-2, 2]; magic's low mantissa bits are zero.
  Vec j = o.fma(o.round(o.mul(q, quarter)), minus_four, q);
  return {o.add(r.hi, r_lo), o.add(j, o.num(c.magic))};
}

// sin(r + j pi/2) (cos(r + j pi/2) when `cosine`) for |r| <= pi/4, with
// the low bits of t holding j: both polynomials, the quadrant picking one
// and the sign. The slow path's evaluation.
template <class O>
typename O::Vec quadrantSinCos(O& o, typename O::Vec r, typename O::Vec t, bool cosine) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const LaneMath& c = o.c();
  Vec one = o.num(1.0);
  Vec z = o.mul(r, r);
  Vec sin_r = o.fma(o.mul(r, z), o.horner(z, c.sin_poly), r);
  // cos r = w + ((1 - w) - z/2 + z^2 P(z)) with w = 1 - z/2 and the
  // rounding error of w recovered exactly.
  Vec hz = o.mul(z, o.num(0.5));
  Vec w = o.sub(one, hz);
  Vec tail = o.fma(o.mul(z, z), o.horner(z, c.cos_poly), o.sub(o.sub(one, w), hz));
  Vec cos_r = o.add(w, tail);
  // Quadrant q = j (+1 for cosine): odd q takes cos r; q & 2 flips the sign.
  Vec q = cosine ? o.intAdd(t, o.bits(1)) : t;
  const Mask odd = o.cmp(Cmp::kGt, o.bitOr(o.bitAnd(q, o.bits(1)), one), one);
  Vec v = o.select(odd, cos_r, sin_r);
  return o.bitXor(v, o.bitAnd(o.shl(q, c.lane_bits - 2), o.bits(c.sign_mask)));
}

// a * b + c where the caller reads `c` no more: ops types that can reuse
// c's register for the result say so with fmaLast (x86-64); the others
// compute a plain fma.
template <class O>
typename O::Vec fmaLast(O& o, typename O::Vec a, typename O::Vec b, typename O::Vec c) {
  if constexpr (requires { o.fmaLast(a, b, c); }) {
    return o.fmaLast(a, b, c);
  } else {
    return o.fma(a, b, c);
  }
}

// Whether the ops type has three-input bitwise ops in one instruction
// (AVX-512's ternary logic), for which sinCos takes another order.
template <class O>
bool hasTernaryLogic(const O& o) {
  if constexpr (requires { o.ternaryLogic(); }) {
    return o.ternaryLogic();
  } else {
    return false;
  }
}

// a ^ (b & m), a | (b & m) and a ^ b ^ m, bitwise: one instruction where the ops type
// has them (AVX-512's ternary logic), else two.
template <class O>
typename O::Vec xorAnd(O& o, typename O::Vec a, typename O::Vec b, typename O::Vec m) {
  if constexpr (requires { o.xorAnd(a, b, m); }) {
    return o.xorAnd(a, b, m);
  } else {
    return o.bitXor(a, o.bitAnd(b, m));
  }
}

template <class O>
typename O::Vec orAnd(O& o, typename O::Vec a, typename O::Vec b, typename O::Vec m) {
  if constexpr (requires { o.orAnd(a, b, m); }) {
    return o.orAnd(a, b, m);
  } else {
    return o.bitOr(a, o.bitAnd(b, m));
  }
}

template <class O>
typename O::Vec xor3(O& o, typename O::Vec a, typename O::Vec b, typename O::Vec m) {
  if constexpr (requires { o.xor3(a, b, m); }) {
    return o.xor3(a, b, m);
  } else {
    return o.bitXor(a, o.bitXor(b, m));
  }
}

// The slow path of sinCos below: for the lanes with a = |x| beyond
// trig_fast_limit (+inf included), sin(a) (cos(a) when `cosine`) by the exact
// reduction; `fast` in the others.
template <class O>
typename O::Vec sinCosLarge(O& o, typename O::Vec a, typename O::Vec fast, bool cosine) {
  const auto large = o.cmp(Cmp::kGt, a, o.num(o.c().trig_fast_limit));
  const Reduced<typename O::Vec> big = reduceLarge(o, a);
  return o.select(large, quadrantSinCos(o, big.r, big.t, cosine), fast);
}

// sin(x), or cos(x) when `cosine`, from a = |x| (sin takes the sign of x
// last, so sin(-0) = -0; cos is even). Within the fast range, a = k pi/2 +
// r with |r| <= pi/2 and k even for sin (k = 2 round(a/pi)) and odd for cos
// (k = 2 round(a/pi - 1/2) + 1), so one polynomial serves: sin a =
// (-1)^(k/2) sin r, cos a = -(-1)^((k-1)/2) sin r, clamped to [-1, 1]. k
// has at most 13 (f32) or 20 (f64) bits there; the Cody-Waite pieces of
// pi/2 are three of full precision with a fused multiply-add, else five
// whose products with k are exact. Beyond (a rarely taken branch): the
// exact reduction, evaluated by quadrant: inline, or out of line where the
// ops type provides sinCosLarge(a, fast, cosine) (x86-64 calls a host
// function that runs the same algorithm over HostOps, host_ops.h, which keeps
// the rarely taken path out of every kernel's code).
template <class O>
typename O::Vec sinCos(O& o, typename O::Vec x, bool cosine) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const LaneMath& c = o.c();
  Vec a = o.abs(x);
  Vec magic = o.num(c.magic);
  Vec inv_pi = o.num(0.3183098861837907);
  // n = round(a/pi) (sin) or round(a/pi - 1/2) (cos); t's low bit is n's.
  Vec t = cosine ? o.add(o.fma(a, inv_pi, o.num(-0.5)), magic) : o.fma(a, inv_pi, magic);
  Vec n = o.sub(t, magic);
  // r = a - k pi/2: for sin k = 2n, taken as n times the doubled pieces (the
  // same exact products, one op fewer).
  Vec k = cosine ? o.fma(n, o.num(2.0), o.num(1.0)) : n;
  const double scale = cosine ? 1.0 : 2.0;
  const std::span<const double> pieces = o.fusedMultiplyAdd() ? c.pio2_fma : c.pio2;
  Vec r = o.fma(k, o.num(-scale * pieces[0]), a);
  for (size_t i = 1; i < pieces.size(); ++i) r = fmaLast(o, k, o.num(-scale * pieces[i]), r);
  // (-1)^n from n's low bit, shifted into the sign (the other bits zero);
  // cos flips it once more, sin takes the sign of x with it.
  Vec sign = o.shl(t, c.lane_bits - 1);
  Vec sign_mask = o.bits(c.sign_mask);
  Vec result[1];
  if (hasTernaryLogic(o)) {
    // The polynomial is odd and evaluated symmetrically: on |r| it gives
    // the same magnitude, clamped by one min (NaN kept), and r's sign joins
    // the others in one ternary op. The same bits as below.
    Vec ra = o.abs(r);
    Vec z = o.mul(ra, ra);
    Vec y = o.minRaw(o.num(1.0), fmaLast(o, o.mul(ra, z), o.horner(z, c.sin_half_poly), ra));
    result[0] = xorAnd(o, y, xor3(o, sign, cosine ? sign_mask : x, r), sign_mask);
  } else {
    Vec z = o.mul(r, r);
    Vec y = fmaLast(o, o.mul(r, z), o.horner(z, c.sin_half_poly), r);
    y = o.minRaw(o.num(1.0), o.maxRaw(o.num(-1.0), y));
    result[0] = cosine ? xor3(o, y, sign, sign_mask) : xorAnd(o, y, o.bitXor(sign, x), sign_mask);
  }
  // +-inf takes the exact reduction too, which turns it into NaN. That path
  // works on a = |x|: sin's lanes there take the sign of x afterwards (and
  // the others lose it before, to get it back unchanged).
  const Mask large = o.cmp(Cmp::kGt, a, o.num(c.trig_fast_limit));
  o.whenAny(large, std::span<Vec>(result), [&] {
    Vec fast = cosine ? result[0] : xorAnd(o, result[0], x, sign_mask);
    if constexpr (requires { o.sinCosLarge(a, fast, cosine); }) {
      fast = o.sinCosLarge(a, fast, cosine);
    } else {
      fast = sinCosLarge(o, a, fast, cosine);
    }
    result[0] = cosine ? fast : xorAnd(o, fast, x, sign_mask);
  });
  return result[0];
}

// log(x) with its special values: log(+-0) = -inf, log(x < 0) = NaN,
// log(+inf) = +inf, NaN stays NaN.
template <class O>
typename O::Vec logSpecial(O& o, typename O::Vec x, typename O::Vec finite_result) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  Vec inf = o.num(kInf);
  const Mask ok = o.both(o.cmp(Cmp::kGt, x, o.zero()), o.cmp(Cmp::kLt, x, inf));
  Vec other = o.select(o.cmp(Cmp::kLt, x, o.zero()), o.num(kNaN), x);
  other = o.select(o.cmp(Cmp::kEq, x, o.zero()), o.num(-kInf), other);
  return o.select(ok, finite_result, other);
}

template <class O>
typename O::Vec sinOf(O& o, typename O::Vec a) {
  return sinCos(o, a, false);
}

template <class O>
typename O::Vec cosOf(O& o, typename O::Vec a) {
  return sinCos(o, a, true);
}

template <class O>
typename O::Vec expOf(O& o, typename O::Vec a) {
  return expCore(o, a, nullptr);
}

template <class O>
typename O::Vec logOf(O& o, typename O::Vec a) {
  return logSpecial(o, a, logCore(o, a));
}

// |x| < 0.625: odd polynomial; beyond: 1 - 2 / (e^(2|x|) + 1), which
// saturates to 1 once e^(2|x|) overflows. The sign of x is put back last.
template <class O>
typename O::Vec tanhOf(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  const LaneMath& c = o.c();
  // |a| clamped to tanh_max (NaN comes through).
  Vec x = o.minRaw(o.num(c.tanh_max), o.abs(a));
  Vec z = o.mul(x, x);
  Vec small = o.fma(o.mul(x, z), o.horner(z, c.tanh_poly), x);
  // Beyond kTanhSmall: 1 - 2 / (e + 1), e = e^(2x) = 2^n (1 + q) with q =
  // e^r - 1, r = 2x - n ln 2. 2x is at most 2 tanh_max, so 2^n is one
  // normal power (the magic with the bias added puts n + bias in the low
  // bits of t, shifted into the exponent) and e one fma.
  Vec y = o.add(x, x);
  Vec magic = o.num(c.magic + c.exponent_bias);
  Vec t = o.fma(y, o.num(1.4426950408889634), magic);
  Vec n = o.sub(t, magic);
  Vec r = o.fma(n, o.num(-c.ln2_hi), y);
  r = fmaLast(o, n, o.num(-c.ln2_lo), r);
  Vec q = fmaLast(o, o.mul(r, r), o.horner(r, c.exp_poly), r);
  Vec s = o.shl(t, c.mantissa_bits);
  Vec one = o.num(1.0);
  Vec e = o.fma(s, q, s);
  Vec large = o.sub(one, o.div(o.num(2.0), o.add(e, one)));
  Vec v = o.select(o.cmp(Cmp::kLt, x, o.num(kTanhSmall)), small, large);
  return orAnd(o, v, a, o.bits(c.sign_mask));
}

// With e = exp(-|x|): 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0.
template <class O>
typename O::Vec sigmoidOf(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  Vec e = expCore(o, o.neg(o.abs(a)), nullptr);
  Vec one = o.num(1.0);
  Vec numer = o.select(o.cmp(Cmp::kLt, a, o.zero()), e, one);
  return o.div(numer, o.add(one, e));
}

// |a|^b = exp(b * log|a|) with log|a| and the product carried as pairs; then
// the C99 rules for signs, zeros, infinities and NaN (see MATH_ACCURACY.md).
template <class O>
typename O::Vec powOf(O& o, typename O::Vec a, typename O::Vec b) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const LaneMath& c = o.c();
  Vec inf = o.num(kInf);
  Vec zero = o.zero();
  Vec one = o.num(1.0);
  Vec ax = o.abs(a);

  const Pair<Vec> lg = logExtCore(o, ax);
  // Outside (0, inf) the log is -inf (for 0), inf or NaN, with no low part.
  const Mask positive_finite = o.both(o.cmp(Cmp::kGt, ax, zero), o.cmp(Cmp::kLt, ax, inf));
  Vec log_hi =
      o.select(positive_finite, lg.hi, o.select(o.cmp(Cmp::kEq, ax, zero), o.neg(inf), ax));
  Vec log_lo = o.select(positive_finite, lg.lo, zero);

  const Pair<Vec> y = twoProd(o, b, log_hi);
  Vec y_lo = o.fma(b, log_lo, y.lo);
  // Where exp saturates anyway the low part does not matter (and may be NaN).
  y_lo = o.select(o.cmp(Cmp::kLt, o.abs(y.hi), o.num(2 * c.exp_max)), y_lo, zero);
  Vec v = expCore(o, y.hi, &y_lo);

  // Negative base: odd integral b gives the sign of a (also for -0 and -inf),
  // a non-integral b gives NaN for finite a < 0.
  Vec half = o.mul(b, o.num(0.5));
  const Mask integral = o.cmp(Cmp::kEq, o.round(b), b);
  const Mask odd = o.both(integral, o.cmp(Cmp::kNe, o.round(half), half));
  Vec sign_mask = o.bits(c.sign_mask);
  v = o.bitOr(v, o.select(odd, o.bitAnd(a, sign_mask), zero));
  const Mask negative_finite = o.both(o.cmp(Cmp::kLt, a, zero), o.cmp(Cmp::kGt, a, o.neg(inf)));
  const Mask fractional = o.cmp(Cmp::kNe, o.round(b), b);
  v = o.select(o.both(negative_finite, fractional), o.num(kNaN), v);

  // pow(1, b) = pow(a, 0) = pow(-1, +-inf) = 1, even for NaN a or b.
  const Mask unit = o.either(o.either(o.cmp(Cmp::kEq, a, one), o.cmp(Cmp::kEq, b, zero)),
                             o.both(o.cmp(Cmp::kEq, ax, one), o.cmp(Cmp::kEq, o.abs(b), inf)));
  return o.select(unit, one, v);
}

// Rounding to integers from the one rounding primitive (to nearest even):
// r = round(x) is off by at most one toward the wanted side, and exact
// where |x| >= 2^mantissa_bits (every such float is an integer). Zeros keep
// their sign (floor(-0) = -0, ceil(-0.5) = -0); NaN and infinities pass.
template <class O>
typename O::Vec floorOf(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  Vec r = o.round(a);
  return o.select(o.cmp(Cmp::kGt, r, a), o.sub(r, o.num(1.0)), r);
}

template <class O>
typename O::Vec ceilOf(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  Vec r = o.round(a);
  return o.select(o.cmp(Cmp::kLt, r, a), o.add(r, o.num(1.0)), r);
}

template <class O>
typename O::Vec roundOf(O& o, typename O::Vec a) {
  return o.round(a);  // half to even
}

// log(1 + x) = log(u) * (x / (u - 1)), u = 1 + x rounded (Goldberg's
// formula: the quotient corrects the rounding of u, so small x keep their
// relative accuracy); u == 1 gives x itself (tiny x and +-0), +inf gives
// +inf. x = -1 gives -inf and x < -1 NaN through log.
template <class O>
typename O::Vec log1pOf(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  Vec one = o.num(1.0);
  Vec u = o.add(one, a);
  Vec r = o.mul(logOf(o, u), o.div(a, o.sub(u, one)));
  r = o.select(o.cmp(Cmp::kEq, u, one), a, r);
  return o.select(o.cmp(Cmp::kEq, a, o.num(kInf)), a, r);
}

// exp(x) - 1 = (u - 1) * (x / log(u)), u = exp(x) (Kahan's formula: the
// quotient corrects the error of u near 1); u == 1 gives x (tiny x and
// +-0), u - 1 == -1 gives -1 (x below the point where exp(x) is under half
// an ulp of 1, -inf too), u = +inf gives +inf.
template <class O>
typename O::Vec expm1Of(O& o, typename O::Vec a) {
  using Vec = typename O::Vec;
  Vec one = o.num(1.0);
  Vec u = expOf(o, a);
  Vec m = o.sub(u, one);
  Vec r = o.mul(m, o.div(a, logOf(o, u)));
  r = o.select(o.cmp(Cmp::kEq, u, one), a, r);
  r = o.select(o.cmp(Cmp::kEq, m, o.num(-1.0)), m, r);
  return o.select(o.cmp(Cmp::kEq, u, o.num(kInf)), u, r);
}

// erf: an odd polynomial near 0, 1 - exp(L(|x| - c)) beyond (L fits
// log erfc on each interval of the tail), 1 from where erf rounds to 1; the
// sign of x put back last. The tail's coefficients are picked per lane, one
// select per interval and coefficient, so one Horner loop serves every lane.
template <class O>
typename O::Vec erfOf(O& o, typename O::Vec x) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const LaneMath& c = o.c();
  Vec a = o.abs(x);
  Vec z = o.mul(x, x);
  // |x| < erf_small_bound: x + x S1(z).
  Vec small = o.fma(x, o.horner(z, c.erf_small_poly), x);
  // The tail on |x|.
  const size_t intervals = c.erf_tail_centers.size();
  const size_t n = c.erf_tail_poly.size() / intervals;
  std::vector<Mask> in;  // in[k - 1]: |x| at least the start of interval k
  for (size_t k = 1; k < intervals; ++k) in.push_back(o.cmp(Cmp::kGe, a, o.num(c.erf_tail_starts[k])));
  auto pick = [&](auto value_of) {
    Vec v = o.num(value_of(size_t{0}));
    for (size_t k = 1; k < intervals; ++k) v = o.select(in[k - 1], o.num(value_of(k)), v);
    return v;
  };
  Vec t = o.sub(a, pick([&](size_t k) { return c.erf_tail_centers[k]; }));
  Vec p = pick([&](size_t k) { return c.erf_tail_poly[k * n + n - 1]; });
  for (size_t j = n - 1; j-- > 0;) p = o.fma(p, t, pick([&](size_t k) { return c.erf_tail_poly[k * n + j]; }));
  Vec one = o.num(1.0);
  Vec tail = o.sub(one, expOf(o, p));
  tail = o.select(o.cmp(Cmp::kGe, a, o.num(c.erf_one_bound)), one, tail);  // +inf too
  tail = orAnd(o, tail, x, o.bits(c.sign_mask));
  // NaN fails the comparison and takes the tail, which keeps it NaN.
  return o.select(o.cmp(Cmp::kLt, a, o.num(c.erf_small_bound)), small, tail);
}

}  // namespace accy::math

#endif  // ACCY_COMPILER_CODEGEN_MATH_ELEMENTARY_H_
