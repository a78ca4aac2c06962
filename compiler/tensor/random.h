// Counter-based random numbers, recorded from the bit operations: keys,
// Threefry-2x32 (20 rounds, Random123's definition) and the samplers built
// on it. Every function here records ordinary ops (u32 arithmetic, shifts,
// xor, casts), so a program that draws random numbers runs on every target
// and in the evaluator, travels in the wire format, and gives the same bits
// everywhere. docs/SEMANTICS.md ("Random numbers") says how bits become
// each sample.
//
// A key is u32 with an axis `word` of extent 2; its other axes (from
// randomSplit, or a batch) give each entry its own stream. Misuse records a
// sticky error naming the function and the axes: a key that is not u32
// (UnsupportedDType), without `word` (UnknownAxis) or with `word` of
// another extent (AxisExtentMismatch), sample axes that repeat or collide
// with the key's (AxisNameCollision), a probability outside [0, 1] or
// bounds with lo >= hi (InvalidArgument).
#ifndef ACCY_COMPILER_TENSOR_RANDOM_H_
#define ACCY_COMPILER_TENSOR_RANDOM_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "compiler/tensor/builder.h"

namespace accy::tensor {

// Random123's Threefry-2x32 with 20 rounds of `counter` under `key`. The
// counter is u32 with an axis `word` of extent 2 and any others; the result
// has the counter's axes, then the key's axes other than `word` that the
// counter lacks (each key entry encrypts every counter).
Value threefry2x32(const Value& key, const Value& counter);

// u32[word=2] = {seed >> 32, seed & 0xffffffff}.
Value randomKey(Builder& b, uint64_t seed);
// `count` new keys along a new axis `axis`, first: [axis, the key's other
// axes, word].
Value randomSplit(const Value& key, std::string_view axis, int64_t count);
// A key derived from `key` and the u32 `data` (a scalar, or with axes: a
// key per element, after the key's other axes).
Value randomFoldIn(const Value& key, const Value& data);

// Raw u32 bits: the key's other axes, then `axes`.
Value randomBits(const Value& key, const std::vector<Axis>& axes);
// Uniform on [lo, hi) (f32 or f64; never hi itself).
Value uniform(const Value& key, const std::vector<Axis>& axes, DType dtype = DType::f32, double lo = 0,
              double hi = 1);
// Standard normal (f32 or f64), by Box-Muller: one sample from each
// sample's own block of bits (docs/SEMANTICS.md).
Value normal(const Value& key, const std::vector<Axis>& axes, DType dtype = DType::f32);
// True with probability p (a bool).
Value bernoulli(const Value& key, double p, const std::vector<Axis>& axes);

}  // namespace accy::tensor

#endif  // ACCY_COMPILER_TENSOR_RANDOM_H_
