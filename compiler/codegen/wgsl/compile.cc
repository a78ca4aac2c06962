// WGSL as a target of the one GPU kernel emitter (compiler/codegen/gpu):
// values are `let` bindings, variables `var`s, loops `loop` with
// `continuing`, one module per kernel.
#include "compiler/codegen/wgsl/compile.h"

#include <cstring>
#include <set>
#include <span>

#include "absl/strings/str_format.h"
#include "base/errors.h"
#include "compiler/codegen/gpu/source_target.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::wgsl {
namespace {

using choir::DType;
using choir::OpCode;
using gpu::Value;

using Writer = gpu::SourceWriter;

// The exact bits of an f32 as a WGSL expression. Infinities and NaN cannot
// be constant expressions in WGSL, so those go through a runtime zero.
std::string f32Bits(uint32_t bits) {
  const bool finite = (bits & 0x7f800000u) != 0x7f800000u;
  return finite ? absl::StrFormat("bitcast<f32>(0x%08xu)", bits) : absl::StrFormat("bitcast<f32>(0x%08xu | accy_zero)", bits);
}
std::string f32Literal(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return f32Bits(bits);
}

// The ops type of compiler/codegen/math/elementary.h over WGSL f32 values,
// held as their bits (u32). fma is a multiply and an add (WGSL's fma() does
// not promise one rounding). Browsers' shader compilers treat floats with
// fast-math freedom: SwiftShader turned (x + c) - c into x and lost the
// signs of zeros (both measured), which breaks the error-free
// transformations and the sign tricks the algorithms are made of. So every
// value lives as bits between operations (no float register carries a
// -0.0 or a value the compiler could reassociate), and every sum,
// difference, product and quotient xors its bits with a zero the compiler
// cannot know (`opaque`, from arrayLength), which keeps each rounding where
// the algorithm puts it.
class WgslOps {
 public:
  using Vec = std::string;
  using Mask = std::string;

  WgslOps(Writer& w, std::string opaque) : w_(w), opaque_(std::move(opaque)) {}

  const math::LaneMath& c() const { return math::kF32; }
  bool fusedMultiplyAdd() const { return false; }

  Vec num(double v) {
    const float f = static_cast<float>(v);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return bits(b);
  }
  Vec bits(uint64_t b) { return w_.let("u32", absl::StrFormat("0x%08xu", static_cast<uint32_t>(b))); }
  Vec zero() { return num(0.0); }

  Vec add(const Vec& a, const Vec& b) { return arith("+", a, b); }
  Vec sub(const Vec& a, const Vec& b) { return arith("-", a, b); }
  Vec mul(const Vec& a, const Vec& b) { return arith("*", a, b); }
  Vec div(const Vec& a, const Vec& b) { return arith("/", a, b); }
  Vec fma(const Vec& a, const Vec& b, const Vec& c) { return add(mul(a, b), c); }
  Vec neg(const Vec& a) { return w_.let("u32", strCat(a, " ^ 0x80000000u")); }
  Vec abs(const Vec& a) { return w_.let("u32", strCat(a, " & 0x7fffffffu")); }
  Vec round(const Vec& a) { return w_.let("u32", strCat("bitcast<u32>(round(bitcast<f32>(", a, ")))")); }  // ties to even
  Vec minRaw(const Vec& a, const Vec& b) { return select(cmp(math::Cmp::kLt, a, b), a, b); }
  Vec maxRaw(const Vec& a, const Vec& b) { return select(cmp(math::Cmp::kGt, a, b), a, b); }
  Vec bitAnd(const Vec& a, const Vec& b) { return w_.let("u32", strCat(a, " & ", b)); }
  Vec bitOr(const Vec& a, const Vec& b) { return w_.let("u32", strCat(a, " | ", b)); }
  Vec bitXor(const Vec& a, const Vec& b) { return w_.let("u32", strCat(a, " ^ ", b)); }
  Vec intAdd(const Vec& a, const Vec& b) { return w_.let("u32", strCat(a, " + ", b)); }
  Vec shl(const Vec& a, int n) { return w_.let("u32", strCat(a, " << ", n, "u")); }
  Vec shr(const Vec& a, int n) { return w_.let("u32", strCat(a, " >> ", n, "u")); }

