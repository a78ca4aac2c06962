// The Choir pass pipeline: lowering, then each pass in order, with the
// verifier after every step in debug builds (or when asked).
#ifndef ACCY_COMPILER_CHOIR_PIPELINE_H_
#define ACCY_COMPILER_CHOIR_PIPELINE_H_

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/gpu_map.h"
#include "compiler/choir/passes/parallelize.h"
#include "compiler/choir/passes/tile.h"
#include "compiler/choir/passes/vectorize.h"
#include "compiler/tensor/program.h"

namespace accy::choir {

// Called with the module after lowering and after each pass, with the
// pass's name (pipelinePasses()).
using PassHook = std::function<void(std::string_view pass, const Module&)>;

struct PipelineOptions {
  // Set for GPU targets: lower, fuse, then (with tf32) requestTf32 and the
  // GPU mapping with these options, instead of the CPU passes below.
  std::optional<GpuMapOptions> gpu_map;
  bool tf32 = false;
  VectorizeOptions vectorize;
  TileOptions tile;
  ParallelizeOptions parallelize;
  bool fuse = true;
  FuseLimits fuse_limits;
  // Run the verifier after every pass (always on in debug builds).
  bool verify_each_pass = false;
  PassHook dump;
};

absl::StatusOr<Module> compileToChoir(const tensor::Program& program, const PipelineOptions& options);

// The names the pipeline gives its steps, in order, for CPU (`gpu` false) or
// GPU targets: what `accy compile --dump-after` accepts.
std::vector<std::string_view> pipelinePasses(bool gpu);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PIPELINE_H_
