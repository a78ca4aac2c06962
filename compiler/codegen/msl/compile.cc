// MSL as a target of the one GPU kernel emitter (compiler/codegen/gpu):
// values are `const` bindings, variables locals, loops `for`, one source per
// kernel. Integer arithmetic goes through unsigned types (it wraps, where
// signed overflow would be undefined in Metal's C++), float division and
// square roots through metal::precise (correctly rounded in either math
// mode), exact-mode elementary functions through compiler/codegen/math with
// Metal's fused fma.
#include "compiler/codegen/msl/compile.h"

#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/errors.h"
#include "compiler/codegen/gpu/source_target.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/msl/artifact.h"
#include "compiler/codegen/semantics/op_semantics.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::msl {
namespace {

using choir::DType;
using choir::OpCode;
using gpu::Value;
using Writer = gpu::SourceWriter;

// An f32 constant with its exact bits: a decimal literal that reads back to
// the same float, or its bits where it is not finite or not normal.
std::string f32Literal(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (v != 0 && !std::isnormal(v)) return absl::StrFormat("as_type<float>(0x%08xu)", bits);
  std::string text = absl::StrFormat("%.9g", v);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text + "f";
}

// The ops type of compiler/codegen/math/elementary.h over MSL float values:
// every operation its own binding (no compiler may contract or reassociate
// across them where the library is compiled with math mode "safe", which
// the artifact asks for), fma Metal's fused one.
class MslOps {
 public:
  using Vec = std::string;
  using Mask = std::string;

  explicit MslOps(Writer& w) : w_(w) {}

  const math::LaneMath& c() const { return math::kF32; }
  bool fusedMultiplyAdd() const { return true; }

  Vec num(double v) { return w_.let("float", f32Literal(static_cast<float>(v))); }
  Vec bits(uint64_t b) {
    return w_.let("float", absl::StrFormat("as_type<float>(0x%08xu)", static_cast<uint32_t>(b)));
  }
  Vec zero() { return num(0.0); }

  Vec add(const Vec& a, const Vec& b) { return w_.let("float", strCat(a, " + ", b)); }
  Vec sub(const Vec& a, const Vec& b) { return w_.let("float", strCat(a, " - ", b)); }
  Vec mul(const Vec& a, const Vec& b) { return w_.let("float", strCat(a, " * ", b)); }
  Vec div(const Vec& a, const Vec& b) { return w_.let("float", strCat("precise::divide(", a, ", ", b, ")")); }
  Vec fma(const Vec& a, const Vec& b, const Vec& c) { return w_.let("float", strCat("fma(", a, ", ", b, ", ", c, ")")); }
  Vec neg(const Vec& a) { return w_.let("float", strCat("-", a)); }
  Vec abs(const Vec& a) { return w_.let("float", strCat("abs(", a, ")")); }
  Vec round(const Vec& a) { return w_.let("float", strCat("rint(", a, ")")); }  // ties to even
  Vec minRaw(const Vec& a, const Vec& b) { return select(cmp(math::Cmp::kLt, a, b), a, b); }
  Vec maxRaw(const Vec& a, const Vec& b) { return select(cmp(math::Cmp::kGt, a, b), a, b); }
  Vec bitAnd(const Vec& a, const Vec& b) { return integer(" & ", a, b); }
  Vec bitOr(const Vec& a, const Vec& b) { return integer(" | ", a, b); }
  Vec bitXor(const Vec& a, const Vec& b) { return integer(" ^ ", a, b); }
  Vec intAdd(const Vec& a, const Vec& b) { return integer(" + ", a, b); }
  Vec shl(const Vec& a, int n) { return w_.let("float", strCat("as_type<float>(as_type<uint>(", a, ") << ", n, "u)")); }
  Vec shr(const Vec& a, int n) { return w_.let("float", strCat("as_type<float>(as_type<uint>(", a, ") >> ", n, "u)")); }

  Mask cmp(math::Cmp p, const Vec& a, const Vec& b) {
    static constexpr const char* kOps[] = {"<", "<=", ">", ">=", "==", "!="};
    return w_.let("bool", strCat(a, " ", kOps[static_cast<int>(p)], " ", b));
  }
  Mask both(const Mask& a, const Mask& b) { return w_.let("bool", strCat(a, " && ", b)); }
  Mask either(const Mask& a, const Mask& b) { return w_.let("bool", strCat(a, " || ", b)); }
  Vec select(const Mask& m, const Vec& yes, const Vec& no) {
    return w_.let("float", strCat("select(", no, ", ", yes, ", ", m, ")"));
  }

