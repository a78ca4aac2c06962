#include "compiler/tensor/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "base/errors.h"
#include "base/strings.h"

namespace accy::tensor {
namespace {

// Axis names the samplers use inside their recordings; a request naming
// one is refused like a collision.
constexpr std::string_view kFlat = "_rng_flat", kRest = "_rng_rest";

bool hasAxis(const std::vector<Axis>& axes, std::string_view name) {
  return std::any_of(axes.begin(), axes.end(), [&](const Axis& a) { return a.name == name; });
}

// The key's axes other than `word`.
std::vector<Axis> streamAxes(const Value& key) {
  std::vector<Axis> out;
  for (const Axis& a : key.axes()) {
    if (a.name != "word") out.push_back(a);
  }
  return out;
}

std::vector<std::string> namesOf(const std::vector<Axis>& axes) {
  std::vector<std::string> out;
  for (const Axis& a : axes) out.push_back(a.name);
  return out;
}

// Ok, or the error that a u32 value with `word` of extent 2 is wanted.
absl::Status checkWords(std::string_view op, std::string_view what, const Value& v) {
  if (!v.valid()) return absl::OkStatus();  // the operand's own error is recorded
  if (v.dtype() != DType::u32) {
    return makeError(ErrorKind::kUnsupportedDType, strCat(op, ": the ", what, " must be u32 with an axis word of extent 2, got ",
                                                          dtypeName(v.dtype()), axesText(v.axes())));
  }
  const int64_t words = axisExtent(v.axes(), "word");
  if (words == 0) {
    return makeError(ErrorKind::kUnknownAxis,
                     strCat(op, ": the ", what, " ", axesText(v.axes()), " has no axis 'word' (extent 2)"));
  }
  if (words != 2) {
    return makeError(ErrorKind::kAxisExtentMismatch, strCat(op, ": the ", what, " ", axesText(v.axes()),
                                                            " has axis 'word' of extent ", words, "; a key has 2"));
  }
  return absl::OkStatus();
}

// Ok, or the error for sample axes that repeat, are reserved, or collide
// with the key's stream axes.
absl::Status checkSampleAxes(std::string_view op, const Value& key, const std::vector<Axis>& axes) {
  const std::vector<Axis> stream = streamAxes(key);
  for (size_t i = 0; i < axes.size(); ++i) {
    const std::string& n = axes[i].name;
    bool again = false;
    for (size_t j = 0; j < i; ++j) again = again || axes[j].name == n;
    if (again) {
      return makeError(ErrorKind::kAxisNameCollision,
                       strCat(op, ": sample axis '", n, "' of ", axesText(axes), " is named twice"));
    }
    if (n.rfind("_rng_", 0) == 0) {
      return makeError(ErrorKind::kAxisNameCollision,
                       strCat(op, ": sample axis '", n, "' of ", axesText(axes), " is a name the samplers use"));
    }
    if (hasAxis(stream, n)) {
      return makeError(ErrorKind::kAxisNameCollision, strCat(op, ": sample axis '", n, "' of ", axesText(axes),
                                                             " is an axis of the key ", axesText(key.axes())));
    }
  }
  return absl::OkStatus();
}

// Word w of a key or counter (the axis `word` dropped).
Value wordOf(const Value& v, int w) { return take(v, "word", v.builder()->constant(w, DType::i32)); }

struct Words {
  Value x0, x1;
};

// Threefry-2x32, 20 rounds (Random123; docs/SEMANTICS.md): the op table's
// threefryWord0 and threefryWord1 of the four u32 words, broadcast by name
// (the key's axes first).
Words encrypt(const Value& k0, const Value& k1, const Value& c0, const Value& c1) {
  // The innermost recording of the four: a key from around a loop's body
  // with a counter or data of the body's is captured there.
  Builder* b = ownerOf({k0, k1, c0, c1});
  Words w;
  for (OpCode op : {OpCode::kThreefryWord0, OpCode::kThreefryWord1}) {
    Node node;
    node.op = op;
    (op == OpCode::kThreefryWord0 ? w.x0 : w.x1) = b->record(std::move(node), {k0, k1, c0, c1});
  }
  return w;
}

// `v` with its axes in `order` (names it has), then its others.
Value ordered(const Value& v, const std::vector<std::string>& order) {
  std::vector<std::string> names;
  for (const std::string& n : order) {
    if (hasAxis(v.axes(), n)) names.push_back(n);
  }
  for (const Axis& a : v.axes()) {
    if (std::find(names.begin(), names.end(), a.name) == names.end()) names.push_back(a.name);
  }
  return v.transpose(names);
}

// a and b stacked along a new last axis `axis` (a first), both put in
// `order` first.
Value stack(const Value& a, const Value& b, const std::vector<std::string>& order, std::string_view axis) {
  return concat(axis, {ordered(a, order).broadcast(axis, 1), ordered(b, order).broadcast(axis, 1)});
}

// The flat axis `flat` of `v` (its last) as `axes` in their order; a
// single element when `axes` is empty.
Value unflatten(Value v, std::string_view flat, const std::vector<Axis>& axes) {
  if (axes.empty()) return take(v, flat, v.builder()->constant(0, DType::i32));
  std::string at(flat);
  for (size_t i = 0; i + 1 < axes.size(); ++i) {
    int64_t inner = 1;
    for (size_t j = i + 1; j < axes.size(); ++j) inner *= axes[j].extent;
    const std::string rest = strCat(kRest, i);
    v = v.split(at, axes[i].name, rest, inner);
    at = rest;
  }
  return v.rename(at, axes.back().name);
}

int64_t countOf(const std::vector<Axis>& axes) {
  int64_t n = 1;
  for (const Axis& a : axes) n *= a.extent;
  return n;
}

// The counter of block `first + i` for each sample i, numbered row-major
// over `axes`: (the block number's high 32 bits, its low 32 bits).
Words countersOf(Builder* b, const std::vector<Axis>& axes, int64_t first) {
  const int64_t n = countOf(axes);
  if (first + n <= (int64_t{1} << 32)) {
    Value low = b->iota(kFlat, n, DType::u32);
    if (first != 0) low = low + static_cast<double>(first);
    return {b->constant(0, DType::u32), unflatten(low, kFlat, axes)};
  }
  Value block = b->iota(kFlat, n, DType::i64);
  if (first != 0) block = block + static_cast<double>(first);
  return {unflatten(block.shiftRight(32).cast(DType::u32), kFlat, axes), unflatten(block.cast(DType::u32), kFlat, axes)};
}

// Both words of block `first + i` under the key for each sample i of
// `axes`: the key's stream axes, then `axes`. One encryption gives both
// (the CPU emitters compute the pair once).
Words blocksOf(const Value& key, const std::vector<Axis>& axes, int64_t first) {
  const Words c = countersOf(key.builder(), axes, first);
  const Words w = encrypt(wordOf(key, 0), wordOf(key, 1), c.x0, c.x1);
  std::vector<std::string> order = namesOf(streamAxes(key));
  for (const Axis& a : axes) order.push_back(a.name);
  return {ordered(w.x0, order), ordered(w.x1, order)};
}

// The checks every sampler shares; ok when `key` may be sampled over `axes`.
absl::Status checkSampler(std::string_view op, const Value& key, const std::vector<Axis>& axes) {
  if (absl::Status s = checkWords(op, "key", key); !s.ok()) return s;
  if (absl::Status s = checkSampleAxes(op, key, axes); !s.ok()) return s;
  return checkAxes(op, DType::u32, axes, kMaxValueBytes);
}

// Uniform [0, 1) from one block's words, exact in the dtype so every target
// computes the same value: f32 from 24 bits of w0, f64 from 27 bits of w0
// and 26 of w1.
Value unitInterval(const Words& w, DType dtype) {
  if (dtype == DType::f32) return w.x0.shiftRight(8).cast(DType::f32) * std::ldexp(1.0, -24);
  const Value hi = w.x0.shiftRight(5).cast(DType::f64), lo = w.x1.shiftRight(6).cast(DType::f64);
  return (hi * std::ldexp(1.0, 26) + lo) * std::ldexp(1.0, -53);
}

Value refuse(const Value& key, absl::Status s) {
  Builder* b = key.builder();
  return b == nullptr ? Value() : b->poison(std::move(s));
}

absl::Status checkFloat(std::string_view op, DType dtype) {
  if (isFloating(dtype)) return absl::OkStatus();
  return makeError(ErrorKind::kUnsupportedDType, strCat(op, ": samples are f32 or f64, not ", dtypeName(dtype)));
}

}  // namespace

Value threefry2x32(const Value& key, const Value& counter) {
  Builder* b = ownerOf({key, counter});
  if (b == nullptr) return Value();
  if (!key.valid() || !counter.valid()) return key.add(counter);  // records the operand's error
  for (auto [what, v] : {std::pair{"key", key}, std::pair{"counter", counter}}) {
    if (absl::Status s = checkWords("threefry2x32", what, v); !s.ok()) return b->poison(std::move(s));
  }
  const Words w = encrypt(wordOf(key, 0), wordOf(key, 1), wordOf(counter, 0), wordOf(counter, 1));
  std::vector<std::string> order;
  for (const Axis& a : counter.axes()) {
    if (a.name != "word") order.push_back(a.name);
  }
  const Value words = stack(w.x0, w.x1, order, "word");
  std::vector<std::string> final_order = namesOf(counter.axes());
  return ordered(words, final_order);
}

Value randomKey(Builder& b, uint64_t seed) {
  const Value hi = b.constant(static_cast<double>(seed >> 32), DType::u32);
  const Value lo = b.constant(static_cast<double>(seed & 0xffffffffu), DType::u32);
  return concat("word", {hi.broadcast("word", 1), lo.broadcast("word", 1)});
}

Value randomSplit(const Value& key, std::string_view axis, int64_t count) {
  if (key.builder() == nullptr) return Value();
  if (!key.valid()) return key.add(key);
  const std::vector<Axis> axes = {Axis{std::string(axis), count}};
  if (absl::Status s = checkSampler("randomSplit", key, axes); !s.ok()) return refuse(key, std::move(s));
  std::vector<std::string> order = {std::string(axis)};
  for (const Axis& a : streamAxes(key)) order.push_back(a.name);
  const Words w = blocksOf(key, axes, 0);
  return stack(w.x0, w.x1, order, "word");
}

Value randomFoldIn(const Value& key, const Value& data) {
  Builder* b = ownerOf({key, data});
  if (b == nullptr) return Value();
  if (!key.valid() || !data.valid()) return key.add(data);
  if (absl::Status s = checkWords("randomFoldIn", "key", key); !s.ok()) return b->poison(std::move(s));
  if (data.dtype() != DType::u32) {
    return b->poison(makeError(ErrorKind::kUnsupportedDType,
                               strCat("randomFoldIn: the data must be u32, got ", dtypeName(data.dtype()))));
  }
  if (hasAxis(data.axes(), "word")) {
    return b->poison(makeError(ErrorKind::kAxisNameCollision,
                               strCat("randomFoldIn: the data ", axesText(data.axes()), " has an axis 'word'")));
  }
  const Words w = encrypt(wordOf(key, 0), wordOf(key, 1), b->constant(0, DType::u32), data);
  std::vector<std::string> order = namesOf(streamAxes(key));
  for (const Axis& a : data.axes()) order.push_back(a.name);
  return stack(w.x0, w.x1, order, "word");
}

Value randomBits(const Value& key, const std::vector<Axis>& axes) {
  if (key.builder() == nullptr) return Value();
  if (!key.valid()) return key.add(key);
  if (absl::Status s = checkSampler("randomBits", key, axes); !s.ok()) return refuse(key, std::move(s));
  return blocksOf(key, axes, 0).x0;
}

Value uniform(const Value& key, const std::vector<Axis>& axes, DType dtype, double lo, double hi) {
  if (key.builder() == nullptr) return Value();
  if (!key.valid()) return key.add(key);
  absl::Status s = checkSampler("uniform", key, axes);
  if (s.ok()) s = checkFloat("uniform", dtype);
  if (s.ok() && !(lo < hi && std::isfinite(lo) && std::isfinite(hi))) {
    s = makeError(ErrorKind::kInvalidArgument, strCat("uniform: bounds [", lo, ", ", hi, ") are empty or not finite"));
  }
  if (!s.ok()) return refuse(key, std::move(s));
  const Value u = unitInterval(blocksOf(key, axes, 0), dtype);
  if (lo == 0 && hi == 1) return u;
  // Rounded into [lo, hi): the largest value below hi at most.
  const double top = dtype == DType::f32 ? std::nextafter(static_cast<float>(hi), -INFINITY) : std::nextafter(hi, -INFINITY);
  // The product rounded to the dtype before the addition on every target:
  // a multiply-add fused into one rounding (x86-64 with FMA contracts
  // add(mul)) would give other bits. f32 rounds through its bits (also in
  // the evaluator, which holds f32 values in doubles); f64, which the
  // evaluator already rounds at each op, through a max with 0 (u * (hi -
  // lo) >= 0), which no emitter fuses across.
  Value scaled = u * (hi - lo);
  scaled = dtype == DType::f32 ? scaled.bitcast(DType::u32).bitcast(DType::f32) : scaled.max(0.0);
  return (scaled + lo).max(lo).min(top);
}

Value normal(const Value& key, const std::vector<Axis>& axes, DType dtype) {
  if (key.builder() == nullptr) return Value();
  if (!key.valid()) return key.add(key);
  absl::Status s = checkSampler("normal", key, axes);
  if (s.ok()) s = checkFloat("normal", dtype);
  if (!s.ok()) return refuse(key, std::move(s));
  // r = sqrt(-2 log(1 - u1)), z = r cos(2 pi u2) (1 - u1 in (0, 1]); u1
  // and u2 from sample i's block (f32), or from blocks i and n + i (f64).
  const Words first = blocksOf(key, axes, 0);
  Value u1, u2;
  if (dtype == DType::f32) {
    u1 = unitInterval(first, dtype);
    u2 = unitInterval(Words{first.x1, first.x0}, dtype);  // from w1
  } else {
    u1 = unitInterval(first, dtype);
    u2 = unitInterval(blocksOf(key, axes, countOf(axes)), dtype);
  }
  const Value r = ((1.0 - u1).log() * -2.0).sqrt();
  return r * (u2 * (2 * std::numbers::pi)).cos();
}

Value bernoulli(const Value& key, double p, const std::vector<Axis>& axes) {
  if (key.builder() == nullptr) return Value();
  if (!key.valid()) return key.add(key);
  absl::Status s = checkSampler("bernoulli", key, axes);
  if (s.ok() && !(p >= 0 && p <= 1)) {
    s = makeError(ErrorKind::kInvalidArgument, strCat("bernoulli: probability ", p, " is outside [0, 1]"));
  }
  if (!s.ok()) return refuse(key, std::move(s));
  return unitInterval(blocksOf(key, axes, 0), DType::f32).lt(static_cast<double>(static_cast<float>(p)));
}

}  // namespace accy::tensor
