#include "tools/webgpu/page_backend.h"

#include <mutex>

#include "backends/buffer_checks.h"
#include "backends/plan_artifact.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/targets.h"

namespace accy::webgpu {

struct PageBackend::Runner {
  std::mutex mu;
  Opener open;
  std::unique_ptr<PageRunner> page;
};

namespace {

class PageProgram final : public backends::LoadedProgram {
 public:
  PageProgram(executable::Executable exe, std::string artifact, std::string options,
              std::shared_ptr<PageBackend::Runner> runner)
      : exe_(std::move(exe)), artifact_(std::move(artifact)), options_(std::move(options)), runner_(std::move(runner)) {}

  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override {
    if (absl::Status st = backends::checkLaunchBuffers(exe_, inputs, outputs); !st.ok()) return st;
    std::lock_guard<std::mutex> lock(runner_->mu);
    if (runner_->page == nullptr) {
      absl::StatusOr<std::unique_ptr<PageRunner>> page = runner_->open();
      if (!page.ok()) return page.status();
      runner_->page = *std::move(page);
    }
    return runner_->page->run(artifact_, std::span<const std::span<const std::byte>>(inputs.data(), inputs.size()),
                              std::span<const std::span<std::byte>>(outputs.data(), outputs.size()), options_);
  }
  const executable::Executable& executable() const override { return exe_; }

 private:
  executable::Executable exe_;
  std::string artifact_;
  std::string options_;
  std::shared_ptr<PageBackend::Runner> runner_;
};

}  // namespace

PageBackend::PageBackend(std::string target, std::string device, Opener open, std::string options)
    : target_(std::move(target)), options_(std::move(options)), runner_(std::make_shared<Runner>()) {
  runner_->open = std::move(open);
  info_.name = std::move(device);
  info_.targets = {target_};
  info_.available = true;
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> PageBackend::load(executable::Executable exe) const {
  if (exe.target != target_) {
    return makeError(ErrorKind::kInvalidArgument, strCat(info_.name, " runs ", target_, " executables, not ", exe.target));
  }
  absl::StatusOr<const codegen::TargetEntry*> entry = codegen::findTarget(target_);
  if (!entry.ok()) return entry.status();
  absl::StatusOr<std::string> artifact = (*entry)->artifact(exe);
  if (!artifact.ok()) return artifact.status();
  return std::shared_ptr<const backends::LoadedProgram>(
      std::make_shared<PageProgram>(std::move(exe), *std::move(artifact), options_, runner_));
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> PageBackend::loadWithLoops(
    const tensor::Program& program,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program&)>& compile) const {
  absl::StatusOr<const codegen::TargetEntry*> entry = codegen::findTarget(target_);
  if (!entry.ok()) return entry.status();
  absl::StatusOr<std::string> artifact = backends::planArtifactJson(program, target_, compile, (*entry)->artifact);
  if (!artifact.ok()) return artifact.status();
  // What the launch checks: the program's inputs and outputs.
  executable::Executable exe;
  exe.target = target_;
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  return std::shared_ptr<const backends::LoadedProgram>(
      std::make_shared<PageProgram>(std::move(exe), *std::move(artifact), options_, runner_));
}

std::unique_ptr<PageBackend> PageBackend::withOptions(std::string options) const {
  auto b = std::make_unique<PageBackend>(target_, info_.name, runner_->open, std::move(options));
  b->runner_ = runner_;
  return b;
}

int PageBackend::runs() const {
  std::lock_guard<std::mutex> lock(runner_->mu);
  return runner_->page != nullptr ? runner_->page->runs() : 0;
}

int PageBackend::runsWithSubgroups() const {
  std::lock_guard<std::mutex> lock(runner_->mu);
  return runner_->page != nullptr ? runner_->page->runsWithSubgroups() : 0;
}

std::unique_ptr<PageBackend> nodeBackend(const std::string& work_dir) {
  return std::make_unique<PageBackend>("wasm", "node", [work_dir] { return PageRunner::openNode(work_dir); });
}

}  // namespace accy::webgpu
