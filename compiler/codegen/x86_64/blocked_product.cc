// The register-blocked matrix product of the x86-64 emitter
// (kernel_emitter.h, Product): recognizing the accumulate-in-output loop
// nest and emitting it as a microkernel over packed panels of B.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "compiler/codegen/x86_64/kernel_emitter.h"
#include "compiler/codegen/x86_64/primitives.h"

namespace accy::x64 {

namespace {

// Register blocks of the product microkernel: rows x vectors of columns.
// Accumulators, one vector per column block and one broadcast stay within
// the ISA's vector registers (AVX-512: 24 + 4 + 1 of 32; AVX2: 12 + 2 + 1
// of 16; SSE4.1, without FMA, 8 + 2 + 1 and a product temporary of 16).
int productRows(Isa isa) { return isa == Isa::kSse41 ? 4 : 6; }
int productVectors(Isa isa) { return isa == Isa::kAvx512 ? 4 : 2; }

// Steps of the loops nested in k that one step of k unrolls, at most.
constexpr int64_t kMaxInnerSteps = 32;

}  // namespace

std::optional<absl::Status> KernelEmitter::specialLoop(const Stmt& l, bool outermost) {
  if (Product p; matchProduct(l, &p)) return blockedProduct(l, p, outermost);
  // Rows that add several k loops in turn to C (a long sum's step split at
  // the padding's edges): one product per k loop, each over every row, in
  // the order of the statements, which is each element's order of
  // additions.
  if (l.body.size() < 2) return std::nullopt;
  for (const Stmt& st : l.body) {
    if (st.kind != StmtKind::kLoop || st.loop.tag != LoopTag::kSerial) return std::nullopt;
  }
  std::vector<Stmt> parts;
  for (const Stmt& st : l.body) parts.push_back(Stmt::loopOf(l.loop, {st}));
  std::vector<Product> products(parts.size());
  for (size_t n = 0; n < parts.size(); ++n) {
    if (!matchProduct(parts[n], &products[n]) || !products[n].accumulates) return std::nullopt;
    if (products[n].acc->buffer != products[0].acc->buffer) return std::nullopt;
  }
  for (size_t n = 0; n < parts.size(); ++n) {
    if (absl::Status st = blockedProduct(parts[n], products[n], outermost); !st.ok()) return st;
  }
  return absl::OkStatus();
}

bool KernelEmitter::matchProduct(const Stmt& l, Product* p) const {
  if (l.body.empty() || l.body.size() > 3) return false;
  // With no `for j: C = 0` first, the product adds to what C holds (the
  // output zeroed before the loops around it: loop_order's reductionOuter).
  const bool accumulates = l.body[0].kind == StmtKind::kLoop && l.body[0].loop.tag == LoopTag::kSerial;
  const size_t k_at = accumulates ? 0 : 1;
  if (l.body.size() < k_at + 1 || l.body.size() > k_at + 2) return false;
  const Stmt& k_loop = l.body[k_at];
  if (k_loop.kind != StmtKind::kLoop || k_loop.loop.tag != LoopTag::kSerial || k_loop.body.empty()) return false;
  // The reference column loop and store: the zeroing, or the first leaf.
  const Stmt* first = &k_loop;
  while (first->kind == StmtKind::kLoop && first->loop.tag == LoopTag::kSerial && !first->body.empty()) {
    first = &first->body[0];
  }
  const Stmt& init = accumulates ? *first : l.body[0];
  if (init.kind != StmtKind::kLoop || init.loop.tag != LoopTag::kVectorized || init.body.size() != 1) return false;
  const Stmt& zero = init.body[0];
  if (zero.kind != StmtKind::kStore) return false;
  if (!accumulates && (zero.value->kind != ExprKind::kConstant || zero.value->constant != 0 ||
                       std::signbit(zero.value->constant))) {
    return false;
  }
  const choir::Buffer& c = m_.buffers[zero.buffer];
  if (!isFloat(c.dtype)) return false;
  const int i = l.loop.var, j0 = init.loop.var, k = k_loop.loop.var;
  const int size = static_cast<int>(tensor::dtypeSize(c.dtype));
  const Affine at_init = choir::flatIndex(c, zero.index);
  if (at_init.coeffOf(j0) != 1 || at_init.coeffOf(i) == 0) return false;
  const Affine c_row = choir::add(at_init, Affine::var(j0, -1));  // C's row, without the column
  Product out;
  out.k_loop = &k_loop;
  // The unrolled terms of one step of k: the leaves of the loops under k,
  // at every value of those loops, in order (the order of the additions).
  // Positions are compared with the first leaf's at its loops' zero: their
  // difference must be a constant (the term's displacement).
  Affine a_ref, b_ref;
  bool have_a = false;
  std::function<bool(const std::vector<Stmt>&, choir::Substitution&, std::vector<int>&)> walk =
      [&](const std::vector<Stmt>& body, choir::Substitution& s, std::vector<int>& inner) -> bool {
    for (const Stmt& st : body) {
      if (st.kind != StmtKind::kLoop) return false;
      if (st.loop.tag == LoopTag::kSerial) {
        inner.push_back(st.loop.var);
        out.inner_vars.push_back(st.loop.var);
        for (int64_t t = 0; t < st.loop.extent; ++t) {
          s.set(st.loop.var, Affine::constantOf(t));
          if (!walk(st.body, s, inner)) return false;
          if (static_cast<int64_t>(out.terms.size()) > kMaxInnerSteps) return false;
        }
        inner.pop_back();
        continue;
      }
      // A leaf: for j: C[i, j] = C[i, j] + A * B.
      if (st.loop.tag != LoopTag::kVectorized || st.body.size() != 1 || st.loop.extent != init.loop.extent ||
          st.loop.vector_width != init.loop.vector_width) {
        return false;
      }
      const int j = st.loop.var;
      const Stmt& acc = st.body[0];
      if (acc.kind != StmtKind::kStore || acc.buffer != zero.buffer) return false;
      const Affine at_acc = choir::flatIndex(c, acc.index);
      if (at_acc.coeffOf(j) != 1 || !(choir::add(at_acc, Affine::var(j, -1)) == c_row)) return false;
      const Expr& v = *acc.value;
      if (v.kind != ExprKind::kOp || v.op != OpCode::kAdd || v.dtype != c.dtype) return false;
      // Positions at this term (the loops under k at their values) and at
      // the leaf's loops' zero, columns in the reference variable j0.
      choir::Substitution sj = s, zeros;
      sj.set(j, Affine::var(j0));
      for (int var : inner) zeros.set(var, Affine::constantOf(0));
      zeros.set(j, Affine::var(j0));
      // The term's displacement in bytes from the reference: a constant that
      // fits an instruction, or no term.
      auto displacement = [&](const Affine& here, const Affine& ref, int32_t* bytes) {
        const Affine d = choir::add(here, choir::scale(ref, -1));
        if (!d.terms.empty() || !fitsImm32(d.constant * size)) return false;
        *bytes = static_cast<int32_t>(d.constant * size);
        return true;
      };
      bool matched = false;
      for (int side = 0; side < 2 && !matched; ++side) {
        const Expr& self = *v.args[side];
        const Expr& prod = *v.args[1 - side];
        if (self.kind != ExprKind::kLoad || self.buffer != acc.buffer || !(self.index == acc.index)) continue;
        if (prod.kind != ExprKind::kOp || prod.op != OpCode::kMul || prod.dtype != c.dtype) continue;
        for (int order = 0; order < 2 && !matched; ++order) {
          const Expr& x = *prod.args[order];
          const Expr& y = *prod.args[1 - order];
          if (y.kind != ExprKind::kLoad || y.dtype != c.dtype || y.buffer == acc.buffer || !y.bound.empty()) continue;
          if (!out.terms.empty() && y.buffer != out.b->buffer) continue;
          const choir::Buffer& yb = m_.buffers[y.buffer];
          const Affine yb_at = choir::substitute(choir::flatIndex(yb, y.index), sj);
          if (yb_at.coeffOf(j0) != 1 || yb_at.coeffOf(i) != 0) continue;
          Term term;
          if (x.kind == ExprKind::kConstant && x.dtype == c.dtype) {
            term.a_constant = true;
            term.a_value = x.constant;
          } else if (x.kind == ExprKind::kLoad && x.dtype == c.dtype && x.buffer != acc.buffer && x.bound.empty()) {
            const choir::Buffer& xa = m_.buffers[x.buffer];
            const Affine xa_at = choir::substitute(choir::flatIndex(xa, x.index), sj);
            if (xa_at.coeffOf(j0) != 0) continue;
            if (!have_a) {
              out.a = &x;
              a_ref = choir::substitute(choir::flatIndex(xa, x.index), zeros);  // the first A load's
              have_a = true;
            } else if (x.buffer != out.a->buffer) {
              continue;
            }
            if (!displacement(xa_at, a_ref, &term.a_disp)) continue;
          } else {
            continue;
          }
          if (out.terms.empty()) {
            out.b = &y;
            out.j_loop = &st;
            out.acc = &acc;
            b_ref = choir::substitute(choir::flatIndex(yb, y.index), zeros);
          }
          if (!displacement(yb_at, b_ref, &term.b_disp)) continue;
          out.terms.push_back(term);
          matched = true;
        }
      }
      if (!matched) return false;
    }
    return true;
  };
  choir::Substitution s;
  std::vector<int> inner;
  // Every term's A may be a constant (a piece of the padding): then no A
  // is read.
  if (!walk(k_loop.body, s, inner) || out.terms.empty()) return false;
  // C's row stays put over k (its sums live in registers over the whole k
  // loop): without the zeroing, which fixes the row, check it here.
  if (c_row.coeffOf(k) != 0) return false;
  for (int var : out.inner_vars) {
    if (c_row.coeffOf(var) != 0) return false;
  }
  // Displacements within a block and per-k steps fit an instruction. A's
  // and B's steps along i and k are the reference's (every term differs
  // from it by a constant).
  const int64_t rows = productRows(isa_);
  if (!fitsImm32(a_ref.coeffOf(i) * size * rows) || !fitsImm32(c_row.coeffOf(i) * size * rows) ||
      !fitsImm32(a_ref.coeffOf(k) * size) || !fitsImm32(b_ref.coeffOf(k) * size)) {
    return false;
  }
  out.a_row = a_ref.coeffOf(i) * size;
  out.a_step = a_ref.coeffOf(k) * size;
  out.b_step = b_ref.coeffOf(k) * size;
  out.c_row = c_row.coeffOf(i) * size;
  out.b_invariant = true;
  for (const Affine::Term& t : b_ref.terms) out.b_invariant = out.b_invariant && (t.var == j0 || t.var == k);
  out.accumulates = accumulates;
  if (l.body.size() == k_at + 2) {
    const Stmt& e = l.body[k_at + 1];
    if (e.kind != StmtKind::kLoop || e.loop.tag != LoopTag::kVectorized || e.body.size() != 1 ||
        e.body[0].kind != StmtKind::kStore || e.loop.extent != init.loop.extent ||
        e.loop.vector_width != init.loop.vector_width) {
      return false;
    }
    out.epilogue = &e.body[0];
    out.epilogue_var = e.loop.var;
  }
  *p = std::move(out);
  return true;
}

absl::Status KernelEmitter::blockedProduct(const Stmt& l, const Product& p, bool outermost) {
  const Stmt& acc = *p.acc;
  const DType dtype = m_.buffers[acc.buffer].dtype;
  const int size = static_cast<int>(tensor::dtypeSize(dtype));
  const int width = p.j_loop->loop.vector_width;
  const int64_t n = p.j_loop->loop.extent;
  const int64_t k_extent = p.k_loop->loop.extent;
  const int i_var = l.loop.var, j_var = p.j_loop->loop.var, k_var = p.k_loop->loop.var;
  const int32_t a_row = static_cast<int32_t>(p.a_row);
  const int32_t a_step = static_cast<int32_t>(p.a_step);
  const int32_t b_step = static_cast<int32_t>(p.b_step);
  const int32_t c_row = static_cast<int32_t>(p.c_row);
  const int rows = productRows(isa_);
  const int vectors = static_cast<int>(std::min<int64_t>(productVectors(isa_), n / width));
  const int steps = static_cast<int>(p.terms.size());

  x86::Gp i = cc_.newInt64("i");
  x86::Gp j = cc_.newInt64("j");
  x86::Gp k_zero = constantIndex(0);
  vars_[i_var] = i;
  vars_[j_var] = j;
  vars_[k_var] = k_zero;  // the pointers below are taken at k = 0
  for (int var : p.inner_vars) vars_[var] = k_zero;
  // Threads split the rows, or, when there are enough whole column blocks
  // (kColumnSplit), the column blocks: a launch's share [begin, end) of the
  // rows is mapped to the share [begin, end) * blocks / rows of the column
  // blocks, over every row. Split by columns, each thread packs only its
  // own columns of B (split by rows, every thread packs all of B: twice the
  // packing on two threads, and most of the work when the rows are few).
  constexpr int64_t kColumnSplit = 8;
  const bool parallel = outermost && l.loop.tag == LoopTag::kCpuParallel;
  const int64_t block = static_cast<int64_t>(vectors) * width;
  const int64_t column_blocks = n / block;
  const bool split_columns = parallel && column_blocks >= kColumnSplit && fitsImm32(column_blocks * block);
  x86::Gp start, limit, j_begin, j_end;
  const bool rows_shared = parallel && !split_columns;
  if (rows_shared) {
    start = begin_;
    limit = end_;
  } else {
    start = constantIndex(0);
    limit = constantIndex(l.loop.extent);
  }
  if (split_columns) {
    auto share = [&](x86::Gp row) {
      x86::Gp lo = cc_.newInt64("share"), hi = cc_.newInt64("share_hi"), rows_total = cc_.newInt64("rows");
      cc_.imul(lo, row, static_cast<int32_t>(column_blocks));
      cc_.xor_(hi, hi);
      cc_.mov(rows_total, l.loop.extent);
      cc_.div(hi, lo, rows_total);
      cc_.imul(lo, lo, static_cast<int32_t>(block));
      return lo;
    };
    j_begin = share(begin_);
    j_end = share(end_);
  } else {
    j_begin = constantIndex(0);
    j_end = constantIndex(column_blocks * block);
  }
  x86::Gp rows_limit = cc_.newInt64("rows_limit");
  cc_.mov(rows_limit, limit);
  cc_.sub(rows_limit, rows - 1);
  Simd vec(cc_, isa_, laneOf(dtype), width * size);
  Simd scalar = vec.scalarForm();

  // The element address of `index` in `buffer` at the current i, j and k = 0.
  auto pointer = [&](int buffer, const std::vector<Affine>& index, const char* name) {
    x86::Gp ptr = cc_.newIntPtr(name);
    x86::Gp off = affineValue(choir::flatIndex(m_.buffers[buffer], index));
    cc_.lea(ptr, x86::ptr(bufferBase(buffer), off, shiftOf(dtype)));
    return ptr;
  };
  x86::Gp all_k = constantIndex(k_extent);
  // R rows from i times V vectors (of s's lanes) from j, over k in
  // [k0, k0 + k_count): the sums start at zero when k0 is 0 and at C
  // otherwise (the partial sum of the k blocks before: the same additions
  // in the same order). B comes from `panel` (packed rows of panel_row
  // bytes, aligned) or, without one, from B itself.
  auto micro = [&](int r_count, int v_count, Simd& s, x86::Gp k0, x86::Gp k_count, x86::Gp panel,
                   int32_t panel_row) -> absl::Status {
    const int32_t v_bytes = s.scalar() ? size : width * size;
    vars_[k_var] = k0;
    x86::Gp pa = p.a != nullptr ? pointer(p.a->buffer, p.a->index, "pa") : x86::Gp();
    x86::Gp pc = pointer(acc.buffer, acc.index, "pc");
    x86::Gp pb;
    if (panel.isValid()) {
      pb = cc_.newIntPtr("pb");
      cc_.mov(pb, panel);
    } else {
      pb = pointer(p.b->buffer, p.b->index, "pb");
    }
    vars_[k_var] = k_zero;
    std::vector<x86::Vec> sums(static_cast<size_t>(r_count * v_count));
    for (x86::Vec& sum : sums) sum = s.newVec("sum");
    Label from_c = cc_.newLabel(), ready = cc_.newLabel();
    if (!p.accumulates) {
      cc_.test(k0, k0);
      cc_.jnz(from_c);
      for (x86::Vec& sum : sums) s.zero(sum);
      cc_.jmp(ready);
    }
    cc_.bind(from_c);
    for (int r = 0; r < r_count; ++r) {
      for (int v = 0; v < v_count; ++v) s.load(sums[r * v_count + v], x86::ptr(pc, r * c_row + v * v_bytes));
    }
    cc_.bind(ready);
    x86::Gp k = cc_.newInt64("k");
    cc_.xor_(k, k);
    ACCY_RETURN_IF_ERROR(counted(k, k_count, 1, [&]() -> absl::Status {
      for (int u = 0; u < steps; ++u) {
        const Term& term = p.terms[static_cast<size_t>(u)];
        const int32_t b_at = panel.isValid() ? u * panel_row : term.b_disp;
        // One row uses each B vector once: loaded just before its FMA, so
        // that a wide row (every column at once, below) needs no register
        // per B vector.
        const bool b_once = r_count == 1;
        std::vector<x86::Vec> bv(static_cast<size_t>(v_count));
        for (int v = 0; v < v_count; ++v) {
          bv[v] = s.newVec("b");
          if (!b_once) s.load(bv[v], x86::ptr(pb, b_at + v * v_bytes));
        }
        x86::Vec av = s.newVec("a");
        if (term.a_constant) s.constant(av, term.a_value);
        for (int r = 0; r < r_count; ++r) {
          if (term.a_constant) {
            // the same value in every row
          } else if (s.scalar()) {
            s.load(av, x86::ptr(pa, r * a_row + term.a_disp));
          } else {
            s.broadcastLoad(av, x86::ptr(pa, r * a_row + term.a_disp));
          }
          for (int v = 0; v < v_count; ++v) {
            x86::Vec& sum = sums[static_cast<size_t>(r * v_count + v)];
            if (b_once) s.load(bv[v], x86::ptr(pb, b_at + v * v_bytes));
            s.fma(sum, av, bv[v], sum);
          }
        }
      }
      if (p.a != nullptr) cc_.add(pa, a_step);
      cc_.add(pb, panel.isValid() ? panel_row * steps : b_step);
      return absl::OkStatus();
    }));
    for (int r = 0; r < r_count; ++r) {
      for (int v = 0; v < v_count; ++v) s.store(x86::ptr(pc, r * c_row + v * v_bytes), sums[r * v_count + v]);
    }
    if (p.epilogue == nullptr) return absl::OkStatus();
    // The epilogue, once the tile holds its whole sum (after the last k
    // panel), element by element of the tile: row i + r, columns j + v W.
    Label skip = cc_.newLabel();
    if (panel.isValid()) {
      x86::Gp end = cc_.newInt64("k_end");
      cc_.mov(end, k0);
      cc_.add(end, k_count);
      cc_.cmp(end, all_k);
      cc_.jne(skip);
    }
    // Each row's addresses are computed once for its vectors, and what
    // does not change along the row (constants, a broadcast of in0[i]) is
    // loaded once for them, after those addresses: hoisted to the tile, a
    // row's broadcast was loaded before any row's address existed (from a
    // stack slot not yet written) and every row reused the first row's.
    const int lanes = s.scalar() ? 1 : width;
    const Hoist outer_hoist = hoist_;
    const std::vector<Simd*> outer_hoisting = hoisting_;
    for (Simd* o : outer_hoisting) o->setHoist(nullptr);
    hoisting_.clear();
    const bool rows_were_active = rows_active_;
    Simd* const outer_simd = vsimd_;
    vsimd_ = s.scalar() ? nullptr : &s;
    decltype(rows_) outer_rows;
    outer_rows.swap(rows_);
    rows_active_ = true;
    for (int r = 0; r < r_count; ++r) {
      x86::Gp row = cc_.newInt64("row");
      cc_.lea(row, x86::ptr(i, r));
      vars_[i_var] = row;
      rows_.clear();
      forgetHoisted();  // bound values of the previous row
      prepareRows(*p.epilogue, p.epilogue_var);
      beginHoist({&s, &scalar32_, &scalar64_});
      for (int v = 0; v < v_count; ++v) {
        x86::Gp column = cc_.newInt64("column");
        cc_.lea(column, x86::ptr(j, v * lanes));
        vars_[p.epilogue_var] = column;
        Mode mode{!s.scalar(), p.epilogue_var, column};
        cse_.clear();
        ACCY_RETURN_IF_ERROR(store(*p.epilogue, mode));
      }
      endHoist();
    }
    forgetHoisted();
    rows_.swap(outer_rows);
    vsimd_ = outer_simd;
    rows_active_ = rows_were_active;
    hoist_ = outer_hoist;
    hoisting_ = outer_hoisting;
    for (Simd* o : hoisting_) o->setHoist(&hoist_);
    cse_.clear();
    vars_[i_var] = i;
    cc_.bind(skip);
    return absl::OkStatus();
  };
  // Every row block of [start, limit) at the current j and k block.
  auto row_blocks = [&](int v_count, Simd& s, x86::Gp k0, x86::Gp k_count, x86::Gp panel,
                        int32_t panel_row) -> absl::Status {
    cc_.mov(i, start);
    ACCY_RETURN_IF_ERROR(counted(i, rows_limit, rows,
                                     [&] { return micro(rows, v_count, s, k0, k_count, panel, panel_row); }));
    // The rows left: one block of their number when every launch runs all
    // the rows (a row loop inside others: a convolution's row of pixels),
    // else one at a time.
    if (!rows_shared) {
      const int left = static_cast<int>(l.loop.extent % rows);
      return left == 0 ? absl::OkStatus() : micro(left, v_count, s, k0, k_count, panel, panel_row);
    }
    return counted(i, limit, 1, [&] { return micro(1, v_count, s, k0, k_count, panel, panel_row); });
  };
  // Column blocks outermost. Whole blocks of `vectors` vectors pack their
  // B rows, kPanelRows at a time, into an aligned panel on the stack (the
  // microkernel then reads B contiguously and aligned, whatever the
  // caller's alignment); the remaining columns read B in place.
  constexpr int64_t kPanelRows = 256;
  // A panel holds panel_rows steps of k, each `steps` rows of B.
  const int64_t panel_rows = std::min<int64_t>(std::max<int64_t>(1, kPanelRows / steps), k_extent);
  const int32_t panel_row = static_cast<int32_t>(block * size);
  x86::Mem panel_mem = cc_.newStack(static_cast<uint32_t>(panel_rows * steps * panel_row), 64, "panel");
  x86::Gp panel = cc_.newIntPtr("panel");
  cc_.lea(panel, panel_mem);
  x86::Gp k0 = cc_.newInt64("k0");
  x86::Gp k_count = cc_.newInt64("k_count");
  cc_.mov(j, j_begin);
  // B small enough to stay in cache whatever its layout (a convolution's
  // weights) is read in place: packing it again for every call of the row
  // loop would cost as much as the product.
  constexpr int64_t kInPlaceBytes = int64_t{256} << 10;
  // B already laid out as its panel would be (one column block, each step
  // of k the row after the last: a convolution's weight gradient reading
  // the output gradient's channels) is read in place too: a copy would
  // change only its alignment.
  bool dense = n == block && p.b_step == static_cast<int64_t>(steps) * panel_row;
  for (int u = 0; u < steps; ++u) dense = dense && p.terms[static_cast<size_t>(u)].b_disp == u * panel_row;
  // B whose slice for this call is short and compact, used by few row
  // blocks (a convolution's weight gradient: 55 rows of the output
  // gradient 256 bytes apart, for 16 rows of the sum) is read in place as
  // well: packing would copy it on every call and pay that back over only
  // those few blocks, while in place a column block's lines (one per step
  // of k) spread over enough L1 sets to stay there.
  constexpr int64_t kCompactBytes = int64_t{16} << 10;
  constexpr int64_t kFewRowBlocks = 8;
  const bool compact = p.b_step > 0 && k_extent * p.b_step <= kCompactBytes && l.loop.extent <= kFewRowBlocks * rows;
  const bool in_place =
      (!outermost && p.b_invariant && k_extent * steps * n * size <= kInPlaceBytes) || dense || compact;
  // One row (a convolution's border column: one pixel) holds too few sums
  // per column block to cover the FMA's latency (2 on AVX2, against 8 FMAs
  // in flight): with B read in place, it takes every column at once, up to
  // kWideVectors vectors, each sum still in k order.
  constexpr int64_t kWideVectors = 8;
  const int64_t wide = n / width;
  if (in_place && !split_columns && !rows_shared && l.loop.extent == 1 && n % width == 0 && wide > vectors &&
      wide <= kWideVectors) {
    cc_.mov(j, j_begin);
    cc_.mov(i, start);
    return micro(static_cast<int>(l.loop.extent), static_cast<int>(wide), vec, k_zero, all_k, x86::Gp(), 0);
  }
  ACCY_RETURN_IF_ERROR(counted(j, j_end, block, [&]() -> absl::Status {
    if (in_place) return row_blocks(vectors, vec, k_zero, all_k, x86::Gp(), 0);
    cc_.xor_(k0, k0);
    return counted(k0, all_k, panel_rows, [&]() -> absl::Status {
      // k_count = min(panel_rows, k_extent - k0)
      cc_.mov(k_count, all_k);
      cc_.sub(k_count, k0);
      x86::Gp most = constantIndex(panel_rows);
      cc_.cmp(k_count, most);
      cc_.cmovg(k_count, most);
      // Pack B[k0 .. k0 + k_count, j .. j + block).
      vars_[k_var] = k0;
      x86::Gp src = pointer(p.b->buffer, p.b->index, "src");
      vars_[k_var] = k_zero;
      x86::Gp dst = cc_.newIntPtr("dst");
      cc_.mov(dst, panel);
      x86::Gp kk = cc_.newInt64("kk");
      cc_.xor_(kk, kk);
      ACCY_RETURN_IF_ERROR(counted(kk, k_count, 1, [&]() -> absl::Status {
        for (int u = 0; u < steps; ++u) {
          for (int v = 0; v < vectors; ++v) {
            x86::Vec t = vec.newVec("pack");
            vec.load(t, x86::ptr(src, p.terms[static_cast<size_t>(u)].b_disp + v * width * size));
            vec.store(x86::ptr(dst, u * panel_row + v * width * size), t);
          }
        }
        cc_.add(src, b_step);
        cc_.add(dst, panel_row * steps);
        return absl::OkStatus();
      }));
      return row_blocks(vectors, vec, k0, k_count, panel, panel_row);
    });
  }));
  // The remaining columns: in the launch that ends the rows, when split
  // by columns (j is then at the end of the whole blocks).
  Label done = cc_.newLabel();
  if (split_columns) {
    cc_.cmp(end_, constantIndex(l.loop.extent));
    cc_.jne(done);
  }
  x86::Gp none;
  if (n % block >= width) {
    ACCY_RETURN_IF_ERROR(counted(j, constantIndex(n - (width - 1)), width,
                                     [&] { return row_blocks(1, vec, k_zero, all_k, none, 0); }));
  }
  if (n % width != 0) {
    ACCY_RETURN_IF_ERROR(
        counted(j, constantIndex(n), 1, [&] { return row_blocks(1, scalar, k_zero, all_k, none, 0); }));
  }
  cc_.bind(done);
  return absl::OkStatus();
}

}  // namespace accy::x64
