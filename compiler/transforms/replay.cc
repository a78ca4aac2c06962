#include "compiler/transforms/replay.h"

#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/errors.h"
#include "base/strings.h"

namespace accy::transforms {

using tensor::Node;
using tensor::OpCode;
using tensor::Value;

Value recordLike(tensor::Builder& b, const Node& node, absl::Span<const Value> operands,
                 absl::Span<const tensor::Program> bodies) {
  Node copy = node;
  copy.operands.clear();
  // A loop's bodies move into `b`'s list, renumbered.
  auto rebase = [&](size_t k) {
    if (copy.ints[k] >= 0 && copy.ints[k] < static_cast<int64_t>(bodies.size())) {
      copy.ints[k] = b.addBody(bodies[copy.ints[k]]);
    }
  };
  if (node.op == OpCode::kScan && !copy.ints.empty()) rebase(0);
  if (node.op == OpCode::kWhileLoop && copy.ints.size() >= 2) {
    rebase(0);
    rebase(1);
  }
  return b.record(std::move(copy), operands);
}

std::vector<Value> replayNodes(tensor::Builder& b, const tensor::Program& p, std::span<const Value> inputs) {
  std::vector<Value> v(p.nodes.size());
  if (inputs.size() != p.inputs.size()) {
    b.poison(makeError(ErrorKind::kArityMismatch,
                       strCat("call ", p.name, ": takes ", p.inputs.size(), " inputs, got ", inputs.size())));
    return v;
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& n = p.nodes[i];
    if (n.op == OpCode::kInput) {
      v[i] = inputs[n.ints[0]];
      continue;
    }
    std::vector<Value> ops;
    for (int32_t o : n.operands) ops.push_back(v[o]);
    v[i] = recordLike(b, n, ops, p.bodies);
  }
  return v;
}

tensor::Program simplify(const tensor::Program& p) {
  // Liveness from the outputs; inputs are part of the signature.
  std::vector<bool> live(p.nodes.size(), false);
  for (int32_t o : p.outputs) live[o] = true;
  for (size_t i = p.nodes.size(); i-- > 0;) {
    if (live[i]) {
      for (int32_t o : p.nodes[i].operands) live[o] = true;
    }
  }
  tensor::Program out;
  out.name = p.name;
  out.bodies = p.bodies;
  std::vector<int32_t> remap(p.nodes.size(), -1);
  std::map<std::string, int32_t> seen;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& n = p.nodes[i];
    if (!live[i] && n.op != OpCode::kInput) continue;
    Node copy = n;
    for (int32_t& o : copy.operands) o = remap[o];
    if (n.op != OpCode::kInput) {
      const std::string key = absl::StrFormat(
          "%d|%d|%s|%s|%s|%a", static_cast<int>(copy.op), static_cast<int>(copy.dtype),
          absl::StrJoin(copy.operands, ","), absl::StrJoin(copy.names, ","), absl::StrJoin(copy.ints, ","),
          copy.scalar);
      auto it = seen.find(key);
      if (it != seen.end()) {
        remap[i] = it->second;
        continue;
      }
      seen[key] = static_cast<int32_t>(out.nodes.size());
    } else {
      out.inputs.push_back(static_cast<int32_t>(out.nodes.size()));
    }
    remap[i] = static_cast<int32_t>(out.nodes.size());
    out.nodes.push_back(std::move(copy));
  }
  for (int32_t o : p.outputs) out.outputs.push_back(remap[o]);
  return out;
}

}  // namespace accy::transforms
