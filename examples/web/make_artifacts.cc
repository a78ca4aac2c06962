// Writes the artifacts of the example pages, WGSL and wasm, each page's as
// one script:
//
// tone_artifacts.js (examples/web/index.html) sets
// globalThis.TONE_ARTIFACTS = {wgsl: {refine, curve}, wasm: {refine, curve}}:
//   refine: vmap(valueAndGrad(mismatch)) over 8 guesses: inputs f32[guess=8],
//           time, sample; outputs the mismatch and its slope per guess;
//   curve:  the mismatch of 256 frequencies at once, for the plot.
//
// digits_artifacts.js (examples/web/digits.html) sets globalThis.DIGITS =
// {wgsl: {epoch, predict}, wasm: {epoch, predict}, options, data, initial}:
//   epoch:   examples/digits' epoch program (a scan over minibatches), as a
//            plan artifact (accy-plan-1, docs/WEB.md);
//   predict: the held-out images' classes;
//   data:    the split of examples/digits/digits.h, pixels as base64 bytes
//            (0 to 16), labels as arrays; initial: the starting weights.
// Without the digits data (tools/setup.sh unpacks it) the tone page's script
// is written and the program then fails, naming the missing file.
//
//   bazel run //examples/web:make_artifacts -- "$PWD/examples/web"
#include <cstdio>
#include <string>

#include "accy/accy.h"
#include "backends/plan_artifact.h"
#include "compiler/codegen/wgsl/artifact.h"
#include "compiler/codegen/wasm/compile.h"
#include "compiler/codegen/wgsl/compile.h"
#include "examples/digits/digits.h"
#include "examples/tone/tone.h"
#include "base/files.h"

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

absl::StatusOr<accy::executable::Executable> compileFor(bool wasm, const tensor::Program& program) {
  return wasm ? accy::wasm::compileProgram(program, accy::wasm::TargetInfo{})
              : accy::wgsl::compileProgram(program, accy::wgsl::TargetInfo{});
}

absl::StatusOr<std::string> artifactOf(bool wasm, const accy::executable::Executable& exe) {
  return wasm ? accy::wasm::artifactJson(exe) : accy::wgsl::artifactJson(exe);
}

std::string base64(std::span<const uint8_t> bytes) {
  static const char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kDigits[v >> 18];
    out += kDigits[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[v & 63] : '=';
  }
  return out;
}

template <typename T>
std::string jsonList(const std::vector<T>& values) {
  std::string out = "[";
  char number[32];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(number, sizeof number, "%s%.9g", i ? "," : "", static_cast<double>(values[i]));
    out += number;
  }
  return out + "]";
}

// The digits page's script (see the top of this file).
absl::StatusOr<std::string> digitsScript() {
  absl::StatusOr<digits::Split> data = digits::load();
  if (!data.ok()) return data.status();
  digits::Options o;
  o.steps = (data->train + o.batch - 1) / o.batch;
  absl::StatusOr<tensor::Program> epoch = digits::epoch(o, data->train);
  if (!epoch.ok()) return epoch.status();
  absl::StatusOr<tensor::Program> predict = digits::predict(o, data->test);
  if (!predict.ok()) return predict.status();
  std::string out = "// Written by examples/web/make_artifacts.cc.\nglobalThis.DIGITS = {\n";
  for (const bool wasm : {false, true}) {
    const char* target = wasm ? "wasm" : "wgsl";
    absl::StatusOr<std::string> plan = accy::backends::planArtifactJson(
        *epoch, target, [&](const tensor::Program& stage) { return compileFor(wasm, stage); },
        [&](const accy::executable::Executable& exe) { return artifactOf(wasm, exe); });
    if (!plan.ok()) return plan.status();
    absl::StatusOr<accy::executable::Executable> exe = compileFor(wasm, *predict);
    if (!exe.ok()) return exe.status();
    absl::StatusOr<std::string> p = artifactOf(wasm, *exe);
    if (!p.ok()) return p.status();
    out += std::string("\"") + target + "\": {\"epoch\": " + *plan + ",\n\"predict\": " + *p + "},\n";
  }
  auto pixels = [](const std::vector<float>& x) {
    std::vector<uint8_t> bytes;
    for (float v : x) bytes.push_back(static_cast<uint8_t>(std::lround(v * 16)));
    return base64(bytes);
  };
  const digits::Weights w = digits::initial(o);
  out += "\"options\": {\"channels\": " + std::to_string(o.channels) + ", \"batch\": " + std::to_string(o.batch) +
         ", \"steps\": " + std::to_string(o.steps) + ", \"rate\": " + std::to_string(o.rate) + "},\n";
  out += "\"data\": {\"train\": " + std::to_string(data->train) + ", \"test\": " + std::to_string(data->test) +
         ",\n\"train_pixels\": \"" + pixels(data->train_x) + "\",\n\"train_labels\": " + jsonList(data->train_y) +
         ",\n\"test_pixels\": \"" + pixels(data->test_x) + "\",\n\"test_labels\": " + jsonList(data->test_y) + "},\n";
  out += "\"initial\": {\"w1\": " + jsonList(w.w1) + ",\n\"b1\": " + jsonList(w.b1) + ",\n\"w2\": " + jsonList(w.w2) +
         ",\n\"b2\": " + jsonList(w.b2) + "}};\n";
  return out;
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
  absl::StatusOr<std::string> digits = digitsScript();
  if (!digits.ok()) {
    std::fprintf(stderr, "the digits page: %s\n", std::string(digits.status().message()).c_str());
    return 1;
  }
  const std::string digits_path = std::string(argv[1]) + "/digits_artifacts.js";
  if (absl::Status st = accy::files::writeFile(digits_path, *digits); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (%zu bytes)\n", digits_path.c_str(), digits->size());
  return 0;
}
