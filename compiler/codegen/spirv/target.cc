#include "compiler/codegen/spirv/target.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "compiler/choir/passes/gpu_map.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/codegen/gpu/kernel_emitter.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/spirv/module_builder.h"
#include "compiler/codegen/spirv/spirv_ops.h"
#include "base/errors.h"
#include "compiler/tensor/scalar_ops.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::spirv {
namespace {

using choir::DType;
using choir::OpCode;
using gpu::Value;

// GLSL.std.450 instruction numbers.
enum Glsl : uint32_t {
  kRoundEven = 2, kFAbs = 4, kFloor = 8, kCeil = 9, kSin = 13, kCos = 14, kExp = 27, kLog = 28, kSqrt = 31, kTanh = 21, kPow = 26
};

class SpirvTarget final : public gpu::Target {
 public:
  SpirvTarget(const choir::Module& m, const choir::Kernel& k, const TargetInfo& t) : m_(m), k_(k), t_(t) {
    desc_.name = "SPIR-V";
    desc_.max_workgroup_size = t.max_workgroup_size;
    desc_.max_workgroups = t.max_workgroup_count;
    desc_.subgroups = t.subgroup_size > 0 ? gpu::Subgroups::kRuntime : gpu::Subgroups::kNone;
    desc_.index64 = false;
    desc_.float64 = t.float64;
    desc_.float64_needs = "a device with shaderFloat64";
    desc_.int64 = t.int64;
    desc_.int64_needs = "a device with shaderInt64";
    desc_.bool_buffers = t.storage_8bit;
    desc_.bool_buffers_needs = "a device with storageBuffer8BitAccess";
    desc_.mode = t.mode;
  }

  const gpu::TargetDesc& desc() const override { return desc_; }

  absl::Status begin(const gpu::KernelPlan& plan) override {
    wg_ = plan.workgroup_size;
    b_.capability(1 /* Shader */);
    u32_ = b_.typeInt(32, false);
    i32_ = b_.typeInt(32, true);
    bool_ = b_.typeBool();
    ACCY_RETURN_IF_ERROR(declareBuffers(plan.used_buffers));
    // Built-in invocation ids.
    const uint32_t uvec3 = b_.typeVector(u32_, 3);
    const uint32_t in_ptr = b_.typePointer(kInput, uvec3);
    const uint32_t global_id = b_.globalVariable(in_ptr, kInput);
    const uint32_t local_id = b_.globalVariable(in_ptr, kInput);
    const uint32_t group_id = b_.globalVariable(in_ptr, kInput);
    b_.decorate(global_id, {11 /* BuiltIn */, 28 /* GlobalInvocationId */});
    b_.decorate(local_id, {11, 27 /* LocalInvocationId */});
    b_.decorate(group_id, {11, 26 /* WorkgroupId */});
    std::vector<uint32_t> interface = {global_id, local_id, group_id};
    if (plan.form == choir::GpuForm::kTreeReduce && desc_.subgroups == gpu::Subgroups::kRuntime) {
      // Tree reductions finish each subgroup with shuffles (Vulkan 1.1
      // subgroup operations, shuffle-relative).
      b_.capability(61 /* GroupNonUniform */);
      b_.capability(66 /* GroupNonUniformShuffleRelative */);
      const uint32_t in_u32 = b_.typePointer(kInput, u32_);
      const uint32_t builtins[] = {36 /* SubgroupSize */, 38 /* NumSubgroups */, 40 /* SubgroupId */,
                                   41 /* SubgroupLocalInvocationId */};
      for (int i = 0; i < 4; ++i) {
        subgroup_vars_[i] = b_.globalVariable(in_u32, kInput);
        b_.decorate(subgroup_vars_[i], {11, builtins[i]});
        interface.push_back(subgroup_vars_[i]);
      }
    }
    const uint32_t fn = b_.beginMain();
    // SPIR-V 1.3 entry points list their Input and Output variables.
    b_.entryPoint(fn, "main", interface);
    b_.localSize(fn, static_cast<uint32_t>(wg_));
    gid_ = b_.value(op::CompositeExtract, u32_, {b_.value(op::Load, uvec3, {global_id}), 0});
    lid_ = b_.value(op::CompositeExtract, u32_, {b_.value(op::Load, uvec3, {local_id}), 0});
    group_ = b_.value(op::CompositeExtract, u32_, {b_.value(op::Load, uvec3, {group_id}), 0});
    return absl::OkStatus();
  }

