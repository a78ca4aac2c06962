// The invoke channel: accyd's fast path for a client on the same host.
//
// gRPC stays the control plane (sessions, compiles, regions). A client may
// also open a channel: a shared-memory region of its session (a sealed
// memfd like any other) laid out as below, which the daemon's worker for
// that session polls. One invoke is one request written into the mailbox
// and one sequence number bumped; the reply comes back the same way. Each
// side spins briefly on the other's sequence number, then sleeps on it with
// a futex (the word lives in the shared mapping, so FUTEX_WAIT/WAKE work
// across the two processes); a "waiting" flag beside each number tells the
// other side whether a wake is needed, so a busy channel makes no system
// calls at all.
//
// Buffers are (region, offset, size) references, exactly those of Invoke:
// a client's shared buffers, or bytes it copied into the channel region's
// data area (past `kDataOffset`). The daemon copies the request out of the
// mailbox before checking it, and makes every check of Invoke (session,
// handle, region bounds, sizes, budgets), with the same status numbers.
// docs/ACCYD.md "Invoke channel".
#ifndef ACCY_RUNTIME_CHANNEL_H_
#define ACCY_RUNTIME_CHANNEL_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace accy::channel {

inline constexpr uint32_t kMagic = 0x48434341;  // "ACCH"
inline constexpr uint32_t kVersion = 1;
// Inputs and outputs of one request together.
inline constexpr uint32_t kMaxBuffers = 64;
inline constexpr uint32_t kMaxMessage = 1024;

struct Ref {
  uint64_t region, offset, size;
};

struct Request {
  uint32_t index, generation;  // the program's handle
  uint32_t inputs, outputs;    // refs[0, inputs) are inputs, then outputs
  Ref refs[kMaxBuffers];
};

struct Reply {
  uint32_t status;  // the session status number (runtime/statuses.inc; 0 is ok)
  uint32_t message_bytes;
  uint64_t run_micros;
  char message[kMaxMessage];
};

// The start of the channel region. The sequence numbers and their flags
// sit on separate cache lines: each is written by one side only.
struct Mailbox {
  uint32_t magic, version;  // written by the client before OpenChannel
  alignas(64) uint32_t request_seq;     // the client bumps it after writing `request`
  uint32_t daemon_waiting;              // the daemon sleeps on request_seq
  alignas(64) uint32_t reply_seq;       // set to request_seq once `reply` is written
  uint32_t client_waiting;              // the client sleeps on reply_seq
  alignas(64) Request request;
  alignas(64) Reply reply;
};

// Where the data area begins: buffers copied into the channel region go
// at or after it (references into the mailbox itself are refused).
inline constexpr size_t kDataOffset = (sizeof(Mailbox) + 4095) / 4096 * 4096;

inline uint32_t load(const uint32_t& word) {
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(word)).load(std::memory_order_seq_cst);
}
inline void store(uint32_t& word, uint32_t value) {
  std::atomic_ref<uint32_t>(word).store(value, std::memory_order_seq_cst);
}

// FUTEX_WAIT on a word of shared memory (not the PRIVATE form: the other
// process waits on the same page through its own mapping).
inline void futexWait(uint32_t& word, uint32_t expected, std::chrono::microseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000), static_cast<long>(timeout.count() % 1000000) * 1000};
  syscall(SYS_futex, &word, FUTEX_WAIT, expected, &ts, nullptr, 0);
}
inline void futexWake(uint32_t& word) { syscall(SYS_futex, &word, FUTEX_WAKE, 1, nullptr, nullptr, 0); }

inline void pause() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Waits until `word` differs from `seen`: spins for `spin`, then says it
// is waiting (`waiting` = 1) and sleeps on the futex for at most `sleep`.
// Returns whether it changed (false: the sleep ended first; call again).
inline bool waitForChange(uint32_t& word, uint32_t seen, uint32_t& waiting, std::chrono::microseconds spin,
                          std::chrono::microseconds sleep) {
  if (load(word) != seen) return true;
  if (spin.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + spin;
    for (int i = 1;; ++i) {
      if (load(word) != seen) return true;
      pause();
      if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
    }
  }
  store(waiting, 1);
  // Seen after the flag is set: a change made before the other side read
  // the flag is caught here; one made after it comes with a wake.
  if (load(word) == seen) futexWait(word, seen, sleep);
  store(waiting, 0);
  return load(word) != seen;
}

// Publishes `value` in `word` and wakes the other side if it sleeps.
inline void publish(uint32_t& word, uint32_t value, const uint32_t& waiting) {
  store(word, value);
  if (load(waiting) != 0) futexWake(word);
}

}  // namespace accy::channel

#endif  // ACCY_RUNTIME_CHANNEL_H_
