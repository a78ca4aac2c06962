#include "accy/function.h"

#include "base/status_macros.h"
#include "compiler/codegen/targets.h"
#include "compiler/transforms/grad.h"
#include "compiler/transforms/replay.h"
#include "compiler/transforms/vmap.h"

namespace accy::tensor {

absl::StatusOr<Function> Function::fromProgram(Program program) {
  ACCY_RETURN_IF_ERROR(validateProgram(program));
  return Function(std::move(program));
}

absl::StatusOr<Function> Function::valueAndGrad(const GradOptions& options) const {
  ACCY_ASSIGN_OR_RETURN(Program p, transforms::gradient(*program_, options.wrt, /*with_value=*/true));
  return Function(std::move(p));
}

absl::StatusOr<Function> Function::grad(const GradOptions& options) const {
  ACCY_ASSIGN_OR_RETURN(Program p, transforms::gradient(*program_, options.wrt, /*with_value=*/false));
  return Function(std::move(p));
}

absl::StatusOr<executable::Executable> Function::compile(const GpuTarget& target) const {
  // The registry's entry for the target (compiler/codegen/targets.h): its
  // modes, then its compile function for this device.
  if (const auto* spirv = std::get_if<spirv::TargetInfo>(&target)) {
    return codegen::compileFor("spirv", *program_, codegen::CompileRequest{.mode = spirv->mode, .device = *spirv});
  }
  const ptx::TargetInfo& ptx = std::get<ptx::TargetInfo>(target);
  return codegen::compileFor("ptx", *program_, codegen::CompileRequest{.mode = ptx.mode, .device = ptx});
}

absl::StatusOr<Function> Function::vmap(const VmapOptions& options) const {
  ACCY_ASSIGN_OR_RETURN(Program p, transforms::vmap(*program_, transforms::VmapSpec{options.axis_size, options.in_axes,
                                                                                   options.axis_name}));
  return Function(std::move(p));
}

std::vector<Value> Function::call(Builder& b, std::span<const Value> args) const {
  std::vector<Value> v = transforms::replayNodes(b, *program_, args);
  std::vector<Value> outs;
  for (int32_t o : program_->outputs) outs.push_back(v.empty() ? Value() : v[o]);
  return outs;
}

}  // namespace accy::tensor
