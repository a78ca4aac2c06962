// Writes the tone mismatch as wire-encoded test data for the C ABI tests:
//
//   bazel run //examples/tone:make_wire -- "$PWD/examples/tone"
//
// mismatch.wire:  inputs f32[], f32[point=16], f32[point=16]; output f32[]
// mismatch8.wire: inputs f32[guess=8], f32[point=16], f32[point=16];
//                 output f32[guess=8]
//
// The files are checked in. Keep the old ones when the wire format gains a
// minor version: they show that earlier encodings still load.
#include <cstdio>
#include <string>

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "base/files.h"

namespace tensor = accy::tensor;

namespace {

bool write(const std::string& path, const std::string& bytes) {
  if (const absl::Status st = accy::files::writeFile(path, bytes); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return false;
  }
  std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
  return true;
}

bool emit(const std::string& path, std::vector<tensor::Axis> frequency_axes) {
  auto program = tensor::define("mismatch", tone::specs(std::move(frequency_axes)), tone::mismatch);
  if (!program.ok()) {
    std::fprintf(stderr, "recording failed: %s\n", program.status().ToString().c_str());
    return false;
  }
  return write(path, accy::wire::encode(*program));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  if (!emit(dir + "/mismatch.wire", {})) return 1;
  if (!emit(dir + "/mismatch8.wire", {{"guess", 8}})) return 1;
  return 0;
}
