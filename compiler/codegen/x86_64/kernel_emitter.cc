// The x86-64 primitives of the CPU loop-nest walker: registers, addresses,
// loads and stores, loops, hoisting, and the lanes each loop runs in.
#include "compiler/codegen/x86_64/kernel_emitter.h"
#include "compiler/codegen/x86_64/primitives.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <vector>

#include "base/check.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/rewrite.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/codegen/x86_64/math.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::x64 {

KernelEmitter::KernelEmitter(x86::Compiler& cc, const choir::Module& module, Isa isa, int64_t stream_above)
    : LoopWalker(module),
      cc_(cc),
      isa_(isa),
      stream_above_(stream_above),
      scalar32_(cc, isa, Lane::kF32, 16, true),
      scalar64_(cc, isa, Lane::kF64, 16, true) {}

Simd& KernelEmitter::scalarSimd(DType dtype) { return dtype == DType::f64 ? scalar64_ : scalar32_; }

absl::Status KernelEmitter::emit(const choir::Kernel& kernel, Label* entry) {
  asmjit::FuncNode* f = cc_.addFunc(
      asmjit::FuncSignatureT<void, void* const*, int64_t, int64_t, const void* const*>(
          asmjit::CallConvId::kHost));
  // vzeroupper before returning: the caller's SSE code (the runtime and
  // every library compiled for baseline x86-64) would otherwise run with
  // the upper halves of the vector registers dirty, which Intel cores make
  // pay on every SSE instruction (a launch of a small kernel measured 5x
  // slower on a Xeon with AVX-512 without it; docs/PERFORMANCE.md).
  if (isa_ != Isa::kSse41) {
    f->frame().setAvxEnabled();
    f->frame().setAvxCleanup();
  }
  if (isa_ == Isa::kAvx512) f->frame().setAvx512Enabled();
  *entry = f->label();
  buffers_ = cc_.newIntPtr("buffers");
  begin_ = cc_.newInt64("begin");
  end_ = cc_.newInt64("end");
  runtime_ = cc_.newIntPtr("runtime");
  f->setArg(0, buffers_);
  f->setArg(1, begin_);
  f->setArg(2, end_);
  f->setArg(3, runtime_);
  streamed_ = false;
  findResident(kernel);
  for (auto& [b, r] : resident_) {
    x86::Gp p = cc_.newIntPtr("held");
    cc_.mov(p, x86::qword_ptr(buffers_, b * 8));
    Simd simd = laneSimd(m_.buffers[b].dtype, r.width);
    r.reg = simd.newVec("held");
    simd.load(r.reg, x86::ptr(p));
  }
  absl::Status st = walk(kernel);
  for (const auto& [b, r] : resident_) {
    if (m_.buffers[b].role == choir::BufferRole::kInput) continue;
    x86::Gp p = cc_.newIntPtr("held");
    cc_.mov(p, x86::qword_ptr(buffers_, b * 8));
    laneSimd(m_.buffers[b].dtype, r.width).store(x86::ptr(p), r.reg);
  }
  // Streaming stores are weakly ordered: fenced once, before the kernel
  // returns and the launch reports it done (not after each innermost loop:
  // a fence per row of a gather cost 5x).
  if (streamed_) cc_.sfence();
  cc_.endFunc();
  return st;
}

