// A small convolutional network trained on scikit-learn's handwritten
// digits (8 x 8 images, 10 classes), as Accy programs: one program runs a
// whole epoch, a scan over minibatches drawn with the random-number API,
// the loss's gradient called inside the body and the SGD update as the
// carry.
//
//   network: 3x3 convolution (padding 1) to `channels` with bias, ReLU,
//            2x2 max pooling, a dense layer to 10 classes with bias,
//            softmax cross-entropy through take (mean over the batch)
//   epoch:   inputs x [n, c=1, h=8, w=8] f32 (pixels / 16), y [n] i32,
//            w1 [o, c, kh, kw], b1 [o], w2 [h=4, w=4, o, k=10], b2 [k],
//            key u32[word=2]; outputs the four weights after the epoch and
//            the loss of every step [step]
//   predict: inputs x [n, c, h, w] and the weights; output the class [n] (i32)
//
// docs/EXAMPLES.md ("digits") records the choices: the split, minibatches
// drawn with replacement, the learning rate.
#ifndef ACCY_EXAMPLES_DIGITS_DIGITS_H_
#define ACCY_EXAMPLES_DIGITS_DIGITS_H_

#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include "accy/accy.h"
#include "examples/data/datasets.h"

namespace digits {

namespace tensor = accy::tensor;
using tensor::DType;

struct Options {
  int64_t channels = 16;
  int64_t batch = 32;
  int64_t steps = 45;     // minibatches an epoch (about the training set's size / batch)
  double rate = 0.1;      // SGD's learning rate
};

inline std::vector<tensor::Spec> weightSpecs(const Options& o) {
  return {tensor::spec(DType::f32, {{"o", o.channels}, {"c", 1}, {"kh", 3}, {"kw", 3}}),
          tensor::spec(DType::f32, {{"o", o.channels}}),
          tensor::spec(DType::f32, {{"h", 4}, {"w", 4}, {"o", o.channels}, {"k", 10}}),
          tensor::spec(DType::f32, {{"k", 10}})};
}

inline tensor::Spec imageSpec(std::string_view batch_axis, int64_t n) {
  return tensor::spec(DType::f32, {{std::string(batch_axis), n}, {"c", 1}, {"h", 8}, {"w", 8}});
}

// The class scores [batch, k] of images x [batch, c, h, w].
inline tensor::Value logits(const tensor::Value& x, std::span<const tensor::Value> w) {
  const tensor::Value windows = x.pad("h", 1, 1).pad("w", 1, 1).window("h", "kh", 3).window("w", "kw", 3);
  const tensor::Value h = (dot(windows, w[0], {"c", "kh", "kw"}) + w[1]).max(0.0);
  const tensor::Value pooled = h.window("h", "ph", 2, 2).window("w", "pw", 2, 2).max({"ph", "pw"});
  return dot(pooled, w[2], {"h", "w", "o"}) + w[3];
}

// The mean softmax cross-entropy of a minibatch: inputs x [b, c, h, w],
// labels [b] (i32), then the four weights.
inline absl::StatusOr<tensor::Function> loss(const Options& o) {
  std::vector<tensor::Spec> specs = {imageSpec("b", o.batch), tensor::spec(DType::i32, {{"b", o.batch}})};
  for (const tensor::Spec& s : weightSpecs(o)) specs.push_back(s);
  return tensor::Function::define("digits_loss", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    const tensor::Value z = logits(v[0], v.subspan(2));
    const tensor::Value top = z.max("k");
    const tensor::Value lse = (z - top).exp().sum("k").log() + top;
    return (lse - take(z, "k", v[1])).mean("b");
  });
}

// One epoch over a training set of `n` images.
inline absl::StatusOr<tensor::Program> epoch(const Options& o, int64_t n) {
  absl::StatusOr<tensor::Function> l = loss(o);
  if (!l.ok()) return l.status();
  absl::StatusOr<tensor::Function> vg = l->valueAndGrad({.wrt = {2, 3, 4, 5}});
  if (!vg.ok()) return vg.status();
  std::vector<tensor::Spec> specs = {imageSpec("n", n), tensor::spec(DType::i32, {{"n", n}})};
  for (const tensor::Spec& s : weightSpecs(o)) specs.push_back(s);
  specs.push_back(tensor::spec(DType::u32, {{"word", 2}}));
  const tensor::Function step = *vg;
  return tensor::define("digits_epoch", specs, [&](tensor::Builder& b, std::span<const tensor::Value> a) {
    const tensor::Value x = a[0], y = a[1], key = a[6];
    std::vector<tensor::Value> init(a.begin() + 2, a.begin() + 6);
    init.push_back(b.constant(0, DType::u32));
    const tensor::ScanResult r = tensor::scan(
        b, {.axis = "step", .length = o.steps}, init, {},
        [&](tensor::Builder& b, std::span<const tensor::Value> c,
            std::span<const tensor::Value>) -> absl::StatusOr<tensor::ScanStep> {
          // A minibatch of `batch` images drawn uniformly, with
          // replacement, from the step's key.
          const tensor::Value u = tensor::uniform(tensor::randomFoldIn(key, c[4]), {{"b", o.batch}}, DType::f32);
          const tensor::Value pick = (u * static_cast<double>(n)).floor().cast(DType::i32);
          std::vector<tensor::Value> args = {take(x, "n", pick), take(y, "n", pick)};
          args.insert(args.end(), c.begin(), c.begin() + 4);
          const std::vector<tensor::Value> out = step.call(b, args);  // the loss, then the four gradients
          std::vector<tensor::Value> next;
          for (int k = 0; k < 4; ++k) next.push_back(c[k] - out[1 + k] * o.rate);
          next.push_back(c[4] + 1);
          return tensor::ScanStep{next, {out[0]}};
        });
    std::vector<tensor::Value> out(r.carry.begin(), r.carry.begin() + 4);
    out.push_back(r.ys[0]);
    return out;
  });
}

