// A program no test has seen, for checking a target from the command line
// (tools/msl/accy_run_msl_test.sh):
//   random_wire write SEED DIR [f64]
//                                  DIR/program.wire and DIR/in<N>.npy; prints
//                                  the `accy run` input options
//   random_wire compare GOT.npy EXPECTED.npy
//                                  exit 0 when GOT matches EXPECTED within
//                                  the tolerances of docs/CONFORMANCE.md
// Programs are drawn by tests/random_programs.h (f32 values, or f64).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/wire/wire.h"
#include "tests/conformance.h"
#include "tests/random_programs.h"
#include "tools/npy.h"

namespace accy {
namespace {

std::vector<int64_t> shapeOf(const tensor::Spec& spec) {
  std::vector<int64_t> shape;
  for (const tensor::Axis& a : spec.axes) shape.push_back(a.extent);
  return shape;
}

int write(uint32_t seed, const std::string& dir, bool f64) {
  testing::RandomOptions options;
  if (f64) options.dtype = tensor::DType::f64;
  const testing::RandomCase c = testing::randomProgram(seed, options);
  const std::string bytes = wire::encode(c.program);
  if (FILE* f = std::fopen((dir + "/program.wire").c_str(), "wb")) {
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (std::fclose(f) != 0 || !ok) return 1;
  } else {
    std::fprintf(stderr, "cannot write %s/program.wire\n", dir.c_str());
    return 1;
  }
  const std::vector<tensor::Spec> specs = c.program.inputSpecs();
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string path = dir + "/in" + std::to_string(i) + ".npy";
    if (absl::Status st = npy::writeFile(path, specs[i].dtype, shapeOf(specs[i]), c.inputs[i]); !st.ok()) {
      std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
      return 1;
    }
    std::printf("--input %zu=%s ", i, path.c_str());
  }
  std::printf("\n");
  return 0;
}

int compare(const std::string& got_path, const std::string& expected_path) {
  absl::StatusOr<npy::Array> got = npy::readFile(got_path), expected = npy::readFile(expected_path);
  if (!got.ok() || !expected.ok()) {
    std::fprintf(stderr, "%s\n", std::string((got.ok() ? expected : got).status().message()).c_str());
    return 1;
  }
  if (got->dtype != expected->dtype || got->shape != expected->shape) {
    std::fprintf(stderr, "%s: dtype or shape differs from %s\n", got_path.c_str(), expected_path.c_str());
    return 1;
  }
  const ::testing::AssertionResult r = testing::matches(got->dtype, got->data, expected->data);
  if (!r) {
    std::fprintf(stderr, "%s: %s\n", got_path.c_str(), r.message());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace accy

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "write" && (argc == 4 || (argc == 5 && std::string(argv[4]) == "f64"))) {
    return accy::write(static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)), argv[3], argc == 5);
  }
  if (command == "compare" && argc == 4) return accy::compare(argv[2], argv[3]);
  std::fprintf(stderr, "usage: random_wire write SEED DIR [f64] | random_wire compare GOT.npy EXPECTED.npy\n");
  return 2;
}
