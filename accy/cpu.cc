#include "accy/cpu.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "backends/compile_program.h"
#include "backends/cpu/cpu_program.h"
#include "backends/staged_program.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "compiler/codegen/x86_64/compile.h"
#include "base/strings.h"
#include "compiler/executable/saved_program.h"

namespace accy::tensor {

absl::StatusOr<CpuExecutable> CpuExecutable::compile(const Program& program, const CpuOptions& options) {
  x64::CompileOptions o;
  o.threads = options.threads;
  o.scatter_split = options.scatter_split == ScatterSplit::kRanges ? choir::ScatterSplit::kRanges
                                                                  : choir::ScatterSplit::kColumns;
  const int threads = x64::resolveThreads(options.threads);
  // The one compile path: a program with loops runs as stages, each
  // loop-free stretch compiled here once, each loop's body too, whatever
  // the trip count.
  ACCY_ASSIGN_OR_RETURN(
      std::shared_ptr<const backends::LoadedProgram> compiled,
      backends::compileProgram(
          program, "x86_64",
          [&](const Program& stage) -> absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> {
            ACCY_ASSIGN_OR_RETURN(executable::Executable exe, x64::compileProgram(stage, o));
            ACCY_ASSIGN_OR_RETURN(cpu::LoadedExecutable loaded, cpu::LoadedExecutable::load(std::move(exe), threads));
            return std::make_shared<cpu::LoadedExecutable>(std::move(loaded));
          },
          backends::ProgramOptions{.scans_in_kernel = options.scans_in_kernel,
                                   .scan_kernel_work = options.scan_kernel_work}));
  if (auto staged = std::dynamic_pointer_cast<const backends::StagedProgram>(compiled)) {
    executable::Executable info;
    info.target = "x86_64";
    info.inputs = program.inputSpecs();
    info.outputs = program.outputSpecs();
    return CpuExecutable(std::move(staged), std::move(info));
  }
  return CpuExecutable(std::static_pointer_cast<const cpu::LoadedExecutable>(std::move(compiled)));
}

absl::Status CpuExecutable::launch(absl::Span<const std::span<const std::byte>> inputs,
                                   absl::Span<const std::span<std::byte>> outputs) const {
  return staged_ ? staged_->launch(inputs, outputs) : loaded_->launch(inputs, outputs);
}

const executable::Executable& CpuExecutable::executable() const {
  return staged_ ? staged_info_ : loaded_->executable();
}

absl::StatusOr<std::string> saveExecutable(const executable::Executable& exe) {
  return executable::saveProgram(exe, executable::buildRecord());
}

absl::StatusOr<executable::Executable> restoreExecutable(std::string_view bytes) {
  return executable::restoreProgram(bytes, executable::buildRecord());
}

absl::Status saveExecutableToFile(const executable::Executable& exe, const std::string& path) {
  ACCY_ASSIGN_OR_RETURN(const std::string bytes, saveExecutable(exe));
  const std::string tmp = strCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return makeError(ErrorKind::kInvalidArgument, strCat("cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return makeError(ErrorKind::kInvalidArgument, strCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<executable::Executable> restoreExecutableFromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorKind::kInvalidArgument, strCat("restoring a compiled program: cannot open ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<executable::Executable> exe = restoreExecutable(bytes.str());
  if (!exe.ok()) return makeError(errorKind(exe.status()), strCat(path, ": ", exe.status().message()));
  return exe;
}

absl::StatusOr<std::string> CpuExecutable::save() const {
  if (staged_) {
    return makeError(ErrorKind::kUnimplemented,
                     "saving a compiled program with loops: its stages are not saved yet; save the program "
                     "(wire::encode) and compile it again");
  }
  return saveExecutable(loaded_->executable());
}

absl::Status CpuExecutable::saveToFile(const std::string& path) const {
  if (staged_) return save().status();
  return saveExecutableToFile(loaded_->executable(), path);
}

absl::StatusOr<CpuExecutable> CpuExecutable::restore(std::string_view bytes, const CpuOptions& options) {
  ACCY_ASSIGN_OR_RETURN(executable::Executable exe, restoreExecutable(bytes));
  return load(std::move(exe), options);
}

absl::StatusOr<CpuExecutable> CpuExecutable::restoreFromFile(const std::string& path, const CpuOptions& options) {
  absl::StatusOr<executable::Executable> exe = restoreExecutableFromFile(path);
  if (!exe.ok()) return exe.status();
  absl::StatusOr<CpuExecutable> loaded = load(*std::move(exe), options);
  if (!loaded.ok()) return makeError(errorKind(loaded.status()), strCat(path, ": ", loaded.status().message()));
  return loaded;
}

absl::StatusOr<CpuExecutable> CpuExecutable::load(executable::Executable exe, const CpuOptions& options) {
  if (exe.target != "x86_64") {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("restoring a compiled program: it is for target ", exe.target, "; this runs x86_64"));
  }
  ACCY_ASSIGN_OR_RETURN(cpu::LoadedExecutable loaded,
                        cpu::LoadedExecutable::load(std::move(exe), x64::resolveThreads(options.threads)));
  return CpuExecutable(std::make_shared<const cpu::LoadedExecutable>(std::move(loaded)));
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
