#!/usr/bin/env python3
"""A small interpreter for the PTX that compiler/codegen/ptx writes.

For checking the emitter's semantics where no GPU is at hand: ptxas (in
ptx_test) proves that the modules assemble, this runs them. It knows only
the instructions the emitter uses, interprets every thread of every block
(blocks one after another; a block's threads until each reaches a barrier,
a warp shuffle or an mma, then the collective step), and rounds like the
hardware (f32 and f64 IEEE round-to-nearest per operation; fma exact for
f64, through double for f32; the .approx instructions as the correctly
rounded function, so fast mode's own error is not measured here).

Usage:
  bazel build //compiler/codegen/ptx:ptx_sim_cases
  mkdir -p /tmp/sim && ACCY_PTX_SIM_DIR=/tmp/sim bazel-bin/compiler/codegen/ptx/ptx_sim_cases
  /usr/bin/python3 compiler/codegen/ptx/ptxsim.py /tmp/sim [CASE ...]
(or bazel test //compiler/codegen/ptx:ptxsim_test, which does both).

Each case N (N.ptx, N.json, N.in<k>, N.out<k>) is run and every output is
compared with the reference evaluator's within the tolerances of
tests/conformance.h (times the case's scale). Standard library only.

Launch mode (one cuLaunchKernel; what the fake CUDA driver,
backends/cuda/testdata/fake_cuda.cc, runs when ACCY_FAKE_CUDA_PTXSIM names
this file):
  /usr/bin/python3 ptxsim.py launch MODULE.ptx ENTRY GRID_X BLOCK_X BUF0 BUF1 ...
runs ENTRY of MODULE.ptx on GRID_X blocks of BLOCK_X threads (which must be
the entry's .reqntid). Each BUF is a file holding the bytes of one device
allocation, passed as the entry's .u64 parameters in order (one per
parameter); every file is read, changed by the kernel and written back in
place. Exit status 0 on success; otherwise 1, with one line on stderr
saying what failed (a load or store outside a buffer, an instruction the
simulator does not know, a deadlock at a barrier, ...), and the files left
as they were.

Serve mode (what the fake driver runs, one process for all its launches):
  /usr/bin/python3 ptxsim.py serve
reads launch requests from stdin, one a line: the launch mode's arguments
separated by tabs. Each gets one line on stdout: "ok", or "failed " and
what failed (as the launch mode says it). Each module text is parsed once.
It exits when stdin ends.
"""

import math
import os
import re
import struct
import sys
from fractions import Fraction

M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1
GLOBAL_SHIFT = 40  # buffer i lives at (i + 1) << 40


_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")
_F64, _U64 = struct.Struct("<d"), struct.Struct("<Q")


def f32_of(bits):
    return _F32.unpack(_U32.pack(bits & M32))[0]


def bits_f32(x):
    try:
        return _U32.unpack(_F32.pack(x))[0]
    except OverflowError:
        return 0x7F800000 if x > 0 else 0xFF800000


def f64_of(bits):
    return _F64.unpack(_U64.pack(bits & M64))[0]


def bits_f64(x):
    return _U64.unpack(_F64.pack(x))[0]


_WIDTHS = {}


def width(t):
    w = _WIDTHS.get(t)
    if w is None:
        w = _WIDTHS[t] = 1 if t == "pred" else int(re.sub(r"\D", "", t))
    return w


def dec(bits, t):
    if t == "f32":
        return f32_of(bits)
    if t == "f64":
        return f64_of(bits)
    if t == "pred":
        return bool(bits)
    w = width(t)
    v = bits & ((1 << w) - 1)
    if t[0] == "s" and v >> (w - 1):
        v -= 1 << w
    return v


def enc(v, t):
    if t == "f32":
        return bits_f32(v)
    if t == "f64":
        return bits_f64(v)
    if t == "pred":
        return 1 if v else 0
    return v & ((1 << width(t)) - 1)


