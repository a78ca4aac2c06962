#include "compiler/transforms/vmap.h"

#include "compiler/tensor/builder.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/transforms/replay.h"

namespace accy::transforms {

using tensor::Axis;
using tensor::Builder;
using tensor::Node;
using tensor::OpCode;
using tensor::Value;

namespace {

// `v` (batched: the original node's axes and the batch axis) with the batch
// axis first, then the original's axes in their order.
Value batchFirst(const Value& v, const Node& original, const std::string& axis) {
  std::vector<std::string> order = {axis};
  for (const Axis& a : original.axes) order.push_back(a.name);
  std::vector<std::string> current;
  for (const Axis& a : v.axes()) current.push_back(a.name);
  return current == order ? v : v.transpose(order);
}

// A scan or while_loop some operand of which is batched. Every carry is
// batched (an unbatched initial value is broadcast), batched xs and
// captures are put batch axis first, and each body is vmapped with those
// in_axes; its outputs come back batch axis first, so carries keep their
// spec. A batched while_loop runs while any entry's condition holds, and an
// entry whose condition fails keeps its carry (where(condition, step, carry)).
Value batchLoop(Builder& b, const tensor::Program& p, const Node& n, std::vector<Value> ops,
                const std::vector<bool>& batched, const VmapSpec& spec) {
  const std::string& axis = spec.axis_name;
  const bool scan = n.op == OpCode::kScan;
  const size_t carries = static_cast<size_t>(scan ? n.ints[1] : n.ints[2]);
  VmapSpec body_spec{spec.axis_size, {}, axis};
  for (size_t k = 0; k < ops.size(); ++k) {
    const Node& original = p.nodes[n.operands[k]];
    if (k < carries && !batched[n.operands[k]]) ops[k] = ops[k].broadcast(axis, spec.axis_size);
    if (k < carries || batched[n.operands[k]]) {
      ops[k] = batchFirst(ops[k], original, axis);
      body_spec.in_axes.push_back(InAxis{0});
    } else {
      body_spec.in_axes.push_back(InAxis{});
    }
  }
  auto fail = [&](const absl::Status& st) {
    return b.poison(makeError(errorKind(st), strCat("vmap of ", p.name, ": the ", tensor::opName(n.op), "'s body: ",
                                                    st.message())));
  };
  Node copy = n;
  copy.operands.clear();
  if (scan) {
    auto body = vmap(p.bodies[n.ints[0]], body_spec);
    if (!body.ok()) return fail(body.status());
    copy.ints[0] = b.addBody(std::move(*body));
    return b.record(std::move(copy), ops);
  }
  auto cond = vmap(p.bodies[n.ints[0]], body_spec);
  if (!cond.ok()) return fail(cond.status());
  auto step = vmap(p.bodies[n.ints[1]], body_spec);
  if (!step.ok()) return fail(step.status());
  const std::vector<tensor::Spec> specs = cond->inputSpecs();
  auto any = tensor::define("while_loop condition", specs, [&](Builder& bb, std::span<const Value> args) {
    return replayNodes(bb, *cond, args)[cond->outputs[0]].max(axis);
  });
  if (!any.ok()) return fail(any.status());
  auto masked = tensor::define("while_loop body", specs, [&](Builder& bb, std::span<const Value> args) {
    const Value go = replayNodes(bb, *cond, args)[cond->outputs[0]];
    const std::vector<Value> next = replayNodes(bb, *step, args);
    std::vector<Value> out;
    for (size_t k = 0; k < carries; ++k) out.push_back(tensor::where(go, next[step->outputs[k]], args[k]));
    return out;
  });
  if (!masked.ok()) return fail(masked.status());
  copy.ints[0] = b.addBody(std::move(*any));
  copy.ints[1] = b.addBody(std::move(*masked));
  return b.record(std::move(copy), ops);
}

}  // namespace

absl::StatusOr<tensor::Program> vmap(const tensor::Program& p, const VmapSpec& spec) {
  ACCY_RETURN_IF_ERROR(tensor::validateProgram(p));
  const std::string& axis = spec.axis_name;
  ACCY_RETURN_IF_ERROR(tensor::checkAxisName("vmap", axis));
  if (spec.axis_size < 1) {
    return makeError(ErrorKind::kInvalidExtent, strCat("vmap: axis_size ", spec.axis_size, " must be positive"));
  }
  if (spec.in_axes.size() != p.inputs.size()) {
    return makeError(ErrorKind::kArityMismatch, strCat("vmap of ", p.name, ": in_axes has ", spec.in_axes.size(),
                                                       " entries for ", p.inputs.size(), " inputs"));
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    for (const Axis& a : p.nodes[i].axes) {
      if (a.name == axis) {
        return makeError(ErrorKind::kAxisNameCollision,
                         strCat("vmap of ", p.name, ": axis '", axis, "' is already used by node %", i, " (",
                                tensor::opName(p.nodes[i].op), ")"));
      }
    }
    for (const std::string& n : p.nodes[i].names) {
      if (n == axis) {
        return makeError(ErrorKind::kAxisNameCollision,
                         strCat("vmap of ", p.name, ": axis '", axis, "' is named by node %", i));
      }
    }
  }
  std::vector<tensor::Spec> specs = p.inputSpecs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const InAxis in = spec.in_axes[i];
    if (!in.mapped()) continue;
    if (static_cast<size_t>(in.position) > specs[i].axes.size()) {
      return makeError(ErrorKind::kInvalidArgument,
                       strCat("vmap of ", p.name, ": mapped axis position ", in.position, " of input ", i,
                              " is past its ", specs[i].axes.size(), " axes"));
    }
    specs[i].axes.insert(specs[i].axes.begin() + in.position, Axis{axis, spec.axis_size});
  }
  auto batched_program = tensor::define(
      strCat("vmap_", p.name), specs, [&](Builder& b, std::span<const Value> args) {
        std::vector<Value> v(p.nodes.size());
        std::vector<bool> batched(p.nodes.size(), false);
        for (size_t i = 0; i < p.nodes.size(); ++i) {
          const Node& n = p.nodes[i];
          if (n.op == OpCode::kInput) {
            v[i] = args[n.ints[0]];
            batched[i] = spec.in_axes[n.ints[0]].mapped();
            continue;
          }
          std::vector<Value> ops;
          bool any = false;
          for (int32_t o : n.operands) {
            ops.push_back(v[o]);
            any = any || batched[o];
          }
          batched[i] = any;
          Node copy = n;
          if (any && n.op == OpCode::kTranspose) {
            copy.names.insert(copy.names.begin(), axis);
          }
          if (any && n.op == OpCode::kScatterAdd) {
            // Each batch entry scatters into its own copy of x.
            for (size_t k : {size_t{0}, size_t{2}}) {
              if (!batched[n.operands[k]]) ops[k] = ops[k].broadcast(axis, spec.axis_size);
            }
          }
          if (any && n.op == OpCode::kConcat) {
            for (size_t k = 0; k < ops.size(); ++k) {
              if (!batched[n.operands[k]]) ops[k] = ops[k].broadcast(axis, spec.axis_size);
            }
          }
          if (any && (n.op == OpCode::kScan || n.op == OpCode::kWhileLoop)) {
            v[i] = batchLoop(b, p, n, ops, batched, spec);
            continue;
          }
          v[i] = recordLike(b, copy, ops, p.bodies);
        }
        std::vector<Value> outs;
        for (int32_t o : p.outputs) {
          Value out = batched[o] ? v[o] : v[o].broadcast(axis, spec.axis_size);
          std::vector<std::string> order = {axis};
          for (const Axis& a : p.nodes[o].axes) order.push_back(a.name);
          std::vector<std::string> current;
          for (const Axis& a : out.axes()) current.push_back(a.name);
          outs.push_back(current == order ? out : out.transpose(order));
        }
        return outs;
      });
  if (!batched_program.ok()) return batched_program.status();
  return simplify(*batched_program);
}

}  // namespace accy::transforms
