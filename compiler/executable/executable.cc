#include "compiler/executable/executable.h"

#include "base/errors.h"
#include "base/strings.h"

namespace accy::executable {

ArtifactPlan planBuffers(const choir::Module& module) {
  ArtifactPlan plan;
  for (const choir::Buffer& b : module.buffers) {
    BufferPlan p;
    p.role = b.role;
    p.io_index = b.io_index;
    p.dtype = b.dtype;
    p.bytes = b.bytes();
    p.alignment = tensor::dtypeSize(b.dtype);
    if (b.role == choir::BufferRole::kTemp) {
      p.scratch_offset = plan.scratch_bytes;
      plan.scratch_bytes += (p.bytes + 63) / 64 * 64;
    }
    plan.buffers.push_back(p);
  }
  return plan;
}

absl::Status validateExecutable(const Executable& exe) {
  auto bad = [](std::string what) { return makeError(ErrorKind::kInvalidProgram, strCat("executable: ", what)); };
  if (exe.code.empty()) return bad("no code");
  for (const LaunchStep& s : exe.launch_plan.steps) {
    if (s.entry_offset >= exe.code.size()) return bad(strCat("kernel ", s.kernel, " starts outside the code"));
    if (s.parallel_extent < 0) return bad(strCat("kernel ", s.kernel, " has a negative extent"));
    if (s.group_size < 0) return bad(strCat("kernel ", s.kernel, " has a negative group size"));
  }
  std::vector<int> inputs_seen(exe.inputs.size(), 0), outputs_seen(exe.outputs.size(), 0);
  for (const BufferPlan& b : exe.artifact_plan.buffers) {
    switch (b.role) {
      case choir::BufferRole::kInput:
        if (b.io_index < 0 || static_cast<size_t>(b.io_index) >= exe.inputs.size() ||
            exe.inputs[b.io_index].byteSize() != b.bytes) {
          return bad(strCat("input buffer ", b.io_index, " does not match the input specs"));
        }
        ++inputs_seen[b.io_index];
        break;
      case choir::BufferRole::kOutput:
        if (b.io_index < 0 || static_cast<size_t>(b.io_index) >= exe.outputs.size() ||
            exe.outputs[b.io_index].byteSize() != b.bytes) {
          return bad(strCat("output buffer ", b.io_index, " does not match the output specs"));
        }
        ++outputs_seen[b.io_index];
        break;
      case choir::BufferRole::kTemp:
        if (b.scratch_offset < 0 || b.scratch_offset + b.bytes > exe.artifact_plan.scratch_bytes) {
          return bad("a temporary lies outside the scratch block");
        }
        break;
    }
  }
  for (size_t i = 0; i < outputs_seen.size(); ++i) {
    if (outputs_seen[i] != 1) return bad(strCat("output ", i, " has ", outputs_seen[i], " buffers"));
  }
  for (size_t i = 0; i < inputs_seen.size(); ++i) {
    if (inputs_seen[i] > 1) return bad(strCat("input ", i, " has ", inputs_seen[i], " buffers"));
  }
  return absl::OkStatus();
}

}  // namespace accy::executable