  Mask cmp(math::Cmp p, const Vec& a, const Vec& b) {
    static constexpr const char* kOps[] = {"<", "<=", ">", ">=", "==", "!="};
    return w_.let("bool", strCat("bitcast<f32>(", a, ") ", kOps[static_cast<int>(p)], " bitcast<f32>(", b, ")"));
  }
  Mask both(const Mask& a, const Mask& b) { return w_.let("bool", strCat(a, " && ", b)); }
  Mask either(const Mask& a, const Mask& b) { return w_.let("bool", strCat(a, " || ", b)); }
  Vec select(const Mask& m, const Vec& yes, const Vec& no) {
    return w_.let("u32", strCat("select(", no, ", ", yes, ", ", m, ")"));
  }

  // Runs `body` only in invocations where `m` is set; `body` replaces values
  // of `vars`, which hold the replacements afterwards.
  template <class F>
  void whenAny(const Mask& m, std::span<Vec> vars, F&& body) {
    std::vector<std::string> slots;
    for (const Vec& v : vars) slots.push_back(w_.var("u32", v));
    w_.open(strCat("if (", m, ")"));
    body();
    for (size_t i = 0; i < vars.size(); ++i) w_.line(strCat(slots[i], " = ", vars[i], ";"));
    w_.close();
    for (size_t i = 0; i < vars.size(); ++i) vars[i] = w_.let("u32", slots[i]);
  }

  Vec horner(const Vec& x, std::span<const double> coefficients) { return math::hornerByFma(*this, x, coefficients); }

  // Between the kernel's f32 values and these bits.
  Vec fromFloat(const std::string& f) { return w_.let("u32", strCat("bitcast<u32>(", f, ")")); }
  std::string toFloat(const Vec& v) { return w_.let("f32", strCat("bitcast<f32>(", v, ")")); }

 private:
  Vec arith(const char* op, const Vec& a, const Vec& b) {
    return w_.let("u32", strCat("bitcast<u32>(bitcast<f32>(", a, ") ", op, " bitcast<f32>(", b, ")) ^ ", opaque_));
  }

  Writer& w_;
  std::string opaque_;
};

const char* typeOf(DType d) {
  switch (d) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
    case DType::u32:
      return "u32";
    case DType::bool_:
      return "bool";
    default:
      return "f32";  // f64 and i64 are refused before any value is made
  }
}
// How a buffer of `d` stores its elements.
const char* storedAs(DType d) { return d == DType::bool_ ? "u32" : typeOf(d); }

class WgslTarget final : public gpu::SourceTarget {
 public:
  WgslTarget(const choir::Module& m, const choir::Kernel& k, const TargetInfo& t, bool subgroups)
      : SourceTarget(Writer::Style::kTypeAfter, m, "WGSL", t.max_workgroup_size, t.max_workgroups, t.workgroup_memory,
                     t.mode),
        k_(k),
        subgroups_(subgroups) {
    desc_.subgroups = subgroups ? gpu::Subgroups::kRuntimeLanes : gpu::Subgroups::kNone;
    desc_.index64 = false;
    desc_.float64 = false;
    desc_.float64_needs = "a target with 64-bit floats (WGSL has none)";
    desc_.int64 = false;
    desc_.int64_needs = "a target with 64-bit integers (WGSL has none)";
  }

  absl::Status start(const gpu::KernelPlan&) override {
    // A zero no compiler can know (buffers hold fewer than 2^31
    // elements): WgslOps' barrier against reassociation.
    w_.line(strCat("let accy_opaque: u32 = arrayLength(&buf", used_.front(), ") >> 31u;"));
    lid_ = handle("lid.x");
    group_ = handle("wid.x");
    gid_ = handle("gid.x");
    return absl::OkStatus();
  }

