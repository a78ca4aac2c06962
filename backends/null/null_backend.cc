#include "backends/null/null_backend.h"

#include <algorithm>
#include <cstring>

#include "backends/buffer_checks.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/tensor/evaluate.h"
#include "compiler/wire/wire.h"

namespace accy::backends {
namespace {

constexpr char kTarget[] = "reference";

class NullProgram final : public LoadedProgram {
 public:
  NullProgram(executable::Executable exe, tensor::Program program)
      : exe_(std::move(exe)), program_(std::move(program)) {}

  absl::Status launch(absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs) const override {
    ACCY_RETURN_IF_ERROR(checkLaunchBuffers(exe_, inputs, outputs));
    const std::vector<std::span<const std::byte>> in(inputs.begin(), inputs.end());
    ACCY_ASSIGN_OR_RETURN(std::vector<std::vector<std::byte>> results, tensor::evaluate(program_, in));
    if (results.size() != outputs.size()) {
      return makeError(ErrorKind::kLaunchFailed,
                       strCat("null backend: the evaluator gave ", results.size(), " outputs, not ", outputs.size()));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (results[i].size() != outputs[i].size()) {
        return makeError(ErrorKind::kLaunchFailed, strCat("null backend: output ", i, " has ", results[i].size(),
                                                      " bytes, not ", outputs[i].size()));
      }
    }
    for (size_t i = 0; i < outputs.size(); ++i) std::memcpy(outputs[i].data(), results[i].data(), results[i].size());
    return absl::OkStatus();
  }
  const executable::Executable& executable() const override { return exe_; }

 private:
  executable::Executable exe_;
  tensor::Program program_;
};

class NullBackend final : public Backend {
 public:
  NullBackend() {
    info_.name = "null";
    info_.targets = {kTarget};
    info_.min_buffer_alignment = 1;
    info_.available = true;
  }
  const DeviceInfo& info() const override { return info_; }

  absl::StatusOr<std::shared_ptr<const LoadedProgram>> load(executable::Executable exe) const override {
    if (exe.target != kTarget) {
      return makeError(ErrorKind::kUnimplemented,
                       strCat("the null backend runs ", kTarget, " code, not ", exe.target));
    }
    ACCY_RETURN_IF_ERROR(executable::validateExecutable(exe));
    absl::StatusOr<tensor::Program> program =
        wire::decode(std::string_view(reinterpret_cast<const char*>(exe.code.data()), exe.code.size()));
    if (!program.ok()) {
      return makeError(ErrorKind::kInvalidProgram, strCat("null backend: the code is not a program: ",
                                                          program.status().message()));
    }
    if (program->inputSpecs() != exe.inputs || program->outputSpecs() != exe.outputs) {
      return makeError(ErrorKind::kInvalidProgram,
                       "null backend: the executable's input and output specs are not its program's");
    }
    return std::shared_ptr<const LoadedProgram>(std::make_shared<NullProgram>(std::move(exe), *std::move(program)));
  }

 private:
  DeviceInfo info_;
};

}  // namespace

std::unique_ptr<Backend> makeNullBackend(const BackendOptions&) { return std::make_unique<NullBackend>(); }

}  // namespace accy::backends
