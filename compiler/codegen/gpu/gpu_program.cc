#include "compiler/codegen/gpu/gpu_program.h"

#include "base/status_macros.h"
#include "compiler/choir/verifier.h"

namespace accy::gpu {

absl::StatusOr<choir::Module> mapProgram(const tensor::Program& program, const choir::GpuMapOptions& map,
                                         const choir::PassHook& dump) {
  choir::PipelineOptions pipeline;
  pipeline.gpu_map = map;
  pipeline.dump = dump;
  ACCY_ASSIGN_OR_RETURN(choir::Module m, choir::compileToChoir(program, pipeline));
  ACCY_RETURN_IF_ERROR(choir::verifyModule(m));
  return m;
}

executable::Executable gpuExecutable(std::string target, std::string isa, const choir::Module& m,
                                     const tensor::Program& program) {
  executable::Executable exe;
  exe.target = std::move(target);
  exe.isa = std::move(isa);
  exe.artifact_plan = executable::planBuffers(m);
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  return exe;
}

void appendKernel(executable::Executable& exe, const choir::Kernel& k, std::span<const uint8_t> code,
                  int64_t workgroups, int64_t work) {
  const uint64_t offset = exe.code.size();
  exe.code.insert(exe.code.end(), code.begin(), code.end());
  exe.launch_plan.steps.push_back(executable::LaunchStep{k.name, offset, workgroups, work, k.workgroup_size});
}

}  // namespace accy::gpu
