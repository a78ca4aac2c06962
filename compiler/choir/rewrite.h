// Small rewriting utilities shared by passes: substitution of variables in
// expressions, buffer-use queries and statement cost estimates.
#ifndef ACCY_COMPILER_CHOIR_REWRITE_H_
#define ACCY_COMPILER_CHOIR_REWRITE_H_

#include <functional>
#include <vector>

#include "compiler/choir/ir.h"

namespace accy::choir {

// `e` with every affine index rewritten through `s`.
ExprRef substituteExpr(const ExprRef& e, const Substitution& s);
// A statement's index, value and bound values (not its body) rewritten.
void substituteStmt(Stmt& st, const Substitution& s);
// The same for a statement and every statement under it.
void substituteTree(Stmt& st, const Substitution& s);

// `e` with the variables each of its loads binds (Expr::bound) renamed to
// fresh ones: a copy of an expression placed next to the original, where
// the same variables bound to other values would clash (emitters keep one
// value per variable while they emit a loop).
ExprRef freshenBound(Module& m, const ExprRef& e);
// The variables `load` binds renamed to fresh ones, in its index too.
void renameBound(Module& m, Expr& load);

// `e` with every load rewritten by `f` (which returns the replacement, or
// the load itself to keep it).
ExprRef replaceLoads(const ExprRef& e, const std::function<ExprRef(const ExprRef&)>& f);

// Every expression a statement list evaluates (store and reduce values).
void forEachValue(std::vector<Stmt>& stmts, const std::function<void(ExprRef&)>& f);

bool kernelReads(const Kernel& k, int buffer);
bool kernelWrites(const Kernel& k, int buffer);

// Flattened element offset of an access: sum over dims of index * stride.
Affine flatIndex(const Buffer& b, const std::vector<Affine>& index);
// Its coefficient of `var` (the element stride of the access along `var`),
// without building the flattened index.
int64_t flatCoeff(const Buffer& b, const std::vector<Affine>& index, int var);

// Whether `e` is the same at every value of `var`: no load walks it and no
// index expression uses it.
bool invariantIn(const Module& m, const ExprRef& e, int var);

// The points a statement list runs: each loop times its body's, a store
// (or barrier) one, a reduction its domain's product.
int64_t statementPoints(const std::vector<Stmt>& stmts);

// Number of expression nodes, and whether any is expensive (transcendental,
// division, pow).
int exprSize(const ExprRef& e);
bool isExpensiveOp(OpCode op);
bool exprIsExpensive(const ExprRef& e);

// Drops buffers no kernel touches (temps only) and renumbers the rest.
void dropUnusedTemps(Module& m);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_REWRITE_H_