// A buffer of one vector (a scan's carry of a few lanes, stepped inside
// one kernel) lives in a register for the whole kernel when every access to
// it, load or store, is at the lane position of a vector store loop that
// runs exactly one vector of its width: each store then moves the value
// into the register and each load copies it out, so a step's carry reaches
// the next step without a store and a load through memory. Kernels split
// across threads, reductions and register-blocked products keep their
// buffers in memory.
void KernelEmitter::findResident(const choir::Kernel& kernel) {
  resident_.clear();
  std::map<int, int> width;  // candidate -> its register's lanes
  std::set<int> refused;
  bool parallel = false;
  auto refuseAll = [&](const ExprRef& e) {
    choir::visitExpr(e, [&](const Expr& x) {
      if (x.kind == ExprKind::kLoad) refused.insert(x.buffer);
    });
  };
  std::function<void(const std::vector<Stmt>&)> visit = [&](const std::vector<Stmt>& stmts) {
    for (const Stmt& s : stmts) {
      if (s.kind == StmtKind::kLoop) {
        if (s.loop.tag == LoopTag::kCpuParallel) parallel = true;
        const bool innermost = s.body.size() == 1 && s.body[0].kind == StmtKind::kStore;
        // A register-blocked product keeps its buffers in memory.
        if (Product product; matchProduct(s, &product)) {
          choir::visitStmts(s.body, [&](const Stmt& in) {
            if (in.kind == StmtKind::kStore || in.kind == StmtKind::kReduce) {
              refused.insert(in.buffer);
              refuseAll(in.value);
            }
          });
          continue;
        }
        if (!innermost || s.loop.tag != LoopTag::kVectorized) {
          visit(s.body);
          continue;
        }
        const Stmt& st = s.body[0];
        const int w = storeWidth(s, false);
        const bool one_vector = w > 1 && s.loop.extent == w && storeCopies(s, w) == 1 && !streams(s) &&
                                st.bound.empty();
        const Affine lane = Affine::var(s.loop.var);
        auto consider = [&](int b, const std::vector<Affine>& index, bool bound) {
          const choir::Buffer& buf = m_.buffers[b];
          if (one_vector && !bound && isFloat(buf.dtype) && buf.elements() == w && choir::flatIndex(buf, index) == lane &&
              (width.count(b) == 0 || width[b] == w)) {
            width[b] = w;
          } else {
            refused.insert(b);
          }
        };
        consider(st.buffer, st.index, false);
        choir::visitExpr(st.value, [&](const Expr& x) {
          if (x.kind == ExprKind::kLoad) consider(x.buffer, x.index, !x.args.empty());
        });
        continue;
      }
      if (s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) {
        refused.insert(s.buffer);
        refuseAll(s.value);
        for (const ExprRef& a : s.args) refuseAll(a);
      }
    }
  };
  visit(kernel.body);
  if (parallel) return;
  for (const auto& [b, w] : width) {
    if (refused.count(b) == 0) resident_[b] = Resident{x86::Vec(), w};
  }
}

// Every buffer pointer the kernel touches is loaded up front, so no path
// through the code can use one before it is loaded.
void KernelEmitter::preloadBuffer(int buffer) {
  x86::Gp r = cc_.newIntPtr("base");
  cc_.mov(r, x86::qword_ptr(buffers_, buffer * 8));
  base_[buffer] = r;
}

x86::Gp KernelEmitter::bufferBase(int buffer) {
  auto it = base_.find(buffer);
  ACCY_CHECK(it != base_.end(), "buffer %d not preloaded", buffer);
  return it->second;
}

x86::Gp KernelEmitter::constantIndex(int64_t v) {
  x86::Gp r = cc_.newInt64("c");
  cc_.mov(r, v);
  return r;
}

x86::Gp KernelEmitter::limitLess(x86::Gp limit, int64_t k) {
  x86::Gp r = cc_.newInt64("vlimit");
  cc_.mov(r, limit);
  cc_.sub(r, k);
  return r;
}

// for (; i < limit; i += step): the test before the first step, then at
// the bottom of each.
KernelEmitter::OpenLoop KernelEmitter::openLoop(x86::Gp i, x86::Gp limit, int64_t step) {
  OpenLoop l{i, limit, step, cc_.newLabel(), cc_.newLabel()};
  cc_.cmp(i, limit);
  cc_.jge(l.done);
  cc_.bind(l.top);
  return l;
}

void KernelEmitter::closeLoop(const OpenLoop& l) {
  cc_.add(l.i, l.step);
  cc_.cmp(l.i, l.limit);
  cc_.jl(l.top);
  cc_.bind(l.done);
}

KernelEmitter::OpenGuard KernelEmitter::beginGuard(const Val& b) {
  Label skip = cc_.newLabel();
  if (b.flags && cc_.cursor() == b.flags->set) {
    cc_.j(x86::negateCond(b.flags->cond), skip);
    return skip;
  }
  const x86::Gp g = gp(b);
  cc_.test(g, g);
  cc_.jz(skip);
  return skip;
}

Simd KernelEmitter::laneSimd(DType dtype, int width) const {
  return Simd(cc_, isa_, laneOf(dtype), width * static_cast<int>(tensor::dtypeSize(dtype)));
}

