#include <algorithm>
#include "bench/references.h"

#include <immintrin.h>

#include <Eigen/Dense>
#include <chrono>
#include <cmath>

namespace accy::bench::ref {

void sinAffineEigen(const float* x, float* y, int64_t n, float a, float b, float c) {
  Eigen::Map<const Eigen::ArrayXf> xs(x, n);
  Eigen::Map<Eigen::ArrayXf> ys(y, n);
  ys = (a * xs + b).sin() * c;
}

void sinAffineLoop(const float* x, float* y, int64_t n, float a, float b, float c) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::sin(a * x[i] + b) * c;
}

void oscillatorLoop(float* x, float* v, int lanes, int64_t steps, float k, float c, float dt) {
  for (int64_t t = 0; t < steps; ++t) {
    for (int l = 0; l < lanes; ++l) {
      v[l] = v[l] - (k * x[l] + c * v[l]) * dt;
      x[l] = x[l] + v[l] * dt;
    }
  }
}

bool hasAvx512() { return __builtin_cpu_supports("avx512f"); }
bool hasAvx2() { return __builtin_cpu_supports("avx2"); }

__attribute__((target("avx512f"))) float sumAvx512(const float* x, int64_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_add_ps(acc0, _mm512_loadu_ps(x + i));
    acc1 = _mm512_add_ps(acc1, _mm512_loadu_ps(x + i + 16));
    acc2 = _mm512_add_ps(acc2, _mm512_loadu_ps(x + i + 32));
    acc3 = _mm512_add_ps(acc3, _mm512_loadu_ps(x + i + 48));
  }
  float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  for (; i < n; ++i) s += x[i];
  return s;
}

__attribute__((target("avx2"))) float sumAvx2(const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(x + i));
    acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(x + i + 8));
    acc2 = _mm256_add_ps(acc2, _mm256_loadu_ps(x + i + 16));
    acc3 = _mm256_add_ps(acc3, _mm256_loadu_ps(x + i + 24));
  }
  const __m256 all = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, all);
  float s = 0;
  for (float l : lanes) s += l;
  for (; i < n; ++i) s += x[i];
  return s;
}

void affineEigen(const float* x, float* y, int64_t n, float a, float b) {
  Eigen::Map<const Eigen::ArrayXf> xs(x, n);
  Eigen::Map<Eigen::ArrayXf> ys(y, n);
  ys = a * xs + b;
}

__attribute__((target("avx512f"))) void affineAvx512(const float* x, float* y, int64_t n, float a, float b,
                                                     bool stream) {
  const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
  int64_t i = 0;
  if (stream) {
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), vb));
    _mm_sfence();
  } else {
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), vb));
  }
  for (; i < n; ++i) y[i] = a * x[i] + b;
}

__attribute__((target("avx2,fma"))) void affineAvx2(const float* x, float* y, int64_t n, float a, float b,
                                                    bool stream) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  int64_t i = 0;
  if (stream) {
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), vb));
    _mm_sfence();
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), vb));
  }
  for (; i < n; ++i) y[i] = a * x[i] + b;
}

void transposeExp(const double* x, double* y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < n; ++i) y[j * n + i] = std::exp(x[i * n + j] * 2.0);
  }
}

void gatherElements(const float* table, int64_t n, const int32_t* idx, float* out, int64_t count) {
  const int32_t hi = static_cast<int32_t>(n - 1);
  for (int64_t t = 0; t < count; ++t) out[t] = table[std::min(std::max(idx[t], 0), hi)] * 2.0f + 1.0f;
}

