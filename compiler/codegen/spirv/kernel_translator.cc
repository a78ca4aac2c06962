#include "compiler/codegen/spirv/kernel_translator.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "compiler/choir/passes/gpu_map.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/rewrite.h"
#include "compiler/choir/value_numbering.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/spirv/module_builder.h"
#include "base/errors.h"
#include "compiler/tensor/scalar_ops.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::spirv {
namespace {

using choir::Affine;
using choir::DType;
using choir::Expr;
using choir::ExprKind;
using choir::ExprRef;
using choir::LoopHeader;
using choir::LoopTag;
using choir::OpCode;
using choir::Stmt;
using choir::StmtKind;

absl::Status unimplemented(std::string_view what) {
  return makeError(ErrorKind::kUnimplemented, strCat("SPIR-V emitter: ", what));
}

// GLSL.std.450 instruction numbers.
enum Glsl : uint32_t { kSin = 13, kCos = 14, kExp = 27, kLog = 28, kSqrt = 31, kTanh = 21, kPow = 26 };

// The ops type of compiler/codegen/math/elementary.h over SPIR-V SSA ids:
// exact-mode transcendentals as instruction sequences. Arithmetic results
// are decorated NoContraction so that no compiler fuses the error-free
// transformations the algorithms rely on; fma is a separate multiply and
// add (Vulkan does not promise a fused one).
class SpirvOps {
 public:
  using Vec = uint32_t;
  using Mask = uint32_t;

  SpirvOps(ModuleBuilder& b, uint32_t float_type, uint32_t uint_type, bool f64)
      : b_(b), f_(float_type), u_(uint_type), f64_(f64) {}

  const math::LaneMath& c() const { return f64_ ? math::kF64 : math::kF32; }
  bool fusedMultiplyAdd() const { return false; }

  Vec num(double v) {
    uint64_t bits;
    if (f64_) {
      std::memcpy(&bits, &v, 8);
    } else {
      const float f = static_cast<float>(v);
      uint32_t b32;
      std::memcpy(&b32, &f, 4);
      bits = b32;
    }
    return b_.constantBits(f_, bits, f64_ ? 64 : 32);
  }
  Vec bits(uint64_t b) { return b_.constantBits(f_, f64_ ? b : (b & 0xffffffffu), f64_ ? 64 : 32); }
  Vec zero() { return num(0.0); }

  Vec add(Vec a, Vec b) { return exact(op::FAdd, {a, b}); }
  Vec sub(Vec a, Vec b) { return exact(op::FSub, {a, b}); }
  Vec mul(Vec a, Vec b) { return exact(op::FMul, {a, b}); }
  Vec div(Vec a, Vec b) { return exact(op::FDiv, {a, b}); }
  Vec fma(Vec a, Vec b, Vec c) { return add(mul(a, b), c); }
  Vec neg(Vec a) { return b_.value(op::FNegate, f_, {a}); }
  Vec abs(Vec a) { return bitAnd(a, bits(~c().sign_mask & (f64_ ? ~uint64_t{0} : 0xffffffffu))); }
  Vec round(Vec a) { return b_.value(op::ExtInst, f_, {b_.importGlsl(), 2 /* RoundEven */, a}); }
  Vec minRaw(Vec a, Vec b) { return b_.value(op::Select, f_, {b_.value(op::FOrdLessThan, b_.typeBool(), {a, b}), a, b}); }
  Vec maxRaw(Vec a, Vec b) {
    return b_.value(op::Select, f_, {b_.value(op::FOrdGreaterThan, b_.typeBool(), {a, b}), a, b});
  }
  Vec bitAnd(Vec a, Vec b) { return integer(199, a, b); }
  Vec bitOr(Vec a, Vec b) { return integer(197, a, b); }
  Vec bitXor(Vec a, Vec b) { return integer(198, a, b); }
  Vec intAdd(Vec a, Vec b) { return integer(op::IAdd, a, b); }
  Vec shl(Vec a, int n) { return shift(196, a, n); }
  Vec shr(Vec a, int n) { return shift(op::ShiftRightLogical, a, n); }

  Mask cmp(math::Cmp p, Vec a, Vec b) {
    static constexpr uint16_t kOps[] = {op::FOrdLessThan, op::FOrdLessThanEqual, op::FOrdGreaterThan,
                                        op::FOrdGreaterThanEqual, op::FOrdEqual, op::FUnordNotEqual};
    return b_.value(kOps[static_cast<int>(p)], b_.typeBool(), {a, b});
  }
  Mask both(Mask a, Mask b) { return b_.value(op::LogicalAnd, b_.typeBool(), {a, b}); }
  Mask either(Mask a, Mask b) { return b_.value(op::LogicalOr, b_.typeBool(), {a, b}); }
  Vec select(Mask m, Vec t, Vec f) { return b_.value(op::Select, f_, {m, t, f}); }

  Vec horner(Vec x, std::span<const double> coefficients) {
    Vec acc = num(coefficients.back());
    for (size_t i = coefficients.size() - 1; i-- > 0;) acc = fma(acc, x, num(coefficients[i]));
    return acc;
  }

  // Runs `body` only in invocations where `m` is set (a structured
  // selection); `body` replaces values of `vars`, which hold the
  // replacements afterwards. The values pass through function variables.
  template <class F>
  void whenAny(Mask m, std::span<Vec> vars, F&& body) {
    std::vector<uint32_t> slots;
    for (Vec v : vars) {
      slots.push_back(b_.localVariable(b_.typePointer(kFunction, f_)));
      b_.inst(op::Store, {slots.back(), v});
    }
    const uint32_t then = b_.id(), merge = b_.id();
    b_.inst(op::SelectionMerge, {merge, 0});
    b_.inst(op::BranchConditional, {m, then, merge});
    b_.label(then);
    body();
    for (size_t i = 0; i < vars.size(); ++i) b_.inst(op::Store, {slots[i], vars[i]});
    b_.inst(op::Branch, {merge});
    b_.label(merge);
    for (size_t i = 0; i < vars.size(); ++i) vars[i] = b_.value(op::Load, f_, {slots[i]});
  }

 private:
  Vec exact(uint16_t opcode, std::initializer_list<uint32_t> args) {
    const uint32_t v = b_.value(opcode, f_, args);
    b_.decorate(v, {42 /* NoContraction */});
    return v;
  }
  Vec integer(uint16_t opcode, Vec a, Vec b) {
    const uint32_t x = b_.value(op::Bitcast, u_, {a});
    const uint32_t y = b_.value(op::Bitcast, u_, {b});
    return b_.value(op::Bitcast, f_, {b_.value(opcode, u_, {x, y})});
  }
  Vec shift(uint16_t opcode, Vec a, int n) {
    const uint32_t x = b_.value(op::Bitcast, u_, {a});
    const uint32_t amount = b_.constantBits(b_.typeInt(32, false), static_cast<uint32_t>(n), 32);
    return b_.value(op::Bitcast, f_, {b_.value(opcode, u_, {x, amount})});
  }

