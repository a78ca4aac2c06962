#include "tests/program_shapes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace accy::shapes {
namespace {

using tensor::DType;
using tensor::Value;
using Args = std::span<const Value>;

std::vector<tensor::Spec> matrixInput() { return {tensor::spec(DType::f32, {{"a", 1024}, {"b", 8}})}; }

}  // namespace

absl::StatusOr<tensor::Program> chain(int n) {
  return tensor::define("chain", matrixInput(), [n](tensor::Builder&, Args a) {
    Value v = a[0];
    for (int i = 0; i < n; ++i) v = i % 3 == 0 ? v * 1.0001 : i % 3 == 1 ? v + 0.5 : v.tanh();
    return v.sum({"a", "b"});
  });
}

absl::StatusOr<tensor::Program> reductions(int n) {
  return tensor::define("reductions", matrixInput(), [n](tensor::Builder&, Args a) {
    Value total = (a[0] * 1.0).sum("a");
    for (int i = 1; i < n / 3; ++i) total = total + (a[0] * (1.0 + i * 1e-3)).sum("a");
    return total.sum("b");
  });
}

absl::StatusOr<tensor::Program> fanout(int n) {
  return tensor::define("fanout", matrixInput(), [n](tensor::Builder&, Args a) {
    const Value v = a[0].tanh();
    Value total = v;
    for (int i = 1; i < n / 3; ++i) total = total + (v * (1.0 + i * 1e-3) + i * 1e-3);
    return total.sum({"a", "b"});
  });
}

int mlpLayers(int n) { return std::max(1, n / 17); }

tensor::Function mlpLoss(int layers) {
  std::vector<tensor::Spec> specs = {tensor::spec(DType::f32, {{"batch", 16}, {"k", 32}})};
  for (int l = 0; l < layers; ++l) {
    specs.push_back(tensor::spec(DType::f32, {{"k", 32}, {"j", 32}}));
    specs.push_back(tensor::spec(DType::f32, {{"j", 32}}));
  }
  auto f = tensor::Function::define("mlp", specs, [layers](tensor::Builder&, Args a) {
    Value h = a[0];
    for (int l = 0; l < layers; ++l) h = (h.dot(a[1 + 2 * l], "k") + a[2 + 2 * l]).tanh().rename("j", "k");
    return (h * h).sum({"batch", "k"});
  });
  if (!f.ok()) {
    // The shape is fixed by this file: a failure here is a bug in it.
    std::fprintf(stderr, "program_shapes: mlp: %s\n", f.status().ToString().c_str());
    std::abort();
  }
  return *std::move(f);
}

}  // namespace accy::shapes
