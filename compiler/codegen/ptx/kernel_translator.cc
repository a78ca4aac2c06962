#include "compiler/codegen/ptx/kernel_translator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "compiler/choir/passes/gpu_map.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/rewrite.h"
#include "compiler/choir/value_numbering.h"
#include "compiler/codegen/math/elementary.h"
#include "compiler/codegen/ptx/emitter.h"
#include "compiler/codegen/ptx/ptx_ops.h"
#include "base/errors.h"
#include "compiler/tensor/scalar_ops.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::ptx {
namespace {

using choir::Affine;
using choir::DType;
using choir::Expr;
using choir::ExprKind;
using choir::ExprRef;
using choir::GpuForm;
using choir::LoopHeader;
using choir::OpCode;
using choir::Stmt;
using choir::StmtKind;

absl::Status unimplemented(std::string_view what) {
  return makeError(ErrorKind::kUnimplemented, strCat("PTX emitter: ", what));
}

RegClass classOf(DType d) {
  switch (d) {
    case DType::f32:
      return RegClass::kF32;
    case DType::f64:
      return RegClass::kF64;
    case DType::i32:
      return RegClass::kB32;
    case DType::i64:
      return RegClass::kB64;
    case DType::bool_:
      return RegClass::kPred;
  }
  return RegClass::kB32;
}

// The instruction type of arithmetic on `d`.
const char* arith(DType d) {
  switch (d) {
    case DType::f32:
      return ".f32";
    case DType::f64:
      return ".f64";
    case DType::i32:
      return ".s32";
    case DType::i64:
      return ".s64";
    case DType::bool_:
      return ".pred";
  }
  return "?";
}

bool wide64(DType d) { return d == DType::f64 || d == DType::i64; }

// Counts above this use 64-bit index arithmetic (a grid-stride step added
// to an index below it never wraps 32 bits).
constexpr int64_t kNarrowLimit = (int64_t{1} << 31) - 4096;

const float kLog2E = 1.44269504088896341f;
const float kLn2 = 0.693147180559945309f;

class Translator {
 public:
  Translator(const choir::Module& m, const choir::Kernel& k, const KernelOptions& o)
      : m_(m), k_(k), o_(o), t_(o.target) {}

  absl::StatusOr<TranslatedKernel> run() {
    ACCY_ASSIGN_OR_RETURN(nest_, choir::describeGpuKernel(k_));
    if (!validName(k_.name)) return unimplemented(strCat("kernel name '", k_.name, "' is not a PTX identifier"));
    wg_ = k_.workgroup_size;
    if (wg_ > static_cast<int64_t>(t_.max_threads_per_block)) {
      return makeError(ErrorKind::kInvalidArgument, strCat("PTX emitter: kernel ", k_.name, " needs ", wg_,
                                                           " threads per block, the device allows ",
                                                           t_.max_threads_per_block));
    }
    const Stmt& leaf = *nest_.leaf;
    int64_t outputs = 1, domain = 1, largest = 1;
    for (const LoopHeader& h : nest_.loops) outputs *= h.extent;
    for (const LoopHeader& h : leaf.domain) domain *= h.extent;
    largest = std::max({outputs, domain, outputs * std::max<int64_t>(nest_.split, 1)});
    for (const choir::Buffer& b : m_.buffers) largest = std::max(largest, b.elements());
    wide_ = o_.wide_indices || largest >= kNarrowLimit;
    out_.work = outputs * domain;
    if (o_.tf32) ACCY_RETURN_IF_ERROR(checkTf32());

    prologue();
    switch (nest_.form) {
      case GpuForm::kElementwise:
      case GpuForm::kSerialReduce:
        ACCY_RETURN_IF_ERROR(perOutput(outputs));
        break;
      case GpuForm::kTreeReduce:
        ACCY_RETURN_IF_ERROR(treeReduce(outputs, domain));
        break;
      case GpuForm::kTiledProduct:
        ACCY_RETURN_IF_ERROR(tiledProduct());
        break;
    }
    e_.op("ret");

    std::string& text = out_.text;
    strAppend(&text, "// kernel ", k_.name, ": ", choir::gpuFormName(nest_.form),
              o_.tf32 ? " on tensor cores (tf32)" : "", ", ", wg_, " threads per block",
              wide_ ? ", 64-bit indices" : "", "\n");
    strAppend(&text, ".visible .entry ", k_.name, "(\n");
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      strAppend(&text, "\t.param .u64 ", param(static_cast<int>(b)), b + 1 < m_.buffers.size() ? ",\n" : "\n");
    }
    strAppend(&text, ")\n.reqntid ", wg_, "\n{\n", e_.declarations());
    if (shared_bytes_ > 0) strAppend(&text, "\t.shared .align 8 .b8 ", shared_name(), "[", shared_bytes_, "];\n");
    strAppend(&text, "\n", e_.body(), "}\n");
    out_.min_ptx_version = min_ptx_;
    out_.min_sm = min_sm_;
    return out_;
  }

 private:
  static bool validName(const std::string& s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
  }
  std::string param(int b) const { return strCat(k_.name, "_param_", b); }
  std::string shared_name() const { return strCat(k_.name, "_smem"); }
  void need(int ptx, int sm) {
    min_ptx_ = std::max(min_ptx_, ptx);
    min_sm_ = std::max(min_sm_, sm);
  }

  // --- the tf32 path's preconditions -------------------------------------

