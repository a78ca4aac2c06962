// PTX as a target of the one GPU kernel emitter (compiler/codegen/gpu):
// virtual registers, the primitives as PTX instructions, the `.entry`
// framing, and tensor cores (mma.sync) as the tiled product's engine in
// mode tf32.
#include "compiler/codegen/ptx/target.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <memory>
#include <string>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/codegen/gpu/kernel_emitter.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/ptx/emitter.h"
#include "compiler/codegen/ptx/ptx_ops.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::ptx {
namespace {

using choir::DType;
using choir::GpuForm;
using choir::OpCode;
using gpu::Value;

RegClass classOf(DType d) {
  switch (d) {
    case DType::f32:
      return RegClass::kF32;
    case DType::f64:
      return RegClass::kF64;
    case DType::i32:
    case DType::u32:
      return RegClass::kB32;
    case DType::i64:
      return RegClass::kB64;
    case DType::bool_:
      return RegClass::kPred;
  }
  return RegClass::kB32;
}

// The instruction type of arithmetic on `d`.
const char* ptype(DType d) {
  switch (d) {
    case DType::f32:
      return ".f32";
    case DType::f64:
      return ".f64";
    case DType::i32:
      return ".s32";
    case DType::u32:
      return ".u32";
    case DType::i64:
      return ".s64";
    case DType::bool_:
      return ".pred";
  }
  return "?";
}

bool wide64(DType d) { return d == DType::f64 || d == DType::i64; }
// The move type of a value of `d`.
const char* moveType(DType d) { return d == DType::bool_ ? ".pred" : wide64(d) ? ".b64" : ".b32"; }

const float kLog2E = 1.44269504088896341f;
const float kLn2 = 0.693147180559945309f;

bool validName(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

class PtxTarget final : public gpu::Target {
 public:
  PtxTarget(const choir::Module& m, const choir::Kernel& k, const TargetInfo& t) : m_(m), k_(k), t_(t) {
    desc_.name = "PTX";
    desc_.max_workgroup_size = t.max_threads_per_block;
    desc_.max_workgroups = t.max_grid_x;
    desc_.subgroups = gpu::Subgroups::kFixed;
    desc_.subgroup_size = static_cast<int>(t.warp_size);
    desc_.workgroup_memory_bytes = 48 * 1024;
    desc_.index64 = true;
    desc_.modes = {ArithmeticMode::kExact, ArithmeticMode::kFast, ArithmeticMode::kTf32};
    desc_.mode = t.mode;
    desc_.nested_domain_loops = true;  // no division per point
    desc_.unrolled_slices = true;
    names_.emplace_back();  // handle 0: none
  }

  const gpu::TargetDesc& desc() const override { return desc_; }

  absl::Status begin(const gpu::KernelPlan& plan) override {
    wide_ = plan.wide;
    wg_ = plan.workgroup_size;
    base_.assign(m_.buffers.size(), "");
    for (int buf : plan.used_buffers) {
      const std::string p = e_.reg(RegClass::kB64), g = e_.reg(RegClass::kB64);
      e_.ins("ld.param.u64 ", p, ", [", param(buf), "]");
      e_.ins("cvta.to.global.u64 ", g, ", ", p);
      base_[buf] = g;
    }
    tid_ = e_.reg(RegClass::kB32);
    ctaid_ = e_.reg(RegClass::kB32);
    nctaid_ = e_.reg(RegClass::kB32);
    e_.ins("mov.u32 ", tid_, ", %tid.x");
    e_.ins("mov.u32 ", ctaid_, ", %ctaid.x");
    e_.ins("mov.u32 ", nctaid_, ", %nctaid.x");
    lid_ = handle(idxOf(tid_));
    group_ = handle(idxOf(ctaid_));
    return absl::OkStatus();
  }

  // The `.visible .entry` of the emitted kernel.
  std::string entry(const gpu::EmittedKernel& k, bool tf32) const {
    std::string text;
    strAppend(&text, "// kernel ", k_.name, ": ", choir::gpuFormName(k.nest.form), tf32 ? " on tensor cores (tf32)" : "",
              ", ", wg_, " threads per block", wide_ ? ", 64-bit indices" : "", "\n");
    strAppend(&text, ".visible .entry ", k_.name, "(\n");
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      strAppend(&text, "\t.param .u64 ", param(static_cast<int>(b)), b + 1 < m_.buffers.size() ? ",\n" : "\n");
    }
    strAppend(&text, ")\n.reqntid ", wg_, "\n{\n", e_.declarations());
    if (shared_bytes_ > 0) strAppend(&text, "\t.shared .align 8 .b8 ", sharedName(), "[", shared_bytes_, "];\n");
    strAppend(&text, "\n", e_.body(), "\tret;\n}\n");
    return text;
  }
  int minPtx() const { return min_ptx_; }
  int minSm() const { return min_sm_; }
  void need(int ptx, int sm) {
    min_ptx_ = std::max(min_ptx_, ptx);
    min_sm_ = std::max(min_sm_, sm);
  }
  Emitter& emitter() { return e_; }

  // --- values ---------------------------------------------------------------

  Value constant(DType d, double v) override {
    const double c = tensor::convertValue(v, DType::f64, d);
    const std::string r = e_.reg(classOf(d));
    switch (d) {
      case DType::f32:
        e_.ins("mov.f32 ", r, ", ", f32Literal(static_cast<float>(c)));
        break;
      case DType::f64:
        e_.ins("mov.f64 ", r, ", ", f64Literal(c));
        break;
      case DType::i32:
      case DType::u32:
        e_.ins("mov.b32 ", r, ", ", static_cast<int32_t>(static_cast<uint32_t>(tensor::toInt64(c))));
        break;
      case DType::i64:
        e_.ins("mov.b64 ", r, ", ", absl::StrFormat("0x%016X", static_cast<uint64_t>(tensor::toInt64(c))));
        break;
      case DType::bool_:
        e_.ins("mov.pred ", r, ", ", c != 0 ? 1 : 0);
        break;
    }
    return handle(r);
  }

  Value arith(gpu::Arith op, DType d, Value a, Value b) override {
    const bool flt = tensor::isFloating(d);
    static constexpr const char* kFloat[] = {"add.rn", "sub.rn", "mul.rn", "div.rn"};
    static constexpr const char* kInt[] = {"add", "sub", "mul.lo", "div"};
    const int i = static_cast<int>(op);
    return emit(classOf(d), flt ? kFloat[i] : kInt[i], ptype(d), " ", "%d, ", n(a), ", ", n(b));
  }
  // neg has no unsigned form: u32 negates as s32 (the same bits).
  Value negate(DType d, Value a) override {
    return emit(classOf(d), "neg", d == DType::u32 ? ".s32" : ptype(d), " %d, ", n(a));
  }
  Value absFloat(DType d, Value a) override { return emit(classOf(d), "abs", ptype(d), " %d, ", n(a)); }
  Value sqrt(DType d, Value a) override { return emit(classOf(d), "sqrt.rn", ptype(d), " %d, ", n(a)); }

  Value compare(gpu::Cmp c, DType d, Value a, Value b) override {
    static constexpr const char* kOps[] = {"lt", "le", "gt", "ge", "eq", "ne"};
    const char* name = c == gpu::Cmp::kNe && tensor::isFloating(d) ? "neu" : kOps[static_cast<int>(c)];
    return predicate(name, ptype(d), n(a), n(b));
  }
  Value isNan(DType d, Value a) override { return predicate("nan", ptype(d), n(a), n(a)); }
  Value select(DType d, Value c, Value yes, Value no) override {
    if (d == DType::bool_) {
      const std::string a = e_.reg(RegClass::kPred), nc = e_.reg(RegClass::kPred), b = e_.reg(RegClass::kPred),
                        r = e_.reg(RegClass::kPred);
      e_.ins("and.pred ", a, ", ", n(c), ", ", n(yes));
      e_.ins("not.pred ", nc, ", ", n(c));
      e_.ins("and.pred ", b, ", ", nc, ", ", n(no));
      e_.ins("or.pred ", r, ", ", a, ", ", b);
      return handle(r);
    }
    return emit(classOf(d), "selp", ptype(d), " %d, ", n(yes), ", ", n(no), ", ", n(c));
  }
  Value logicAnd(Value a, Value b) override { return emit(RegClass::kPred, "and.pred %d, ", n(a), ", ", n(b)); }
  Value logicOr(Value a, Value b) override { return emit(RegClass::kPred, "or.pred %d, ", n(a), ", ", n(b)); }
  Value bitAnd(DType d, Value a, Value b) override {
    return emit(classOf(d), "and", wide64(d) ? ".b64" : ".b32", " %d, ", n(a), ", ", n(b));
  }
  Value bitOr(DType d, Value a, Value b) override {
    return emit(classOf(d), "or", wide64(d) ? ".b64" : ".b32", " %d, ", n(a), ", ", n(b));
  }
  Value bitXor(DType d, Value a, Value b) override {
    return emit(classOf(d), "xor", wide64(d) ? ".b64" : ".b32", " %d, ", n(a), ", ", n(b));
  }
  // shr.s32/.s64 is arithmetic, shr.u32 logical.
  Value shiftRight(DType d, Value a, int bits) override {
    return emit(classOf(d), "shr", ptype(d), " %d, ", n(a), ", ", bits);
  }
  // The count of a PTX shift is a .u32 register.
  Value shiftLeftBy(DType d, Value a, Value count) override {
    return emit(classOf(d), "shl", wide64(d) ? ".b64" : ".b32", " %d, ", n(a), ", ", shiftCount(d, count));
  }
  Value shiftRightBy(DType d, Value a, Value count) override {
    return emit(classOf(d), "shr", ptype(d), " %d, ", n(a), ", ", shiftCount(d, count));
  }
  // mov between a float register and a bit register of its width.
  Value bitcast(DType, DType to, Value v) override { return emit(classOf(to), "mov", moveType(to), " %d, ", n(v)); }
  Value convert(DType from, DType to, Value v) override {
    const bool ff = tensor::isFloating(from), tf = tensor::isFloating(to);
    if (ff && tf) return emit(classOf(to), to == DType::f32 ? "cvt.rn.f32.f64 %d, " : "cvt.f64.f32 %d, ", n(v));
    if (!ff && tf) return emit(classOf(to), "cvt.rn", ptype(to), ptype(from), " %d, ", n(v));
    // i32 -> i64 sign-extends, u32 -> i64 zero-extends; i64 -> i32 or u32
    // keeps the low 32 bits (wraps); i32 <-> u32 keeps the bits.
    if (!ff && !tf) {
      if (to == DType::i64) return emit(classOf(to), from == DType::u32 ? "cvt.u64.u32 %d, " : "cvt.s64.s32 %d, ", n(v));
      if (from == DType::i64) return emit(classOf(to), "cvt.u32.u64 %d, ", n(v));
      return emit(classOf(to), "mov.b32 %d, ", n(v));
    }
    return emit(classOf(to), "cvt.rzi", ptype(to), ptype(from), " %d, ", n(v));
  }

  Value exactMath(OpCode op, DType d, Value x, Value y) override {
    PtxOps o(e_, d == DType::f64);
    if (std::optional<std::string> v = codegen::elementaryOf(o, op, n(x), y != 0 ? n(y) : n(x))) return handle(*v);
    fail(makeError(ErrorKind::kUnimplemented, strCat("PTX emitter: op ", tensor::opName(op))));
    return x;
  }

  // The hardware approximations (f32 only: PTX has no f64 ones).
  Value fastMath(OpCode op, DType d, Value x, Value) override {
    if (d != DType::f32) return 0;
    auto approx = [&](const char* inst, const std::string& v) { return emitText(RegClass::kF32, inst, " %d, ", v); };
    auto scaled = [&](const std::string& v, float k) {
      const std::string c = emitText(RegClass::kF32, "mov.f32 %d, ", f32Literal(k));
      return emitText(RegClass::kF32, "mul.rn.f32 %d, ", v, ", ", c);
    };
    // The fast forms PTX has; any other op keeps its exact sequence.
    if (op == OpCode::kSin) return handle(approx("sin.approx.f32", n(x)));
    if (op == OpCode::kCos) return handle(approx("cos.approx.f32", n(x)));
    if (op == OpCode::kExp) return handle(approx("ex2.approx.f32", scaled(n(x), kLog2E)));
    if (op == OpCode::kLog) return handle(scaled(approx("lg2.approx.f32", n(x)), kLn2));
    // Rounding to integers in one instruction (exact, as the composed form).
    if (op == OpCode::kFloor) return handle(approx("cvt.rmi.f32.f32", n(x)));
    if (op == OpCode::kCeil) return handle(approx("cvt.rpi.f32.f32", n(x)));
    if (op == OpCode::kRound) return handle(approx("cvt.rni.f32.f32", n(x)));
    if (op == OpCode::kTanh) {
      if (t_.sm < 75) return 0;
      need(70, 75);
      return handle(approx("tanh.approx.f32", n(x)));
    }
    if (op == OpCode::kSigmoid) {
      // 1 / (1 + 2^(-x log2 e)); the division is div.rn.
      const std::string e = approx("ex2.approx.f32", scaled(n(x), -kLog2E));
      const std::string one = emitText(RegClass::kF32, "mov.f32 %d, ", f32Literal(1.0f));
      const std::string sum = emitText(RegClass::kF32, "add.rn.f32 %d, ", one, ", ", e);
      return handle(emitText(RegClass::kF32, "div.rn.f32 %d, ", one, ", ", sum));
    }
    return 0;
  }

  // --- indices --------------------------------------------------------------

  Value index(int64_t v) override { return handle(imm(v)); }
  Value indexAdd(Value a, Value b) override { return emitIdx("add", st(), " %d, ", reg(a), ", ", n(b)); }
  Value indexMul(Value a, int64_t c) override { return emitIdx("mul.lo", st(), " %d, ", reg(a), ", ", imm(c)); }
  Value indexMulAdd(Value a, int64_t c, Value b) override {
    return emitIdx("mad.lo", st(), " %d, ", reg(a), ", ", imm(c), ", ", n(b));
  }
  Value indexDiv(Value a, int64_t c) override { return emitIdx("div", ut(), " %d, ", reg(a), ", ", imm(c)); }
  Value indexRem(Value a, int64_t c) override { return emitIdx("rem", ut(), " %d, ", reg(a), ", ", imm(c)); }
  Value indexSub(Value a, Value b) override { return emitIdx("sub", st(), " %d, ", reg(a), ", ", n(b)); }
  Value indexMin(Value a, Value b) override { return emitIdx("min", ut(), " %d, ", reg(a), ", ", n(b)); }
  Value indexLess(Value a, Value b) override { return predicate("lt", ut(), reg(a), n(b)); }
  Value indexEq(Value a, Value b) override { return predicate("eq", ut(), reg(a), n(b)); }
  Value indexAsInt(Value i, DType* as) override {
    *as = wide_ ? DType::i64 : DType::i32;
    return handle(reg(i));
  }
  Value intAsIndex(Value i) override { return handle(reg(i)); }

  // --- builtins -------------------------------------------------------------

  Value localId() override { return lid_; }
  Value groupId() override { return group_; }
  Value globalId() override {
    if (!wide_) return emit(RegClass::kB32, "mad.lo.u32 %d, ", ctaid_, ", ", wg_, ", ", tid_);
    const std::string gid = emitText(RegClass::kB64, "mul.wide.u32 %d, ", ctaid_, ", ", wg_);
    return emit(RegClass::kB64, "add.u64 %d, ", gid, ", ", n(lid_));
  }
  Value groupCount(int64_t) override { return handle(idxOf(nctaid_)); }
  Value invocationCount(int64_t) override {
    return emit(idxClass(), wide_ ? "mul.wide.u32 %d, " : "mul.lo.u32 %d, ", nctaid_, ", ", wg_);
  }

  // --- memory ---------------------------------------------------------------

  // Bool buffers hold one byte per element, 0 or 1; bool values live in
  // predicates.
  Value load(int buffer, Value flat) override {
    const choir::Buffer& buf = m_.buffers[buffer];
    const char* space = buf.role == choir::BufferRole::kInput ? "ld.global.nc" : "ld.global";
    const std::string addr = address(buffer, flat);
    if (buf.dtype == DType::bool_) {
      const std::string byte = emitText(RegClass::kB32, space, ".u8 %d, ", addr);
      return predicate("ne", ".u32", byte, "0");
    }
    return emit(classOf(buf.dtype), space, ptype(buf.dtype), " %d, ", addr);
  }
  void store(int buffer, Value flat, Value v) override {
    const choir::Buffer& buf = m_.buffers[buffer];
    const std::string addr = address(buffer, flat);
    if (buf.dtype == DType::bool_) {
      const std::string byte = emitText(RegClass::kB32, "selp.u32 %d, 1, 0, ", n(v));
      e_.ins("st.global.u8 ", addr, ", ", byte);
      return;
    }
    e_.ins("st.global", ptype(buf.dtype), " ", addr, ", ", n(v));
  }

  // One `.shared` block per kernel; arrays at 8-byte-aligned offsets. Bool
  // values take 32-bit 0/1 words.
  gpu::SharedArray sharedArray(DType d, int64_t count) override {
    shared_offsets_.push_back(shared_bytes_);
    shared_bytes_ += (count * elemBytes(d) + 7) / 8 * 8;
    return {static_cast<int>(shared_offsets_.size()) - 1, d, count};
  }
  // The 32-bit shared-window address of element 0 of `a`.
  std::string sharedBase(const gpu::SharedArray& a) {
    const std::string base = emitText(RegClass::kB32, "mov.u32 %d, ", sharedName());
    const int64_t offset = shared_offsets_[static_cast<size_t>(a.id)];
    return offset == 0 ? base : emitText(RegClass::kB32, "add.u32 %d, ", base, ", ", offset);
  }
  // "[address]" of a[i + plus].
  std::string sharedAddress(const gpu::SharedArray& a, Value i, int64_t plus) {
    const int64_t eb = elemBytes(a.dtype);
    const std::string base = sharedBase(a);
    if (!isRegister(n(i))) return strCat("[", base, "+", (std::stoll(n(i)) + plus) * eb, "]");
    std::string i32 = n(i);
    if (wide_) i32 = emitText(RegClass::kB32, "cvt.u32.u64 %d, ", i32);
    const std::string addr = emitText(RegClass::kB32, "mad.lo.u32 %d, ", i32, ", ", eb, ", ", base);
    return plus == 0 ? strCat("[", addr, "]") : strCat("[", addr, "+", plus * eb, "]");
  }
  Value sharedLoad(const gpu::SharedArray& a, Value i, int64_t plus) override {
    const std::string addr = sharedAddress(a, i, plus);
    if (a.dtype == DType::bool_) {
      const std::string w = emitText(RegClass::kB32, "ld.shared.u32 %d, ", addr);
      return predicate("ne", ".u32", w, "0");
    }
    return emit(classOf(a.dtype), "ld.shared", ptype(a.dtype), " %d, ", addr);
  }
  void sharedStore(const gpu::SharedArray& a, Value i, int64_t plus, Value v) override {
    const std::string addr = sharedAddress(a, i, plus);
    if (a.dtype == DType::bool_) {
      const std::string w = emitText(RegClass::kB32, "selp.u32 %d, 1, 0, ", n(v));
      e_.ins("st.shared.u32 ", addr, ", ", w);
      return;
    }
    e_.ins("st.shared", ptype(a.dtype), " ", addr, ", ", n(v));
  }
  // A TF32-rounded f32 (mma's operands).
  void sharedStoreTf32(const gpu::SharedArray& a, Value i, int64_t plus, Value v) {
    const std::string t32 = emitText(RegClass::kB32, "cvt.rna.tf32.f32 %d, ", n(v));
    e_.ins("st.shared.b32 ", sharedAddress(a, i, plus), ", ", t32);
  }
  void barrier() override { e_.op("bar.sync 0"); }

  // --- variables: registers updated in place ------------------------------------

  Value variable(DType d, Value init) override { return emit(classOf(d), "mov", moveType(d), " %d, ", n(init)); }
  Value read(DType, Value var) override { return var; }
  void write(DType d, Value var, Value v) override { e_.ins("mov", moveType(d), " ", n(var), ", ", n(v)); }

  // --- control flow -------------------------------------------------------------

  absl::Status strided(Value start, Value limit, Value step, const IndexBody& body, int64_t) override {
    return countedLoop(start, limit, body, [&](const std::string& x) { e_.ins("add", ut(), " ", x, ", ", x, ", ", n(step)); });
  }
  absl::Status doubling(Value start, Value limit, const IndexBody& body, int64_t) override {
    return countedLoop(start, limit, body, [&](const std::string& x) { e_.ins("shl", bt(), " ", x, ", ", x, ", 1"); });
  }
  absl::Status loopWhile(const std::function<Value()>& cond, const Body& body, int64_t) override {
    const std::string head = e_.label(), done = e_.label();
    e_.place(head);
    e_.ins("@!", n(cond()), " bra ", done);
    ACCY_RETURN_IF_ERROR(body());
    e_.ins("bra ", head);
    e_.place(done);
    return absl::OkStatus();
  }
  absl::Status when(Value cond, const Body& body) override {
    const std::string skip = e_.label();
    e_.ins("@!", n(cond), " bra ", skip);
    ACCY_RETURN_IF_ERROR(body());
    e_.place(skip);
    return absl::OkStatus();
  }

  // --- warps ----------------------------------------------------------------------

  // The value of `v` in lane (lane + offset) of the warp (its own beyond the
  // last lane); 64-bit values move as two halves.
  Value shuffleDown(DType d, Value v, Value offset, int64_t lanes) override {
    const std::string mask = lanes >= 32 ? "-1" : strCat((int64_t{1} << lanes) - 1);
    auto shfl = [&](const std::string& x) {
      return emitText(RegClass::kB32, "shfl.sync.down.b32 %d, ", x, ", ", n(offset), ", 31, ", mask);
    };
    if (d == DType::bool_) {
      const std::string w = emitText(RegClass::kB32, "selp.u32 %d, 1, 0, ", n(v));
      return predicate("ne", ".u32", shfl(w), "0");
    }
    if (wide64(d)) {
      const std::string lo = e_.reg(RegClass::kB32), hi = e_.reg(RegClass::kB32);
      e_.ins("mov.b64 {", lo, ", ", hi, "}, ", n(v));
      const std::string slo = shfl(lo), shi = shfl(hi);
      return emit(classOf(d), "mov.b64 %d, {", slo, ", ", shi, "}");
    }
    const std::string w = emitText(RegClass::kB32, "mov.b32 %d, ", n(v));
    return emit(classOf(d), "mov.b32 %d, ", shfl(w));
  }
  Value subgroupBuiltin(int) override {
    fail(makeError(ErrorKind::kCompileFailed, "PTX emitter: warps have a fixed size; no subgroup builtins"));
    return lid_;
  }

  // --- handles ----------------------------------------------------------------------

  const std::string& n(Value v) const { return names_[v]; }
  Value handle(std::string name) {
    names_.push_back(std::move(name));
    return static_cast<Value>(names_.size() - 1);
  }
  std::string idxOf(const std::string& r32) {
    if (!wide_) return r32;
    return emitText(RegClass::kB64, "cvt.u64.u32 %d, ", r32);
  }
  const char* st() const { return wide_ ? ".s64" : ".s32"; }

 private:
  static bool isRegister(const std::string& s) { return !s.empty() && s[0] == '%'; }
  std::string param(int b) const { return strCat(k_.name, "_param_", b); }
  std::string sharedName() const { return strCat(k_.name, "_smem"); }
  static int64_t elemBytes(DType d) { return wide64(d) ? 8 : 4; }  // bool as a 32-bit 0/1 word

  RegClass idxClass() const { return wide_ ? RegClass::kB64 : RegClass::kB32; }
  const char* ut() const { return wide_ ? ".u64" : ".u32"; }
  const char* bt() const { return wide_ ? ".b64" : ".b32"; }
  std::string imm(int64_t v) const {
    return wide_ ? strCat(v) : strCat(static_cast<int32_t>(static_cast<uint32_t>(v)));
  }
  // `v` in a register (an immediate is moved into one).
  std::string reg(Value v) {
    if (isRegister(n(v))) return n(v);
    return emitText(idxClass(), "mov", bt(), " %d, ", n(v));
  }

  // One instruction defining a fresh register of class `c`: the parts are
  // concatenated, "%d" standing for the register.
    // A shift count (in [0, width)) as the .u32 register PTX shifts take.
  std::string shiftCount(DType d, Value count) {
    if (!wide64(d)) return n(count);
    return emitText(RegClass::kB32, "cvt.u32.u64 %d, ", n(count));
  }
template <typename... Args>
  std::string emitText(RegClass c, const Args&... parts) {
    const std::string r = e_.reg(c);
    std::string text = strCat(parts...);
    const size_t at = text.find("%d");
    text.replace(at, 2, r);
    e_.op(text);
    return r;
  }
  template <typename... Args>
  Value emit(RegClass c, const Args&... parts) {
    return handle(emitText(c, parts...));
  }
  template <typename... Args>
  Value emitIdx(const Args&... parts) {
    return emit(idxClass(), parts...);
  }
  Value predicate(const char* cmp, const char* type, const std::string& a, const std::string& b) {
    return emit(RegClass::kPred, "setp.", cmp, type, " %d, ", a, ", ", b);
  }

  // for (x = start; x < limit; advance(x)) body(x), on an index register.
  absl::Status countedLoop(Value start, Value limit, const IndexBody& body,
                           const std::function<void(const std::string&)>& advance) {
    const std::string x = e_.reg(idxClass());
    e_.ins("mov", bt(), " ", x, ", ", n(start));
    const std::string head = e_.label(), done = e_.label();
    e_.place(head);
    const std::string p = n(predicate("ge", ut(), x, n(limit)));
    e_.ins("@", p, " bra ", done);
    ACCY_RETURN_IF_ERROR(body(handle(x)));
    advance(x);
    e_.ins("bra ", head);
    e_.place(done);
    return absl::OkStatus();
  }

  // "[address]" of buffer[flat].
  std::string address(int buffer, Value flat) {
    const int64_t size = tensor::dtypeSize(m_.buffers[buffer].dtype);
    if (!isRegister(n(flat))) return strCat("[", base_[buffer], "+", std::stoll(n(flat)) * size, "]");
    const std::string off = wide_ ? emitText(RegClass::kB64, "mul.lo.s64 %d, ", n(flat), ", ", size)
                                  : emitText(RegClass::kB64, "mul.wide.u32 %d, ", n(flat), ", ", size);
    return strCat("[", emitText(RegClass::kB64, "add.s64 %d, ", base_[buffer], ", ", off), "]");
  }

  const choir::Module& m_;
  const choir::Kernel& k_;
  const TargetInfo& t_;
  gpu::TargetDesc desc_;
  Emitter e_;
  std::deque<std::string> names_;  // stable references
  bool wide_ = false;
  int64_t wg_ = 1;
  int64_t shared_bytes_ = 0;
  std::vector<int64_t> shared_offsets_;
  int min_ptx_ = 0, min_sm_ = 0;
  std::string tid_, ctaid_, nctaid_;
  Value lid_ = 0, group_ = 0;
  std::vector<std::string> base_;  // global base address per used buffer
};

// The tiled product on tensor cores (mode tf32, one output per thread): the
// first two warps multiply the staged 16x16 tiles, rounded to TF32 when
// staged, with mma.sync m16n8k8; warp w < 2 computes columns [8w, 8w + 8)
// of the tile, lane = 4 g + t4.
class MmaEngine final : public gpu::ProductEngine {
 public:
  explicit MmaEngine(PtxTarget& t) : t_(t), e_(t.emitter()) {}

