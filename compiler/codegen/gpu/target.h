// The per-target interface of the one GPU kernel emitter (kernel_emitter.h).
//
// The emitter writes every schedule of the GPU mapping pass (elementwise,
// serial reduction, tree and split reductions, the tiled product with
// register blocking, the combining kernel) and the semantics of every op
// once. A target supplies what differs: a description (limits, subgroups,
// which schedule variants suit it) and the primitives below (types,
// constants, loads and stores, workgroup arrays, barriers, subgroup
// shuffles, builtins, structured control flow, one instruction per
// primitive operation), as compiler/codegen/math/elementary.h takes an "ops"
// type for the elementary functions.
//
// Values are opaque handles (`Value`): a SPIR-V result id, an index into a
// PTX target's register names. Primitives do not fail: a target that cannot
// express something (an f64 value on a device without shaderFloat64)
// records the first error with fail() and returns a placeholder; the
// emitter stops at the next expression node and returns that error.
#ifndef ACCY_COMPILER_CODEGEN_GPU_TARGET_H_
#define ACCY_COMPILER_CODEGEN_GPU_TARGET_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/codegen/semantics/op_semantics.h"

namespace accy::gpu {

using choir::DType;
using choir::OpCode;
using codegen::ArithmeticMode;

// A target's handle for a value; 0 is "none".
using Value = uint32_t;

// Primitive arithmetic. On integers kDiv is the machine's signed division;
// the op semantics never give it a divisor of 0 or -1 (docs/SEMANTICS.md's
// rules are compiler/codegen/semantics/op_semantics.h's).
using codegen::Arith;
// Comparisons giving a bool. On floats every one is ordered (false with a
// NaN operand) except kNe, which is unordered (true with a NaN operand).
using codegen::Cmp;

// How a tree reduction finishes combining a workgroup's values.
enum class Subgroups : uint8_t {
  // In workgroup memory, halving down to one value (barrier per level).
  kNone,
  // In workgroup memory down to `subgroup_size` values, then the first
  // subgroup folds them with shuffle-downs at offsets size/2, ..., 1 (PTX
  // warps: the size is known when compiling).
  kFixed,
  // Each subgroup folds its values with shuffle-downs at offsets 1, 2, 4,
  // ... below the subgroup size read at run time, lane 0 of each leaves its
  // value in a workgroup slot, and invocation 0 folds the slots in subgroup
  // order (Vulkan: only the SubgroupId and SubgroupLocalInvocationId
  // builtins are relied on, not how subgroups lie over the workgroup).
  kRuntime,
  // As kRuntime where the target knows each invocation's lane and the
  // subgroup size but not its subgroup's id (WGSL's subgroups): lane 0 of
  // each subgroup leaves the subgroup's value in the slot of its own local
  // id, every other invocation the identity, and invocation 0 folds every
  // slot in local-id order.
  kRuntimeLanes,
};

// What a GPU target is and allows: one description for every GPU target.
struct TargetDesc {
  std::string name;  // in messages: "<name> emitter: ..."
  int64_t max_workgroup_size = 128;
  int64_t max_workgroups = 65535;  // along x
  Subgroups subgroups = Subgroups::kNone;
  int subgroup_size = 0;  // kFixed
  // Workgroup memory one kernel may use; 0 when not checked here.
  int64_t workgroup_memory_bytes = 0;
  // Indices may be 64-bit where a count needs it (else kernels counting
  // 2^31 - 4096 or more elements or iterations are refused).
  bool index64 = false;
  // Which dtypes kernels may use, and else what is missing (for the
  // message: "f64 values need <float64_needs>").
  bool float64 = true, int64 = true;
  bool bool_buffers = true;  // bool buffers, one byte per element
  std::string float64_needs, int64_needs, bool_buffers_needs;
  // The arithmetic modes the target can compile, and the one asked for.
  std::vector<ArithmeticMode> modes = {ArithmeticMode::kExact, ArithmeticMode::kFast};
  ArithmeticMode mode = ArithmeticMode::kExact;
  // Schedule variants (see kernel_emitter.h), chosen per target for speed
  // or for a device's quirks:
  //  - serial reductions run one loop per domain axis (no division per
  //    point) instead of one flattened loop;
  bool nested_domain_loops = false;
  //  - tiled products unroll each slice's inner loop (a loop over full
  //    slices, then the tail slice with its exact length) instead of one
  //    loop bounded at run time by what is left of the domain.
  bool unrolled_slices = false;
};

// A workgroup-memory array of `count` elements of `dtype` (bools as 32-bit
// 0/1 words where the target needs it).
struct SharedArray {
  int id = -1;
  DType dtype = DType::f32;
  int64_t count = 0;
};

// What the emitter tells a target before the first instruction.
struct KernelPlan {
  choir::GpuForm form = choir::GpuForm::kElementwise;
  int64_t workgroup_size = 1;
  bool wide = false;              // 64-bit index arithmetic
  std::vector<int> used_buffers;  // ascending
};

class Target {
 public:
  using Value = gpu::Value;
  using Body = std::function<absl::Status()>;
  using IndexBody = std::function<absl::Status(Value)>;

