// A SPIR-V binary module builder: ids, the logical sections in the order
// the specification requires, and deduplicated types and constants. It
// knows nothing about Choir; target.cc uses it.
#ifndef ACCY_COMPILER_CODEGEN_SPIRV_MODULE_BUILDER_H_
#define ACCY_COMPILER_CODEGEN_SPIRV_MODULE_BUILDER_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace accy::spirv {

// Opcodes and enumerants used (SPIR-V 1.3 unified specification).
namespace op {
enum : uint16_t {
  Name = 5, Extension = 10, ExtInstImport = 11, ExtInst = 12, MemoryModel = 14, EntryPoint = 15, ExecutionMode = 16,
  Capability = 17, TypeVoid = 19, TypeBool = 20, TypeInt = 21, TypeFloat = 22, TypeVector = 23,
  TypeRuntimeArray = 29, TypeStruct = 30, TypePointer = 32, TypeFunction = 33, TypeArray = 28,
  ConstantTrue = 41, ConstantFalse = 42, Constant = 43, Function = 54, FunctionEnd = 56, Variable = 59,
  Load = 61, Store = 62, AccessChain = 65, Decorate = 71, MemberDecorate = 72, CompositeExtract = 81,
  ConvertFToU = 109, ConvertFToS = 110, ConvertSToF = 111, ConvertUToF = 112, UConvert = 113, SConvert = 114, FConvert = 115,
  Bitcast = 124, SNegate = 126, FNegate = 127, IAdd = 128, FAdd = 129, ISub = 130, FSub = 131, IMul = 132,
  FMul = 133, UDiv = 134, SDiv = 135, FDiv = 136, UMod = 137, IsNan = 156, LogicalOr = 166, LogicalAnd = 167,
  LogicalNot = 168, Select = 169, IEqual = 170, INotEqual = 171, UGreaterThan = 172, SGreaterThan = 173,
  UGreaterThanEqual = 174, SGreaterThanEqual = 175, ULessThan = 176, SLessThan = 177, ULessThanEqual = 178,
  SLessThanEqual = 179, FOrdEqual = 180, FUnordNotEqual = 183, FOrdLessThan = 184, FOrdGreaterThan = 186,
  FOrdLessThanEqual = 188, FOrdGreaterThanEqual = 190, ShiftRightLogical = 194, ShiftRightArithmetic = 195, BitwiseOr = 197, BitwiseXor = 198, BitwiseAnd = 199,
  ControlBarrier = 224, GroupNonUniformShuffleDown = 348, ShiftLeftLogical = 196, LoopMerge = 246, SelectionMerge = 247, Label = 248, Branch = 249,
  BranchConditional = 250, Return = 253,
};
}  // namespace op

enum StorageClass : uint32_t { kFunction = 7, kInput = 1, kWorkgroup = 4, kStorageBuffer = 12 };

class ModuleBuilder {
 public:
  uint32_t id() { return next_id_++; }

  // Sections, in module order.
  void capability(uint32_t cap);
  void extension(std::string_view name);
  uint32_t importGlsl();  // the GLSL.std.450 extended instruction set
  void entryPoint(uint32_t function, std::string_view name, const std::vector<uint32_t>& interface);
  void localSize(uint32_t function, uint32_t x);
  void decorate(uint32_t target, std::initializer_list<uint32_t> decoration);
  void memberDecorate(uint32_t type, uint32_t member, std::initializer_list<uint32_t> decoration);

  // Types and constants (deduplicated).
  uint32_t typeVoid();
  uint32_t typeBool();
  uint32_t typeInt(uint32_t width, bool is_signed);
  uint32_t typeFloat(uint32_t width);
  uint32_t typeVector(uint32_t component, uint32_t count);
  uint32_t typePointer(StorageClass storage, uint32_t type);
  uint32_t typeFunction(uint32_t result);
  // A fresh (undeduplicated) type: runtime arrays and structs get
  // decorations of their own.
  uint32_t typeRuntimeArray(uint32_t element);
  uint32_t typeArray(uint32_t element, uint32_t length_constant);
  uint32_t typeStruct(std::initializer_list<uint32_t> members);
  uint32_t constantBits(uint32_t type, uint64_t bits, uint32_t width);
  uint32_t constantBool(bool value);
  uint32_t globalVariable(uint32_t pointer_type, StorageClass storage);

  // Instructions of the current function body.
  void inst(uint16_t opcode, std::initializer_list<uint32_t> operands);
  void inst(uint16_t opcode, const std::vector<uint32_t>& operands);
  // An instruction with a result: emits (type, new id, operands...) and
  // returns the id.
  uint32_t value(uint16_t opcode, uint32_t type, std::initializer_list<uint32_t> operands);
  uint32_t value(uint16_t opcode, uint32_t type, const std::vector<uint32_t>& operands);
  // A function-storage variable, declared in the entry block.
  uint32_t localVariable(uint32_t pointer_type);
  void label(uint32_t id) { inst(op::Label, {id}); }

  // Starts and ends the one function (void main()).
  uint32_t beginMain();
  void endMain();

  std::vector<uint32_t> finish() const;

 private:
  static void append(std::vector<uint32_t>& out, uint16_t opcode, const std::vector<uint32_t>& operands);
  static std::vector<uint32_t> stringWords(std::string_view s);
  // A deduplicated global: `operands` without the result id, which goes
  // first for types and after the result type for constants.
  uint32_t cached(const std::string& key, uint16_t opcode, std::vector<uint32_t> operands);

  uint32_t next_id_ = 1;
  std::vector<uint32_t> capabilities_, extensions_, imports_, memory_model_, entry_points_, modes_;
  std::vector<uint32_t> annotations_, globals_, function_head_, function_vars_, function_body_;
  std::map<std::string, uint32_t> cache_;
  uint32_t glsl_ = 0;
};

}  // namespace accy::spirv

#endif  // ACCY_COMPILER_CODEGEN_SPIRV_MODULE_BUILDER_H_
