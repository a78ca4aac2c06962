// Writes the seed corpus of the wire fuzzer (tools/fuzz/corpus/):
//
//   bazel run //tools:make_corpus -- "$PWD/tools/fuzz/corpus"
//
// Valid programs recorded through the public API, covering every op
// category (tone_*.wire, ops_*.wire), and a few invalid encodings
// (bad_*.wire) so the fuzzer starts next to each early exit of the decoder.
// The outputs are checked in; rerun when the wire format changes. Files
// that other tools add to the directory (crash reproducers) are left alone.
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "base/files.h"

namespace tensor = accy::tensor;
using tensor::Builder;
using tensor::DType;
using tensor::Value;

namespace {

bool write(const std::string& path, const std::string& bytes) {
  if (const absl::Status st = accy::files::writeFile(path, bytes); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return false;
  }
  std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
  return true;
}

template <typename F>
bool emit(const std::string& dir, const std::string& name, std::vector<tensor::Spec> inputs, F&& fn,
          std::string* bytes_out = nullptr) {
  absl::StatusOr<tensor::Program> program = tensor::define(name, inputs, std::forward<F>(fn));
  if (!program.ok()) {
    std::fprintf(stderr, "%s: recording failed: %s\n", name.c_str(), program.status().ToString().c_str());
    return false;
  }
  const std::string bytes = accy::wire::encode(*program);
  if (bytes_out != nullptr) *bytes_out = bytes;
  return write(dir + "/" + name + ".wire", bytes);
}

tensor::Spec f32(std::vector<tensor::Axis> axes) { return tensor::spec(DType::f32, std::move(axes)); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  bool ok = true;
  std::string tone_bytes;

  // The tone programs: one guess and eight.
  ok &= emit(dir, "tone_mismatch", tone::specs(), tone::mismatch, &tone_bytes);
  ok &= emit(dir, "tone_mismatch8", tone::specs({{"guess", 8}}), tone::mismatch);

  // Every unary op, chained, and two reductions.
  ok &= emit(dir, "ops_unary", {f32({{"n", 8}})}, [](Builder&, std::span<const Value> a) {
    const Value x = a[0];
    const Value y = x.neg().abs().add(1.0).log().exp().sqrt().tanh().sigmoid().cos().sin();
    return std::vector<Value>{y, y.max("n"), y.min("n")};
  });

  // Binary ops, comparisons, where and casts on two 2-d inputs.
  ok &= emit(dir, "ops_binary", {f32({{"i", 4}, {"j", 3}}), f32({{"j", 3}})}, [](Builder&, std::span<const Value> a) {
    const Value x = a[0], y = a[1];
    const Value m = x.max(y).min(x.mul(2.0)).pow(y.abs().add(0.5)).div(y.add(3.0)).sub(x);
    const Value pick = x.lt(y).where(m, x.add(y));
    const Value flags = x.ge(y).where(x.le(1.0).cast(DType::f32), x.gt(y).cast(DType::f32));
    return std::vector<Value>{pick.add(flags), x.eq(y).cast(DType::i32).sum("i"), x.ne(y)};
  });

  // Integer arithmetic on iota: wraparound, division (by zero too), casts.
  ok &= emit(dir, "ops_integer", {tensor::spec(DType::i32, {{"k", 6}})}, [](Builder& b, std::span<const Value> a) {
    const Value i = b.iota("k", 6, DType::i32);
    const Value q = a[0].mul(i).add(7.0).div(i.sub(2.0));
    const Value l = q.cast(DType::i64).mul(1e12).prod("k");
    return std::vector<Value>{q.max("k"), q.min("k"), l, q.abs().neg().cast(DType::f64).mean("k")};
  });

  // Matrix product and a mean over the result.
  ok &= emit(dir, "ops_dot", {f32({{"i", 4}, {"k", 3}}), f32({{"k", 3}, {"j", 5}})},
             [](Builder&, std::span<const Value> a) {
               const Value c = a[0].dot(a[1], "k");
               return std::vector<Value>{c, c.mean("j")};
             });

  // Layout ops: transpose, rename, broadcast, split, merge, slice, concat.
  ok &= emit(dir, "ops_layout", {f32({{"r", 4}, {"c", 6}})}, [](Builder&, std::span<const Value> a) {
    const Value x = a[0];
    const Value t = x.transpose({"c", "r"}).rename("r", "row");
    const Value s = t.split("c", "co", "ci", 3).merge({"ci", "co"}, "c2");
    const Value sl = s.slice("c2", 1, 6, 2);
    const Value cat = sl.concat("c2", {s.slice("c2", 0, 2)});
    return std::vector<Value>{cat.broadcast("extra", 2), x.sum({"r", "c"})};
  });

  // f64, i64 and bool inputs together.
  ok &= emit(dir, "ops_mixed",
             {tensor::spec(DType::f64, {{"n", 5}}), tensor::spec(DType::i64, {{"n", 5}}),
              tensor::spec(DType::bool_, {{"n", 5}})},
             [](Builder& b, std::span<const Value> a) {
               const Value f = a[0], i = a[1], m = a[2];
               const Value c = b.constant(0.25, DType::f64);
               const Value g = m.where(f.mul(c), i.cast(DType::f64));
               return std::vector<Value>{g.sum("n"), i.add(3.0).div(i).cast(DType::bool_), g.gt(f)};
             });

  // Reproducers of bugs the fuzzer found (docs/FUZZING.md), minimized by
  // hand: kept so every later run and the replay test go through them.
  // An i64 constant of 2^63: the emitter's static_cast<int64_t> of the
  // saturated value was undefined behaviour (UBSan: kernel_emitter.cc;
  // fixed in 2982706).
  // Indexing by data and windows: take with out-of-range indices read from
  // data, scatter_add, pad and window (mutations move the indices around).
  ok &= emit(dir, "indexing", {f32({{"v", 6}, {"f", 3}}), tensor::spec(DType::i32, {{"t", 5}})},
             [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
               tensor::Value g = take(a[0], "v", a[1]);
               return {scatterAdd(a[0], "v", a[1], g * 2), a[0].pad("v", 2, 1).window("v", "k", 3, 2).sum("k"),
                       a[0].argmax("v")};
             });
  // Loops (wire 1.4): a scan over xs with a capture, a while_loop nested in
  // its body, ys; mutations reach the bodies' nodes and the loop attributes.
  ok &= emit(dir, "loops", {f32({{"n", 3}}), f32({{"step", 4}, {"n", 3}})},
             [](Builder& b, std::span<const Value> a) -> std::vector<Value> {
               const Value w = a[0];
               tensor::ScanResult r = tensor::scan(
                   b, {.length = 4}, {a[0]}, {a[1]},
                   [&](Builder& sb, std::span<const Value> c, std::span<const Value> x) -> absl::StatusOr<tensor::ScanStep> {
                     std::vector<Value> inner = tensor::whileLoop(
                         sb, {c[0]},
                         [](Builder&, std::span<const Value> d) -> absl::StatusOr<Value> { return d[0].sum("n").lt(50.0f); },
                         [&](Builder&, std::span<const Value> d) -> absl::StatusOr<std::vector<Value>> {
                           return std::vector<Value>{d[0] * 2.0f + w.abs()};
                         });
                     return tensor::ScanStep{{inner[0] + x[0]}, {inner[0].sum("n")}};
                   });
               return {r.carry[0], r.ys[0]};
             });
  ok &= emit(dir, "regress_i64_constant_2p63", {tensor::spec(DType::i64, {})},
             [](Builder& b, std::span<const Value> a) { return a[0].add(b.constant(9223372036854775807.0, DType::i64)); });

  // The same through an ordinary program: the identity of an i64 minimum is
  // INT64_MAX, held as a double (2^63); the reduction's initial store hit
  // the cast, and on x86-64 every result came out INT64_MIN.
  ok &= emit(dir, "regress_i64_reduce_min", {tensor::spec(DType::i64, {{"r", 4}, {"c", 3}})},
             [](Builder&, std::span<const Value> a) { return a[0].min("r"); });

  // A shift by a NaN i64 constant (found by the fuzzer): the count reached
  // the emitter as a NaN double, cast to int (UBSan: undefined behaviour).
  // Lowering now gives a constant the value the evaluator gives it (NaN -> 0).
  ok &= emit(dir, "regress_shift_by_nan_constant", {tensor::spec(DType::i64, {{"z", 1000}})},
             [](Builder& b, std::span<const Value> a) {
               return a[0].shiftLeft(b.constant(std::numeric_limits<double>::quiet_NaN(), DType::i64));
             });

  // Invalid encodings next to each early exit of the decoder.
  ok &= write(dir + "/bad_truncated_header.wire", std::string("ACCY\x01", 5));
  ok &= write(dir + "/bad_magic.wire", "ACCZ" + tone_bytes.substr(4));
  std::string v2 = tone_bytes;
  v2[4] = 2;
  ok &= write(dir + "/bad_version.wire", v2);
  ok &= write(dir + "/bad_truncated_message.wire", tone_bytes.substr(0, tone_bytes.size() / 2));
  std::string minor = tone_bytes;
  minor[6] = 7;  // a minor version newer than the reader's: UnsupportedVersion
  ok &= write(dir + "/minor_version.wire", minor);
  return ok ? 0 : 1;
}
