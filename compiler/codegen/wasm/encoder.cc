#include "compiler/codegen/wasm/encoder.h"

#include <cstring>

namespace accy::wasm {
namespace {

void appendName(std::vector<uint8_t>& out, std::string_view s) {
  appendU32(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void appendSection(std::vector<uint8_t>& out, uint8_t id, const std::vector<uint8_t>& payload) {
  out.push_back(id);
  appendU32(out, payload.size());
  out.insert(out.end(), payload.begin(), payload.end());
}

}  // namespace

const char* valTypeName(ValType t) {
  switch (t) {
    case ValType::kI32:
      return "i32";
    case ValType::kI64:
      return "i64";
    case ValType::kF32:
      return "f32";
    case ValType::kF64:
      return "f64";
    case ValType::kV128:
      return "v128";
  }
  return "?";
}

void appendU32(std::vector<uint8_t>& out, uint64_t v) {
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v != 0) b |= 0x80;
    out.push_back(b);
  } while (v != 0);
}

void appendS64(std::vector<uint8_t>& out, int64_t v) {
  for (;;) {
    const uint8_t b = v & 0x7f;
    v >>= 7;  // arithmetic: the sign fills in
    const bool done = (v == 0 && (b & 0x40) == 0) || (v == -1 && (b & 0x40) != 0);
    out.push_back(done ? b : (b | 0x80));
    if (done) return;
  }
}

void FunctionBody::f32Const(float v) {
  op(op::kF32Const);
  uint8_t b[4];
  std::memcpy(b, &v, 4);
  code_.insert(code_.end(), b, b + 4);
}

void FunctionBody::f64Const(double v) {
  op(op::kF64Const);
  uint8_t b[8];
  std::memcpy(b, &v, 8);
  code_.insert(code_.end(), b, b + 8);
}

void FunctionBody::v128Const(const uint8_t bytes[16]) {
  simdOp(simd::kConst);
  code_.insert(code_.end(), bytes, bytes + 16);
}

std::vector<uint8_t> FunctionBody::finish() const {
  std::vector<uint8_t> body;
  // Locals after the parameters, as runs of one type.
  std::vector<std::pair<uint32_t, ValType>> runs;
  for (size_t i = params_; i < types_.size(); ++i) {
    if (!runs.empty() && runs.back().second == types_[i]) {
      ++runs.back().first;
    } else {
      runs.push_back({1, types_[i]});
    }
  }
  appendU32(body, runs.size());
  for (const auto& [count, type] : runs) {
    appendU32(body, count);
    body.push_back(static_cast<uint8_t>(type));
  }
  body.insert(body.end(), code_.begin(), code_.end());
  body.push_back(op::kEnd);
  std::vector<uint8_t> out;
  appendU32(out, body.size());
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

uint32_t ModuleWriter::addFunction(std::string name, std::vector<ValType> params, const FunctionBody& body) {
  uint32_t type = 0;
  while (type < types_.size() && types_[type] != params) ++type;
  if (type == types_.size()) types_.push_back(params);
  functions_.push_back(Function{std::move(name), type, body.finish()});
  return static_cast<uint32_t>(functions_.size() - 1);
}

std::vector<uint8_t> ModuleWriter::finish() const {
  std::vector<uint8_t> out = {0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00};
  std::vector<uint8_t> s;
  appendU32(s, types_.size());
  for (const std::vector<ValType>& params : types_) {
    s.push_back(0x60);
    appendU32(s, params.size());
    for (ValType t : params) s.push_back(static_cast<uint8_t>(t));
    appendU32(s, 0);  // no results
  }
  appendSection(out, 1, s);
  s.clear();
  appendU32(s, 1);
  appendName(s, "env");
  appendName(s, "memory");
  s.push_back(0x02);                   // a memory
  s.push_back(shared_ ? 0x03 : 0x01);  // limits with a maximum (shared: 0x03)
  appendU32(s, min_pages_);
  appendU32(s, max_pages_);
  appendSection(out, 2, s);
  s.clear();
  appendU32(s, functions_.size());
  for (const Function& f : functions_) appendU32(s, f.type);
  appendSection(out, 3, s);
  s.clear();
  appendU32(s, functions_.size());
  for (size_t i = 0; i < functions_.size(); ++i) {
    appendName(s, functions_[i].name);
    s.push_back(0x00);  // a function
    appendU32(s, i);
  }
  appendSection(out, 7, s);
  s.clear();
  appendU32(s, functions_.size());
  for (const Function& f : functions_) s.insert(s.end(), f.body.begin(), f.body.end());
  appendSection(out, 10, s);
  return out;
}

}  // namespace accy::wasm
