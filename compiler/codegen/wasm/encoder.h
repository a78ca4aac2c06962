// A WebAssembly binary encoder of Accy's own (no toolchain at run time):
// LEB128 numbers, instructions (MVP, saturating conversions, SIMD128 and
// the threads proposal's atomics), function bodies with their locals, and
// the module sections the wasm target writes (types, an imported memory,
// functions, exports, code). Opcode values are the WebAssembly
// specification's; every module the target writes is checked by
// wasm-validate in the tests.
#ifndef ACCY_COMPILER_CODEGEN_WASM_ENCODER_H_
#define ACCY_COMPILER_CODEGEN_WASM_ENCODER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace accy::wasm {

enum class ValType : uint8_t { kI32 = 0x7f, kI64 = 0x7e, kF32 = 0x7d, kF64 = 0x7c, kV128 = 0x7b };
const char* valTypeName(ValType t);

// Instruction opcodes (one byte), the 0xfc-prefixed saturating
// conversions and memory ops, and the 0xfd-prefixed SIMD ops.
namespace op {
enum : uint8_t {
  kUnreachable = 0x00, kBlock = 0x02, kLoop = 0x03, kIf = 0x04, kElse = 0x05, kEnd = 0x0b, kBr = 0x0c,
  kBrIf = 0x0d, kReturn = 0x0f, kCall = 0x10, kDrop = 0x1a, kSelect = 0x1b,
  kLocalGet = 0x20, kLocalSet = 0x21, kLocalTee = 0x22,
  kI32Load = 0x28, kI64Load = 0x29, kF32Load = 0x2a, kF64Load = 0x2b, kI32Load8U = 0x2d,
  kI32Store = 0x36, kI64Store = 0x37, kF32Store = 0x38, kF64Store = 0x39, kI32Store8 = 0x3a,
  kI32Const = 0x41, kI64Const = 0x42, kF32Const = 0x43, kF64Const = 0x44,
  kI32Eqz = 0x45, kI32Eq = 0x46, kI32Ne = 0x47, kI32LtS = 0x48, kI32LtU = 0x49, kI32GtS = 0x4a,
  kI32GtU = 0x4b, kI32LeS = 0x4c, kI32LeU = 0x4d, kI32GeS = 0x4e, kI32GeU = 0x4f,
  kI64Eqz = 0x50, kI64Eq = 0x51, kI64Ne = 0x52, kI64LtS = 0x53, kI64GtS = 0x55, kI64LeS = 0x57, kI64GeS = 0x59,
  kF32Eq = 0x5b, kF32Ne = 0x5c, kF32Lt = 0x5d, kF32Gt = 0x5e, kF32Le = 0x5f, kF32Ge = 0x60,
  kF64Eq = 0x61, kF64Ne = 0x62, kF64Lt = 0x63, kF64Gt = 0x64, kF64Le = 0x65, kF64Ge = 0x66,
  kI32Add = 0x6a, kI32Sub = 0x6b, kI32Mul = 0x6c, kI32DivS = 0x6d, kI32DivU = 0x6e, kI32And = 0x71, kI32Or = 0x72,
  kI32Xor = 0x73, kI32Shl = 0x74, kI32ShrS = 0x75, kI32ShrU = 0x76,
  kI64Add = 0x7c, kI64Sub = 0x7d, kI64Mul = 0x7e, kI64DivS = 0x7f, kI64And = 0x83, kI64Or = 0x84,
  kI64Xor = 0x85, kI64Shl = 0x86, kI64ShrS = 0x87, kI64ShrU = 0x88,
  kF32Abs = 0x8b, kF32Neg = 0x8c, kF32Nearest = 0x90, kF32Sqrt = 0x91, kF32Add = 0x92, kF32Sub = 0x93,
  kF32Mul = 0x94, kF32Div = 0x95, kF32Min = 0x96, kF32Max = 0x97,
  kF64Abs = 0x99, kF64Neg = 0x9a, kF64Nearest = 0x9e, kF64Sqrt = 0x9f, kF64Add = 0xa0, kF64Sub = 0xa1,
  kF64Mul = 0xa2, kF64Div = 0xa3, kF64Min = 0xa4, kF64Max = 0xa5,
  kI32WrapI64 = 0xa7, kI64ExtendI32S = 0xac, kI64ExtendI32U = 0xad,
  kF32ConvertI32S = 0xb2, kF32ConvertI32U = 0xb3, kF32ConvertI64S = 0xb4, kF32DemoteF64 = 0xb6,
  kF64ConvertI32S = 0xb7, kF64ConvertI32U = 0xb8, kF64ConvertI64S = 0xb9, kF64PromoteF32 = 0xbb,
  kI32ReinterpretF32 = 0xbc, kI64ReinterpretF64 = 0xbd, kF32ReinterpretI32 = 0xbe, kF64ReinterpretI64 = 0xbf,
  kPrefixFc = 0xfc, kPrefixSimd = 0xfd, kPrefixAtomic = 0xfe,
};
}  // namespace op