int KernelEmitter::loopWidth(int width, DType dtype, const ExprRef& value) const {
  // A light loop (a load and an add or two per element) is bound by its
  // loads. A 64-byte load from a buffer that is not 64-byte aligned (a
  // caller's std::vector is 16) always spans two cache lines and counts
  // twice against the load ports; a 32-byte one does so at most every
  // other time. Measured on Zen 5: a sum over 64 MiB takes 1.7x as long
  // with unaligned 64-byte loads as with 32-byte ones (docs/PERFORMANCE.md).
  constexpr int64_t kLightNodes = 6;
  if (isa_ == Isa::kAvx512 && width * tensor::dtypeSize(dtype) == 64 && choir::exprSize(value) <= kLightNodes) {
    return width / 2;
  }
  return width;
}

int KernelEmitter::storeWidth(const Stmt& l, bool parallel) const {
  const Stmt& st = l.body[0];
  const DType dtype = m_.buffers[st.buffer].dtype;
  const bool vectorized = l.loop.tag == LoopTag::kVectorized || (parallel && l.loop.vector_width > 1);
  const bool lanes = isFloat(dtype) || dtype == DType::i32 || dtype == DType::u32;
  if (!vectorized || !lanes) return 1;
  // A streamed output is written a whole line per store at the widest
  // vector (the write-combining buffer then empties as soon as the store
  // retires): y = a x + b over 64 MiB, 5.11 -> 4.92 ms on an Intel Xeon
  // against 4.90 for the AVX-512 intrinsics loop (docs/PERFORMANCE.md,
  // "Streamed stores a line at a time").
  if (streams(l)) return l.loop.vector_width;
  // A row at a data-dependent position (a scatter's) waits on memory, not on
  // the load ports: fewer, wider steps leave the core's window room for
  // more rows in flight (an embedding gradient on one thread of the AMD
  // EPYC, docs/PERFORMANCE.md).
  if (!st.bound.empty()) return l.loop.vector_width;
  return loopWidth(l.loop.vector_width, dtype, st.value);
}

int KernelEmitter::storeCopies(const Stmt& l, int width) const {
  if (width <= 1) return 1;
  bool encrypts = false;
  choir::visitExpr(l.body[0].value, [&](const Expr& x) {
    encrypts = encrypts || (x.kind == ExprKind::kOp && tensor::opCategory(x.op) == tensor::OpCategory::Random);
  });
  return encrypts ? 2 : 1;
}

KernelEmitter::Mode KernelEmitter::beginVectorStore(const Stmt& l, int width, const Mode& lanes) {
  const DType dtype = m_.buffers[l.body[0].buffer].dtype;
  loop_simd_.emplace(laneSimd(dtype, width));
  vsimd_ = &*loop_simd_;
  beginHoist({vsimd_, &scalar32_, &scalar64_});
  Mode r = lanes;
  r.stream = streams(l);
  return r;
}

void KernelEmitter::endVectorStore(const Mode& lanes) {
  if (lanes.stream) streamed_ = true;  // fenced at the kernel's end
  endHoist();
  vsimd_ = nullptr;
}

int KernelEmitter::reduceWidth(const Stmt& s) const {
  const DType dtype = m_.buffers[s.buffer].dtype;
  const choir::LoopHeader& inner = s.domain.back();
  return inner.tag == LoopTag::kVectorized && isFloat(dtype) ? loopWidth(inner.vector_width, dtype, s.value)
                                                               : 1;
}

void KernelEmitter::beginReduce(const Stmt&, DType dtype, int width) {
  if (width > 1) {
    loop_simd_.emplace(laneSimd(dtype, width));
  } else {
    loop_simd_.emplace(cc_, isa_, laneOf(dtype), 16);
  }
  vsimd_ = &*loop_simd_;
}

void KernelEmitter::beginHoist(std::initializer_list<Simd*> simds) {
  hoist_ = Hoist{};
  hoist_.point = cc_.cursor();
  hoisting_.assign(simds.begin(), simds.end());
  for (Simd* s : hoisting_) s->setHoist(&hoist_);
}

void KernelEmitter::endHoist() {
  for (Simd* s : hoisting_) s->setHoist(nullptr);
  hoisting_.clear();
  hoist_ = Hoist{};
}

void KernelEmitter::storeValue(int buffer, const std::vector<Affine>& index, const Val& v, const Mode& mode) {
  const DType dtype = m_.buffers[buffer].dtype;
  if (auto held = resident_.find(buffer); held != resident_.end() && mode.vector) {
    vsimd_->mov(held->second.reg, v.v);
    return;
  }
  x86::Mem mem = address(buffer, index, mode);
  if (mode.vector && mode.stream) {
    vsimd_->streamStore(mem, v.v);
  } else if (mode.vector) {
    vsimd_->store(mem, v.v);
  } else if (mode.stream) {
    streamScalar(dtype, mem, v);
  } else {
    storeScalar(dtype, mem, v);
  }
}

