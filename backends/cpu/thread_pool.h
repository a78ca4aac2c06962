// A fixed pool of worker threads for splitting kernel loops.
//
// A launch is often a millisecond or less, so waking a sleeping thread (tens
// of microseconds on a virtual machine) would eat much of what a second
// thread gains. Workers therefore spin for a while after each job, where the
// next launch finds them awake, and sleep on a condition variable only once
// the pool has been idle for `kSpinMicros` (docs/PERFORMANCE.md).
#ifndef ACCY_BACKENDS_CPU_THREAD_POOL_H_
#define ACCY_BACKENDS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace accy::cpu {

class ThreadPool {
 public:
  // How long an idle worker spins before it sleeps.
  static constexpr int64_t kSpinMicros = 200;

  // `threads` workers besides the calling thread (0 runs everything inline).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, with one worker per CPU this process may use
  // (base/cpus.h) minus one.
  static ThreadPool& shared();

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, count), on the calling thread and up to
  // `parallelism - 1` workers, and returns when all are done. Safe to call
  // from several threads at once: a call that finds the workers busy with
  // another caller's loop runs its own on its thread alone.
  //
  // Affinity: participant p (0 the caller, w + 1 the worker w) owns the p-th
  // of `parallelism` contiguous blocks of indices and runs it first, so that
  // launch after launch the same thread touches the same part of the data
  // (and finds it in the caches near its core); then it takes what is left
  // of the other blocks, so a worker that wakes late delays nothing.
  void parallelFor(int64_t count, int parallelism, const std::function<void(int64_t)>& fn);

  // For tests only: calls that let a test stop a thread at the points where
  // a job changes hands. `worker_saw_job` runs on a worker after it has
  // seen a new job's ticket and before it reads the job; `worker_left_job`
  // after it stopped claiming that job's indices; `caller_wrote_job` on the
  // caller after it wrote a job's function, count and parts and before it
  // opened the job's blocks. Set once, before any call of parallelFor; the
  // hooks must outlive the pool's use of them.
  struct Hooks {
    std::function<void()> worker_saw_job;
    std::function<void()> worker_left_job;
    std::function<void()> caller_wrote_job;
  };
  void setHooksForTest(const Hooks* hooks) { hooks_.store(hooks, std::memory_order_release); }

 private:
  // The job's generation in the high 32 bits, an index in the low 32: the
  // published ticket (ticket_) and each block's next index to claim
  // (cursors_). Claiming is a compare-and-swap on the whole cursor, so a
  // worker that read an older generation can never take an index of a
  // newer one.
  static uint32_t generationOf(uint64_t ticket) { return static_cast<uint32_t>(ticket >> 32); }
  static int64_t indexOf(uint64_t ticket) { return static_cast<int64_t>(ticket & 0xffffffffu); }
  // The ticket's low bit while the caller rewrites the job (its function,
  // count, parts and cursors): set first, cleared last. A worker takes a
  // job's fields as the job's only when the ticket it saw, clear of this
  // bit, is still the ticket after it read them; otherwise they may be a
  // newer job's, read against an older job's cursors.
  static constexpr uint64_t kWriting = 1;

  void workerLoop(int participant);
  // Runs the indices of the job published as `ticket` left in block
  // `participant`, then in the others, until none are left.
  void runClaims(uint64_t ticket, int participant);
  // Block b's indices: [count * b / parts, count * (b + 1) / parts).
  static int64_t blockStart(int64_t count, int parts, int b) { return count * b / parts; }

  std::mutex call_mu_;  // one parallelFor at a time
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> parts_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> cursors_;  // one per participant
  std::atomic<const std::function<void(int64_t)>*> job_{nullptr};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> finished_{0};
  std::atomic<bool> stop_{false};
  // Sleeping workers wait on work_cv_ under mu_; sleepers_ tells the caller
  // whether it must notify.
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::atomic<int> sleepers_{0};
  std::atomic<const Hooks*> hooks_{nullptr};
  std::vector<std::thread> workers_;
};

}  // namespace accy::cpu

#endif  // ACCY_BACKENDS_CPU_THREAD_POOL_H_
