// Tiling: splits a large reduction into per-tile partial results and a
// final combine, so that the partials can run on several threads and
// vector lanes.
#ifndef ACCY_COMPILER_CHOIR_PASSES_TILE_H_
#define ACCY_COMPILER_CHOIR_PASSES_TILE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

struct TileOptions {
  // Reductions with at least this many points in their domain and few
  // outputs are split.
  int64_t min_points = int64_t{1} << 16;
  // Largest number of tiles; the tile count divides the outermost domain
  // extent so that no tile needs a bounds guard.
  int64_t max_tiles = 256;
  // Tiles are made no smaller than this many points.
  int64_t min_points_per_tile = 4096;
};

// A kernel that is a single reduction with no enclosing loops, whose
// outermost domain loop has extent E with a divisor T (2 <= T <= max_tiles,
// E / T * rest >= min_points_per_tile), becomes two kernels:
//   partial[t] = reduce over (E/T, rest of the domain)    for t < T
//   out = reduce over (t < T) of partial[t]   (then / mean_count)
// An f32 sum (or mean) combines its tiles in f64 and rounds once, a third
// kernel: total = reduce over (t < T) of f64(partial[t]); out = f32(total).
absl::StatusOr<Module> tileReductions(Module module, const TileOptions& options);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PASSES_TILE_H_
