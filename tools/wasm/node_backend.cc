#include "tools/wasm/node_backend.h"

#include "backends/buffer_checks.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/codegen/targets.h"
#include "compiler/codegen/wasm/compile.h"
#include "tools/webgpu/page_runner.h"

namespace accy::wasmnode {

struct NodeBackend::Runner {
  std::mutex mu;
  std::string work_dir;
  std::unique_ptr<webgpu::PageRunner> page;  // started at the first launch
  absl::Status started = absl::OkStatus();
};

namespace {

class NodeProgram final : public backends::LoadedProgram {
 public:
  NodeProgram(executable::Executable exe, std::string artifact, std::shared_ptr<NodeBackend::Runner> runner)
      : exe_(std::move(exe)), artifact_(std::move(artifact)), runner_(std::move(runner)) {}

  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override {
    if (absl::Status st = backends::checkLaunchBuffers(exe_, inputs, outputs); !st.ok()) return st;
    std::lock_guard<std::mutex> lock(runner_->mu);
    if (runner_->page == nullptr) {
      absl::StatusOr<std::unique_ptr<webgpu::PageRunner>> page = webgpu::PageRunner::openNode(runner_->work_dir);
      if (!page.ok()) return page.status();
      runner_->page = *std::move(page);
    }
    return runner_->page->run(artifact_, std::span<const std::span<const std::byte>>(inputs.data(), inputs.size()),
                              std::span<const std::span<std::byte>>(outputs.data(), outputs.size()));
  }
  const executable::Executable& executable() const override { return exe_; }

 private:
  executable::Executable exe_;
  std::string artifact_;
  std::shared_ptr<NodeBackend::Runner> runner_;
};

}  // namespace

NodeBackend::NodeBackend(std::string work_dir) : work_dir_(std::move(work_dir)), runner_(std::make_shared<Runner>()) {
  runner_->work_dir = work_dir_;
  info_.name = "node";
  info_.targets = {"wasm"};
  info_.available = !webgpu::nodePath().empty();
  if (!info_.available) info_.unavailable_reason = "no node (install nodejs: tools/setup.sh, or set ACCY_NODE)";
}

NodeBackend::~NodeBackend() = default;

absl::StatusOr<executable::Executable> NodeBackend::compile(const tensor::Program& program, const std::string& target,
                                                            const backends::CompileOptions& options) const {
  return codegen::compileFor(target, program, codegen::CompileRequest{.mode = options.mode});
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> NodeBackend::load(executable::Executable exe) const {
  if (exe.target != "wasm") {
    return makeError(ErrorKind::kInvalidArgument, strCat("node runs wasm executables, not ", exe.target));
  }
  absl::StatusOr<std::string> artifact = wasm::artifactJson(exe);
  if (!artifact.ok()) return artifact.status();
  return std::shared_ptr<const backends::LoadedProgram>(
      std::make_shared<NodeProgram>(std::move(exe), *std::move(artifact), runner_));
}

int NodeBackend::runs() const {
  std::lock_guard<std::mutex> lock(runner_->mu);
  return runner_->page != nullptr ? runner_->page->runs() : 0;
}

}  // namespace accy::wasmnode