def decoder(t):
    """dec(bits, t) as a function of bits."""
    if t == "f32":
        return f32_of
    if t == "f64":
        return f64_of
    if t == "pred":
        return bool
    w = width(t)
    mask = (1 << w) - 1
    if t[0] == "s":
        sign = 1 << (w - 1)
        return lambda bits: ((bits & mask) ^ sign) - sign
    return lambda bits: bits & mask


def encoder(t):
    """enc(v, t) as a function of v."""
    if t == "f32":
        return bits_f32
    if t == "f64":
        return bits_f64
    if t == "pred":
        return lambda v: 1 if v else 0
    mask = (1 << width(t)) - 1
    return lambda v: v & mask


INT_BINARY = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "rem": lambda x, y: x % y,
    "max": max,
    "min": min,
}


def fdiv(a, b):
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def fsqrt(a):
    if math.isnan(a) or a < 0:
        return math.nan
    return math.sqrt(a)


def ffma(a, b, c, t):
    if t == "f32":
        try:
            return a * b + c  # a * b is exact in double
        except OverflowError:
            return math.nan
    if any(math.isinf(x) or math.isnan(x) for x in (a, b, c)):
        return a * b + c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c  # the sign of zero
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def to_int_sat(x, t):
    w = width(t)
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if t[0] == "s" else (0, (1 << w) - 1)
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return hi if x > 0 else lo
    return max(lo, min(hi, math.trunc(x)))


def round_even(x):
    if math.isnan(x) or math.isinf(x):
        return x
    r = float(round(x))  # Python rounds half to even
    return math.copysign(r, x) if r == 0 else r


def tf32_rna(bits):
    if (bits >> 23) & 0xFF == 0xFF:
        return bits
    return ((bits & M32) + 0x1000) & 0xFFFFE000


class Ctx:
    """What instruction compilation needs: labels, params, shared symbol."""

    def __init__(self, labels, params, shared):
        self.labels, self.params, self.shared = labels, params, shared


SPECIAL = ("%tid.x", "%ctaid.x", "%nctaid.x", "%ntid.x")


