// Emits one Choir kernel (the CPU pipeline's, scheduled for 16-byte
// vectors) as one WebAssembly function:
//   (func (param $table i32) (param $begin i32) (param $end i32))
// $table is the address of an i32 array holding each buffer's address in
// linear memory (indexed like the module's buffers); [$begin, $end) is the
// part of the outermost parallel loop this call runs ([0, 1) when the
// kernel has none). Values live in locals; vectorized loops run f32x4,
// f64x2 or i32x4 lanes with a scalar tail; reductions keep four vector
// accumulators. The walk is the CPU loop-nest walker's
// (compiler/codegen/cpu/loop_walker.h); this class supplies its
// WebAssembly primitives.
#ifndef ACCY_COMPILER_CODEGEN_WASM_KERNEL_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_WASM_KERNEL_EMITTER_H_

#include <map>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/codegen/cpu/loop_walker.h"
#include "compiler/codegen/wasm/encoder.h"
#include "compiler/codegen/wasm/wasm_ops.h"

namespace accy::wasm {

inline constexpr int kVectorBytes = 16;

// The primitives of op_semantics.h on WebAssembly (kernel_emitter.cc).
class Primitives;

class KernelEmitter : public codegen::cpu::LoopWalker<KernelEmitter, uint32_t, uint32_t> {
 public:
  KernelEmitter(const choir::Module& module, FunctionBody& f);
  absl::Status emit(const choir::Kernel& kernel);

  // The walker's primitives (loop_walker.h lists them): every value and
  // index is a local.
  using Prims = Primitives;
  struct OpenLoop {
    uint32_t i, limit;
    int64_t step;
  };
  uint32_t newIndex() { return newLocal(ValType::kI32); }
  void zeroIndex(uint32_t i);
  void setIndex(uint32_t i, uint32_t from);
  uint32_t constantIndex(int64_t v) { return i32Local(v); }
  uint32_t limitLess(uint32_t limit, int64_t k);
  uint32_t begin() const { return begin_; }
  uint32_t end() const { return end_; }
  OpenLoop openLoop(uint32_t i, uint32_t limit, int64_t step);
  void closeLoop(const OpenLoop& l);
  struct OpenGuard {};
  OpenGuard beginGuard(uint32_t b) {
    f_.get(b);
    f_.ifThen();
    return {};
  }
  void endGuard(const OpenGuard&) { f_.end(); }
  absl::Status checkLoop(const choir::LoopHeader& h);

  void preloadBuffer(int buffer);
  uint32_t computeRowBase(int buffer, const choir::Affine& rest);
  uint32_t scalarLoad(const choir::Expr& load, const Mode& mode);
  uint32_t vectorLoad(const choir::Expr& load, int key, const Mode& mode);
  void storeValue(int buffer, const std::vector<choir::Affine>& index, uint32_t v, const Mode& mode);

  Primitives prims(const Mode& mode);
  const char* emitterName() const { return "wasm emitter"; }
  // No multiplyAdd: SIMD128 has no fused multiply-add (relaxed SIMD's is
  // not deterministic). No streamed stores, no loops of its own.
  uint32_t indexValue(const choir::Affine& a);
  choir::DType indexDType() const { return choir::DType::i32; }
  uint32_t valueIndex(uint32_t v) const { return v; }  // both i32 locals
  uint32_t accumulator(choir::OpCode combiner, choir::DType dtype, bool vector);
  void assign(choir::DType, uint32_t var, uint32_t v, bool vector);
  void combineLanes(choir::OpCode combiner, choir::DType dtype, uint32_t lanes, uint32_t& acc);
  std::vector<uint32_t> laneValues(choir::DType dtype, uint32_t lanes);

  int storeWidth(const choir::Stmt& loop, bool parallel) const;
  Mode beginVectorStore(const choir::Stmt& loop, int width, const Mode& lanes);
  void endVectorStore(const Mode&) { broadcast_.clear(); }
  int reduceWidth(const choir::Stmt& reduce) const;
  void beginReduce(const choir::Stmt&, choir::DType, int width) { reduce_width_ = width; }
  void beginReduceBody(const choir::Stmt& reduce, const Mode& lanes);
  void endReduceBody() { broadcast_.clear(); }

 private:
  // Whether every value of `e` runs in vector lanes of `var` of dtype `lane`
  // (f32x4, f64x2 or i32x4: what the vectorizer promises; checked so that
  // anything else runs scalar).
  bool vectorizable(const choir::ExprRef& e, int var, choir::DType lane) const;

  // Pushes the i32 value of an affine index expression.
  void pushAffine(const choir::Affine& a);
  // Pushes the address of buffer[index] (its offset in bytes goes in the
  // instruction's offset); row bases are locals inside an innermost loop.
  uint64_t pushAddress(int buffer, const std::vector<choir::Affine>& index, const Mode& mode);
  // Broadcast loads of a vector loop, loaded once before it.
  void prepareBroadcasts(const choir::ExprRef& e, const Mode& mode, int stored_buffer);
  uint32_t load(choir::DType dtype, uint64_t offset);
  void storeScalar(choir::DType dtype, uint64_t offset, uint32_t v);

  uint32_t keep(ValType t);
  uint32_t newLocal(ValType t) { return f_.local(t); }
  uint32_t i32Local(int64_t value);

  FunctionBody& f_;
  ConstantPool pool_;
  std::map<int, uint32_t> base_;                  // buffer -> local with its address
  absl::flat_hash_map<int, uint32_t> broadcast_;  // one vector loop
  int reduce_width_ = 1;
  uint32_t begin_ = 1, end_ = 2;
};

ValType valType(choir::DType d);

}  // namespace accy::wasm

#endif  // ACCY_COMPILER_CODEGEN_WASM_KERNEL_EMITTER_H_
