// Emits one Choir kernel as one asmjit function (see emitter.h for the ABI):
// the CPU loop-nest walker (compiler/codegen/cpu/loop_walker.h) over x86-64
// primitives. This header declares the primitives; kernel_emitter.cc holds
// them, blocked_product.cc the register-blocked matrix product and
// stream_stores.cc the choice and alignment of non-temporal stores.
#ifndef ACCY_COMPILER_CODEGEN_X86_64_KERNEL_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_X86_64_KERNEL_EMITTER_H_

#include <asmjit/x86.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/cpu/loop_walker.h"
#include "compiler/codegen/x86_64/simd.h"

namespace accy::x64 {

// An emitted scalar or vector value: floats in vector registers, integers
// and scalar bools in general registers, vector bools as masks. A scalar
// integer constant stays out of a register (`imm`) until an instruction
// needs it in one (KernelEmitter::gp): an add, a multiply, a comparison or
// a bit operation takes it as its immediate operand instead.
struct Val {
  enum class Kind { kVec, kGp, kMask } kind = Kind::kGp;
  asmjit::x86::Vec v;
  asmjit::x86::Gp g;  // kGp without `imm`
  Mask m;
  std::optional<int64_t> imm;
  // A scalar comparison's result: while the emitter's cursor is still at
  // `set` (the setcc that wrote it), the flags hold the comparison, and a
  // guard branches on `cond` without testing the register again.
  struct Flags {
    asmjit::BaseNode* set = nullptr;
    asmjit::x86::CondCode cond;
  };
  std::optional<Flags> flags;
  // The constant when it fits an instruction's 32-bit immediate.
  std::optional<int32_t> imm32() const;
};

class KernelEmitter : public codegen::cpu::LoopWalker<KernelEmitter, Val, asmjit::x86::Gp> {
 public:
  // Vectorized stores to contiguous outputs of more than `stream_above`
  // bytes are non-temporal (-1: never).
  KernelEmitter(asmjit::x86::Compiler& cc, const choir::Module& module, Isa isa, int64_t stream_above);

  // Emits `kernel` as a function whose entry is bound to `entry`.
  absl::Status emit(const choir::Kernel& kernel, asmjit::Label* entry);

  // The primitives the walker and op_semantics.h drive (loop_walker.h
  // lists them). In a vector loop, floats run in the lanes of `vsimd_`.
  class Prims;
  struct OpenLoop {
    asmjit::x86::Gp i, limit;
    int64_t step = 1;
    asmjit::Label top, done;
  };
  asmjit::x86::Gp newIndex() { return cc_.newInt64("i"); }
  void zeroIndex(asmjit::x86::Gp i) { cc_.xor_(i, i); }
  void setIndex(asmjit::x86::Gp i, asmjit::x86::Gp from) { cc_.mov(i, from); }
  asmjit::x86::Gp constantIndex(int64_t v);
  asmjit::x86::Gp limitLess(asmjit::x86::Gp limit, int64_t k);
  asmjit::x86::Gp begin() const { return begin_; }
  asmjit::x86::Gp end() const { return end_; }
  OpenLoop openLoop(asmjit::x86::Gp i, asmjit::x86::Gp limit, int64_t step);
  void closeLoop(const OpenLoop& l);
  using OpenGuard = asmjit::Label;
  OpenGuard beginGuard(const Val& b);
  void endGuard(const OpenGuard& skip) { cc_.bind(skip); }
  absl::Status checkLoop(const choir::LoopHeader&) { return absl::OkStatus(); }
  asmjit::x86::Gp indexAhead(asmjit::x86::Gp i, asmjit::x86::Gp limit, int64_t d);
  void prefetch(asmjit::x86::Gp base, int64_t bytes);

  void preloadBuffer(int buffer);
  asmjit::x86::Gp computeRowBase(int buffer, const choir::Affine& rest);
  Val scalarLoad(const choir::Expr& load, const Mode& mode);
  Val vectorLoad(const choir::Expr& load, int key, const Mode& mode);
  // A load whose positions change along the vector loop: its bound
  // variables' values in i32 lanes (`bound`, one per Expr::bound); the
  // lanes gathered (choir VectorizeOptions::gathers).
  Val gatherLoad(const choir::Expr& load, const std::vector<Val>& bound, const Mode& mode);
  void storeValue(int buffer, const std::vector<choir::Affine>& index, const Val& v, const Mode& mode);

