#include "backends/plan_artifact.h"

#include <memory>
#include <utility>

#include "backends/compile_program.h"
#include "backends/staged_program.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/executable/artifact_json.h"

namespace accy::backends {
namespace {

// A stage compiled for writing, not for running here.
class WrittenStage final : public LoadedProgram {
 public:
  explicit WrittenStage(executable::Executable exe) : exe_(std::move(exe)) {}
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

absl::StatusOr<std::vector<CompiledStage>> compiledStages(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile) {
  std::vector<CompiledStage> stages;
  ACCY_RETURN_IF_ERROR(
      compileProgram(program, target, [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
        ACCY_ASSIGN_OR_RETURN(executable::Executable exe, compile(stage));
        stages.push_back(CompiledStage{stage, exe});
        return std::shared_ptr<const LoadedProgram>(std::make_shared<WrittenStage>(std::move(exe)));
      }).status());
  return stages;
}

absl::StatusOr<std::vector<executable::Executable>> stageExecutables(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile) {
  ACCY_ASSIGN_OR_RETURN(std::vector<CompiledStage> stages, compiledStages(program, target, compile));
  std::vector<executable::Executable> exes;
  for (CompiledStage& s : stages) exes.push_back(std::move(s.exe));
  return exes;
}

absl::StatusOr<std::string> planArtifactJson(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile,
    const std::function<absl::StatusOr<std::string>(const executable::Executable&)>& artifact) {
  // The one compile path (compile_program.h): which scans the target runs
  // as one kernel is its registry entry's (wasm, as x86-64: the same CPU
  // pipeline; the GPU targets keep their loops in the plan).
  ACCY_ASSIGN_OR_RETURN(
      std::shared_ptr<const LoadedProgram> compiled,
      compileProgram(program, target, [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
        ACCY_ASSIGN_OR_RETURN(executable::Executable exe, compile(stage));
        return std::shared_ptr<const LoadedProgram>(std::make_shared<WrittenStage>(std::move(exe)));
      }));
  auto plan = std::dynamic_pointer_cast<const StagedProgram>(compiled);
  if (plan == nullptr) {
    return makeError(ErrorKind::kInvalidArgument, strCat("a plan artifact is for a program with loops; this ", target,
                                                         " program has none (its artifact is the target's own)"));
  }
  ACCY_ASSIGN_OR_RETURN(const std::string body,
                        plan->planJson([&](const LoadedProgram& p) { return artifact(p.executable()); }));
  std::string out = strCat("{\"format\": \"accy-plan-1\", \"target\": ", executable::jsonString(target), ",\n\"inputs\": [");
  for (size_t i = 0; i < plan->inputSpecs().size(); ++i) strAppend(&out, i ? ", " : "", executable::specJson(plan->inputSpecs()[i]));
  strAppend(&out, "],\n\"outputs\": [");
  for (size_t i = 0; i < plan->outputSpecs().size(); ++i) {
    strAppend(&out, i ? ", " : "", executable::specJson(plan->outputSpecs()[i]));
  }
  return strCat(out, "],\n\"plan\": ", body, "}\n");
}

}  // namespace accy::backends