  // The module, once the emitter is done.
  absl::StatusOr<std::vector<uint32_t>> finish() {
    if (t_.max_loop_iterations > 0 && loop_trips_ >= t_.max_loop_iterations) {
      return unimplemented(strCat("kernel ", k_.name, " would run up to ", loop_trips_,
                                  " loop iterations in one invocation; this device ends an invocation's loops after ",
                                  t_.max_loop_iterations, " (llvmpipe's limit), which would drop the rest of the work"));
    }
    b_.endMain();
    return b_.finish();
  }

  // --- values ---------------------------------------------------------------

  Value constant(DType d, double v) override {
    const uint32_t type = scalarType(d);
    const double c = tensor::convertValue(v, DType::f64, d);
    switch (d) {
      case DType::f32: {
        const float f = static_cast<float>(c);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        return b_.constantBits(type, bits, 32);
      }
      case DType::f64: {
        uint64_t bits;
        std::memcpy(&bits, &c, 8);
        return b_.constantBits(type, bits, 64);
      }
      case DType::i32:
      case DType::u32:
        return b_.constantBits(type, static_cast<uint32_t>(tensor::toInt64(c)), 32);
      case DType::i64:
        return b_.constantBits(type, static_cast<uint64_t>(tensor::toInt64(c)), 64);
      case DType::bool_:
        return b_.constantBool(c != 0);
    }
    return 0;
  }

