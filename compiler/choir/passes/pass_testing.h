// Helpers for pass tests: lower a recorded program and run one pass.
#ifndef ACCY_COMPILER_CHOIR_PASSES_PASS_TESTING_H_
#define ACCY_COMPILER_CHOIR_PASSES_PASS_TESTING_H_

#include <functional>
#include <vector>

#include "accy/accy.h"
#include "compiler/choir/ir.h"
#include "compiler/choir/lower.h"
#include "compiler/choir/printer.h"
#include "compiler/choir/verifier.h"

namespace accy::choir::testing {

using Args = std::span<const tensor::Value>;

inline Module lowered(std::vector<tensor::Spec> specs, std::function<tensor::Value(tensor::Builder&, Args)> fn) {
  auto p = tensor::define("t", specs, fn);
  auto m = lowerProgram(*p);
  return *m;
}


// Every loop header in the module, outermost first per kernel.
inline std::vector<LoopHeader> loops(const Module& m) {
  std::vector<LoopHeader> out;
  for (const Kernel& k : m.kernels) {
    visitStmts(k.body, [&](const Stmt& s) {
      if (s.kind == StmtKind::kLoop) out.push_back(s.loop);
      for (const LoopHeader& h : s.domain) out.push_back(h);
    });
  }
  return out;
}

}  // namespace accy::choir::testing

#endif  // ACCY_COMPILER_CHOIR_PASSES_PASS_TESTING_H_