namespace fc {
enum : uint32_t {
  kI32TruncSatF32S = 0, kI32TruncSatF32U = 1, kI32TruncSatF64S = 2, kI32TruncSatF64U = 3, kI64TruncSatF32S = 4, kI64TruncSatF64S = 6,
};
}  // namespace fc

namespace simd {
enum : uint32_t {
  kLoad = 0x00, kLoad32Splat = 0x09, kLoad64Splat = 0x0a, kStore = 0x0b, kConst = 0x0c,
  kI32x4Splat = 0x11, kI64x2Splat = 0x12, kF32x4Splat = 0x13, kF64x2Splat = 0x14,
  kI32x4ExtractLane = 0x1b, kF32x4ExtractLane = 0x1f, kF64x2ExtractLane = 0x21,
  kI32x4Eq = 0x37, kI32x4Ne = 0x38, kI32x4LtS = 0x39, kI32x4GtS = 0x3b, kI32x4LeS = 0x3d, kI32x4GeS = 0x3f,
  kF32x4Eq = 0x41, kF32x4Ne = 0x42, kF32x4Lt = 0x43, kF32x4Gt = 0x44, kF32x4Le = 0x45, kF32x4Ge = 0x46,
  kF64x2Eq = 0x47, kF64x2Ne = 0x48, kF64x2Lt = 0x49, kF64x2Gt = 0x4a, kF64x2Le = 0x4b, kF64x2Ge = 0x4c,
  kNot = 0x4d, kAnd = 0x4e, kAndNot = 0x4f, kOr = 0x50, kXor = 0x51, kBitSelect = 0x52, kAnyTrue = 0x53,
  kF32x4Nearest = 0x6a, kF64x2Nearest = 0x94,
  kI32x4Abs = 0xa0, kI32x4Neg = 0xa1, kI32x4Shl = 0xab, kI32x4ShrU = 0xad, kI32x4Add = 0xae, kI32x4Sub = 0xb1,
  kI32x4Mul = 0xb5, kI32x4MinS = 0xb6, kI32x4MaxS = 0xb8,
  kI64x2Shl = 0xcb, kI64x2ShrU = 0xcd, kI64x2Add = 0xce,
  kF32x4Abs = 0xe0, kF32x4Neg = 0xe1, kF32x4Sqrt = 0xe3, kF32x4Add = 0xe4, kF32x4Sub = 0xe5, kF32x4Mul = 0xe6,
  kF32x4Div = 0xe7, kF32x4Min = 0xe8, kF32x4Max = 0xe9, kF32x4Pmin = 0xea, kF32x4Pmax = 0xeb,
  kF64x2Abs = 0xec, kF64x2Neg = 0xed, kF64x2Sqrt = 0xef, kF64x2Add = 0xf0, kF64x2Sub = 0xf1, kF64x2Mul = 0xf2,
  kF64x2Div = 0xf3, kF64x2Min = 0xf4, kF64x2Max = 0xf5, kF64x2Pmin = 0xf6, kF64x2Pmax = 0xf7,
};
}  // namespace simd

