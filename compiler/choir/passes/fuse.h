// Fusion: inlines a kernel that computes a temporary elementwise into the
// kernels that read it, so elementwise chains become one kernel and
// producers fold into the reductions and dots that consume them.
#ifndef ACCY_COMPILER_CHOIR_PASSES_FUSE_H_
#define ACCY_COMPILER_CHOIR_PASSES_FUSE_H_

#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

// Bounds on what fusion makes, so that a long program compiles in time
// linear in its size and its fused kernels stay fast: a producer is kept as
// its own kernel (its result stored and loaded) where inlining it would make
// an expression larger or needing more live values than these.
// The most nodes of one inlined value whatever a caller asks for: fusion's
// inliner and the passes and emitters after it walk an expression
// depth-first, so this bounds their nesting within a thread's stack, with
// room for AddressSanitizer's larger frames (4,096 nodes overflowed the
// inliner's 8 MiB there).
inline constexpr int64_t kMaxFusedNodes = 1024;
struct FuseLimits {
  // Nodes of one inlined value, its own inlined producers included: bounds
  // the code of one fused loop (a 4,096-op chain becomes kernels of at most
  // this many ops; docs/PERFORMANCE.md measures the run time of the cut).
  // At most kMaxFusedNodes: a larger value counts as that.
  int64_t max_nodes = 256;
  // Values live at once to evaluate it (Sethi-Ullman number): beyond what
  // the vector registers of every target hold, inlining spills.
  int64_t max_registers = 12;
  // Nodes added by copying a cheap producer to each extra place that reads
  // it (a value read at k places adds (k - 1) x its nodes; position work,
  // a pad's guards and clamps, not counted). A stencil reads its producer
  // at each tap: copying a 3-tap row sum into the 3 taps of a column pass
  // costs less than storing and reloading the image (docs/CHOIR.md).
  int64_t max_duplicated_nodes = 48;
  // Nodes evaluated per element of a cheap producer read under loops its
  // value does not depend on (a broadcast operand of a product: evaluated
  // once per column), its nodes times the evaluations per element. Beyond
  // this the producer is stored once and the consumer reads plain loads.
  // Unbounded by default: GPU tiled products stage operands through
  // workgroup memory, evaluating a producer once per tile. The x86-64
  // target bounds it (kCpuMaxRecomputedNodes in x86_64/compile.h): its
  // blocked product needs plain loads.
  int64_t max_recomputed_nodes = std::numeric_limits<int64_t>::max();
  // Buffers one fused value reads, plus the one its kernel writes: beyond
  // this, the producer reading the most buffers is stored instead. WebGPU
  // allows a kernel 8 storage buffers by default, Vulkan devices their
  // maxPerStageDescriptorStorageBuffers; unbounded on the CPU targets.
  int64_t max_buffers = std::numeric_limits<int64_t>::max();
};

// A producer is inlined when it is a perfect loop nest storing a temporary
// at its own loop variables, no other kernel writes that temporary, and the
// limits allow it. An expensive producer (transcendentals, division) is
// kept as its own kernel when inlining would evaluate it more often than it
// has elements: at several places, or under loops its result does not
// depend on. A producer whose result nothing reads is dropped. The pass
// costs time linear in the size of the module.
absl::StatusOr<Module> fuseKernels(Module module, const FuseLimits& limits = {});

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_FUSE_H_