  virtual ~Target() = default;
  virtual const TargetDesc& desc() const = 0;

  // Called once, before any other primitive: declarations, builtins.
  virtual absl::Status begin(const KernelPlan& plan) = 0;

  // --- values of the program's dtypes ------------------------------------
  virtual Value constant(DType d, double v) = 0;  // v converted to d (docs/SEMANTICS.md)
  virtual Value arith(Arith op, DType d, Value a, Value b) = 0;
  virtual Value negate(DType d, Value a) = 0;
  virtual Value absFloat(DType d, Value a) = 0;  // clears the sign bit
  virtual Value sqrt(DType d, Value a) = 0;      // correctly rounded
  virtual Value compare(Cmp c, DType d, Value a, Value b) = 0;  // d is not bool
  virtual Value isNan(DType d, Value a) = 0;
  virtual Value select(DType d, Value cond, Value yes, Value no) = 0;  // d may be bool
  virtual Value logicAnd(Value a, Value b) = 0;
  virtual Value logicOr(Value a, Value b) = 0;
  virtual Value bitAnd(DType d, Value a, Value b) = 0;    // integers
  virtual Value bitOr(DType d, Value a, Value b) = 0;
  virtual Value bitXor(DType d, Value a, Value b) = 0;
  // Integers: arithmetic on i32 and i64, logical on u32. The ...By forms
  // take a count of x's dtype in [0, width).
  virtual Value shiftRight(DType d, Value a, int n) = 0;
  virtual Value shiftLeftBy(DType d, Value a, Value n) = 0;
  virtual Value shiftRightBy(DType d, Value a, Value n) = 0;
  // The same bits as `to` (the same width; never bool).
  virtual Value bitcast(DType from, DType to, Value v) = 0;
  // Numeric conversions between different non-bool dtypes: float to float
  // and integer to float round to nearest, integer to integer sign-extends
  // or keeps the low bits, float to integer truncates a value the emitter
  // has made finite and in range.
  virtual Value convert(DType from, DType to, Value v) = 0;
  // The elementary functions (sin, cos, exp, log, tanh, sigmoid, pow on
  // floats) in exact mode, from compiler/codegen/math/elementary.h over the
  // target's ops type. `y` is pow's exponent (else 0).
  virtual Value exactMath(OpCode op, DType d, Value x, Value y) = 0;
  // a + b and its rounding error on floats (math::twoSum: six operations,
  // each rounded where written), for compensated sums
  // (choir::Stmt::compensated). Targets whose shader compilers may
  // reassociate floats override it to keep those roundings.
  virtual std::pair<Value, Value> twoSum(DType d, Value a, Value b);
  // Fast mode (ArithmeticMode::kFast): the target's built-in approximation
  // of `op` on `d`, or 0 where it has none (the exact sequence is used).
  virtual Value fastMath(OpCode op, DType d, Value x, Value y) = 0;
  // The same, as op_semantics.h asks for it.
  bool fastMode() const { return desc().mode == ArithmeticMode::kFast; }
  std::optional<Value> fastForm(OpCode op, DType d, Value x, Value y) {
    const Value v = fastMath(op, d, x, y);
    return v == 0 ? std::nullopt : std::optional<Value>(v);
  }