  ModuleBuilder& b_;
  uint32_t f_, u_;
  bool f64_;
};

class Translator {
 public:
  Translator(const choir::Module& m, const choir::Kernel& k, const TargetInfo& t) : m_(m), k_(k), t_(t) {}

  absl::StatusOr<TranslatedKernel> run() {
    const uint32_t wg = static_cast<uint32_t>(std::max<int64_t>(1, k_.workgroup_size));
    if (k_.workgroup_size == 0) return unimplemented(strCat("kernel ", k_.name, " is not mapped to a GPU"));
    b_.capability(1 /* Shader */);
    u32_ = b_.typeInt(32, false);
    i32_ = b_.typeInt(32, true);
    bool_ = b_.typeBool();
    ACCY_RETURN_IF_ERROR(declareBuffers());
    // Built-in invocation ids.
    const uint32_t uvec3 = b_.typeVector(u32_, 3);
    const uint32_t in_ptr = b_.typePointer(kInput, uvec3);
    global_id_var_ = b_.globalVariable(in_ptr, kInput);
    local_id_var_ = b_.globalVariable(in_ptr, kInput);
    group_id_var_ = b_.globalVariable(in_ptr, kInput);
    b_.decorate(global_id_var_, {11 /* BuiltIn */, 28 /* GlobalInvocationId */});
    b_.decorate(local_id_var_, {11, 27 /* LocalInvocationId */});
    b_.decorate(group_id_var_, {11, 26 /* WorkgroupId */});
    ACCY_ASSIGN_OR_RETURN(const choir::GpuNest g, choir::describeGpuKernel(k_));
    std::vector<uint32_t> interface = {global_id_var_, local_id_var_, group_id_var_};
    subgroups_ = g.form == choir::GpuForm::kTreeReduce && t_.subgroup_size > 0;
    if (subgroups_) {
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
    b_.localSize(fn, wg);
    wg_ = wg;
    gid_ = b_.value(op::CompositeExtract, u32_, {b_.value(op::Load, uvec3, {global_id_var_}), 0});
    lid_ = b_.value(op::CompositeExtract, u32_, {b_.value(op::Load, uvec3, {local_id_var_}), 0});
    group_ = b_.value(op::CompositeExtract, u32_, {b_.value(op::Load, uvec3, {group_id_var_}), 0});

    const Stmt* s = g.leaf;
    const std::vector<LoopHeader>& nest = g.loops;
    int64_t outputs = 1;
    for (const LoopHeader& h : nest) outputs *= h.extent;
    if (outputs > INT32_MAX) return unimplemented(strCat("kernel ", k_.name, " has more than 2^31 outputs"));
    TranslatedKernel out;
    switch (g.form) {
      case choir::GpuForm::kElementwise:
      case choir::GpuForm::kSerialReduce: {
        // Grid-stride loop over the flattened nest: one output per step.
        const int64_t groups = std::min<int64_t>((outputs + wg - 1) / wg, t_.max_workgroup_count);
        out.workgroups = std::max<int64_t>(1, groups);
        const uint32_t total = uconst(static_cast<uint32_t>(out.workgroups * wg));
        ACCY_RETURN_IF_ERROR(strided(gid_, uconst(static_cast<uint32_t>(outputs)), total, [&](uint32_t x) {
          decompose(x, nest);
          return s->kind == StmtKind::kStore ? store(*s) : reduceSerial(*s);
        }));
        break;
      }
      case choir::GpuForm::kTreeReduce:
        if (g.split == 0) {
          // One workgroup per output (grid-stride over outputs); the
          // workgroup splits the domain and combines in shared memory.
          out.workgroups = std::max<int64_t>(1, std::min<int64_t>(outputs, t_.max_workgroup_count));
          ACCY_RETURN_IF_ERROR(strided(group_, uconst(static_cast<uint32_t>(outputs)),
                                       uconst(static_cast<uint32_t>(out.workgroups)), [&](uint32_t o) {
                                         decompose(o, nest);
                                         return reduceTree(*s);
                                       }));
        } else {
          // `split` workgroups per output, each over an interleaved part of
          // the domain, leaving its result in the partials buffer; the
          // next kernel combines the parts.
          const int64_t blocks = outputs * g.split;
          if (blocks > INT32_MAX) return unimplemented(strCat("kernel ", k_.name, " has more than 2^31 parts"));
          out.workgroups = std::max<int64_t>(1, std::min<int64_t>(blocks, t_.max_workgroup_count));
          const uint32_t split = uconst(static_cast<uint32_t>(g.split));
          ACCY_RETURN_IF_ERROR(strided(group_, uconst(static_cast<uint32_t>(blocks)),
                                       uconst(static_cast<uint32_t>(out.workgroups)), [&](uint32_t block) {
                                         decompose(b_.value(op::UDiv, u32_, {block, split}), nest);
                                         const uint32_t part = b_.value(op::UMod, u32_, {block, split});
                                         const uint32_t start =
                                             b_.value(op::IAdd, u32_, {b_.value(op::IMul, u32_, {part, uconst(wg_)}), lid_});
                                         const uint32_t step = uconst(static_cast<uint32_t>(g.split * wg_));
                                         return reduceTree(*s, start, step, [&](uint32_t combined) -> absl::Status {
                                           // partials[block]: block = output * split + part.
                                           vars_[kPartVar] = block;
                                           storeElement(g.partials, {choir::Affine::var(kPartVar)}, combined);
                                           return absl::OkStatus();
                                         });
                                       }));
        }
        break;
      case choir::GpuForm::kTiledProduct: {
        ACCY_ASSIGN_OR_RETURN(out.workgroups, tiledProduct(g));
        break;
      }
    }
    if (t_.max_loop_iterations > 0 && loop_trips_ >= t_.max_loop_iterations) {
      return unimplemented(strCat("kernel ", k_.name, " would run up to ", loop_trips_,
                                  " loop iterations in one invocation; this device ends an invocation's loops after ",
                                  t_.max_loop_iterations, " (llvmpipe's limit), which would drop the rest of the work"));
    }
    b_.endMain();
    out.words = b_.finish();
    return out;
  }

 private:
  // --- types, constants, buffers ------------------------------------------

  absl::StatusOr<uint32_t> scalarType(DType d) {
    switch (d) {
      case DType::f32:
        return b_.typeFloat(32);
      case DType::f64:
        if (!t_.float64) return unimplemented("f64 values need a device with shaderFloat64");
        b_.capability(10 /* Float64 */);
        return b_.typeFloat(64);
      case DType::i32:
        return i32_;
      case DType::i64:
        if (!t_.int64) return unimplemented("i64 values need a device with shaderInt64");
        b_.capability(11 /* Int64 */);
        return b_.typeInt(64, true);
      case DType::bool_:
        return bool_;
    }
    return unimplemented("dtype");
  }

  uint32_t uconst(uint32_t v) {
    const uint32_t id = b_.constantBits(u32_, v, 32);
    uconst_values_[id] = v;
    return id;
  }

  absl::StatusOr<uint32_t> constant(DType d, double v) {
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(d));
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
        return b_.constantBits(type, static_cast<uint32_t>(static_cast<int32_t>(tensor::toInt64(c))), 32);
      case DType::i64:
        return b_.constantBits(type, static_cast<uint64_t>(tensor::toInt64(c)), 64);
      case DType::bool_:
        return b_.constantBool(c != 0);
    }
    return unimplemented("constant");
  }