  Value arith(gpu::Arith o, DType d, Value a, Value b) override {
    static constexpr uint16_t kFloat[] = {op::FAdd, op::FSub, op::FMul, op::FDiv};
    static constexpr uint16_t kInt[] = {op::IAdd, op::ISub, op::IMul, op::SDiv};
    const int i = static_cast<int>(o);
    if (d == DType::u32 && o == gpu::Arith::kDiv) return b_.value(op::UDiv, u32_, {a, b});
    if (!tensor::isFloating(d)) return b_.value(kInt[i], scalarType(d), {a, b});
    // NoContraction: each result rounded as the reference rounds it, as PTX's
    // `.rn` and MSL's `fp contract(off)` keep theirs (NVIDIA's driver fused
    // a uniform's scale and shift into one fma, across the bitcasts that
    // mark the rounding, and its bits differed from every other target's).
    const uint32_t v = b_.value(kFloat[i], scalarType(d), {a, b});
    b_.decorate(v, {42 /* NoContraction */});
    return v;
  }
  Value negate(DType d, Value a) override {
    return b_.value(tensor::isFloating(d) ? op::FNegate : op::SNegate, scalarType(d), {a});
  }
  Value absFloat(DType d, Value a) override { return glsl(scalarType(d), kFAbs, {a}); }
  Value sqrt(DType d, Value a) override { return glsl(scalarType(d), kSqrt, {a}); }
  Value compare(gpu::Cmp c, DType d, Value a, Value b) override {
    static constexpr uint16_t kFloat[] = {op::FOrdLessThan, op::FOrdLessThanEqual, op::FOrdGreaterThan,
                                          op::FOrdGreaterThanEqual, op::FOrdEqual, op::FUnordNotEqual};
    static constexpr uint16_t kInt[] = {op::SLessThan, op::SLessThanEqual, op::SGreaterThan,
                                        op::SGreaterThanEqual, op::IEqual, op::INotEqual};
    static constexpr uint16_t kUnsigned[] = {op::ULessThan, op::ULessThanEqual, op::UGreaterThan,
                                             op::UGreaterThanEqual, op::IEqual, op::INotEqual};
    const int i = static_cast<int>(c);
    return b_.value(tensor::isFloating(d) ? kFloat[i] : d == DType::u32 ? kUnsigned[i] : kInt[i], bool_, {a, b});
  }
  Value isNan(DType, Value a) override { return b_.value(op::IsNan, bool_, {a}); }
  Value select(DType d, Value c, Value yes, Value no) override {
    return b_.value(op::Select, scalarType(d), {c, yes, no});
  }
  Value logicAnd(Value a, Value b) override { return b_.value(op::LogicalAnd, bool_, {a, b}); }
  Value logicOr(Value a, Value b) override { return b_.value(op::LogicalOr, bool_, {a, b}); }
  Value bitAnd(DType d, Value a, Value b) override { return b_.value(op::BitwiseAnd, scalarType(d), {a, b}); }
  Value bitOr(DType d, Value a, Value b) override { return b_.value(op::BitwiseOr, scalarType(d), {a, b}); }
  Value bitXor(DType d, Value a, Value b) override { return b_.value(op::BitwiseXor, scalarType(d), {a, b}); }
  // Arithmetic on i32 and i64, logical on u32.
  Value shiftRight(DType d, Value a, int n) override { return shiftRightBy(d, a, constant(d, n)); }
  Value shiftLeftBy(DType d, Value a, Value n) override { return b_.value(op::ShiftLeftLogical, scalarType(d), {a, n}); }
  Value shiftRightBy(DType d, Value a, Value n) override {
    return b_.value(d == DType::u32 ? op::ShiftRightLogical : op::ShiftRightArithmetic, scalarType(d), {a, n});
  }
  Value bitcast(DType, DType to, Value v) override { return b_.value(op::Bitcast, scalarType(to), {v}); }
  // SConvert and UConvert change the width; u32 <-> i32 is a Bitcast, and
  // u32 -> i64 zero-extends to an unsigned 64-bit type first.
  Value convert(DType from, DType to, Value v) override {
    const bool ff = tensor::isFloating(from), tf = tensor::isFloating(to);
    const uint32_t type = scalarType(to);
    if (ff && tf) return b_.value(op::FConvert, type, {v});
    if (!ff && tf) return b_.value(from == DType::u32 ? op::ConvertUToF : op::ConvertSToF, type, {v});
    if (!ff && !tf) {
      if (tensor::dtypeSize(from) == tensor::dtypeSize(to)) return b_.value(op::Bitcast, type, {v});
      if (from == DType::u32) return b_.value(op::Bitcast, type, {b_.value(op::UConvert, b_.typeInt(64, false), {v})});
      if (to == DType::u32) return b_.value(op::UConvert, type, {v});
      return b_.value(op::SConvert, type, {v});
    }
    return b_.value(to == DType::u32 ? op::ConvertFToU : op::ConvertFToS, type, {v});
  }

  Value exactMath(OpCode o, DType d, Value x, Value y) override {
    const bool f64 = d == DType::f64;
    if (f64 && !t_.int64) {
      fail(unimplemented("f64 transcendentals need shaderInt64 for their bit operations"));
      return x;
    }
    if (f64) b_.capability(11 /* Int64 */);
    SpirvOps ops(b_, scalarType(d), f64 ? b_.typeInt(64, false) : u32_, f64);
    if (std::optional<uint32_t> v = codegen::elementaryOf(ops, o, x, y != 0 ? y : x)) return *v;
    fail(unimplemented(strCat("op ", tensor::opName(o))));
    return x;
  }

  // Every operation decorated NoContraction: a driver may otherwise fold
  // (a + b) - a into b (Mesa's NIR does for inexact instructions).
  std::pair<Value, Value> twoSum(DType d, Value a, Value b) override {
    SpirvOps ops(b_, scalarType(d), u32_, d == DType::f64);
    const math::Pair<uint32_t> p = math::twoSum(ops, a, b);
    return {p.hi, p.lo};
  }

