// The one GPU kernel emitter: every schedule of the GPU mapping pass
// (compiler/choir/passes/gpu_map.h) and the semantics of every op, written
// once over a target's primitives (target.h). SPIR-V and PTX are such
// targets plus their module framing; docs/GPU.md lists what a new target
// writes.
//
// The schedules:
//  - elementwise and serial reductions: a grid-stride loop over the
//    flattened output loops, one output per invocation and step; a serial
//    reduction walks its domain in one invocation (one loop per domain
//    axis, or one flattened loop: TargetDesc::nested_domain_loops);
//  - tree reductions: one workgroup per output, or `split` workgroups per
//    output leaving parts for the combining kernel; the invocations stride
//    over the domain, then combine as TargetDesc::subgroups says;
//  - tiled products: T x T invocations per TR x TR block of outputs,
//    operands staged slice by slice in workgroup memory (zero where out of
//    range), each output accumulated over the slice in domain order (mul
//    then add, as a serial reduction), guarded stores. A ProductEngine may
//    replace the multiply-adds (PTX tensor cores).
#ifndef ACCY_COMPILER_CODEGEN_GPU_KERNEL_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_GPU_KERNEL_EMITTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/choir/value_numbering.h"
#include "compiler/codegen/gpu/target.h"

namespace accy::gpu {

// A target's own multiplication of a tiled product's staged slices,
// instead of the register-blocked multiply-adds (TargetDesc::unrolled_slices
// targets only). The emitter decomposes tiles, stages the operands and
// guards; the engine owns its accumulators.
class ProductEngine {
 public:
  struct Tile {
    SharedArray lhs, rhs;  // lhs[r * T + p], r < TR rows, p < T points; rhs[p * TR + c]
    Value tx, ty;          // this invocation's column and row within the tile
    int64_t tile = 0;      // T
  };
  // Stores `v` as output (row, col) of the tile, guarded by the extents.
  using Store = std::function<absl::Status(Value row, Value col, Value v)>;

  virtual ~ProductEngine() = default;
  virtual absl::Status setup(const Tile& tile) = 0;  // once, before the tile loop
  virtual absl::Status clear() = 0;                  // at each tile
  // Writes the staged operand `v` (0 where out of range) to a slot.
  virtual void stage(const SharedArray& a, Value i, int64_t plus, Value v) = 0;
  virtual absl::Status multiply(int64_t points) = 0;  // the staged slice of `points` points
  // The tile's outputs; (r0, c0) is its first row and column.
  virtual absl::Status store(Value r0, Value c0, const Store& out) = 0;
};

// What the emitter decided, for the launch plan.
struct EmittedKernel {
  choir::GpuNest nest;
  int64_t workgroups = 1;  // to launch along x
  int64_t work = 0;        // iteration points (outputs x domain)
  bool wide = false;       // 64-bit indices
};

class KernelEmitter {
 public:
  KernelEmitter(Target& target, const choir::Module& module, const choir::Kernel& kernel)
      : t_(target), m_(module), k_(kernel), sem_(target, target.desc().name + " emitter") {}

  // `engine` (may be null) multiplies tiled products; `wide` forces 64-bit
  // indices where the target has them (for tests).
  absl::StatusOr<EmittedKernel> run(ProductEngine* engine = nullptr, bool wide = false);

 private:
  absl::Status unimplemented(std::string_view what) const;
  absl::Status checkDType(DType d, std::string_view where) const;  // the target has `d`

  // Schedules.
  absl::Status perOutput(int64_t outputs);
  absl::Status reduceSerial(const choir::Stmt& s);
  absl::Status treeReduce(int64_t outputs, int64_t domain);
  // Combines the workgroup's values of `acc` (a variable), with their
  // rounding errors in `error` for a compensated sum (else 0); invocation 0
  // passes the result to `finish`, with what its rounding left for a
  // compensated sum (else 0).
  using Finish = std::function<absl::Status(Value total, Value rest)>;
  absl::Status combineWorkgroup(const choir::Stmt& s, Value acc, Value error, const Finish& finish);
  absl::Status tiledProduct();

  // Control flow keeping the common-subexpression cache to what dominates.
  absl::Status strided(Value start, Value limit, Value step, const Target::IndexBody& body, int64_t max_trips = -1);
  absl::Status when(Value cond, const Target::Body& body);
  // domainLoops() runs `body` at every point of a reduction's domain, its
  // loops nested or flattened as the target prefers
  // (TargetDesc::nested_domain_loops), the loop variables bound.
  absl::Status domainLoops(const choir::Stmt& s, const Target::IndexBody& body);
  absl::Status loopsOver(const std::vector<choir::LoopHeader>& loops, const Target::IndexBody& body);
  // A kStore leaf: its data-dependent positions bound, under its guard.
  absl::Status storeLeaf(const choir::Stmt& s);
  // Binds `vars` to the clamped indices `values` (a load's or a store's).
  absl::Status bindPositions(const std::vector<int>& vars, const std::vector<choir::ExprRef>& values);
  absl::Status addValue(const choir::Stmt& s, Value into);  // into = into (+) value
  // into = into + x, the rounding error added to `error` (Target::twoSum).
  void addCompensated(DType d, Value into, Value error, Value x);

  // Indices and accesses.
  Value affine(const choir::Affine& a);
  void decompose(Value flat, const std::vector<choir::LoopHeader>& loops);
  Value load(int buffer, const std::vector<choir::Affine>& index);
  void store(int buffer, const std::vector<choir::Affine>& index, Value v);
  absl::Status storeResult(const choir::Stmt& s, Value acc);  // divided for a mean

  // Values.
  absl::StatusOr<Value> expr(const choir::ExprRef& e);
  Value binary(OpCode op, DType d, Value x, Value y) { return sem_.binary(op, d, x, y); }
  Value convert(Value v, DType from, DType to) { return sem_.convert(v, from, to); }
  Value identity(OpCode combiner, DType d) { return sem_.identity(combiner, d); }

  Target& t_;
  const choir::Module& m_;
  const choir::Kernel& k_;
  codegen::OpSemantics<Target> sem_;  // what every op means
  choir::GpuNest nest_;
  int64_t wg_ = 1;
  int64_t launched_ = 1;
  ProductEngine* engine_ = nullptr;
  absl::Status error_;  // the first op the emitter itself cannot emit
  std::map<int, Value> vars_;
  bool wide_ = false;  // 64-bit indices (KernelPlan::wide)
  // Common subexpressions: value number -> value, for the values that
  // dominate the current point. A scope (a loop body, a guarded block)
  // forgets on exit what it added, by the log.
  choir::ValueNumbering numbers_;
  absl::flat_hash_map<int, Value> cse_;
  std::vector<int> cse_log_;
  void forgetSince(size_t mark);
};

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_KERNEL_EMITTER_H_
