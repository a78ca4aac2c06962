// The GPU conformance suite on WebGPU: every kernel compiled to WGSL and run
// in headless Chromium (Tint validates each module, SwiftShader's Vulkan
// runs it) through the page runtime web/accy.js, against the reference
// evaluator with the tolerances of docs/CONFORMANCE.md.
//
// A browser is slow to start, so the suite runs twice. The first pass
// records every case (the artifact and its inputs) and answers with the
// evaluator's outputs, so that every check runs to its end; the recorded
// cases then run in the browser, a few hundred per page load; the second
// pass is the real one, answered with what the browser computed. Without
// Chromium the suite is skipped, saying so.
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/targets.h"
#include "compiler/codegen/wgsl/artifact.h"
#include "compiler/codegen/wgsl/compile.h"
#include "compiler/tensor/evaluate.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tests/gpu_conformance.h"

namespace accy::testing {
namespace {

std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return std::string(srcdir != nullptr ? srcdir : ".") + "/" + (workspace != nullptr ? workspace : "accy") + "/" + path;
}

std::string chromium() {
  if (const char* c = std::getenv("ACCY_CHROMIUM")) return c;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::ifstream(p).good()) return p;
  }
  return "";
}

// What the browser is asked to run, and what it answered.
struct Case {
  std::string artifact;  // JSON
  std::vector<std::string> inputs;
  bool answered = false;
  std::string error;
  std::vector<std::string> outputs;
};

struct Recorder {
  bool replay = false;
  std::vector<Case> cases;
  std::map<std::string, size_t> by_key;  // artifact and inputs -> case
  size_t next = 0;  // replay: cases answered
  std::shared_ptr<const tensor::Program> program;  // the one last compiled
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

class BrowserProgram final : public backends::LoadedProgram {
 public:
  BrowserProgram(executable::Executable exe, std::string artifact, std::shared_ptr<const tensor::Program> program)
      : exe_(std::move(exe)), artifact_(std::move(artifact)), program_(std::move(program)) {}

  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override {
    Recorder& r = recorder();
    std::vector<std::string> in;
    std::string key = artifact_;
    for (const auto& i : inputs) {
      absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(i.data()), i.size()), &in.emplace_back());
      strAppend(&key, "|", in.back());
    }
    if (!r.replay) {
      // Record, and answer with the evaluator so the check runs on.
      if (r.by_key.emplace(key, r.cases.size()).second) {
        Case c;
        c.artifact = artifact_;
        c.inputs = std::move(in);
        r.cases.push_back(std::move(c));
      }
      const std::vector<std::span<const std::byte>> views(inputs.begin(), inputs.end());
      absl::StatusOr<std::vector<std::vector<std::byte>>> expected = tensor::evaluate(*program_, views);
      if (!expected.ok()) return expected.status();
      for (size_t k = 0; k < outputs.size() && k < expected->size(); ++k) {
        std::memcpy(outputs[k].data(), (*expected)[k].data(), std::min(outputs[k].size(), (*expected)[k].size()));
      }
      return absl::OkStatus();
    }
    const auto found = r.by_key.find(key);
    if (found == r.by_key.end()) return makeError(ErrorKind::kLaunchFailed, "a case the recording pass did not see");
    const Case& c = r.cases[found->second];
    ++r.next;
    if (!c.answered) return makeError(ErrorKind::kLaunchFailed, "the browser gave no answer for this case");
    if (!c.error.empty()) return makeError(ErrorKind::kLaunchFailed, strCat("in the browser: ", c.error));
    if (c.outputs.size() != outputs.size()) {
      return makeError(ErrorKind::kLaunchFailed,
                       strCat("the browser gave ", c.outputs.size(), " outputs, not ", outputs.size()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      std::string bytes;
      if (!absl::Base64Unescape(c.outputs[k], &bytes) || bytes.size() != outputs[k].size()) {
        return makeError(ErrorKind::kLaunchFailed, strCat("output ", k, ": ", bytes.size(), " bytes from the browser, not ",
                                                          outputs[k].size()));
      }
      std::memcpy(outputs[k].data(), bytes.data(), bytes.size());
    }
    return absl::OkStatus();
  }
  const executable::Executable& executable() const override { return exe_; }

 private:
  executable::Executable exe_;
  std::string artifact_;
  std::shared_ptr<const tensor::Program> program_;
};

// WebGPU in the browser as a backend of the suite.
class BrowserBackend final : public backends::Backend {
 public:
  BrowserBackend() {
    info_.name = "browser";
    info_.targets = {"wgsl"};
    info_.available = true;
  }
  const backends::DeviceInfo& info() const override { return info_; }
  using Backend::compile;
  absl::StatusOr<executable::Executable> compile(const tensor::Program& program, const std::string& target,
                                                 const backends::CompileOptions& options) const override {
    recorder().program = std::make_shared<tensor::Program>(program);
    return codegen::compileFor(target, program, codegen::CompileRequest{.mode = options.mode});
  }
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> load(executable::Executable exe) const override {
    absl::StatusOr<std::string> artifact = wgsl::artifactJson(exe);
    if (!artifact.ok()) return artifact.status();
    return std::shared_ptr<const backends::LoadedProgram>(
        std::make_shared<BrowserProgram>(std::move(exe), *std::move(artifact), recorder().program));
  }

