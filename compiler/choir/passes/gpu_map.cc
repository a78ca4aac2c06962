#include "compiler/choir/passes/gpu_map.h"

#include <algorithm>
#include <functional>
#include <type_traits>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::choir {
namespace {

bool exprUses(const ExprRef& e, int var) {
  bool used = false;
  visitExpr(e, [&](const Expr& x) {
    for (const Affine& a : x.index) used = used || a.uses(var);
  });
  return used;
}

LoopHeader tagged(const LoopHeader& h, LoopTag tag, int dim) { return LoopHeader{h.var, h.extent, tag, 1, 1, dim}; }

// Whether loop variable `var` picks the element a store at data-dependent
// positions writes: it appears in the store's index, or in a position value
// of its guard outside loads (a load's index picks what is read, not where
// it is written). Loops that do not may write one element more than once.
bool ownsElements(const Stmt& s, int var) {
  for (const Affine& a : s.index) {
    if (a.uses(var)) return true;
  }
  if (!s.guard) return false;
  std::function<bool(const ExprRef&)> positions = [&](const ExprRef& e) {
    if (e->kind == ExprKind::kLoad) return false;
    if (e->kind == ExprKind::kIndex && e->index[0].uses(var)) return true;
    return std::any_of(e->args.begin(), e->args.end(), positions);
  };
  return positions(s.guard);
}

bool positioned(const Stmt& s) { return s.kind == StmtKind::kStore && (!s.bound.empty() || s.guard); }

// The nest's loops and leaf, or an error naming the kernel; K is Kernel
// (to retag the loops) or const Kernel (to read them).
template <typename K, typename S = std::conditional_t<std::is_const_v<K>, const Stmt, Stmt>>
absl::StatusOr<std::pair<std::vector<S*>, S*>> nestOf(K& k) {
  if (k.body.size() != 1) {
    return makeError(ErrorKind::kUnimplemented, strCat("gpu mapping: kernel ", k.name, " is not one loop nest"));
  }
  std::vector<S*> nest;
  S* s = &k.body[0];
  while (s->kind == StmtKind::kLoop) {
    if (s->body.size() != 1) {
      return makeError(ErrorKind::kUnimplemented,
                       strCat("gpu mapping: kernel ", k.name, " has a loop with several statements"));
    }
    nest.push_back(s);
    s = &s->body[0];
  }
  if (s->kind == StmtKind::kBarrier) {
    return makeError(ErrorKind::kUnimplemented, strCat("gpu mapping: kernel ", k.name, " ends in a barrier"));
  }
  return std::make_pair(nest, s);
}

// The row and column positions of a sum of products, or {-1, -1}.
std::pair<int, int> productAxes(const std::vector<LoopHeader>& loops, const Stmt& r) {
  if (r.combiner != OpCode::kAdd || r.domain.size() != 1 || r.value->kind != ExprKind::kOp ||
      r.value->op != OpCode::kMul || r.value->args.size() != 2) {
    return {-1, -1};
  }
  const ExprRef& lhs = r.value->args[0];
  const ExprRef& rhs = r.value->args[1];
  int row = -1, col = -1;
  for (int i = 0; i < static_cast<int>(loops.size()); ++i) {
    const bool l = exprUses(lhs, loops[i].var), rr = exprUses(rhs, loops[i].var);
    if (l && !rr) row = i;
    if (rr && !l) col = i;
  }
  return {row, col};
}

// The kernel that combines the parts of split kernel `k` (whose nest is
// `loops` over reduction `r`) into r's buffer: for each output, a reduction
// over the parts with r's combiner and mean.
Kernel combineParts(Module& m, const Kernel& k, const std::vector<LoopHeader>& loops, const Stmt& r) {
  Substitution subst;
  std::vector<LoopHeader> fresh;
  Affine flat;  // the output's row-major number
  for (const LoopHeader& h : loops) {
    LoopHeader n{m.newVar(), h.extent, LoopTag::kSerial, 1, 1, 0};
    subst.set(h.var, Affine::var(n.var));
    flat = add(scale(flat, h.extent), Affine::var(n.var));
    fresh.push_back(n);
  }
  const int64_t per_output = splitSlotsPerOutput(k.gpu_split, compensatesParts(r, m.buffers[r.buffer].dtype));
  const LoopHeader part{m.newVar(), per_output, LoopTag::kSerial, 1, 1, 0};
  Stmt combine;
  combine.kind = StmtKind::kReduce;
  combine.buffer = r.buffer;
  for (const Affine& a : r.index) combine.index.push_back(substitute(a, subst));
  combine.domain = {part};
  combine.value = makeLoad(m.buffers[k.gpu_partials].dtype, k.gpu_partials,
                           {add(scale(flat, per_output), Affine::var(part.var))});
  combine.combiner = r.combiner;
  combine.mean_count = r.mean_count;
  // A floating sum's parts are added with their rounding errors carried:
  // its top levels hold the largest values, whose roundings are the
  // largest (docs/MATH_ACCURACY.md, "Sums").
  combine.compensated = cascades(r.combiner, m.buffers[r.buffer].dtype);
  Kernel out;
  out.name = strCat(k.name, "_parts");
  Stmt body = combine;
  for (size_t i = fresh.size(); i-- > 0;) body = Stmt::loopOf(fresh[i], {body});
  out.body = {body};
  return out;
}

}  // namespace