  Prims prims(const Mode& mode);
  const char* emitterName() const { return "x86-64 emitter"; }
  bool contractsMultiplyAdd(choir::DType dtype) const;
  Val multiplyAdd(choir::DType dtype, const Val& a, const Val& b, const Val& c, const Mode& mode);
  Val indexValue(const choir::Affine& a);
  choir::DType indexDType() const { return choir::DType::i64; }
  asmjit::x86::Gp valueIndex(const Val& v);
  // A scalar integer's register: its own, or a new one holding its constant.
  asmjit::x86::Gp gp(const Val& v);
  // dst = v (a constant moved in as an immediate).
  void moveInto(asmjit::x86::Gp dst, const Val& v);
  Val uniformMask(const Val& b);
  Val indexLanes(const choir::Affine& a, choir::DType dtype, const Mode& mode);
  Val accumulator(choir::OpCode combiner, choir::DType dtype, bool vector);
  void assign(choir::DType dtype, const Val& var, const Val& v, bool vector);
  void combineLanes(choir::OpCode combiner, choir::DType dtype, const Val& lanes, Val& acc);
  std::vector<Val> laneValues(choir::DType dtype, const Val& lanes);

  int storeWidth(const choir::Stmt& loop, bool parallel) const;
  // Two vector steps interleaved for a value with a Threefry encryption
  // (20 dependent rounds: one step alone leaves the core waiting on each).
  int storeCopies(const choir::Stmt& loop, int width) const;
  Mode beginVectorStore(const choir::Stmt& loop, int width, const Mode& lanes);
  absl::Status alignStream(const choir::Stmt& loop, asmjit::x86::Gp i, asmjit::x86::Gp limit, int width,
                           const Mode& scalar);
  void endVectorStore(const Mode& lanes);
  struct OpenAligned {
    asmjit::Label other, done;
  };
  OpenAligned beginAlignedRow(const choir::Stmt& loop, asmjit::x86::Gp i, int width);
  void elseAligned(const OpenAligned& a) {
    cc_.jmp(a.done);
    cc_.bind(a.other);
  }
  void endAligned(const OpenAligned& a) { cc_.bind(a.done); }
  void beginScalarStore() { beginHoist({&scalar32_, &scalar64_}); }
  void endScalarStore() { endHoist(); }
  int reduceWidth(const choir::Stmt& reduce) const;
  void beginReduce(const choir::Stmt& reduce, choir::DType dtype, int width);
  void beginReduceBody(const choir::Stmt&, const Mode&) { beginHoist({vsimd_, &scalar32_, &scalar64_}); }
  void endReduceBody() { endHoist(); }
  std::optional<absl::Status> specialLoop(const choir::Stmt& loop, bool outermost);

 private:
  // Whether the vectorized store loop `l` writes a contiguous output larger
  // than the last-level cache: its stores then bypass the caches
  // (stream_stores.cc).
  bool streams(const choir::Stmt& l) const;
  // The row base of the store of stride-1 loop `l` (its first element).
  asmjit::x86::Gp storedRowBase(const choir::Stmt& l);

