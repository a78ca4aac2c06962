#include "compiler/choir/passes/scan_kernel.h"

#include <utility>

#include "absl/status/status.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/choir/rewrite.h"

namespace accy::choir {

using tensor::Node;

bool isScanProgram(const tensor::Program& p) {
  const size_t n_in = p.inputs.size();
  if (p.nodes.size() < n_in + 1) return false;
  for (size_t i = 0; i < n_in; ++i) {
    if (p.inputs[i] != static_cast<int32_t>(i) || p.nodes[i].op != OpCode::kInput) return false;
  }
  const Node& scan = p.nodes[n_in];
  if (scan.op != OpCode::kScan || scan.operands.size() != n_in) return false;
  for (size_t i = 0; i < n_in; ++i) {
    if (scan.operands[i] != static_cast<int32_t>(i)) return false;
  }
  const size_t results = p.nodes.size() - n_in - 1;
  if (p.outputs.size() != results) return false;
  for (size_t k = 0; k < results; ++k) {
    const int32_t id = static_cast<int32_t>(n_in + 1 + k);
    const Node& r = p.nodes[id];
    if (r.op != OpCode::kLoopResult || r.operands != std::vector<int32_t>{static_cast<int32_t>(n_in)} ||
        r.ints != std::vector<int64_t>{static_cast<int64_t>(k)} || p.outputs[k] != id) {
      return false;
    }
  }
  return true;
}

namespace {

bool hasParallelLoop(const std::vector<Stmt>& stmts) {
  bool found = false;
  visitStmts(stmts, [&](const Stmt& s) {
    if (s.kind == StmtKind::kLoop && s.loop.tag == LoopTag::kCpuParallel) found = true;
  });
  return found;
}

std::vector<int64_t> shapeOf(const tensor::Spec& spec) {
  std::vector<int64_t> shape;
  for (const tensor::Axis& a : spec.axes) shape.push_back(a.extent);
  return shape;
}

// Where one body buffer lives in the scan kernel during one step.
struct Place {
  int buffer = -1;
  int step_at = -1;  // the dimension the step index takes (xs, ys), or -1
};

// Copies the body's statements for one step: buffers moved to their places
// (the step's index inserted where a place has one), variables renumbered
// past `offset` so every copy's loops are its own.
class StepCopy {
 public:
  StepCopy(std::vector<Place> places, int offset, Affine step)
      : places_(std::move(places)), offset_(offset), step_(std::move(step)) {}

  Stmt stmt(const Stmt& s) const {
    Stmt out = s;
    out.loop.var = var(s.loop.var);
    for (LoopHeader& h : out.domain) h.var = var(h.var);
    for (int& v : out.bound) v = var(v);
    for (ExprRef& a : out.args) a = expr(a);
    if (out.guard) out.guard = expr(out.guard);
    if (s.kind == StmtKind::kStore || s.kind == StmtKind::kReduce) {
      out.buffer = places_[s.buffer].buffer;
      out.index = index(s.buffer, s.index);
      out.value = expr(s.value);
    }
    out.body.clear();
    for (const Stmt& b : s.body) out.body.push_back(stmt(b));
    return out;
  }

 private:
  int var(int v) const { return v + offset_; }

  Affine affine(const Affine& a) const {
    Affine out = a;
    for (Affine::Term& t : out.terms) t.var = var(t.var);
    return out;
  }

  std::vector<Affine> index(int buffer, const std::vector<Affine>& idx) const {
    std::vector<Affine> out;
    for (const Affine& a : idx) out.push_back(affine(a));
    const int at = places_[buffer].step_at;
    if (at >= 0) out.insert(out.begin() + at, step_);
    return out;
  }

  ExprRef expr(const ExprRef& e) const {
    if (e == nullptr) return e;
    auto out = std::make_shared<Expr>(*e);
    for (ExprRef& a : out->args) a = expr(a);
    for (int& v : out->bound) v = var(v);
    if (e->kind == ExprKind::kLoad) {
      out->buffer = places_[e->buffer].buffer;
      out->index = index(e->buffer, e->index);
    } else {
      for (Affine& a : out->index) a = affine(a);
    }
    return out;
  }