const char* gpuFormName(GpuForm form) {
  switch (form) {
    case GpuForm::kElementwise:
      return "elementwise";
    case GpuForm::kSerialReduce:
      return "serial reduction";
    case GpuForm::kTreeReduce:
      return "tree reduction";
    case GpuForm::kTiledProduct:
      return "tiled product";
    case GpuForm::kOrderedStores:
      return "ordered stores";
  }
  return "?";
}

absl::StatusOr<Module> mapToGpu(Module m, const GpuMapOptions& options) {
  int64_t wg = 1;
  while (wg * 2 <= std::min<int64_t>(options.max_workgroup_size, 256)) wg *= 2;
  for (size_t ki = 0; ki < m.kernels.size(); ++ki) {
    Kernel& k = m.kernels[ki];
    auto found = nestOf(k);
    if (!found.ok()) return found.status();
    auto [nest, s] = *found;
    int64_t outputs = 1;
    std::vector<LoopHeader> loops;
    for (Stmt* l : nest) {
      outputs *= l->loop.extent;
      loops.push_back(l->loop);
    }
    k.workgroup_size = wg;
    k.gpu_tile = 0;
    k.gpu_micro = 0;
    if (s->kind == StmtKind::kStore) {
      bool serial_seen = false;
      for (Stmt* l : nest) {
        const bool parallel = !positioned(*s) || ownsElements(*s, l->loop.var);
        if (parallel && serial_seen) {
          return makeError(ErrorKind::kUnimplemented,
                           strCat("gpu mapping: kernel ", k.name, " has loop i", l->loop.var,
                                  ", which owns the elements it stores, inside a loop that does not"));
        }
        serial_seen = serial_seen || !parallel;
        l->loop = tagged(l->loop, parallel ? LoopTag::kGpuThread : LoopTag::kSerial, 0);
      }
      continue;
    }
    int64_t domain = 1;
    for (const LoopHeader& h : s->domain) domain *= h.extent;
    // Tiled product: the largest power-of-two tile whose square fits.
    auto [row, col] = productAxes(loops, *s);
    const int64_t min_extent = options.min_extent_for_tiles;
    if (min_extent > 0 && row >= 0 && col >= 0 && loops[row].extent >= min_extent &&
        loops[col].extent >= min_extent && domain >= min_extent && wg >= 16) {
      int64_t tile = 4;
      while ((tile * 2) * (tile * 2) <= wg && tile < 16) tile *= 2;
      k.gpu_tile = tile;
      k.workgroup_size = tile * tile;
      const int64_t micro = std::max<int64_t>(options.micro_tile, 1);
      k.gpu_micro = micro > 1 && loops[row].extent >= 2 * tile && loops[col].extent >= 2 * tile ? micro : 1;
      for (int i = 0; i < static_cast<int>(nest.size()); ++i) {
        nest[i]->loop = i == row   ? tagged(loops[i], LoopTag::kGpuThread, 1)
                        : i == col ? tagged(loops[i], LoopTag::kGpuThread, 0)
                                   : tagged(loops[i], LoopTag::kGpuBlock, 2);
      }
      s->domain[0] = tagged(s->domain[0], LoopTag::kSerial, 0);
      continue;
    }
    // A short compensated sum (the parts of a split one, at most
    // max_split_workgroups of them) is serial; a longer one (asked for:
    // tensor::SumOptions) is a tree whose invocations compensate their parts.
    const bool serial_compensated =
        s->compensated && domain <= options.max_split_workgroups && domain <= options.max_serial_domain;
    const bool tree = !serial_compensated &&
                      ((domain >= options.min_domain_for_tree && outputs <= options.max_outputs_for_tree) ||
                       domain > options.max_serial_domain);
    for (Stmt* l : nest) l->loop = tagged(l->loop, tree ? LoopTag::kGpuBlock : LoopTag::kGpuThread, 0);
    for (LoopHeader& h : s->domain) h = tagged(h, tree ? LoopTag::kGpuThread : LoopTag::kSerial, 0);
    k.gpu_split = 0;
    k.gpu_partials = -1;
    const int64_t per_part = wg * options.min_points_per_invocation_to_split;
    const int64_t parts = options.min_points_per_invocation_to_split > 0
                              ? std::min(domain / std::max<int64_t>(per_part, 1), options.max_split_workgroups / outputs)
                              : 0;
    if (tree && parts >= 2) {
      k.gpu_split = parts;
      Buffer partials;
      partials.name = strCat(k.name, "_parts");
      partials.dtype = m.buffers[s->buffer].dtype;
      partials.shape = {outputs * splitSlotsPerOutput(parts, compensatesParts(*s, partials.dtype))};
      partials.role = BufferRole::kTemp;
      m.buffers.push_back(partials);
      k.gpu_partials = static_cast<int>(m.buffers.size()) - 1;
      Kernel next = combineParts(m, k, loops, *s);
      // `k` may move: insert after it and map the new kernel next.
      m.kernels.insert(m.kernels.begin() + static_cast<std::ptrdiff_t>(ki) + 1, std::move(next));
    }
  }
  return m;
}

