// codegen_digest: compiles a fixed corpus of programs for the CPU targets
// (x86-64 at each ISA and thread setting, WebAssembly with and without
// threads) and prints one line per program and target: the FNV-1a hash and
// the size of the code bytes. The code does not run, so every ISA is
// emitted on any host.
//
// For refactors of the emitters that must not change what they emit: run it
// before and after and diff the outputs (docs/CHOIR.md, "Changing an
// emitter without changing its code"). The corpus covers every op case of
// the conformance suites at extents that take every path of the walker
// (scalar, vector, unrolled reduction, tails), the products of the blocked
// microkernel with and without an epilogue, streamed outputs, a perceptron's
// gradient and vmap, and random programs in f32 and f64.
//
//   bazel run //tools:codegen_digest > digest.txt
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "tests/program_shapes.h"
#include "compiler/codegen/wasm/compile.h"
#include "compiler/codegen/x86_64/compile.h"
#include "tests/op_cases.h"
#include "tests/random_programs.h"

namespace accy {
namespace {

using tensor::DType;
using tensor::Program;

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

void digest(const std::string& name, const Program& program) {
  struct X86 {
    const char* name;
    x64::Isa isa;
    int threads;
  };
  static const X86 kX86[] = {{"sse41", x64::Isa::kSse41, 1},   {"avx2", x64::Isa::kAvx2, 1},
                             {"avx512", x64::Isa::kAvx512, 1}, {"avx512-t2", x64::Isa::kAvx512, 2},
                             {"avx2-t4", x64::Isa::kAvx2, 4}};
  for (const X86& t : kX86) {
    x64::CompileOptions options;
    options.isa = t.isa;
    options.threads = t.threads;
    auto exe = x64::compileProgram(program, options);
    if (exe.ok()) {
      std::printf("%s x86-%s %016llx %zu\n", name.c_str(), t.name, static_cast<unsigned long long>(fnv1a(exe->code)),
                  exe->code.size());
    } else {
      std::printf("%s x86-%s error %s\n", name.c_str(), t.name, std::string(exe.status().message()).c_str());
    }
  }
  for (int threads : {1, 4}) {
    wasm::TargetInfo info;
    info.threads = threads;
    auto exe = wasm::compileProgram(program, info);
    if (exe.ok()) {
      std::printf("%s wasm-t%d %016llx %zu\n", name.c_str(), threads,
                  static_cast<unsigned long long>(fnv1a(exe->code)), exe->code.size());
    } else {
      std::printf("%s wasm-t%d error %s\n", name.c_str(), threads, std::string(exe.status().message()).c_str());
    }
  }
}

void digestDefined(const std::string& name, const std::vector<tensor::Spec>& specs,
                   const std::function<tensor::Value(tensor::Builder&, testing::Args)>& fn) {
  auto program = tensor::define(name, specs, fn);
  if (!program.ok()) {
    std::printf("%s refused %s\n", name.c_str(), std::string(program.status().message()).c_str());
    return;
  }
  digest(name, *program);
}

int run() {
  // Every op case, every dtype, extents across the vector and unroll paths.
  for (const testing::OpCase& c : testing::opCases()) {
    for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_}) {
      if (c.floats_only && !tensor::isFloating(dtype)) continue;
      for (int64_t p : {1, 3, 8, 37, 256}) {
        for (int64_t q : {1, 5, 64}) {
          if (testing::refusedByDesign(c, dtype, p)) continue;
          const std::vector<tensor::Spec> specs = {tensor::spec(dtype, {{"p", p}, {"q", q}}),
                                                   tensor::spec(dtype, {{"p", p}, {"q", q}})};
          digestDefined(std::string(c.name) + "-" + std::string(tensor::dtypeName(dtype)) + "-" +
                            std::to_string(p) + "x" + std::to_string(q),
                        specs, c.fn);
        }
      }
    }
  }
  // Products: the blocked microkernel with its tails, with an epilogue, and
  // a sum over a long axis.
  for (DType dtype : {DType::f32, DType::f64}) {
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{64, 64, 64}, {37, 53, 29}, {6, 300, 130},
                           {128, 512, 256}, {1, 17, 1}}) {
      const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + "-" +
                                std::string(tensor::dtypeName(dtype));
      const std::vector<tensor::Spec> specs = {tensor::spec(dtype, {{"i", m}, {"k", k}}),
                                               tensor::spec(dtype, {{"k", k}, {"j", n}}),
                                               tensor::spec(dtype, {{"j", n}})};
      digestDefined("dot-" + shape, specs, [](tensor::Builder&, testing::Args a) { return a[0].dot(a[1], "k"); });
      digestDefined("dot-tanh-" + shape, specs,
                    [](tensor::Builder&, testing::Args a) { return (a[0].dot(a[1], "k") + a[2]).tanh(); });
    }
    // Large outputs (streamed stores), a light and a heavy value, and sums.
    for (int64_t n : {int64_t{1} << 24, (int64_t{1} << 24) + 3}) {
      const std::string size = std::to_string(n) + "-" + std::string(tensor::dtypeName(dtype));
      const std::vector<tensor::Spec> specs = {tensor::spec(dtype, {{"n", n}}), tensor::spec(dtype, {})};
      digestDefined("affine-" + size, specs, [](tensor::Builder&, testing::Args a) { return a[0] * a[1] + 1; });
      digestDefined("sin-affine-" + size, specs,
                    [](tensor::Builder&, testing::Args a) { return (a[0] * a[1] + 1).sin() * 3; });
      digestDefined("sum-" + size, specs, [](tensor::Builder&, testing::Args a) { return (a[0] * a[1]).sum("n"); });
    }
  }
  // Long fused chains, many reductions, a perceptron with its gradient.
  for (int n : {12, 60}) {
    if (auto p = shapes::chain(n); p.ok()) digest("chain-" + std::to_string(n), *p);
    if (auto p = shapes::reductions(n); p.ok()) digest("reductions-" + std::to_string(n), *p);
    if (auto p = shapes::fanout(n); p.ok()) digest("fanout-" + std::to_string(n), *p);
  }
  {
    tensor::Function loss = shapes::mlpLoss(3);
    std::vector<int> wrt;
    for (int k = 1; k < static_cast<int>(loss.program().inputs.size()); ++k) wrt.push_back(k);
    auto grad = loss.valueAndGrad({.wrt = wrt});
    if (grad.ok()) {
      digest("mlp-grad", grad->program());
      std::vector<tensor::InAxis> in_axes(grad->program().inputs.size(), tensor::unmapped);
      in_axes[0] = tensor::mappedAxis(0);
      auto batched = grad->vmap({.axis_size = 4, .in_axes = in_axes, .axis_name = "example"});
      if (batched.ok()) digest("mlp-grad-vmap", batched->program());
    }
  }
  {
    // bench/cpu_bench.cc's training step: a two-layer perceptron's loss
    // (batch 256, 512 inputs, 512 tanh units, 10 classes) and its gradient.
    const std::vector<tensor::Spec> specs = {tensor::spec(DType::f32, {{"b", 256}, {"i", 512}}),
                                             tensor::spec(DType::f32, {{"b", 256}, {"c", 10}}),
                                             tensor::spec(DType::f32, {{"i", 512}, {"h", 512}}),
                                             tensor::spec(DType::f32, {{"h", 512}}),
                                             tensor::spec(DType::f32, {{"h", 512}, {"c", 10}})};
    auto loss = tensor::Function::define("perceptron", specs, [](tensor::Builder&, testing::Args v) {
      const tensor::Value h = (v[0].dot(v[2], "i") + v[3]).tanh();
      const tensor::Value logits = h.dot(v[4], "h");
      const tensor::Value top = logits.max("c");
      const tensor::Value lse = (logits - top).exp().sum("c").log() + top;
      return (lse - (v[1] * logits).sum("c")).mean("b");
    });
    if (loss.ok()) {
      auto step = loss->valueAndGrad({.wrt = {2, 3, 4}});
      if (step.ok()) digest("perceptron-step", step->program());
    }
  }
  for (DType dtype : {DType::f32, DType::f64}) {
    for (uint32_t seed = 1; seed <= 60; ++seed) {
      testing::RandomOptions options;
      options.dtype = dtype;
      testing::RandomCase c = testing::randomProgram(seed, options);
      digest("random-" + std::string(tensor::dtypeName(dtype)) + "-" + std::to_string(seed), c.program);
    }
  }
  return 0;
}

}  // namespace
}  // namespace accy

int main() { return accy::run(); }