  // GLSL.std.450 (f32 only: it has no f64 transcendentals).
  Value fastMath(OpCode o, DType d, Value x, Value y) override {
    if (d != DType::f32) return 0;
    const uint32_t type = scalarType(d);
    // The GLSL.std.450 forms; any other op keeps its exact sequence.
    if (o == OpCode::kSin) return glsl(type, kSin, {x});
    if (o == OpCode::kCos) return glsl(type, kCos, {x});
    if (o == OpCode::kExp) return glsl(type, kExp, {x});
    if (o == OpCode::kLog) return glsl(type, kLog, {x});
    if (o == OpCode::kTanh) return glsl(type, kTanh, {x});
    if (o == OpCode::kPow) return glsl(type, kPow, {x, y});
    if (o == OpCode::kFloor) return glsl(type, kFloor, {x});
    if (o == OpCode::kCeil) return glsl(type, kCeil, {x});
    if (o == OpCode::kRound) return glsl(type, kRoundEven, {x});
    if (o == OpCode::kSigmoid) {
      const uint32_t one = constant(d, 1);
      const uint32_t ex = glsl(type, kExp, {b_.value(op::FNegate, type, {x})});
      return b_.value(op::FDiv, type, {one, b_.value(op::FAdd, type, {one, ex})});
    }
    return 0;
  }

  // --- indices: u32 ----------------------------------------------------------

  Value index(int64_t v) override { return uconst(static_cast<uint32_t>(v)); }
  Value indexAdd(Value a, Value b) override { return b_.value(op::IAdd, u32_, {a, b}); }
  Value indexMul(Value a, int64_t c) override { return b_.value(op::IMul, u32_, {a, index(c)}); }
  Value indexMulAdd(Value a, int64_t c, Value b) override { return indexAdd(indexMul(a, c), b); }
  Value indexDiv(Value a, int64_t c) override { return b_.value(op::UDiv, u32_, {a, index(c)}); }
  Value indexRem(Value a, int64_t c) override { return b_.value(op::UMod, u32_, {a, index(c)}); }
  Value indexSub(Value a, Value b) override { return b_.value(op::ISub, u32_, {a, b}); }
  Value indexMin(Value a, Value b) override { return b_.value(op::Select, u32_, {indexLess(a, b), a, b}); }
  Value indexLess(Value a, Value b) override { return b_.value(op::ULessThan, bool_, {a, b}); }
  Value indexEq(Value a, Value b) override { return b_.value(op::IEqual, bool_, {a, b}); }
  Value indexAsInt(Value i, DType* as) override {
    *as = DType::i32;
    return b_.value(op::Bitcast, i32_, {i});
  }
  Value intAsIndex(Value i) override { return b_.value(op::Bitcast, u32_, {i}); }

  // --- builtins ----------------------------------------------------------------

  Value localId() override { return lid_; }
  Value groupId() override { return group_; }
  Value globalId() override { return gid_; }
  Value groupCount(int64_t launched) override { return index(launched); }
  Value invocationCount(int64_t launched) override { return index(launched * wg_); }

  // --- memory --------------------------------------------------------------------