  // --- indices: unsigned, 32-bit or 64-bit as KernelPlan::wide says ------
  virtual Value index(int64_t v) = 0;
  virtual Value indexAdd(Value a, Value b) = 0;
  virtual Value indexMul(Value a, int64_t c) = 0;
  virtual Value indexMulAdd(Value a, int64_t c, Value b) = 0;  // a * c + b
  virtual Value indexSub(Value a, Value b) = 0;                  // a >= b
  virtual Value indexMin(Value a, Value b) = 0;
  virtual Value indexDiv(Value a, int64_t c) = 0;
  virtual Value indexRem(Value a, int64_t c) = 0;
  virtual Value indexLess(Value a, Value b) = 0;  // a bool
  virtual Value indexEq(Value a, Value b) = 0;    // a bool
  // The index as a signed integer of the program (i32, or i64 when the
  // target's indices are wide); `*as` gets which.
  virtual Value indexAsInt(Value i, DType* as) = 0;
  // The other way: a non-negative program integer of the dtype indexAsInt
  // gives (a clamped index read from data) as an index.
  virtual Value intAsIndex(Value i) = 0;

  // --- builtins ----------------------------------------------------------
  virtual Value localId() = 0;   // within the workgroup
  virtual Value groupId() = 0;   // the workgroup's
  virtual Value globalId() = 0;  // groupId * workgroup size + localId
  // The number of workgroups running (`launched`, which the launch plan
  // records, as a constant or read at run time), and of invocations.
  virtual Value groupCount(int64_t launched) = 0;
  virtual Value invocationCount(int64_t launched) = 0;

  // --- memory --------------------------------------------------------------
  virtual Value load(int buffer, Value flat) = 0;  // a value of the buffer's dtype
  virtual void store(int buffer, Value flat, Value v) = 0;
  virtual SharedArray sharedArray(DType d, int64_t count) = 0;
  // Element `i + plus` (plus a constant, for the target's addressing).
  virtual Value sharedLoad(const SharedArray& a, Value i, int64_t plus) = 0;
  virtual void sharedStore(const SharedArray& a, Value i, int64_t plus, Value v) = 0;
  virtual void barrier() = 0;  // workgroup execution and memory

  // --- mutable variables -----------------------------------------------------
  // A variable of `d` holding `init`. A value read() returns may change
  // with the next write() of the variable on some targets (a register): read
  // just before use.
  virtual Value variable(DType d, Value init) = 0;
  virtual Value read(DType d, Value var) = 0;
  virtual void write(DType d, Value var, Value v) = 0;

  // --- structured control flow -------------------------------------------
  // for (x = start; x < limit; x += step) body(x), on indices; `max_trips`
  // bounds the iterations where the target cannot tell (-1: unknown).
  virtual absl::Status strided(Value start, Value limit, Value step, const IndexBody& body, int64_t max_trips) = 0;
  // for (x = start; x < limit; x *= 2) body(x).
  virtual absl::Status doubling(Value start, Value limit, const IndexBody& body, int64_t max_trips) = 0;
  // while (cond()) body(), running at most `max_trips` times.
  virtual absl::Status loopWhile(const std::function<Value()>& cond, const Body& body, int64_t max_trips) = 0;
  virtual absl::Status when(Value cond, const Body& body) = 0;

  // --- subgroups -------------------------------------------------------------
  // The value of `v` in the invocation `offset` lanes down the subgroup.
  // kFixed: `offset` is index(constant) and `lanes` the active lanes.
  virtual Value shuffleDown(DType d, Value v, Value offset, int64_t lanes) = 0;
  // kRuntime: SubgroupSize, NumSubgroups, SubgroupId, SubgroupLocalInvocationId.
  virtual Value subgroupBuiltin(int which) = 0;

  absl::Status status() const { return status_; }

 protected:
  // Records the first error; the emitter returns it.
  void fail(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

 private:
  absl::Status status_;
};

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_TARGET_H_