  absl::Status declareBuffers() {
    for (size_t i = 0; i < m_.buffers.size(); ++i) {
      const choir::Buffer& buf = m_.buffers[i];
      uint32_t elem = 0;
      if (buf.dtype == DType::bool_) {
        // One byte per element, 0 or 1: an array of u8 (8-bit storage).
        // Only loads, stores and conversions touch the u8 values (see
        // loadElement/storeElement), so the Int8 capability is not needed.
        if (!t_.storage_8bit) {
          return unimplemented(strCat("bool buffers (one byte per element, buffer ", i,
                                      ") need a device with storageBuffer8BitAccess"));
        }
        b_.capability(4448 /* StorageBuffer8BitAccess */);
        b_.extension("SPV_KHR_8bit_storage");
        elem = b_.typeInt(8, false);
      } else {
        ACCY_ASSIGN_OR_RETURN(elem, scalarType(buf.dtype));
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

  // --- control flow -------------------------------------------------------

  // for (x = start; x < limit; x += step) body(x), all u32, structured.
  // `max_trips` bounds the iterations where `limit` or `step` is not a
  // constant (start is at least 0, so constants bound them otherwise).
  absl::Status strided(uint32_t start, uint32_t limit, uint32_t step, const std::function<absl::Status(uint32_t)>& body,
                       int64_t max_trips = -1) {
    const auto l = uconst_values_.find(limit), st = uconst_values_.find(step);
    if (l != uconst_values_.end() && st != uconst_values_.end() && st->second > 0) {
      max_trips = (int64_t{l->second} + st->second - 1) / st->second;
    }
    return loop(start, limit, [&](uint32_t x) { return b_.value(op::IAdd, u32_, {x, step}); }, body, max_trips);
  }

  // for (x = start; x < limit; x = next(x)) body(x), all u32, structured,
  // running at most `max_trips` times (-1: unknown), which counts toward
  // the iterations one invocation runs (loop_trips_).
  absl::Status loop(uint32_t start, uint32_t limit, const std::function<uint32_t(uint32_t)>& next,
                    const std::function<absl::Status(uint32_t)>& body, int64_t max_trips = -1) {
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
    // Values made inside the loop do not dominate code after it: keep the
    // cache of the enclosing scope and restore it.
    const size_t saved = cse_log_.size();
    ACCY_RETURN_IF_ERROR(body(x));
    forgetSince(saved);
    b_.inst(op::Branch, {cont});
    b_.label(cont);
    b_.inst(op::Store, {ptr, next(b_.value(op::Load, u32_, {ptr}))});
    b_.inst(op::Branch, {header});
    b_.label(merge);
    trips_multiplier_ = enclosing;
    return absl::OkStatus();
  }

  // if (cond) body
  absl::Status when(uint32_t cond, const std::function<absl::Status()>& body) {
    const uint32_t then = b_.id(), merge = b_.id();
    b_.inst(op::SelectionMerge, {merge, 0});
    b_.inst(op::BranchConditional, {cond, then, merge});
    b_.label(then);
    const size_t saved = cse_log_.size();
    ACCY_RETURN_IF_ERROR(body());
    forgetSince(saved);
    b_.inst(op::Branch, {merge});
    b_.label(merge);
    return absl::OkStatus();
  }

  void barrier() {
    // Workgroup execution and memory scope; AcquireRelease | WorkgroupMemory.
    b_.inst(op::ControlBarrier, {uconst(2), uconst(2), uconst(0x108)});
  }

  // Sets the loop variables of `nest` from the row-major index `flat`.
  void decompose(uint32_t flat, const std::vector<LoopHeader>& nest) {
    uint32_t stride = 1;
    for (size_t i = nest.size(); i-- > 0;) {
      uint32_t v = stride == 1 ? flat : b_.value(op::UDiv, u32_, {flat, uconst(stride)});
      if (i > 0) v = b_.value(op::UMod, u32_, {v, uconst(static_cast<uint32_t>(nest[i].extent))});
      vars_[nest[i].var] = v;
      stride *= static_cast<uint32_t>(nest[i].extent);
    }
  }

  // --- accesses -----------------------------------------------------------

  uint32_t affine(const Affine& a) {
    uint32_t r = b_.constantBits(u32_, static_cast<uint32_t>(a.constant), 32);
    for (const Affine::Term& t : a.terms) {
      uint32_t term = vars_.at(t.var);
      if (t.coeff != 1) term = b_.value(op::IMul, u32_, {term, b_.constantBits(u32_, static_cast<uint32_t>(t.coeff), 32)});
      r = b_.value(op::IAdd, u32_, {r, term});
    }
    return r;
  }

  // A pointer to the element of `buffer` at `index`; its pointee is the
  // storage type elem_types_[buffer]. Only loadElement and storeElement
  // use it.
  uint32_t element(int buffer, const std::vector<Affine>& index) {
    const uint32_t flat = affine(choir::flatIndex(m_.buffers[buffer], index));
    return b_.value(op::AccessChain, b_.typePointer(kStorageBuffer, elem_types_[buffer]),
                    {buffer_vars_[buffer], b_.constantBits(i32_, 0, 32), flat});
  }

  // Every buffer load and store goes through these two. The value is of the
  // buffer's scalar type (scalarType(dtype): bool_ for bool buffers). A
  // bool buffer holds u8 0 or 1: loaded as u8 -> u32 != 0, stored as
  // Select(b, 1, 0) -> u8.
  uint32_t loadElement(int buffer, const std::vector<Affine>& index) {
    const uint32_t v = b_.value(op::Load, elem_types_[buffer], {element(buffer, index)});
    if (m_.buffers[buffer].dtype != DType::bool_) return v;
    return b_.value(op::INotEqual, bool_, {b_.value(op::UConvert, u32_, {v}), uconst(0)});
  }

  void storeElement(int buffer, const std::vector<Affine>& index, uint32_t value) {
    if (m_.buffers[buffer].dtype == DType::bool_) {
      value = b_.value(op::UConvert, elem_types_[buffer], {b_.value(op::Select, u32_, {value, uconst(1), uconst(0)})});
    }
    b_.inst(op::Store, {element(buffer, index), value});
  }

  // --- expressions --------------------------------------------------------

  absl::StatusOr<uint32_t> expr(const ExprRef& e) {
    const int key = numbers_.number(e);  // also distinguishes index variables
    if (auto it = cse_.find(key); it != cse_.end()) return it->second;
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(e->dtype));
    uint32_t v = 0;
    switch (e->kind) {
      case ExprKind::kLoad:
        v = loadElement(e->buffer, e->index);
        break;
      case ExprKind::kConstant: {
        ACCY_ASSIGN_OR_RETURN(v, constant(e->dtype, e->constant));
        break;
      }
      case ExprKind::kIndex: {
        const uint32_t u = affine(e->index[0]);
        ACCY_ASSIGN_OR_RETURN(v, convert(b_.value(op::Bitcast, i32_, {u}), DType::i32, e->dtype));
        break;
      }
      case ExprKind::kOp: {
        std::vector<uint32_t> a;
        for (const ExprRef& x : e->args) {
          ACCY_ASSIGN_OR_RETURN(uint32_t av, expr(x));
          a.push_back(av);
        }
        ACCY_ASSIGN_OR_RETURN(v, opValue(*e, a, type));
        break;
      }
    }
    remember(key, v);
    return v;
  }

  uint32_t glsl(uint32_t type, Glsl inst, std::vector<uint32_t> args) {
    std::vector<uint32_t> ops = {b_.importGlsl(), inst};
    ops.insert(ops.end(), args.begin(), args.end());
    return b_.value(op::ExtInst, type, ops);
  }

  absl::StatusOr<uint32_t> opValue(const Expr& e, const std::vector<uint32_t>& a, uint32_t type) {
    const DType arg = e.args.empty() ? e.dtype : e.args[0]->dtype;
    const bool flt = tensor::isFloating(arg);
    // Transcendentals: accurate sequences by default (exact mode), the
    // GLSL.std.450 instructions in fast mode (f32 only: it has no f64 ones).
    auto ops = [&]() -> absl::StatusOr<SpirvOps> {
      const bool f64 = e.dtype == DType::f64;
      if (f64 && !t_.int64) return unimplemented("f64 transcendentals need shaderInt64 for their bit operations");
      if (f64) b_.capability(11 /* Int64 */);
      return SpirvOps(b_, type, f64 ? b_.typeInt(64, false) : u32_, f64);
    };
    auto transcendental = [&](Glsl inst) -> absl::StatusOr<uint32_t> {
      if (t_.mode == ArithmeticMode::kFast && e.dtype == DType::f32) return glsl(type, inst, a);
      ACCY_ASSIGN_OR_RETURN(SpirvOps o, ops());
      switch (inst) {
        case kSin:
          return math::sinOf(o, a[0]);
        case kCos:
          return math::cosOf(o, a[0]);
        case kExp:
          return math::expOf(o, a[0]);
        case kLog:
          return math::logOf(o, a[0]);
        case kTanh:
          return math::tanhOf(o, a[0]);
        case kPow:
          return math::powOf(o, a[0], a[1]);
        case kSqrt:
          break;
      }
      return unimplemented("transcendental");
    };
    switch (e.op) {
      case OpCode::kAdd:
        return b_.value(flt ? op::FAdd : op::IAdd, type, {a[0], a[1]});
      case OpCode::kSub:
        return b_.value(flt ? op::FSub : op::ISub, type, {a[0], a[1]});
      case OpCode::kMul:
        return b_.value(flt ? op::FMul : op::IMul, type, {a[0], a[1]});
      case OpCode::kDiv: {
        if (flt) return b_.value(op::FDiv, type, {a[0], a[1]});
        // x / 0 = 0 and x / -1 = -x, as on every backend; the divisor fed
        // to SDiv is never 0 or -1.
        ACCY_ASSIGN_OR_RETURN(uint32_t zero, constant(e.dtype, 0));
        ACCY_ASSIGN_OR_RETURN(uint32_t one, constant(e.dtype, 1));
        ACCY_ASSIGN_OR_RETURN(uint32_t minus_one, constant(e.dtype, -1));
        const uint32_t is_zero = b_.value(op::IEqual, bool_, {a[1], zero});
        const uint32_t is_m1 = b_.value(op::IEqual, bool_, {a[1], minus_one});
        const uint32_t safe = b_.value(op::Select, type, {b_.value(op::LogicalOr, bool_, {is_zero, is_m1}), one, a[1]});
        const uint32_t q = b_.value(op::SDiv, type, {a[0], safe});
        const uint32_t neg = b_.value(op::SNegate, type, {a[0]});
        return b_.value(op::Select, type, {is_zero, zero, b_.value(op::Select, type, {is_m1, neg, q})});
      }
      case OpCode::kMax:
      case OpCode::kMin: {
        const bool mx = e.op == OpCode::kMax;
        if (!flt) {
          if (e.dtype == DType::bool_) {
            return b_.value(mx ? op::LogicalOr : op::LogicalAnd, type, {a[0], a[1]});
          }
          const uint32_t pick = b_.value(mx ? op::SGreaterThan : op::SLessThan, bool_, {a[0], a[1]});
          return b_.value(op::Select, type, {pick, a[0], a[1]});
        }
        // NaN in either operand gives NaN.
        const uint32_t pick = b_.value(mx ? op::FOrdGreaterThanEqual : op::FOrdLessThanEqual, bool_, {a[0], a[1]});
        const uint32_t r = b_.value(op::Select, type, {pick, a[0], a[1]});
        const uint32_t nan_a = b_.value(op::IsNan, bool_, {a[0]});
        return b_.value(op::Select, type, {nan_a, a[0], r});
      }
      case OpCode::kPow:
        if (!flt) return intPow(e.dtype, type, a[0], a[1]);
        return transcendental(kPow);
      case OpCode::kNeg:
        return b_.value(flt ? op::FNegate : op::SNegate, type, {a[0]});
      case OpCode::kAbs: {
        if (flt) {
          ACCY_ASSIGN_OR_RETURN(uint32_t zero, constant(e.dtype, 0));
          const uint32_t negative = b_.value(op::FOrdLessThan, bool_, {a[0], zero});
          return b_.value(op::Select, type, {negative, b_.value(op::FNegate, type, {a[0]}), a[0]});
        }
        ACCY_ASSIGN_OR_RETURN(uint32_t zero, constant(e.dtype, 0));
        const uint32_t negative = b_.value(op::SLessThan, bool_, {a[0], zero});
        return b_.value(op::Select, type, {negative, b_.value(op::SNegate, type, {a[0]}), a[0]});
      }
      case OpCode::kSqrt:
        return glsl(type, kSqrt, a);
      case OpCode::kSin:
        return transcendental(kSin);
      case OpCode::kCos:
        return transcendental(kCos);
      case OpCode::kExp:
        return transcendental(kExp);
      case OpCode::kLog:
        return transcendental(kLog);
      case OpCode::kTanh:
        return transcendental(kTanh);
      case OpCode::kSigmoid: {
        if (t_.mode != ArithmeticMode::kFast || e.dtype == DType::f64) {
          ACCY_ASSIGN_OR_RETURN(SpirvOps o, ops());
          return math::sigmoidOf(o, a[0]);
        }
        ACCY_ASSIGN_OR_RETURN(uint32_t one, constant(e.dtype, 1));
        const uint32_t ex = glsl(type, kExp, {b_.value(op::FNegate, type, {a[0]})});
        return b_.value(op::FDiv, type, {one, b_.value(op::FAdd, type, {one, ex})});
      }
      case OpCode::kLt:
      case OpCode::kLe:
      case OpCode::kGt:
      case OpCode::kGe:
      case OpCode::kEq:
      case OpCode::kNe: {
        static const std::map<OpCode, std::pair<uint16_t, uint16_t>> ops = {
            {OpCode::kLt, {op::FOrdLessThan, op::SLessThan}},
            {OpCode::kLe, {op::FOrdLessThanEqual, op::SLessThanEqual}},
            {OpCode::kGt, {op::FOrdGreaterThan, op::SGreaterThan}},
            {OpCode::kGe, {op::FOrdGreaterThanEqual, op::SGreaterThanEqual}},
            {OpCode::kEq, {op::FOrdEqual, op::IEqual}},
            {OpCode::kNe, {op::FUnordNotEqual, op::INotEqual}}};
        if (arg == DType::bool_) {
          // Compare bools as 0/1 integers.
          const uint32_t x = b_.value(op::Select, i32_, {a[0], b_.constantBits(i32_, 1, 32), b_.constantBits(i32_, 0, 32)});
          const uint32_t y = b_.value(op::Select, i32_, {a[1], b_.constantBits(i32_, 1, 32), b_.constantBits(i32_, 0, 32)});
          return b_.value(ops.at(e.op).second, bool_, {x, y});
        }
        return b_.value(flt ? ops.at(e.op).first : ops.at(e.op).second, bool_, {a[0], a[1]});
      }
      case OpCode::kWhere:
        return b_.value(op::Select, type, {a[0], a[1], a[2]});
      case OpCode::kCast:
        return convert(a[0], arg, e.dtype);
      default:
        break;
    }
    return unimplemented(strCat("op ", tensor::opName(e.op)));
  }

  // Integer pow of docs/SEMANTICS.md (compiler/tensor/scalar_ops.cc's
  // intPow): a negative exponent gives 1 for base 1, +-1 for base -1 (by
  // the exponent's parity), 0 otherwise; else square-and-multiply, wrapping
  // in the dtype's width. A structured loop over function variables:
  //   r = 1; b = base; e = exponent;
  //   while (e > 0) { if (e & 1) r *= b; b *= b; e >>= 1; }
  absl::StatusOr<uint32_t> intPow(DType d, uint32_t type, uint32_t base, uint32_t exponent) {
    ACCY_ASSIGN_OR_RETURN(uint32_t zero, constant(d, 0));
    ACCY_ASSIGN_OR_RETURN(uint32_t one, constant(d, 1));
    ACCY_ASSIGN_OR_RETURN(uint32_t minus_one, constant(d, -1));
    const uint32_t ptr = b_.typePointer(kFunction, type);
    const uint32_t r_var = b_.localVariable(ptr), b_var = b_.localVariable(ptr), e_var = b_.localVariable(ptr);
    b_.inst(op::Store, {r_var, one});
    b_.inst(op::Store, {b_var, base});
    b_.inst(op::Store, {e_var, exponent});
    const uint32_t header = b_.id(), cond = b_.id(), body = b_.id(), cont = b_.id(), merge = b_.id();
    b_.inst(op::Branch, {header});
    b_.label(header);
    b_.inst(op::LoopMerge, {merge, cont, 0});
    b_.inst(op::Branch, {cond});
    b_.label(cond);
    const uint32_t e = b_.value(op::Load, type, {e_var});
    b_.inst(op::BranchConditional, {b_.value(op::SGreaterThan, bool_, {e, zero}), body, merge});
    b_.label(body);
    const uint32_t r = b_.value(op::Load, type, {r_var});
    const uint32_t bb = b_.value(op::Load, type, {b_var});
    const uint32_t odd = b_.value(op::INotEqual, bool_, {b_.value(op::BitwiseAnd, type, {e, one}), zero});
    b_.inst(op::Store, {r_var, b_.value(op::Select, type, {odd, b_.value(op::IMul, type, {r, bb}), r})});
    b_.inst(op::Store, {b_var, b_.value(op::IMul, type, {bb, bb})});
    b_.inst(op::Store, {e_var, b_.value(op::ShiftRightArithmetic, type, {e, one})});
    b_.inst(op::Branch, {cont});
    b_.label(cont);
    b_.inst(op::Branch, {header});
    b_.label(merge);
    const uint32_t positive = b_.value(op::Load, type, {r_var});
    // Negative exponents (the loop ran no step).
    const uint32_t even = b_.value(op::IEqual, bool_, {b_.value(op::BitwiseAnd, type, {exponent, one}), zero});
    const uint32_t for_minus_one = b_.value(op::Select, type, {even, one, minus_one});
    uint32_t negative = b_.value(op::Select, type, {b_.value(op::IEqual, bool_, {base, minus_one}), for_minus_one, zero});
    negative = b_.value(op::Select, type, {b_.value(op::IEqual, bool_, {base, one}), one, negative});
    return b_.value(op::Select, type, {b_.value(op::SLessThan, bool_, {exponent, zero}), negative, positive});
  }

  // Cast semantics of docs/SEMANTICS.md.
  absl::StatusOr<uint32_t> convert(uint32_t v, DType from, DType to) {
    if (from == to) return v;
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(to));
    if (to == DType::bool_) {
      if (from == DType::bool_) return v;
      ACCY_ASSIGN_OR_RETURN(uint32_t zero, constant(from, 0));
      return b_.value(tensor::isFloating(from) ? op::FUnordNotEqual : op::INotEqual, bool_, {v, zero});
    }
    if (from == DType::bool_) {
      ACCY_ASSIGN_OR_RETURN(uint32_t one, constant(to, 1));
      ACCY_ASSIGN_OR_RETURN(uint32_t zero, constant(to, 0));
      return b_.value(op::Select, type, {v, one, zero});
    }
    const bool ff = tensor::isFloating(from), tf = tensor::isFloating(to);
    if (ff && tf) return b_.value(op::FConvert, type, {v});
    if (!ff && tf) return b_.value(op::ConvertSToF, type, {v});
    if (!ff && !tf) return b_.value(op::SConvert, type, {v});
    // Float to integer: NaN -> 0, saturating at the range, else truncation.
    const bool i64 = to == DType::i64;
    ACCY_ASSIGN_OR_RETURN(uint32_t lo, constant(from, i64 ? -9223372036854775808.0 : -2147483648.0));
    ACCY_ASSIGN_OR_RETURN(uint32_t hi, constant(from, i64 ? 9223372036854775808.0 : 2147483648.0));
    ACCY_ASSIGN_OR_RETURN(uint32_t fzero, constant(from, 0));
    const uint32_t too_low = b_.value(op::FOrdLessThan, bool_, {v, lo});
    const uint32_t too_high = b_.value(op::FOrdGreaterThanEqual, bool_, {v, hi});
    const uint32_t nan = b_.value(op::IsNan, bool_, {v});
    const uint32_t out_of_range = b_.value(op::LogicalOr, bool_, {b_.value(op::LogicalOr, bool_, {too_low, too_high}), nan});
    const uint32_t safe = b_.value(op::Select, b_.typeFloat(from == DType::f64 ? 64 : 32), {out_of_range, fzero, v});
    const uint32_t converted = b_.value(op::ConvertFToS, type, {safe});
    ACCY_ASSIGN_OR_RETURN(uint32_t min, constant(to, i64 ? -9223372036854775808.0 : -2147483648.0));
    ACCY_ASSIGN_OR_RETURN(uint32_t max, constant(to, i64 ? 9223372036854775807.0 : 2147483647.0));
    ACCY_ASSIGN_OR_RETURN(uint32_t izero, constant(to, 0));
    uint32_t r = b_.value(op::Select, type, {too_low, min, converted});
    r = b_.value(op::Select, type, {too_high, max, r});
    return b_.value(op::Select, type, {nan, izero, r});
  }

  // --- statements ---------------------------------------------------------

  absl::Status store(const Stmt& s) {
    ACCY_ASSIGN_OR_RETURN(uint32_t v, expr(s.value));
    storeElement(s.buffer, s.index, v);
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> identity(OpCode combiner, DType d) {
    return constant(d, choir::combinerIdentity(combiner, d));
  }

  absl::StatusOr<uint32_t> combine(OpCode combiner, DType d, uint32_t acc, uint32_t x) {
    Expr e;
    e.kind = ExprKind::kOp;
    e.op = combiner;
    e.dtype = d;
    auto leaf = std::make_shared<Expr>();
    leaf->dtype = d;
    e.args = {leaf, leaf};
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(d));
    return opValue(e, {acc, x}, type);
  }

  absl::StatusOr<uint32_t> finishMean(const Stmt& s, uint32_t acc) {
    if (s.mean_count == 0) return acc;
    const DType d = m_.buffers[s.buffer].dtype;
    Expr e;
    e.kind = ExprKind::kOp;
    e.op = OpCode::kDiv;
    e.dtype = d;
    auto leaf = std::make_shared<Expr>();
    leaf->dtype = d;
    e.args = {leaf, leaf};
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(d));
    ACCY_ASSIGN_OR_RETURN(uint32_t n, constant(d, static_cast<double>(s.mean_count)));
    return opValue(e, {acc, n}, type);
  }

