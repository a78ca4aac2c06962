// Choir: Accy's target-neutral loop IR.
//
// A Module holds buffers and kernels run in order. A kernel is a tree of
// statements: loops over index variables bound to extents, stores of scalar
// expressions to buffer elements, and first-class reductions. Buffer
// accesses index every buffer dimension with an affine expression of loop
// variables, which keeps fusion a substitution and lets passes reason about
// contiguity. Nothing here names a target; a schedule (loop tags, vector
// widths, tiles, GPU mapping) annotates loops and the emitters honour it.
//
// Scalar ops are tensor::OpCode values from the one op table
// (compiler/tensor/ops.inc); each emitter maps every op or refuses it by
// name.
#ifndef ACCY_COMPILER_CHOIR_IR_H_
#define ACCY_COMPILER_CHOIR_IR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/choir/work.h"
#include "compiler/tensor/dtype.h"
#include "compiler/tensor/program.h"

namespace accy::choir {

using tensor::DType;
using tensor::OpCode;

// sum over terms of coeff * var, plus constant. Terms are sorted by var and
// have non-zero coefficients (see normalize()).
struct Affine {
  struct Term {
    int var = 0;
    int64_t coeff = 0;
    friend bool operator==(const Term&, const Term&) = default;
  };
  std::vector<Term> terms;
  int64_t constant = 0;
  friend bool operator==(const Affine&, const Affine&) = default;

  static Affine var(int v, int64_t coeff = 1) { return Affine{{{v, coeff}}, 0}; }
  static Affine constantOf(int64_t c) { return Affine{{}, c}; }
  int64_t coeffOf(int var) const;
  bool uses(int var) const { return coeffOf(var) != 0; }
};

Affine add(const Affine& a, const Affine& b);
Affine scale(const Affine& a, int64_t k);
// Replaces each variable that has an entry by its expression; every other
// variable is kept. Substitutions name a few variables (one per loop of a
// nest), so entries are a small list: making one costs nothing in the
// number of variables of the module.
struct Substitution {
  std::vector<std::pair<int, Affine>> entries;
  void set(int var, Affine a);
  const Affine* find(int var) const;
};
Affine substitute(const Affine& a, const Substitution& s);

enum class MemorySpace : uint8_t { kGlobal, kWorkgroup, kPrivate };
enum class BufferRole : uint8_t { kInput, kOutput, kTemp };

struct Buffer {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // row-major; empty for a scalar
  MemorySpace space = MemorySpace::kGlobal;
  BufferRole role = BufferRole::kTemp;
  int io_index = -1;  // input or output number for kInput / kOutput

