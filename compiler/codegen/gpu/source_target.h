// The primitives that the GPU targets writing source (WGSL, MSL) write the
// same way: comparisons, selection, logic, index arithmetic, builtins,
// loads and stores (buffers `buf<b>`, workgroup arrays `wg<i>`), variables
// and the structured blocks, over a SourceWriter. A target adds its types,
// index literals, how a bool is stored, loops and arithmetic.
#ifndef ACCY_COMPILER_CODEGEN_GPU_SOURCE_TARGET_H_
#define ACCY_COMPILER_CODEGEN_GPU_SOURCE_TARGET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "base/strings.h"
// What a source target's compile path uses with it: compileSourceProgram
// and the kernel emitter that drives the target.
#include "compiler/codegen/gpu/gpu_program.h"
#include "compiler/codegen/gpu/kernel_emitter.h"
#include "compiler/codegen/gpu/source_writer.h"
#include "compiler/codegen/gpu/target.h"
#include "compiler/tensor/scalar_ops.h"

namespace accy::gpu {

class SourceTarget : public Target {
 public:
  // What both languages' targets describe alike: the device's limits and
  // the mode asked for; loops per domain axis and unrolled slices (faster
  // for the shader compilers measured). The target adds its dtypes and
  // subgroups.
  SourceTarget(SourceWriter::Style style, const choir::Module& m, std::string name, int64_t max_workgroup_size,
               int64_t max_workgroups, int64_t workgroup_memory, ArithmeticMode mode)
      : w_(style), m_(m) {
    desc_.name = std::move(name);
    desc_.max_workgroup_size = max_workgroup_size;
    desc_.max_workgroups = max_workgroups;
    desc_.workgroup_memory_bytes = workgroup_memory;
    desc_.mode = mode;
    desc_.nested_domain_loops = true;
    desc_.unrolled_slices = true;
  }

  const TargetDesc& desc() const override { return desc_; }

  // Keeps the plan's workgroup size and buffers, then the target's start.
  absl::Status begin(const KernelPlan& plan) override {
    wg_ = plan.workgroup_size;
    used_ = plan.used_buffers;
    return start(plan);
  }

  // The number converted to the dtype: bools as the language's literals,
  // the others written by `literal`.
  Value constant(DType d, double v) override {
    const double c = tensor::convertValue(v, DType::f64, d);
    if (d == DType::bool_) return let(d, c != 0 ? "true" : "false");
    return literal(d, c);
  }

  Value compare(Cmp c, DType d, Value a, Value b) override {
    static constexpr const char* kOps[] = {"<", "<=", ">", ">=", "==", "!="};
    // An integer compared with itself (argmax over one element) is known:
    // written out, compilers that treat warnings as errors refuse it.
    if (!tensor::isFloating(d) && n(a) == n(b)) {
      return constant(DType::bool_, c == Cmp::kLe || c == Cmp::kGe || c == Cmp::kEq ? 1 : 0);
    }
    return let(DType::bool_, strCat(n(a), " ", kOps[static_cast<int>(c)], " ", n(b)));
  }
  // select(no, yes, cond) in both languages.
  Value select(DType d, Value c, Value yes, Value no) override {
    return let(d, strCat("select(", n(no), ", ", n(yes), ", ", n(c), ")"));
  }
  Value logicAnd(Value a, Value b) override { return let(DType::bool_, strCat(n(a), " && ", n(b))); }
  Value logicOr(Value a, Value b) override { return let(DType::bool_, strCat(n(a), " || ", n(b))); }
  Value bitAnd(DType d, Value a, Value b) override { return let(d, strCat(n(a), " & ", n(b))); }
  Value bitOr(DType d, Value a, Value b) override { return let(d, strCat(n(a), " | ", n(b))); }
  Value bitXor(DType d, Value a, Value b) override { return let(d, strCat(n(a), " ^ ", n(b))); }
  Value absFloat(DType d, Value a) override { return let(d, strCat("abs(", n(a), ")")); }

  // The language's own elementary functions for fast mode: `prefix` + sin,
  // cos, exp, log, tanh, pow; sigmoid from exp (`one`: 1 as a float
  // literal). 0 for other ops.
  Value builtinMath(OpCode op, DType d, Value x, Value y, std::string_view prefix, std::string_view one) {
    // The built-in forms; any other op keeps its exact sequence.
    if (op == OpCode::kSigmoid) return let(d, strCat(one, " / (", one, " + ", prefix, "exp(-", n(x), "))"));
    if (op == OpCode::kPow) return let(d, strCat(prefix, "pow(", n(x), ", ", n(y), ")"));
    static constexpr std::pair<OpCode, const char*> kNames[] = {
        {OpCode::kSin, "sin"}, {OpCode::kCos, "cos"}, {OpCode::kExp, "exp"},
        {OpCode::kLog, "log"}, {OpCode::kTanh, "tanh"}, {OpCode::kFloor, "floor"}, {OpCode::kCeil, "ceil"}};
    const char* name = nullptr;
    for (const auto& [o, n] : kNames) {
      if (o == op) name = n;
    }
    if (name == nullptr) return 0;
    return let(d, strCat(prefix, name, "(", n(x), ")"));
  }

