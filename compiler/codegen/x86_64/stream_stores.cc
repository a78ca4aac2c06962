// Non-temporal stores on x86-64: which vectorized store loops stream their
// output past the caches, and the scalar steps that align a streamed
// output to the vector.
#include "base/status_macros.h"
#include "compiler/choir/rewrite.h"
#include "compiler/codegen/x86_64/kernel_emitter.h"
#include "compiler/codegen/x86_64/primitives.h"

namespace accy::x64 {

bool KernelEmitter::streams(const Stmt& l) const {
  const Stmt& st = l.body[0];
  const choir::Buffer& out = m_.buffers[st.buffer];
  if (!isFloat(out.dtype) || l.loop.vector_width <= 1) return false;
  if (choir::flatCoeff(out, st.index, l.loop.var) != 1) return false;
  // Streaming an output the kernel also reads would evict what it reads.
  // Only light values stream: where each vector takes tens of instructions
  // (a transcendental function, a division, a long chain) the loop is bound
  // by arithmetic, and there plain stores measured faster (sin(a x + b) c
  // over 64 MiB: 3.40 against 3.73 ms, docs/PERFORMANCE.md).
  constexpr int64_t kStreamNodes = 16;
  bool reads_output = false;
  const bool heavy = choir::exprSize(st.value) > kStreamNodes || choir::exprIsExpensive(st.value);
  choir::visitExpr(st.value, [&](const Expr& x) {
    if (x.kind == ExprKind::kLoad && x.buffer == st.buffer) reads_output = true;
  });
  return !reads_output && !heavy && stream_above_ >= 0 &&
         out.elements() * tensor::dtypeSize(out.dtype) > stream_above_;
}

// The address of the element loop `l`'s store writes at its first
// iteration (its row, the loop's stride-1 variable at 0).
x86::Gp KernelEmitter::storedRowBase(const Stmt& l) {
  const Stmt& st = l.body[0];
  return rowBase(st.buffer, choir::add(choir::flatIndex(m_.buffers[st.buffer], st.index), Affine::var(l.loop.var, -1)));
}

// A streamed row of a few whole vectors (an embedding gather's 256 bytes)
// is written straight, without the aligning steps, where it starts
// aligned: a test per row instead of a loop's.
KernelEmitter::OpenAligned KernelEmitter::beginAlignedRow(const Stmt& l, x86::Gp i, int width) {
  const DType dtype = m_.buffers[l.body[0].buffer].dtype;
  const x86::Gp row = storedRowBase(l);
  OpenAligned a{cc_.newLabel(), cc_.newLabel()};
  x86::Gp at = cc_.newIntPtr("at");
  cc_.lea(at, x86::ptr(row, i, shiftOf(dtype)));
  cc_.test(at, width * tensor::dtypeSize(dtype) - 1);
  cc_.jnz(a.other);
  return a;
}

absl::Status KernelEmitter::alignStream(const Stmt& l, x86::Gp i, x86::Gp limit, int width, const Mode& scalar) {
  // Scalar iterations until the output is aligned to the vector (the
  // streaming stores need it); an output not aligned to its element size
  // never gets there and runs scalar, still correct.
  const Stmt& st = l.body[0];
  const DType dtype = m_.buffers[st.buffer].dtype;
  const int64_t size = tensor::dtypeSize(dtype);
  const x86::Gp row = storedRowBase(l);
  Label top = cc_.newLabel(), aligned = cc_.newLabel();
  x86::Gp at = cc_.newIntPtr("at");
  cc_.bind(top);
  cc_.cmp(i, limit);
  cc_.jge(aligned);
  cc_.lea(at, x86::ptr(row, i, shiftOf(dtype)));
  cc_.test(at, width * size - 1);
  cc_.jz(aligned);
  cse_.clear();
  ACCY_RETURN_IF_ERROR(store(st, scalar));
  cc_.inc(i);
  cc_.jmp(top);
  cc_.bind(aligned);
  return absl::OkStatus();
}

}  // namespace accy::x64
