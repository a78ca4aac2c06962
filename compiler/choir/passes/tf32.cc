#include "compiler/choir/passes/tf32.h"

#include <vector>

namespace accy::choir {
namespace {

bool hasDot(const std::vector<Stmt>& body) {
  for (const Stmt& s : body) {
    if (s.kind == StmtKind::kLoop && hasDot(s.body)) return true;
    if (s.kind == StmtKind::kReduce && s.from_dot) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<Module> requestTf32(Module module) {
  for (Kernel& k : module.kernels) k.tf32 = hasDot(k.body);
  return module;
}

}  // namespace accy::choir
