#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "base/cpus.h"

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

ThreadPool::ThreadPool(int threads) : cursors_(new std::atomic<uint64_t>[threads + 1]) {
  for (int i = 0; i <= threads; ++i) cursors_[i].store(0);
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { workerLoop(i + 1); });
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
  // The CPUs this process may use (its affinity mask and CPU quota), not
  // every CPU online: workers beyond those only take turns with the others.
  static ThreadPool* pool = new ThreadPool(usableCpus() - 1);
  return *pool;
}

void ThreadPool::runClaims(uint64_t ticket, int participant) {
  const uint32_t generation = generationOf(ticket);
  const std::function<void(int64_t)>* job = job_.load(std::memory_order_acquire);
  const int64_t count = count_.load(std::memory_order_acquire);
  const int parts = parts_.load(std::memory_order_acquire);
  // The caller marks the ticket before it rewrites any of these, so if one
  // of them is already a newer job's, the ticket has moved on too. Then
  // this job is over (the caller writes a new job only after every index of
  // the last one finished), and the fields must not be used: read against
  // this job's cursors, a newer count would claim indices past its blocks.
  if (ticket_.load(std::memory_order_acquire) != ticket) return;
  // While the ticket stays, the job, count and blocks stay in place; once
  // it moves, every claim below fails on the cursors' generation.
  for (int n = 0; n < parts; ++n) {
    const int b = (participant + n) % parts;
    const int64_t end = blockStart(count, parts, b + 1);
    std::atomic<uint64_t>& cursor = cursors_[b];
    uint64_t t = cursor.load(std::memory_order_acquire);
    while (generationOf(t) == generation && indexOf(t) < end) {
      if (!cursor.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      (*job)(indexOf(t));
      finished_.fetch_add(1, std::memory_order_release);
      t = cursor.load(std::memory_order_acquire);
    }
    if (generationOf(t) != generation) return;  // a newer job: this one is done
  }
}

void ThreadPool::workerLoop(int participant) {
  uint32_t seen = 0;
  while (true) {
    // Spin for a new job (a ticket of a new generation, its job written),
    // then sleep.
    uint64_t ticket = ticket_.load(std::memory_order_acquire);
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
    for (int n = 0; (generationOf(ticket) == seen || (ticket & kWriting) != 0) && !stop_.load(std::memory_order_relaxed);
         ++n) {
      relax();
      ticket = ticket_.load(std::memory_order_acquire);
      if (generationOf(ticket) == seen && n % 64 == 63 && std::chrono::steady_clock::now() > spin_until) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1);
        work_cv_.wait(lock, [&] { return stop_.load() || generationOf(ticket_.load()) != seen; });
        sleepers_.fetch_sub(1);
        ticket = ticket_.load(std::memory_order_acquire);
      }
    }
    if (stop_.load()) return;
    seen = generationOf(ticket);
    // Workers 1..parts_ - 1 take part in a job, each starting with its own
    // block (the caller takes the others' leftovers, so a worker that is
    // late or asleep holds nothing up). parts_ may already be a newer
    // job's: a worker that wrongly joins finds the ticket moved, one that
    // wrongly stays out leaves its block to the caller.
    if (participant >= parts_.load(std::memory_order_acquire)) continue;
    const Hooks* hooks = hooks_.load(std::memory_order_acquire);
    if (hooks != nullptr && hooks->worker_saw_job) hooks->worker_saw_job();
    runClaims(ticket, participant);
    if (hooks != nullptr && hooks->worker_left_job) hooks->worker_left_job();
  }
}

void ThreadPool::parallelFor(int64_t count, int parallelism, const std::function<void(int64_t)>& fn) {
  if (count <= 0) return;
  if (parallelism <= 1 || workers_.empty() || count == 1 || count > std::numeric_limits<uint32_t>::max()) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  // A caller that finds the pool running another caller's loop runs its
  // own on its thread rather than wait for that loop to end: one long
  // launch (another session's, another user's) never holds up the rest.
  std::unique_lock<std::mutex> call(call_mu_, std::try_to_lock);
  if (!call.owns_lock()) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  const uint64_t ticket = uint64_t{generationOf(ticket_.load()) + 1} << 32;
  // The new generation, marked as being written, before any field changes:
  // a worker still reading the last job's fields sees the mark and drops
  // what it read (runClaims).
  ticket_.store(ticket | kWriting);
  job_.store(&fn, std::memory_order_release);
  count_.store(count, std::memory_order_release);
  finished_.store(0, std::memory_order_release);
  // The caller and up to parallelism - 1 workers, no more than indices; each
  // gets a block (the cursors of the others are left empty).
  const int parts = static_cast<int>(workers_.size()) + 1;
  const int used = static_cast<int>(std::min<int64_t>(std::min(parallelism, parts), count));
  parts_.store(used, std::memory_order_release);
  const Hooks* hooks = hooks_.load(std::memory_order_acquire);
  if (hooks != nullptr && hooks->caller_wrote_job) hooks->caller_wrote_job();
  for (int b = 0; b < parts; ++b) {
    const int64_t start = b < used ? blockStart(count, used, b) : count;
    cursors_[b].store(ticket | static_cast<uint64_t>(start), std::memory_order_release);
  }
  ticket_.store(ticket);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    work_cv_.notify_all();
  }
  // The calling thread works too, then waits for the indices workers hold.
  runClaims(ticket, 0);
  for (int n = 0; finished_.load(std::memory_order_acquire) != count; ++n) {
    if (n < 4096) {
      relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace accy::cpu