def split_operands(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def reader(tok, ctx):
    tok = tok.strip()
    if tok in SPECIAL:
        return lambda th: th.special[tok]
    if tok.startswith("%"):
        return lambda th: th.regs[tok]  # reading an unset register is an error
    if tok.startswith("0f") or tok.startswith("0d"):
        v = int(tok[2:], 16)
        return lambda th: v
    if re.fullmatch(r"-?0[xX][0-9a-fA-F]+U?", tok):
        v = int(tok.rstrip("U"), 16)
        return lambda th: v
    if re.fullmatch(r"-?\d+", tok):
        v = int(tok)
        return lambda th: v
    if tok == ctx.shared:
        return lambda th: 0
    raise ValueError("operand " + tok)


def address(tok, ctx):
    inner = tok.strip()[1:-1]
    m = re.fullmatch(r"([^+]+)(?:\+(-?\d+))?", inner)
    base, off = m.group(1), int(m.group(2) or 0)
    if base in ctx.params:
        v = ctx.params[base]
        return lambda th: ("param", v)
    r = reader(base, ctx)
    return lambda th: r(th) + off


class Thread:
    def __init__(self, tid, ctaid, nblocks, ntid, shared, mem):
        self.regs = {}
        self.special = {"%tid.x": tid, "%ctaid.x": ctaid, "%nctaid.x": nblocks, "%ntid.x": ntid}
        self.shared, self.mem, self.tid = shared, mem, tid


def memory(th, space, addr, size, what):
    """The buffer and offset `size` bytes at `addr` lie in."""
    if space == "shared":
        buf, off = th.shared, addr & M32
    else:
        b = (addr >> GLOBAL_SHIFT) - 1
        if b < 0 or b >= len(th.mem):
            raise IndexError("global %s of %d bytes at 0x%x, in no buffer" % (what, size, addr))
        buf, off = th.mem[b], addr & ((1 << GLOBAL_SHIFT) - 1)
    if off + size > len(buf):
        raise IndexError("%s %s of %d bytes at %d (size %d)" % (space, what, size, off, len(buf)))
    return buf, off


def load(th, space, addr, size):
    buf, off = memory(th, space, addr, size, "load")
    return int.from_bytes(buf[off:off + size], "little")


def store(th, space, addr, size, bits):
    buf, off = memory(th, space, addr, size, "store")
    buf[off:off + size] = (bits & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


FLOAT_CMP = {
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b and not (math.isnan(a) or math.isnan(b)),
    "neu": lambda a, b: a != b or math.isnan(a) or math.isnan(b),
    "nan": lambda a, b: math.isnan(a) or math.isnan(b),
}


def compile_instruction(text, ctx):
    """Returns fn(th) -> None (next), ('jump', pc), ('ret',) or an event."""
    parts = text.split(None, 1)
    opcode, rest = parts[0], (parts[1] if len(parts) > 1 else "")
    ops = split_operands(rest)
    mods = opcode.split(".")
    name, t = mods[0], mods[-1]

    def dest(tok):
        tok = tok.strip()
        return lambda th, bits: th.regs.__setitem__(tok, bits)

    if name == "ret":
        return lambda th: ("ret",)
    if name == "bra":
        target = ctx.labels[ops[0]]
        return lambda th: ("jump", target)
    if name == "bar":
        return lambda th: ("bar",)
    if name == "ld" or name == "st":
        space = "param" if "param" in mods else "shared" if "shared" in mods else "global"
        size = max(1, width(t) // 8)
        if name == "ld":
            d, a = dest(ops[0]), address(ops[1], ctx)

            def ld(th):
                where = a(th)
                if space == "param":
                    d(th, where[1])
                else:
                    d(th, load(th, space, where, size))

            return ld
        a, v = address(ops[0], ctx), reader(ops[1], ctx)
        return lambda th: store(th, space, a(th), size, v(th))
    if name == "cvta":
        d, a = dest(ops[0]), reader(ops[1], ctx)
        return lambda th: d(th, a(th))
    if name == "mov":
        if ops[0].startswith("{"):  # unpack
            lo, hi = [dest(x) for x in ops[0][1:-1].split(",")]
            a = reader(ops[1], ctx)

            def unpack(th):
                v = a(th)
                lo(th, v & M32)
                hi(th, (v >> 32) & M32)

            return unpack
        d = dest(ops[0])
        if ops[1].startswith("{"):  # pack
            lo, hi = [reader(x, ctx) for x in ops[1][1:-1].split(",")]
            return lambda th: d(th, (lo(th) & M32) | ((hi(th) & M32) << 32))
        a = reader(ops[1], ctx)
        w = width(t)
        return lambda th: d(th, a(th) & ((1 << w) - 1))
    if name == "setp":
        cmp, ty = mods[1], mods[2]
        d, a, b = dest(ops[0]), reader(ops[1], ctx), reader(ops[2], ctx)
        dv = decoder(ty)
        if ty in ("f32", "f64"):
            f = FLOAT_CMP[cmp]
            return lambda th: d(th, 1 if f(dv(a(th)), dv(b(th))) else 0)
        f = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y,
             "ge": lambda x, y: x >= y, "eq": lambda x, y: x == y, "ne": lambda x, y: x != y}[cmp]
        return lambda th: d(th, 1 if f(dv(a(th)), dv(b(th))) else 0)
    if name == "selp":
        d, a, b, c = dest(ops[0]), reader(ops[1], ctx), reader(ops[2], ctx), reader(ops[3], ctx)
        w = width(t)
        return lambda th: d(th, (a(th) if c(th) else b(th)) & ((1 << w) - 1))
    if name in ("and", "or", "xor"):
        d, a, b = dest(ops[0]), reader(ops[1], ctx), reader(ops[2], ctx)
        w = width(t)
        f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[name]
        return lambda th: d(th, f(a(th), b(th)) & ((1 << w) - 1))
    if name == "not":
        d, a = dest(ops[0]), reader(ops[1], ctx)
        return lambda th: d(th, 0 if a(th) else 1)
    if name in ("shl", "shr"):
        d, a, b = dest(ops[0]), reader(ops[1], ctx), reader(ops[2], ctx)
        w = width(t)

        def shift(th):
            n = min(b(th), w)
            if name == "shl":
                d(th, (a(th) << n) & ((1 << w) - 1))
            else:
                d(th, enc(dec(a(th), t) >> n, t))

        return shift
    if t in ("f32", "f64") and name in ("add", "sub", "mul", "div", "fma", "sqrt", "neg", "abs"):
        rd = [reader(x, ctx) for x in ops[1:]]
        d = dest(ops[0])
        dv, ev = decoder(t), encoder(t)
        if name == "fma":
            a, b, c = rd
            return lambda th: d(th, ev(ffma(dv(a(th)), dv(b(th)), dv(c(th)), t)))
        if name in ("sqrt", "neg", "abs"):
            f, a = {"sqrt": fsqrt, "neg": lambda x: -x, "abs": abs}[name], rd[0]
            return lambda th: d(th, ev(f(dv(a(th)))))
        f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "div": fdiv}[name]
        a, b = rd
        return lambda th: d(th, ev(f(dv(a(th)), dv(b(th)))))
    if name in ("add", "sub", "mul", "mad", "div", "rem", "max", "min", "neg", "abs"):
        rd = [reader(x, ctx) for x in ops[1:]]
        d = dest(ops[0])
        wide = "wide" in mods
        out_t = t[0] + str(2 * width(t)) if wide else t

        dv, ev = decoder(t), encoder(out_t)
        if name in INT_BINARY and len(rd) == 2:
            f, a, b = INT_BINARY[name], rd[0], rd[1]
            return lambda th: d(th, ev(f(dv(a(th)), dv(b(th)))))
        if name == "mad":
            a, b, c = rd
            return lambda th: d(th, ev(dv(a(th)) * dv(b(th)) + dv(c(th))))
        if name == "div":
            a, b = rd

            def div(th):
                x, y = dv(a(th)), dv(b(th))
                if y == 0:
                    raise ZeroDivisionError(text)
                q = abs(x) // abs(y)
                d(th, ev(q if (x < 0) == (y < 0) else -q))

            return div
        if name in ("neg", "abs") and len(rd) == 1:
            f, a = (lambda x: -x) if name == "neg" else abs, rd[0]
            return lambda th: d(th, ev(f(dv(a(th)))))
        raise ValueError("operands of " + text)
    if name == "cvt":
        types = [m for m in mods[1:] if re.fullmatch(r"[fsub]\d+|tf32", m)]
        to, frm = types[0], types[1]
        rnd = [m for m in mods[1:] if m in ("rn", "rz", "rni", "rzi", "rmi", "rpi", "rna")]
        d, a = dest(ops[0]), reader(ops[1], ctx)

        def cvt(th):
            bits = a(th)
            if to == "tf32":
                d(th, tf32_rna(bits))
                return
            x = dec(bits, frm)
            if to in ("f32", "f64"):
                if "rni" in rnd:
                    x = round_even(x)
                elif rnd and rnd[0] in ("rmi", "rpi") and math.isfinite(x) and x != 0:
                    # Integral rounding down or up; a zero result keeps x's sign.
                    x = math.copysign(float(math.floor(x) if rnd[0] == "rmi" else math.ceil(x)), x)
                elif frm not in ("f32", "f64"):
                    x = float(x)
                d(th, enc(x, to))
            elif frm in ("f32", "f64"):
                d(th, enc(to_int_sat(x, to), to))
            else:
                d(th, enc(x, to))

        return cvt
    if name in ("sin", "cos", "ex2", "lg2", "tanh"):
        d, a = dest(ops[0]), reader(ops[1], ctx)

        def approx(x):
            if math.isnan(x):
                return math.nan
            if name in ("sin", "cos"):
                return math.nan if math.isinf(x) else (math.sin(x) if name == "sin" else math.cos(x))
            if name == "ex2":
                if x > 200:
                    return math.inf
                return 2.0 ** x
            if name == "lg2":
                if x < 0:
                    return math.nan
                if x == 0:
                    return -math.inf
                return math.inf if math.isinf(x) else math.log2(x)
            return math.tanh(x)

        return lambda th: d(th, bits_f32(approx(f32_of(a(th)))))
    if name == "shfl":
        d, a, b, c, m = dest(ops[0]), reader(ops[1], ctx), reader(ops[2], ctx), reader(ops[3], ctx), reader(ops[4], ctx)
        return lambda th: ("shfl", text, a(th), b(th), c(th), m(th), d)
    if name == "mma":
        ds = [dest(x) for x in ops[0][1:-1].split(",")]
        av = [reader(x, ctx) for x in ops[1][1:-1].split(",")]
        bv = [reader(x, ctx) for x in ops[2][1:-1].split(",")]
        cv = [reader(x, ctx) for x in ops[3][1:-1].split(",")]
        return lambda th: ("mma", text, [r(th) for r in av], [r(th) for r in bv], [r(th) for r in cv], ds)
    raise ValueError("instruction not known to the simulator: " + text)


class Entry:
    def __init__(self, name, params, reqntid, shared, shared_size, body):
        self.name, self.reqntid = name, reqntid
        self.params = {p: (i + 1) << GLOBAL_SHIFT for i, p in enumerate(params)}
        labels, lines = {}, []
        for line in body:
            if line.endswith(":"):
                labels[line[:-1]] = len(lines)
            else:
                lines.append(line)
        ctx = Ctx(labels, self.params, shared)
        self.shared_size = shared_size
        self.code = []
        for line in lines:
            guard, neg = None, False
            m = re.match(r"@(!?)(%p\d+)\s+(.*)", line)
            if m:
                neg, guard, line = m.group(1) == "!", m.group(2), m.group(3)
            self.code.append((guard, neg, compile_instruction(line, ctx), line))


def parse_module(text, only=None):
    """The module's entries by name (only the one named `only`, if given)."""
    entries = {}
    lines = [l.split("//")[0].strip() for l in text.split("\n")]
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\.visible \.entry (\w+)\(", line)
        if not m:
            i += 1
            continue
        name, params = m.group(1), []
        i += 1
        while not lines[i].startswith(")"):
            params.append(lines[i].rstrip(",").split()[-1])
            i += 1
        reqntid = int(lines[i + 1].split()[1])
        i += 3  # ")", ".reqntid", "{"
        shared, shared_size, body = None, 0, []
        while lines[i] != "}":
            l = lines[i]
            i += 1
            if not l or l.startswith(".reg"):
                continue
            sm = re.match(r"\.shared \.align \d+ \.b8 (\w+)\[(\d+)\];", l)
            if sm:
                shared, shared_size = sm.group(1), int(sm.group(2))
                continue
            body.append(l.rstrip(";"))
        if only is None or name == only:
            entries[name] = Entry(name, params, reqntid, shared, shared_size, body)
    return entries


def run_thread(entry, th):
    code, pc = entry.code, 0
    while True:
        guard, neg, fn, text = code[pc]
        if guard is not None and bool(th.regs[guard]) == neg:
            pc += 1
            continue
        r = fn(th)
        if r is None:
            pc += 1
        elif r[0] == "jump":
            pc = r[1]
        elif r[0] == "ret":
            return
        else:
            yield r
            pc += 1


def mma(lanes):
    A = [[0.0] * 8 for _ in range(16)]
    B = [[0.0] * 8 for _ in range(8)]
    C = [[0.0] * 8 for _ in range(16)]
    for lane, (_, _, a, b, c, _) in enumerate(lanes):
        g, t = lane >> 2, lane & 3
        A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4] = [f32_of(x) for x in a]
        B[t][g], B[t + 4][g] = [f32_of(x) for x in b]
        C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1] = [f32_of(x) for x in c]
    D = [[C[m][n] + sum(A[m][k] * B[k][n] for k in range(8)) for n in range(8)] for m in range(16)]
    out = []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        out.append([D[g][2 * t], D[g][2 * t + 1], D[g + 8][2 * t], D[g + 8][2 * t + 1]])
    return out


