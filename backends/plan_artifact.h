// The artifact of a program with loops for the web runtimes (web/accy.js,
// web/accy_plan.js): format accy-plan-1, JSON, its form in docs/WEB.md
// ("Programs with loops"). The program is split into stages as
// StagedProgram splits it; each loop-free stage is compiled by `compile`
// and written by `artifact` (an accy-wgsl-1 or accy-wasm-1 artifact), each
// loop kept as a loop whose body is a plan of the same form. Nothing is
// loaded or run: the plan is written once, whatever the trip counts.
#ifndef ACCY_BACKENDS_PLAN_ARTIFACT_H_
#define ACCY_BACKENDS_PLAN_ARTIFACT_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::backends {

absl::StatusOr<std::string> planArtifactJson(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile,
    const std::function<absl::StatusOr<std::string>(const executable::Executable&)>& artifact);

// Every loop-free stage of `program` (bodies' and conditions' included), in
// the order the one compile path (compile_program.h) makes them for
// `target`, with its executable compiled by `compile` and not loaded: what
// `accy compile --emit` writes for a program with loops, and what a device
// that loads many executables at once (the MSL shim) takes before the
// program runs as a StagedProgram.
struct CompiledStage {
  tensor::Program program;
  executable::Executable exe;
};
absl::StatusOr<std::vector<CompiledStage>> compiledStages(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile);
// Their executables alone.
absl::StatusOr<std::vector<executable::Executable>> stageExecutables(
    const tensor::Program& program, std::string_view target,
    const std::function<absl::StatusOr<executable::Executable>(const tensor::Program& stage)>& compile);

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_PLAN_ARTIFACT_H_