  Vec horner(const Vec& x, std::span<const double> coefficients) { return math::hornerByFma(*this, x, coefficients); }

  // Runs `body` only in threads where `m` is set; `body` replaces values
  // of `vars`, which hold the replacements afterwards.
  template <class F>
  void whenAny(const Mask& m, std::span<Vec> vars, F&& body) {
    std::vector<std::string> slots;
    for (const Vec& v : vars) slots.push_back(w_.var("float", v));
    w_.open(strCat("if (", m, ")"));
    body();
    for (size_t i = 0; i < vars.size(); ++i) w_.line(strCat(slots[i], " = ", vars[i], ";"));
    w_.close();
    for (size_t i = 0; i < vars.size(); ++i) vars[i] = w_.let("float", slots[i]);
  }

 private:
  Vec integer(const char* op, const Vec& a, const Vec& b) {
    return w_.let("float", strCat("as_type<float>(as_type<uint>(", a, ")", op, "as_type<uint>(", b, "))"));
  }

  Writer& w_;
};

const char* typeOf(DType d) {
  switch (d) {
    case DType::f32:
      return "float";
    case DType::i32:
      return "int";
    case DType::u32:
      return "uint";
    case DType::i64:
      return "long";
    case DType::bool_:
      return "bool";
    default:
      return "float";  // f64 is refused before any value is made
  }
}
// The unsigned type of the same width, for wrapping arithmetic.
const char* unsignedOf(DType d) { return d == DType::i64 ? "ulong" : "uint"; }

class MslTarget final : public gpu::SourceTarget {
 public:
  MslTarget(const choir::Module& m, const choir::Kernel& k, const TargetInfo& t)
      : SourceTarget(Writer::Style::kTypeBefore, m, "MSL", t.max_workgroup_size, t.max_workgroups, t.workgroup_memory,
                     t.mode),
        k_(k) {
    desc_.subgroups = t.simdgroups ? gpu::Subgroups::kRuntime : gpu::Subgroups::kNone;
    desc_.index64 = true;
    desc_.float64 = false;
    desc_.float64_needs = "a target with 64-bit floats (Metal has none)";
    desc_.int64 = true;
  }

  absl::Status start(const gpu::KernelPlan& plan) override {
    wide_ = plan.wide;
    lid_ = builtin("lid");
    group_ = builtin("wid");
    gid_ = builtin("gid");
    return absl::OkStatus();
  }

  // The kernel's source.
  std::string source() const {
    KernelInfo info;
    info.bindings = used_;
    info.threadgroup = shared_;
    info.simdgroups = simd_;
    std::string text = strCat(infoLine(info), "// kernel ", k_.name,
                              "\n#include <metal_stdlib>\nusing namespace metal;\n");
    if (desc_.mode == ArithmeticMode::kExact) {
      // Exact mode's algorithms need every rounding where they put it.
      strAppend(&text,
                "#if defined(__METAL_VERSION__) && __METAL_VERSION__ >= 320\n#pragma METAL fp math_mode(safe)\n"
                "#pragma METAL fp contract(off)\n#endif\n");
    }
    strAppend(&text, "\nkernel void ", kEntryName, "(");
    std::string params;
    for (int b : used_) {
      const choir::Buffer& buf = m_.buffers[static_cast<size_t>(b)];
      strAppend(&params, "device ", buf.role == choir::BufferRole::kInput ? "const " : "", storedType(buf.dtype), "* buf",
                b, " [[buffer(", b, ")]],\n    ");
    }
    strAppend(&params,
              "uint lid [[thread_position_in_threadgroup]], uint wid [[threadgroup_position_in_grid]], "
              "uint gid [[thread_position_in_grid]]");
    if (simd_) {
      strAppend(&params,
                ",\n    uint sg_size [[threads_per_simdgroup]], uint sg_count [[simdgroups_per_threadgroup]], "
                "uint sg_id [[simdgroup_index_in_threadgroup]], uint sg_lane [[thread_index_in_simdgroup]]");
    }
    std::string arrays;
    for (size_t i = 0; i < shared_.size(); ++i) {
      strAppend(&arrays, "  threadgroup ", storedType(shared_[i].first), " wg", i, "[", shared_[i].second, "];\n");
    }
    strAppend(&text, params, ") {\n", arrays, w_.body(), "}\n");
    return text;
  }

