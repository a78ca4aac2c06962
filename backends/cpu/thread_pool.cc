#include "backends/cpu/thread_pool.h"

#include <algorithm>

namespace accy::cpu {

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

ThreadPool& ThreadPool::shared() {
  static ThreadPool* pool = new ThreadPool(
      std::max(0, static_cast<int>(std::thread::hardware_concurrency()) - 1));
  return *pool;
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || (generation_ != seen && active_ < active_limit_); });
    if (stop_) return;
    seen = generation_;
    ++active_;
    while (next_ < count_) {
      const int64_t i = next_++;
      const auto* job = job_;
      lock.unlock();
      (*job)(i);
      lock.lock();
      ++finished_;
    }
    --active_;
    if (finished_ == count_) done_cv_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t count, int parallelism, const std::function<void(int64_t)>& fn) {
  if (count <= 0) return;
  if (parallelism <= 1 || workers_.empty() || count == 1) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> call(call_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  next_ = 0;
  count_ = count;
  finished_ = 0;
  active_limit_ = std::min<int>(parallelism - 1, static_cast<int>(workers_.size()));
  ++generation_;
  work_cv_.notify_all();
  // The calling thread works too.
  while (next_ < count_) {
    const int64_t i = next_++;
    lock.unlock();
    fn(i);
    lock.lock();
    ++finished_;
  }
  done_cv_.wait(lock, [&] { return finished_ == count_ && active_ == 0; });
  job_ = nullptr;
}

}  // namespace accy::cpu