  std::vector<Place> places_;
  int offset_ = 0;
  Affine step_;
};

}  // namespace

absl::StatusOr<Module> scanKernel(const tensor::Program& p, const Module& body) {
  if (!isScanProgram(p)) return makeError(ErrorKind::kInvalidProgram, strCat("scan kernel: ", p.name, " is not one scan"));
  const Node& scan = p.nodes[p.inputs.size()];
  const tensor::Program& b = p.bodies[static_cast<size_t>(scan.ints[0])];
  const size_t carries = static_cast<size_t>(scan.ints[1]);
  const size_t xs = static_cast<size_t>(scan.ints[2]);
  const int64_t length = scan.ints[3];
  int64_t step_points = 0;
  for (const Kernel& k : body.kernels) {
    if (hasParallelLoop(k.body)) {
      return makeError(ErrorKind::kUnimplemented, strCat("scan kernel: the body of ", p.name, " splits across threads"));
    }
    step_points += statementPoints(k.body);
  }
  if (length < 1) return makeError(ErrorKind::kUnimplemented, strCat("scan kernel: ", p.name, " has no steps"));
  if (step_points > kMaxScanKernelWork / length) {
    return makeError(ErrorKind::kUnimplemented, strCat("scan kernel: ", p.name, " holds ", length, " steps of ", step_points,
                                           " points, more than ", kMaxScanKernelWork));
  }

  Module m;
  m.name = p.name;
  auto add = [&](std::string name, DType dtype, std::vector<int64_t> shape, BufferRole role, int io) {
    Buffer buf;
    buf.name = std::move(name);
    buf.dtype = dtype;
    buf.shape = std::move(shape);
    buf.role = role;
    buf.io_index = io;
    m.buffers.push_back(std::move(buf));
    return static_cast<int>(m.buffers.size() - 1);
  };
  const std::vector<tensor::Spec> in_specs = p.inputSpecs(), out_specs = p.outputSpecs();
  std::vector<int> in, out, second;
  for (size_t i = 0; i < in_specs.size(); ++i) {
    in.push_back(add(strCat("in", i), in_specs[i].dtype, shapeOf(in_specs[i]), BufferRole::kInput, int(i)));
  }
  for (size_t k = 0; k < out_specs.size(); ++k) {
    out.push_back(add(strCat("out", k), out_specs[k].dtype, shapeOf(out_specs[k]), BufferRole::kOutput, int(k)));
  }
  for (size_t c = 0; c < carries; ++c) {
    second.push_back(add(strCat("carry", c, "_b"), out_specs[c].dtype, shapeOf(out_specs[c]), BufferRole::kTemp, -1));
  }
  // The body's buffers that are neither its inputs nor its outputs: one
  // each, shared by every step.
  std::vector<int> temp(body.buffers.size(), -1);
  for (size_t i = 0; i < body.buffers.size(); ++i) {
    const Buffer& bb = body.buffers[i];
    if (bb.role != BufferRole::kTemp) continue;
    Buffer copy = bb;
    copy.name = strCat("body_", bb.name);
    m.buffers.push_back(std::move(copy));
    temp[i] = static_cast<int>(m.buffers.size() - 1);
  }
  // The position of the scan's axis in each xs value.
  std::vector<int> xs_at;
  for (size_t j = 0; j < xs; ++j) {
    const std::vector<tensor::Axis>& axes = in_specs[carries + j].axes;
    int at = 0;
    while (axes[static_cast<size_t>(at)].name != scan.names[0]) ++at;
    xs_at.push_back(at);
  }
  // The buffer step t writes its carries to: the outputs for the last
  // step and every second one before it, the second buffers between.
  auto written = [&](int64_t t) { return (length - 1 - t) % 2 == 0 ? out : second; };
  auto places = [&](const std::vector<int>& read, const std::vector<int>& write) {
    std::vector<Place> pl(body.buffers.size());
    for (size_t i = 0; i < body.buffers.size(); ++i) {
      const Buffer& bb = body.buffers[i];
      const size_t io = static_cast<size_t>(bb.io_index);
      if (bb.role == BufferRole::kTemp) {
        pl[i] = {temp[i], -1};
      } else if (bb.role == BufferRole::kInput) {
        if (io < carries) {
          pl[i] = {read[io], -1};
        } else if (io < carries + xs) {
          pl[i] = {in[io], xs_at[io - carries]};
        } else {
          pl[i] = {in[io], -1};
        }
      } else if (io < carries) {
        pl[i] = {write[io], -1};
      } else {
        pl[i] = {out[io], 0};
      }
    }
    return pl;
  };
  auto stepOf = [&](std::vector<Stmt>& into, Affine t, const std::vector<int>& read,
                    const std::vector<int>& write) {
    const StepCopy copy(places(read, write), m.num_vars, std::move(t));
    m.num_vars += body.num_vars;
    for (const Kernel& k : body.kernels) {
      for (const Stmt& s : k.body) into.push_back(copy.stmt(s));
    }
  };

  Kernel k;
  k.name = strCat("scan_", b.name.empty() ? p.name : b.name);
  stepOf(k.body, Affine::constantOf(0), in, written(0));
  int64_t first = 1;  // the first step of the unrolled loop
  if ((length - 1) % 2 == 1) {
    stepOf(k.body, Affine::constantOf(1), written(0), written(1));
    first = 2;
  }
  const int64_t pairs = (length - first) / 2;
  if (pairs > 0) {
    LoopHeader h;
    h.var = m.newVar();
    h.extent = pairs;
    std::vector<Stmt> two;
    Affine t = Affine::var(h.var, 2);
    t.constant = first;
    stepOf(two, t, written(first - 1), written(first));
    t.constant = first + 1;
    stepOf(two, t, written(first), written(first + 1));
    k.body.push_back(Stmt::loopOf(h, std::move(two)));
  }
  m.kernels.push_back(std::move(k));
  return m;
}

}  // namespace accy::choir
