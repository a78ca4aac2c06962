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
          v[i] = recordLike(b, copy, ops);
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
