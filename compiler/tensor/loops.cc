#include "compiler/tensor/loops.h"

#include <utility>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::tensor {
namespace {

using BodyFn = std::function<absl::StatusOr<std::vector<Value>>(Builder&, std::span<const Value>)>;

struct RecordedBody {
  Program program;
  std::vector<Value> captures;  // the enclosing builder's values, one per captured input
};

// Records `fn` as a loop body of `parent`: inputs of `specs`, then the
// captures (`pre_captured` first, in order, then whatever `fn` uses).
absl::StatusOr<RecordedBody> recordBody(Builder& parent, std::string_view name, const std::vector<Spec>& specs,
                                        absl::Span<const Value> pre_captured, const BodyFn& fn) {
  if (parent.depth() + 1 > kMaxLoopDepth) {
    return makeError(ErrorKind::kProgramTooLarge,
                     strCat(name, ": loops nest more than ", kMaxLoopDepth, " deep (the language's limit)"));
  }
  Builder body(&parent);
  std::vector<Value> args;
  for (size_t i = 0; i < specs.size(); ++i) args.push_back(body.input(specs[i], static_cast<int64_t>(i)));
  for (const Value& v : pre_captured) body.local(v);
  auto results = fn(body, std::span<const Value>(args.data(), args.size()));
  if (!body.status().ok()) return body.status();
  if (!results.ok()) return results.status();
  RecordedBody out;
  out.program.name = std::string(name);
  for (size_t i = 0; i < results->size(); ++i) {
    const Value& r = (*results)[i];
    if (!r.valid() || (!body.owns(r) && !body.encloses(r))) {
      return makeError(ErrorKind::kInvalidValue,
                       strCat(name, ": result ", i, " is not a value of this loop's recording"));
    }
    Value local = body.local(r);  // an enclosing value returned as is: captured
    if (!body.status().ok()) return body.status();
    out.program.outputs.push_back(local.id());
  }
  out.program.nodes = body.nodes();
  out.program.bodies = body.bodies();
  for (size_t i = 0; i < out.program.nodes.size(); ++i) {
    if (out.program.nodes[i].op == OpCode::kInput) out.program.inputs.push_back(static_cast<int32_t>(i));
  }
  out.captures = body.captures();
  return out;
}

// The loop's operands as values of `b` (initial carries and xs recorded by
// an enclosing builder are captured into it).
bool localOperands(Builder& b, std::string_view op, std::string_view role, absl::Span<const Value> values,
                   std::vector<Value>& out) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].valid()) {
      b.poison(makeError(ErrorKind::kInvalidValue,
                         strCat(op, ": ", role, " ", i, " is not a recorded value (default-constructed or poisoned)")));
      return false;
    }
    Value v = b.local(values[i]);
    if (!v.valid()) return false;
    out.push_back(v);
  }
  return true;
}

std::vector<Value> poisoned(size_t n) { return std::vector<Value>(n); }

// The loop node and one loop_result per result.
std::vector<Value> recordLoop(Builder& b, Node node, const std::vector<Value>& operands, size_t results) {
  Value loop = b.record(std::move(node), absl::Span<const Value>(operands));
  std::vector<Value> out;
  for (size_t k = 0; k < results; ++k) {
    Node r;
    r.op = OpCode::kLoopResult;
    r.ints = {static_cast<int64_t>(k)};
    out.push_back(b.record(std::move(r), {loop}));
  }
  return out;
}

}  // namespace

