// The reference implementations the CPU benchmarks compare Accy with, built
// at their best in a library of their own (-O3 -march=native, see
// bench/BUILD.bazel): Eigen expressions, intrinsics loops and plain loops.
// OpenBLAS is called directly by the benchmark (its kernel is chosen for
// the CPU by tools/bench.sh).
#ifndef ACCY_BENCH_REFERENCES_H_
#define ACCY_BENCH_REFERENCES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace accy::bench::ref {

// y = sin(a*x + b) * c over n elements.
void sinAffineEigen(const float* x, float* y, int64_t n, float a, float b, float c);
void sinAffineLoop(const float* x, float* y, int64_t n, float a, float b, float c);

// A damped oscillator over `lanes` independent lanes, `steps` symplectic
// Euler steps in place: v -= (k*x + c*v)*dt; x += v*dt (the loop benchmark's
// hand-written form).
void oscillatorLoop(float* x, float* v, int lanes, int64_t steps, float k, float c, float dt);

// Sums of n floats with four independent vector accumulators; the AVX-512
// one needs avx512f (check hasAvx512()), the AVX2 one avx2.
bool hasAvx512();
bool hasAvx2();
float sumAvx512(const float* x, int64_t n);
float sumAvx2(const float* x, int64_t n);

// y = a*x + b over n elements: Eigen, and AVX-512 and AVX2 loops with
// plain or non-temporal (`stream`, y 64-byte aligned) stores.
void affineEigen(const float* x, float* y, int64_t n, float a, float b);
void affineAvx512(const float* x, float* y, int64_t n, float a, float b, bool stream);
void affineAvx2(const float* x, float* y, int64_t n, float a, float b, bool stream);

// out[t, :] = table[rows[t], :] for t < tokens, rows of `features` floats:
// the best hand-written gather this project found (the next rows
// prefetched 16 ahead, streaming stores once `out` is 32-byte aligned).
void gatherRowsAvx2(const float* table, const int32_t* rows, float* out, int64_t tokens, int64_t features);
// The embedding gradient by hand: out[rows[t], :] += updates[t, :] for
// t < tokens in order, rows outside [0, vocab) dropped, split for thread
// `part` of `parts` in one of two ways that both keep each element's
// additions in token order. kColumns: every token, this part's columns of
// its row (the split Accy's CPU scatter uses). kRanges: every token whose row
// falls in this part's range of rows, the whole row. Each prefetches the
// row (part) it will write 32 tokens ahead, kRanges only rows of its range.
enum class ScatterSplit { kColumns, kRanges };
void scatterRowsAvx2(float* out, const int32_t* rows, const float* updates, int64_t tokens, int64_t features,
                     int64_t vocab, int part, int parts, ScatterSplit split);
// out[t] = table[clamp(idx[t], 0, n - 1)] * 2 + 1 as a plain loop (what GCC
// makes of it at -O3 -march=native).
void gatherElements(const float* table, int64_t n, const int32_t* idx, float* out, int64_t count);
// y[j, i] = exp(2 x[i, j]) over an n x n f64 matrix, the plain loop.
void transposeExp(const double* x, double* y, int64_t n);

// Runs f(0) on the calling thread and f(1) on a second thread that lives as
// long as the object, returning when both are done: the references' two-
// thread form, with no thread started per call. Between calls the second
// thread spins, then sleeps once idle for kSpinMicros: the policy of Accy's
// own pool (backends/cpu/thread_pool.h), so that where the two alternate
// (runAlternating) each one's idle worker takes a core from the other for
// as long.
class TwoThreads {
 public:
  static constexpr int64_t kSpinMicros = 200;

  TwoThreads();
  ~TwoThreads();
  TwoThreads(const TwoThreads&) = delete;
  TwoThreads& operator=(const TwoThreads&) = delete;
  void run(const std::function<void(int)>& f);

 private:
  void work();
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> started_{0}, finished_{0};
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

// c[m x n] = a[m x k] * b[k x n], row-major, on one thread.
void matmulEigen(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

// c[i, j] = tanh(c[i, j] + bias[j]) for rows [row_begin, row_end) of a
// row-major m x n matrix: the separate pass after an sgemm, with Eigen's
// vectorized tanh.
void biasTanhEigen(float* c, const float* bias, int64_t row_begin, int64_t row_end, int64_t n);

}  // namespace accy::bench::ref

#endif  // ACCY_BENCH_REFERENCES_H_
