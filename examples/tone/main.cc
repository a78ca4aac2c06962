// The demo: records the tone mismatch and evaluates it for guesses 2.5 and 3.
// `tone_demo --dot` prints the recorded program as a Graphviz graph instead.
#include <cstdio>
#include <cstring>

#include "accy/accy.h"
#include "examples/tone/tone.h"

namespace tensor = accy::tensor;

int main(int argc, char** argv) {
  const bool dot = argc > 1 && std::strcmp(argv[1], "--dot") == 0;
  const tensor::Spec one_guess[] = {
      tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  auto program = tensor::define("mismatch", one_guess, tone::mismatch);
  if (!program.ok()) {
    std::fprintf(stderr, "recording failed: %s\n", program.status().ToString().c_str());
    return 1;
  }
  if (dot) {
    std::printf("%s", tensor::toDot(*program).c_str());
    return 0;
  }
  std::printf("%s\n", tensor::toText(*program).c_str());
  const tone::Samples data = tone::samples();
  for (float guess : {2.5f, 3.0f}) {
    const float frequency[1] = {guess};
    auto outputs = tensor::evaluate(
        *program, {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)});
    if (!outputs.ok()) {
      std::fprintf(stderr, "evaluation failed: %s\n", outputs.status().ToString().c_str());
      return 1;
    }
    float value;
    std::memcpy(&value, (*outputs)[0].data(), sizeof value);
    float jit_value[1];
    const absl::Status st = tensor::runCpu(
        *program, {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
        {accy::writableBytes(jit_value)});
    if (!st.ok()) {
      std::fprintf(stderr, "runCpu failed: %s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("frequency %.1f: mismatch %.4f (reference evaluator), %.4f (x86-64 JIT, runCpu)\n", guess, value,
                jit_value[0]);
  }
  return 0;
}
