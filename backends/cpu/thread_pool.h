// A fixed pool of worker threads for splitting kernel loops.
#ifndef ACCY_BACKENDS_CPU_THREAD_POOL_H_
#define ACCY_BACKENDS_CPU_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace accy::cpu {

class ThreadPool {
 public:
  // `threads` workers besides the calling thread (0 runs everything inline).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, with one worker per hardware thread minus one.
  static ThreadPool& shared();

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, count), on the calling thread and up to
  // `parallelism - 1` workers, and returns when all are done. Safe to call
  // from several threads at once (calls are serialized).
  void parallelFor(int64_t count, int parallelism, const std::function<void(int64_t)>& fn);

 private:
  void workerLoop();

  std::mutex call_mu_;  // one parallelFor at a time
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t next_ = 0, count_ = 0, finished_ = 0;
  int active_limit_ = 0, active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace accy::cpu

#endif  // ACCY_BACKENDS_CPU_THREAD_POOL_H_