  // Every buffer load and store goes through these two. The value is of the
  // buffer's scalar type (bool for bool buffers). A bool buffer holds u8 0
  // or 1: loaded as u8 -> u32 != 0, stored as Select(b, 1, 0) -> u8.
  Value load(int buffer, Value flat) override {
    const uint32_t v = b_.value(op::Load, elem_types_[slot(buffer)], {element(buffer, flat)});
    if (m_.buffers[buffer].dtype != DType::bool_) return v;
    return b_.value(op::INotEqual, bool_, {b_.value(op::UConvert, u32_, {v}), uconst(0)});
  }
  void store(int buffer, Value flat, Value v) override {
    if (m_.buffers[buffer].dtype == DType::bool_) {
      v = b_.value(op::UConvert, elem_types_[slot(buffer)], {b_.value(op::Select, u32_, {v, uconst(1), uconst(0)})});
    }
    b_.inst(op::Store, {element(buffer, flat), v});
  }
  gpu::SharedArray sharedArray(DType d, int64_t count) override {
    const uint32_t type = scalarType(d);
    const uint32_t array = b_.typeArray(type, uconst(static_cast<uint32_t>(count)));
    shared_vars_.push_back(b_.globalVariable(b_.typePointer(kWorkgroup, array), kWorkgroup));
    return {static_cast<int>(shared_vars_.size()) - 1, d, count};
  }
  Value sharedLoad(const gpu::SharedArray& a, Value i, int64_t plus) override {
    return b_.value(op::Load, scalarType(a.dtype), {slot(a, i, plus)});
  }
  void sharedStore(const gpu::SharedArray& a, Value i, int64_t plus, Value v) override {
    b_.inst(op::Store, {slot(a, i, plus), v});
  }
  void barrier() override {
    // Workgroup execution and memory scope; AcquireRelease | WorkgroupMemory.
    b_.inst(op::ControlBarrier, {uconst(2), uconst(2), uconst(0x108)});
  }

  // --- variables: function-storage variables -------------------------------------

  Value variable(DType d, Value init) override {
    const uint32_t var = b_.localVariable(b_.typePointer(kFunction, scalarType(d)));
    b_.inst(op::Store, {var, init});
    return var;
  }
  Value read(DType d, Value var) override { return b_.value(op::Load, scalarType(d), {var}); }
  void write(DType, Value var, Value v) override { b_.inst(op::Store, {var, v}); }

  // --- structured control flow ---------------------------------------------------

  // `max_trips` bounds the iterations where `limit` or `step` is not a
  // constant (start is at least 0, so constants bound them otherwise).
  absl::Status strided(Value start, Value limit, Value step, const IndexBody& body, int64_t max_trips) override {
    const auto l = uconst_values_.find(limit), st = uconst_values_.find(step);
    if (l != uconst_values_.end() && st != uconst_values_.end() && st->second > 0) {
      max_trips = (int64_t{l->second} + st->second - 1) / st->second;
    }
    return loop(start, limit, [&](uint32_t x) { return b_.value(op::IAdd, u32_, {x, step}); }, body, max_trips);
  }
  absl::Status doubling(Value start, Value limit, const IndexBody& body, int64_t max_trips) override {
    return loop(
        start, limit, [&](uint32_t x) { return b_.value(op::ShiftLeftLogical, u32_, {x, uconst(1)}); }, body,
        max_trips);
  }
  // Integer pow's loop (at most 31 or 63 trips); as before the shared
  // emitter, its iterations are not counted toward max_loop_iterations.
  absl::Status loopWhile(const std::function<Value()>& cond, const Body& body, int64_t) override {
    const uint32_t header = b_.id(), test = b_.id(), loop_body = b_.id(), cont = b_.id(), merge = b_.id();
    b_.inst(op::Branch, {header});
    b_.label(header);
    b_.inst(op::LoopMerge, {merge, cont, 0});
    b_.inst(op::Branch, {test});
    b_.label(test);
    b_.inst(op::BranchConditional, {cond(), loop_body, merge});
    b_.label(loop_body);
    ACCY_RETURN_IF_ERROR(body());
    b_.inst(op::Branch, {cont});
    b_.label(cont);
    b_.inst(op::Branch, {header});
    b_.label(merge);
    return absl::OkStatus();
  }
  absl::Status when(Value cond, const Body& body) override {
    const uint32_t then = b_.id(), merge = b_.id();
    b_.inst(op::SelectionMerge, {merge, 0});
    b_.inst(op::BranchConditional, {cond, then, merge});
    b_.label(then);
    ACCY_RETURN_IF_ERROR(body());
    b_.inst(op::Branch, {merge});
    b_.label(merge);
    return absl::OkStatus();
  }