// sum of coeff * var, plus the constant, in few instructions: the first
// term moved (shifted or multiplied), the others added by `lea` where the
// coefficient is a scale (1, 2, 4, 8), the constant added last (an
// address computed per random row, a scatter's, is most of its row's
// instructions).
x86::Gp KernelEmitter::affineValue(const Affine& a) {
  x86::Gp r = cc_.newInt64("idx");
  auto counter = [&](const Affine::Term& t) {
    auto it = vars_.find(t.var);
    ACCY_CHECK(it != vars_.end(), "variable i%d is not bound", t.var);
    return it->second;
  };
  auto log2Of = [](int64_t c) { return c > 0 && (c & (c - 1)) == 0 ? std::countr_zero(static_cast<uint64_t>(c)) : -1; };
  // r = v * c
  auto times = [&](x86::Gp into, x86::Gp v, int64_t c) {
    if (const int k = log2Of(c); k >= 0) {
      cc_.mov(into, v);
      if (k > 0) cc_.shl(into, k);
    } else if (fitsImm32(c)) {
      cc_.imul(into, v, c);
    } else {
      cc_.mov(into, c);
      cc_.imul(into, v);
    }
  };
  if (a.terms.empty()) {
    cc_.mov(r, a.constant);
    return r;
  }
  // The power of two every coefficient shares comes out as one shift at
  // the end, so that more terms fit lea's scales of 1 to 8: 64 i + 32 t is
  // lea r, [t + i*2] then shl r, 5. The first term is one a scale cannot
  // take, if any.
  int shift = 62;
  for (const Affine::Term& t : a.terms) {
    if (t.coeff != 0) shift = std::min(shift, std::countr_zero(static_cast<uint64_t>(t.coeff)));
  }
  if (shift == 62) shift = 0;
  std::vector<Affine::Term> terms = a.terms;
  for (Affine::Term& t : terms) t.coeff /= int64_t{1} << shift;
  auto scaled = [&](const Affine::Term& t) {
    const int k = log2Of(t.coeff);
    return k >= 0 && k <= 3;
  };
  if (auto it = std::find_if(terms.begin(), terms.end(), [&](const Affine::Term& t) { return !scaled(t); });
      it != terms.end()) {
    std::iter_swap(terms.begin(), it);
  } else if (auto one = std::find_if(terms.begin(), terms.end(), [](const Affine::Term& t) { return t.coeff == 1; });
             one != terms.end()) {
    std::iter_swap(terms.begin(), one);
  }
  size_t next = 1;
  if (terms.size() > 1 && terms[0].coeff == 1) {  // lea r, [first + second * scale]
    cc_.lea(r, x86::ptr(counter(terms[0]), counter(terms[1]), static_cast<uint32_t>(log2Of(terms[1].coeff))));
    next = 2;
  } else {
    times(r, counter(terms[0]), terms[0].coeff);
  }
  for (size_t j = next; j < terms.size(); ++j) {
    const Affine::Term& t = terms[j];
    if (scaled(t)) {
      cc_.lea(r, x86::ptr(r, counter(t), static_cast<uint32_t>(log2Of(t.coeff))));
      continue;
    }
    x86::Gp p = cc_.newInt64("term");
    times(p, counter(t), t.coeff);
    cc_.add(r, p);
  }
  if (shift > 0) cc_.shl(r, shift);
  if (a.constant != 0) {
    if (fitsImm32(a.constant)) {
      cc_.add(r, static_cast<int32_t>(a.constant));
    } else {
      x86::Gp c = cc_.newInt64("constant");
      cc_.mov(c, a.constant);
      cc_.add(r, c);
    }
  }
  return r;
}

x86::Gp KernelEmitter::indexAhead(x86::Gp i, x86::Gp limit, int64_t d) {
  x86::Gp r = cc_.newInt64("ahead"), last = cc_.newInt64("last");
  cc_.lea(r, x86::ptr(i, static_cast<int32_t>(d)));
  cc_.lea(last, x86::ptr(limit, -1));
  cc_.cmp(r, last);
  cc_.cmovg(r, last);
  return r;
}

