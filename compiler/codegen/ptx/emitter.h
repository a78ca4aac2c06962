// PTX text for one `.entry` body: virtual registers of five classes,
// labels, instructions. The target (target.cc) and the math
// ops (ptx_ops.h) write through it; declarations are produced last, when
// the register counts are known.
#ifndef ACCY_COMPILER_CODEGEN_PTX_EMITTER_H_
#define ACCY_COMPILER_CODEGEN_PTX_EMITTER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_format.h"
#include "base/strings.h"

namespace accy::ptx {

// Register classes: predicates, 32- and 64-bit integers (also bit patterns
// and indices), f32 and f64.
enum class RegClass : uint8_t { kPred, kB32, kB64, kF32, kF64 };

// A register name ("%f12") or, where an instruction allows one, an
// immediate ("0f3F800000", "17").
using Operand = std::string;

// 0fXXXXXXXX: the exact bits of an f32 (NaN and infinities included).
inline std::string f32Literal(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return absl::StrFormat("0f%08X", bits);
}

// 0dXXXXXXXXXXXXXXXX: the exact bits of an f64.
inline std::string f64Literal(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  return absl::StrFormat("0d%016X", bits);
}

class Emitter {
 public:
  // A fresh virtual register of class `c`.
  std::string reg(RegClass c) {
    static constexpr const char* kPrefix[] = {"%p", "%r", "%rd", "%f", "%fd"};
    const int i = static_cast<int>(c);
    return strCat(kPrefix[i], ++counts_[i]);
  }

  // A fresh label name (placed with place()).
  std::string label() { return strCat("$L__", ++labels_); }

  // One instruction: "\t<text>;\n".
  void op(std::string_view text) { strAppend(&body_, "\t", text, ";\n"); }
  template <typename... Args>
  void ins(const Args&... parts) {
    body_ += '\t';
    strAppend(&body_, parts...);
    body_ += ";\n";
  }
  void place(std::string_view label) { strAppend(&body_, label, ":\n"); }

  // "\t.reg .pred %p<N>;" ... for every class used.
  std::string declarations() const {
    static constexpr const char* kDecl[] = {".pred %p", ".b32 %r", ".b64 %rd", ".f32 %f", ".f64 %fd"};
    std::string out;
    for (int i = 0; i < 5; ++i) {
      if (counts_[i] > 0) strAppend(&out, "\t.reg ", kDecl[i], "<", counts_[i] + 1, ">;\n");
    }
    return out;
  }
  const std::string& body() const { return body_; }

 private:
  int counts_[5] = {};
  int labels_ = 0;
  std::string body_;
};

}  // namespace accy::ptx

#endif  // ACCY_COMPILER_CODEGEN_PTX_EMITTER_H_
