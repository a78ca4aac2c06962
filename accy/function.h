// tensor::Function: a recorded program that transforms and compile methods
// build on. A Function owns its Program (shared, immutable), so copies are
// cheap and derived Functions keep no reference to the Builder.
#ifndef ACCY_ACCY_FUNCTION_H_
#define ACCY_ACCY_FUNCTION_H_

#include <memory>
#include <span>
#include <string>
#include <vector>
#include <string_view>

#include "absl/status/statusor.h"
#include <variant>

#include "accy/cpu.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/codegen/spirv/compile.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/builder.h"
#include "compiler/tensor/program.h"
#include "compiler/transforms/vmap.h"

namespace accy::tensor {

// vmap's per-input placement of the batch axis.
using InAxis = transforms::InAxis;
// The input gains the batch axis at position k.
inline InAxis mappedAxis(int k) { return InAxis{k}; }
// The input is shared by every batch element.
inline constexpr InAxis unmapped{};

// A GPU artifact target, described by the device it is compiled for:
// SPIR-V for Vulkan (backends::vulkanTargetInfo gives a device's), PTX for
// the CUDA Driver API (backends::cudaTargetInfo). The executable loads into
// that device's backend (backends::Backend::load) or goes to accyd.
using GpuTarget = std::variant<spirv::TargetInfo, ptx::TargetInfo>;

struct GradOptions {
  std::vector<int> wrt;  // input indices to differentiate with respect to
};

struct VmapOptions {
  int64_t axis_size = 0;
  std::vector<InAxis> in_axes;  // one per input
  std::string axis_name;
};

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

  // The value and the gradients of the one floating scalar output with
  // respect to the inputs in `wrt` (see compiler/transforms/grad.h).
  absl::StatusOr<Function> valueAndGrad(const GradOptions& options) const;
  // Only the gradients.
  absl::StatusOr<Function> grad(const GradOptions& options) const;
  // Batched over a new axis (see compiler/transforms/vmap.h).
  absl::StatusOr<Function> vmap(const VmapOptions& options) const;

  // Records this function's operations into `b` on `args`, as if its body
  // were written there; returns its outputs. Errors (wrong argument count,
  // mismatched axes) poison `b` like any op.
  std::vector<Value> call(Builder& b, std::span<const Value> args) const;

  // Compiles the program for a GPU target. The device description decides
  // the schedule (workgroup size, tiles, subgroups, f64 support) and the
  // arithmetic mode; what the device cannot do fails with Unimplemented
  // naming it, and a mode a kernel cannot honour (tf32 on a non-product
  // kernel) with InvalidArgument.
  absl::StatusOr<executable::Executable> compile(const GpuTarget& target) const;

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
