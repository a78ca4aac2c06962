#!/usr/bin/python3
"""Fits and verifies the erf(x) polynomials used by the f32 and f64 lane code.

Algorithm (a = |x|, result takes the sign of x; NaN handled by the caller):
  a < T        erf = fma(x, S1(z), x),    z = x*x,  S1(z) = erf(x)/x - 1
                                          (S1(0) = 2/sqrt(pi) - 1)
  T <= a < B   erf = 1 - exp(L(a - c))    (L ~ log(erfc(a)) on [T, B))
  a >= B       erf = 1
erf = x * S(z) with S = S1 + 1 is the same polynomial, but rounding S(0) =
2/sqrt(pi) to float32 alone costs 0.87 ulp relative (it lies almost halfway
between two floats), so that form is fitted and measured for comparison only.
Every polynomial is evaluated with Horner steps s = fma(s, t, c_j), each rounded
once to the lane type; x*x, a-c and 1-e are single lane-rounded operations and
exp is the lane exp.

Fitting: weighted minimax (discrete Remez on a dense Chebyshev grid) with mpmath
at 50 digits.  S is fitted for relative error of erf; L is fitted with weight
erfc(a), i.e. for the absolute error of 1 - exp(L), which is what matters for a
result in [0.5, 1) whose ulp is constant.  Coefficients are rounded to the lane
type lowest degree first, each to whichever of its two neighbouring lane values
leaves the smaller error once the remaining ones are refitted.

Verification: the algorithm is simulated operation by operation with exactly
rounded lane arithmetic (integer arithmetic, ties to even, subnormals included),
exp taken as the correctly rounded exp of the lane-typed argument, and also as
a lane neighbour of that lying within 1 ulp of the exact exp (the values an
exp with error below 1 ulp can return).  The reference is mpmath erf at 120
bits; the error is |got - ref| / ulp(ref), ulp(ref) being the lane spacing at
ref.

Usage: /usr/bin/python3 tools/math/fit_erf.py     (deterministic; prints C++)
       /usr/bin/python3 tools/math/fit_erf.py --scan-f32=LO,HI   (every float32
       in [LO, HI) instead of the sampled test set; about 10k points a second)
"""

import math
import random
import struct
import sys
import time

import mpmath
from mpmath import mp, mpf

mp.dps = 50

# ----------------------------------------------------------------------------
# Configuration.

CONFIG = {
    'F32': dict(
        prec=24, emin=-149,   # precision bits, exponent of the smallest subnormal
        T=0.84375,            # small-argument bound
        B=3.921875,           # erf rounds to 1 in f32 from 3.91920584 on
        n_small=6,            # coefficients of S
        n_tail=7,             # coefficients of L (the same on every interval)
        intervals=[(0.84375, 3.921875, 1.125)],   # (lo, hi, center)
        n_points=220000,
    ),
    'F64': dict(
        prec=53, emin=-1074,
        T=1.0,
        B=5.9375,             # erf rounds to 1 in f64 from 5.92158720 on
        n_small=12,
        n_tail=18,
        intervals=[(1.0, 5.9375, 1.25)],
        n_points=220000,
    ),
}

GRID = 600          # Remez grid points per fit
REF_PREC = 120      # bits for the reference erf and the correctly rounded exp

# ----------------------------------------------------------------------------
# Exact lane arithmetic on binary floats held as Python floats.


def _split(x):
    """x (Python float) -> (n, e) with x == n * 2**e exactly."""
    if x == 0:
        return 0, 0
    m, e = math.frexp(x)
    return int(m * (1 << 53)), e - 53


def _round(n, e, prec, emin):
    """Round n * 2**e to prec bits (lsb exponent >= emin), ties to even."""
    if n == 0:
        return 0.0
    neg = n < 0
    n = -n if neg else n
    shift = n.bit_length() - prec
    if e + shift < emin:
        shift = emin - e
    if shift > 0:
        q, r = divmod(n, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and (q & 1)):
            q += 1
        n, e = q, e + shift
    v = math.ldexp(n, e)
    return -v if neg else v


