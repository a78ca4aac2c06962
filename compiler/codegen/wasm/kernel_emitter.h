// Emits one Choir kernel (the CPU pipeline's, scheduled for 16-byte
// vectors) as one WebAssembly function:
//   (func (param $table i32) (param $begin i32) (param $end i32))
// $table is the address of an i32 array holding each buffer's address in
// linear memory (indexed like the module's buffers); [$begin, $end) is the
// part of the outermost parallel loop this call runs ([0, 1) when the
// kernel has none). Values live in locals; vectorized loops run f32x4 or
// f64x2 lanes with a scalar tail; reductions keep four vector accumulators.
#ifndef ACCY_COMPILER_CODEGEN_WASM_KERNEL_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_WASM_KERNEL_EMITTER_H_

#include <map>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/value_numbering.h"
#include "compiler/codegen/wasm/encoder.h"
#include "compiler/codegen/wasm/wasm_ops.h"

namespace accy::wasm {

inline constexpr int kVectorBytes = 16;

class KernelEmitter {
 public:
  KernelEmitter(const choir::Module& module, FunctionBody& f);
  absl::Status emit(const choir::Kernel& kernel);

 private:
  // Where an expression is evaluated: one point, or the lanes of the
  // innermost loop variable `inner_var` starting at the value of local
  // `inner`.
  struct Mode {
    bool vector = false;
    int inner_var = -1;
    uint32_t inner = 0;
  };

  absl::Status stmts(const std::vector<choir::Stmt>& body, bool outermost);
  absl::Status loop(const choir::Stmt& s, bool outermost);
  absl::Status innermostStore(const choir::Stmt& l, bool outermost);
  absl::Status store(const choir::Stmt& s, const Mode& mode);
  absl::Status reduce(const choir::Stmt& s);
  // for (i = start; i < limit; i += step) body, with i and limit locals.
  template <typename Body>
  absl::Status counted(uint32_t i, uint32_t limit, int64_t step, Body&& body);

  absl::StatusOr<uint32_t> expr(const choir::ExprRef& e, const Mode& mode);
  absl::StatusOr<uint32_t> op(const choir::Expr& e, const std::vector<uint32_t>& args, const Mode& mode);
  uint32_t cast(uint32_t a, choir::DType from, choir::DType to);
  // Whether every value of `e` runs in vector lanes of `var` of dtype `lane`
  // (f32x4, f64x2 or i32x4: what the vectorizer promises; checked so that
  // anything else runs scalar).
  bool vectorizable(const choir::ExprRef& e, int var, choir::DType lane) const;

  // Pushes the i32 value of an affine index expression.
  void pushAffine(const choir::Affine& a);
  // Pushes the address of buffer[index] (its offset in bytes goes in the
  // instruction's offset); row bases are locals inside an innermost loop.
  uint64_t pushAddress(int buffer, const std::vector<choir::Affine>& index, const Mode& mode);
  void prepareRows(const choir::ExprRef& e, int inner_var);
  void prepareRows(const choir::Stmt& s, int inner_var);
  // Broadcast loads of a vector loop, loaded once before it.
  void prepareBroadcasts(const choir::ExprRef& e, const Mode& mode, int stored_buffer);
  uint32_t rowBase(int buffer, const choir::Affine& rest);
  uint32_t load(choir::DType dtype, uint64_t offset);
  void storeScalar(choir::DType dtype, uint64_t offset, uint32_t v);

  uint32_t keep(ValType t);
  uint32_t newLocal(ValType t) { return f_.local(t); }
  uint32_t i32Local(int64_t value);
  uint32_t identity(choir::OpCode combiner, choir::DType dtype, bool vector);
  uint32_t combine(choir::OpCode combiner, choir::DType dtype, uint32_t acc, uint32_t x, bool vector);

  const choir::Module& m_;
  FunctionBody& f_;
  ConstantPool pool_;
  std::map<int, uint32_t> base_;  // buffer -> local with its address
  std::map<int, uint32_t> vars_;  // loop variable -> i32 local
  std::map<std::string, uint32_t> rows_;
  bool rows_active_ = false;
  choir::ValueNumbering numbers_;
  absl::flat_hash_map<int, uint32_t> cse_;        // one evaluation point
  absl::flat_hash_map<int, uint32_t> broadcast_;  // one vector loop
  uint32_t begin_ = 1, end_ = 2;
};

ValType valType(choir::DType d);

}  // namespace accy::wasm

#endif  // ACCY_COMPILER_CODEGEN_WASM_KERNEL_EMITTER_H_
