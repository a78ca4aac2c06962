// What accyd's calls wait for without holding a thread: a Gate (a
// session's lock, an identity's launch or compile slots) hands its places
// to queued tickets in the order they came, and a WorkerPool runs the call
// that got its place. A waiting gRPC call is a ticket in a queue and a
// timer entry, nothing more (docs/ACCYD.md, "Waiting calls").
#ifndef ACCY_SERVER_GATE_H_
#define ACCY_SERVER_GATE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "base/stop.h"

namespace accy::server {

// `capacity` places (1: a lock). A caller takes one at once when one is
// free; otherwise it queues a ticket, and whoever gives a place back hands
// it to the first ticket in the queue, running the ticket's `granted` on
// its own thread (outside the gate's lock). A ticket withdrawn before it
// was granted leaves the queue; one granted holds its place until given
// back. Also a Lockable (lock, try_lock, unlock) for std::unique_lock.
class Gate {
 public:
  struct Ticket {
    std::function<void()> granted;  // runs once, on the thread that freed the place
  };

  explicit Gate(int64_t capacity = 1) : capacity_(capacity < 1 ? 1 : capacity) {}
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Takes a place if one is free and nobody queues for it.
  bool tryTake();
  // Takes a place now (true), or queues `ticket` (false): its `granted`
  // runs once it holds one, unless it is withdrawn first.
  bool takeOrQueue(const std::shared_ptr<Ticket>& ticket);
  // Takes `ticket` out of the queue: true when it was still waiting,
  // false when it was granted a place already (and now holds it).
  bool withdraw(const std::shared_ptr<Ticket>& ticket);
  // Gives a place back: the first queued ticket takes it.
  void give();
  // Waits on this thread (a ticket in the same queue, so first come, first
  // served with the queued calls) until a place is taken, or until `ended`
  // says stop: it is asked when `wake(now)` says, at the latest, and on
  // each poke().
  absl::Status take(const StopCheck& ended,
                    const std::function<std::chrono::steady_clock::time_point()>& next_wake);
  // Wakes the threads waiting in take() to ask their stop check now.
  void poke();

  int64_t held() const;
  int64_t queued() const;

  // Lockable.
  void lock();
  bool try_lock() { return tryTake(); }
  void unlock() { give(); }

 private:
  mutable std::mutex mu_;
  std::condition_variable poked_;
  uint64_t pokes_ = 0;
  const int64_t capacity_;
  int64_t held_ = 0;
  std::list<std::shared_ptr<Ticket>> queue_;
};

// Threads that run admitted calls: one idle is reused, else one is started
// (the calls running at once are bounded by their sessions' locks); a
// thread idle for `idle_exit` ends.
class WorkerPool {
 public:
  explicit WorkerPool(std::chrono::milliseconds idle_exit = std::chrono::seconds(10)) : idle_exit_(idle_exit) {}
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void run(std::function<void()> work);
  // Threads alive now (running or idle).
  int64_t threads() const;

 private:
  void loop();

  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mu_;
  std::condition_variable work_ready_, all_gone_;
  std::deque<std::function<void()>> work_;
  int64_t threads_ = 0, idle_ = 0;
  bool stopping_ = false;
};

}  // namespace accy::server

#endif  // ACCY_SERVER_GATE_H_
