// The reference implementations the CPU benchmarks compare Accy with, built
// at their best in a library of their own (-O3 -march=native, see
// bench/BUILD.bazel): Eigen expressions, intrinsics loops and plain loops.
// OpenBLAS is called directly by the benchmark (its kernel is chosen for
// the CPU by tools/bench.sh).
#ifndef ACCY_BENCH_REFERENCES_H_
#define ACCY_BENCH_REFERENCES_H_

#include <cstdint>

namespace accy::bench::ref {

// y = sin(a*x + b) * c over n elements.
void sinAffineEigen(const float* x, float* y, int64_t n, float a, float b, float c);
void sinAffineLoop(const float* x, float* y, int64_t n, float a, float b, float c);

// Sums of n floats with four independent vector accumulators; the AVX-512
// one needs avx512f (check hasAvx512()), the AVX2 one avx2.
bool hasAvx512();
bool hasAvx2();
float sumAvx512(const float* x, int64_t n);
float sumAvx2(const float* x, int64_t n);

// c[m x n] = a[m x k] * b[k x n], row-major, on one thread.
void matmulEigen(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n);

// c[i, j] = tanh(c[i, j] + bias[j]) for rows [row_begin, row_end) of a
// row-major m x n matrix: the separate pass after an sgemm, with Eigen's
// vectorized tanh.
void biasTanhEigen(float* c, const float* bias, int64_t row_begin, int64_t row_end, int64_t n);

}  // namespace accy::bench::ref

#endif  // ACCY_BENCH_REFERENCES_H_
