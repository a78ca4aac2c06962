#include "backends/plan_artifact.h"

#include <memory>
#include <utility>

#include "backends/staged_program.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/codegen/gpu/artifact_json.h"

namespace accy::backends {
namespace {

// A stage compiled for writing, not for running here.
class CompiledStage final : public LoadedProgram {
 public:
  explicit CompiledStage(executable::Executable exe) : exe_(std::move(exe)) {}
  absl::Status launch(absl::Span<const std::span<const std::byte>>,
                      absl::Span<const std::span<std::byte>>) const override {
    return makeError(ErrorKind::kUnimplemented,
                     strCat("a ", exe_.target, " stage compiled for an artifact does not run in this process"));
  }
  const executable::Executable& executable() const override { return exe_; }

 private:
  executable::Executable exe_;
};

}  // namespace

absl::StatusOr<std::vector<executable::Executable>> stageExecutables(
    const tensor::Program& program,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile) {
  std::vector<executable::Executable> exes;
  ACCY_RETURN_IF_ERROR(
      StagedProgram::build(program, [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
        ACCY_ASSIGN_OR_RETURN(executable::Executable exe, compile(stage));
        exes.push_back(exe);
        return std::shared_ptr<const LoadedProgram>(std::make_shared<CompiledStage>(std::move(exe)));
      }).status());
  return exes;
}

absl::StatusOr<std::string> planArtifactJson(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile,
    const std::function<absl::StatusOr<std::string>(const executable::Executable&)>& artifact) {
  ACCY_ASSIGN_OR_RETURN(
      std::shared_ptr<const StagedProgram> plan,
      StagedProgram::build(program, [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
        ACCY_ASSIGN_OR_RETURN(executable::Executable exe, compile(stage));
        return std::shared_ptr<const LoadedProgram>(std::make_shared<CompiledStage>(std::move(exe)));
      },
      // wasm runs a small scan as one kernel, as x86-64 does (the same
      // CPU pipeline); the GPU targets keep their loops in the plan.
      StageOptions{.scans_in_kernel = target == "wasm"}));
  ACCY_ASSIGN_OR_RETURN(const std::string body,
                        plan->planJson([&](const LoadedProgram& p) { return artifact(p.executable()); }));
  std::string out = strCat("{\"format\": \"accy-plan-1\", \"target\": ", gpu::jsonString(target), ",\n\"inputs\": [");
  for (size_t i = 0; i < plan->inputSpecs().size(); ++i) strAppend(&out, i ? ", " : "", gpu::specJson(plan->inputSpecs()[i]));
  strAppend(&out, "],\n\"outputs\": [");
  for (size_t i = 0; i < plan->outputSpecs().size(); ++i) {
    strAppend(&out, i ? ", " : "", gpu::specJson(plan->outputSpecs()[i]));
  }
  return strCat(out, "],\n\"plan\": ", body, "}\n");
}

}  // namespace accy::backends