void appendU32(std::vector<uint8_t>& out, uint64_t v);  // unsigned LEB128
void appendS64(std::vector<uint8_t>& out, int64_t v);   // signed LEB128

// One function's body: its locals (parameters first) and its instructions.
class FunctionBody {
 public:
  explicit FunctionBody(std::vector<ValType> params) : types_(std::move(params)), params_(types_.size()) {}

  uint32_t local(ValType t) {
    types_.push_back(t);
    return static_cast<uint32_t>(types_.size() - 1);
  }
  ValType typeOf(uint32_t local) const { return types_[local]; }

  void op(uint8_t opcode) { code_.push_back(opcode); }
  void simdOp(uint32_t opcode) {
    code_.push_back(op::kPrefixSimd);
    appendU32(code_, opcode);
  }
  void fcOp(uint32_t opcode) {
    code_.push_back(op::kPrefixFc);
    appendU32(code_, opcode);
  }
  void u32(uint64_t v) { appendU32(code_, v); }
  void byte(uint8_t b) { code_.push_back(b); }
  void get(uint32_t local) { op(op::kLocalGet), u32(local); }
  void set(uint32_t local) { op(op::kLocalSet), u32(local); }
  void tee(uint32_t local) { op(op::kLocalTee), u32(local); }
  void i32Const(int32_t v) { op(op::kI32Const), appendS64(code_, v); }
  void i64Const(int64_t v) { op(op::kI64Const), appendS64(code_, v); }
  void f32Const(float v);
  void f64Const(double v);
  void v128Const(const uint8_t bytes[16]);
  // A load or store: `align_log2` is the alignment hint (log2 of bytes),
  // `offset` the constant address offset.
  void memory(uint8_t opcode, uint32_t align_log2, uint64_t offset) {
    op(opcode), u32(align_log2), u32(offset);
  }
  void simdMemory(uint32_t opcode, uint32_t align_log2, uint64_t offset) {
    simdOp(opcode), u32(align_log2), u32(offset);
  }
  void lane(uint8_t index) { code_.push_back(index); }
  // Structured control: blocks with no result.
  void block() { op(op::kBlock), byte(0x40); }
  void loop() { op(op::kLoop), byte(0x40); }
  void ifThen() { op(op::kIf), byte(0x40); }
  void end() { op(op::kEnd); }

  // The body as the code section holds it: its size, the locals (runs of
  // one type), the instructions and the final `end`.
  std::vector<uint8_t> finish() const;
  size_t size() const { return code_.size(); }
  // The instructions so far, to be swapped out while code for another place
  // (a prologue, a loop preheader) is written, and put back after.
  std::vector<uint8_t>& code() { return code_; }

 private:
  std::vector<ValType> types_;
  size_t params_;
  std::vector<uint8_t> code_;
};

// A module of exported functions `(params) -> ()` over one imported memory.
class ModuleWriter {
 public:
  // The memory imported as env.memory: at least `min_pages` 64 KiB pages,
  // at most `max_pages`; shared memories (threads) need the maximum.
  void importMemory(uint32_t min_pages, uint32_t max_pages, bool shared) {
    min_pages_ = min_pages, max_pages_ = max_pages, shared_ = shared;
  }
  // Adds a function and exports it as `name`; returns its index.
  uint32_t addFunction(std::string name, std::vector<ValType> params, const FunctionBody& body);
  std::vector<uint8_t> finish() const;

 private:
  struct Function {
    std::string name;
    uint32_t type;
    std::vector<uint8_t> body;
  };
  std::vector<std::vector<ValType>> types_;
  std::vector<Function> functions_;
  uint32_t min_pages_ = 1, max_pages_ = 65536;
  bool shared_ = false;
};

}  // namespace accy::wasm

#endif  // ACCY_COMPILER_CODEGEN_WASM_ENCODER_H_
