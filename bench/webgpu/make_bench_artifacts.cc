// Writes bench_artifacts.js for bench/webgpu/bench.html: the WGSL artifacts
// of an elementwise chain and a sum over 2^22 f32 (the programs the
// hand-written kernels in bench.js compute).
//
//   bazel run //bench/webgpu:make_bench_artifacts -- DIR
#include <cstdio>
#include <string>

#include "accy/accy.h"
#include "compiler/codegen/wgsl/artifact.h"
#include "compiler/codegen/wgsl/compile.h"
#include "base/files.h"

namespace tensor = accy::tensor;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  constexpr int64_t kN = int64_t{1} << 22;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}})};
  using Args = std::span<const tensor::Value>;
  auto chain = tensor::define("chain", specs, [](tensor::Builder&, Args a) {
    return ((a[0] * 2.0 + 1.0) * a[0] - 3.0) * 0.5 + a[0];
  });
  auto sum = tensor::define("sum", specs, [](tensor::Builder&, Args a) { return a[0].sum("i"); });
  std::string text = "// Written by bench/webgpu/make_bench_artifacts.cc.\nglobalThis.BENCH_ARTIFACTS = {\n";
  for (auto& [name, program] : {std::pair{"chain", &chain}, std::pair{"sum", &sum}}) {
    if (!program->ok()) {
      std::fprintf(stderr, "recording %s failed: %s\n", name, program->status().ToString().c_str());
      return 1;
    }
    auto exe = accy::wgsl::compileProgram(**program, accy::wgsl::TargetInfo{});
    if (!exe.ok()) {
      std::fprintf(stderr, "compiling %s failed: %s\n", name, exe.status().ToString().c_str());
      return 1;
    }
    auto json = accy::wgsl::artifactJson(*exe);
    if (!json.ok()) return 1;
    text += std::string("\"") + name + "\": " + *json + ",\n";
  }
  text += "};\n";
  const std::string path = std::string(argv[1]) + "/bench_artifacts.js";
  if (absl::Status st = accy::files::writeFile(path, text); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}
