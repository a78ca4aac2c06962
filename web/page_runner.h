// Runs web artifacts, each run one line of JSON each way (docs/WEB.md):
// WGSL in headless Chromium (web/runner.html kept open by
// tools/webgpu/run_page.py --serve), wasm in node (tools/wasm/run_node.mjs
// over web/accy_wasm.js). Used by `accy run --target=wgsl|wasm` and by
// tests/wgsl_conformance_test.cc and tests/wasm_conformance_test.cc.
#ifndef ACCY_WEB_PAGE_RUNNER_H_
#define ACCY_WEB_PAGE_RUNNER_H_

#include <cstddef>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace accy::webgpu {

// The file at `path` (relative to the source tree: "web/accy.js"):
// under $ACCY_SOURCE_DIR, the test's runfiles, or the running binary's
// runfiles; NotFound naming the places tried.
absl::StatusOr<std::string> sourceFile(std::string_view path);

// Chromium's path ($ACCY_CHROMIUM, else chromium on the usual paths), or
// empty.
std::string chromiumPath();
// node's path ($ACCY_NODE, else node or nodejs on the usual paths), or empty.
std::string nodePath();

class PageRunner {
 public:
  // Copies the page and the runtime into `work_dir` and starts the runner.
  // `isolated`: the page is served over HTTP as a cross-origin isolated page
  // (SharedArrayBuffer, Web Workers over a shared memory: wasm with threads)
  // rather than loaded from a file.
  static absl::StatusOr<std::unique_ptr<PageRunner>> open(const std::string& work_dir, bool isolated = false);
  // Copies the wasm runtime into `work_dir` and starts node on it.
  static absl::StatusOr<std::unique_ptr<PageRunner>> openNode(const std::string& work_dir);
  ~PageRunner();

  // Runs `artifact` (JSON, docs/WEB.md) on `inputs`, filling `outputs`
  // (their sizes are the outputs' byte sizes; bools one byte each).
  // `options` is a JSON object for web/accy.js's loadProgram (empty: none),
  // e.g. {"subgroups": false}.
  absl::Status run(std::string_view artifact, std::span<const std::span<const std::byte>> inputs,
                   std::span<const std::span<std::byte>> outputs, std::string_view options = "");
  int runs() const { return runs_; }
  // Runs that used subgroup operations in at least one kernel (WGSL), or
  // ran parts of kernels on worker threads (wasm with threads): what the
  // runtime reports in the answer's last field, when it is not 0.
  int runsWithSubgroups() const { return runs_with_subgroups_; }
  int runsOnWorkers() const { return runs_with_subgroups_; }

 private:
  PageRunner() = default;
  // Starts argv[0] (looked up on PATH) with its stdin and stdout as pipes.
  static absl::StatusOr<std::unique_ptr<PageRunner>> start(const std::vector<std::string>& argv);
  int pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  int runs_ = 0;
  int runs_with_subgroups_ = 0;
  // node's runner: inputs of a megabyte or more go through a file here
  // (base64 in one JSON line costs node seconds for 64 MB); empty for a
  // page.
  std::string files_dir_;
};

}  // namespace accy::webgpu

#endif  // ACCY_WEB_PAGE_RUNNER_H_