  absl::Status checkTf32() {
    auto refuse = [&](std::string why) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("PTX emitter: kernel ", k_.name, " (a dot) cannot run on TF32 tensor cores as mode tf32 asks: ",
                              why));
    };
    const DType d = m_.buffers[nest_.leaf->buffer].dtype;
    if (d != DType::f32) return refuse(strCat("its operands are ", tensor::dtypeName(d), ", not f32"));
    if (t_.sm < 80) return refuse(strCat("sm_", t_.sm, " has no TF32 mma.sync (it needs sm_80 or newer)"));
    if (nest_.form != GpuForm::kTiledProduct) {
      return refuse(strCat("it is mapped as a ", choir::gpuFormName(nest_.form),
                           ", not a tiled product (tiling needs a row and a column axis of extent >= 8 and a "
                           "contracted axis of extent >= 8)"));
    }
    if (nest_.tile != 16) {
      return refuse(strCat("its tile is ", nest_.tile, "x", nest_.tile, " (max_threads_per_block ",
                           t_.max_threads_per_block, "); the mma path needs 16x16 tiles (256 threads per block)"));
    }
    return absl::OkStatus();
  }

  // --- registers, constants, indices --------------------------------------

  RegClass idxClass() const { return wide_ ? RegClass::kB64 : RegClass::kB32; }
  const char* ut() const { return wide_ ? ".u64" : ".u32"; }
  const char* st() const { return wide_ ? ".s64" : ".s32"; }
  const char* bt() const { return wide_ ? ".b64" : ".b32"; }
  std::string imm(int64_t v) const {
    return wide_ ? strCat(v) : strCat(static_cast<int32_t>(static_cast<uint32_t>(v)));
  }
  std::string idxReg() { return e_.reg(idxClass()); }
  std::string materialize(const Operand& v) {
    if (!v.empty() && v[0] == '%') return v;
    std::string r = idxReg();
    e_.ins("mov", bt(), " ", r, ", ", v);
    return r;
  }
  // A 32-bit special register value widened to the index type.
  std::string idxOf(const std::string& r32) {
    if (!wide_) return r32;
    std::string r = idxReg();
    e_.ins("cvt.u64.u32 ", r, ", ", r32);
    return r;
  }

  absl::StatusOr<Operand> constant(DType d, double v) {
    const double c = tensor::convertValue(v, DType::f64, d);
    std::string r = e_.reg(classOf(d));
    switch (d) {
      case DType::f32:
        e_.ins("mov.f32 ", r, ", ", f32Literal(static_cast<float>(c)));
        break;
      case DType::f64:
        e_.ins("mov.f64 ", r, ", ", f64Literal(c));
        break;
      case DType::i32:
        e_.ins("mov.b32 ", r, ", ", static_cast<int32_t>(tensor::toInt64(c)));
        break;
      case DType::i64:
        e_.ins("mov.b64 ", r, ", ", absl::StrFormat("0x%016X", static_cast<uint64_t>(tensor::toInt64(c))));
        break;
      case DType::bool_:
        e_.ins("mov.pred ", r, ", ", c != 0 ? 1 : 0);
        break;
    }
    return r;
  }

  // The value of `a` (a register, or an immediate when it is constant).
  Operand affine(const Affine& a) {
    Operand acc;
    for (const Affine::Term& term : a.terms) {
      const std::string& v = vars_.at(term.var);
      if (acc.empty()) {
        if (term.coeff == 1) {
          acc = v;
        } else {
          acc = idxReg();
          e_.ins("mul.lo", st(), " ", acc, ", ", v, ", ", imm(term.coeff));
        }
        continue;
      }
      std::string r = idxReg();
      if (term.coeff == 1) {
        e_.ins("add", st(), " ", r, ", ", acc, ", ", v);
      } else {
        e_.ins("mad.lo", st(), " ", r, ", ", v, ", ", imm(term.coeff), ", ", acc);
      }
      acc = r;
    }
    if (acc.empty()) return imm(a.constant);
    if (a.constant != 0) {
      std::string r = idxReg();
      e_.ins("add", st(), " ", r, ", ", acc, ", ", imm(a.constant));
      acc = r;
    }
    return acc;
  }

  // Sets the loop variables of `loops` from the row-major index `flat`.
  void decompose(const Operand& flat, const std::vector<LoopHeader>& loops) {
    int64_t stride = 1;
    for (size_t i = loops.size(); i-- > 0;) {
      std::string v = materialize(flat);
      if (stride != 1) {
        std::string q = idxReg();
        e_.ins("div", ut(), " ", q, ", ", v, ", ", imm(stride));
        v = q;
      }
      if (i > 0) {
        std::string r = idxReg();
        e_.ins("rem", ut(), " ", r, ", ", v, ", ", imm(loops[i].extent));
        v = r;
      }
      vars_[loops[i].var] = v;
      stride *= loops[i].extent;
    }
  }

  // --- control flow -------------------------------------------------------

  // for (x = start; x < limit; x += step) body(x), in the index type.
  absl::Status strided(const Operand& start, const Operand& limit, const Operand& step,
                       const std::function<absl::Status(const std::string&)>& body) {
    const std::string x = idxReg();
    e_.ins("mov", bt(), " ", x, ", ", start);
    const std::string head = e_.label(), done = e_.label();
    const std::string p = e_.reg(RegClass::kPred);
    e_.place(head);
    e_.ins("setp.ge", ut(), " ", p, ", ", x, ", ", limit);
    e_.ins("@", p, " bra ", done);
    // Values made in the loop are not defined after it: restore the cache.
    const size_t saved = cse_log_.size();
    ACCY_RETURN_IF_ERROR(body(x));
    forgetSince(saved);
    e_.ins("add", ut(), " ", x, ", ", x, ", ", step);
    e_.ins("bra ", head);
    e_.place(done);
    return absl::OkStatus();
  }

  // if (cond) body
  absl::Status when(const std::string& cond, const std::function<absl::Status()>& body) {
    const std::string skip = e_.label();
    e_.ins("@!", cond, " bra ", skip);
    const size_t saved = cse_log_.size();
    ACCY_RETURN_IF_ERROR(body());
    forgetSince(saved);
    e_.place(skip);
    return absl::OkStatus();
  }

  std::string predicate(const char* cmp, const char* type, const Operand& a, const Operand& b) {
    std::string p = e_.reg(RegClass::kPred);
    e_.ins("setp.", cmp, type, " ", p, ", ", a, ", ", b);
    return p;
  }

  // --- buffers ------------------------------------------------------------

  void prologue() {
    std::set<int> used = {nest_.leaf->buffer};
    if (nest_.partials >= 0) used.insert(nest_.partials);
    visitExpr(nest_.leaf->value, [&](const Expr& x) {
      if (x.kind == ExprKind::kLoad) used.insert(x.buffer);
    });
    base_.assign(m_.buffers.size(), "");
    for (int buf : used) {
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
  }

  // "[address]" of buffer[index].
  std::string address(int buffer, const std::vector<Affine>& index) {
    const choir::Buffer& buf = m_.buffers[buffer];
    const Affine flat = choir::flatIndex(buf, index);
    const int64_t size = tensor::dtypeSize(buf.dtype);
    if (flat.terms.empty()) return strCat("[", base_[buffer], "+", flat.constant * size, "]");
    const Operand i = affine(flat);
    const std::string off = e_.reg(RegClass::kB64), addr = e_.reg(RegClass::kB64);
    if (wide_) {
      e_.ins("mul.lo.s64 ", off, ", ", i, ", ", size);
    } else {
      e_.ins("mul.wide.u32 ", off, ", ", i, ", ", size);
    }
    e_.ins("add.s64 ", addr, ", ", base_[buffer], ", ", off);
    return strCat("[", addr, "]");
  }

  // Bool buffers hold one byte per element, 0 or 1; bool values live in
  // predicates.
  std::string loadElement(int buffer, const std::vector<Affine>& index) {
    const choir::Buffer& buf = m_.buffers[buffer];
    const char* space = buf.role == choir::BufferRole::kInput ? "ld.global.nc" : "ld.global";
    const std::string addr = address(buffer, index);
    if (buf.dtype == DType::bool_) {
      const std::string byte = e_.reg(RegClass::kB32);
      e_.ins(space, ".u8 ", byte, ", ", addr);
      return predicate("ne", ".u32", byte, "0");
    }
    const std::string r = e_.reg(classOf(buf.dtype));
    e_.ins(space, arith(buf.dtype), " ", r, ", ", addr);
    return r;
  }

  void storeElement(int buffer, const std::vector<Affine>& index, const Operand& value) {
    const choir::Buffer& buf = m_.buffers[buffer];
    const std::string addr = address(buffer, index);
    if (buf.dtype == DType::bool_) {
      const std::string byte = e_.reg(RegClass::kB32);
      e_.ins("selp.u32 ", byte, ", 1, 0, ", value);
      e_.ins("st.global.u8 ", addr, ", ", byte);
      return;
    }
    e_.ins("st.global", arith(buf.dtype), " ", addr, ", ", value);
  }

  // --- expressions --------------------------------------------------------

  absl::StatusOr<Operand> expr(const ExprRef& e) {
    const int k = numbers_.number(e);
    if (auto it = cse_.find(k); it != cse_.end()) return it->second;
    Operand v;
    switch (e->kind) {
      case ExprKind::kLoad:
        v = loadElement(e->buffer, e->index);
        break;
      case ExprKind::kConstant: {
        ACCY_ASSIGN_OR_RETURN(v, constant(e->dtype, e->constant));
        break;
      }
      case ExprKind::kIndex: {
        const std::string i = materialize(affine(e->index[0]));
        ACCY_ASSIGN_OR_RETURN(v, convert(i, wide_ ? DType::i64 : DType::i32, e->dtype));
        break;
      }
      case ExprKind::kOp: {
        std::vector<Operand> a;
        for (const ExprRef& x : e->args) {
          ACCY_ASSIGN_OR_RETURN(Operand av, expr(x));
          a.push_back(av);
        }
        ACCY_ASSIGN_OR_RETURN(v, opValue(*e, a));
        break;
      }
    }
    remember(k, v);
    return v;
  }

  absl::StatusOr<Operand> opValue(const Expr& e, const std::vector<Operand>& a) {
    const DType arg = e.args.empty() ? e.dtype : e.args[0]->dtype;
    switch (e.op) {
      case OpCode::kAdd:
      case OpCode::kSub:
      case OpCode::kMul:
      case OpCode::kDiv:
      case OpCode::kMax:
      case OpCode::kMin:
      case OpCode::kPow:
        return binary(e.op, e.dtype, a[0], a[1]);
      case OpCode::kNeg:
      case OpCode::kAbs:
      case OpCode::kSqrt:
      case OpCode::kSin:
      case OpCode::kCos:
      case OpCode::kExp:
      case OpCode::kLog:
      case OpCode::kTanh:
      case OpCode::kSigmoid:
        return unary(e.op, e.dtype, a[0]);
      case OpCode::kLt:
      case OpCode::kLe:
      case OpCode::kGt:
      case OpCode::kGe:
      case OpCode::kEq:
      case OpCode::kNe:
        return compare(e.op, arg, a[0], a[1]);
      case OpCode::kWhere:
        return where(e.dtype, a[0], a[1], a[2]);
      case OpCode::kCast:
        return convert(a[0], arg, e.dtype);
      default:
        break;
    }
    return unimplemented(strCat("op ", tensor::opName(e.op), " in kernel ", k_.name));
  }

  std::string fresh(DType d) { return e_.reg(classOf(d)); }

  absl::StatusOr<Operand> binary(OpCode op, DType d, const Operand& x, const Operand& y) {
    const bool flt = tensor::isFloating(d);
    const char* t = arith(d);
    std::string r = fresh(d);
    switch (op) {
      case OpCode::kAdd:
        e_.ins(flt ? "add.rn" : "add", t, " ", r, ", ", x, ", ", y);
        return r;
      case OpCode::kSub:
        e_.ins(flt ? "sub.rn" : "sub", t, " ", r, ", ", x, ", ", y);
        return r;
      case OpCode::kMul:
        e_.ins(flt ? "mul.rn" : "mul.lo", t, " ", r, ", ", x, ", ", y);
        return r;
      case OpCode::kDiv: {
        if (flt) {
          e_.ins("div.rn", t, " ", r, ", ", x, ", ", y);
          return r;
        }
        // x / 0 = 0 and x / -1 = -x (wrapping), as on every backend; the
        // divisor given to div is never 0 or -1.
        const std::string zero = predicate("eq", t, y, "0");
        const std::string minus_one = predicate("eq", t, y, "-1");
        const std::string either = e_.reg(RegClass::kPred);
        e_.ins("or.pred ", either, ", ", zero, ", ", minus_one);
        const std::string safe = fresh(d), q = fresh(d), n = fresh(d), m1 = fresh(d);
        e_.ins("selp", t, " ", safe, ", 1, ", y, ", ", either);
        e_.ins("div", t, " ", q, ", ", x, ", ", safe);
        e_.ins("neg", t, " ", n, ", ", x);
        e_.ins("selp", t, " ", m1, ", ", n, ", ", q, ", ", minus_one);
        e_.ins("selp", t, " ", r, ", 0, ", m1, ", ", zero);
        return r;
      }
      case OpCode::kMax:
      case OpCode::kMin: {
        const bool mx = op == OpCode::kMax;
        if (d == DType::bool_) {
          e_.ins(mx ? "or.pred " : "and.pred ", r, ", ", x, ", ", y);
          return r;
        }
        if (!flt) {
          e_.ins(mx ? "max" : "min", t, " ", r, ", ", x, ", ", y);
          return r;
        }
        // NaN in either operand gives NaN: x >= y picks x, a NaN y fails
        // the comparison and is picked, a NaN x is picked last.
        const std::string pick = predicate(mx ? "ge" : "le", t, x, y);
        const std::string chosen = fresh(d);
        e_.ins("selp", t, " ", chosen, ", ", x, ", ", y, ", ", pick);
        const std::string nan = predicate("nan", t, x, x);
        e_.ins("selp", t, " ", r, ", ", x, ", ", chosen, ", ", nan);
        return r;
      }
      case OpCode::kPow:
        if (!flt) return intPow(d, x, y);
        return transcendental(op, d, x, y);
      default:
        break;
    }
    return unimplemented(strCat("binary op ", tensor::opName(op)));
  }

  absl::StatusOr<Operand> unary(OpCode op, DType d, const Operand& x) {
    const bool flt = tensor::isFloating(d);
    const char* t = arith(d);
    switch (op) {
      case OpCode::kNeg: {
        std::string r = fresh(d);
        e_.ins("neg", t, " ", r, ", ", x);
        return r;
      }
      case OpCode::kAbs: {
        std::string r = fresh(d);
        if (flt) {
          e_.ins("abs", t, " ", r, ", ", x);
          return r;
        }
        // Wrapping: abs(INT_MIN) = INT_MIN.
        const std::string negative = predicate("lt", t, x, "0");
        const std::string n = fresh(d);
        e_.ins("neg", t, " ", n, ", ", x);
        e_.ins("selp", t, " ", r, ", ", n, ", ", x, ", ", negative);
        return r;
      }
      case OpCode::kSqrt: {
        std::string r = fresh(d);
        e_.ins("sqrt.rn", t, " ", r, ", ", x);
        return r;
      }
      default:
        return transcendental(op, d, x, "");
    }
  }

  // Exact mode: the algorithms of elementary.h over PtxOps. Fast mode (f32
  // only; PTX has no f64 approximations): the hardware approximations.
  absl::StatusOr<Operand> transcendental(OpCode op, DType d, const Operand& x, const Operand& y) {
    if (!tensor::isFloating(d)) return unimplemented(strCat(tensor::opName(op), " on ", tensor::dtypeName(d)));
    const bool fast = t_.mode == ArithmeticMode::kFast && d == DType::f32;
    PtxOps o(e_, d == DType::f64);
    auto approx = [&](const char* inst, const Operand& v) {
      std::string r = fresh(d);
      e_.ins(inst, " ", r, ", ", v);
      return r;
    };
    auto scaled = [&](const Operand& v, float k) {
      std::string c = fresh(d), r = fresh(d);
      e_.ins("mov.f32 ", c, ", ", f32Literal(k));
      e_.ins("mul.rn.f32 ", r, ", ", v, ", ", c);
      return r;
    };
    switch (op) {
      case OpCode::kSin:
        return fast ? approx("sin.approx.f32", x) : math::sinOf(o, x);
      case OpCode::kCos:
        return fast ? approx("cos.approx.f32", x) : math::cosOf(o, x);
      case OpCode::kExp:
        return fast ? approx("ex2.approx.f32", scaled(x, kLog2E)) : math::expOf(o, x);
      case OpCode::kLog:
        return fast ? scaled(approx("lg2.approx.f32", x), kLn2) : math::logOf(o, x);
      case OpCode::kTanh:
        if (fast && t_.sm >= 75) {
          need(70, 75);
          return approx("tanh.approx.f32", x);
        }
        return math::tanhOf(o, x);
      case OpCode::kSigmoid: {
        if (!fast) return math::sigmoidOf(o, x);
        // 1 / (1 + 2^(-x log2 e)); the division is div.rn.
        const std::string e = approx("ex2.approx.f32", scaled(x, -kLog2E));
        const std::string one = fresh(d), sum = fresh(d), r = fresh(d);
        e_.ins("mov.f32 ", one, ", ", f32Literal(1.0f));
        e_.ins("add.rn.f32 ", sum, ", ", one, ", ", e);
        e_.ins("div.rn.f32 ", r, ", ", one, ", ", sum);
        return r;
      }
      case OpCode::kPow:
        return math::powOf(o, x, y);
      default:
        break;
    }
    return unimplemented(strCat("op ", tensor::opName(op)));
  }

  absl::StatusOr<Operand> compare(OpCode op, DType d, const Operand& x, const Operand& y) {
    const bool flt = tensor::isFloating(d);
    const char* name = "";
    switch (op) {
      case OpCode::kLt:
        name = "lt";
        break;
      case OpCode::kLe:
        name = "le";
        break;
      case OpCode::kGt:
        name = "gt";
        break;
      case OpCode::kGe:
        name = "ge";
        break;
      case OpCode::kEq:
        name = "eq";
        break;
      case OpCode::kNe:
        name = flt ? "neu" : "ne";  // NaN != NaN
        break;
      default:
        return unimplemented(strCat("compare ", tensor::opName(op)));
    }
    if (d == DType::bool_) {
      // Compare bools as 0/1 integers.
      const std::string xi = e_.reg(RegClass::kB32), yi = e_.reg(RegClass::kB32);
      e_.ins("selp.s32 ", xi, ", 1, 0, ", x);
      e_.ins("selp.s32 ", yi, ", 1, 0, ", y);
      return predicate(name, ".s32", xi, yi);
    }
    return predicate(name, arith(d), x, y);
  }

  absl::StatusOr<Operand> where(DType d, const Operand& c, const Operand& x, const Operand& y) {
    std::string r = fresh(d);
    if (d == DType::bool_) {
      const std::string a = e_.reg(RegClass::kPred), nc = e_.reg(RegClass::kPred), b = e_.reg(RegClass::kPred);
      e_.ins("and.pred ", a, ", ", c, ", ", x);
      e_.ins("not.pred ", nc, ", ", c);
      e_.ins("and.pred ", b, ", ", nc, ", ", y);
      e_.ins("or.pred ", r, ", ", a, ", ", b);
      return r;
    }
    e_.ins("selp", arith(d), " ", r, ", ", x, ", ", y, ", ", c);
    return r;
  }

  // Integer pow of docs/SEMANTICS.md (compiler/tensor/scalar_ops.cc's
  // intPow): a negative exponent gives 1 for base 1, +-1 for base -1 (by
  // the exponent's parity), 0 otherwise; else square-and-multiply,
  // wrapping in the dtype's width.
  absl::StatusOr<Operand> intPow(DType d, const Operand& base, const Operand& exponent) {
    const char* t = arith(d);
    const char* bits = wide64(d) ? ".b64" : ".b32";
    const std::string r = fresh(d), bb = fresh(d), ex = fresh(d);
    e_.ins("mov", bits, " ", r, ", 1");
    e_.ins("mov", bits, " ", bb, ", ", base);
    e_.ins("mov", bits, " ", ex, ", ", exponent);
    const std::string head = e_.label(), done = e_.label();
    e_.place(head);
    const std::string stop = e_.reg(RegClass::kPred);
    e_.ins("setp.le", t, " ", stop, ", ", ex, ", 0");
    e_.ins("@", stop, " bra ", done);
    const std::string low = fresh(d), odd = e_.reg(RegClass::kPred), prod = fresh(d);
    e_.ins("and", bits, " ", low, ", ", ex, ", 1");
    e_.ins("setp.ne", t, " ", odd, ", ", low, ", 0");
    e_.ins("mul.lo", t, " ", prod, ", ", r, ", ", bb);
    e_.ins("selp", t, " ", r, ", ", prod, ", ", r, ", ", odd);
    e_.ins("mul.lo", t, " ", bb, ", ", bb, ", ", bb);
    e_.ins("shr", t, " ", ex, ", ", ex, ", 1");
    e_.ins("bra ", head);
    e_.place(done);
    // Negative exponents (the loop ran no step).
    const std::string low_bit = fresh(d), for_minus_one = fresh(d), neg1 = fresh(d), neg2 = fresh(d), out = fresh(d);
    e_.ins("and", bits, " ", low_bit, ", ", exponent, ", 1");
    const std::string even = predicate("eq", t, low_bit, "0");
    e_.ins("selp", t, " ", for_minus_one, ", 1, -1, ", even);
    const std::string is_m1 = predicate("eq", t, base, "-1");
    e_.ins("selp", t, " ", neg1, ", ", for_minus_one, ", 0, ", is_m1);
    const std::string is_1 = predicate("eq", t, base, "1");
    e_.ins("selp", t, " ", neg2, ", 1, ", neg1, ", ", is_1);
    const std::string negative = predicate("lt", t, exponent, "0");
    e_.ins("selp", t, " ", out, ", ", neg2, ", ", r, ", ", negative);
    return out;
  }

  // Cast semantics of docs/SEMANTICS.md.
  absl::StatusOr<Operand> convert(const Operand& v, DType from, DType to) {
    if (from == to) return v;
    if (to == DType::bool_) {
      if (tensor::isFloating(from)) {
        ACCY_ASSIGN_OR_RETURN(Operand zero, constant(from, 0));
        return predicate("neu", arith(from), v, zero);  // NaN != 0
      }
      return predicate("ne", arith(from), v, "0");
    }
    std::string r = fresh(to);
    if (from == DType::bool_) {
      if (to == DType::f32) {
        e_.ins("selp.f32 ", r, ", ", f32Literal(1), ", ", f32Literal(0), ", ", v);
      } else if (to == DType::f64) {
        e_.ins("selp.f64 ", r, ", ", f64Literal(1), ", ", f64Literal(0), ", ", v);
      } else {
        e_.ins("selp", arith(to), " ", r, ", 1, 0, ", v);
      }
      return r;
    }
    const bool ff = tensor::isFloating(from), tf = tensor::isFloating(to);
    if (ff && tf) {
      e_.ins(to == DType::f32 ? "cvt.rn.f32.f64 " : "cvt.f64.f32 ", r, ", ", v);
      return r;
    }
    if (!ff && tf) {
      e_.ins("cvt.rn", arith(to), arith(from), " ", r, ", ", v);
      return r;
    }
    if (!ff && !tf) {
      // i32 -> i64 sign-extends; i64 -> i32 keeps the low 32 bits (wraps).
      e_.ins(to == DType::i64 ? "cvt.s64.s32 " : "cvt.u32.u64 ", r, ", ", v);
      return r;
    }
    // Float to integer: truncation, saturating at the range; NaN -> 0.
    const bool i64 = to == DType::i64;
    ACCY_ASSIGN_OR_RETURN(Operand lo, constant(from, i64 ? -9223372036854775808.0 : -2147483648.0));
    ACCY_ASSIGN_OR_RETURN(Operand hi, constant(from, i64 ? 9223372036854775808.0 : 2147483648.0));
    const std::string too_low = predicate("lt", arith(from), v, lo);
    const std::string too_high = predicate("ge", arith(from), v, hi);
    const std::string nan = predicate("nan", arith(from), v, v);
    const std::string c = fresh(to), r1 = fresh(to), r2 = fresh(to);
    e_.ins("cvt.rzi", arith(to), arith(from), " ", c, ", ", v);
    const std::string min = i64 ? "0x8000000000000000" : "-2147483648";
    const std::string max = i64 ? "0x7FFFFFFFFFFFFFFF" : "2147483647";
    e_.ins("selp", arith(to), " ", r1, ", ", min, ", ", c, ", ", too_low);
    e_.ins("selp", arith(to), " ", r2, ", ", max, ", ", r1, ", ", too_high);
    e_.ins("selp", arith(to), " ", r, ", 0, ", r2, ", ", nan);
    return r;
  }

  // --- reductions ----------------------------------------------------------

  absl::StatusOr<Operand> identity(OpCode combiner, DType d) {
    return constant(d, choir::combinerIdentity(combiner, d));
  }

  // acc = combine(acc, x), in place.
  absl::Status accumulate(OpCode combiner, DType d, const std::string& acc, const Operand& x) {
    ACCY_ASSIGN_OR_RETURN(Operand c, binary(combiner, d, acc, x));
    e_.ins("mov", d == DType::bool_ ? ".pred" : wide64(d) ? ".b64" : ".b32", " ", acc, ", ", c);
    return absl::OkStatus();
  }

  absl::StatusOr<Operand> finishMean(const Stmt& s, const Operand& acc) {
    if (s.mean_count == 0) return acc;
    const DType d = m_.buffers[s.buffer].dtype;
    ACCY_ASSIGN_OR_RETURN(Operand n, constant(d, static_cast<double>(s.mean_count)));
    return binary(OpCode::kDiv, d, acc, n);
  }

  // Nested counted loops over `domain` (from `i` on), body innermost.
  absl::Status domainLoops(const std::vector<LoopHeader>& domain, size_t i, const std::function<absl::Status()>& body) {
    if (i == domain.size()) return body();
    return strided(imm(0), imm(domain[i].extent), imm(1), [&](const std::string& x) {
      vars_[domain[i].var] = x;
      return domainLoops(domain, i + 1, body);
    });
  }

  // One thread walks the whole domain.
  absl::Status reduceSerial(const Stmt& s) {
    const DType d = m_.buffers[s.buffer].dtype;
    ACCY_ASSIGN_OR_RETURN(Operand id, identity(s.combiner, d));
    const std::string acc = id;  // a fresh register, updated in place
    ACCY_RETURN_IF_ERROR(domainLoops(s.domain, 0, [&]() -> absl::Status {
      ACCY_ASSIGN_OR_RETURN(Operand x, expr(s.value));
      return accumulate(s.combiner, d, acc, x);
    }));
    ACCY_ASSIGN_OR_RETURN(Operand result, finishMean(s, acc));
    storeElement(s.buffer, s.index, result);
    return absl::OkStatus();
  }

  // kElementwise and kSerialReduce: a grid-stride loop, one output per
  // thread and step.
  absl::Status perOutput(int64_t outputs) {
    out_.blocks = std::clamp<int64_t>((outputs + wg_ - 1) / wg_, 1, t_.max_grid_x);
    std::string gid, step;
    if (wide_) {
      gid = idxReg();
      step = idxReg();
      const std::string t = idxOf(tid_);
      e_.ins("mul.wide.u32 ", gid, ", ", ctaid_, ", ", wg_);
      e_.ins("add.u64 ", gid, ", ", gid, ", ", t);
      e_.ins("mul.wide.u32 ", step, ", ", nctaid_, ", ", wg_);
    } else {
      gid = e_.reg(RegClass::kB32);
      step = e_.reg(RegClass::kB32);
      e_.ins("mad.lo.u32 ", gid, ", ", ctaid_, ", ", wg_, ", ", tid_);
      e_.ins("mul.lo.u32 ", step, ", ", nctaid_, ", ", wg_);
    }
    const Stmt& leaf = *nest_.leaf;
    return strided(gid, imm(outputs), step, [&](const std::string& x) -> absl::Status {
      decompose(x, nest_.loops);
      if (leaf.kind == StmtKind::kStore) {
        ACCY_ASSIGN_OR_RETURN(Operand v, expr(leaf.value));
        storeElement(leaf.buffer, leaf.index, v);
        return absl::OkStatus();
      }
      return reduceSerial(leaf);
    });
  }

  int elemBytes(DType d) const { return wide64(d) ? 8 : 4; }  // bool as a 32-bit 0/1 in shared memory

  // Shared-memory slot access for the tree (bool values as 0/1 words).
  void sharedStore(DType d, const std::string& addr, const Operand& v) {
    if (d == DType::bool_) {
      const std::string w = e_.reg(RegClass::kB32);
      e_.ins("selp.u32 ", w, ", 1, 0, ", v);
      e_.ins("st.shared.u32 ", addr, ", ", w);
      return;
    }
    e_.ins("st.shared", arith(d), " ", addr, ", ", v);
  }
  std::string sharedLoad(DType d, const std::string& addr) {
    if (d == DType::bool_) {
      const std::string w = e_.reg(RegClass::kB32);
      e_.ins("ld.shared.u32 ", w, ", ", addr);
      return predicate("ne", ".u32", w, "0");
    }
    const std::string r = fresh(d);
    e_.ins("ld.shared", arith(d), " ", r, ", ", addr);
    return r;
  }

  // The value of `v` in lane (lane + offset) of the warp (its own beyond
  // the last lane); 64-bit values move as two halves.
  std::string shuffleDown(DType d, const Operand& v, int offset, const std::string& mask) {
    auto shfl = [&](const std::string& x) {
      const std::string r = e_.reg(RegClass::kB32);
      e_.ins("shfl.sync.down.b32 ", r, ", ", x, ", ", offset, ", 31, ", mask);
      return r;
    };
    if (d == DType::bool_) {
      const std::string w = e_.reg(RegClass::kB32);
      e_.ins("selp.u32 ", w, ", 1, 0, ", v);
      return predicate("ne", ".u32", shfl(w), "0");
    }
    const std::string r = fresh(d);
    if (wide64(d)) {
      const std::string lo = e_.reg(RegClass::kB32), hi = e_.reg(RegClass::kB32);
      e_.ins("mov.b64 {", lo, ", ", hi, "}, ", v);
      const std::string slo = shfl(lo), shi = shfl(hi);
      e_.ins("mov.b64 ", r, ", {", slo, ", ", shi, "}");
      return r;
    }
    const std::string w = e_.reg(RegClass::kB32);
    e_.ins("mov.b32 ", w, ", ", v);
    e_.ins("mov.b32 ", r, ", ", shfl(w));
    return r;
  }

  // kTreeReduce: one block per output (grid-stride over outputs), or
  // nest_.split blocks per output; the block's threads stride over the
  // domain, then combine in shared memory down to 32 partial results and
  // the first warp finishes with shfl.sync.down.
  absl::Status treeReduce(int64_t outputs, int64_t domain) {
    const Stmt& s = *nest_.leaf;
    const DType d = m_.buffers[s.buffer].dtype;
    // Split (nest_.split = P > 0): P blocks per output, part p of output o
    // being block o * P + p, starting at p * block size + tid and striding
    // by P * block size; its uncombined result goes to partials[o * P + p]
    // and the next kernel (from the mapping pass) combines the parts.
    const int64_t split = nest_.split;
    const int64_t blocks = outputs * std::max<int64_t>(split, 1);
    out_.blocks = std::clamp<int64_t>(blocks, 1, t_.max_grid_x);
    const int eb = elemBytes(d);
    std::string mine;  // this thread's slot
    if (wg_ >= 64) {
      shared_bytes_ = static_cast<int>(wg_) * eb;
      const std::string base = e_.reg(RegClass::kB32);
      mine = e_.reg(RegClass::kB32);
      e_.ins("mov.u32 ", base, ", ", shared_name());
      e_.ins("mad.lo.u32 ", mine, ", ", tid_, ", ", eb, ", ", base);
    }
    const std::string lid = idxOf(tid_);
    const std::string first = idxOf(ctaid_), step = idxOf(nctaid_);
    return strided(first, imm(blocks), step, [&](const std::string& block) -> absl::Status {
      Operand start = lid, stride = imm(wg_);
      if (split > 0) {
        const std::string o = idxReg(), part = idxReg(), begin = idxReg();
        e_.ins("div", ut(), " ", o, ", ", block, ", ", imm(split));
        e_.ins("rem", ut(), " ", part, ", ", block, ", ", imm(split));
        e_.ins("mad.lo", st(), " ", begin, ", ", part, ", ", imm(wg_), ", ", lid);
        decompose(o, nest_.loops);
        start = begin;
        stride = imm(split * wg_);
      } else {
        decompose(block, nest_.loops);
      }
      ACCY_ASSIGN_OR_RETURN(Operand acc, identity(s.combiner, d));
      const std::map<int, std::string> outer = vars_;
      ACCY_RETURN_IF_ERROR(strided(start, imm(domain), stride, [&](const std::string& r) -> absl::Status {
        vars_ = outer;
        decompose(r, s.domain);
        ACCY_ASSIGN_OR_RETURN(Operand x, expr(s.value));
        return accumulate(s.combiner, d, acc, x);
      }));
      vars_ = outer;
      if (wg_ >= 64) {
        sharedStore(d, strCat("[", mine, "]"), acc);
        e_.op("bar.sync 0");
        for (int64_t half = wg_ / 2; half >= 32; half /= 2) {
          const std::string active = predicate("lt", ".u32", tid_, strCat(half));
          ACCY_RETURN_IF_ERROR(when(active, [&]() -> absl::Status {
            const std::string other = sharedLoad(d, strCat("[", mine, "+", half * eb, "]"));
            ACCY_RETURN_IF_ERROR(accumulate(s.combiner, d, acc, other));
            sharedStore(d, strCat("[", mine, "]"), acc);
            return absl::OkStatus();
          }));
          e_.op("bar.sync 0");
        }
      }
      // The first warp: shuffles over min(32, block) lanes.
      const int64_t lanes = std::min<int64_t>(wg_, 32);
      const std::string mask = lanes == 32 ? "-1" : strCat((int64_t{1} << lanes) - 1);
      const std::string warp0 = predicate("lt", ".u32", tid_, "32");
      ACCY_RETURN_IF_ERROR(when(warp0, [&]() -> absl::Status {
        for (int64_t off = lanes / 2; off >= 1; off /= 2) {
          const std::string other = shuffleDown(d, acc, static_cast<int>(off), mask);
          ACCY_RETURN_IF_ERROR(accumulate(s.combiner, d, acc, other));
        }
        const std::string lead = predicate("eq", ".u32", tid_, "0");
        return when(lead, [&]() -> absl::Status {
          if (split > 0) {
            vars_[m_.num_vars] = block;  // a variable id no loop uses
            storeElement(nest_.partials, {Affine::var(m_.num_vars)}, acc);
            return absl::OkStatus();
          }
          ACCY_ASSIGN_OR_RETURN(Operand result, finishMean(s, acc));
          storeElement(s.buffer, s.index, result);
          return absl::OkStatus();
        });
      }));
      if (wg_ >= 64) e_.op("bar.sync 0");  // the slots are reused by the next output
      return absl::OkStatus();
    });
  }

  // --- the tiled product ----------------------------------------------------

  // kTiledProduct (passes/gpu_map.h): a block of T x T threads computes a
  // TR x TR block of outputs, R = nest_.micro (grid-stride over blocks and
  // batch points). Thread (ty, tx) = (tid / T, tid % T) owns rows
  // row0 + ty + i T and columns col0 + tx + j T for i, j < R (a strided
  // micro-tile: coalesced stores, conflict-free shared reads), in R * R
  // accumulator registers. For each T-long slice of the domain its threads
  // stage lhs (TR rows x T points; thread (ty, tx) stages rows ty + i T at
  // point kt + tx) and rhs (T points x TR columns; point kt + ty, columns
  // tx + j T) in shared memory, guarded (out-of-range slots hold 0), then
  // each thread accumulates each of its outputs over the slice in domain
  // order (mul.rn, add.rn: the serial reduction's rounding, so results do
  // not depend on R), over exactly min(T, K - kt) points. The stores are
  // guarded per output. With tf32 (R = 1 only) the first two warps
  // multiply the staged tiles (rounded to TF32 when staged) with mma.sync
  // m16n8k8 instead.
  absl::Status tiledProduct() {
    const Stmt& s = *nest_.leaf;
    const DType d = m_.buffers[s.buffer].dtype;
    const int64_t T = nest_.tile, M = nest_.micro, TM = T * M;
    const LoopHeader& row_loop = nest_.loops[nest_.row];
    const LoopHeader& col_loop = nest_.loops[nest_.col];
    const LoopHeader& dom = s.domain[0];
    const int64_t rows = row_loop.extent, cols = col_loop.extent, K = dom.extent;
    const bool mma = o_.tf32;
    if (M < 1 || (mma && M != 1)) {
      return makeError(ErrorKind::kCompileFailed,
                       strCat("PTX emitter: internal error: kernel ", k_.name, " is register-blocked ", M, "x", M,
                              mma ? "; the tf32 mma.sync path computes one output per thread (micro tile 1)"
                                  : "; the micro tile must be at least 1"));
    }
    const int64_t blocks_r = (rows + TM - 1) / TM, blocks_c = (cols + TM - 1) / TM;
    std::vector<LoopHeader> batch;
    int64_t batches = 1;
    for (int i : nest_.batch) {
      batch.push_back(nest_.loops[i]);
      batches *= nest_.loops[i].extent;
    }
    const int64_t tiles = blocks_r * blocks_c * batches;
    out_.blocks = std::clamp<int64_t>(tiles, 1, t_.max_grid_x);
    int log_t = 0;
    while ((int64_t{1} << log_t) < T) ++log_t;
    if ((int64_t{1} << log_t) != T) return unimplemented(strCat("kernel ", k_.name, ": tile ", T, " is not a power of two"));
    if (mma) need(70, 80);
    const int eb = mma ? 4 : elemBytes(d);
    // As: TM rows x T points (row-major); Bs: T points x TM columns.
    const int64_t tile_bytes = TM * T * eb;
    if (2 * tile_bytes > 48 * 1024) {
      return unimplemented(strCat("kernel ", k_.name, ": a ", T, "x", T, " tile blocked ", M, "x", M, " needs ",
                                  2 * tile_bytes, " bytes of shared memory (48 KiB allowed)"));
    }
    shared_bytes_ = static_cast<int>(2 * tile_bytes);

    // Thread (ty, tx) of the block: tid = ty * T + tx.
    const std::string tx32 = e_.reg(RegClass::kB32), ty32 = e_.reg(RegClass::kB32);
    e_.ins("and.b32 ", tx32, ", ", tid_, ", ", T - 1);
    e_.ins("shr.u32 ", ty32, ", ", tid_, ", ", log_t);
    const std::string tx = idxOf(tx32), ty = idxOf(ty32);
    const std::string sbase = e_.reg(RegClass::kB32);
    e_.ins("mov.u32 ", sbase, ", ", shared_name());
    // Where this thread stages: As[ty + i T][tx] = a_slot + i T T eb and
    // Bs[ty][tx + j T] = b_slot + j T eb.
    const std::string a_slot = e_.reg(RegClass::kB32), b_slot = e_.reg(RegClass::kB32);
    e_.ins("mad.lo.u32 ", a_slot, ", ", tid_, ", ", eb, ", ", sbase);
    e_.ins("mad.lo.u32 ", b_slot, ", ", ty32, ", ", TM * eb, ", ", sbase);
    e_.ins("mad.lo.u32 ", b_slot, ", ", tx32, ", ", eb, ", ", b_slot);
    e_.ins("add.u32 ", b_slot, ", ", b_slot, ", ", tile_bytes);
    // Where it reads in the fma path: As[ty + i T][kk] = a_row + (i T T + kk) eb
    // and Bs[kk][tx + j T] = b_col + (kk TM + j T) eb.
    const std::string a_row = e_.reg(RegClass::kB32), b_col = e_.reg(RegClass::kB32);
    e_.ins("mad.lo.u32 ", a_row, ", ", ty32, ", ", T * eb, ", ", sbase);
    e_.ins("mad.lo.u32 ", b_col, ", ", tx32, ", ", eb, ", ", sbase);
    e_.ins("add.u32 ", b_col, ", ", b_col, ", ", tile_bytes);
    // The mma path: warp w < 2 computes columns [8w, 8w + 8) of the tile;
    // lane = 4 g + t4.
    std::string in_mma, a_frag, b_frag, g32, t4_32, w32;
    if (mma) {
      const std::string lane = e_.reg(RegClass::kB32);
      w32 = e_.reg(RegClass::kB32);
      g32 = e_.reg(RegClass::kB32);
      t4_32 = e_.reg(RegClass::kB32);
      e_.ins("and.b32 ", lane, ", ", tid_, ", 31");
      e_.ins("shr.u32 ", w32, ", ", tid_, ", 5");
      e_.ins("shr.u32 ", g32, ", ", lane, ", 2");
      e_.ins("and.b32 ", t4_32, ", ", lane, ", 3");
      in_mma = predicate("lt", ".u32", tid_, "64");
      // A fragment base As[g][t4]; B fragment base Bs[t4][8w + g].
      a_frag = e_.reg(RegClass::kB32);
      b_frag = e_.reg(RegClass::kB32);
      const std::string tmp = e_.reg(RegClass::kB32), tmp2 = e_.reg(RegClass::kB32);
      e_.ins("mad.lo.u32 ", tmp, ", ", g32, ", ", T, ", ", t4_32);
      e_.ins("mad.lo.u32 ", a_frag, ", ", tmp, ", 4, ", sbase);
      e_.ins("mad.lo.u32 ", tmp2, ", ", t4_32, ", ", T, ", ", g32);
      e_.ins("mad.lo.u32 ", tmp2, ", ", w32, ", 8, ", tmp2);
      e_.ins("mad.lo.u32 ", b_frag, ", ", tmp2, ", 4, ", sbase);
      e_.ins("add.u32 ", b_frag, ", ", b_frag, ", ", tile_bytes);
    }

    const std::string first = idxOf(ctaid_), step = idxOf(nctaid_);
    return strided(first, imm(tiles), step, [&](const std::string& tile) -> absl::Status {
      // tile = ((batch...) * blocks_r + br) * blocks_c + bc
      const std::string bc = idxReg(), rest = idxReg(), br = idxReg();
      e_.ins("rem", ut(), " ", bc, ", ", tile, ", ", imm(blocks_c));
      e_.ins("div", ut(), " ", rest, ", ", tile, ", ", imm(blocks_c));
      e_.ins("rem", ut(), " ", br, ", ", rest, ", ", imm(blocks_r));
      if (!batch.empty()) {
        const std::string b_index = idxReg();
        e_.ins("div", ut(), " ", b_index, ", ", rest, ", ", imm(blocks_r));
        decompose(b_index, batch);
      }
      const std::string r0 = idxReg(), c0 = idxReg();
      e_.ins("mul.lo", st(), " ", r0, ", ", br, ", ", imm(TM));
      e_.ins("mul.lo", st(), " ", c0, ", ", bc, ", ", imm(TM));
      // This thread's rows row[i] = r0 + ty + i T and columns col[j] =
      // c0 + tx + j T, and whether each is in range.
      std::vector<std::string> row(M), col(M), row_ok(M), col_ok(M);
      for (int64_t i = 0; i < M; ++i) {
        row[i] = idxReg();
        col[i] = idxReg();
        if (i == 0) {
          e_.ins("add", st(), " ", row[i], ", ", r0, ", ", ty);
          e_.ins("add", st(), " ", col[i], ", ", c0, ", ", tx);
        } else {
          e_.ins("add", st(), " ", row[i], ", ", row[0], ", ", imm(i * T));
          e_.ins("add", st(), " ", col[i], ", ", col[0], ", ", imm(i * T));
        }
        row_ok[i] = predicate("lt", ut(), row[i], imm(rows));
        col_ok[i] = predicate("lt", ut(), col[i], imm(cols));
      }
      const std::map<int, std::string> outer = vars_;

      std::vector<std::string> acc;  // acc[i * M + j]: output (row[i], col[j])
      std::vector<std::string> frag;  // mma accumulators c0..c3
      if (mma) {
        for (int i = 0; i < 4; ++i) {
          frag.push_back(e_.reg(RegClass::kF32));
          e_.ins("mov.f32 ", frag.back(), ", ", f32Literal(0));
        }
      } else {
        for (int64_t i = 0; i < M * M; ++i) {
          ACCY_ASSIGN_OR_RETURN(Operand a, identity(OpCode::kAdd, d));
          acc.push_back(a);
        }
      }

      // Stages slot = guard ? value : 0 (TF32-rounded for mma).
      auto stage = [&](const ExprRef& value, const std::string& guard, const std::string& slot) -> absl::Status {
        ACCY_ASSIGN_OR_RETURN(Operand x, constant(d, 0));
        const std::string staged = x;
        ACCY_RETURN_IF_ERROR(when(guard, [&]() -> absl::Status {
          ACCY_ASSIGN_OR_RETURN(Operand v, expr(value));
          e_.ins("mov", wide64(d) ? ".b64" : ".b32", " ", staged, ", ", v);
          return absl::OkStatus();
        }));
        if (mma) {
          const std::string t32 = e_.reg(RegClass::kB32);
          e_.ins("cvt.rna.tf32.f32 ", t32, ", ", staged);
          e_.ins("st.shared.b32 [", slot, "], ", t32);
        } else {
          e_.ins("st.shared", arith(d), " [", slot, "], ", staged);
        }
        return absl::OkStatus();
      };
      auto shifted = [](const std::string& reg, int64_t bytes) {
        return bytes == 0 ? reg : strCat(reg, "+", bytes);
      };

      // One slice of n domain points starting at kt (n and the tail known
      // here; kt a register or an immediate).
      auto slice = [&](const Operand& kt, int64_t n) -> absl::Status {
        // lhs(row[i], kt + tx) for each i.
        const std::string k_l = idxReg();
        e_.ins("add", st(), " ", k_l, ", ", materialize(kt), ", ", tx);
        const std::string in_l = n < T ? predicate("lt", ut(), tx, imm(n)) : "";
        for (int64_t i = 0; i < M; ++i) {
          std::string guard = row_ok[i];
          if (n < T) {
            guard = e_.reg(RegClass::kPred);
            e_.ins("and.pred ", guard, ", ", row_ok[i], ", ", in_l);
          }
          vars_ = outer;
          vars_[row_loop.var] = row[i];
          vars_[col_loop.var] = col[0];
          vars_[dom.var] = k_l;
          ACCY_RETURN_IF_ERROR(stage(nest_.lhs, guard, shifted(a_slot, i * T * T * eb)));
        }
        // rhs(kt + ty, col[j]) for each j.
        const std::string k_r = idxReg();
        e_.ins("add", st(), " ", k_r, ", ", materialize(kt), ", ", ty);
        const std::string in_r = n < T ? predicate("lt", ut(), ty, imm(n)) : "";
        for (int64_t j = 0; j < M; ++j) {
          std::string guard = col_ok[j];
          if (n < T) {
            guard = e_.reg(RegClass::kPred);
            e_.ins("and.pred ", guard, ", ", col_ok[j], ", ", in_r);
          }
          vars_ = outer;
          vars_[row_loop.var] = row[0];
          vars_[col_loop.var] = col[j];
          vars_[dom.var] = k_r;
          ACCY_RETURN_IF_ERROR(stage(nest_.rhs, guard, shifted(b_slot, j * T * eb)));
        }
        vars_ = outer;
        e_.op("bar.sync 0");
        if (mma) {
          ACCY_RETURN_IF_ERROR(when(in_mma, [&]() -> absl::Status {
            for (int64_t ks = 0; ks * 8 < n; ++ks) {
              std::string a[4], bb[2];
              const int64_t a_off[4] = {0, 8 * T * 4, 4 * 4, 8 * T * 4 + 4 * 4};
              for (int i = 0; i < 4; ++i) {
                a[i] = e_.reg(RegClass::kB32);
                e_.ins("ld.shared.b32 ", a[i], ", [", a_frag, "+", ks * 8 * 4 + a_off[i], "]");
              }
              for (int i = 0; i < 2; ++i) {
                bb[i] = e_.reg(RegClass::kB32);
                e_.ins("ld.shared.b32 ", bb[i], ", [", b_frag, "+", (ks * 8 + 4 * i) * T * 4, "]");
              }
              e_.ins("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {", frag[0], ", ", frag[1], ", ", frag[2], ", ",
                     frag[3], "}, {", a[0], ", ", a[1], ", ", a[2], ", ", a[3], "}, {", bb[0], ", ", bb[1], "}, {", frag[0],
                     ", ", frag[1], ", ", frag[2], ", ", frag[3], "}");
            }
            return absl::OkStatus();
          }));
        } else {
          for (int64_t kk = 0; kk < n; ++kk) {
            std::vector<std::string> x(M), y(M);
            for (int64_t i = 0; i < M; ++i) {
              x[i] = sharedLoad(d, strCat("[", shifted(a_row, (i * T * T + kk) * eb), "]"));
            }
            for (int64_t j = 0; j < M; ++j) {
              y[j] = sharedLoad(d, strCat("[", shifted(b_col, (kk * TM + j * T) * eb), "]"));
            }
            for (int64_t i = 0; i < M; ++i) {
              for (int64_t j = 0; j < M; ++j) {
                ACCY_ASSIGN_OR_RETURN(Operand p, binary(OpCode::kMul, d, x[i], y[j]));
                ACCY_RETURN_IF_ERROR(accumulate(OpCode::kAdd, d, acc[i * M + j], p));
              }
            }
          }
        }
        e_.op("bar.sync 0");
        return absl::OkStatus();
      };

      const int64_t full = K / T, tail = K % T;
      if (full > 0) {
        ACCY_RETURN_IF_ERROR(strided(imm(0), imm(full * T), imm(T), [&](const std::string& kt) { return slice(kt, T); }));
      }
      if (tail > 0) ACCY_RETURN_IF_ERROR(slice(imm(full * T), tail));
      vars_ = outer;

      // Guarded stores.
      auto storeAt = [&](const std::string& r, const std::string& c, const std::string& ok,
                         const Operand& value) -> absl::Status {
        return when(ok, [&]() -> absl::Status {
          vars_ = outer;
          vars_[row_loop.var] = r;
          vars_[col_loop.var] = c;
          ACCY_ASSIGN_OR_RETURN(Operand result, finishMean(s, value));
          storeElement(s.buffer, s.index, result);
          return absl::OkStatus();
        });
      };
      auto inRange = [&](const std::string& r, const std::string& c) {
        const std::string ok = e_.reg(RegClass::kPred);
        const std::string rok = predicate("lt", ut(), r, imm(rows));
        const std::string cok = predicate("lt", ut(), c, imm(cols));
        e_.ins("and.pred ", ok, ", ", rok, ", ", cok);
        return ok;
      };
      if (!mma) {
        for (int64_t i = 0; i < M; ++i) {
          for (int64_t j = 0; j < M; ++j) {
            const std::string ok = e_.reg(RegClass::kPred);
            e_.ins("and.pred ", ok, ", ", row_ok[i], ", ", col_ok[j]);
            ACCY_RETURN_IF_ERROR(storeAt(row[i], col[j], ok, acc[i * M + j]));
          }
        }
      } else {
        ACCY_RETURN_IF_ERROR(when(in_mma, [&]() -> absl::Status {
          // c0: (g, 2 t4), c1: (g, 2 t4 + 1), c2: (g + 8, 2 t4), c3: (g + 8, 2 t4 + 1), columns offset by 8w.
          const std::string g = idxOf(g32), t4 = idxOf(t4_32), w = idxOf(w32);
          const std::string r_lo = idxReg(), r_hi = idxReg(), c_lo = idxReg(), c_hi = idxReg(), cw = idxReg();
          e_.ins("add", st(), " ", r_lo, ", ", r0, ", ", g);
          e_.ins("add", st(), " ", r_hi, ", ", r_lo, ", ", imm(8));
          e_.ins("mad.lo", st(), " ", cw, ", ", w, ", ", imm(8), ", ", c0);
          e_.ins("mad.lo", st(), " ", c_lo, ", ", t4, ", ", imm(2), ", ", cw);
          e_.ins("add", st(), " ", c_hi, ", ", c_lo, ", ", imm(1));
          ACCY_RETURN_IF_ERROR(storeAt(r_lo, c_lo, inRange(r_lo, c_lo), frag[0]));
          ACCY_RETURN_IF_ERROR(storeAt(r_lo, c_hi, inRange(r_lo, c_hi), frag[1]));
          ACCY_RETURN_IF_ERROR(storeAt(r_hi, c_lo, inRange(r_hi, c_lo), frag[2]));
          return storeAt(r_hi, c_hi, inRange(r_hi, c_hi), frag[3]);
        }));
      }
      vars_ = outer;
      return absl::OkStatus();
    });
  }

  const choir::Module& m_;
  const choir::Kernel& k_;
  const KernelOptions& o_;
  const TargetInfo& t_;
  Emitter e_;
  choir::GpuNest nest_;
  TranslatedKernel out_;
  bool wide_ = false;
  int64_t wg_ = 1;
  int shared_bytes_ = 0;
  int min_ptx_ = 0, min_sm_ = 0;
  std::string tid_, ctaid_, nctaid_;
  std::vector<std::string> base_;  // global base address per used buffer
  std::map<int, std::string> vars_;
  // Common subexpressions: value number -> register, for the values that
  // dominate the current point. A scope (a loop body, a guarded block)
  // forgets on exit what it added, by the log, at the cost of what it added.
  choir::ValueNumbering numbers_;
  absl::flat_hash_map<int, std::string> cse_;
  std::vector<int> cse_log_;
  void remember(int k, const std::string& v) {
    cse_.emplace(k, v);
    cse_log_.push_back(k);
  }
  void forgetSince(size_t mark) {
    while (cse_log_.size() > mark) {
      cse_.erase(cse_log_.back());
      cse_log_.pop_back();
    }
  }
};

}  // namespace

absl::StatusOr<TranslatedKernel> translateKernel(const choir::Module& module, const choir::Kernel& kernel,
                                                 const KernelOptions& options) {
  return Translator(module, kernel, options).run();
}

}  // namespace accy::ptx