 private:
  backends::DeviceInfo info_;
};

BrowserBackend& browser() {
  static BrowserBackend b;
  return b;
}

GpuUnderTest gpu() {
  GpuUnderTest g;
  g.backend = &browser();
  g.target = "wgsl";
  g.float64 = false;
  g.int64 = false;
  g.note = "WebGPU on SwiftShader (headless Chromium), workgroup-memory trees";
  g.compile_for_gpu = [](const tensor::Program& program) {
    recorder().program = std::make_shared<tensor::Program>(program);
    return wgsl::compileProgram(program, wgsl::TargetInfo{});
  };
  return g;
}

void wholeSuite(const GpuUnderTest& g) {
  checkEveryOp(g);
  checkIntegerPowEdgeCases(g);
  checkBoolBuffersMixedWithNumbers(g);
  checkTiledProducts(g);
  checkTreeReductions(g);
  checkRandomPrograms(g);
  checkTransformedPrograms(g);
  checkTheThreeToneTests(g);
}

// Runs cases [begin, end) in one page load; false (with the reason) when
// the browser did not answer at all.
::testing::AssertionResult runInBrowser(size_t begin, size_t end) {
  Recorder& r = recorder();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = strCat(tmp != nullptr ? tmp : "/tmp", "/wgsl_page");
  std::system(strCat("mkdir -p '", dir, "'").c_str());
  std::system(strCat("cp '", runfile("web/accy.js"), "' '", runfile("tests/webgpu/harness.html"), "' '", dir, "/'").c_str());
  {
    std::ofstream js(dir + "/cases.js", std::ios::binary);
    js << "globalThis.ACCY_CASES = [\n";
    for (size_t i = begin; i < end; ++i) {
      js << "{\"artifact\": " << r.cases[i].artifact << ", \"inputs\": [";
      for (size_t k = 0; k < r.cases[i].inputs.size(); ++k) js << (k ? ", " : "") << '"' << r.cases[i].inputs[k] << '"';
      js << "]},\n";
    }
    js << "];\n";
  }
  const std::string cmd = strCat("python3 '", runfile("tools/webgpu/run_page.py"), "' '", dir,
                                 "/harness.html' 'window.accyRunCases()' --timeout=900 2>'", dir, "/stderr.txt'");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return ::testing::AssertionFailure() << "could not run " << cmd;
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) {
    std::ifstream err(dir + "/stderr.txt");
    std::stringstream text;
    text << err.rdbuf();
    return ::testing::AssertionFailure() << "run_page.py exited " << rc << ": " << text.str().substr(0, 4000);
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  if (lines.size() != end - begin) {
    return ::testing::AssertionFailure() << "the page answered " << lines.size() << " cases of " << end - begin;
  }
  for (size_t i = begin; i < end; ++i) {
    Case& c = r.cases[i];
    const std::string& line = lines[i - begin];
    c.answered = true;
    if (line.rfind("ok", 0) == 0) {
      const std::string rest = line.size() > 3 ? line.substr(3) : "";
      c.outputs = absl::StrSplit(rest, ',');
    } else {
      c.error = line.size() > 6 ? line.substr(6) : line;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(WgslConformance, TheGpuSuiteRunsInChromium) {
  if (chromium().empty()) GTEST_SKIP() << "Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM): no browser to run WGSL in";
  const GpuUnderTest g = gpu();
  Recorder& r = recorder();
  {
    // The recording pass: its comparisons are against the evaluator itself.
    ::testing::TestPartResultArray ignored;
    ::testing::ScopedFakeTestPartResultReporter quiet(::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS,
                                                      &ignored);
    wholeSuite(g);
  }
  ASSERT_GT(r.cases.size(), 500u);
  constexpr size_t kPerPage = 300;
  for (size_t begin = 0; begin < r.cases.size(); begin += kPerPage) {
    ASSERT_TRUE(runInBrowser(begin, std::min(r.cases.size(), begin + kPerPage)));
  }
  size_t errors = 0;
  for (const Case& c : r.cases) errors += !c.error.empty();
  std::printf("%zu WGSL programs ran in Chromium (every module validated by Tint), %zu failed there\n", r.cases.size(),
              errors);
  r.replay = true;
  wholeSuite(g);
  EXPECT_GE(r.next, r.cases.size()) << "the real pass ran fewer cases than the recording";
}

// WGSL has no f64 and no i64: refused by name, with the op.
TEST(WgslConformance, SixtyFourBitValuesAreRefusedByName) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 8}})};
  auto p = tensor::define("widen", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0].cast(tensor::DType::f64) * 2).cast(tensor::DType::f32);
  });
  ASSERT_TRUE(p.ok());
  absl::StatusOr<executable::Executable> exe = wgsl::compileProgram(*p, wgsl::TargetInfo{});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("f64 values need a target with 64-bit floats"));
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("op cast"));
  const tensor::Spec longs[] = {tensor::spec(tensor::DType::i64, {{"i", 8}})};
  auto q = tensor::define("longs", longs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] + 1; });
  ASSERT_TRUE(q.ok());
  exe = wgsl::compileProgram(*q, wgsl::TargetInfo{});
  EXPECT_EQ(errorKind(exe.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("i64 values need"));
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("buffer 0"));
}

}  // namespace
}  // namespace accy::testing