// prefetcht2 on every cache line of the span: one per 64 bytes from its
// start and one at its last byte (a row need not start on a line). Spans
// past 16 lines prefetch their first 16: the hardware's stream prefetcher
// follows a longer row by itself. The lines go to the outer caches only:
// into the first-level cache, whose fill buffers the loads themselves
// need, they measured slower (an embedding gather of random 256-byte rows,
// 52 ms with prefetcht0 against 44 with prefetcht2; a scatter's rows,
// read and written, slower with prefetcht0 or prefetchw too;
// docs/PERFORMANCE.md, "Embedding gathers and scatters on the Intel Xeon").
void KernelEmitter::prefetch(x86::Gp base, int64_t bytes) {
  constexpr int64_t kLine = 64, kMaxLines = 16;
  for (int64_t off = 0; off < bytes && off < kMaxLines * kLine; off += kLine) {
    cc_.prefetcht2(x86::ptr(base, static_cast<int32_t>(off)));
  }
  if (bytes > 1 && bytes <= kMaxLines * kLine) cc_.prefetcht2(x86::ptr(base, static_cast<int32_t>(bytes - 1)));
}

x86::Gp KernelEmitter::computeRowBase(int buffer, const Affine& rest) {
  const DType dtype = m_.buffers[buffer].dtype;
  x86::Gp r = cc_.newIntPtr("row");
  const int64_t disp = rest.constant * tensor::dtypeSize(dtype);
  if (rest.terms.empty() && fitsImm32(disp)) {
    cc_.lea(r, x86::ptr(bufferBase(buffer), static_cast<int32_t>(disp)));
  } else if (rest.terms.size() == 1 && rest.terms[0].coeff == 1 && fitsImm32(disp)) {  // base + v * size + disp
    cc_.lea(r, x86::ptr(bufferBase(buffer), vars_.at(rest.terms[0].var), shiftOf(dtype), static_cast<int32_t>(disp)));
  } else {
    x86::Gp off = affineValue(rest);
    cc_.lea(r, x86::ptr(bufferBase(buffer), off, shiftOf(dtype)));
  }
  return r;
}

x86::Mem KernelEmitter::address(int buffer, const std::vector<Affine>& index, const Mode& mode) {
  const DType dtype = m_.buffers[buffer].dtype;
  const auto [rest, c] = splitIndex(buffer, index, mode.inner_var);
  if (c == 0) {
    // One point at base + v * size + disp (a scatter's index, read once
    // per row): the memory operand itself, without a row base's lea,
    // unless a row base for it is already there.
    const int64_t at = rest.constant * tensor::dtypeSize(dtype);
    if (rest.terms.size() == 1 && rest.terms[0].coeff == 1 && fitsImm32(at) &&
        !(rows_active_ && rows_.contains(codegen::cpu::RowKey{buffer, rest}))) {
      return x86::ptr(bufferBase(buffer), vars_.at(rest.terms[0].var), shiftOf(dtype), static_cast<int32_t>(at));
    }
    return x86::ptr(rowBase(buffer, rest));
  }
  x86::Gp base = rowBase(buffer, rest);
  const int64_t disp = c * mode.offset * tensor::dtypeSize(dtype);
  if (!fitsImm32(disp)) {
    // A stride too large for a displacement: move the index register.
    x86::Gp moved = cc_.newInt64("moved");
    cc_.lea(moved, x86::ptr(mode.inner, static_cast<int32_t>(mode.offset)));
    Mode at = mode;
    at.inner = moved;
    at.offset = 0;
    return address(buffer, index, at);
  }
  if (c == 1) return x86::ptr(base, mode.inner, shiftOf(dtype), static_cast<int32_t>(disp));
  x86::Gp scaled = cc_.newInt64("scaled");
  if (fitsImm32(c)) {
    cc_.imul(scaled, mode.inner, c);
  } else {
    cc_.mov(scaled, c);
    cc_.imul(scaled, mode.inner);
  }
  return x86::ptr(base, scaled, shiftOf(dtype), static_cast<int32_t>(disp));
}

// i32 is held sign-extended to 64 bits, u32 zero-extended: a 64-bit
// comparison, division or conversion to float then has the dtype's meaning.
void KernelEmitter::sext32(x86::Gp r, DType dtype) {
  if (dtype == DType::i32) cc_.movsxd(r, r.r32());
  if (dtype == DType::u32) cc_.mov(r.r32(), r.r32());
}

