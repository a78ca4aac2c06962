// Executable: what a target's compilation produces, ready to load.
//
// An Executable is the artifact (here, x86-64 code bytes) plus the
// ArtifactPlan (every buffer the code addresses: size, alignment, where it
// lives) and the LaunchPlan (kernels in order with their entry points and
// how to split them across threads). It holds plain data, so it can be
// serialized for the daemon's cache and validated when loaded.
#ifndef ACCY_COMPILER_EXECUTABLE_EXECUTABLE_H_
#define ACCY_COMPILER_EXECUTABLE_EXECUTABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/tensor/program.h"

namespace accy::executable {

struct BufferPlan {
  choir::BufferRole role = choir::BufferRole::kTemp;
  int io_index = -1;            // input or output number
  tensor::DType dtype = tensor::DType::f32;
  int64_t bytes = 0;
  int64_t alignment = 1;        // required alignment of caller buffers, bytes
  int64_t scratch_offset = -1;  // temps: offset in the per-launch scratch
};

struct ArtifactPlan {
  std::vector<BufferPlan> buffers;  // indexed like the module's buffers
  int64_t scratch_bytes = 0;        // temps, each 64-byte aligned
};

struct LaunchStep {
  std::string kernel;
  uint64_t entry_offset = 0;
  int64_t parallel_extent = 0;  // 0: one call over [0, 1)
  int64_t work = 0;             // iteration points
  int64_t group_size = 0;       // GPU targets: invocations per workgroup (threads per block)
};

struct LaunchPlan {
  std::vector<LaunchStep> steps;
};

struct Executable {
  std::string target;  // "x86_64"
  std::string isa;     // "avx512", "avx2+fma", "sse4.1"
  std::vector<uint8_t> code;
  ArtifactPlan artifact_plan;
  LaunchPlan launch_plan;
  std::vector<tensor::Spec> inputs;
  std::vector<tensor::Spec> outputs;
};

// Plans every buffer of `module`: inputs and outputs at the caller's
// memory, temps packed into one scratch block.
ArtifactPlan planBuffers(const choir::Module& module);

// Checks internal consistency: entry points inside the code, one buffer
// plan per input and output spec with matching byte sizes, temps inside the
// scratch block. Fails with InvalidProgram naming what is wrong.
absl::Status validateExecutable(const Executable& exe);

}  // namespace accy::executable

#endif  // ACCY_COMPILER_EXECUTABLE_EXECUTABLE_H_
