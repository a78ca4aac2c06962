// The one way a program becomes something that runs, loops included.
//
// A program without loops is compiled whole. A program with loops (scan,
// while_loop) becomes a StagedProgram: each loop-free stretch and each
// loop's body compiled once as a program of its own, the loops run between
// them (staged_program.h). What differs by target is read from its registry
// entry (compiler/codegen/targets.h): whether it takes loops whole (the
// reference evaluator), whether a scan is offered to it whole to run as one
// kernel (the CPU targets). Function::compileCpu, the in-process Session,
// accyd, the accy tool and the web plan writer all come through here; how
// each compiled stage is made (a cache in front, a device to load it on, an
// artifact to write) is the caller's StageCompiler.
#ifndef ACCY_BACKENDS_COMPILE_PROGRAM_H_
#define ACCY_BACKENDS_COMPILE_PROGRAM_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/staged_program.h"
#include "compiler/codegen/targets.h"
#include "compiler/tensor/program.h"

namespace accy::backends {

struct ProgramOptions {
  // Overrides the target's TargetEntry::scans_in_kernel (a user's choice,
  // CpuOptions::scans_in_kernel); nullopt keeps the entry's.
  std::optional<bool> scans_in_kernel;
  // StageOptions::scan_kernel_work: how much of a scan one kernel launch may
  // run before the plan asks its stop check (accyd: 2^22); 0 for no bound.
  int64_t scan_kernel_work = 0;
};

// Compiles one loop-free program (a stage, or the whole program) for the
// target and loads it wherever it is to run.
using StageCompiler = StageLoader;

// Compiles `program` for `target` with `compile_stage` for each stage.
// Errors of `compile_stage` come back as they are.
absl::StatusOr<std::shared_ptr<const LoadedProgram>> compileProgram(const tensor::Program& program,
                                                                    const codegen::TargetEntry& target,
                                                                    const StageCompiler& compile_stage,
                                                                    const ProgramOptions& options = {});
// The same by the target's name (InvalidArgument naming the targets for an
// unknown one).
absl::StatusOr<std::shared_ptr<const LoadedProgram>> compileProgram(const tensor::Program& program,
                                                                    std::string_view target,
                                                                    const StageCompiler& compile_stage,
                                                                    const ProgramOptions& options = {});

// Compiles `program` (loop-free, or a scan the target runs as one kernel)
// for `target` on `device`: the device must serve the target (else
// CompileFailed naming what it serves), the target must compile the mode
// (codegen::checkMode), and the device must be available (else
// Unimplemented with its reason); its description (deviceDescription) goes
// to the target registry's compile.
absl::StatusOr<executable::Executable> compileOn(const Backend& device, const tensor::Program& program,
                                                 const std::string& target, const CompileOptions& options = {});

// A StageCompiler that compiles each stage with compileOn and loads it on
// `device` (which must outlive it).
StageCompiler compileAndLoadOn(const Backend& device, std::string target, CompileOptions options = {});

}  // namespace accy::backends

#endif  // ACCY_BACKENDS_COMPILE_PROGRAM_H_