  // --- values ---------------------------------------------------------------

  Value literal(DType d, double c) override {
    switch (d) {
      case DType::f32:
        return let(d, f32Literal(static_cast<float>(c)));
      case DType::i32: {
        const int64_t i = tensor::toInt64(c);
        return let(d, i > INT32_MIN ? strCat(i) : absl::StrFormat("as_type<int>(0x%08xu)", static_cast<uint32_t>(i)));
      }
      case DType::u32:
        return let(d, strCat(static_cast<uint32_t>(tensor::toInt64(c)), "u"));
      case DType::i64: {
        const int64_t i = tensor::toInt64(c);
        return let(d, i > INT64_MIN ? strCat("long(", i, "l)")
                                    : absl::StrFormat("as_type<long>(0x%016xul)", static_cast<uint64_t>(i)));
      }
      default:  // f64 is refused before any value is made
        return let(DType::f32, "0.0f");
    }
  }
  Value arith(gpu::Arith op, DType d, Value a, Value b) override {
    static constexpr const char* kOps[] = {" + ", " - ", " * ", " / "};
    const char* o = kOps[static_cast<int>(op)];
    if (tensor::isFloating(d)) {
      return let(d, op == gpu::Arith::kDiv ? strCat("precise::divide(", n(a), ", ", n(b), ")") : strCat(n(a), o, n(b)));
    }
    if (op == gpu::Arith::kDiv) return let(d, strCat(n(a), o, n(b)));  // never by 0 or -1
    return let(d, wrapping(d, strCat(asUnsigned(d, a), o, asUnsigned(d, b))));
  }
  Value negate(DType d, Value a) override {
    if (tensor::isFloating(d)) return let(d, strCat("-", n(a)));
    return let(d, wrapping(d, strCat("0u - ", asUnsigned(d, a))));
  }
  Value sqrt(DType d, Value a) override { return let(d, strCat("precise::sqrt(", n(a), ")")); }
  // By the bits: fast math may assume there are no NaNs.
  Value isNan(DType, Value a) override {
    return let(DType::bool_, strCat("(as_type<uint>(", n(a), ") & 0x7fffffffu) > 0x7f800000u"));
  }
  // >> is arithmetic on int and long, logical on uint; << through the
  // unsigned type (a signed overflow would be undefined).
  Value shiftRight(DType d, Value a, int bits) override { return let(d, strCat(n(a), " >> ", bits)); }
  Value shiftLeftBy(DType d, Value a, Value c) override {
    return let(d, wrapping(d, strCat(asUnsigned(d, a), " << ", n(c))));
  }
  Value shiftRightBy(DType d, Value a, Value c) override { return let(d, strCat(n(a), " >> ", n(c))); }
  Value bitcast(DType, DType to, Value v) override { return let(to, strCat("as_type<", typeOf(to), ">(", n(v), ")")); }
  Value convert(DType from, DType to, Value v) override {
    // i64 -> i32 keeps the low bits through the unsigned types (defined).
    if (from == DType::i64 && to == DType::i32) return let(to, strCat("as_type<int>(uint(as_type<ulong>(", n(v), ")))"));
    return let(to, strCat(typeOf(to), "(", n(v), ")"));
  }

  Value exactMath(OpCode op, DType, Value x, Value y) override {
    MslOps o(w_);
    if (std::optional<std::string> v = codegen::elementaryOf(o, op, n(x), y != 0 ? n(y) : n(x))) return handle(*v);
    fail(makeError(ErrorKind::kUnimplemented, strCat("MSL emitter: op ", tensor::opName(op))));
    return x;
  }

  // Metal's fast built-ins.
  Value fastMath(OpCode op, DType d, Value x, Value y) override {
    return builtinMath(op, d, x, y, "fast::", "1.0f");
  }

  // --- indices: uint, or ulong where the plan is wide ----------------------

