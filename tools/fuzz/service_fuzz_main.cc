// A main() for service_fuzz.cc without libFuzzer (//tools:service_fuzz_test):
// feeds inputs of random bytes to LLVMFuzzerTestOneInput, from the fixed
// seeds 1..N/2 and then from a fresh seed (printed, so a failure can be run
// again with --seed=S). Without coverage guidance it reaches less than the
// libFuzzer build (docs/FUZZING.md), but it runs under `bazel test`.
//
//   service_fuzz_test [--inputs=N] [--seed=S] [CORPUS_DIR...]
//
// The files of each CORPUS_DIR are fed first.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::string serviceFuzzSummary();

int main(int argc, char** argv) {
  int inputs = 400;
  uint64_t fresh = std::random_device()();
  std::vector<std::string> corpora;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--inputs=", 9) == 0) {
      inputs = std::atoi(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--seed=", 7) == 0) {
      fresh = std::strtoull(argv[i] + 7, nullptr, 10);
    } else {
      corpora.push_back(argv[i]);
    }
  }
  LLVMFuzzerInitialize(&argc, &argv);
  for (const std::string& dir : corpora) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      std::printf("service_fuzz: replayed %s\n", f.filename().c_str());
    }
  }
  std::printf("service_fuzz: %d inputs, seeds 1..%d then %llu\n", inputs, inputs / 2,
              static_cast<unsigned long long>(fresh));
  std::fflush(stdout);
  size_t bytes_fed = 0;
  for (int n = 0; n < inputs; ++n) {
    const uint64_t seed = n < inputs / 2 ? static_cast<uint64_t>(n + 1) : fresh + static_cast<uint64_t>(n);
    std::mt19937_64 random(seed);
    std::vector<uint8_t> data(random() % 1024);
    for (uint8_t& b : data) b = static_cast<uint8_t>(random());
    LLVMFuzzerTestOneInput(data.data(), data.size());
    bytes_fed += data.size();
  }
  std::printf("service_fuzz: %d inputs (%zu bytes), no finding; %s\n", inputs, bytes_fed, serviceFuzzSummary().c_str());
  return 0;
}
