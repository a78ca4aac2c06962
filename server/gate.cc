#include "server/gate.h"

#include <utility>

namespace accy::server {

bool Gate::tryTake() {
  std::lock_guard<std::mutex> g(mu_);
  if (held_ >= capacity_ || !queue_.empty()) return false;
  ++held_;
  return true;
}

bool Gate::takeOrQueue(const std::shared_ptr<Ticket>& ticket) {
  std::lock_guard<std::mutex> g(mu_);
  if (held_ < capacity_ && queue_.empty()) {
    ++held_;
    return true;
  }
  queue_.push_back(ticket);
  return false;
}

bool Gate::withdraw(const std::shared_ptr<Ticket>& ticket) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (*it == ticket) {
      queue_.erase(it);
      return true;
    }
  }
  return false;
}

void Gate::give() {
  std::shared_ptr<Ticket> next;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (queue_.empty()) {
      --held_;
      return;
    }
    // The place passes to the first ticket without being free in between.
    next = std::move(queue_.front());
    queue_.pop_front();
  }
  next->granted();
}

absl::Status Gate::take(const StopCheck& ended,
                        const std::function<std::chrono::steady_clock::time_point()>& next_wake) {
  if (tryTake()) return absl::OkStatus();
  // Granted flips under mu_ (the ticket runs in give(), outside it, so it
  // takes it again).
  auto got = std::make_shared<bool>(false);
  auto ticket = std::make_shared<Ticket>();
  ticket->granted = [this, got] {
    {
      std::lock_guard<std::mutex> g(mu_);
      *got = true;
    }
    poked_.notify_all();
  };
  if (takeOrQueue(ticket)) return absl::OkStatus();
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    const uint64_t pokes = pokes_;
    poked_.wait_until(g, next_wake(), [&] { return *got || pokes_ != pokes; });
    if (*got) return absl::OkStatus();
    g.unlock();
    absl::Status st = ended();
    if (!st.ok()) {
      if (!withdraw(ticket)) {
        // Granted while it asked: the place is this thread's; it gives it
        // back (to the next ticket) and leaves.
        g.lock();
        poked_.wait(g, [&] { return *got; });
        g.unlock();
        give();
      }
      return st;
    }
    g.lock();
  }
}

void Gate::poke() {
  {
    std::lock_guard<std::mutex> g(mu_);
    ++pokes_;
  }
  poked_.notify_all();
}

int64_t Gate::held() const {
  std::lock_guard<std::mutex> g(mu_);
  return held_;
}

int64_t Gate::queued() const {
  std::lock_guard<std::mutex> g(mu_);
  return static_cast<int64_t>(queue_.size());
}

void Gate::lock() {
  const absl::Status st = take([] { return absl::OkStatus(); },
                               [] { return std::chrono::steady_clock::time_point::max(); });
  (void)st;  // never stops: its check never says so
}

WorkerPool::~WorkerPool() {
  std::unique_lock<std::mutex> g(mu_);
  stopping_ = true;
  work_ready_.notify_all();
  all_gone_.wait(g, [this] { return threads_ == 0; });
}

void WorkerPool::run(std::function<void()> work) {
  std::lock_guard<std::mutex> g(mu_);
  work_.push_back(std::move(work));
  // Every idle thread takes one piece of work: start one when the pieces
  // queued outnumber them.
  if (static_cast<int64_t>(work_.size()) > idle_) {
    ++threads_;
    std::thread([this] { loop(); }).detach();
  } else {
    work_ready_.notify_one();
  }
}

int64_t WorkerPool::threads() const {
  std::lock_guard<std::mutex> g(mu_);
  return threads_;
}

void WorkerPool::loop() {
  std::unique_lock<std::mutex> g(mu_);
  for (;;) {
    if (work_.empty()) {
      ++idle_;
      const bool woke = work_ready_.wait_for(g, idle_exit_, [this] { return !work_.empty() || stopping_; });
      --idle_;
      if (!woke || work_.empty()) break;  // idle too long, or stopping with nothing left
    }
    std::function<void()> work = std::move(work_.front());
    work_.pop_front();
    g.unlock();
    work();
    work = nullptr;  // what it captured goes on this thread, before it may end
    g.lock();
  }
  --threads_;
  all_gone_.notify_all();
}

}  // namespace accy::server
