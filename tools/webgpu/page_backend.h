// A backend whose programs run in a PageRunner (page_runner.h): WGSL in
// headless Chromium, wasm in Chromium or in node. Loading writes the
// target's JSON artifact; each launch is one line to the runner. One runner
// serves every program of the backend, one launch at a time; it starts at
// the first launch.
#ifndef ACCY_TOOLS_WEBGPU_PAGE_BACKEND_H_
#define ACCY_TOOLS_WEBGPU_PAGE_BACKEND_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "web/page_runner.h"

namespace accy::webgpu {

class PageBackend final : public backends::Backend {
 public:
  using Opener = std::function<absl::StatusOr<std::unique_ptr<PageRunner>>()>;
  // `target`: "wgsl" or "wasm"; `device`: the name info() reports;
  // `options`: a JSON object for web/accy.js's loadProgram, or empty.
  PageBackend(std::string target, std::string device, Opener open, std::string options = "");
  const backends::DeviceInfo& info() const override { return info_; }
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> load(executable::Executable exe) const override;
  // A program with loops, whole: its plan artifact (accy-plan-1,
  // backends/plan_artifact.h), each loop-free stage compiled by `compile`,
  // run by the page's runtime (web/accy_plan.js) one launch a run.
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> loadWithLoops(
      const tensor::Program& program,
      const std::function<absl::StatusOr<executable::Executable>(const tensor::Program&)>& compile) const;

  // A backend on the same runner (the same page) with other loadProgram
  // options.
  std::unique_ptr<PageBackend> withOptions(std::string options) const;

  // Launches run so far, and those that used subgroup operations (counted
  // over every backend sharing the runner).
  int runs() const;
  int runsWithSubgroups() const;
  int runsOnWorkers() const { return runsWithSubgroups(); }

  struct Runner;

 private:
  std::string target_;
  std::string options_;
  backends::DeviceInfo info_;
  std::shared_ptr<Runner> runner_;
};

// WebAssembly in node, working in `work_dir` (which must exist): what
// `accy run --target=wasm` uses.
std::unique_ptr<PageBackend> nodeBackend(const std::string& work_dir);

}  // namespace accy::webgpu

#endif  // ACCY_TOOLS_WEBGPU_PAGE_BACKEND_H_