class Lane:
    def __init__(self, prec, emin):
        self.prec, self.emin = prec, emin

    def rnd_mpf(self, v):
        s, man, exp, _ = v._mpf_
        if man == 0:
            return 0.0
        return _round(-man if s else man, exp, self.prec, self.emin)

    def rnd(self, x):
        if isinstance(x, float):
            return _round(*_split(x), self.prec, self.emin)
        return self.rnd_mpf(mpf(x))

    def fma(self, a, b, c):
        na, ea = _split(a)
        nb, eb = _split(b)
        nc, ec = _split(c)
        p, ep = na * nb, ea + eb
        if nc == 0:
            return _round(p, ep, self.prec, self.emin)
        if p == 0:
            return _round(nc, ec, self.prec, self.emin)
        if ep <= ec:
            return _round(p + (nc << (ec - ep)), ep, self.prec, self.emin)
        return _round((p << (ep - ec)) + nc, ec, self.prec, self.emin)

    def mul(self, a, b):
        return self.fma(a, b, 0.0)

    def add(self, a, b):
        return self.fma(a, 1.0, b)

    def sub(self, a, b):
        return self.fma(a, 1.0, -b)

    def step(self, x, up):
        """Next lane value above (up) or below x; x >= 0."""
        if x == 0:
            return 2.0 ** self.emin if up else 0.0
        n, e = _split(x)
        shift = n.bit_length() - self.prec
        if e + shift < self.emin:
            shift = self.emin - e
        n, e = n >> shift, e + shift
        if up:
            return math.ldexp(n + 1, e)
        if n == (1 << (self.prec - 1)) and e > self.emin:
            return math.ldexp(2 * n - 1, e - 1)
        return math.ldexp(n - 1, e)

    def ulp_exp(self, v):
        """Exponent of the lane spacing at |v| (v an mpf, v != 0)."""
        _, man, exp, bc = v._mpf_
        return max(exp + bc - 1 - self.prec + 1, self.emin)

    def exp_cr(self, v):
        with mpmath.workprec(REF_PREC):
            return self.rnd_mpf(mpmath.exp(mpf(v)))


def horner(lane, coef, t):
    s = coef[-1]
    for c in reversed(coef[:-1]):
        s = lane.fma(s, t, c)
    return s

# ----------------------------------------------------------------------------
# Weighted discrete Remez.


def cheb_grid(lo, hi, n):
    lo, hi = mpf(lo), mpf(hi)
    mid, hw = (lo + hi) / 2, (hi - lo) / 2
    return [mid - hw * mpmath.cos(mp.pi * i / (n - 1)) for i in range(n)]


def remez(xs, F, W, Phi, tol=mpf('1e-8'), maxit=80):
    """min over c of max_i |W_i (F_i - sum_j c_j Phi[j][i])|; returns (c, max)."""
    m, N = len(Phi), len(xs)
    ref = sorted({min(range(N), key=lambda i: abs(
        xs[i] - (xs[0] + (xs[-1] - xs[0]) * (1 - mpmath.cos(mp.pi * k / m)) / 2)))
        for k in range(m + 1)})
    c, maxerr = None, None
    for _ in range(maxit):
        A = mpmath.matrix(m + 1, m + 1)
        b = mpmath.matrix(m + 1, 1)
        for r, i in enumerate(ref):
            for j in range(m):
                A[r, j] = Phi[j][i]
            A[r, m] = (-1) ** r / W[i]
            b[r] = F[i]
        sol = mpmath.lu_solve(A, b)
        c, E = [sol[j] for j in range(m)], abs(sol[m])
        err = []
        for i in range(N):
            s = F[i]
            for j in range(m):
                s -= c[j] * Phi[j][i]
            err.append(W[i] * s)
        maxerr = max(abs(e) for e in err)
        if maxerr <= E * (1 + tol):
            break
        # New reference: the extremum of each run of equal sign, thinned to m+1
        # alternating points that keep the largest errors.
        ext, i = [], 0
        while i < N:
            sgn, best = err[i] >= 0, i
            while i < N and (err[i] >= 0) == sgn:
                if abs(err[i]) > abs(err[best]):
                    best = i
                i += 1
            ext.append(best)
        while len(ext) > m + 1:
            k = min(range(len(ext)), key=lambda q: abs(err[ext[q]]))
            if k in (0, len(ext) - 1):
                ext.pop(k)
            elif len(ext) - 2 >= m + 1:
                lo_, hi_ = ext[k - 1], ext[k + 1]
                ext[k - 1:k + 2] = [lo_ if abs(err[lo_]) >= abs(err[hi_]) else hi_]
            elif abs(err[ext[0]]) < abs(err[ext[-1]]):
                ext.pop(0)
            else:
                ext.pop()
        if len(ext) < m + 1:
            break
        ref = ext
    return c, maxerr


