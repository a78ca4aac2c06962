// The elementary function of an op (sin, cos, exp, log, tanh, sigmoid, pow)
// from compiler/codegen/math/elementary.h over a target's ops type: the one
// dispatch every GPU target's exactMath() uses.
#ifndef ACCY_COMPILER_CODEGEN_GPU_ELEMENTARY_OP_H_
#define ACCY_COMPILER_CODEGEN_GPU_ELEMENTARY_OP_H_

#include <optional>

#include "compiler/choir/ir.h"
#include "compiler/codegen/math/elementary.h"

namespace accy::gpu {

// `y` is pow's exponent (unused otherwise); nullopt for another op.
template <class O>
std::optional<typename O::Vec> elementaryOp(O& o, choir::OpCode op, const typename O::Vec& x,
                                            const typename O::Vec& y) {
  switch (tensor::opElementary(op)) {
    case tensor::Elementary::Sin:
      return math::sinOf(o, x);
    case tensor::Elementary::Cos:
      return math::cosOf(o, x);
    case tensor::Elementary::Exp:
      return math::expOf(o, x);
    case tensor::Elementary::Log:
      return math::logOf(o, x);
    case tensor::Elementary::Tanh:
      return math::tanhOf(o, x);
    case tensor::Elementary::Sigmoid:
      return math::sigmoidOf(o, x);
    case tensor::Elementary::Pow:
      return math::powOf(o, x, y);
    case tensor::Elementary::None:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_ELEMENTARY_OP_H_