Val KernelEmitter::loadScalar(DType dtype, const x86::Mem& mem) {
  Val v;
  x86::Mem m = mem;
  switch (dtype) {
    case DType::f32:
    case DType::f64: {
      Simd& s = scalarSimd(dtype);
      v.kind = Val::Kind::kVec;
      v.v = s.newVec("ld");
      s.load(v.v, m);
      return v;
    }
    case DType::i32:
      v.g = cc_.newInt64("ld");
      m.setSize(4);
      cc_.movsxd(v.g, m);
      return v;
    case DType::u32:
      v.g = cc_.newInt64("ld");
      m.setSize(4);
      cc_.mov(v.g.r32(), m);
      return v;
    case DType::i64:
      v.g = cc_.newInt64("ld");
      m.setSize(8);
      cc_.mov(v.g, m);
      return v;
    case DType::bool_:
      v.g = cc_.newInt64("ld");
      m.setSize(1);
      cc_.movzx(v.g.r32(), m);
      return v;
  }
  return v;
}

void KernelEmitter::storeScalar(DType dtype, const x86::Mem& mem, const Val& v) {
  x86::Mem m = mem;
  switch (dtype) {
    case DType::f32:
    case DType::f64:
      scalarSimd(dtype).store(m, v.v);
      return;
    case DType::i32:
    case DType::u32:
      m.setSize(4);
      cc_.mov(m, gp(v).r32());
      return;
    case DType::i64:
      m.setSize(8);
      cc_.mov(m, gp(v));
      return;
    case DType::bool_:
      m.setSize(1);
      cc_.mov(m, gp(v).r8());
      return;
  }
}

// A float element stored past the caches: through a general register with
// movnti (streaming loops only store floats, stream_stores.cc).
void KernelEmitter::streamScalar(DType dtype, const x86::Mem& mem, const Val& v) {
  x86::Mem m = mem;
  x86::Gp r = cc_.newInt64("bits");
  const bool avx = isa_ != Isa::kSse41;
  if (dtype == DType::f32) {
    if (avx) cc_.vmovd(r.r32(), v.v.xmm());
    else cc_.movd(r.r32(), v.v.xmm());
    m.setSize(4);
    cc_.movnti(m, r.r32());
    return;
  }
  ACCY_CHECK(dtype == DType::f64, "streamed scalar store of a non-float");
  if (avx) cc_.vmovq(r, v.v.xmm());
  else cc_.movq(r, v.v.xmm());
  m.setSize(8);
  cc_.movnti(m, r);
}

x86::Gp KernelEmitter::maskToBool(const Mask& m, Simd& s) {
  x86::Gp r = cc_.newInt64("bool");
  if (s.isa() == Isa::kAvx512) {
    cc_.kmovw(r.r32(), m.k);
  } else if (s.isa() == Isa::kAvx2) {
    cc_.vmovd(r.r32(), m.v.xmm());
  } else {
    cc_.movd(r.r32(), m.v.xmm());
  }
  cc_.and_(r.r32(), 1);
  return r;
}


Val KernelEmitter::scalarLoad(const Expr& e, const Mode& mode) { return loadScalar(e.dtype, address(e.buffer, e.index, mode)); }

Val KernelEmitter::vectorLoad(const Expr& e, int key, const Mode& mode) {
  if (auto held = resident_.find(e.buffer); held != resident_.end()) {
    Val v;
    v.kind = Val::Kind::kVec;
    v.v = vsimd_->newVec("held");
    vsimd_->mov(v.v, held->second.reg);
    return v;
  }
  const int64_t c = choir::flatCoeff(m_.buffers[e.buffer], e.index, mode.inner_var);
  if (c != 0 && c != 1) return gatherLoad(e, {}, mode);  // strided lanes (VectorizeOptions::gathers)
  x86::Mem mem = address(e.buffer, e.index, mode);
  Val v;
  v.kind = Val::Kind::kVec;
  v.v = vsimd_->newVec("ld");
  if (c == 0) {
    v.v = vsimd_->hoistedValue(strCat("load:", key), [&](x86::Vec r) { vsimd_->broadcastLoad(r, mem); });
  } else {
    vsimd_->load(v.v, mem);
  }
  return v;
}

