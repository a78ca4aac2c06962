// The Choir pass pipeline: lowering, then each pass in order, with the
// verifier after every step in debug builds (or when asked).
#ifndef ACCY_COMPILER_CHOIR_PIPELINE_H_
#define ACCY_COMPILER_CHOIR_PIPELINE_H_

#include <functional>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/parallelize.h"
#include "compiler/choir/passes/tile.h"
#include "compiler/choir/passes/vectorize.h"
#include "compiler/tensor/program.h"

namespace accy::choir {

struct PipelineOptions {
  VectorizeOptions vectorize;
  TileOptions tile;
  ParallelizeOptions parallelize;
  bool fuse = true;
  FuseLimits fuse_limits;
  // Run the verifier after every pass (always on in debug builds).
  bool verify_each_pass = false;
  // Called with the module after lowering and after each pass.
  std::function<void(std::string_view pass, const Module&)> dump;
};

absl::StatusOr<Module> compileToChoir(const tensor::Program& program, const PipelineOptions& options);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PIPELINE_H_