  // The module.
  std::string module() const {
    std::string text = strCat(subgroups_ ? "enable subgroups;\n" : "", "// kernel ", k_.name, "\n");
    for (int b : used_) {
      const choir::Buffer& buf = m_.buffers[static_cast<size_t>(b)];
      strAppend(&text, "@group(0) @binding(", b, ") var<storage, ",
                buf.role == choir::BufferRole::kInput ? "read" : "read_write", "> buf", b, ": array<",
                storedAs(buf.dtype), ">;\n");
    }
    for (size_t i = 0; i < shared_.size(); ++i) {
      strAppend(&text, "var<workgroup> wg", i, ": array<", storedAs(shared_[i].first), ", ", shared_[i].second, ">;\n");
    }
    strAppend(&text, "var<private> accy_zero: u32 = 0u;  // a runtime zero: non-finite constants\n");
    strAppend(&text, "\n@compute @workgroup_size(", wg_,
              ")\nfn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,\n"
              "        @builtin(global_invocation_id) gid: vec3<u32>",
              subgroups_ ? ",\n        @builtin(subgroup_size) sg_size: u32, @builtin(subgroup_invocation_id) sg_lane: u32"
                         : "",
              ") {\n",
              w_.body(), "}\n");
    return text;
  }

  // --- values: numbers are f32 and i32 ---------------------------------------

  Value literal(DType d, double c) override {
    if (d == DType::i32) {
      return let(d, absl::StrFormat("bitcast<i32>(0x%08xu)", static_cast<uint32_t>(tensor::toInt64(c))));
    }
    if (d == DType::u32) return let(d, absl::StrFormat("0x%08xu", static_cast<uint32_t>(tensor::toInt64(c))));
    // f64 and i64 are refused before any value is made.
    return let(DType::f32, d == DType::f32 ? f32Literal(static_cast<float>(c)) : std::string("0.0"));
  }
  Value arith(gpu::Arith op, DType d, Value a, Value b) override {
    static constexpr const char* kOps[] = {"+", "-", "*", "/"};
    return let(d, strCat(n(a), " ", kOps[static_cast<int>(op)], " ", n(b)));
  }
  Value negate(DType d, Value a) override {
    // -INT_MIN wraps (0 - x: WGSL's i32 arithmetic wraps).
    if (d == DType::u32) return let(d, strCat("0u - ", n(a)));
    return let(d, d == DType::i32 ? strCat("0i - ", n(a)) : strCat("-", n(a)));
  }
  Value sqrt(DType d, Value a) override { return let(d, strCat("sqrt(", n(a), ")")); }
  // By the bits: WGSL lets an implementation assume no NaN in arithmetic.
  Value isNan(DType, Value a) override {
    return let(DType::bool_, strCat("(bitcast<u32>(", n(a), ") & 0x7fffffffu) > 0x7f800000u"));
  }
  // >> is arithmetic on i32 and logical on u32; a count is a u32.
  Value shiftRight(DType d, Value a, int bits) override { return let(d, strCat(n(a), " >> ", bits, "u")); }
  Value shiftLeftBy(DType d, Value a, Value c) override { return let(d, strCat(n(a), " << u32(", n(c), ")")); }
  Value shiftRightBy(DType d, Value a, Value c) override { return let(d, strCat(n(a), " >> u32(", n(c), ")")); }
  Value bitcast(DType, DType to, Value v) override { return let(to, strCat("bitcast<", typeOf(to), ">(", n(v), ")")); }
  // i32(u32) and u32(i32) keep the bits.
  Value convert(DType, DType to, Value v) override { return let(to, strCat(typeOf(to), "(", n(v), ")")); }

  Value exactMath(OpCode op, DType, Value x, Value y) override {
    WgslOps o(w_, "accy_opaque");
    const std::string a = o.fromFloat(n(x));
    const std::string b = y != 0 ? o.fromFloat(n(y)) : a;
    if (std::optional<std::string> v = codegen::elementaryOf(o, op, a, b)) return handle(o.toFloat(*v));
    fail(makeError(ErrorKind::kUnimplemented, strCat("WGSL emitter: op ", tensor::opName(op))));
    return x;
  }