// The predicted class of each of `n` images.
inline absl::StatusOr<tensor::Program> predict(const Options& o, int64_t n) {
  std::vector<tensor::Spec> specs = {imageSpec("n", n)};
  for (const tensor::Spec& s : weightSpecs(o)) specs.push_back(s);
  return tensor::define("digits_predict", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return logits(a[0], a.subspan(1)).argmax("k");
  });
}

// The data split in two, deterministically: every fifth image of a fixed
// shuffle held out (359 of 1,797), the rest (1,438) for training.
struct Split {
  int64_t train = 0, test = 0;
  std::vector<float> train_x, test_x;  // [n, 1, 8, 8], pixels / 16
  std::vector<int32_t> train_y, test_y;
};

inline absl::StatusOr<Split> load() {
  absl::StatusOr<datasets::Table> t = datasets::readDigits();
  if (!t.ok()) return t.status();
  std::vector<int64_t> order(t->rows);
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = 2026;
  for (int64_t i = t->rows - 1; i > 0; --i) {  // Fisher-Yates with a 64-bit LCG
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(order[i], order[(state >> 33) % static_cast<uint64_t>(i + 1)]);
  }
  Split s;
  for (int64_t k = 0; k < t->rows; ++k) {
    const int64_t r = order[k];
    const bool held_out = k % 5 == 4;
    auto& x = held_out ? s.test_x : s.train_x;
    for (int64_t p = 0; p < 64; ++p) x.push_back(static_cast<float>(t->x[r * 64 + p] / 16.0));
    (held_out ? s.test_y : s.train_y).push_back(t->label[r]);
    ++(held_out ? s.test : s.train);
  }
  return s;
}

// Starting weights: uniform in +-sqrt(6 / fan-in) (He), biases 0, from a
// fixed generator.
struct Weights {
  std::vector<float> w1, b1, w2, b2;
  std::vector<std::span<const std::byte>> inputs() const {
    return {accy::bytes(w1), accy::bytes(b1), accy::bytes(w2), accy::bytes(b2)};
  }
  std::vector<std::span<std::byte>> outputs() {
    return {accy::writableBytes(w1), accy::writableBytes(b1), accy::writableBytes(w2), accy::writableBytes(b2)};
  }
};

inline Weights initial(const Options& o, uint64_t seed = 1) {
  uint64_t state = seed;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) * 0x1.0p-53 * 2 - 1;
  };
  Weights w;
  const double a1 = std::sqrt(6.0 / 9), a2 = std::sqrt(6.0 / static_cast<double>(16 * o.channels));
  for (int64_t i = 0; i < o.channels * 9; ++i) w.w1.push_back(static_cast<float>(a1 * next()));
  w.b1.assign(o.channels, 0.0f);
  for (int64_t i = 0; i < 16 * o.channels * 10; ++i) w.w2.push_back(static_cast<float>(a2 * next()));
  w.b2.assign(10, 0.0f);
  return w;
}

// The epoch program's buffers: the training images and labels, the
// weights `w`, the epoch's key (inputs); the weights after it into `next`
// and each step's loss into `losses` (outputs).
struct EpochBuffers {
  std::vector<std::span<const std::byte>> inputs;
  std::vector<std::span<std::byte>> outputs;
};

inline EpochBuffers epochBuffers(const Split& data, const Weights& w, std::span<const uint32_t> key, Weights& next,
                                 std::vector<float>& losses) {
  EpochBuffers b{{accy::bytes(data.train_x), accy::bytes(data.train_y)}, next.outputs()};
  for (auto in : w.inputs()) b.inputs.push_back(in);
  b.inputs.push_back(accy::bytes(key));
  b.outputs.push_back(accy::writableBytes(losses));
  return b;
}

// The fraction of held-out images the predict program's `predicted`
// classes get right.
inline double heldOutAccuracy(const Split& data, std::span<const int32_t> predicted) {
  int64_t right = 0;
  for (int64_t i = 0; i < data.test; ++i) right += predicted[i] == data.test_y[i];
  return static_cast<double>(right) / static_cast<double>(data.test);
}

}  // namespace digits

#endif  // ACCY_EXAMPLES_DIGITS_DIGITS_H_
