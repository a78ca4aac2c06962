// Structural value numbers of expression nodes, for common-subexpression
// elimination in the emitters.
//
// Two nodes get the same number exactly when they compute the same value:
// the same kind, dtype, op, buffer, affine index (variables included) and
// constant bits, and arguments with the same numbers. Each node is numbered
// once, remembered by identity, so numbering a kernel costs the number of
// distinct nodes it holds, however deep its expressions are (a key made by
// printing each subtree would cost its size at every node: quadratic in a
// chain).
#ifndef ACCY_COMPILER_CHOIR_VALUE_NUMBERING_H_
#define ACCY_COMPILER_CHOIR_VALUE_NUMBERING_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "compiler/choir/ir.h"

namespace accy::choir {

class ValueNumbering {
 public:
  // The number of `e` (0, 1, 2, ... in order of first appearance).
  int number(const ExprRef& e);
  // For a Threefry word op (threefryWord0 or threefryWord1), the number of
  // the other word with the same operands: one encryption computes both,
  // so an emitter keeps the other under this number.
  int otherThreefryWord(const ExprRef& e);
  // Distinct values numbered so far.
  int count() const { return static_cast<int>(by_key_.size()); }

 private:
  absl::flat_hash_map<const Expr*, int> by_node_;
  std::vector<ExprRef> keep_;  // numbered nodes stay alive, so an address is never reused
  absl::flat_hash_map<std::string, int> by_key_;
};

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_VALUE_NUMBERING_H_