  Value index(int64_t v) override { return handle(indexLiteral(v)); }
  Value intAsIndex(Value i) override { return idx(strCat(indexType(), "(", n(i), ")")); }
  Value indexAdd(Value a, Value b) override { return idx(strCat(n(a), " + ", n(b))); }
  Value indexMul(Value a, int64_t c) override { return idx(strCat(n(a), " * ", indexLiteral(c))); }
  Value indexMulAdd(Value a, int64_t c, Value b) override {
    return idx(strCat(n(a), " * ", indexLiteral(c), " + ", n(b)));
  }
  Value indexDiv(Value a, int64_t c) override { return idx(strCat(n(a), " / ", indexLiteral(c))); }
  Value indexRem(Value a, int64_t c) override { return idx(strCat(n(a), " % ", indexLiteral(c))); }
  Value indexSub(Value a, Value b) override { return idx(strCat(n(a), " - ", n(b))); }
  Value indexMin(Value a, Value b) override { return idx(strCat("min(", n(a), ", ", n(b), ")")); }
  Value indexLess(Value a, Value b) override { return let(DType::bool_, strCat(n(a), " < ", n(b))); }
  Value indexEq(Value a, Value b) override { return let(DType::bool_, strCat(n(a), " == ", n(b))); }

  Value localId() override { return lid_; }
  Value groupId() override { return group_; }
  Value globalId() override { return gid_; }
  Value groupCount(int64_t launched) override { return index(launched); }
  Value invocationCount(int64_t launched) override { return index(launched * wg_); }

  // Bools are stored as 0/1 words or bytes (storedBool), read back as
  // stored != 0 (readBool).
  Value load(int buffer, Value flat) override {
    const DType d = m_.buffers[static_cast<size_t>(buffer)].dtype;
    const std::string at = strCat("buf", buffer, "[", n(flat), "]");
    return let(d, d == DType::bool_ ? readBool(at) : at);
  }
  void store(int buffer, Value flat, Value v) override {
    const DType d = m_.buffers[static_cast<size_t>(buffer)].dtype;
    w_.line(strCat("buf", buffer, "[", n(flat), "] = ", d == DType::bool_ ? storedBool(n(v)) : n(v), ";"));
  }
  SharedArray sharedArray(DType d, int64_t count) override {
    shared_.emplace_back(d, count);
    return {static_cast<int>(shared_.size()) - 1, d, count};
  }
  Value sharedLoad(const SharedArray& a, Value i, int64_t plus) override {
    const std::string at = strCat("wg", a.id, "[", slot(i, plus), "]");
    return let(a.dtype, a.dtype == DType::bool_ ? readBool(at) : at);
  }
  void sharedStore(const SharedArray& a, Value i, int64_t plus, Value v) override {
    w_.line(strCat("wg", a.id, "[", slot(i, plus), "] = ", a.dtype == DType::bool_ ? storedBool(n(v)) : n(v), ";"));
  }

  Value variable(DType d, Value init) override { return handle(w_.var(typeName(d), n(init))); }
  Value read(DType, Value var) override { return var; }
  void write(DType, Value var, Value v) override { w_.line(strCat(n(var), " = ", n(v), ";")); }

  absl::Status loopWhile(const std::function<Value()>& cond, const Body& body, int64_t) override {
    w_.open(loopHead());
    w_.line(strCat("if (!(", n(cond()), ")) { break; }"));
    ACCY_RETURN_IF_ERROR(body());
    w_.close();
    return absl::OkStatus();
  }
  // Counted loops: `counted` with the language's step (stepBy) and doubling.
  absl::Status strided(Value start, Value limit, Value step, const IndexBody& body, int64_t) override {
    return counted(start, limit, body, stepBy(n(step)));
  }
  absl::Status doubling(Value start, Value limit, const IndexBody& body, int64_t) override {
    return counted(start, limit, body, doubled());
  }
  absl::Status when(Value cond, const Body& body) override {
    w_.open(strCat("if (", n(cond), ")"));
    ACCY_RETURN_IF_ERROR(body());
    w_.close();
    return absl::OkStatus();
  }

 protected:
  // After begin() kept the plan: the builtins and the target's own state.
  virtual absl::Status start(const KernelPlan& plan) = 0;
  // A constant of a numeric dtype, already converted to it.
  virtual Value literal(DType d, double c) = 0;
  // The language's name of a value's type, of the index type, an index
  // constant, and the head of an endless loop.
  virtual const char* typeName(DType d) const = 0;
  virtual const char* indexType() const = 0;
  virtual std::string indexLiteral(int64_t v) const = 0;
  virtual const char* loopHead() const = 0;
  // for (x = start; x < limit; x <advance>) body(x), `advance` from stepBy
  // (by a step) or doubled().
  virtual absl::Status counted(Value start, Value limit, const IndexBody& body, const std::string& advance) = 0;
  virtual std::string stepBy(const std::string& step) const = 0;
  virtual std::string doubled() const = 0;
  // A bool value as it is stored, and a stored bool as a value.
  virtual std::string storedBool(const std::string& value) const = 0;
  virtual std::string readBool(const std::string& stored) const = 0;

  const std::string& n(Value v) const { return w_.name(v); }
  Value handle(std::string text) { return w_.handle(std::move(text)); }
  Value let(DType d, std::string_view expr) { return w_.bind(typeName(d), expr); }
  Value idx(std::string_view expr) { return w_.bind(indexType(), expr); }
  // Element `i + plus` of an array.
  std::string slot(Value i, int64_t plus) const { return plus == 0 ? n(i) : strCat(n(i), " + ", indexLiteral(plus)); }

  SourceWriter w_;
  const choir::Module& m_;
  std::vector<std::pair<DType, int64_t>> shared_;  // the workgroup arrays: element dtype, count
  TargetDesc desc_;
  std::vector<int> used_;            // the buffers the kernel binds
  int64_t wg_ = 1;                   // invocations per workgroup
  Value lid_ = 0, group_ = 0, gid_ = 0;  // set by begin()
};

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_SOURCE_TARGET_H_