def fit_rounded(lane, xs, F, W, Phi, fixed):
    """Remez fit, then round lowest degree first, refitting the rest each time.

    Each coefficient is set to one of the two lane values around its current
    fitted value: the one for which the refitted remaining coefficients give the
    smaller error.  fixed: already-rounded leading coefficients.
    Returns (rounded coefficients, weighted max error of the rounded set)."""
    def residual(F, j, cj):
        return [f - mpf(cj) * p for f, p in zip(F, Phi[j])]

    def maxerr(F):
        return max(abs(w * f) for w, f in zip(W, F))

    coef = list(fixed)
    F = list(F)
    for j, cj in enumerate(fixed):
        F = residual(F, j, cj)
    c, _ = remez(xs, F, W, Phi[len(fixed):])
    for j in range(len(fixed), len(Phi)):
        v = c[0]
        near = lane.rnd_mpf(v)
        other = lane.step(abs(near), (mpf(abs(near)) < abs(v))) if near else 0.0
        other = math.copysign(other, near)
        best = None
        for cand in (near, other):
            Fc = residual(F, j, cand)
            if j + 1 < len(Phi):
                cc, e = remez(xs, Fc, W, Phi[j + 1:])
            else:
                cc, e = [], maxerr(Fc)
            if best is None or e < best[0]:
                best = (e, cand, Fc, cc)
        _, cj, F, c = best
        coef.append(cj)
    return coef, maxerr(F)


def fit_small(lane, cfg, form):
    """S(z) ~ erf(sqrt z)/sqrt z on (0, T^2], relative error of erf.

    form 'mul': erf = x * S(z), S(0) = 2/sqrt(pi) rounded.
    form 'fma': erf = fma(x, S(z), x), i.e. S here is S - 1 of form 'mul',
                S(0) = 2/sqrt(pi) - 1 rounded."""
    zs = cheb_grid(0, mpf(cfg['T']) ** 2, GRID)[1:]
    g = [mpmath.erf(mpmath.sqrt(z)) / mpmath.sqrt(z) for z in zs]
    W = [1 / v for v in g]
    Phi = [[z ** j for z in zs] for j in range(cfg['n_small'])]
    one = 1 if form == 'fma' else 0
    c0 = lane.rnd_mpf(2 / mpmath.sqrt(mp.pi) - one)
    return fit_rounded(lane, zs, [v - one for v in g], W, Phi, [c0])


def fit_tail(lane, cfg, lo, hi, c):
    """L(t) ~ log(erfc(c + t)) on [lo, hi], weight erfc (absolute error of erf)."""
    xs = cheb_grid(lo, hi, GRID)
    ec = [mpmath.erfc(x) for x in xs]
    F = [mpmath.log(v) for v in ec]
    Phi = [[(x - c) ** j for x in xs] for j in range(cfg['n_tail'])]
    return fit_rounded(lane, xs, F, ec, Phi, [])

# ----------------------------------------------------------------------------
# Simulation of the lane algorithm.


def erf_lane(lane, cfg, small, tails, a, exp_shift=0, form='mul'):
    """Lane result for a >= 0.  exp_shift: -1/0/+1 lane steps added to exp."""
    if a < cfg['T']:
        z = lane.mul(a, a)
        s = horner(lane, small, z)
        if form == 'fma':
            return lane.fma(a, s, a), 'small_fma'
        return lane.mul(a, s), 'small_mul'
    if a < cfg['B']:
        for k, (lo, hi, c) in enumerate(cfg['intervals']):
            if a < hi:
                break
        t = lane.sub(a, c)
        l = horner(lane, tails[k], t)
        e = lane.exp_cr(l)
        if exp_shift:
            # The other lane value within 1 ulp of the exact exp, if any.
            with mpmath.workprec(REF_PREC):
                v = mpmath.exp(mpf(l))
                e = lane.step(e, exp_shift > 0)
                if abs(mpf(e) - v) >= mpf(2) ** lane.ulp_exp(v):
                    return None, 'tail%d' % k
        return lane.sub(1.0, e), 'tail%d' % k
    return 1.0, 'one'