  // On bits, as exactMath: the browser's compiler folded (x + c) - c.
  std::pair<Value, Value> twoSum(DType, Value a, Value b) override {
    WgslOps o(w_, "accy_opaque");
    const math::Pair<std::string> p = math::twoSum(o, o.fromFloat(n(a)), o.fromFloat(n(b)));
    return {handle(o.toFloat(p.hi)), handle(o.toFloat(p.lo))};
  }

  // WGSL's built-ins (not accurate: the browser's sin was 5.7e-4 off).
  Value fastMath(OpCode op, DType d, Value x, Value y) override {
    return builtinMath(op, d, x, y, "", "1.0");
  }

  // --- indices: u32 ---------------------------------------------------------

  Value indexAsInt(Value i, DType* as) override {
    *as = DType::i32;
    return let(DType::i32, strCat("bitcast<i32>(", n(i), ")"));
  }

  // --- memory ---------------------------------------------------------------

  void barrier() override { w_.line("workgroupBarrier();"); }

  // Subgroups::kRuntimeLanes (the subgroups variant): bools move as u32.
  Value shuffleDown(DType d, Value v, Value offset, int64_t) override {
    if (d == DType::bool_) {
      return let(d, readBool(strCat("subgroupShuffleDown(", storedBool(n(v)), ", ", n(offset), ")")));
    }
    return let(d, strCat("subgroupShuffleDown(", n(v), ", ", n(offset), ")"));
  }
  Value subgroupBuiltin(int which) override {
    if (which == 0) return handle("sg_size");
    if (which == 3) return handle("sg_lane");
    fail(makeError(ErrorKind::kCompileFailed, "WGSL emitter: WGSL has no subgroup id"));
    return lid_;
  }

 private:
  const char* typeName(DType d) const override { return typeOf(d); }
  const char* indexType() const override { return "u32"; }
  std::string indexLiteral(int64_t v) const override { return strCat(static_cast<uint32_t>(v), "u"); }
  const char* loopHead() const override { return "loop"; }
  std::string storedBool(const std::string& value) const override { return strCat("select(0u, 1u, ", value, ")"); }
  std::string readBool(const std::string& stored) const override { return strCat(stored, " != 0u"); }
  std::string stepBy(const std::string& step) const override { return strCat(" + ", step); }
  std::string doubled() const override { return " << 1u"; }
  // for (x = start; x < limit; x = x <advance>) body(x)
  absl::Status counted(Value start, Value limit, const IndexBody& body, const std::string& advance) override {
    const std::string x = w_.var("u32", n(start));
    w_.open("loop");
    w_.line(strCat("if (", x, " >= ", n(limit), ") { break; }"));
    ACCY_RETURN_IF_ERROR(body(handle(x)));
    w_.open("continuing");
    w_.line(strCat(x, " = ", x, advance, ";"));
    w_.close();
    w_.close();
    return absl::OkStatus();
  }

  const choir::Kernel& k_;
  bool subgroups_;
};

}  // namespace

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump) {
  return gpu::compileSourceProgram(
      program, target.max_workgroup_size, "wgsl", target.mode == ArithmeticMode::kFast ? "webgpu-fast" : "webgpu",
      dump, [&](const choir::Module& m, const choir::Kernel& k) -> absl::StatusOr<gpu::KernelText> {
        WgslTarget t(m, k, target, false);
        gpu::KernelEmitter emitter(t, m, k);
        ACCY_ASSIGN_OR_RETURN(const gpu::EmittedKernel emitted, emitter.run());
        std::string text = t.module();
        // Tree reductions carry a second module using subgroups, which the
        // page takes where the device has them.
        if (target.subgroups && emitted.nest.form == choir::GpuForm::kTreeReduce) {
          WgslTarget with(m, k, target, true);
          gpu::KernelEmitter again(with, m, k);
          ACCY_RETURN_IF_ERROR(again.run().status());
          strAppend(&text, kSubgroupsMarker, with.module());
        }
        return gpu::KernelText{emitted.workgroups, emitted.work, std::move(text)};
      },
      target.max_storage_buffers);
}

}  // namespace accy::wgsl