  // One invocation walks the whole domain.
  absl::Status reduceSerial(const Stmt& s) {
    const DType d = m_.buffers[s.buffer].dtype;
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(d));
    const uint32_t acc = b_.localVariable(b_.typePointer(kFunction, type));
    ACCY_ASSIGN_OR_RETURN(uint32_t id, identity(s.combiner, d));
    b_.inst(op::Store, {acc, id});
    int64_t domain = 1;
    for (const LoopHeader& h : s.domain) domain *= h.extent;
    ACCY_RETURN_IF_ERROR(strided(uconst(0), uconst(static_cast<uint32_t>(domain)), uconst(1), [&](uint32_t r) -> absl::Status {
      decompose(r, s.domain);
      ACCY_ASSIGN_OR_RETURN(uint32_t x, expr(s.value));
      ACCY_ASSIGN_OR_RETURN(uint32_t c, combine(s.combiner, d, b_.value(op::Load, type, {acc}), x));
      b_.inst(op::Store, {acc, c});
      return absl::OkStatus();
    }));
    ACCY_ASSIGN_OR_RETURN(uint32_t result, finishMean(s, b_.value(op::Load, type, {acc})));
    storeElement(s.buffer, s.index, result);
    return absl::OkStatus();
  }

  // The workgroup splits the domain (stride = workgroup size), then a
  // tree in workgroup memory combines the partial results.
  // `start` and `step` give this invocation's first domain point and its
  // stride (by default the local id and the workgroup size); `finish`
  // stores the workgroup's combined value (by default, divided for a mean,
  // to the statement's element).
  absl::Status reduceTree(const Stmt& s, uint32_t start = 0, uint32_t step = 0,
                          std::function<absl::Status(uint32_t)> finish = nullptr) {
    if (start == 0) start = lid_;
    if (step == 0) step = uconst(wg_);
    if (!finish) {
      finish = [&](uint32_t combined) -> absl::Status {
        ACCY_ASSIGN_OR_RETURN(uint32_t result, finishMean(s, combined));
        storeElement(s.buffer, s.index, result);
        return absl::OkStatus();
      };
    }
    const DType d = m_.buffers[s.buffer].dtype;
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(d));
    if (shared_ == 0) {
      const uint32_t array = b_.typeArray(type, uconst(wg_));
      shared_ = b_.globalVariable(b_.typePointer(kWorkgroup, array), kWorkgroup);
      shared_type_ = type;
    }
    auto slot = [&](uint32_t index) {
      return b_.value(op::AccessChain, b_.typePointer(kWorkgroup, shared_type_), {shared_, index});
    };
    const uint32_t acc = b_.localVariable(b_.typePointer(kFunction, type));
    ACCY_ASSIGN_OR_RETURN(uint32_t id, identity(s.combiner, d));
    b_.inst(op::Store, {acc, id});
    int64_t domain = 1;
    for (const LoopHeader& h : s.domain) domain *= h.extent;
    const std::map<int, uint32_t> outer_vars = vars_;
    ACCY_RETURN_IF_ERROR(strided(start, uconst(static_cast<uint32_t>(domain)), step, [&](uint32_t r) -> absl::Status {
      vars_ = outer_vars;
      decompose(r, s.domain);
      ACCY_ASSIGN_OR_RETURN(uint32_t x, expr(s.value));
      ACCY_ASSIGN_OR_RETURN(uint32_t c, combine(s.combiner, d, b_.value(op::Load, type, {acc}), x));
      b_.inst(op::Store, {acc, c});
      return absl::OkStatus();
    }));
    vars_ = outer_vars;
    if (subgroups_) {
      // Each subgroup folds its invocations' values with shuffles (offsets
      // 1, 2, 4, ... below the subgroup size: lane 0 ends with all of
      // them), lane 0 of each subgroup leaves its value in a slot, and
      // invocation 0 folds the slots in subgroup order. Only the
      // SubgroupId / SubgroupLocalInvocationId builtins are relied on, not
      // how the device lays subgroups over the workgroup.
      auto builtin = [&](int i) { return b_.value(op::Load, u32_, {subgroup_vars_[i]}); };
      const uint32_t size = builtin(0), count = builtin(1), id = builtin(2), lane = builtin(3);
      ACCY_RETURN_IF_ERROR(loop(
          uconst(1), size, [&](uint32_t off) { return b_.value(op::ShiftLeftLogical, u32_, {off, uconst(1)}); },
          [&](uint32_t off) -> absl::Status {
            const uint32_t mine = b_.value(op::Load, type, {acc});
            const uint32_t other = b_.value(op::GroupNonUniformShuffleDown, type, {uconst(3 /* Subgroup */), mine, off});
            ACCY_ASSIGN_OR_RETURN(uint32_t c, combine(s.combiner, d, mine, other));
            b_.inst(op::Store, {acc, c});
            return absl::OkStatus();
          },
          /*max_trips=*/8));  // offsets 1 to 64 within a subgroup of at most 128
      ACCY_RETURN_IF_ERROR(when(b_.value(op::IEqual, bool_, {lane, uconst(0)}), [&]() -> absl::Status {
        b_.inst(op::Store, {slot(id), b_.value(op::Load, type, {acc})});
        return absl::OkStatus();
      }));
      barrier();
      ACCY_RETURN_IF_ERROR(when(b_.value(op::IEqual, bool_, {lid_, uconst(0)}), [&]() -> absl::Status {
        b_.inst(op::Store, {acc, b_.value(op::Load, type, {slot(uconst(0))})});
        ACCY_RETURN_IF_ERROR(strided(
            uconst(1), count, uconst(1),
            [&](uint32_t i) -> absl::Status {
              ACCY_ASSIGN_OR_RETURN(uint32_t c, combine(s.combiner, d, b_.value(op::Load, type, {acc}),
                                                        b_.value(op::Load, type, {slot(i)})));
              b_.inst(op::Store, {acc, c});
              return absl::OkStatus();
            },
            /*max_trips=*/wg_));  // one slot per subgroup
        return finish(b_.value(op::Load, type, {acc}));
      }));
    } else {
      b_.inst(op::Store, {slot(lid_), b_.value(op::Load, type, {acc})});
      barrier();
      for (uint32_t half = wg_ / 2; half > 0; half /= 2) {
        ACCY_RETURN_IF_ERROR(when(b_.value(op::ULessThan, bool_, {lid_, uconst(half)}), [&]() -> absl::Status {
          const uint32_t mine = b_.value(op::Load, type, {slot(lid_)});
          const uint32_t other = b_.value(op::Load, type, {slot(b_.value(op::IAdd, u32_, {lid_, uconst(half)}))});
          ACCY_ASSIGN_OR_RETURN(uint32_t c, combine(s.combiner, d, mine, other));
          b_.inst(op::Store, {slot(lid_), c});
          return absl::OkStatus();
        }));
        barrier();
      }
      ACCY_RETURN_IF_ERROR(when(b_.value(op::IEqual, bool_, {lid_, uconst(0)}), [&]() -> absl::Status {
        return finish(b_.value(op::Load, type, {slot(uconst(0))}));
      }));
    }
    barrier();  // the slots are reused by the next output
    return absl::OkStatus();
  }

  // A TR x TR block of outputs per workgroup (T x T invocations, each with
  // R x R outputs: rows ty + i T, columns tx + j T), grid-stride over blocks
  // and batch points. For each T-long slice of the domain the invocations
  // stage lhs (TR rows x T points) and rhs (T points x TR columns) in
  // workgroup memory (guarded at the edges), then each accumulates its
  // outputs over the slice in domain order: the same sequence of operations
  // as a serial reduction (passes/gpu_map.h).
  absl::StatusOr<int64_t> tiledProduct(const choir::GpuNest& g) {
    const Stmt& s = *g.leaf;
    const DType d = m_.buffers[s.buffer].dtype;
    ACCY_ASSIGN_OR_RETURN(uint32_t type, scalarType(d));
    const int64_t tile = g.tile, micro = g.micro, edge = g.tile * g.micro;
    const LoopHeader& row = g.loops[g.row];
    const LoopHeader& col = g.loops[g.col];
    const LoopHeader& k = s.domain[0];
    const int64_t row_tiles = (row.extent + edge - 1) / edge, col_tiles = (col.extent + edge - 1) / edge;
    std::vector<LoopHeader> batch;
    int64_t blocks = row_tiles * col_tiles;
    for (int i : g.batch) {
      batch.push_back(g.loops[i]);
      blocks *= g.loops[i].extent;
    }
    if (blocks > INT32_MAX) return unimplemented(strCat("kernel ", k_.name, " has more than 2^31 tiles"));
    const int64_t workgroups = std::max<int64_t>(1, std::min<int64_t>(blocks, t_.max_workgroup_count));
    // lhs[r * T + p] for r < TR rows, p < T points; rhs[p * TR + c].
    const uint32_t tile_array = b_.typeArray(type, uconst(static_cast<uint32_t>(edge * tile)));
    const uint32_t lhs_tile = b_.globalVariable(b_.typePointer(kWorkgroup, tile_array), kWorkgroup);
    const uint32_t rhs_tile = b_.globalVariable(b_.typePointer(kWorkgroup, tile_array), kWorkgroup);
    auto at = [&](uint32_t array, uint32_t index) {
      return b_.value(op::AccessChain, b_.typePointer(kWorkgroup, type), {array, index});
    };
    auto add = [&](uint32_t a, uint32_t b) { return b_.value(op::IAdd, u32_, {a, b}); };
    auto mul = [&](uint32_t a, uint32_t b) { return b_.value(op::IMul, u32_, {a, b}); };
    auto plus = [&](uint32_t a, int64_t n) { return n == 0 ? a : add(a, uconst(static_cast<uint32_t>(n))); };
    auto less = [&](uint32_t a, int64_t n) { return b_.value(op::ULessThan, bool_, {a, uconst(static_cast<uint32_t>(n))}); };
    auto both = [&](uint32_t a, uint32_t b) { return b_.value(op::LogicalAnd, bool_, {a, b}); };
    const uint32_t t = uconst(static_cast<uint32_t>(tile)), tr_edge = uconst(static_cast<uint32_t>(edge));
    const uint32_t ty = b_.value(op::UDiv, u32_, {lid_, t}), tx = b_.value(op::UMod, u32_, {lid_, t});
    std::vector<uint32_t> acc(static_cast<size_t>(micro * micro));
    for (uint32_t& a : acc) a = b_.localVariable(b_.typePointer(kFunction, type));
    ACCY_RETURN_IF_ERROR(strided(group_, uconst(static_cast<uint32_t>(blocks)), uconst(static_cast<uint32_t>(workgroups)),
                                 [&](uint32_t block) -> absl::Status {
      const uint32_t tc = b_.value(op::UMod, u32_, {block, uconst(static_cast<uint32_t>(col_tiles))});
      const uint32_t rest = b_.value(op::UDiv, u32_, {block, uconst(static_cast<uint32_t>(col_tiles))});
      const uint32_t tr = b_.value(op::UMod, u32_, {rest, uconst(static_cast<uint32_t>(row_tiles))});
      decompose(b_.value(op::UDiv, u32_, {rest, uconst(static_cast<uint32_t>(row_tiles))}), batch);
      // This invocation's first row and column; the others are T apart.
      const uint32_t r = add(mul(tr, tr_edge), ty), c = add(mul(tc, tr_edge), tx);
      ACCY_ASSIGN_OR_RETURN(uint32_t zero, identity(OpCode::kAdd, d));
      for (uint32_t a : acc) b_.inst(op::Store, {a, zero});
      ACCY_RETURN_IF_ERROR(strided(uconst(0), uconst(static_cast<uint32_t>(k.extent)), t, [&](uint32_t k0) -> absl::Status {
        for (int64_t i = 0; i < micro; ++i) {
          // lhs row ty + i T of the block, point k0 + tx.
          vars_[row.var] = plus(r, i * tile);
          vars_[k.var] = add(k0, tx);
          ACCY_RETURN_IF_ERROR(
              when(both(less(vars_[row.var], row.extent), less(vars_[k.var], k.extent)), [&]() -> absl::Status {
                ACCY_ASSIGN_OR_RETURN(uint32_t v, expr(g.lhs));
                b_.inst(op::Store, {at(lhs_tile, add(mul(plus(ty, i * tile), t), tx)), v});
                return absl::OkStatus();
              }));
        }
        for (int64_t j = 0; j < micro; ++j) {
          // rhs point k0 + ty, column tx + j T of the block.
          vars_[k.var] = add(k0, ty);
          vars_[col.var] = plus(c, j * tile);
          ACCY_RETURN_IF_ERROR(
              when(both(less(vars_[k.var], k.extent), less(vars_[col.var], col.extent)), [&]() -> absl::Status {
                ACCY_ASSIGN_OR_RETURN(uint32_t v, expr(g.rhs));
                b_.inst(op::Store, {at(rhs_tile, add(mul(ty, tr_edge), plus(tx, j * tile))), v});
                return absl::OkStatus();
              }));
        }
        barrier();
        // Only the slice's real points: nothing padded enters the sum.
        const uint32_t left = b_.value(op::ISub, u32_, {uconst(static_cast<uint32_t>(k.extent)), k0});
        const uint32_t n = b_.value(op::Select, u32_, {b_.value(op::ULessThan, bool_, {left, t}), left, t});
        ACCY_RETURN_IF_ERROR(strided(
            uconst(0), n, uconst(1),
            [&](uint32_t kk) -> absl::Status {
          std::vector<uint32_t> a(static_cast<size_t>(micro)), bv(static_cast<size_t>(micro));
          for (int64_t i = 0; i < micro; ++i) {
            a[i] = b_.value(op::Load, type, {at(lhs_tile, add(mul(plus(ty, i * tile), t), kk))});
          }
          for (int64_t j = 0; j < micro; ++j) {
            bv[j] = b_.value(op::Load, type, {at(rhs_tile, add(mul(kk, tr_edge), plus(tx, j * tile)))});
          }
          for (int64_t i = 0; i < micro; ++i) {
            for (int64_t j = 0; j < micro; ++j) {
              const uint32_t cell = acc[static_cast<size_t>(i * micro + j)];
              ACCY_ASSIGN_OR_RETURN(uint32_t p, combine(OpCode::kMul, d, a[i], bv[j]));
              ACCY_ASSIGN_OR_RETURN(uint32_t sum, combine(OpCode::kAdd, d, b_.value(op::Load, type, {cell}), p));
              b_.inst(op::Store, {cell, sum});
            }
          }
          return absl::OkStatus();
        },
        /*max_trips=*/tile));  // the slice's points
        barrier();  // the tiles are refilled next slice
        return absl::OkStatus();
      }));
      for (int64_t i = 0; i < micro; ++i) {
        for (int64_t j = 0; j < micro; ++j) {
          vars_[row.var] = plus(r, i * tile);
          vars_[col.var] = plus(c, j * tile);
          ACCY_RETURN_IF_ERROR(
              when(both(less(vars_[row.var], row.extent), less(vars_[col.var], col.extent)), [&]() -> absl::Status {
                ACCY_ASSIGN_OR_RETURN(uint32_t result,
                                      finishMean(s, b_.value(op::Load, type, {acc[static_cast<size_t>(i * micro + j)]})));
                storeElement(s.buffer, s.index, result);
                return absl::OkStatus();
              }));
        }
      }
      return absl::OkStatus();
    }));
    return workgroups;
  }

  // A variable id no loop uses, for indices computed here (partials).
  static constexpr int kPartVar = -2;

  const choir::Module& m_;
  const choir::Kernel& k_;
  const TargetInfo& t_;
  ModuleBuilder b_;
  uint32_t u32_ = 0, i32_ = 0, bool_ = 0, wg_ = 1;
  uint32_t global_id_var_ = 0, local_id_var_ = 0, group_id_var_ = 0, gid_ = 0, lid_ = 0, group_ = 0;
  uint32_t shared_ = 0, shared_type_ = 0;
  bool subgroups_ = false;
  uint32_t subgroup_vars_[4] = {};  // SubgroupSize, NumSubgroups, SubgroupId, SubgroupLocalInvocationId
  std::vector<uint32_t> buffer_vars_;
  std::vector<uint32_t> elem_types_;  // storage element type per buffer (u8 for bool buffers)
  std::map<int, uint32_t> vars_;
  // Common subexpressions: value number -> SPIR-V id, for the values that
  // dominate the current point. A scope (a loop body, a guarded block)
  // forgets on exit what it added, by the log, at the cost of what it added.
  choir::ValueNumbering numbers_;
  absl::flat_hash_map<int, uint32_t> cse_;
  std::vector<int> cse_log_;
  void remember(int k, uint32_t v) {
    cse_.emplace(k, v);
    cse_log_.push_back(k);
  }
  void forgetSince(size_t mark) {
    while (cse_log_.size() > mark) {
      cse_.erase(cse_log_.back());
      cse_log_.pop_back();
    }
  }
  std::map<uint32_t, uint32_t> uconst_values_;  // id of each uconst -> its value
  int64_t trips_multiplier_ = 1;                // iterations of the loops being emitted, multiplied
  int64_t loop_trips_ = 0;                      // loop iterations one invocation may run, all loops together
};

}  // namespace

absl::StatusOr<TranslatedKernel> translateKernel(const choir::Module& module, const choir::Kernel& kernel,
                                                 const TargetInfo& target) {
  return Translator(module, kernel, target).run();
}

}  // namespace accy::spirv
