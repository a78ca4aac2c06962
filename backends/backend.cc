#include "backends/backend.h"

#include <vector>

namespace accy::backends {

namespace {

class RelaunchingBound final : public BoundLaunch {
 public:
  explicit RelaunchingBound(const LoadedProgram& program)
      : program_(program),
        inputs_(program.executable().inputs.size()),
        outputs_(program.executable().outputs.size()) {}
  void bindInput(size_t i, std::span<const std::byte> buffer) override { inputs_[i] = buffer; }
  void bindOutput(size_t k, std::span<std::byte> buffer) override { outputs_[k] = buffer; }
  absl::Status run() override { return program_.launchTrusted(inputs_, outputs_); }

 private:
  const LoadedProgram& program_;
  std::vector<std::span<const std::byte>> inputs_;
  std::vector<std::span<std::byte>> outputs_;
};

}  // namespace

std::unique_ptr<BoundLaunch> LoadedProgram::bind() const { return std::make_unique<RelaunchingBound>(*this); }

}  // namespace accy::backends