__attribute__((target("avx2"))) void gatherRowsAvx2(const float* table, const int32_t* rows, float* out,
                                                    int64_t tokens, int64_t features) {
  constexpr int64_t kAhead = 32;
  const int64_t row_bytes = features * 4;
  for (int64_t t = 0; t < tokens; ++t) {
    const char* next = reinterpret_cast<const char*>(table + int64_t{rows[std::min(t + kAhead, tokens - 1)]} * features);
    for (int64_t b = 0; b < row_bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T2);
    _mm_prefetch(next + row_bytes - 1, _MM_HINT_T2);
    const float* src = table + int64_t{rows[t]} * features;
    float* dst = out + t * features;
    int64_t f = 0;
    for (; f < features && (reinterpret_cast<uintptr_t>(dst + f) & 31) != 0; ++f) {
      _mm_stream_si32(reinterpret_cast<int*>(dst + f), reinterpret_cast<const int*>(src)[f]);
    }
    for (; f + 8 <= features; f += 8) _mm256_stream_ps(dst + f, _mm256_loadu_ps(src + f));
    for (; f < features; ++f) _mm_stream_si32(reinterpret_cast<int*>(dst + f), reinterpret_cast<const int*>(src)[f]);
  }
  _mm_sfence();
}

__attribute__((target("avx2"))) void scatterRowsAvx2(float* out, const int32_t* rows, const float* updates,
                                                     int64_t tokens, int64_t features, int64_t vocab, int part,
                                                     int parts, ScatterSplit split) {
  constexpr int64_t kAhead = 32;
  const bool ranges = split == ScatterSplit::kRanges;
  const int64_t lo = ranges ? vocab * part / parts : 0, hi = ranges ? vocab * (part + 1) / parts : vocab;
  const int64_t from = ranges ? 0 : features * part / parts, to = ranges ? features : features * (part + 1) / parts;
  const int64_t bytes = (to - from) * 4;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t ahead = rows[std::min(t + kAhead, tokens - 1)];
    if (ahead >= lo && ahead < hi) {
      const char* next = reinterpret_cast<const char*>(out + ahead * features + from);
      for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(next + b, _MM_HINT_T2);
      _mm_prefetch(next + bytes - 1, _MM_HINT_T2);
    }
    const int64_t r = rows[t];
    if (r < lo || r >= hi) continue;
    float* dst = out + r * features;
    const float* src = updates + t * features;
    int64_t f = from;
    for (; f + 8 <= to; f += 8) _mm256_storeu_ps(dst + f, _mm256_add_ps(_mm256_loadu_ps(dst + f), _mm256_loadu_ps(src + f)));
    for (; f < to; ++f) dst[f] += src[f];
  }
}

TwoThreads::TwoThreads() : worker_([this] { work(); }) {}

TwoThreads::~TwoThreads() {
  stop_.store(true, std::memory_order_release);
  started_.fetch_add(1, std::memory_order_acq_rel);  // wakes a sleeping worker
  started_.notify_one();
  worker_.join();
}

void TwoThreads::run(const std::function<void(int)>& f) {
  job_ = &f;
  const uint64_t call = started_.fetch_add(1, std::memory_order_acq_rel) + 1;
  started_.notify_one();
  f(0);
  while (finished_.load(std::memory_order_acquire) != call) _mm_pause();
}

void TwoThreads::work() {
  uint64_t seen = 0;
  while (true) {
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    for (int n = 1; started_.load(std::memory_order_acquire) == seen; ++n) {
      _mm_pause();
      if (n % 64 == 0 && std::chrono::steady_clock::now() > spin_until) {
        started_.wait(seen, std::memory_order_acquire);
      }
    }
    if (stop_.load(std::memory_order_acquire)) return;
    ++seen;
    (*job_)(1);
    finished_.store(seen, std::memory_order_release);
  }
}

void matmulEigen(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const Mat> am(a, m, k), bm(b, k, n);
  Eigen::Map<Mat> cm(c, m, n);
  cm.noalias() = am * bm;
}

void biasTanhEigen(float* c, const float* bias, int64_t row_begin, int64_t row_end, int64_t n) {
  // Row by row over contiguous arrays: Eigen vectorizes tanh there, while
  // a rowwise broadcast over the whole matrix runs 12x slower.
  Eigen::Map<const Eigen::ArrayXf> b(bias, n);
  for (int64_t i = row_begin; i < row_end; ++i) {
    Eigen::Map<Eigen::ArrayXf> row(c + i * n, n);
    row = (row + b).tanh();
  }
}

}  // namespace accy::bench::ref
