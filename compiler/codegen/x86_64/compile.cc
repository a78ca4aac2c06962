#include "compiler/codegen/x86_64/compile.h"

#include <thread>

#include "compiler/choir/pipeline.h"
#include "compiler/choir/printer.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "base/cpus.h"
#include "base/status_macros.h"

namespace accy::x64 {

int resolveThreads(int threads) {
  if (threads > 0) return threads;
  return usableCpus();
}

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program,
                                                      const CompileOptions& options) {
  const Isa isa = options.isa.value_or(detectIsa());
  choir::PipelineOptions pipeline;
  pipeline.vectorize.vector_bytes = vectorBytes(isa);
  pipeline.vectorize.uniform_conditions = true;
  pipeline.vectorize.lanes32 = true;  // i32 and u32 beside f32 (primitives.h)
  pipeline.vectorize.gathers = isa != Isa::kSse41;  // vgatherdps: positions by data, strides past 1
  pipeline.parallelize.threads = resolveThreads(options.threads);
  pipeline.parallelize.scatter_split = options.scatter_split;
  pipeline.fuse = options.fuse;
  pipeline.fuse_limits = options.fuse_limits;
  pipeline.dump = options.dump;
  ACCY_ASSIGN_OR_RETURN(choir::Module module, choir::compileToChoir(program, pipeline));
  if (options.choir_text != nullptr) *options.choir_text = choir::toText(module);
  EmitOptions emit;
  emit.isa = isa;
  emit.assembly = options.assembly;
  emit.stream_stores_above = options.stream_stores_above;
  ACCY_ASSIGN_OR_RETURN(CpuArtifact artifact, emitModule(module, emit));
  executable::Executable exe;
  exe.target = "x86_64";
  exe.isa = isaName(isa);
  exe.code = std::move(artifact.code);
  exe.artifact_plan = executable::planBuffers(module);
  for (const KernelEntry& k : artifact.kernels) {
    exe.launch_plan.steps.push_back(
        executable::LaunchStep{k.name, k.offset, k.parallel_extent, k.work});
  }
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  return exe;
}

}  // namespace accy::x64
