// The four data sets of 2^24 f32 values the sums of every CPU target are
// held to PyTorch's accuracy on (docs/MATH_ACCURACY.md, "Sums"), and
// PyTorch 1.13's relative error on each: bench/sum_accuracy.py makes the same
// values from the same hash and measures PyTorch (torch.sum, 1 and 2
// threads); the bar is the smaller of the two. The same values as kSumRows
// rows summed along the row have bars of their own (the largest error
// relative to the largest row; PyTorch's sum(dim=1), the same at 1 and 2
// threads).
#ifndef ACCY_TESTS_SUM_DATA_H_
#define ACCY_TESTS_SUM_DATA_H_

#include <cmath>
#include <cstdint>
#include <vector>

namespace accy::testing {

inline constexpr int64_t kSumValues = int64_t{1} << 24;
inline constexpr int64_t kSumRows = 8192;

inline uint32_t sumHash(uint32_t i, uint32_t salt) {
  uint32_t x = i * 2654435761u + salt;
  x ^= x >> 16;
  x *= 0x45D9F3Bu;
  x ^= x >> 16;
  return x;
}

struct SumData {
  const char* name;
  double pytorch;             // PyTorch's relative error, the bar
  double pytorch_rows;        // PyTorch's on the rows
  std::vector<float> values;  // kSumValues of them
  double exact;               // their sum in double
};

// `0.1` every value; `uniform` in [0, 1); `alternating` those with signs
// + - + -; `mixed` those times 10^k, k from -3 to 3.
inline std::vector<SumData> sumDataSets() {
  std::vector<SumData> sets = {{"0.1", 5.22e-07, 1.49012e-07, {}, 0},
                               {"uniform", 8.53e-08, 1.62736e-07, {}, 0},
                               {"alternating", 1.33e-03, 1.1565e-06, {}, 0},
                               {"mixed", 3.4e-08, 1.71325e-07, {}, 0}};
  for (SumData& s : sets) s.values.resize(kSumValues);
  for (int64_t i = 0; i < kSumValues; ++i) {
    const uint32_t k = static_cast<uint32_t>(i);
    const float unit = static_cast<float>(sumHash(k, 1) >> 8) * 0x1p-24f;
    sets[0].values[i] = 0.1f;
    sets[1].values[i] = unit;
    sets[2].values[i] = (k % 2 == 1 ? -1.0f : 1.0f) * unit;
    sets[3].values[i] = unit * static_cast<float>(std::pow(10.0, static_cast<int>(sumHash(k, 2) % 7) - 3));
  }
  for (SumData& s : sets) {
    for (float v : s.values) s.exact += v;
  }
  return sets;
}

}  // namespace accy::testing

#endif  // ACCY_TESTS_SUM_DATA_H_
