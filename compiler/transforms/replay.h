// Re-recording programs into a Builder: the machinery every transform (and
// Function::call) is built on.
#ifndef ACCY_COMPILER_TRANSFORMS_REPLAY_H_
#define ACCY_COMPILER_TRANSFORMS_REPLAY_H_

#include <span>
#include <vector>

#include "compiler/tensor/builder.h"
#include "compiler/tensor/program.h"

namespace accy::transforms {

// Records a copy of `node` (op and attributes) in `b` on `operands`; a
// loop node's bodies, taken from `bodies` (its program's), are added to
// `b` and renumbered.
tensor::Value recordLike(tensor::Builder& b, const tensor::Node& node,
                         absl::Span<const tensor::Value> operands,
                         absl::Span<const tensor::Program> bodies = {});

// Records every node of `program` in `b`, with `inputs` standing for its
// inputs; returns the value of every node (index = node id). A count
// mismatch poisons the builder (ArityMismatch).
std::vector<tensor::Value> replayNodes(tensor::Builder& b, const tensor::Program& program,
                                       std::span<const tensor::Value> inputs);

// Removes nodes no output depends on (inputs stay) and merges nodes that
// compute the same thing (same op, attributes and operands).
tensor::Program simplify(const tensor::Program& program);

}  // namespace accy::transforms

#endif  // ACCY_COMPILER_TRANSFORMS_REPLAY_H_
