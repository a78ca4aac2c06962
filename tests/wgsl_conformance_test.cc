// The GPU conformance suite on WebGPU: every kernel compiled to WGSL and run
// in headless Chromium (Tint validates each module, SwiftShader's Vulkan
// runs it) through the page runtime web/accy.js, against the reference
// evaluator with the tolerances of docs/CONFORMANCE.md.
//
// One page load serves the whole suite: tools/webgpu/run_page.py keeps the
// page open (--serve) and hands it each launch (the artifact and its inputs,
// one line of JSON), answering with the outputs. Without Chromium the suite
// is skipped, saying so.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
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
#include "gmock/gmock.h"
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

// The page, kept open by run_page.py --serve: one line of JSON in, one
// line out.
class LivePage {
 public:
  static std::unique_ptr<LivePage> open() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = strCat(tmp != nullptr ? tmp : "/tmp", "/wgsl_page");
    if (std::system(strCat("mkdir -p '", dir, "' && cp '", runfile("web/accy.js"), "' '",
                           runfile("tests/webgpu/harness.html"), "' '", dir, "/'")
                        .c_str()) != 0) {
      return nullptr;
    }
    int to_page[2], from_page[2];
    if (pipe(to_page) != 0 || pipe(from_page) != 0) return nullptr;
    const std::string script = runfile("tools/webgpu/run_page.py"), page = dir + "/harness.html";
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(to_page[0], 0);
      dup2(from_page[1], 1);
      close(to_page[1]);
      close(from_page[0]);
      execlp("python3", "python3", script.c_str(), page.c_str(), "--serve=accyRunOne", "--timeout=300",
             static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_page[0]);
    close(from_page[1]);
    auto p = std::unique_ptr<LivePage>(new LivePage);
    p->pid_ = pid;
    p->to_ = fdopen(to_page[1], "w");
    p->from_ = fdopen(from_page[0], "r");
    return p;
  }
  ~LivePage() {
    std::fclose(to_);
    std::fclose(from_);
    int status = 0;
    waitpid(pid_, &status, 0);
  }

  absl::StatusOr<std::string> ask(const std::string& line) {
    std::fputs(line.c_str(), to_);
    std::fputc('\n', to_);
    std::fflush(to_);
    std::string answer;
    for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) answer += static_cast<char>(c);
    if (std::feof(from_)) {
      return makeError(ErrorKind::kLaunchFailed, "the page runner ended (Chromium exited, or timed out)");
    }
    ++asked_;
    return answer;
  }
  int asked() const { return asked_; }

 private:
  LivePage() = default;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  int asked_ = 0;
};

LivePage* livePage() {
  static std::unique_ptr<LivePage> page = LivePage::open();
  return page.get();
}

class BrowserProgram final : public backends::LoadedProgram {
 public:
  BrowserProgram(executable::Executable exe, std::string artifact)
      : exe_(std::move(exe)), artifact_(std::move(artifact)) {}

  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override {
    LivePage* page = livePage();
    if (page == nullptr) return makeError(ErrorKind::kLaunchFailed, "no page runner");
    std::string line = strCat("{\"artifact\": ", artifact_, ", \"inputs\": [");
    for (size_t k = 0; k < inputs.size(); ++k) {
      std::string b64;
      absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(inputs[k].data()), inputs[k].size()), &b64);
      strAppend(&line, k ? ", \"" : "\"", b64, "\"");
    }
    line += "]}";
    for (char& c : line) {
      if (c == '\n') c = ' ';  // newlines lie between JSON tokens; strings escape theirs
    }
    absl::StatusOr<std::string> answer = page->ask(line);
    if (!answer.ok()) return answer.status();
    if (answer->rfind("ok", 0) != 0) return makeError(ErrorKind::kLaunchFailed, strCat("in the browser: ", *answer));
    const std::vector<std::string> parts = absl::StrSplit(answer->size() > 3 ? answer->substr(3) : "", ',');
    if (parts.size() != outputs.size()) {
      return makeError(ErrorKind::kLaunchFailed, strCat("the browser gave ", parts.size(), " outputs, not ", outputs.size()));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      std::string bytes;
      if (!absl::Base64Unescape(parts[k], &bytes) || bytes.size() != outputs[k].size()) {
        return makeError(ErrorKind::kLaunchFailed,
                         strCat("output ", k, ": ", bytes.size(), " bytes from the browser, not ", outputs[k].size()));
      }
      std::memcpy(outputs[k].data(), bytes.data(), bytes.size());
    }
    return absl::OkStatus();
  }
  const executable::Executable& executable() const override { return exe_; }

 private:
  executable::Executable exe_;
  std::string artifact_;
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
    return codegen::compileFor(target, program, codegen::CompileRequest{.mode = options.mode});
  }
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> load(executable::Executable exe) const override {
    absl::StatusOr<std::string> artifact = wgsl::artifactJson(exe);
    if (!artifact.ok()) return artifact.status();
    return std::shared_ptr<const backends::LoadedProgram>(
        std::make_shared<BrowserProgram>(std::move(exe), *std::move(artifact)));
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
  g.compile_for_gpu = [](const tensor::Program& program) { return wgsl::compileProgram(program, wgsl::TargetInfo{}); };
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

TEST(WgslConformance, TheGpuSuiteRunsInChromium) {
  if (chromium().empty()) GTEST_SKIP() << "Chromium not found (/usr/bin/chromium or ACCY_CHROMIUM): no browser to run WGSL in";
  ASSERT_NE(livePage(), nullptr);
  const GpuUnderTest g = gpu();
  programsLeftOutForDTypes() = 0;
  wholeSuite(g);
  std::printf("%d WGSL programs ran in one Chromium page (every module validated by Tint)\n", livePage()->asked());
  std::printf("%d programs left out: they hold f64 or i64 values, which WGSL does not have\n",
              programsLeftOutForDTypes());
  EXPECT_GT(livePage()->asked(), 500);
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
  EXPECT_THAT(std::string(exe.status().message()), ::testing::HasSubstr("(op mul in kernel"));
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
