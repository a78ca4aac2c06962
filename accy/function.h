// tensor::Function: a recorded program that transforms and compile methods
// build on. A Function owns its Program (shared, immutable), so copies are
// cheap and derived Functions keep no reference to the Builder.
#ifndef ACCY_ACCY_FUNCTION_H_
#define ACCY_ACCY_FUNCTION_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "accy/cpu.h"
#include "compiler/tensor/builder.h"
#include "compiler/tensor/program.h"

namespace accy::tensor {

class Function {
 public:
  // Records `fn` exactly as `tensor::define` does.
  template <typename F>
  static absl::StatusOr<Function> define(std::string_view name, absl::Span<const Spec> inputs,
                                         F&& fn) {
    auto program = tensor::define(name, inputs, std::forward<F>(fn));
    if (!program.ok()) return program.status();
    return Function(std::move(*program));
  }

  // Wraps an existing program after validating it (InvalidProgram).
  static absl::StatusOr<Function> fromProgram(Program program);

  const Program& program() const { return *program_; }

  // Compiles the program for this CPU (see accy/cpu.h).
  absl::StatusOr<CpuExecutable> compileCpu(const CpuOptions& options = {}) const {
    return CpuExecutable::compile(*program_, options);
  }

 private:
  explicit Function(Program program)
      : program_(std::make_shared<const Program>(std::move(program))) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace accy::tensor

#endif  // ACCY_ACCY_FUNCTION_H_
