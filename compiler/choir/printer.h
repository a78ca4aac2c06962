// Text form of a Choir module, for `--emit=choir`, tests and debugging.
#ifndef ACCY_COMPILER_CHOIR_PRINTER_H_
#define ACCY_COMPILER_CHOIR_PRINTER_H_

#include <string>

#include "compiler/choir/ir.h"

namespace accy::choir {

std::string toText(const Affine& a);
std::string toText(const Module& module, const ExprRef& e);
// One line per buffer, then each kernel as an indented statement tree:
//   kernel k1 {
//     for i0 < 8 [cpu_parallel] {
//       reduce add b4[i0] over (i1 < 16 [vectorized x16]) = mul(...)
std::string toText(const Module& module);

}  // namespace accy::choir

#endif  // ACCY_COMPILER_CHOIR_PRINTER_H_
