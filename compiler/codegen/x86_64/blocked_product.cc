// The register-blocked matrix product of the x86-64 emitter
// (kernel_emitter.h, Product): recognizing the accumulate-in-output loop
// nest and emitting it as a microkernel over packed panels of B.
#include <algorithm>
#include <cmath>
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

}  // namespace

std::optional<absl::Status> KernelEmitter::specialLoop(const Stmt& l, bool outermost) {
  if (Product p; matchProduct(l, &p)) return blockedProduct(l, p, outermost);
  return std::nullopt;
}

bool KernelEmitter::matchProduct(const Stmt& l, Product* p) const {
  if (l.body.size() != 2 && l.body.size() != 3) return false;
  const Stmt& init = l.body[0];
  const Stmt& k_loop = l.body[1];
  if (init.kind != StmtKind::kLoop || init.loop.tag != LoopTag::kVectorized || init.body.size() != 1) return false;
  const Stmt& zero = init.body[0];
  if (zero.kind != StmtKind::kStore || zero.value->kind != ExprKind::kConstant || zero.value->constant != 0 ||
      std::signbit(zero.value->constant)) {
    return false;
  }
  if (k_loop.kind != StmtKind::kLoop || k_loop.loop.tag != LoopTag::kSerial || k_loop.body.size() != 1) return false;
  const Stmt& j_loop = k_loop.body[0];
  if (j_loop.kind != StmtKind::kLoop || j_loop.loop.tag != LoopTag::kVectorized || j_loop.body.size() != 1 ||
      j_loop.loop.extent != init.loop.extent || j_loop.loop.vector_width != init.loop.vector_width) {
    return false;
  }
  const Stmt& acc = j_loop.body[0];
  if (acc.kind != StmtKind::kStore || acc.buffer != zero.buffer) return false;
  const choir::Buffer& c = m_.buffers[acc.buffer];
  if (!isFloat(c.dtype)) return false;
  const int i = l.loop.var, j0 = init.loop.var, j = j_loop.loop.var, k = k_loop.loop.var;
  // Both statements write C[i, j] for the same (i, j); rows apart.
  const Affine at_init = choir::flatIndex(c, zero.index), at_acc = choir::flatIndex(c, acc.index);
  if (at_init.coeffOf(j0) != 1 || at_acc.coeffOf(j) != 1 || at_acc.coeffOf(k) != 0 || at_acc.coeffOf(i) == 0) {
    return false;
  }
  if (!(choir::add(at_init, Affine::var(j0, -1)) == choir::add(at_acc, Affine::var(j, -1)))) return false;
  const int size = static_cast<int>(tensor::dtypeSize(c.dtype));
  const Expr& v = *acc.value;
  if (v.kind != ExprKind::kOp || v.op != OpCode::kAdd || v.dtype != c.dtype) return false;
  for (int side = 0; side < 2; ++side) {
    const Expr& self = *v.args[side];
    const Expr& prod = *v.args[1 - side];
    if (self.kind != ExprKind::kLoad || self.buffer != acc.buffer || !(self.index == acc.index)) continue;
    if (prod.kind != ExprKind::kOp || prod.op != OpCode::kMul || prod.dtype != c.dtype) continue;
    for (int order = 0; order < 2; ++order) {
      const Expr& x = *prod.args[order];
      const Expr& y = *prod.args[1 - order];
      if (x.kind != ExprKind::kLoad || y.kind != ExprKind::kLoad || x.dtype != c.dtype || y.dtype != c.dtype ||
          x.buffer == acc.buffer || y.buffer == acc.buffer || !x.bound.empty() || !y.bound.empty()) {
        continue;
      }
      const choir::Buffer& xa = m_.buffers[x.buffer];
      const choir::Buffer& yb = m_.buffers[y.buffer];
      if (choir::flatCoeff(xa, x.index, j) != 0 || choir::flatCoeff(yb, y.index, j) != 1 ||
          choir::flatCoeff(yb, y.index, i) != 0) {
        continue;
      }
      // Displacements within a block and per-k steps fit an instruction.
      const int64_t rows = productRows(isa_);
      if (!fitsImm32(choir::flatCoeff(xa, x.index, i) * size * rows) ||
          !fitsImm32(choir::flatCoeff(c, acc.index, i) * size * rows) ||
          !fitsImm32(choir::flatCoeff(xa, x.index, k) * size) || !fitsImm32(choir::flatCoeff(yb, y.index, k) * size)) {
        return false;
      }
      *p = Product{&k_loop, &j_loop, &acc, &x, &y};
      if (l.body.size() == 3) {
        const Stmt& e = l.body[2];
        if (e.kind != StmtKind::kLoop || e.loop.tag != LoopTag::kVectorized || e.body.size() != 1 ||
            e.body[0].kind != StmtKind::kStore || e.loop.extent != j_loop.loop.extent ||
            e.loop.vector_width != j_loop.loop.vector_width) {
          return false;
        }
        p->epilogue = &e.body[0];
        p->epilogue_var = e.loop.var;
      }
      return true;
    }
  }
  return false;
}

