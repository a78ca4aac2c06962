#include "compiler/codegen/gpu/gpu_program.h"

#include "base/status_macros.h"
#include "compiler/choir/verifier.h"

namespace accy::gpu {

absl::StatusOr<choir::Module> mapProgram(const tensor::Program& program, const choir::GpuMapOptions& map,
                                         const choir::PassHook& dump, int64_t max_kernel_buffers) {
  choir::PipelineOptions pipeline;
  pipeline.gpu_map = map;
  pipeline.dump = dump;
  if (max_kernel_buffers > 0) pipeline.fuse_limits.max_buffers = max_kernel_buffers;
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

absl::StatusOr<executable::Executable> compileSourceProgram(const tensor::Program& program,
                                                           int64_t max_workgroup_size, std::string target,
                                                           std::string isa, const choir::PassHook& dump,
                                                           const EmitKernelText& emit, int64_t max_kernel_buffers) {
  choir::GpuMapOptions map;
  map.max_workgroup_size = max_workgroup_size;
  ACCY_ASSIGN_OR_RETURN(const choir::Module m, mapProgram(program, map, dump, max_kernel_buffers));
  executable::Executable exe = gpuExecutable(std::move(target), std::move(isa), m, program);
  for (const choir::Kernel& k : m.kernels) {
    ACCY_ASSIGN_OR_RETURN(const KernelText kernel, emit(m, k));
    appendKernel(exe, k, std::span(reinterpret_cast<const uint8_t*>(kernel.text.data()), kernel.text.size()),
                 kernel.workgroups, kernel.work);
  }
  return exe;
}

}  // namespace accy::gpu
