#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace accy::cpu {
namespace {

void relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_cv_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
}

ThreadPool& ThreadPool::shared() {
  static ThreadPool* pool = new ThreadPool(
      std::max(0, static_cast<int>(std::thread::hardware_concurrency()) - 1));
  return *pool;
}

void ThreadPool::runClaims(uint32_t generation) {
  // The job and count of `generation` stay in place while any of its
  // indices is unclaimed: the caller publishes the next generation only
  // after every index of this one has finished.
  const std::function<void(int64_t)>* job = job_.load(std::memory_order_acquire);
  const int64_t count = count_.load(std::memory_order_acquire);
  uint64_t t = ticket_.load(std::memory_order_acquire);
  while (generationOf(t) == generation && indexOf(t) < count) {
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
    (*job)(indexOf(t));
    finished_.fetch_add(1, std::memory_order_release);
    t = ticket_.load(std::memory_order_acquire);
  }
}

void ThreadPool::workerLoop() {
  uint32_t seen = 0;
  while (true) {
    // Spin for a new generation, then sleep.
    uint32_t generation = generationOf(ticket_.load(std::memory_order_acquire));
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    for (int n = 0; generation == seen && !stop_.load(std::memory_order_relaxed); ++n) {
      relax();
      generation = generationOf(ticket_.load(std::memory_order_acquire));
      if (generation == seen && n % 64 == 63 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1);
        work_cv_.wait(lock, [&] { return stop_.load() || generationOf(ticket_.load()) != seen; });
        sleepers_.fetch_sub(1);
        generation = generationOf(ticket_.load(std::memory_order_acquire));
      }
    }
    if (stop_.load()) return;
    seen = generation;
    // At most worker_limit_ workers take part in a generation. (A worker
    // that read a generation just before the next was published may count
    // against the next one too; that only lowers its parallelism.)
    if (joined_.fetch_add(1, std::memory_order_acq_rel) >= worker_limit_.load(std::memory_order_acquire)) continue;
    runClaims(generation);
  }
}

void ThreadPool::parallelFor(int64_t count, int parallelism, const std::function<void(int64_t)>& fn) {
  if (count <= 0) return;
  if (parallelism <= 1 || workers_.empty() || count == 1 || count > std::numeric_limits<uint32_t>::max()) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  const uint32_t generation = generationOf(ticket_.load()) + 1;
  job_.store(&fn, std::memory_order_release);
  count_.store(count, std::memory_order_release);
  finished_.store(0, std::memory_order_release);
  joined_.store(0, std::memory_order_release);
  worker_limit_.store(std::min<int>(parallelism - 1, static_cast<int>(workers_.size())),
                      std::memory_order_release);
  ticket_.store(uint64_t{generation} << 32);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    work_cv_.notify_all();
  }
  // The calling thread works too, then waits for the indices workers hold.
  runClaims(generation);
  for (int n = 0; finished_.load(std::memory_order_acquire) != count; ++n) {
    if (n < 4096) {
      relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace accy::cpu
