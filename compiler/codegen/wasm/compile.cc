#include "compiler/codegen/wasm/compile.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/choir/rewrite.h"
#include "compiler/executable/artifact_json.h"
#include "compiler/codegen/wasm/encoder.h"
#include "compiler/codegen/wasm/kernel_emitter.h"
#include "compiler/codegen/cpu/fuse_limits.h"

namespace accy::wasm {

absl::StatusOr<executable::Executable> compileProgram(const tensor::Program& program, const TargetInfo& target,
                                                      const choir::PassHook& dump) {
  choir::PipelineOptions pipeline;
  pipeline.vectorize.vector_bytes = kVectorBytes;
  pipeline.vectorize.int32 = true;  // i32x4
  pipeline.parallelize.threads = std::max(1, target.threads);
  pipeline.fuse_limits = codegen::cpuFuseLimits();
  pipeline.dump = dump;
  ACCY_ASSIGN_OR_RETURN(const choir::Module module, choir::compileToChoir(program, pipeline));
  for (const choir::Buffer& b : module.buffers) {
    if (b.bytes() >= (int64_t{1} << 31)) {
      return makeError(ErrorKind::kUnimplemented,
                       strCat("wasm: buffer ", b.name, " holds ", b.bytes(),
                              " bytes; a 32-bit WebAssembly memory addresses at most 2 GiB per buffer"));
    }
  }
  ModuleWriter writer;
  writer.importMemory(1, 65536, target.threads > 1);
  executable::Executable exe;
  exe.target = "wasm";
  exe.isa = target.threads > 1 ? strCat("wasm-simd128-threads-", target.threads) : "wasm-simd128";
  const std::vector<ValType> params = {ValType::kI32, ValType::kI32, ValType::kI32};
  for (size_t k = 0; k < module.kernels.size(); ++k) {
    const choir::Kernel& kernel = module.kernels[k];
    FunctionBody body(params);
    KernelEmitter emitter(module, body);
    if (absl::Status st = emitter.emit(kernel); !st.ok()) {
      return makeError(errorKind(st), strCat(st.message(), " (in kernel ", kernel.name, ")"));
    }
    writer.addFunction(strCat("k", k), params, body);
    executable::LaunchStep step;
    step.kernel = kernel.name;
    step.entry_offset = k;
    step.work = choir::statementPoints(kernel.body);
    if (kernel.body.size() == 1 && kernel.body[0].kind == choir::StmtKind::kLoop &&
        kernel.body[0].loop.tag == choir::LoopTag::kCpuParallel) {
      step.parallel_extent = kernel.body[0].loop.extent;
    }
    exe.launch_plan.steps.push_back(step);
  }
  exe.code = writer.finish();
  exe.artifact_plan = executable::planBuffers(module);
  exe.inputs = program.inputSpecs();
  exe.outputs = program.outputSpecs();
  return exe;
}

int threadsOf(const executable::Executable& exe) {
  constexpr std::string_view kPrefix = "wasm-simd128-threads";
  if (exe.isa.rfind(kPrefix, 0) != 0) return 1;
  return std::max(2, std::atoi(exe.isa.c_str() + kPrefix.size() + 1));
}

absl::StatusOr<std::string> artifactJson(const executable::Executable& exe) {
  std::string module;
  absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(exe.code.data()), exe.code.size()), &module);
  return executable::artifactJson(
      exe, "wasm", "accy-wasm-1",
      [&](size_t k, std::string_view) -> absl::StatusOr<std::string> {
        return strCat(", \"export\": \"k", k, "\", \"parallel_extent\": ", exe.launch_plan.steps[k].parallel_extent);
      },
      strCat(",\n  \"threads\": ", threadsOf(exe),
             ",\n  \"module\": ", executable::jsonString(module)));
}

}  // namespace accy::wasm