// A scan of length / k chunks, each a scan of k steps, then one of the
// steps left (ScanOptions::checkpoint_every): reverse mode through the
// outer scan keeps one carry per chunk, and each chunk's backward step
// recomputes its k steps (the inner scan's forward) from it.
static ScanResult checkpointedScan(Builder& b, const ScanOptions& options, absl::Span<const Value> init,
                            absl::Span<const Value> xs, const ScanBody& body) {
  ScanResult result{poisoned(init.size()), {}};
  const int64_t k = options.checkpoint_every, q = options.length / k, left = options.length % k;
  const std::string chunk = strCat(options.axis, "_checkpoint");
  for (const Value& x : xs) {
    if (!x.valid() || axisExtent(x.spec().axes, options.axis) != options.length) {
      // Not an xs value of this loop: the plain scan names what is wrong.
      return scan(b, ScanOptions{.axis = options.axis, .length = options.length}, init, xs, body);
    }
  }
  std::vector<Value> chunked, rest;
  for (const Value& x : xs) {
    const Value whole = left > 0 ? x.slice(options.axis, 0, q * k) : x;
    chunked.push_back(whole.split(options.axis, chunk, options.axis, k));
    if (left > 0) rest.push_back(x.slice(options.axis, q * k, options.length));
  }
  const ScanOptions inner{.axis = options.axis, .length = k};
  ScanResult outer = scan(b, ScanOptions{.axis = chunk, .length = q}, init, chunked,
                          [&](Builder& bb, std::span<const Value> carry,
                              std::span<const Value> x) -> absl::StatusOr<ScanStep> {
                            ScanResult steps = scan(bb, inner, carry, x, body);
                            if (!bb.status().ok()) return bb.status();
                            return ScanStep{steps.carry, steps.ys};
                          });
  if (!b.status().ok()) {
    result.ys = poisoned(outer.ys.size());
    return result;
  }
  std::vector<Value> ys;
  for (const Value& y : outer.ys) ys.push_back(y.merge({chunk, options.axis}, options.axis));
  std::vector<Value> carry = outer.carry;
  if (left > 0) {
    ScanResult tail = scan(b, ScanOptions{.axis = options.axis, .length = left}, carry, rest, body);
    if (!b.status().ok()) {
      result.ys = poisoned(ys.size());
      return result;
    }
    carry = tail.carry;
    for (size_t j = 0; j < ys.size(); ++j) ys[j] = concat(options.axis, {ys[j], tail.ys[j]});
  }
  if (!b.status().ok()) return result;
  return ScanResult{carry, ys};
}

ScanResult scan(Builder& b, const ScanOptions& options, absl::Span<const Value> init, absl::Span<const Value> xs,
                const ScanBody& body) {
  ScanResult result{poisoned(init.size()), {}};
  if (!b.status().ok()) return result;
  if (options.length < 0) {
    b.poison(makeError(ErrorKind::kInvalidArgument, strCat("scan: length ", options.length, " is negative")));
    return result;
  }
  if (auto st = checkAxisName("scan", options.axis); !st.ok()) {
    b.poison(st);
    return result;
  }
  if (options.checkpoint_every < 0) {
    b.poison(makeError(ErrorKind::kInvalidArgument,
                       strCat("scan: checkpoint_every ", options.checkpoint_every, " is negative")));
    return result;
  }
  if (options.checkpoint_every > 0 && options.checkpoint_every < options.length) {
    return checkpointedScan(b, options, init, xs, body);
  }
  std::vector<Value> operands;
  if (!localOperands(b, "scan", "initial carry", init, operands)) return result;
  if (!localOperands(b, "scan", "xs value", xs, operands)) return result;
  std::vector<Spec> specs;
  for (size_t i = 0; i < operands.size(); ++i) {
    Spec s = operands[i].spec();
    if (i >= init.size()) {  // an xs value: the body sees one step's slice
      size_t at = 0;
      while (at < s.axes.size() && s.axes[at].name != options.axis) ++at;
      if (at == s.axes.size()) {
        b.poison(makeError(ErrorKind::kUnknownAxis,
                           strCat("scan: xs value ", i - init.size(), " ", axesText(s.axes), " lacks the loop's axis '",
                                  options.axis, "'")));
        return result;
      }
      if (s.axes[at].extent != options.length) {
        b.poison(makeError(ErrorKind::kAxisExtentMismatch,
                           strCat("scan: xs value ", i - init.size(), " ", axesText(s.axes), " has '", options.axis,
                                  "' of extent ", s.axes[at].extent, " but the loop has length ", options.length)));
        return result;
      }
      s.axes.erase(s.axes.begin() + at);
    }
    specs.push_back(std::move(s));
  }
  size_t ys = 0;
  bool body_returned = false;
  auto recorded = recordBody(
      b, "scan body", specs, {},
      [&](Builder& bb, std::span<const Value> args) -> absl::StatusOr<std::vector<Value>> {
        auto step = body(bb, args.subspan(0, init.size()), args.subspan(init.size()));
        if (!step.ok()) return step.status();
        body_returned = true;
        ys = step->ys.size();
        if (step->carry.size() != init.size()) {
          return makeError(ErrorKind::kCarryMismatch, strCat("scan: the body returns ", step->carry.size(),
                                                             " carries but the loop has ", init.size()));
        }
        std::vector<Value> out = step->carry;
        out.insert(out.end(), step->ys.begin(), step->ys.end());
        return out;
      });
  if (body_returned) result.ys = poisoned(ys);
  if (!recorded.ok()) {
    b.poison(recorded.status());
    return result;
  }
  Node node;
  node.op = OpCode::kScan;
  node.names = {options.axis};
  node.ints = {b.addBody(std::move(recorded->program)), static_cast<int64_t>(init.size()),
               static_cast<int64_t>(xs.size()), options.length};
  operands.insert(operands.end(), recorded->captures.begin(), recorded->captures.end());
  std::vector<Value> results = recordLoop(b, std::move(node), operands, init.size() + ys);
  if (!b.status().ok()) return result;
  result.carry.assign(results.begin(), results.begin() + init.size());
  result.ys.assign(results.begin() + init.size(), results.end());
  return result;
}

