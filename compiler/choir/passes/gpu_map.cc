#include "compiler/choir/passes/gpu_map.h"

#include "compiler/tensor/errors.h"
#include "compiler/tensor/strings.h"

namespace accy::choir {

absl::StatusOr<Module> mapToGpu(Module m, const GpuMapOptions& options) {
  int64_t wg = 1;
  while (wg * 2 <= std::min<int64_t>(options.max_workgroup_size, 256)) wg *= 2;
  for (Kernel& k : m.kernels) {
    if (k.body.size() != 1) {
      return makeError(ErrorKind::kUnimplemented, strCat("gpu mapping: kernel ", k.name, " is not one loop nest"));
    }
    std::vector<Stmt*> nest;
    Stmt* s = &k.body[0];
    while (s->kind == StmtKind::kLoop) {
      if (s->body.size() != 1) {
        return makeError(ErrorKind::kUnimplemented,
                         strCat("gpu mapping: kernel ", k.name, " has a loop with several statements"));
      }
      nest.push_back(s);
      s = &s->body[0];
    }
    int64_t outputs = 1;
    for (Stmt* l : nest) outputs *= l->loop.extent;
    k.workgroup_size = wg;
    if (s->kind == StmtKind::kStore) {
      for (Stmt* l : nest) l->loop = LoopHeader{l->loop.var, l->loop.extent, LoopTag::kGpuThread, 1, 1, 0};
      continue;
    }
    if (s->kind != StmtKind::kReduce) {
      return makeError(ErrorKind::kUnimplemented, strCat("gpu mapping: kernel ", k.name, " ends in a barrier"));
    }
    int64_t domain = 1;
    for (const LoopHeader& h : s->domain) domain *= h.extent;
    const bool tree = domain >= options.min_domain_for_tree && outputs <= options.max_outputs_for_tree;
    for (Stmt* l : nest) {
      l->loop = LoopHeader{l->loop.var, l->loop.extent, tree ? LoopTag::kGpuBlock : LoopTag::kGpuThread, 1, 1, 0};
    }
    for (LoopHeader& h : s->domain) {
      h = LoopHeader{h.var, h.extent, tree ? LoopTag::kGpuThread : LoopTag::kSerial, 1, 1, 0};
    }
  }
  return m;
}

}  // namespace accy::choir
