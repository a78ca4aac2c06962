#include "compiler/choir/value_numbering.h"

#include <cstring>
#include <memory>

#include "compiler/choir/work.h"

namespace accy::choir {
namespace {

template <typename T>
void put(std::string* key, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  key->append(bytes, sizeof(T));
}

void putAffine(std::string* key, const Affine& a) {
  put<int64_t>(key, a.constant);
  put<uint32_t>(key, static_cast<uint32_t>(a.terms.size()));
  for (const Affine::Term& t : a.terms) {
    put<int32_t>(key, t.var);
    put<int64_t>(key, t.coeff);
  }
}

}  // namespace

int ValueNumbering::number(const ExprRef& e) {
  if (auto it = by_node_.find(e.get()); it != by_node_.end()) return it->second;
  // Arguments first (iteratively deep chains would recurse once per level;
  // the depth of an expression is bounded by the fuser).
  std::vector<int> args;
  args.reserve(e->args.size());
  for (const ExprRef& a : e->args) args.push_back(number(a));
  countWork();
  std::string key;
  put<uint8_t>(&key, static_cast<uint8_t>(e->kind));
  put<uint8_t>(&key, static_cast<uint8_t>(e->dtype));
  switch (e->kind) {
    case ExprKind::kLoad:
      put<int32_t>(&key, e->buffer);
      for (const Affine& a : e->index) putAffine(&key, a);
      for (size_t j = 0; j < e->bound.size(); ++j) {
        put<int32_t>(&key, e->bound[j]);
        put<int32_t>(&key, args[j]);
      }
      break;
    case ExprKind::kConstant:
      put<double>(&key, e->constant);
      break;
    case ExprKind::kIndex:
      putAffine(&key, e->index[0]);
      break;
    case ExprKind::kOp:
      put<int32_t>(&key, static_cast<int32_t>(e->op));
      for (int a : args) put<int32_t>(&key, a);
      break;
  }
  const int next = static_cast<int>(by_key_.size());
  const int n = by_key_.try_emplace(std::move(key), next).first->second;
  by_node_.emplace(e.get(), n);
  keep_.push_back(e);
  return n;
}

int ValueNumbering::otherThreefryWord(const ExprRef& e) {
  auto other = std::make_shared<Expr>(*e);
  other->op = e->op == OpCode::kThreefryWord0 ? OpCode::kThreefryWord1 : OpCode::kThreefryWord0;
  return number(other);
}

}  // namespace accy::choir