  // A matrix product in the accumulate-in-output form loop_order.cc makes:
  //   for i { for j: C[i, j] = 0;  for k { for j: C[i, j] = C[i, j] + A[i, k] * B[k, j] } }
  // or without the zeroing (C zeroed before the loops around i: a long sum
  // into a small output, its outer steps outermost), adding to C.
  // (any affine indices with these strides; j vectorized). Emitted
  // register-blocked (blocked_product.cc): a block of rows times a block of
  // vectors of columns accumulates in registers over the whole k loop, each
  // B vector loaded once per k for every row of the block, each A element
  // broadcast once per k for every vector. Column blocks run outermost, so
  // one block of B stays in cache while every row block of this launch's
  // rows uses it. The order of additions per element is the unblocked one,
  // so results are identical.
  // One step of k unrolls the loops nested in it (a convolution's window
  // under its channels, split at the edges into pieces): a term per leaf
  // and per value of those loops, in order, each adding A * B at its
  // displacements from the reference positions (A a constant in the
  // padding).
  struct Term {
    bool a_constant = false;
    double a_value = 0;
    int32_t a_disp = 0, b_disp = 0;  // bytes
  };
  struct Product {
    const choir::Stmt* k_loop = nullptr;
    const choir::Stmt* j_loop = nullptr;  // the first leaf: a vectorized loop under k
    const choir::Stmt* acc = nullptr;     // its store C = C + A * B
    const choir::Expr* a = nullptr;       // the first load of A, which does not walk j
    const choir::Expr* b = nullptr;       // the first leaf's B, which walks j with stride 1
    std::vector<Term> terms;
    std::vector<int> inner_vars;          // the loops under k (at zero for the reference)
    int64_t a_row = 0, a_step = 0, b_step = 0, c_row = 0;  // bytes per row (i) and per step of k
    bool b_invariant = false;  // B is the same in every iteration of the loops around the row loop
    bool accumulates = false;  // no zeroing first: the sums start from C
    // A third statement of the row loop, `for j': Out = f(C, ...)` (the
    // product's epilogue, choir/passes/epilogue.h): applied to each tile
    // once its last k panel is added, while the tile is in cache.
    const choir::Stmt* epilogue = nullptr;  // the store
    int epilogue_var = -1;                  // its column variable j'
  };
  bool matchProduct(const choir::Stmt& i_loop, Product* p) const;
  absl::Status blockedProduct(const choir::Stmt& i_loop, const Product& p, bool outermost);

  Val select(const Val& c, const Val& t, const Val& f, choir::DType type, const Mode& mode);
  asmjit::x86::Mem address(int buffer, const std::vector<choir::Affine>& index, const Mode& mode);
  asmjit::x86::Gp affineValue(const choir::Affine& a);
  asmjit::x86::Gp bufferBase(int buffer);

  Simd& scalarSimd(choir::DType dtype);
  // The lanes a vectorized loop over `value` steps by: the vectorizer's
  // `width`, or half of it for a light loop on AVX-512.
  int loopWidth(int width, choir::DType dtype, const choir::ExprRef& value) const;
  // The lanes of a vector loop: `width` lanes of `dtype` (i32 and u32 in
  // the integer lanes of an f32 Simd, at every width the ISA has).
  Simd laneSimd(choir::DType dtype, int width) const;
  Val loadScalar(choir::DType dtype, const asmjit::x86::Mem& m);
  void storeScalar(choir::DType dtype, const asmjit::x86::Mem& m, const Val& v);
  void streamScalar(choir::DType dtype, const asmjit::x86::Mem& m, const Val& v);
  asmjit::x86::Gp maskToBool(const Mask& m, Simd& s);
  void sext32(asmjit::x86::Gp r, choir::DType dtype);

  // Preheader of the innermost loop being emitted; shared by every Simd.
  void beginHoist(std::initializer_list<Simd*> simds);
  void endHoist();

  asmjit::x86::Compiler& cc_;
  Isa isa_;
  int64_t stream_above_;
  Simd scalar32_;
  Simd scalar64_;
  std::optional<Simd> loop_simd_;  // the lanes of the innermost loop
  Simd* vsimd_ = nullptr;          // the lanes vector values run in
  bool streamed_ = false;          // the kernel made non-temporal stores
  // Buffers held in one vector register for the whole kernel
  // (findResident): loaded once at its start, written back at its end.
  void findResident(const choir::Kernel& kernel);
  struct Resident {
    asmjit::x86::Vec reg;
    int width = 0;
  };
  std::map<int, Resident> resident_;

  asmjit::x86::Gp buffers_, begin_, end_, runtime_;
  std::map<int, asmjit::x86::Gp> base_;
  Hoist hoist_;
  std::vector<Simd*> hoisting_;
};

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_KERNEL_EMITTER_H_