  int64_t elements() const;
  int64_t bytes() const { return elements() * tensor::dtypeSize(dtype); }
  // Row-major element strides.
  std::vector<int64_t> strides() const;
};

enum class ExprKind : uint8_t {
  kLoad,      // buffer[index...]
  kConstant,  // number, of dtype
  kIndex,     // the value of an affine index expression, converted to dtype
  kOp,        // unary, binary, compare, select (tensor::OpCode kWhere), cast
};

struct Expr;
using ExprRef = std::shared_ptr<const Expr>;

// A load may read at positions that depend on data (take, pad): such a
// load binds variables of its own, `bound[j]` to the value of `args[j]`
// (evaluated first, in order), and its affine index may use them like loop
// variables. Every bound value is a clamp, min(max(e, 0), hi) in i32 or i64
// (clampIndex), so the variable ranges over [0, hi] like a loop of extent
// hi + 1, and the verifier proves the access in bounds exactly as for
// loops: no data makes a load leave its buffer. A load without bound
// variables has no args.
struct Expr {
  ExprKind kind = ExprKind::kConstant;
  DType dtype = DType::f32;
  OpCode op = OpCode::kConstant;  // for kOp
  int buffer = -1;                // for kLoad
  std::vector<Affine> index;      // for kLoad: one per buffer dimension; kIndex: one
  double constant = 0;            // for kConstant
  std::vector<ExprRef> args;      // for kOp; for kLoad, the values of `bound`
  std::vector<int> bound;         // for kLoad: the variables args bind
};

ExprRef makeLoad(DType dtype, int buffer, std::vector<Affine> index);
// A load that binds `var` to `value` (a clampIndex) on top of `load`'s own.
ExprRef bindLoad(const ExprRef& load, int var, ExprRef value);
// min(max(e, 0), hi): an index clamped into [0, hi], in i32 when `e` is
// i32 and hi fits (targets without i64 index that way), else in i64.
ExprRef clampIndex(ExprRef e, int64_t hi);
// The hi of a clampIndex expression, or -1 when `e` is not one.
int64_t clampBound(const Expr& e);
// 0 <= e < n for an index `e` read from data: on i32, one unsigned
// comparison (a negative index, reinterpreted, is past every extent); else
// two comparisons.
ExprRef indexBelow(const ExprRef& e, int64_t n);
// Whether `guard` is indexBelow(e, n) (the same `e` node).
bool isIndexBelow(const Expr& guard, const ExprRef& e, int64_t n);
ExprRef makeConstant(DType dtype, double value);
ExprRef makeIndex(DType dtype, Affine index);
ExprRef makeOp(OpCode op, DType dtype, std::vector<ExprRef> args);

// How a loop runs. Emitters that cannot honour a tag refuse the kernel.
enum class LoopTag : uint8_t {
  kSerial,
  kUnrolled,
  kVectorized,   // vector_width lanes per step, with a correct tail
  kCpuParallel,  // iterations split across CPU threads (outermost only)
  kGpuBlock,     // mapped to a grid dimension (gpu_dim)
  kGpuThread,    // mapped to a thread/invocation dimension (gpu_dim)
};
const char* loopTagName(LoopTag tag);

struct LoopHeader {
  int var = 0;
  int64_t extent = 1;
  LoopTag tag = LoopTag::kSerial;
  int vector_width = 1;  // lanes, for kVectorized
  int unroll = 1;        // for kUnrolled
  int gpu_dim = 0;       // for kGpuBlock / kGpuThread
};

enum class StmtKind : uint8_t {
  kLoop,     // for header.var in [0, extent): body
  kStore,    // buffer[index...] = value
  kReduce,   // buffer[index...] = combine over domain of value (see below)
  kBarrier,  // workgroup barrier (GPU targets)
};

// A Stmt is a small tree. kReduce is a first-class reduction: an
// accumulator of `dtype` starting at the identity of `combiner` (kAdd, kMul,
// kMax, kMin), combined with `value` over every point of `domain` (loops
// nested in order, outermost first), then divided by `mean_count` when it is
// non-zero (mean), then stored to buffer[index]. Targets choose how to
// combine: sequential, vector lanes, tree, subgroup or atomics.
// The identity of a reduction's `combiner` for `dtype`, as the value every
// target stores or puts in its accumulator: 0 for kAdd, 1 for kMul, the
// lowest value for kMax (-inf, INT_MIN, false) and the highest for kMin
// (+inf, INT_MAX, true). One definition for every target and pass.
double combinerIdentity(OpCode combiner, DType dtype);

// A floating sum (kAdd on f32 or f64) is cascaded on the CPU targets: its
// terms are added kCascade at a time into an accumulator of their own, the
// blocks' totals likewise one level up, so no chain of additions holds more
// than kCascade terms. The GPU targets compensate it instead
// (passes/gpu_map.h, compensatesParts; docs/MATH_ACCURACY.md, "Sums").
inline constexpr int64_t kCascade = 16;
bool cascades(OpCode combiner, DType dtype);

struct Stmt {
  StmtKind kind = StmtKind::kStore;
  LoopHeader loop;          // kLoop
  std::vector<Stmt> body;   // kLoop
  int buffer = -1;          // kStore, kReduce
  std::vector<Affine> index;
  ExprRef value;
  OpCode combiner = OpCode::kAdd;       // kReduce
  std::vector<LoopHeader> domain;       // kReduce
  int64_t mean_count = 0;               // kReduce
  // kReduce lowered from a `dot` node (lower.cc): what a request for
  // tensor cores applies to (passes/tf32.h). Fusion keeps it.
  bool from_dot = false;
  // kReduce of a floating sum (cascades()): the accumulator carries its
  // rounding error beside it (two-sum; the error terms summed and added at
  // the end), so the result is within about one rounding of the exact sum
  // of the terms. A GPU runs such a reduction serially (passes/gpu_map.h).
  bool compensated = false;
  // kStore at data-dependent positions (scatter_add on the CPU): `bound[j]`
  // is bound to the clamped index `args[j]` (clampIndex, as for loads),
  // evaluated before the value; the index and the value may use them.
  // Loops whose iterations may write one element (none of their variables
  // in the index) run serially, in order: such stores are deterministic.
  std::vector<int> bound;
  std::vector<ExprRef> args;
  // kStore only, may be null: a bool evaluated after `bound`; the store
  // (its value included) happens only where it is true. The GPU form of
  // scatter_add (lower.cc) gives each invocation a range of rows this way:
  // loops whose variables appear in `index`, or in position values
  // (kIndex) of the guard outside its loads, own distinct elements and run
  // in parallel; the others run serially, in order (passes/gpu_map.h).
  ExprRef guard;

  static Stmt loopOf(LoopHeader header, std::vector<Stmt> body);
  static Stmt store(int buffer, std::vector<Affine> index, ExprRef value);
};

struct Kernel {
  std::string name;
  std::vector<Stmt> body;
  // Invocations per workgroup once mapped to a GPU (passes/gpu_map.h); 0
  // for CPU kernels.
  int64_t workgroup_size = 0;
  // Edge of the square tile of a reduction mapped as a tiled product
  // (passes/gpu_map.h, GpuForm::kTiledProduct); workgroup_size is its
  // square. 0 otherwise.
  int64_t gpu_tile = 0;
  // Outputs per invocation along each of the row and the column of a tiled
  // product (register blocking); 1 when not blocked, 0 for other kernels.
  int64_t gpu_micro = 0;
  // A tree reduction split across gpu_split workgroups per output
  // (passes/gpu_map.h): each leaves its partial result in buffer
  // gpu_partials at [output * gpu_split + part] (a compensated sum's part
  // at [output * 2 gpu_split + part], its error gpu_split after it), and the next kernel
  // combines the parts. 0 and -1 otherwise.
  int64_t gpu_split = 0;
  int gpu_partials = -1;
  // The product runs on tensor cores with TF32 inputs (passes/tf32.h).
  bool tf32 = false;
};

struct Module {
  std::string name;
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;
  int num_vars = 0;  // variable ids are unique across the module
  int newVar() { return num_vars++; }

};

// Visits every expression node reachable from `e` (pre-order, shared nodes
// visited once per path).
template <typename F>
void visitExpr(const ExprRef& e, F&& f) {
  countWork();
  f(*e);
  for (const ExprRef& a : e->args) visitExpr(a, f);
}

// Visits every statement (pre-order).
template <typename F>
void visitStmts(const std::vector<Stmt>& stmts, F&& f) {
  for (const Stmt& s : stmts) {
    countWork();
    f(s);
    if (s.kind == StmtKind::kLoop) visitStmts(s.body, f);
  }
}

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_IR_H_
