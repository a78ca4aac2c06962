#include "compiler/choir/printer.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/strings.h"

namespace accy::choir {
namespace {

std::string headerText(const LoopHeader& h) {
  std::string s = strCat("i", h.var, " < ", h.extent);
  switch (h.tag) {
    case LoopTag::kSerial:
      break;
    case LoopTag::kVectorized:
      strAppend(&s, " [vectorized x", h.vector_width, "]");
      break;
    case LoopTag::kUnrolled:
      strAppend(&s, " [unrolled x", h.unroll, "]");
      break;
    case LoopTag::kGpuBlock:
    case LoopTag::kGpuThread:
      strAppend(&s, " [", loopTagName(h.tag), " ", h.gpu_dim, "]");
      break;
    case LoopTag::kCpuParallel:
      strAppend(&s, " [cpu_parallel]");
      break;
  }
  return s;
}

std::string indexText(const std::vector<Affine>& index) {
  return strCat("[", absl::StrJoin(index, ", ", [](std::string* out, const Affine& a) {
                  out->append(toText(a));
                }),
                "]");
}

void printStmts(const Module& m, const std::vector<Stmt>& stmts, int depth, std::string* out) {
  const std::string pad(2 * depth, ' ');
  for (const Stmt& s : stmts) {
    switch (s.kind) {
      case StmtKind::kLoop:
        strAppend(out, pad, "for ", headerText(s.loop), " {\n");
        printStmts(m, s.body, depth + 1, out);
        strAppend(out, pad, "}\n");
        break;
      case StmtKind::kStore: {
        std::string where;
        for (size_t j = 0; j < s.bound.size(); ++j) {
          where += strCat(j == 0 ? " where " : ", ", "i", s.bound[j], " = ", toText(m, s.args[j]));
        }
        if (s.guard) where += strCat(" if ", toText(m, s.guard));
        strAppend(out, pad, m.buffers[s.buffer].name, indexText(s.index), " = ", toText(m, s.value), where, "\n");
        break;
      }
      case StmtKind::kReduce:
        strAppend(out, pad, "reduce ", tensor::opName(s.combiner), " ", m.buffers[s.buffer].name,
                  indexText(s.index), " over (",
                  absl::StrJoin(s.domain, ", ",
                                [](std::string* o, const LoopHeader& h) { o->append(headerText(h)); }),
                  ")", s.mean_count ? strCat(" / ", s.mean_count) : "", s.compensated ? " compensated" : "", " = ",
                  toText(m, s.value), "\n");
        break;
      case StmtKind::kBarrier:
        strAppend(out, pad, "barrier\n");
        break;
    }
  }
}

}  // namespace

std::string toText(const Affine& a) {
  std::string s;
  for (const Affine::Term& t : a.terms) {
    if (!s.empty()) s += " + ";
    if (t.coeff != 1) strAppend(&s, t.coeff, "*");
    strAppend(&s, "i", t.var);
  }
  if (a.constant != 0 || s.empty()) {
    if (!s.empty()) s += " + ";
    strAppend(&s, a.constant);
  }
  return s;
}

namespace {

std::string exprText(const Module& m, const ExprRef& e) {
  switch (e->kind) {
    case ExprKind::kLoad: {
      std::string text = strCat(m.buffers[e->buffer].name, indexText(e->index));
      for (size_t j = 0; j < e->bound.size(); ++j) {
        text += strCat(j == 0 ? " where " : ", ", "i", e->bound[j], " = ", toText(m, e->args[j]));
      }
      return e->bound.empty() ? text : strCat("(", text, ")");
    }
    case ExprKind::kConstant:
      return absl::StrFormat("%g:%s", e->constant, tensor::dtypeName(e->dtype));
    case ExprKind::kIndex:
      return strCat("index:", tensor::dtypeName(e->dtype), "(", toText(e->index[0]), ")");
    case ExprKind::kOp: {
      std::string name(tensor::opName(e->op));
      if (e->op == OpCode::kCast || e->op == OpCode::kBitcast) name = strCat(name, ":", tensor::dtypeName(e->dtype));
      return strCat(name, "(",
                    absl::StrJoin(e->args, ", ",
                                  [&](std::string* o, const ExprRef& a) { o->append(toText(m, a)); }),
                    ")");
    }
  }
  return "?";
}

}  // namespace

std::string toText(const Module& m, const ExprRef& e) {
  std::string text = exprText(m, e);
  countWork(static_cast<int64_t>(text.size()));  // each level copies its operands' text
  return text;
}

std::string toText(const Module& m) {
  std::string out = strCat("module ", m.name, "\n");
  for (size_t b = 0; b < m.buffers.size(); ++b) {
    const Buffer& buf = m.buffers[b];
    const char* role = buf.role == BufferRole::kInput    ? "input"
                       : buf.role == BufferRole::kOutput ? "output"
                                                         : "temp";
    strAppend(&out, "  buffer ", buf.name, ": ", role,
              buf.io_index >= 0 ? strCat(" ", buf.io_index) : "", " ", tensor::dtypeName(buf.dtype),
              "[", absl::StrJoin(buf.shape, ", "), "]\n");
  }
  for (const Kernel& k : m.kernels) {
    strAppend(&out, "  kernel ", k.name);
    if (k.workgroup_size > 0) strAppend(&out, " [workgroup ", k.workgroup_size, "]");
    if (k.gpu_tile > 0) strAppend(&out, " [tile ", k.gpu_tile, "x", k.gpu_tile, "]");
    if (k.tf32) strAppend(&out, " [tf32]");
    strAppend(&out, " {\n");
    printStmts(m, k.body, 2, &out);
    strAppend(&out, "  }\n");
  }
  return out;
}

}  // namespace accy::choir
