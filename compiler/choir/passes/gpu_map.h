// GPU mapping: chooses, for each kernel, how its loops map onto workgroups
// and invocations, from device limits. Shared by every GPU target (SPIR-V,
// PTX); nothing here names an API. Emitters read the decision back through
// describeGpuKernel() so that all of them implement the same five forms.
#ifndef ACCY_COMPILER_CHOIR_PASSES_GPU_MAP_H_
#define ACCY_COMPILER_CHOIR_PASSES_GPU_MAP_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

struct GpuMapOptions {
  int64_t max_workgroup_size = 128;     // device limit on invocations per workgroup
  int64_t min_domain_for_tree = 256;    // reductions at least this long cooperate...
  int64_t max_outputs_for_tree = 4096;  // ...when they have at most this many outputs
  // Reductions longer than this cooperate (tree, split when long) whatever
  // the two limits above say: for devices that bound the loop iterations
  // one invocation may run (spirv::TargetInfo::max_loop_iterations).
  int64_t max_serial_domain = INT64_MAX;
  // Products (dot) whose row and column extents are both at least this, and
  // whose domain is at least this long, are tiled through workgroup memory.
  // 0 turns tiling off.
  int64_t min_extent_for_tiles = 8;
  // Register blocking of tiled products: each invocation computes
  // micro_tile x micro_tile outputs, when the row and column extents are at
  // least twice the tile edge; 1 turns it off.
  int64_t micro_tile = 4;
  // Tree reductions whose domain is long enough to give every invocation
  // at least this many points in `split_parts_target` workgroups are split
  // into parts (see kTreeReduce below); 0 turns splitting off.
  int64_t min_points_per_invocation_to_split = 32;
  int64_t max_split_workgroups = 1024;  // parts x outputs, at most
  // scatter_add by ranges of rows (choir::LowerOptions::scatter_range_walk,
  // which lowering for a GPU takes from max_serial_domain); off, the
  // reduction form: only to measure what the ranges buy.
  bool scatter_ranges = true;
};

// Every kernel must be a perfect loop nest ending in one store or one
// reduction (what lowering and fusion produce). The workgroup size is the
// largest power of two within the device limit (at most 256).
//  - Store nests (kElementwise): every loop is tagged kGpuThread (dimension
//    0); the nest is flattened onto the global invocation index, with a
//    grid-stride loop and a bounds guard for any extent.
//  - Sum-of-products reductions (kTiledProduct): `value` is mul(lhs, rhs)
//    over one domain loop, some output loop (the row) is used by lhs and not
//    rhs, another (the column) by rhs and not lhs. The innermost such loops
//    are tagged kGpuThread with gpu_dim 1 (row) and 0 (column), every other
//    output loop kGpuBlock (dimension 2), the domain kSerial; kernel.gpu_tile
//    is the tile edge T and the workgroup is T x T; kernel.gpu_micro = R is
//    the register blocking. Each workgroup computes a TR x TR block of
//    outputs (grid-stride over blocks and batch points): invocation
//    (ty, tx) = (local id / T, local id % T) owns rows row0 + ty + i T and
//    columns col0 + tx + j T for i, j < R. For each T-long slice of the
//    domain the invocations stage lhs (TR rows x T points; invocation
//    (ty, tx) stages rows ty + i T at point tx) and rhs (T points x TR
//    columns; point ty, columns tx + j T) in workgroup memory, guarded at
//    the edges, barrier, and accumulate each output over the slice in
//    domain order (mul then add: the same operations as a serial
//    reduction), bounded by what is left of the domain.
//  - Reductions with few outputs and long domains (kTreeReduce): the output
//    loops are tagged kGpuBlock (one workgroup per output, grid-stride), the
//    domain loops kGpuThread: the workgroup's invocations split the domain
//    and combine in a workgroup-shared-memory tree (subgroup operations
//    where the target has them). When the domain is long and the outputs
//    few, the kernel is split: kernel.gpu_split = P workgroups per output,
//    part p of output o starting at p * workgroup_size + local id and
//    striding by P * workgroup_size, each leaving its (uncombined, not yet
//    divided for a mean) result in temp buffer kernel.gpu_partials at
//    [o * P + p] (a floating sum: [o * 2P + p], its error P after it;
//    splitSlotsPerOutput); the pass adds the kernel after it that combines
//    each output's parts (an ordinary reduction, mapped like any other).
//    Each invocation's part of a floating sum is compensated, its error
//    carried through the workgroup's combine (compensatesParts). The
//    combining kernel of a floating sum is compensated (Stmt::compensated),
//    hence serial: a compensated reduction of at most max_split_workgroups
//    points is serial.
//  - Other reductions (kSerialReduce): one invocation per output (output
//    loops kGpuThread), the domain sequential, a floating sum compensated
//    (two-sum) whether or not the Stmt asks.
//  - Stores at data-dependent positions (kOrderedStores: a store with
//    `bound` values or a `guard`, as scatter_add lowers for a GPU): the
//    loops whose variables appear in the store's index, or in a position
//    value (kIndex) of its guard outside loads, own distinct elements:
//    tagged kGpuThread and flattened as for kElementwise. The others may
//    write one element more than once: tagged kSerial, each invocation
//    runs them in order; they must be innermost. With none, the form is
//    kElementwise.
// Anything else fails with Unimplemented naming the kernel.
absl::StatusOr<Module> mapToGpu(Module module, const GpuMapOptions& options);

