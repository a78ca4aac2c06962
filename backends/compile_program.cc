#include "backends/compile_program.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"

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

absl::StatusOr<executable::Executable> compileOn(const Backend& device, const tensor::Program& program,
                                                 const std::string& target, const CompileOptions& options) {
  const DeviceInfo& info = device.info();
  if (std::find(info.targets.begin(), info.targets.end(), target) == info.targets.end()) {
    std::string serves;
    for (const std::string& t : info.targets) strAppend(&serves, serves.empty() ? "" : ", ", t);
    return makeError(ErrorKind::kCompileFailed,
                     strCat(info.name, " backend: no target ", target, "; it compiles ", serves));
  }
  ACCY_RETURN_IF_ERROR(codegen::checkMode(target, options.mode));
  if (!info.available) {
    return makeError(ErrorKind::kUnimplemented,
                     strCat("device ", info.name, " is not available: ", info.unavailable_reason));
  }
  return codegen::compileFor(target, program,
                             codegen::CompileRequest{.mode = options.mode, .device = device.deviceDescription()});
}

StageCompiler compileAndLoadOn(const Backend& device, std::string target, CompileOptions options) {
  return [&device, target = std::move(target), options](
             const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const LoadedProgram>> {
    ACCY_ASSIGN_OR_RETURN(executable::Executable exe, compileOn(device, stage, target, options));
    return device.load(std::move(exe));
  };
}

}  // namespace accy::backends