  // --- subgroups ---------------------------------------------------------------------

  Value shuffleDown(DType d, Value v, Value offset, int64_t) override {
    return b_.value(op::GroupNonUniformShuffleDown, scalarType(d), {uconst(3 /* Subgroup */), v, offset});
  }
  Value subgroupBuiltin(int which) override { return b_.value(op::Load, u32_, {subgroup_vars_[which]}); }

 private:
  absl::Status unimplemented(std::string_view what) const {
    return makeError(ErrorKind::kUnimplemented, strCat("SPIR-V emitter: ", what));
  }

  // The SPIR-V type of `d` (the emitter has checked the device has it).
  uint32_t scalarType(DType d) {
    switch (d) {
      case DType::f32:
        return b_.typeFloat(32);
      case DType::f64:
        b_.capability(10 /* Float64 */);
        return b_.typeFloat(64);
      case DType::i32:
        return i32_;
      case DType::u32:
        return u32_;
      case DType::i64:
        b_.capability(11 /* Int64 */);
        return b_.typeInt(64, true);
      case DType::bool_:
        return bool_;
    }
    return i32_;
  }

  uint32_t uconst(uint32_t v) {
    const uint32_t id = b_.constantBits(u32_, v, 32);
    uconst_values_[id] = v;
    return id;
  }

  uint32_t glsl(uint32_t type, Glsl inst, std::vector<uint32_t> args) {
    std::vector<uint32_t> ops = {b_.importGlsl(), inst};
    ops.insert(ops.end(), args.begin(), args.end());
    return b_.value(op::ExtInst, type, ops);
  }

  // The buffers this kernel uses, each at its binding (its buffer number):
  // a module of thousands of kernels and buffers declared every buffer in
  // every kernel before, quadratic in the program.
  absl::Status declareBuffers(const std::vector<int>& used) {
    used_ = used;
    for (const int i : used) {
      const choir::Buffer& buf = m_.buffers[static_cast<size_t>(i)];
      uint32_t elem = 0;
      if (buf.dtype == DType::bool_) {
        // One byte per element, 0 or 1: an array of u8 (8-bit storage; the
        // emitter has checked the device has it). Only loads, stores and
        // conversions touch the u8 values, so the Int8 capability is not
        // needed.
        b_.capability(4448 /* StorageBuffer8BitAccess */);
        b_.extension("SPV_KHR_8bit_storage");
        elem = b_.typeInt(8, false);
      } else {
        elem = scalarType(buf.dtype);
      }
      const uint32_t array = b_.typeRuntimeArray(elem);
      b_.decorate(array, {6 /* ArrayStride */, static_cast<uint32_t>(tensor::dtypeSize(buf.dtype))});
      const uint32_t block = b_.typeStruct({array});
      b_.decorate(block, {2 /* Block */});
      b_.memberDecorate(block, 0, {35 /* Offset */, 0});
      const uint32_t var = b_.globalVariable(b_.typePointer(kStorageBuffer, block), kStorageBuffer);
      b_.decorate(var, {34 /* DescriptorSet */, 0});
      b_.decorate(var, {33 /* Binding */, static_cast<uint32_t>(i)});
      buffer_vars_.push_back(var);
      elem_types_.push_back(elem);
    }
    return absl::OkStatus();
  }

  // A pointer to buffer[flat]; its pointee is the storage type
  // elem_types_[slot(buffer)] (u8 for bool buffers).
  // Where buffer `buffer` sits among the used ones.
  size_t slot(int buffer) const {
    return static_cast<size_t>(std::lower_bound(used_.begin(), used_.end(), buffer) - used_.begin());
  }