def test_points(lane, cfg, rng):
    """Deterministic test set on [0, B + 0.5] (all lane values, a >= 0)."""
    T, B = cfg['T'], cfg['B']
    top = B + 0.5
    n = cfg['n_points']
    pts = set()

    def add(v):
        v = lane.rnd(float(v))
        if 0 <= v <= top:
            pts.add(v)

    def run(v, count):           # count consecutive lane values each side of v
        v = lane.rnd(float(v))
        up = dn = v
        add(v)
        for _ in range(count):
            up = lane.step(up, True)
            add(up)
            if dn > 0:
                dn = lane.step(dn, False)
                add(dn)

    edges = [T, B] + [hi for (_, hi, _) in cfg['intervals'][:-1]]
    for v in edges:
        run(v, 2000)
        for _ in range(n // 40):
            add(v + rng.uniform(-0.02, 0.02))
    for v in (0.0, 2.0 ** lane.emin, 2.0 ** (lane.emin + lane.prec - 1), 0.5, 1.0, 2.0):
        run(v, 50)
    for _ in range(n // 8):            # tiny values, log-uniform down to subnormals
        add(2.0 ** rng.uniform(lane.emin, math.log2(T)))
    for _ in range(n // 8):            # dense just around T
        add(T + rng.uniform(-0.2, 0.2))
    while len(pts) < n:                # the rest: uniform on [0, B + 0.5]
        add(rng.uniform(0, top))
    return sorted(pts)


def f32_range(lo, hi):
    """Every float32 value in [lo, hi) (0 <= lo < hi)."""
    i0 = struct.unpack('<I', struct.pack('<f', lo))[0]
    i1 = struct.unpack('<I', struct.pack('<f', hi))[0]
    return [struct.unpack('<f', struct.pack('<I', i))[0] for i in range(i0, i1)]


def verify(name, lane, cfg, small, tails, pts=None):
    """Returns {region: (max err, x)} for the exp models 'cr' and '1ulp'."""
    if pts is None:
        pts = test_points(lane, cfg, random.Random(20240611 + cfg['prec']))
    worst = {'cr': {}, '1ulp': {}}

    def note(model, region, err, a):
        if err > worst[model].get(region, (-1.0, 0.0))[0]:
            worst[model][region] = (err, a)

    with mpmath.workprec(REF_PREC):
        for a in pts:
            ref = mpmath.erf(mpf(a))
            scale = mpf(2) ** -(lane.ulp_exp(ref) if a > 0 else lane.emin)
            for form in ('fma', 'mul') if a < cfg['T'] else ('fma',):
                r, region = erf_lane(lane, cfg, small[form], tails, a, 0, form)
                err = float(abs(mpf(r) - ref) * scale)
                note('cr', region, err, a)
                if region.startswith('tail'):
                    for step in (-1, 1):
                        r1, _ = erf_lane(lane, cfg, small[form], tails, a, step)
                        if r1 is not None:
                            err = max(err, float(abs(mpf(r1) - ref) * scale))
                note('1ulp', region, err, a)
    return len(pts), worst


def cxx(name, values):
    body = ', '.join('%.17g' % v for v in values)
    return 'inline constexpr double %s[] = {%s};' % (name, body)


def main():
    t0 = time.time()
    args = sys.argv[1:]
    points = scan = None
    if args and args[0].startswith('--points='):
        points = int(args.pop(0).split('=')[1])
    if args and args[0].startswith('--scan-f32='):
        # Optional: also test every float32 in [LO, HI) (slow: ~10k points/s).
        scan = [float(v) for v in args.pop(0).split('=')[1].split(',')]
        args = ['F32']
    for name in args or list(CONFIG):
        cfg = dict(CONFIG[name])
        if points:
            cfg['n_points'] = points
        lane = Lane(cfg['prec'], cfg['emin'])
        for key in ('T', 'B'):
            assert lane.rnd(cfg[key]) == cfg[key]
        small, esmall = {}, {}
        for form in ('fma', 'mul'):
            small[form], esmall[form] = fit_small(lane, cfg, form)
        tails, etails = [], []
        for lo, hi, c in cfg['intervals']:
            assert lane.rnd(c) == c and lane.rnd(hi) == hi
            coef, e = fit_tail(lane, cfg, lo, hi, c)
            tails.append(coef)
            etails.append(e)
        n, worst = verify(name, lane, cfg, small, tails,
                          f32_range(*scan) if scan else None)
        half_ulp = mpf(2) ** -cfg['prec']     # ulp of a result in [0.5, 1)

        def at(model, region):
            e, x = worst[model][region]
            return '%.4f ulp at x = %.17g' % (e, x)

        print('// erf %s: T = %.17g, B = %.17g; S: %d coefficients; L: %d interval(s), '
              '%d coefficients each' % (name, cfg['T'], cfg['B'], cfg['n_small'],
                                       len(tails), cfg['n_tail']))
        print('// |x| < T:      erf(x) = fma(x, S1(x*x), x), S1(z) = sum_j kErfSmall%s[j] z^j'
              % name)
        print('// T <= |x| < B: erf(|x|) = 1 - exp(L(|x| - c_k)), L(t) = sum_j kErfTail%s[j] t^j'
              % (name if len(tails) == 1 else '<k>' + name))
        print('// |x| >= B:     erf(|x|) = 1; the result takes the sign of x')
        print('inline constexpr double kErfSmallBound%s = %.17g;' % (name, cfg['T']))
        print('inline constexpr double kErfOneBound%s = %.17g;' % (name, cfg['B']))
        print(cxx('kErfSmall' + name, small['fma']))
        if len(tails) == 1:
            print('inline constexpr double kErfTailCenter%s = %.17g;'
                  % (name, cfg['intervals'][0][2]))
            print(cxx('kErfTail' + name, tails[0]))
        else:
            print(cxx('kErfTailBounds' + name, [hi for (_, hi, _) in cfg['intervals']]))
            print(cxx('kErfTailCenters' + name, [c for (_, _, c) in cfg['intervals']]))
            for k, coef in enumerate(tails):
                print(cxx('kErfTail%d%s' % (k, name), coef))
        print('// For comparison only, erf(x) = x * S(x*x) with S(0) = 2/sqrt(pi):')
        print('//   {%s}' % ', '.join('%.17g' % v for v in small['mul']))
        print('// Fit errors after rounding the coefficients:')
        for form, what in (('fma', 'S1'), ('mul', 'S (x * S form)')):
            print('//   %s: relative error of erf %.3g (<= %.4f ulp)'
                  % (what, esmall[form], esmall[form] / half_ulp))
        for (lo, hi, c), e in zip(cfg['intervals'], etails):
            print('//   L on [%.17g, %.17g), c = %.17g: absolute error of erf %.3g (%.4f ulp)'
                  % (lo, hi, c, e, e / half_ulp))
        where = ('every float32 in [%.17g, %.17g)' % tuple(scan) if scan
                 else 'spread over [0, %.17g]' % (cfg['B'] + 0.5))
        print('// Simulated lane evaluation, %d points %s, max |got - ref| / ulp(ref):'
              % (n, where))
        regions = worst['cr']
        if 'small_fma' in regions:
            print('//   |x| < T:       %s' % at('cr', 'small_fma'))
            print('//   |x| < T:       %s  (x * S form)' % at('cr', 'small_mul'))
        for k in range(len(tails)):
            r = 'tail%d' % k
            if r in regions:
                print('//   interval %d:    %s (exp correctly rounded)' % (k, at('cr', r)))
                print('//                  %s (exp error < 1 ulp)' % at('1ulp', r))
        if 'one' in regions:
            print('//   |x| >= B:      %s' % at('cr', 'one'))
        for model, what in (('cr', 'exp correctly rounded'), ('1ulp', 'exp error < 1 ulp')):
            e = max(v for k, v in worst[model].items() if k != 'small_mul')
            print('//   overall:       %.4f ulp at x = %.17g (%s)' % (e[0], e[1], what))
        print('// elapsed %.1f s' % (time.time() - t0))
        sys.stdout.flush()


if __name__ == '__main__':
    main()
