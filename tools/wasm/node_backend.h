// Runs wasm executables in node (tools/wasm/run_node.mjs over
// web/accy_wasm.js, the runtime pages use): a backend of target "wasm" for
// `accy run --target=wasm` and tests/wasm_conformance_test.cc. One node
// process serves every program of the backend, one launch at a time.
#ifndef ACCY_TOOLS_WASM_NODE_BACKEND_H_
#define ACCY_TOOLS_WASM_NODE_BACKEND_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "backends/backend.h"

namespace accy::webgpu {
class PageRunner;
}

namespace accy::wasmnode {

class NodeBackend final : public backends::Backend {
 public:
  // node runs in `work_dir` (which must exist), started at the first load.
  explicit NodeBackend(std::string work_dir);
  ~NodeBackend() override;
  const backends::DeviceInfo& info() const override { return info_; }
  using Backend::compile;
  absl::StatusOr<executable::Executable> compile(const tensor::Program& program, const std::string& target,
                                                 const backends::CompileOptions& options) const override;
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> load(executable::Executable exe) const override;

  // Launches run so far.
  int runs() const;

  struct Runner;

 private:
  std::string work_dir_;
  backends::DeviceInfo info_;
  std::shared_ptr<Runner> runner_;
};

}  // namespace accy::wasmnode

#endif  // ACCY_TOOLS_WASM_NODE_BACKEND_H_