  uint32_t element(int buffer, uint32_t flat) {
    return b_.value(op::AccessChain, b_.typePointer(kStorageBuffer, elem_types_[slot(buffer)]),
                    {buffer_vars_[slot(buffer)], b_.constantBits(i32_, 0, 32), flat});
  }
  uint32_t slot(const gpu::SharedArray& a, Value i, int64_t plus) {
    if (plus != 0) i = indexAdd(i, index(plus));
    return b_.value(op::AccessChain, b_.typePointer(kWorkgroup, scalarType(a.dtype)),
                    {shared_vars_[static_cast<size_t>(a.id)], i});
  }

  // for (x = start; x < limit; x = next(x)) body(x), all u32, structured,
  // running at most `max_trips` times (-1: unknown), which counts toward
  // the iterations one invocation runs (loop_trips_).
  absl::Status loop(uint32_t start, uint32_t limit, const std::function<uint32_t(uint32_t)>& next,
                    const IndexBody& body, int64_t max_trips) {
    constexpr int64_t kUnknown = int64_t{1} << 40;  // counts as over any device's limit
    const int64_t trips = max_trips < 0 ? kUnknown : max_trips;
    const int64_t enclosing = trips_multiplier_;
    loop_trips_ = std::min(kUnknown, loop_trips_ + std::min(kUnknown, enclosing * std::max<int64_t>(trips, 1)));
    trips_multiplier_ = std::min(kUnknown, enclosing * std::max<int64_t>(trips, 1));
    const uint32_t ptr = b_.localVariable(b_.typePointer(kFunction, u32_));
    b_.inst(op::Store, {ptr, start});
    const uint32_t header = b_.id(), cond = b_.id(), loop_body = b_.id(), cont = b_.id(), merge = b_.id();
    b_.inst(op::Branch, {header});
    b_.label(header);
    b_.inst(op::LoopMerge, {merge, cont, 0});
    b_.inst(op::Branch, {cond});
    b_.label(cond);
    const uint32_t x = b_.value(op::Load, u32_, {ptr});
    b_.inst(op::BranchConditional, {b_.value(op::ULessThan, bool_, {x, limit}), loop_body, merge});
    b_.label(loop_body);
    ACCY_RETURN_IF_ERROR(body(x));
    b_.inst(op::Branch, {cont});
    b_.label(cont);
    b_.inst(op::Store, {ptr, next(b_.value(op::Load, u32_, {ptr}))});
    b_.inst(op::Branch, {header});
    b_.label(merge);
    trips_multiplier_ = enclosing;
    return absl::OkStatus();
  }

  const choir::Module& m_;
  const choir::Kernel& k_;
  const TargetInfo& t_;
  gpu::TargetDesc desc_;
  ModuleBuilder b_;
  int64_t wg_ = 1;
  uint32_t u32_ = 0, i32_ = 0, bool_ = 0;
  uint32_t gid_ = 0, lid_ = 0, group_ = 0;
  uint32_t subgroup_vars_[4] = {};  // SubgroupSize, NumSubgroups, SubgroupId, SubgroupLocalInvocationId
  std::vector<int> used_;              // buffer numbers, ascending
  std::vector<uint32_t> buffer_vars_;  // per used buffer
  std::vector<uint32_t> elem_types_;   // storage element type per used buffer (u8 for bool buffers)
  std::vector<uint32_t> shared_vars_;
  std::map<uint32_t, uint32_t> uconst_values_;  // id of each uconst -> its value
  int64_t trips_multiplier_ = 1;                // iterations of the loops being emitted, multiplied
  int64_t loop_trips_ = 0;                      // loop iterations one invocation may run, all loops together
};

}  // namespace

absl::StatusOr<TranslatedKernel> translateKernel(const choir::Module& module, const choir::Kernel& kernel,
                                                 const TargetInfo& target) {
  SpirvTarget t(module, kernel, target);
  gpu::KernelEmitter emitter(t, module, kernel);
  ACCY_ASSIGN_OR_RETURN(const gpu::EmittedKernel k, emitter.run());
  TranslatedKernel out;
  ACCY_ASSIGN_OR_RETURN(out.words, t.finish());
  out.workgroups = k.workgroups;
  return out;
}

}  // namespace accy::spirv