// Whether a tree reduction's invocations compensate their parts (two-sum,
// the errors carried through the workgroup's combine and stored beside the
// split parts): every floating sum, asked for or not. On an NVIDIA H200 a
// 2^26 f32 sum so compensated took 72 us, against 90 us with each
// invocation's part cascaded in blocks of kCascade and 71 us with one
// plain chain (docs/PERFORMANCE.md, "CUDA"): a bandwidth-bound sum has the
// arithmetic to spare, and one flat loop keeps its loads in flight.
inline bool compensatesParts(const Stmt& s, DType dtype) { return s.compensated || cascades(s.combiner, dtype); }

// The slots of kernel.gpu_partials each output of a split reduction with
// `split` parts takes: its parts, then, when the parts are compensated
// (compensatesParts), their rounding errors, part p's error `split` after
// it. The combining kernel reads them all; the split kernel writes them.
inline int64_t splitSlotsPerOutput(int64_t split, bool compensated) { return compensated ? 2 * split : split; }

enum class GpuForm : uint8_t { kElementwise, kSerialReduce, kTreeReduce, kTiledProduct, kOrderedStores };
const char* gpuFormName(GpuForm form);

// A mapped kernel, as the emitters see it.
struct GpuNest {
  GpuForm form = GpuForm::kElementwise;
  std::vector<LoopHeader> loops;  // the output loops, outermost first
  std::vector<LoopHeader> serial;  // kOrderedStores: the loops each invocation runs in order
  const Stmt* leaf = nullptr;     // the store or the reduction
  // kTiledProduct: positions in `loops` of the row and column loops, the
  // other positions (batch loops, outermost first), and the operands.
  int row = -1, col = -1;
  std::vector<int> batch;
  ExprRef lhs, rhs;
  int64_t tile = 0;
  int64_t micro = 1;  // kTiledProduct: R, outputs per invocation along each axis
  // kTreeReduce: workgroups per output and the partials buffer (0, -1 when
  // not split).
  int64_t split = 0;
  int partials = -1;
};

// Reads back what mapToGpu decided for `kernel`; InvalidProgram (naming the
// kernel) if it is not a mapped kernel of one of the five forms.
absl::StatusOr<GpuNest> describeGpuKernel(const Kernel& kernel);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_GPU_MAP_H_