std::vector<Value> whileLoop(Builder& b, absl::Span<const Value> init, const LoopCondition& condition,
                             const LoopBody& body) {
  std::vector<Value> result = poisoned(init.size());
  if (!b.status().ok()) return result;
  std::vector<Value> operands;
  if (!localOperands(b, "while_loop", "initial carry", init, operands)) return result;
  std::vector<Spec> specs;
  for (const Value& v : operands) specs.push_back(v.spec());
  auto cond = recordBody(b, "while_loop condition", specs, {},
                         [&](Builder& bb, std::span<const Value> args) -> absl::StatusOr<std::vector<Value>> {
                           auto c = condition(bb, args);
                           if (!c.ok()) return c.status();
                           return std::vector<Value>{*c};
                         });
  if (!cond.ok()) {
    b.poison(cond.status());
    return result;
  }
  // The step takes the condition's captures first, so both bodies take the
  // same inputs: the carries, then every capture of either.
  auto step = recordBody(b, "while_loop body", specs, cond->captures,
                         [&](Builder& bb, std::span<const Value> args) { return body(bb, args); });
  if (!step.ok()) {
    b.poison(step.status());
    return result;
  }
  Program& c = cond->program;
  for (size_t k = cond->captures.size(); k < step->captures.size(); ++k) {
    Node in;
    in.op = OpCode::kInput;
    const Spec s = step->captures[k].spec();
    in.dtype = s.dtype;
    in.axes = s.axes;
    in.ints = {static_cast<int64_t>(c.inputs.size())};
    c.inputs.push_back(static_cast<int32_t>(c.nodes.size()));
    c.nodes.push_back(std::move(in));
  }
  Node node;
  node.op = OpCode::kWhileLoop;
  const int64_t cond_index = b.addBody(std::move(c));
  node.ints = {cond_index, b.addBody(std::move(step->program)), static_cast<int64_t>(init.size())};
  operands.insert(operands.end(), step->captures.begin(), step->captures.end());
  std::vector<Value> results = recordLoop(b, std::move(node), operands, init.size());
  if (!b.status().ok()) return result;
  return results;
}

}  // namespace accy::tensor
