// y = sin(a*x + b) * c over 2^22 f32, and the sum of 2^22 f32, three ways
// on this machine in one run: Accy's wasm target in node (V8, SIMD128),
// a plain JavaScript loop over typed arrays in the same node, and Accy's
// native x86-64 code (one thread) in this process; the medians and their
// ratios, with the CPU model and node's version.
//
// Then the first with threads: wasm on node's worker threads (as many as the
// machine has) against x86-64 on as many threads.
//
//   bazel build -c opt //bench/wasm:wasm_bench && bazel-bin/bench/wasm/wasm_bench
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "accy/accy.h"
#include "base/strings.h"
#include "bench/bench_util.h"
#include "compiler/codegen/wasm/compile.h"
#include "web/page_runner.h"

namespace accy {
namespace {

constexpr int64_t kN = int64_t{1} << 22;

tensor::Program sinAffine() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}}), tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {}), tensor::spec(tensor::DType::f32, {})};
  return *tensor::define("sin_affine", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return (v[1] * v[0] + v[2]).sin() * v[3];
  });
}

tensor::Program sum() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", kN}})};
  return *tensor::define("sum", specs, [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0].sum("i"); });
}

template <typename F>
double medianMs(F&& f, int reps) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The native side: one thread unless asked, the inputs the node script fills.
double nativeMs(const tensor::Program& program, int reps, int threads = 1) {
  auto exe = tensor::CpuExecutable::compile(program, {.threads = threads});
  if (!exe.ok()) {
    std::fprintf(stderr, "native compile: %s\n", std::string(exe.status().message()).c_str());
    std::exit(1);
  }
  std::vector<float> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = static_cast<float>(((i * 7919) % 20011) / 1000.0 - 10);
  const float a = 2, b = 1, c = 3;
  std::vector<float> y(program.outputSpecs()[0].axes.empty() ? 1 : kN);
  std::vector<std::span<const std::byte>> in = {bytes(x)};
  if (program.inputSpecs().size() == 4) {
    in.push_back(bytes(std::span(&a, 1)));
    in.push_back(bytes(std::span(&b, 1)));
    in.push_back(bytes(std::span(&c, 1)));
  }
  return medianMs([&] { (void)exe->launch(in, {writableBytes(y)}); }, reps);
}

double field(const std::string& line, const std::string& name) {
  const size_t at = line.find("\"" + name + "\":");
  return at == std::string::npos ? NAN : std::atof(line.c_str() + at + name.size() + 3);
}

int run(int reps) {
  const std::string node = webgpu::nodePath();
  if (node.empty()) {
    std::fprintf(stderr, "no node: nothing to run wasm in\n");
    return 1;
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "accy_wasm_bench";
  std::filesystem::create_directories(dir);
  for (const char* f : {"web/accy_wasm.js", "web/accy_wasm_worker.js", "bench/wasm/bench.mjs"}) {
    absl::StatusOr<std::string> from = webgpu::sourceFile(f);
    if (!from.ok()) {
      std::fprintf(stderr, "%s\n", std::string(from.status().message()).c_str());
      return 1;
    }
    std::filesystem::copy_file(*from, dir / std::filesystem::path(f).filename(),
                               std::filesystem::copy_options::overwrite_existing);
  }
  const std::pair<const char*, tensor::Program> programs[] = {{"sin_affine", sinAffine()}, {"sum", sum()}};
  const int threads = std::max(2u, std::thread::hardware_concurrency());
  for (const auto& [name, program, t] : {std::tuple{"sin_affine", programs[0].second, 1},
                                         std::tuple{"sum", programs[1].second, 1},
                                         std::tuple{"sin_affine_threads", programs[0].second, threads}}) {
    absl::StatusOr<executable::Executable> exe = wasm::compileProgram(program, wasm::TargetInfo{.threads = t});
    absl::StatusOr<std::string> artifact = exe.ok() ? wasm::artifactJson(*exe) : exe.status();
    if (!artifact.ok()) {
      std::fprintf(stderr, "wasm compile %s: %s\n", name, std::string(artifact.status().message()).c_str());
      return 1;
    }
    std::ofstream(dir / (std::string(name) + ".json")) << *artifact;
  }
  const std::string version_cmd = node + " --version";
  FILE* v = popen(version_cmd.c_str(), "r");
  char version[64] = "?";
  if (v != nullptr && std::fgets(version, sizeof version, v) != nullptr) version[std::strcspn(version, "\n")] = 0;
  if (v != nullptr) pclose(v);
  const std::string cmd = strCat(node, " ", (dir / "bench.mjs").string(), " ", dir.string(), " ", reps);
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<std::string> lines;
  char buf[4096];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) lines.emplace_back(buf);
  if (p == nullptr || pclose(p) != 0 || lines.size() != 3) {
    std::fprintf(stderr, "the node side failed (%zu lines)\n", lines.size());
    return 1;
  }
  std::printf("cpu_model: %s\nnode: %s (V8), one thread each; 2^22 f32; medians of %d runs\n\n",
              bench::cpuModel().c_str(), version, reps);
  std::printf("| benchmark | Accy wasm (node) | plain JS loop | Accy x86-64 | wasm vs JS | wasm vs x86-64 | max |wasm - JS| |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (size_t k = 0; k < 2; ++k) {
    const double native = nativeMs(programs[k].second, reps);
    const double w = field(lines[k], "wasm_ms"), js = field(lines[k], "js_ms");
    std::printf("| %s | %.2f ms | %.2f ms | %.2f ms | %.2fx | %.2fx | %.2g |\n", programs[k].first, w, js, native, js / w,
                native / w, field(lines[k], "max_difference"));
  }
  const double native_threads = nativeMs(programs[0].second, reps, threads);
  const double w = field(lines[2], "wasm_ms");
  std::printf("| sin_affine, %d threads | %.2f ms | - | %.2f ms | - | %.2fx | - |\n", threads, w, native_threads,
              native_threads / w);
  std::printf("\nratios: speed of wasm relative to the other (above 1: wasm is faster)\n");
  return 0;
}

}  // namespace
}  // namespace accy

int main(int argc, char** argv) { return accy::run(argc > 1 ? std::atoi(argv[1]) : 21); }
