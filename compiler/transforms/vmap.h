// Batching: vmap turns a program over one example into a program over a
// new named axis.
#ifndef ACCY_COMPILER_TRANSFORMS_VMAP_H_
#define ACCY_COMPILER_TRANSFORMS_VMAP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/tensor/program.h"

namespace accy::transforms {

// Where an input carries the batch axis: at `position` among its axes, or
// nowhere (shared by every batch element) when position < 0.
struct InAxis {
  int position = -1;
  bool mapped() const { return position >= 0; }
};

struct VmapSpec {
  int64_t axis_size = 0;
  std::vector<InAxis> in_axes;  // one per input
  std::string axis_name;
};

// Inputs given a position gain the axis `axis_name` (extent axis_size)
// there; every output gains it at position 0. Because ops work by axis
// name, the batch axis passes through every op as an independent axis.
// Errors: InvalidAxisName, InvalidExtent (axis_size < 1), ArityMismatch
// (in_axes count), InvalidArgument (position past the input's rank),
// AxisNameCollision (the program already uses the name).
absl::StatusOr<tensor::Program> vmap(const tensor::Program& program, const VmapSpec& spec);

}  // namespace accy::transforms

#endif  // ACCY_COMPILER_TRANSFORMS_VMAP_H_