  absl::Status setup(const Tile& tile) override {
    T_ = tile.tile;
    const std::string tid = e_.reg(RegClass::kB32), lane = e_.reg(RegClass::kB32);
    w32_ = e_.reg(RegClass::kB32);
    g32_ = e_.reg(RegClass::kB32);
    t4_32_ = e_.reg(RegClass::kB32);
    e_.ins("mov.u32 ", tid, ", %tid.x");
    e_.ins("and.b32 ", lane, ", ", tid, ", 31");
    e_.ins("shr.u32 ", w32_, ", ", tid, ", 5");
    e_.ins("shr.u32 ", g32_, ", ", lane, ", 2");
    e_.ins("and.b32 ", t4_32_, ", ", lane, ", 3");
    in_mma_ = e_.reg(RegClass::kPred);
    e_.ins("setp.lt.u32 ", in_mma_, ", ", tid, ", 64");
    // A fragment base lhs[g][t4]; B fragment base rhs[t4][8w + g].
    const std::string lhs = t_.sharedBase(tile.lhs), rhs = t_.sharedBase(tile.rhs);
    const std::string tmp = e_.reg(RegClass::kB32), tmp2 = e_.reg(RegClass::kB32);
    a_frag_ = e_.reg(RegClass::kB32);
    b_frag_ = e_.reg(RegClass::kB32);
    e_.ins("mad.lo.u32 ", tmp, ", ", g32_, ", ", T_, ", ", t4_32_);
    e_.ins("mad.lo.u32 ", a_frag_, ", ", tmp, ", 4, ", lhs);
    e_.ins("mad.lo.u32 ", tmp2, ", ", t4_32_, ", ", T_, ", ", g32_);
    e_.ins("mad.lo.u32 ", tmp2, ", ", w32_, ", 8, ", tmp2);
    e_.ins("mad.lo.u32 ", b_frag_, ", ", tmp2, ", 4, ", rhs);
    return absl::OkStatus();
  }
  absl::Status clear() override {
    for (std::string& f : frag_) {
      f = e_.reg(RegClass::kF32);
      e_.ins("mov.f32 ", f, ", ", f32Literal(0));
    }
    return absl::OkStatus();
  }
  void stage(const gpu::SharedArray& a, Value i, int64_t plus, Value v) override { t_.sharedStoreTf32(a, i, plus, v); }
  absl::Status multiply(int64_t points) override {
    const std::string skip = e_.label();
    e_.ins("@!", in_mma_, " bra ", skip);
    for (int64_t ks = 0; ks * 8 < points; ++ks) {
      std::string a[4], b[2];
      const int64_t a_off[4] = {0, 8 * T_ * 4, 4 * 4, 8 * T_ * 4 + 4 * 4};
      for (int i = 0; i < 4; ++i) {
        a[i] = e_.reg(RegClass::kB32);
        e_.ins("ld.shared.b32 ", a[i], ", [", a_frag_, "+", ks * 8 * 4 + a_off[i], "]");
      }
      for (int i = 0; i < 2; ++i) {
        b[i] = e_.reg(RegClass::kB32);
        e_.ins("ld.shared.b32 ", b[i], ", [", b_frag_, "+", (ks * 8 + 4 * i) * T_ * 4, "]");
      }
      e_.ins("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {", frag_[0], ", ", frag_[1], ", ", frag_[2], ", ",
             frag_[3], "}, {", a[0], ", ", a[1], ", ", a[2], ", ", a[3], "}, {", b[0], ", ", b[1], "}, {", frag_[0],
             ", ", frag_[1], ", ", frag_[2], ", ", frag_[3], "}");
    }
    e_.place(skip);
    return absl::OkStatus();
  }
  // c0: (g, 2 t4), c1: (g, 2 t4 + 1), c2: (g + 8, 2 t4), c3: (g + 8, 2 t4 + 1),
  // columns offset by 8w.
  absl::Status store(Value r0, Value c0, const Store& out) override {
    return t_.when(t_.handle(in_mma_), [&]() -> absl::Status {
      const Value g = t_.handle(t_.idxOf(g32_)), t4 = t_.handle(t_.idxOf(t4_32_)), w = t_.handle(t_.idxOf(w32_));
      const Value r_lo = t_.indexAdd(r0, g), r_hi = t_.indexAdd(r_lo, t_.index(8));
      const Value c_lo = t_.indexMulAdd(t4, 2, t_.indexMulAdd(w, 8, c0)), c_hi = t_.indexAdd(c_lo, t_.index(1));
      ACCY_RETURN_IF_ERROR(out(r_lo, c_lo, t_.handle(frag_[0])));
      ACCY_RETURN_IF_ERROR(out(r_lo, c_hi, t_.handle(frag_[1])));
      ACCY_RETURN_IF_ERROR(out(r_hi, c_lo, t_.handle(frag_[2])));
      return out(r_hi, c_hi, t_.handle(frag_[3]));
    });
  }