absl::Status KernelEmitter::blockedProduct(const Stmt& l, const Product& p, bool outermost) {
  const Stmt& acc = *p.acc;
  const DType dtype = m_.buffers[acc.buffer].dtype;
  const int size = static_cast<int>(tensor::dtypeSize(dtype));
  const int width = p.j_loop->loop.vector_width;
  const int64_t n = p.j_loop->loop.extent;
  const int64_t k_extent = p.k_loop->loop.extent;
  const int i_var = l.loop.var, j_var = p.j_loop->loop.var, k_var = p.k_loop->loop.var;
  const choir::Buffer& a_buf = m_.buffers[p.a->buffer];
  const choir::Buffer& b_buf = m_.buffers[p.b->buffer];
  const choir::Buffer& c_buf = m_.buffers[acc.buffer];
  const int32_t a_row = static_cast<int32_t>(choir::flatCoeff(a_buf, p.a->index, i_var) * size);
  const int32_t a_step = static_cast<int32_t>(choir::flatCoeff(a_buf, p.a->index, k_var) * size);
  const int32_t b_step = static_cast<int32_t>(choir::flatCoeff(b_buf, p.b->index, k_var) * size);
  const int32_t c_row = static_cast<int32_t>(choir::flatCoeff(c_buf, acc.index, i_var) * size);
  const int rows = productRows(isa_);
  const int vectors = static_cast<int>(std::min<int64_t>(productVectors(isa_), n / width));

  x86::Gp i = cc_.newInt64("i");
  x86::Gp j = cc_.newInt64("j");
  x86::Gp k_zero = constantIndex(0);
  vars_[i_var] = i;
  vars_[j_var] = j;
  vars_[k_var] = k_zero;  // the pointers below are taken at k = 0
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
  if (parallel && !split_columns) {
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
    x86::Gp pa = pointer(p.a->buffer, p.a->index, "pa");
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
    cc_.test(k0, k0);
    cc_.jnz(from_c);
    for (x86::Vec& sum : sums) s.zero(sum);
    cc_.jmp(ready);
    cc_.bind(from_c);
    for (int r = 0; r < r_count; ++r) {
      for (int v = 0; v < v_count; ++v) s.load(sums[r * v_count + v], x86::ptr(pc, r * c_row + v * v_bytes));
    }
    cc_.bind(ready);
    x86::Gp k = cc_.newInt64("k");
    cc_.xor_(k, k);
    ACCY_RETURN_IF_ERROR(counted(k, k_count, 1, [&]() -> absl::Status {
      std::vector<x86::Vec> bv(static_cast<size_t>(v_count));
      for (int v = 0; v < v_count; ++v) {
        bv[v] = s.newVec("b");
        s.load(bv[v], x86::ptr(pb, v * v_bytes));
      }
      x86::Vec av = s.newVec("a");
      for (int r = 0; r < r_count; ++r) {
        if (s.scalar()) {
          s.load(av, x86::ptr(pa, r * a_row));
        } else {
          s.broadcastLoad(av, x86::ptr(pa, r * a_row));
        }
        for (int v = 0; v < v_count; ++v) {
          x86::Vec& sum = sums[static_cast<size_t>(r * v_count + v)];
          s.fma(sum, av, bv[v], sum);
        }
      }
      cc_.add(pa, a_step);
      cc_.add(pb, panel.isValid() ? panel_row : b_step);
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
    // Constants are loaded once per tile (the sums' registers are free by
    // now) and each row's addresses computed once for its vectors.
    const int lanes = s.scalar() ? 1 : width;
    const bool hoist = hoisting_.empty();
    if (hoist) beginHoist({&s, &scalar32_, &scalar64_});
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
      for (int v = 0; v < v_count; ++v) {
        x86::Gp column = cc_.newInt64("column");
        cc_.lea(column, x86::ptr(j, v * lanes));
        vars_[p.epilogue_var] = column;
        Mode mode{!s.scalar(), p.epilogue_var, column};
        cse_.clear();
        ACCY_RETURN_IF_ERROR(store(*p.epilogue, mode));
      }
    }
    forgetHoisted();
    rows_.swap(outer_rows);
    vsimd_ = outer_simd;
    rows_active_ = rows_were_active;
    if (hoist) endHoist();
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
    return counted(i, limit, 1, [&] { return micro(1, v_count, s, k0, k_count, panel, panel_row); });
  };
  // Column blocks outermost. Whole blocks of `vectors` vectors pack their
  // B rows, kPanelRows at a time, into an aligned panel on the stack (the
  // microkernel then reads B contiguously and aligned, whatever the
  // caller's alignment); the remaining columns read B in place.
  constexpr int64_t kPanelRows = 256;
  const int64_t panel_rows = std::min<int64_t>(kPanelRows, k_extent);
  const int32_t panel_row = static_cast<int32_t>(block * size);
  x86::Mem panel_mem = cc_.newStack(static_cast<uint32_t>(panel_rows * panel_row), 64, "panel");
  x86::Gp panel = cc_.newIntPtr("panel");
  cc_.lea(panel, panel_mem);
  x86::Gp k0 = cc_.newInt64("k0");
  x86::Gp k_count = cc_.newInt64("k_count");
  cc_.mov(j, j_begin);
  ACCY_RETURN_IF_ERROR(counted(j, j_end, block, [&]() -> absl::Status {
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
        for (int v = 0; v < vectors; ++v) {
          x86::Vec t = vec.newVec("pack");
          vec.load(t, x86::ptr(src, v * width * size));
          vec.store(x86::ptr(dst, v * width * size), t);
        }
        cc_.add(src, b_step);
        cc_.add(dst, panel_row);
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
