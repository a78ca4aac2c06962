// Emits one Choir kernel as one asmjit function (see emitter.h for the ABI).
#ifndef ACCY_COMPILER_CODEGEN_X86_64_KERNEL_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_X86_64_KERNEL_EMITTER_H_

#include <asmjit/x86.h>

#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/value_numbering.h"
#include "compiler/codegen/x86_64/simd.h"

namespace accy::x64 {

class KernelEmitter {
 public:
  // Vectorized stores to contiguous outputs of more than `stream_above`
  // bytes are non-temporal (-1: never).
  KernelEmitter(asmjit::x86::Compiler& cc, const choir::Module& module, Isa isa, int64_t stream_above);

  // Emits `kernel` as a function whose entry is bound to `entry`.
  absl::Status emit(const choir::Kernel& kernel, asmjit::Label* entry);

 private:
  // An emitted scalar or vector value: floats in vector registers, integers
  // and scalar bools in general registers, vector bools as masks.
  struct Val {
    enum class Kind { kVec, kGp, kMask } kind = Kind::kGp;
    asmjit::x86::Vec v;
    asmjit::x86::Gp g;
    Mask m;
  };

  // Where an expression is evaluated: scalar, or `simd` lanes of the
  // innermost loop variable `inner_var` held in `inner`.
  struct Mode {
    bool vector = false;
    Simd* simd = nullptr;  // vector mode only
    int inner_var = -1;
    asmjit::x86::Gp inner;
    bool stream = false;  // vector stores are non-temporal (and aligned)
    // The inner variable's value is `inner` + offset (a copy of an unrolled
    // loop body, addressed by displacement instead of moving `inner`).
    int64_t offset = 0;
  };
  // Whether the vectorized store loop `l` writes a contiguous output larger
  // than the last-level cache: its stores then bypass the caches.
  bool streams(const choir::Stmt& l) const;

  absl::Status stmts(const std::vector<choir::Stmt>& body, bool outermost);
  absl::Status loop(const choir::Stmt& s, bool outermost);
  absl::Status innermostStore(const choir::Stmt& loop_stmt, bool outermost);
  absl::Status store(const choir::Stmt& s, const Mode& mode);
  absl::Status reduce(const choir::Stmt& s);

  // A matrix product in the accumulate-in-output form loop_order.cc makes:
  //   for i { for j: C[i, j] = 0;  for k { for j: C[i, j] = C[i, j] + A[i, k] * B[k, j] } }
  // (any affine indices with these strides; j vectorized). Emitted
  // register-blocked: a block of rows times a block of vectors of columns
  // accumulates in registers over the whole k loop, each B vector loaded
  // once per k for every row of the block, each A element broadcast once
  // per k for every vector. Column blocks run outermost, so one block of B
  // stays in cache while every row block of this launch's rows uses it.
  // The order of additions per element is the unblocked one, so results
  // are identical.
  struct Product {
    const choir::Stmt* k_loop = nullptr;
    const choir::Stmt* j_loop = nullptr;  // the vectorized loop under k
    const choir::Stmt* acc = nullptr;     // its store C = C + A * B
    const choir::Expr* a = nullptr;       // the load that does not walk j
    const choir::Expr* b = nullptr;       // the load that walks j with stride 1
    // A third statement of the row loop, `for j': Out = f(C, ...)` (the
    // product's epilogue, choir/passes/epilogue.h): applied to each tile
    // once its last k panel is added, while the tile is in cache.
    const choir::Stmt* epilogue = nullptr;  // the store
    int epilogue_var = -1;                  // its column variable j'
  };
  bool matchProduct(const choir::Stmt& i_loop, Product* p) const;
  absl::Status blockedProduct(const choir::Stmt& i_loop, const Product& p, bool outermost);

  absl::StatusOr<Val> expr(const choir::ExprRef& e, const Mode& mode);
  absl::StatusOr<Val> op(const choir::Expr& e, const std::vector<Val>& args,
                         const std::vector<choir::DType>& arg_types, const Mode& mode);
  absl::StatusOr<Val> cast(const Val& a, choir::DType from, choir::DType to);
  Val select(const Val& c, const Val& t, const Val& f, choir::DType type, const Mode& mode);
  // The primitives compiler/codegen/semantics/op_semantics.h drives.
  class Prims;

  // Row bases: base + (flat index without the inner variable) * size,
  // computed before an innermost loop for every access in its body.
  void prepareRowBases(const choir::ExprRef& e, int inner_var);
  void prepareRowBases(const choir::Stmt& s, int inner_var);
  asmjit::x86::Gp rowBase(int buffer, const choir::Affine& rest);
  asmjit::x86::Mem address(int buffer, const std::vector<choir::Affine>& index, const Mode& mode);
  asmjit::x86::Gp affineValue(const choir::Affine& a);
  asmjit::x86::Gp bufferBase(int buffer);

  Simd& scalarSimd(choir::DType dtype);
  // The lanes a vectorized loop over `value` steps by: the vectorizer's
  // `width`, or half of it for a light loop on AVX-512.
  int loopWidth(int width, choir::DType dtype, const choir::ExprRef& value) const;
  Val loadScalar(choir::DType dtype, const asmjit::x86::Mem& m);
  void storeScalar(choir::DType dtype, const asmjit::x86::Mem& m, const Val& v);
  void combine(choir::OpCode combiner, choir::DType dtype, Val& acc, const Val& v, Simd* simd);
  Val identity(choir::OpCode combiner, choir::DType dtype, Simd* simd);
  asmjit::x86::Gp maskToBool(const Mask& m, Simd& s);
  void sext32(asmjit::x86::Gp r, choir::DType dtype);

  asmjit::x86::Compiler& cc_;
  const choir::Module& m_;
  Isa isa_;
  int64_t stream_above_;
  Simd scalar32_;
  Simd scalar64_;
  asmjit::x86::Gp buffers_, begin_, end_, runtime_;
  std::map<int, asmjit::x86::Gp> base_;
  std::map<int, asmjit::x86::Gp> vars_;
  std::map<std::string, asmjit::x86::Gp> rows_;  // valid inside one innermost loop
  bool rows_active_ = false;
  choir::ValueNumbering numbers_;                 // the CSE keys, for the whole module
  absl::flat_hash_map<int, Val> cse_;             // one evaluation point
  // Preheader of the innermost loop being emitted; shared by every Simd.
  void beginHoist(std::initializer_list<Simd*> simds);
  void endHoist();
  Hoist hoist_;
  std::vector<Simd*> hoisting_;
};

}  // namespace accy::x64

#endif  // ACCY_COMPILER_CODEGEN_X86_64_KERNEL_EMITTER_H_
