#include "backends/compile_program.h"

#include <string>
#include <utility>

#include "base/status_macros.h"

namespace accy::backends {

absl::StatusOr<std::shared_ptr<const LoadedProgram>> compileProgram(const tensor::Program& program,
                                                                    const codegen::TargetEntry& target,
                                                                    const StageCompiler& compile_stage,
                                                                    const ProgramOptions& options) {
  if (target.loops_whole || !hasLoops(program)) return compile_stage(program);
  ACCY_ASSIGN_OR_RETURN(
      std::shared_ptr<const StagedProgram> staged,
      StagedProgram::build(program, compile_stage,
                           StageOptions{.scans_in_kernel = options.scans_in_kernel.value_or(target.scans_in_kernel),
                                        .scan_kernel_work = options.scan_kernel_work}));
  return std::shared_ptr<const LoadedProgram>(std::move(staged));
}

absl::StatusOr<std::shared_ptr<const LoadedProgram>> compileProgram(const tensor::Program& program,
                                                                    std::string_view target,
                                                                    const StageCompiler& compile_stage,
                                                                    const ProgramOptions& options) {
  ACCY_ASSIGN_OR_RETURN(const codegen::TargetEntry* entry, codegen::findTarget(target));
  return compileProgram(program, *entry, compile_stage, options);
}

StageCompiler compileAndLoadOn(const codegen::TargetEntry& target, const codegen::CompileRequest& request,
                               const Backend& device) {
  return [&target, request, &device](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
    ACCY_ASSIGN_OR_RETURN(executable::Executable exe, codegen::compileFor(target.name, stage, request));
    return device.load(std::move(exe));
  };
}

}  // namespace accy::backends
