#include "compiler/choir/verifier.h"

#include <algorithm>
#include <map>

#include "compiler/choir/printer.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace accy::choir {
namespace {

class Verifier {
 public:
  explicit Verifier(const Module& m) : m_(m) {}

  absl::Status run() {
    for (size_t b = 0; b < m_.buffers.size(); ++b) {
      for (int64_t d : m_.buffers[b].shape) {
        if (d <= 0) return fail(strCat("buffer ", m_.buffers[b].name, " has a non-positive dimension"));
      }
    }
    for (const Kernel& k : m_.kernels) {
      kernel_ = &k;
      bound_.clear();
      ever_bound_.clear();
      for (size_t i = 0; i < k.body.size(); ++i) {
        ACCY_RETURN_IF_ERROR(stmt(k.body[i], /*depth=*/0));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status fail(std::string what) {
    return absl::InternalError(strCat("Choir verifier: ", kernel_ ? strCat("kernel ", kernel_->name, ": ") : "",
                                      what));
  }

  absl::Status bind(const LoopHeader& h) {
    if (h.extent <= 0) return fail(strCat("loop i", h.var, " has extent ", h.extent));
    if (h.var < 0 || h.var >= m_.num_vars) return fail(strCat("variable i", h.var, " out of range"));
    if (!ever_bound_.insert({h.var, true}).second) {
      return fail(strCat("variable i", h.var, " is bound twice"));
    }
    bound_[h.var] = h.extent;
    return absl::OkStatus();
  }

  // Binds each of `vars` over [0, hi] of its value's clamp (the caller
  // erases them from bound_ when done).
  absl::Status bindClamped(const std::vector<int>& vars, const std::vector<ExprRef>& values, std::string_view what) {
    if (vars.size() != values.size()) return fail(strCat(what, " binds a different number of variables and values"));
    for (size_t j = 0; j < vars.size(); ++j) {
      ACCY_RETURN_IF_ERROR(expr(values[j]));
      const int64_t hi = clampBound(*values[j]);
      const int v = vars[j];
      if (hi < 0) return fail(strCat(what, " binds i", v, " to a value that is not a clamped index"));
      if (v < 0 || v >= m_.num_vars || bound_.contains(v)) {
        return fail(strCat(what, " binds i", v, ", which is out of range or already bound"));
      }
      bound_[v] = hi + 1;
    }
    return absl::OkStatus();
  }

  absl::Status affineInBounds(const Affine& a, int64_t dim, const std::string& where) {
    int64_t lo = a.constant, hi = a.constant;
    for (const Affine::Term& t : a.terms) {
      auto it = bound_.find(t.var);
      if (it == bound_.end()) return fail(strCat(where, ": variable i", t.var, " is not bound here"));
      const int64_t span = t.coeff * (it->second - 1);
      (span < 0 ? lo : hi) += span;
    }
    if (dim >= 0 && (lo < 0 || hi >= dim)) {
      return fail(strCat(where, ": index ", toText(a), " ranges over [", lo, ", ", hi,
                         "], outside [0, ", dim, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status access(int buffer, const std::vector<Affine>& index, const std::string& what) {
    if (buffer < 0 || static_cast<size_t>(buffer) >= m_.buffers.size()) {
      return fail(strCat(what, ": no buffer ", buffer));
    }
    const Buffer& b = m_.buffers[buffer];
    if (index.size() != b.shape.size()) {
      return fail(strCat(what, " ", b.name, ": ", index.size(), " indices for rank ", b.shape.size()));
    }
    for (size_t d = 0; d < index.size(); ++d) {
      ACCY_RETURN_IF_ERROR(affineInBounds(index[d], b.shape[d], strCat(what, " ", b.name, " dim ", d)));
    }
    return absl::OkStatus();
  }

  absl::Status expr(const ExprRef& e) {
    if (!e) return fail("missing expression");
    switch (e->kind) {
      case ExprKind::kLoad: {
        // Bound variables range over [0, hi] of their clamps, like loops;
        // the access is then checked in bounds as for loop variables.
        ACCY_RETURN_IF_ERROR(bindClamped(e->bound, e->args, "load"));
        absl::Status st = access(e->buffer, e->index, "load");
        for (int v : e->bound) bound_.erase(v);
        ACCY_RETURN_IF_ERROR(st);
        if (m_.buffers[e->buffer].dtype != e->dtype) return fail("load dtype differs from its buffer");
        return absl::OkStatus();
      }
      case ExprKind::kConstant:
        return absl::OkStatus();
      case ExprKind::kIndex:
        if (e->index.size() != 1) return fail("index expression needs one affine");
        return affineInBounds(e->index[0], -1, "index");
      case ExprKind::kOp:
        break;
    }
    for (const ExprRef& a : e->args) ACCY_RETURN_IF_ERROR(expr(a));
    auto arity = [&](size_t n) -> absl::Status {
      if (e->args.size() != n) {
        return fail(strCat(tensor::opName(e->op), " has ", e->args.size(), " operands, wants ", n));
      }
      return absl::OkStatus();
    };
    switch (tensor::opCategory(e->op)) {
      case tensor::OpCategory::Unary:
        ACCY_RETURN_IF_ERROR(arity(1));
        if (e->args[0]->dtype != e->dtype) return fail(strCat(tensor::opName(e->op), ": dtype changes"));
        return absl::OkStatus();
      case tensor::OpCategory::Binary:
        ACCY_RETURN_IF_ERROR(arity(2));
        if (e->args[0]->dtype != e->dtype || e->args[1]->dtype != e->dtype) {
          return fail(strCat(tensor::opName(e->op), ": operand dtypes differ from the result"));
        }
        return absl::OkStatus();
      case tensor::OpCategory::Compare:
        ACCY_RETURN_IF_ERROR(arity(2));
        if (e->args[0]->dtype != e->args[1]->dtype || e->dtype != DType::bool_) {
          return fail(strCat(tensor::opName(e->op), ": bad compare types"));
        }
        return absl::OkStatus();
      case tensor::OpCategory::Select:
        ACCY_RETURN_IF_ERROR(arity(3));
        if (e->args[0]->dtype != DType::bool_ || e->args[1]->dtype != e->dtype ||
            e->args[2]->dtype != e->dtype) {
          return fail("where: bad operand types");
        }
        return absl::OkStatus();
      case tensor::OpCategory::Cast:
        return arity(1);
      case tensor::OpCategory::Random:
        ACCY_RETURN_IF_ERROR(arity(4));
        for (const ExprRef& a : e->args) {
          if (a->dtype != DType::u32) return fail(strCat(tensor::opName(e->op), ": operands are u32"));
        }
        if (e->dtype != DType::u32) return fail(strCat(tensor::opName(e->op), ": the result is u32"));
        return absl::OkStatus();
      case tensor::OpCategory::Leaf:
      case tensor::OpCategory::Reduce:
      case tensor::OpCategory::Dot:
      case tensor::OpCategory::Layout:
      case tensor::OpCategory::Index:
      case tensor::OpCategory::Loop:
        return fail(strCat(tensor::opName(e->op), " is not a scalar op"));
    }
    return absl::OkStatus();
  }

  absl::Status stmt(const Stmt& s, int depth) {
    switch (s.kind) {
      case StmtKind::kLoop: {
        ACCY_RETURN_IF_ERROR(bind(s.loop));
        const bool innermost = std::none_of(s.body.begin(), s.body.end(),
                                            [](const Stmt& c) { return c.kind == StmtKind::kLoop; });
        if (s.loop.tag == LoopTag::kVectorized && (!innermost || s.loop.vector_width < 1)) {
          return fail(strCat("vectorized loop i", s.loop.var, " is not innermost"));
        }
        if (s.loop.tag == LoopTag::kCpuParallel && depth != 0) {
          return fail(strCat("cpu_parallel loop i", s.loop.var, " is not outermost"));
        }
        for (const Stmt& c : s.body) ACCY_RETURN_IF_ERROR(stmt(c, depth + 1));
        bound_.erase(s.loop.var);
        return absl::OkStatus();
      }
      case StmtKind::kStore: {
        ACCY_RETURN_IF_ERROR(bindClamped(s.bound, s.args, "store"));  // as a load's
        absl::Status st = access(s.buffer, s.index, "store");
        if (st.ok() && m_.buffers[s.buffer].role == BufferRole::kInput) st = fail("store to an input buffer");
        if (st.ok() && s.guard) {
          st = expr(s.guard);
          if (st.ok() && s.guard->dtype != DType::bool_) st = fail("a store's guard is not a bool");
        }
        if (st.ok()) st = expr(s.value);
        if (st.ok() && s.value->dtype != m_.buffers[s.buffer].dtype) st = fail("stored dtype differs from buffer");
        for (int v : s.bound) bound_.erase(v);
        return st;
      }
      case StmtKind::kReduce: {
        ACCY_RETURN_IF_ERROR(access(s.buffer, s.index, "reduce"));
        if (m_.buffers[s.buffer].role == BufferRole::kInput) return fail("reduce into an input buffer");
        if (s.combiner != OpCode::kAdd && s.combiner != OpCode::kMul && s.combiner != OpCode::kMax &&
            s.combiner != OpCode::kMin) {
          return fail(strCat("reduce combiner ", tensor::opName(s.combiner)));
        }
        if (s.domain.empty()) return fail("reduce without a domain");
        if (s.compensated && !cascades(s.combiner, m_.buffers[s.buffer].dtype)) {
          return fail("a compensated reduction that is not a floating sum");
        }
        for (size_t i = 0; i < s.domain.size(); ++i) {
          ACCY_RETURN_IF_ERROR(bind(s.domain[i]));
          if (s.domain[i].tag == LoopTag::kVectorized && i + 1 != s.domain.size()) {
            return fail("vectorized reduction loop is not innermost");
          }
        }
        ACCY_RETURN_IF_ERROR(expr(s.value));
        if (s.value->dtype != m_.buffers[s.buffer].dtype) return fail("reduced dtype differs from buffer");
        for (const LoopHeader& h : s.domain) bound_.erase(h.var);
        return absl::OkStatus();
      }
      case StmtKind::kBarrier:
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  const Module& m_;
  const Kernel* kernel_ = nullptr;
  std::map<int, int64_t> bound_;
  std::map<int, bool> ever_bound_;
};

}  // namespace

absl::Status verifyModule(const Module& module) { return Verifier(module).run(); }

}  // namespace accy::choir
