#include "compiler/choir/pipeline.h"

#include "compiler/choir/lower.h"
#include "compiler/choir/passes/epilogue.h"
#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/loop_order.h"
#include "compiler/choir/passes/narrow.h"
#include "compiler/choir/passes/partition.h"
#include "compiler/choir/passes/scan_kernel.h"
#include "compiler/choir/passes/tf32.h"
#include "compiler/choir/verifier.h"
#include "base/status_macros.h"
#include "base/stop.h"
#include "base/errors.h"
#include "base/strings.h"

namespace accy::choir {

absl::StatusOr<Module> compileToChoir(const tensor::Program& program, const PipelineOptions& options) {
#ifdef NDEBUG
  const bool verify = options.verify_each_pass;
#else
  const bool verify = true;
#endif
  auto after = [&](std::string_view pass, const Module& m) -> absl::Status {
    if (options.dump) options.dump(pass, m);
    ACCY_RETURN_IF_ERROR(checkStop());  // a caller's time limit or cancellation, between passes
    if (verify) return verifyModule(m);
    return absl::OkStatus();
  };

  if (isScanProgram(program)) {
    // One scan (StagedProgram offers them to CPU loaders): its body runs
    // through every pass, then the step loop goes around it in one kernel.
    if (options.gpu_map) {
      return makeError(ErrorKind::kUnimplemented, strCat("scan kernel: ", program.name, ": GPU targets run scans step by step"));
    }
    const tensor::Node& scan = program.nodes[program.inputs.size()];
    const tensor::Program& body = program.bodies[static_cast<size_t>(scan.ints[0])];
    for (const tensor::Node& n : body.nodes) {
      if (n.op == tensor::OpCode::kScan || n.op == tensor::OpCode::kWhileLoop) {
        return makeError(ErrorKind::kUnimplemented, strCat("scan kernel: the body of ", program.name, " holds a loop"));
      }
    }
    ACCY_ASSIGN_OR_RETURN(Module compiled, compileToChoir(body, options));
    ACCY_ASSIGN_OR_RETURN(Module m, scanKernel(program, compiled));
    ACCY_RETURN_IF_ERROR(after("scan-kernel", m));
    return m;
  }
  LowerOptions lower{.serial_scatter = !options.gpu_map};
  if (options.gpu_map && options.gpu_map->scatter_ranges) lower.scatter_range_walk = options.gpu_map->max_serial_domain;
  ACCY_ASSIGN_OR_RETURN(Module m, lowerProgram(program, lower));
  ACCY_RETURN_IF_ERROR(after("lower", m));
  if (options.fuse) {
    ACCY_ASSIGN_OR_RETURN(m, fuseKernels(std::move(m), options.fuse_limits));
    ACCY_RETURN_IF_ERROR(after("fuse", m));
  }
  if (options.gpu_map) {
    if (options.tf32) {
      ACCY_ASSIGN_OR_RETURN(m, requestTf32(std::move(m)));
      ACCY_RETURN_IF_ERROR(after("tf32", m));
    }
    ACCY_ASSIGN_OR_RETURN(m, mapToGpu(std::move(m), *options.gpu_map));
    ACCY_RETURN_IF_ERROR(after("gpu-map", m));
    return m;
  }
  ACCY_ASSIGN_OR_RETURN(m, narrowProducers(std::move(m)));
  ACCY_RETURN_IF_ERROR(after("narrow", m));
  ACCY_ASSIGN_OR_RETURN(m, orderLoops(std::move(m)));
  ACCY_RETURN_IF_ERROR(after("loop-order", m));
  if (options.fuse) {
    ACCY_ASSIGN_OR_RETURN(m, fuseProductEpilogues(std::move(m)));
    ACCY_RETURN_IF_ERROR(after("epilogues", m));
  }
  ACCY_ASSIGN_OR_RETURN(m, partitionBoundaries(std::move(m)));
  ACCY_RETURN_IF_ERROR(after("partition", m));
  ACCY_ASSIGN_OR_RETURN(m, tileReductions(std::move(m), options.tile));
  ACCY_RETURN_IF_ERROR(after("tile", m));
  ACCY_ASSIGN_OR_RETURN(m, vectorizeLoops(std::move(m), options.vectorize));
  ACCY_RETURN_IF_ERROR(after("vectorize", m));
  ACCY_ASSIGN_OR_RETURN(m, parallelizeLoops(std::move(m), options.parallelize));
  ACCY_RETURN_IF_ERROR(after("parallelize", m));
  return m;
}

std::vector<std::string_view> pipelinePasses(bool gpu) {
  if (gpu) return {"lower", "fuse", "tf32", "gpu-map"};
  return {"lower", "fuse", "narrow", "loop-order", "epilogues", "partition", "tile", "vectorize", "parallelize"};
}

}  // namespace accy::choir