Val KernelEmitter::gatherLoad(const Expr& e, const std::vector<Val>& bound, const Mode& mode) {
  const choir::Buffer& buf = m_.buffers[e.buffer];
  const Affine flat = choir::flatIndex(buf, e.index);
  // The position: a part the same in every lane (the other variables, the
  // loop's counter at this step), in a general register, plus per-lane
  // offsets: the loop variable's lane steps and each bound value times its
  // coefficient (non-negative, below 2^31 in all: the vectorizer's check).
  // Bound values come in lanes (`bound`) for a take along the vector axis;
  // a strided load whose bound values do not change along the loop (hoisted
  // before it: `bound` empty) has them in the common part.
  const bool in_lanes = !bound.empty();
  Affine rest = flat;
  if (in_lanes) {
    std::erase_if(rest.terms, [&](const Affine::Term& t) {
      return std::find(e.bound.begin(), e.bound.end(), t.var) != e.bound.end();
    });
  }
  const int64_t c = flat.coeffOf(mode.inner_var);
  rest.constant += c * mode.offset;
  x86::Gp at = affineValue(rest);
  x86::Gp base = cc_.newIntPtr("gather");
  cc_.lea(base, x86::ptr(bufferBase(e.buffer), at, shiftOf(buf.dtype)));
  Val v;
  v.kind = Val::Kind::kVec;
  x86::Vec offsets = vsimd_->newVec("offsets");
  if (c == 0) {
    vsimd_->zero(offsets);
  } else {
    vsimd_->mov(offsets, vsimd_->laneSteps(static_cast<uint32_t>(c)));
  }
  for (size_t j = 0; in_lanes && j < e.bound.size(); ++j) {
    const int64_t k = flat.coeffOf(e.bound[j]);
    if (k == 0) continue;
    x86::Vec term = bound[j].v;
    if (k != 1) {
      term = vsimd_->newVec("scaled");
      vsimd_->intMul(term, bound[j].v, vsimd_->constantBitsValue(static_cast<uint32_t>(k)));
    }
    vsimd_->intAdd(offsets, offsets, term);
  }
  v.v = vsimd_->newVec("gathered");
  vsimd_->gather(v.v, base, offsets);
  return v;
}

KernelEmitter::Prims KernelEmitter::prims(const Mode& mode) { return Prims(*this, mode); }

bool KernelEmitter::contractsMultiplyAdd(DType dtype) const { return isFloat(dtype) && isa_ != Isa::kSse41; }

Val KernelEmitter::multiplyAdd(DType dtype, const Val& a, const Val& b, const Val& c, const Mode& mode) {
  Simd& s = mode.vector ? *vsimd_ : scalarSimd(dtype);
  Val v;
  v.kind = Val::Kind::kVec;
  v.v = s.newVec("fma");
  s.fma(v.v, a.v, b.v, c.v);
  return v;
}

std::optional<int32_t> Val::imm32() const {
  if (!imm || !fitsImm32(*imm)) return std::nullopt;
  return static_cast<int32_t>(*imm);
}

x86::Gp KernelEmitter::gp(const Val& v) {
  if (!v.imm) return v.g;
  x86::Gp r = cc_.newInt64("k");
  moveInto(r, v);
  return r;
}

void KernelEmitter::moveInto(x86::Gp dst, const Val& v) {
  if (!v.imm) {
    cc_.mov(dst, v.g);
  } else if (*v.imm == 0) {
    cc_.xor_(dst.r32(), dst.r32());
  } else {
    cc_.mov(dst, *v.imm);
  }
}

x86::Gp KernelEmitter::valueIndex(const Val& v) {
  x86::Gp r = cc_.newInt64("bound");
  moveInto(r, v);
  return r;
}

// Lanes of 1 where the scalar bool is set (else 0), compared with 0.
Val KernelEmitter::uniformMask(const Val& b) {
  x86::Vec x = vsimd_->newVec("flag");
  vsimd_->zero(x);
  Label off = cc_.newLabel();
  const x86::Gp g = gp(b);
  cc_.test(g, g);
  cc_.jz(off);
  vsimd_->constant(x, 1.0);
  cc_.bind(off);
  Val v;
  v.kind = Val::Kind::kMask;
  v.m = vsimd_->cmp(Cmp::kNe, x, vsimd_->constantValue(0.0));
  return v;
}