 private:
  PtxTarget& t_;
  Emitter& e_;
  int64_t T_ = 16;
  std::string w32_, g32_, t4_32_, in_mma_, a_frag_, b_frag_;
  std::string frag_[4];
};

// The tf32 path's preconditions.
absl::Status checkTf32(const choir::Module& m, const choir::Kernel& k, const choir::GpuNest& nest,
                       const TargetInfo& t) {
  auto refuse = [&](std::string why) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("PTX emitter: kernel ", k.name, " (a dot) cannot run on TF32 tensor cores as mode tf32 asks: ",
                            why));
  };
  const DType d = m.buffers[nest.leaf->buffer].dtype;
  if (d != DType::f32) return refuse(strCat("its operands are ", tensor::dtypeName(d), ", not f32"));
  if (t.sm < 80) return refuse(strCat("sm_", t.sm, " has no TF32 mma.sync (it needs sm_80 or newer)"));
  if (nest.form != GpuForm::kTiledProduct) {
    return refuse(strCat("it is mapped as a ", choir::gpuFormName(nest.form),
                         ", not a tiled product (tiling needs a row and a column axis of extent >= 8 and a "
                         "contracted axis of extent >= 8)"));
  }
  if (nest.tile != 16) {
    return refuse(strCat("its tile is ", nest.tile, "x", nest.tile, " (max_threads_per_block ", t.max_threads_per_block,
                         "); the mma path needs 16x16 tiles (256 threads per block)"));
  }
  if (nest.micro != 1) {
    return makeError(ErrorKind::kCompileFailed,
                     strCat("PTX emitter: internal error: kernel ", k.name, " is register-blocked ", nest.micro, "x",
                            nest.micro, "; the tf32 mma.sync path computes one output per thread (micro tile 1)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TranslatedKernel> translateKernel(const choir::Module& module, const choir::Kernel& kernel,
                                                 const KernelOptions& options) {
  if (!validName(kernel.name)) {
    return makeError(ErrorKind::kUnimplemented,
                     strCat("PTX emitter: kernel name '", kernel.name, "' is not a PTX identifier"));
  }
  PtxTarget target(module, kernel, options.target);
  std::unique_ptr<MmaEngine> mma;
  if (options.tf32) {
    ACCY_ASSIGN_OR_RETURN(const choir::GpuNest nest, choir::describeGpuKernel(kernel));
    ACCY_RETURN_IF_ERROR(checkTf32(module, kernel, nest, options.target));
    mma = std::make_unique<MmaEngine>(target);
    target.need(70, 80);
  }
  gpu::KernelEmitter emitter(target, module, kernel);
  ACCY_ASSIGN_OR_RETURN(const gpu::EmittedKernel k, emitter.run(mma.get(), options.wide_indices));
  TranslatedKernel out;
  out.text = target.entry(k, options.tf32);
  out.blocks = k.workgroups;
  out.work = k.work;
  out.min_ptx_version = target.minPtx();
  out.min_sm = target.minSm();
  return out;
}

}  // namespace accy::ptx
