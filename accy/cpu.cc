#include "accy/cpu.h"

#include "base/status_macros.h"

namespace accy::tensor {

absl::StatusOr<CpuExecutable> CpuExecutable::compile(const Program& program, const CpuOptions& options) {
  x64::CompileOptions o;
  o.threads = options.threads;
  ACCY_ASSIGN_OR_RETURN(executable::Executable exe, x64::compileProgram(program, o));
  ACCY_ASSIGN_OR_RETURN(cpu::LoadedExecutable loaded,
                        cpu::LoadedExecutable::load(std::move(exe), x64::resolveThreads(options.threads)));
  return CpuExecutable(std::move(loaded));
}

absl::Status runCpu(const Program& program, absl::Span<const std::span<const std::byte>> inputs,
                    absl::Span<const std::span<std::byte>> outputs, const CpuOptions& options) {
  ACCY_ASSIGN_OR_RETURN(CpuExecutable exe, CpuExecutable::compile(program, options));
  return exe.launch(inputs, outputs);
}

absl::StatusOr<std::string> choirText(const Program& program, const CpuOptions& options) {
  x64::CompileOptions o;
  o.threads = options.threads;
  std::string text;
  o.choir_text = &text;
  ACCY_RETURN_IF_ERROR(x64::compileProgram(program, o).status());
  return text;
}

absl::StatusOr<std::string> cpuAssembly(const Program& program, const CpuOptions& options) {
  x64::CompileOptions o;
  o.threads = options.threads;
  std::string text;
  o.assembly = &text;
  ACCY_RETURN_IF_ERROR(x64::compileProgram(program, o).status());
  return text;
}

}  // namespace accy::tensor
