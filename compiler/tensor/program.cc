#include "compiler/tensor/program.h"

#include <utility>

namespace accy::tensor {

int64_t Spec::elementCount() const {
  int64_t n = 1;
  for (const Axis& a : axes) n *= a.extent;
  return n;
}

Spec spec(DType dtype, std::vector<Axis> axes) { return Spec{dtype, std::move(axes)}; }

std::vector<Spec> Program::inputSpecs() const {
  std::vector<Spec> out;
  for (int32_t id : inputs) out.push_back(nodes[id].spec());
  return out;
}

std::vector<Spec> Program::outputSpecs() const {
  std::vector<Spec> out;
  for (int32_t id : outputs) out.push_back(nodes[id].spec());
  return out;
}

}  // namespace accy::tensor
