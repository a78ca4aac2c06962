#include "compiler/codegen/spirv/module_builder.h"

#include "base/strings.h"

namespace accy::spirv {

void ModuleBuilder::append(std::vector<uint32_t>& out, uint16_t opcode, const std::vector<uint32_t>& operands) {
  out.push_back((static_cast<uint32_t>(operands.size() + 1) << 16) | opcode);
  out.insert(out.end(), operands.begin(), operands.end());
}

std::vector<uint32_t> ModuleBuilder::stringWords(std::string_view s) {
  std::vector<uint32_t> words((s.size() + 4) / 4, 0);
  for (size_t i = 0; i < s.size(); ++i) words[i / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(s[i])) << (8 * (i % 4));
  return words;
}

void ModuleBuilder::capability(uint32_t cap) {
  if (cache_.emplace(strCat("cap", cap), 0).second) append(capabilities_, op::Capability, {cap});
}

void ModuleBuilder::extension(std::string_view name) {
  if (cache_.emplace(strCat("ext", name), 0).second) append(extensions_, op::Extension, stringWords(name));
}

uint32_t ModuleBuilder::importGlsl() {
  if (glsl_ == 0) {
    glsl_ = id();
    std::vector<uint32_t> ops = {glsl_};
    for (uint32_t w : stringWords("GLSL.std.450")) ops.push_back(w);
    append(imports_, op::ExtInstImport, ops);
  }
  return glsl_;
}

void ModuleBuilder::entryPoint(uint32_t function, std::string_view name, const std::vector<uint32_t>& interface) {
  std::vector<uint32_t> ops = {5 /* GLCompute */, function};
  for (uint32_t w : stringWords(name)) ops.push_back(w);
  ops.insert(ops.end(), interface.begin(), interface.end());
  append(entry_points_, op::EntryPoint, ops);
}

void ModuleBuilder::localSize(uint32_t function, uint32_t x) {
  append(modes_, op::ExecutionMode, {function, 17 /* LocalSize */, x, 1, 1});
}

void ModuleBuilder::decorate(uint32_t target, std::initializer_list<uint32_t> decoration) {
  std::vector<uint32_t> ops = {target};
  ops.insert(ops.end(), decoration);
  append(annotations_, op::Decorate, ops);
}

void ModuleBuilder::memberDecorate(uint32_t type, uint32_t member, std::initializer_list<uint32_t> decoration) {
  std::vector<uint32_t> ops = {type, member};
  ops.insert(ops.end(), decoration);
  append(annotations_, op::MemberDecorate, ops);
}

uint32_t ModuleBuilder::cached(const std::string& key, uint16_t opcode, std::vector<uint32_t> operands_after_id) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const uint32_t result = id();
  // Types put their result id first; constants put it after their type.
  const bool typed = opcode == op::Constant || opcode == op::ConstantTrue || opcode == op::ConstantFalse;
  operands_after_id.insert(operands_after_id.begin() + (typed ? 1 : 0), result);
  append(globals_, opcode, operands_after_id);
  cache_[key] = result;
  return result;
}

uint32_t ModuleBuilder::typeVoid() { return cached("void", op::TypeVoid, {}); }
uint32_t ModuleBuilder::typeBool() { return cached("bool", op::TypeBool, {}); }
uint32_t ModuleBuilder::typeInt(uint32_t width, bool is_signed) {
  return cached(strCat("int", width, is_signed), op::TypeInt, {width, is_signed ? 1u : 0u});
}
uint32_t ModuleBuilder::typeFloat(uint32_t width) { return cached(strCat("float", width), op::TypeFloat, {width}); }
uint32_t ModuleBuilder::typeVector(uint32_t component, uint32_t count) {
  return cached(strCat("vec", component, "x", count), op::TypeVector, {component, count});
}
uint32_t ModuleBuilder::typePointer(StorageClass storage, uint32_t type) {
  return cached(strCat("ptr", storage, ":", type), op::TypePointer, {storage, type});
}
uint32_t ModuleBuilder::typeFunction(uint32_t result) { return cached(strCat("fn", result), op::TypeFunction, {result}); }