// base + c * k in lane k, where base is the index at the loop's current
// point and c its coefficient of the loop's variable, in the dtype's 32
// bits (an index cast to i32 or u32 keeps its low bits).
Val KernelEmitter::indexLanes(const Affine& a, DType dtype, const Mode& mode) {
  ACCY_CHECK(dtype == DType::i32 || dtype == DType::u32, "index lanes of a dtype %d", static_cast<int>(dtype));
  const int64_t c = a.coeffOf(mode.inner_var);
  x86::Gp base = affineValue(a);
  if (const int64_t shift = c * mode.offset; shift != 0) {
    if (fitsImm32(shift)) {
      cc_.add(base, static_cast<int32_t>(shift));
    } else {
      x86::Gp t = cc_.newInt64("shift");
      cc_.mov(t, shift);
      cc_.add(base, t);
    }
  }
  Val v;
  v.kind = Val::Kind::kVec;
  v.v = vsimd_->newVec("index");
  vsimd_->broadcastInt(v.v, base);
  vsimd_->intAdd(v.v, v.v, vsimd_->laneSteps(static_cast<uint32_t>(c)));
  return v;
}

Val KernelEmitter::indexValue(const Affine& a) {
  Val v;
  v.g = affineValue(a);
  return v;
}

Val KernelEmitter::select(const Val& c, const Val& t, const Val& f, DType type,
                                         const Mode& mode) {
  Val v;
  if (mode.vector) {
    v.kind = Val::Kind::kVec;
    v.v = vsimd_->newVec("sel");
    vsimd_->select(v.v, c.m, t.v, f.v);
    return v;
  }
  if (isFloat(type)) {
    Simd& s = scalarSimd(type);
    v.kind = Val::Kind::kVec;
    v.v = s.newVec("sel");
    Label use_f = cc_.newLabel(), done = cc_.newLabel();
    const x86::Gp g = gp(c);
    cc_.test(g, g);
    cc_.jz(use_f);
    s.mov(v.v, t.v);
    cc_.jmp(done);
    cc_.bind(use_f);
    s.mov(v.v, f.v);
    cc_.bind(done);
    return v;
  }
  v.g = cc_.newInt64("sel");
  const x86::Gp g = gp(c), if_true = gp(t);
  moveInto(v.g, f);
  cc_.test(g, g);
  cc_.cmovnz(v.g, if_true);
  return v;
}

Val KernelEmitter::accumulator(OpCode combiner, DType dtype, bool vector) {
  const double id = choir::combinerIdentity(combiner, dtype);
  Val v;
  if (isFloat(dtype)) {
    Simd& s = vector ? *vsimd_ : scalarSimd(dtype);
    v.kind = Val::Kind::kVec;
    v.v = s.newVec("acc");
    s.constant(v.v, id);
    return v;
  }
  v.g = cc_.newInt64("acc");
  cc_.mov(v.g, tensor::toInt64(id));
  return v;
}

void KernelEmitter::assign(DType dtype, const Val& var, const Val& v, bool vector) {
  if (isFloat(dtype)) {
    (vector ? *vsimd_ : scalarSimd(dtype)).mov(var.v, v.v);
  } else {
    moveInto(var.g, v);
  }
}

void KernelEmitter::combineLanes(OpCode combiner, DType dtype, const Val& lanes, Val& acc) {
  Val h;
  h.kind = Val::Kind::kVec;
  h.v = cc_.newXmm("h");
  Simd::Horizontal op = combiner == OpCode::kMul   ? Simd::Horizontal::kProd
                        : combiner == OpCode::kMax ? Simd::Horizontal::kMax
                        : combiner == OpCode::kMin ? Simd::Horizontal::kMin
                                                   : Simd::Horizontal::kSum;
  vsimd_->horizontal(op, h.v, lanes.v);
  combine(combiner, dtype, acc, h, false);
}

// Through a stack slot: the vector stored, each lane loaded as a scalar.
std::vector<Val> KernelEmitter::laneValues(DType dtype, const Val& lanes) {
  const int count = vsimd_->lanes();
  const int bytes = dtype == DType::f64 ? 8 : 4;
  const asmjit::x86::Mem slot = cc_.newStack(static_cast<uint32_t>(count * bytes), 64, "lanes");
  vsimd_->store(slot, lanes.v);
  Simd& one = scalarSimd(dtype);
  std::vector<Val> out;
  for (int l = 0; l < count; ++l) {
    Val x;
    x.kind = Val::Kind::kVec;
    x.v = one.newVec("lane");
    asmjit::x86::Mem at = slot;
    at.addOffset(int64_t{l} * bytes);
    one.load(x.v, at);
    out.push_back(x);
  }
  return out;
}

}  // namespace accy::x64
