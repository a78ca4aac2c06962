// Writes the artifacts of the tone page (examples/web/index.html), WGSL and
// wasm, as one script, tone_artifacts.js, that sets
// globalThis.TONE_ARTIFACTS = {wgsl: {refine, curve}, wasm: {refine, curve}}:
//   refine: vmap(valueAndGrad(mismatch)) over 8 guesses: inputs f32[guess=8],
//           time, sample; outputs the mismatch and its slope per guess;
//   curve:  the mismatch of 256 frequencies at once, for the plot.
//
//   bazel run //examples/web:make_artifacts -- "$PWD/examples/web"
#include <cstdio>
#include <string>

#include "accy/accy.h"
#include "compiler/codegen/wgsl/artifact.h"
#include "compiler/codegen/wasm/compile.h"
#include "compiler/codegen/wgsl/compile.h"
#include "examples/tone/tone.h"
#include "tools/files.h"

namespace tensor = accy::tensor;

namespace {

// {"refine": ..., "curve": ...} for WGSL or wasm.
absl::StatusOr<std::string> artifactsOf(bool wasm, const tensor::Program& refine, const tensor::Program& curve) {
  std::string out = "{";
  for (const auto& [name, program] : {std::pair{"refine", &refine}, std::pair{"curve", &curve}}) {
    absl::StatusOr<accy::executable::Executable> exe =
        wasm ? accy::wasm::compileProgram(*program, accy::wasm::TargetInfo{})
             : accy::wgsl::compileProgram(*program, accy::wgsl::TargetInfo{});
    if (!exe.ok()) return exe.status();
    absl::StatusOr<std::string> json = wasm ? accy::wasm::artifactJson(*exe) : accy::wgsl::artifactJson(*exe);
    if (!json.ok()) return json.status();
    out += std::string(out.size() > 1 ? ",\n" : "") + "\"" + name + "\": " + *json;
  }
  return out + "}";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  auto f = tensor::Function::define("mismatch", tone::specs(), tone::mismatch);
  if (!f.ok()) {
    std::fprintf(stderr, "recording failed: %s\n", f.status().ToString().c_str());
    return 1;
  }
  auto refine = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  auto curve = tensor::define("mismatch", tone::specs({{"guess", 256}}), tone::mismatch);
  if (!refine.ok() || !curve.ok()) {
    std::fprintf(stderr, "transforming failed: %s %s\n", refine.status().ToString().c_str(),
                 curve.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::string> a = artifactsOf(false, refine->program(), *curve),
                              b = artifactsOf(true, refine->program(), *curve);
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "compiling failed: %s %s\n", a.status().ToString().c_str(), b.status().ToString().c_str());
    return 1;
  }
  const std::string path = std::string(argv[1]) + "/tone_artifacts.js";
  const std::string text = "// Written by examples/web/make_artifacts.cc.\nglobalThis.TONE_ARTIFACTS = {\n\"wgsl\": " + *a +
                           ",\n\"wasm\": " + *b + "};\n";
  if (absl::Status st = accy::files::writeFile(path, text); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (%zu bytes)\n", path.c_str(), text.size());
  return 0;
}