uint32_t ModuleBuilder::typeRuntimeArray(uint32_t element) {
  const uint32_t result = id();
  append(globals_, op::TypeRuntimeArray, {result, element});
  return result;
}

uint32_t ModuleBuilder::typeArray(uint32_t element, uint32_t length_constant) {
  return cached(strCat("arr", element, ":", length_constant), op::TypeArray, {element, length_constant});
}

uint32_t ModuleBuilder::typeStruct(std::initializer_list<uint32_t> members) {
  const uint32_t result = id();
  std::vector<uint32_t> ops = {result};
  ops.insert(ops.end(), members);
  append(globals_, op::TypeStruct, ops);
  return result;
}

uint32_t ModuleBuilder::constantBits(uint32_t type, uint64_t bits, uint32_t width) {
  if (width == 64) {
    return cached(strCat("c", type, ":", bits), op::Constant,
                  {type, static_cast<uint32_t>(bits & 0xffffffffu), static_cast<uint32_t>(bits >> 32)});
  }
  return cached(strCat("c", type, ":", bits), op::Constant, {type, static_cast<uint32_t>(bits)});
}

uint32_t ModuleBuilder::constantBool(bool value) {
  return cached(value ? "true" : "false", value ? op::ConstantTrue : op::ConstantFalse, {typeBool()});
}

uint32_t ModuleBuilder::globalVariable(uint32_t pointer_type, StorageClass storage) {
  const uint32_t result = id();
  append(globals_, op::Variable, {pointer_type, result, storage});
  return result;
}

void ModuleBuilder::inst(uint16_t opcode, std::initializer_list<uint32_t> operands) {
  append(function_body_, opcode, std::vector<uint32_t>(operands));
}
void ModuleBuilder::inst(uint16_t opcode, const std::vector<uint32_t>& operands) {
  append(function_body_, opcode, operands);
}

uint32_t ModuleBuilder::value(uint16_t opcode, uint32_t type, std::initializer_list<uint32_t> operands) {
  return value(opcode, type, std::vector<uint32_t>(operands));
}

uint32_t ModuleBuilder::value(uint16_t opcode, uint32_t type, const std::vector<uint32_t>& operands) {
  const uint32_t result = id();
  std::vector<uint32_t> ops = {type, result};
  ops.insert(ops.end(), operands.begin(), operands.end());
  append(function_body_, opcode, ops);
  return result;
}

uint32_t ModuleBuilder::localVariable(uint32_t pointer_type) {
  const uint32_t result = id();
  append(function_vars_, op::Variable, {pointer_type, result, kFunction});
  return result;
}

uint32_t ModuleBuilder::beginMain() {
  const uint32_t fn = id();
  const uint32_t void_type = typeVoid();
  append(function_head_, op::Function, {void_type, fn, 0, typeFunction(void_type)});
  append(function_head_, op::Label, {id()});
  return fn;
}

void ModuleBuilder::endMain() {
  append(function_body_, op::Return, {});
  append(function_body_, op::FunctionEnd, {});
}

std::vector<uint32_t> ModuleBuilder::finish() const {
  std::vector<uint32_t> out = {0x07230203, 0x00010300 /* 1.3 */, 0, next_id_, 0};
  for (const auto* section : {&capabilities_, &extensions_, &imports_}) out.insert(out.end(), section->begin(), section->end());
  // OpMemoryModel Logical GLSL450
  out.push_back((3u << 16) | op::MemoryModel);
  out.push_back(0);
  out.push_back(1);
  for (const auto* section : {&entry_points_, &modes_, &annotations_, &globals_, &function_head_, &function_vars_,
                              &function_body_}) {
    out.insert(out.end(), section->begin(), section->end());
  }
  return out;
}

}  // namespace accy::spirv