def run_block(entry, ctaid, nblocks, mem):
    n = entry.reqntid
    shared = bytearray(b"\xff" * entry.shared_size)  # garbage (NaN) until staged
    recs = []
    for t in range(n):
        th = Thread(t, ctaid, nblocks, n, shared, mem)
        recs.append({"th": th, "gen": run_thread(entry, th), "ev": None, "done": False})

    def advance(rec):
        try:
            rec["ev"] = rec["gen"].send(None)
        except StopIteration:
            rec["done"], rec["ev"] = True, None

    for rec in recs:
        advance(rec)
    while True:
        live = [r for r in recs if not r["done"]]
        if not live:
            return
        progressed = False
        for w in range(0, n, 32):
            lanes = [r for r in recs[w:w + 32] if not r["done"]]
            if not lanes or any(r["ev"][0] not in ("shfl", "mma") for r in lanes):
                continue
            if len(set(r["ev"][1] for r in lanes)) != 1:
                raise RuntimeError("warp %d diverged at collectives" % (w // 32))
            kind = lanes[0]["ev"][0]
            if kind == "shfl":
                values = [r["ev"][2] for r in lanes]
                for i, r in enumerate(lanes):
                    _, _, _, off, c, mask, d = r["ev"]
                    j = i + off
                    d(r["th"], values[j] if j <= (c & 0x1F) and j < len(lanes) else values[i])
            else:
                if len(lanes) != 32:
                    raise RuntimeError("mma with a partial warp")
                results = mma([r["ev"] for r in lanes])
                for r, vals in zip(lanes, results):
                    for d, v in zip(r["ev"][5], vals):
                        d(r["th"], bits_f32(v))
            for r in lanes:
                advance(r)
            progressed = True
        if progressed:
            continue
        if all(r["ev"][0] == "bar" for r in live):
            if len(live) != n:
                raise RuntimeError("bar.sync with exited threads")
            for r in live:
                advance(r)
            continue
        raise RuntimeError("deadlock: " + ", ".join(sorted(set(r["ev"][0] for r in live))))


def tolerance(dtype, ref, scale):
    if dtype == "f32":
        return 2e-4 * (1 + abs(ref)) * scale
    if dtype == "f64":
        return 1e-10 * (1 + abs(ref)) * scale
    return 0


FORMATS = {"f32": "<f", "f64": "<d", "i32": "<i", "i64": "<q", "bool": "<B", "u32": "<I"}


def run_case(directory, n):
    import json
    base = os.path.join(directory, str(n))
    with open(base + ".json") as f:
        meta = json.load(f)
    with open(base + ".ptx") as f:
        entries = parse_module(f.read())
    mem = []
    for role, io, size in meta["buffers"]:
        buf = bytearray(b"\xff" * max(size, 1))  # garbage until written
        if role == 0:
            with open("%s.in%d" % (base, io), "rb") as f:
                data = f.read()
            buf[:len(data)] = data
        mem.append(buf)
    for kernel, blocks, threads in meta["steps"]:
        entry = entries[kernel]
        if entry.reqntid != threads:
            return "kernel %s: .reqntid %d but group_size %d" % (kernel, entry.reqntid, threads)
        for b in range(blocks):
            run_block(entry, b, blocks, mem)
    outputs = [(i, buf) for (role, io, _), buf in zip(meta["buffers"], mem) if role == 1 for i in [io]]
    for io, buf in outputs:
        dtype = meta["outputs"][io]
        fmt = FORMATS[dtype]
        size = struct.calcsize(fmt)
        with open("%s.out%d" % (base, io), "rb") as f:
            expected = f.read()
        for e in range(len(expected) // size):
            got = struct.unpack_from(fmt, buf, e * size)[0]
            ref = struct.unpack_from(fmt, expected, e * size)[0]
            if isinstance(ref, float) and math.isnan(ref) and math.isnan(got):
                continue
            if isinstance(ref, float) and math.isinf(ref) and got == ref:
                continue
            if dtype == "i64" and abs(ref) >= 2**53 and float(got) == float(ref):
                continue  # the evaluator holds i64 in doubles: exact only to 2^53
            if not abs(got - ref) <= tolerance(dtype, ref, meta["scale"]):
                return "output %d element %d: got %r, evaluator says %r" % (io, e, got, ref)
    return None


def check(args):
    import json
    directory, n = args
    with open(os.path.join(directory, "%d.json" % n)) as f:
        name = json.load(f)["name"]
    try:
        why = run_case(directory, n)
    except Exception as e:  # a simulator or module error: report it
        why = "%s: %s" % (type(e).__name__, e)
    return n, name, why


def run_launch(args, modules=None):
    """One launch (the launch mode's arguments): (0, "") on success, else
    (1, what failed), the files left as they were. `modules`, when given,
    keeps parsed modules by text for later launches."""
    if len(args) < 4:
        return 2, "usage: ptxsim.py launch MODULE.ptx ENTRY GRID_X BLOCK_X BUF..."
    module, name, grid, block, files = args[0], args[1], int(args[2]), int(args[3]), args[4:]
    try:
        with open(module) as f:
            text = f.read()
        entries = modules.get(text) if modules is not None else None
        if entries is None:
            entries = parse_module(text, only=None if modules is not None else name)
            if modules is not None:
                if len(modules) >= 64:
                    modules.clear()
                modules[text] = entries
        if name not in entries:
            raise LookupError("the module has no entry named %s" % name)
        entry = entries[name]
        if entry.reqntid != block:
            raise ValueError("entry %s has .reqntid %d; launched with blocks of %d" % (name, entry.reqntid, block))
        if grid < 1:
            raise ValueError("a grid of %d blocks" % grid)
        if len(files) != len(entry.params):
            raise ValueError("entry %s takes %d parameters; given %d buffers" % (name, len(entry.params), len(files)))
        mem = []
        for path in files:
            with open(path, "rb") as f:
                mem.append(bytearray(f.read()))
        for b in range(grid):
            run_block(entry, b, grid, mem)
    except Exception as e:  # a simulator or module error: say which
        return 1, "ptxsim: %s: %s" % (type(e).__name__, e)
    for path, buf in zip(files, mem):
        with open(path, "r+b") as f:
            f.write(buf)
    return 0, ""


def launch(args):
    """The launch mode (see the docstring); returns the exit status."""
    status, message = run_launch(args)
    if message:
        print(message, file=sys.stderr)
    return status


def serve():
    """The serve mode (see the docstring): launches until stdin ends."""
    modules = {}
    requests = sys.stdin.buffer
    while True:
        line = requests.readline()
        if not line:
            return 0
        status, message = run_launch(line.decode().rstrip("\n").split("\t"), modules)
        reply = "ok" if status == 0 else "failed " + " ".join(message.split())
        sys.stdout.write(reply + "\n")
        sys.stdout.flush()


def main(argv):
    if len(argv) > 1 and argv[1] == "launch":
        return launch(argv[2:])
    if len(argv) > 1 and argv[1] == "serve":
        return serve()
    directory = argv[1]
    cases = [int(a) for a in argv[2:]] or sorted(
        int(f[:-5]) for f in os.listdir(directory) if f.endswith(".json"))
    import concurrent.futures
    failed = 0
    with concurrent.futures.ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for n, name, why in pool.map(check, [(directory, n) for n in cases]):
            if why:
                failed += 1
                print("FAIL %d (%s): %s" % (n, name, why), flush=True)
    print("%d cases, %d failed" % (len(cases), failed))
    if not cases:
        print("FAIL: no case ran (no N.json in %s)" % directory)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
