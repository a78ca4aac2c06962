#include "compiler/choir/passes/tile.h"

#include "compiler/choir/rewrite.h"
#include "base/strings.h"

namespace accy::choir {

absl::StatusOr<Module> tileReductions(Module m, const TileOptions& options) {
  std::vector<Kernel> out;
  for (Kernel& k : m.kernels) {
    if (k.body.size() != 1 || k.body[0].kind != StmtKind::kReduce) {
      out.push_back(std::move(k));
      continue;
    }
    Stmt r = k.body[0];
    int64_t points = 1;
    for (const LoopHeader& h : r.domain) points *= h.extent;
    const int64_t outer_extent = r.domain[0].extent;
    const int64_t rest = points / outer_extent;
    int64_t tiles = 0;
    for (int64_t t = std::min(options.max_tiles, outer_extent); t >= 2; --t) {
      if (outer_extent % t == 0 && (outer_extent / t) * rest >= options.min_points_per_tile) {
        tiles = t;
        break;
      }
    }
    if (points < options.min_points || tiles == 0) {
      out.push_back(std::move(k));
      continue;
    }
    // partial[t] over (inner < E/T, rest...), with outer var := t*(E/T) + inner.
    Buffer partial;
    partial.name = strCat(m.buffers[r.buffer].name, "_tiles");
    partial.dtype = m.buffers[r.buffer].dtype;
    partial.shape = {tiles};
    m.buffers.push_back(partial);
    const int partial_id = static_cast<int>(m.buffers.size() - 1);

    LoopHeader tile_loop;
    tile_loop.var = m.newVar();
    tile_loop.extent = tiles;
    LoopHeader inner = r.domain[0];
    inner.var = m.newVar();
    inner.extent = outer_extent / tiles;
    Substitution s;
    s.set(r.domain[0].var, add(Affine::var(tile_loop.var, inner.extent), Affine::var(inner.var)));

    Stmt part = r;
    part.buffer = partial_id;
    part.index = {Affine::var(tile_loop.var)};
    part.domain[0] = inner;
    part.value = substituteExpr(r.value, s);
    part.mean_count = 0;
    out.push_back(Kernel{strCat(k.name, "_tiles"), {Stmt::loopOf(tile_loop, {std::move(part)})}});

    LoopHeader combine_loop;
    combine_loop.var = m.newVar();
    combine_loop.extent = tiles;
    Stmt fin = r;
    fin.domain = {combine_loop};
    fin.value = makeLoad(partial.dtype, partial_id, {Affine::var(combine_loop.var)});
    if (r.combiner != OpCode::kAdd || partial.dtype != DType::f32) {
      out.push_back(Kernel{strCat(k.name, "_combine"), {std::move(fin)}});
      continue;
    }
    // An f32 sum's tiles are added in f64 and rounded once
    // (docs/MATH_ACCURACY.md, "Sums"): each tile's own rounding is a small
    // part of the total, so the result is within about half an ulp of the
    // exact sum, where adding the tiles in f32 pairs left it an ulp or
    // two away.
    Buffer total;
    total.name = strCat(m.buffers[r.buffer].name, "_total");
    total.dtype = DType::f64;
    total.shape = {1};
    m.buffers.push_back(total);
    const int total_id = static_cast<int>(m.buffers.size() - 1);
    fin.buffer = total_id;
    fin.index = {Affine::constantOf(0)};
    fin.value = makeOp(OpCode::kCast, DType::f64, {fin.value});
    out.push_back(Kernel{strCat(k.name, "_combine"), {std::move(fin)}});
    out.push_back(Kernel{strCat(k.name, "_round"),
                         {Stmt::store(r.buffer, r.index,
                                      makeOp(OpCode::kCast, DType::f32,
                                             {makeLoad(DType::f64, total_id, {Affine::constantOf(0)})}))}});
  }
  m.kernels = std::move(out);
  return m;
}

}  // namespace accy::choir