  Value indexAsInt(Value i, DType* as) override {
    *as = wide_ ? DType::i64 : DType::i32;
    return let(*as, strCat(wide_ ? "as_type<long>(" : "as_type<int>(", n(i), ")"));
  }

  // --- memory ---------------------------------------------------------------

  void barrier() override { w_.line("threadgroup_barrier(mem_flags::mem_threadgroup);"); }

  // --- SIMD groups (Subgroups::kRuntime) ---------------------------------------

  Value shuffleDown(DType d, Value v, Value offset, int64_t) override {
    simd_ = true;
    const std::string delta = strCat("ushort(", n(offset), ")");
    switch (d) {
      case DType::bool_:
        return let(d, readBool(strCat("simd_shuffle_down(", storedBool(n(v)), ", ", delta, ")")));
      case DType::i64: {
        // In two 32-bit halves.
        const std::string u = w_.let("ulong", strCat("as_type<ulong>(", n(v), ")"));
        const std::string lo = w_.let("uint", strCat("simd_shuffle_down(uint(", u, "), ", delta, ")"));
        const std::string hi = w_.let("uint", strCat("simd_shuffle_down(uint(", u, " >> 32), ", delta, ")"));
        return let(d, strCat("as_type<long>((ulong(", hi, ") << 32) | ulong(", lo, "))"));
      }
      default:
        return let(d, strCat("simd_shuffle_down(", n(v), ", ", delta, ")"));
    }
  }
  Value subgroupBuiltin(int which) override {
    simd_ = true;
    static constexpr const char* kNames[] = {"sg_size", "sg_count", "sg_id", "sg_lane"};
    return builtin(kNames[which & 3]);
  }

 private:
  const char* typeName(DType d) const override { return typeOf(d); }
  const char* indexType() const override { return wide_ ? "ulong" : "uint"; }
  std::string indexLiteral(int64_t v) const override {
    return wide_ ? strCat(static_cast<uint64_t>(v), "ul") : strCat(static_cast<uint32_t>(v), "u");
  }
  const char* loopHead() const override { return "for (;;)"; }
  std::string storedBool(const std::string& value) const override { return strCat("uchar(", value, " ? 1 : 0)"); }
  std::string readBool(const std::string& stored) const override { return strCat(stored, " != 0"); }
  // A builtin (uint) as an index.
  Value builtin(const char* name) { return wide_ ? idx(strCat("ulong(", name, ")")) : handle(name); }
  std::string asUnsigned(DType d, Value v) const { return strCat("as_type<", unsignedOf(d), ">(", n(v), ")"); }
  static std::string wrapping(DType d, const std::string& unsigned_expr) {
    return strCat("as_type<", typeOf(d), ">(", unsignedOf(d), "(", unsigned_expr, "))");
  }
  std::string stepBy(const std::string& step) const override { return strCat(" += ", step); }
  std::string doubled() const override { return " <<= 1"; }
  absl::Status counted(Value start, Value limit, const IndexBody& body, const std::string& advance) override {
    const std::string x = strCat("x", ++loops_);
    w_.open(strCat("for (", wide_ ? "ulong " : "uint ", x, " = ", n(start), "; ", x, " < ", n(limit), "; ", x, advance,
                   ")"));
    ACCY_RETURN_IF_ERROR(body(handle(x)));
    w_.close();
    return absl::OkStatus();
  }

  const choir::Kernel& k_;
  bool wide_ = false;
  bool simd_ = false;
  int loops_ = 0;
};

}  // namespace

const char* storedType(tensor::DType d) { return d == DType::bool_ ? "uchar" : typeOf(d); }

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump) {
  return gpu::compileSourceProgram(
      program, target.max_workgroup_size, "msl", target.mode == ArithmeticMode::kFast ? "metal-fast" : "metal", dump,
      [&](const choir::Module& m, const choir::Kernel& k) -> absl::StatusOr<gpu::KernelText> {
        MslTarget t(m, k, target);
        gpu::KernelEmitter emitter(t, m, k);
        ACCY_ASSIGN_OR_RETURN(const gpu::EmittedKernel emitted, emitter.run());
        return gpu::KernelText{emitted.workgroups, emitted.work, t.source()};
      });
}

}  // namespace accy::msl
