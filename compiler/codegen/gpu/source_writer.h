// The text of a kernel body, for the GPU targets that write source (WGSL,
// MSL): every value bound once to a fresh name, mutable variables, nested
// blocks, and the table from the emitter's value handles (gpu::Value) to
// the names or expressions they stand for.
#ifndef ACCY_COMPILER_CODEGEN_GPU_SOURCE_WRITER_H_
#define ACCY_COMPILER_CODEGEN_GPU_SOURCE_WRITER_H_

#include <deque>
#include <string>
#include <string_view>

#include "base/strings.h"
#include "compiler/codegen/gpu/target.h"

namespace accy::gpu {

class SourceWriter {
 public:
  // How a binding is written: `let v1: f32 = e;` (WGSL, kTypeAfter) or
  // `const float v1 = e;` (C-like, kTypeBefore).
  enum class Style { kTypeAfter, kTypeBefore };

  explicit SourceWriter(Style style) : style_(style) { names_.emplace_back(); }

  // A fresh name bound to `expr` of `type`.
  std::string let(std::string_view type, std::string_view expr) {
    std::string name = strCat("v", ++count_);
    line(style_ == Style::kTypeAfter ? strCat("let ", name, ": ", type, " = ", expr, ";")
                                     : strCat("const ", type, " ", name, " = ", expr, ";"));
    return name;
  }
  // A fresh mutable variable holding `init`.
  std::string var(std::string_view type, std::string_view init) {
    std::string name = strCat("w", ++count_);
    line(style_ == Style::kTypeAfter ? strCat("var ", name, ": ", type, " = ", init, ";")
                                     : strCat(type, " ", name, " = ", init, ";"));
    return name;
  }
  void line(std::string_view text) {
    body_.append(static_cast<size_t>(2 * depth_), ' ');
    strAppend(&body_, text, "\n");
  }
  void open(std::string_view head) {
    line(strCat(head, " {"));
    ++depth_;
  }
  void close() {
    --depth_;
    line("}");
  }
  const std::string& body() const { return body_; }

  // The emitter's handle for `text` (a name or an expression), and back.
  Value handle(std::string text) {
    names_.push_back(std::move(text));
    return static_cast<Value>(names_.size() - 1);
  }
  const std::string& name(Value v) const { return names_[v]; }
  // A handle for a fresh name bound to `expr`.
  Value bind(std::string_view type, std::string_view expr) { return handle(let(type, expr)); }

 private:
  Style style_;
  std::string body_;
  int depth_ = 1;
  int count_ = 0;
  std::deque<std::string> names_;  // stable references
};

}  // namespace accy::gpu

#endif  // ACCY_COMPILER_CODEGEN_GPU_SOURCE_WRITER_H_