absl::StatusOr<GpuNest> describeGpuKernel(const Kernel& kernel) {
  auto bad = [&](std::string_view why) {
    return makeError(ErrorKind::kInvalidProgram, strCat("kernel ", kernel.name, " is not mapped to a GPU: ", why));
  };
  if (kernel.workgroup_size <= 0) return bad("no workgroup size");
  auto found = nestOf(kernel);
  if (!found.ok()) return found.status();
  GpuNest g;
  for (const Stmt* l : found->first) g.loops.push_back(l->loop);
  g.leaf = found->second;
  const Stmt& s = *g.leaf;
  auto all = [](const std::vector<LoopHeader>& hs, LoopTag tag) {
    return std::all_of(hs.begin(), hs.end(), [&](const LoopHeader& h) { return h.tag == tag; });
  };
  if (s.kind == StmtKind::kStore) {
    if (kernel.gpu_tile != 0) return bad("a store nest is not tiled");
    // Positioned stores: the serial loops innermost (mapToGpu).
    size_t threads = 0;
    while (threads < g.loops.size() && g.loops[threads].tag == LoopTag::kGpuThread) ++threads;
    g.serial.assign(g.loops.begin() + static_cast<std::ptrdiff_t>(threads), g.loops.end());
    g.loops.resize(threads);
    if (!all(g.serial, LoopTag::kSerial) || (!g.serial.empty() && !positioned(s))) {
      return bad("a store nest must be gpu_thread loops, then serial loops around a store at data-dependent positions");
    }
    g.form = g.serial.empty() ? GpuForm::kElementwise : GpuForm::kOrderedStores;
    return g;
  }
  if (kernel.gpu_tile > 0) {
    auto [row, col] = productAxes(g.loops, s);
    if (row < 0 || col < 0 || kernel.workgroup_size != kernel.gpu_tile * kernel.gpu_tile) {
      return bad("a tiled kernel must be a sum of products with a square workgroup");
    }
    for (int i = 0; i < static_cast<int>(g.loops.size()); ++i) {
      const LoopHeader& h = g.loops[i];
      const bool ok = i == row   ? h.tag == LoopTag::kGpuThread && h.gpu_dim == 1
                      : i == col ? h.tag == LoopTag::kGpuThread && h.gpu_dim == 0
                                 : h.tag == LoopTag::kGpuBlock;
      if (!ok) return bad(strCat("loop i", h.var, " is not tagged as a tiled product needs"));
      if (i != row && i != col) g.batch.push_back(i);
    }
    g.form = GpuForm::kTiledProduct;
    g.row = row;
    g.col = col;
    g.lhs = s.value->args[0];
    g.rhs = s.value->args[1];
    g.tile = kernel.gpu_tile;
    if (kernel.gpu_micro < 1) return bad("a tiled kernel needs its register blocking (1 for none)");
    g.micro = kernel.gpu_micro;
    return g;
  }
  if (!s.domain.empty() && all(g.loops, LoopTag::kGpuBlock) && all(s.domain, LoopTag::kGpuThread)) {
    g.form = GpuForm::kTreeReduce;
    if (kernel.gpu_split > 0) {
      if (kernel.gpu_partials < 0) return bad("a split reduction needs a partials buffer");
      g.split = kernel.gpu_split;
      g.partials = kernel.gpu_partials;
    }
    return g;
  }
  if (all(g.loops, LoopTag::kGpuThread) && all(s.domain, LoopTag::kSerial)) {
    g.form = GpuForm::kSerialReduce;
    return g;
  }
  return bad("its loop tags match no GPU form");
}

}  // namespace accy::choir
