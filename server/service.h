// The accyd gRPC service: per-client sessions with leases, compile through
// the cache, shared-memory regions, invoke.
#ifndef ACCY_SERVER_SERVICE_H_
#define ACCY_SERVER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <sys/types.h>

#include <map>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "accy/v1/accyd.grpc.pb.h"
#include "backends/backend.h"
#include "base/stop.h"
#include "runtime/session.h"
#include "server/compile_cache.h"
#include "server/gate.h"
#include "server/regions.h"

namespace accy::server {

struct Limits {
  int64_t max_sessions = 256;
  // Per caller identity (the client certificate's under mutual TLS, the
  // peer's uid on the Unix socket): sessions, programs and region bytes
  // of all its sessions together.
  int64_t max_sessions_per_identity = 64;
  int64_t max_programs_per_identity = 1024;
  int64_t max_region_bytes_per_identity = int64_t{64} << 30;
  int64_t max_programs_per_session = session::kMaxPrograms;  // 1 to session::kMaxPrograms
  int64_t max_regions_per_session = 64;
  int64_t max_region_bytes = int64_t{4} << 30;
  int64_t max_region_bytes_per_session = int64_t{16} << 30;  // all of a session's regions together
  // Daemon-wide: memory that invokes in flight allocate (scratch for
  // temporaries and outputs returned inline), and how many run at once.
  int64_t max_launch_bytes = int64_t{16} << 30;
  int64_t max_concurrent_invokes = 256;
  int64_t max_message_bytes = int64_t{256} << 20;
  int lease_seconds = 30;
  int64_t max_scratch_bytes = int64_t{16} << 30;  // per program
  // Nodes of one program a session compiles (the decoder counts them
  // before parsing). A compile's time limit and how many run at once are
  // the cache's (CacheOptions).
  int64_t max_compile_nodes = int64_t{1} << 16;
  bool check_numerics = false;                     // NaN/inf outputs fail the run
  // How long a session's channel worker spins on its mailbox after a
  // request before it sleeps on the futex (runtime/channel.h).
  int64_t channel_spin_us = 50;
  // Fair shares per caller identity (docs/ACCYD.md, "Fair shares"): launches
  // running at once (an identity's further launches wait for one of its own
  // to end, never for another identity's), compiles running at once, and
  // calls waiting (for a session busy with another call, or for one of the
  // identity's launch or compile slots; past it a call is refused at once, so
  // waiting calls hold at most this many of gRPC's threads per identity).
  // 0 for launches and compiles means half the usable CPUs, at least one
  // (defaultLaunchesPerIdentity()).
  int64_t max_launches_per_identity = 0;
  int64_t max_compiles_per_identity = 0;
  int64_t max_waiting_calls_per_identity = 64;
  // The longest a launch may run (Invoke, a channel invoke), whatever the
  // client's deadline, which stops it sooner; 0 for no limit.
  int64_t max_call_ms = 600000;
  // A program's compile, all of its stages together (a program with loops
  // compiles a module per stage); the client's deadline stops it sooner.
  // The cache bounds each module as well (CacheOptions::max_compile_ms).
  int64_t max_compile_ms = 60000;
  // How long a compile waits for one of its identity's compile slots
  // before it is refused (the same flag bounds the wait for the cache's
  // slots, CacheOptions::compile_queue_ms).
  int64_t compile_queue_ms = 10000;
};

// Half the CPUs this process may use, at least one: the default share of
// one identity's launches and compiles running at once.
int64_t defaultLaunchesPerIdentity();

// The protocol versions this daemon speaks.
inline constexpr uint32_t kProtocolVersion = 1;

// What the daemon holds now, for metrics (server/metrics.h).
struct ServiceStats {
  int64_t sessions = 0;
  int64_t programs = 0;      // compiled and not released, across sessions
  int64_t regions = 0;       // shared-memory regions mapped
  int64_t region_bytes = 0;  // their bytes
  int64_t lease_expiries = 0;  // sessions freed because their lease lapsed, since start
};

// Hears every call as it ends: its method ("Invoke"), the device it ran on
// (or ""), its status and how long it took.
using CallObserver = std::function<void(std::string_view method, const std::string& device, session::Status status,
                                        double seconds)>;

// The handlers take any gRPC server context: accyd serves them through
// gRPC's callback API (grpcService()), where a call that waits (for its
// session, for one of its identity's slots) holds no thread; tests and the
// fuzzer call them directly, each on a thread of its own that waits.
class AccydService final {
 public:
  // `devices` come from backends/registry.h (e.g. just "cpu").
  AccydService(CompileCache& cache, RegionSocket& regions, const Limits& limits,
               std::vector<std::unique_ptr<backends::Backend>> devices);
  ~AccydService();

  // The service to register with grpc::ServerBuilder: every call through it
  // that must wait queues (docs/ACCYD.md, "Waiting calls") and runs, once
  // admitted, on one of the service's own threads.
  grpc::Service* grpcService();

  // `listener` hears each device's health now (every one serving) and
  // again whenever one changes: a device left unable to run work (a GPU in
  // a sticky error state) stops serving, with the reason. accyd turns it
  // into the gRPC health status of the service "accyd.device.<name>".
  void setHealthListener(std::function<void(const std::string& device, bool serving, const std::string& why)> listener);
  // Asks every device for its health and tells the listener of changes.
  void checkDeviceHealth();
  // The access log: one JSON line per call to `out` (method, session as a
  // short hash of its id, device, status, duration; never data), or none
  // when null. Not owned; written under a lock.
  void setAccessLog(std::FILE* out) { access_log_ = out; }
  // Every call, as it ends (metrics); set before serving.
  void setCallObserver(CallObserver observer) { call_observer_ = std::move(observer); }
  ServiceStats stats() const;
  // The connection `fd` on the Unix socket (its calls' peer is "fd:<fd>")
  // comes from a process of user `uid` (SO_PEERCRED): its calls' identity
  // is "uid:<uid>". Called before the connection is handed to gRPC.
  void notePeer(int fd, uid_t uid);

  grpc::Status Negotiate(grpc::ServerContextBase*, const accy::v1::NegotiateRequest*, accy::v1::NegotiateReply*);
  grpc::Status ServerInfo(grpc::ServerContextBase*, const accy::v1::ServerInfoRequest*, accy::v1::ServerInfoReply*);
  grpc::Status OpenSession(grpc::ServerContextBase*, const accy::v1::OpenSessionRequest*,
                           accy::v1::OpenSessionReply*);
  grpc::Status KeepAlive(grpc::ServerContextBase*, const accy::v1::KeepAliveRequest*, accy::v1::KeepAliveReply*);
  grpc::Status CloseSession(grpc::ServerContextBase*, const accy::v1::CloseSessionRequest*,
                            accy::v1::CloseSessionReply*);
  grpc::Status Compile(grpc::ServerContextBase*, const accy::v1::CompileRequest*, accy::v1::CompileReply*);
  grpc::Status Release(grpc::ServerContextBase*, const accy::v1::ReleaseRequest*, accy::v1::ReleaseReply*);
  grpc::Status RegisterRegion(grpc::ServerContextBase*, const accy::v1::RegisterRegionRequest*,
                              accy::v1::RegisterRegionReply*);
  grpc::Status UnregisterRegion(grpc::ServerContextBase*, const accy::v1::UnregisterRegionRequest*,
                                accy::v1::UnregisterRegionReply*);
  grpc::Status ListRegions(grpc::ServerContextBase*, const accy::v1::ListRegionsRequest*,
                           accy::v1::ListRegionsReply*);
  grpc::Status Invoke(grpc::ServerContextBase*, const accy::v1::InvokeRequest*, accy::v1::InvokeReply*);
  grpc::Status OpenChannel(grpc::ServerContextBase*, const accy::v1::OpenChannelRequest*,
                           accy::v1::OpenChannelReply*);

  size_t sessionCount() const;
  // Handlers running now (every call this service answers, channel invokes
  // included).
  int64_t callsInFlight() const { return calls_in_flight_.load() + calls_waiting_.load(); }
  // At shutdown, after the gRPC server has drained: closes every session;
  // an invoke in flight on a channel may finish until `deadline`, then its
  // launch is stopped.
  void drain(std::chrono::steady_clock::time_point deadline);

  // For tests: `hook(global_lock_held)` runs as each session is freed
  // (closed, or its lease lapsed), saying whether another thread could
  // take the service's global lock at that moment.
  void setSessionFreedHook(std::function<void(bool global_lock_held)> hook) { session_freed_hook_ = std::move(hook); }

 private:
  struct ClientSession;
  class CallLog;
  class Channel;
  class Callbacks;
  class Pending;
  // What one identity runs and waits for now (counts under load_mu_), and
  // where its calls wait for one of its slots: each identity has its own,
  // so a slot given back wakes only the calls that may take it (one shared
  // by all woke 62 waiting calls of another identity at each of a tone
  // call's compile and launch, and made the tone call four times slower).
  // Each of the identity's sessions holds it, so an invoke finds it without
  // a lookup (identityLoad).
  struct IdentityLoad {
    IdentityLoad(std::string who, int64_t launches, int64_t compiles)
        : owner(std::move(who)), launch_slots(launches), compile_slots(compiles) {}
    std::string owner;
    int64_t waiting = 0;  // under load_mu_
    Gate launch_slots, compile_slots;
  };
  enum class SlotKind { kLaunch, kCompile };
  // One buffer of an invoke: a region reference, or bytes that came inline
  // (`placed` false; for an output, one to return inline).
  struct BufferRef {
    bool placed = false;
    uint64_t region = 0, offset = 0, size = 0;
    std::span<const std::byte> bytes;
  };
  // Invoke's work, shared by the gRPC call and the channel: resolves and
  // checks every buffer, takes the daemon-wide budgets, runs. `outputs` may
  // be empty (all inline); outputs not placed are returned in
  // `inline_outputs` (null: refused, every output must be placed). Under
  // the session's lock.
  // `until`: when the call must end (its deadline or --max-call-ms), the
  // latest a wait for a launch slot sleeps before it asks again.
  absl::Status invokeLocked(ClientSession& s, session::Handle handle, std::span<const BufferRef> inputs,
                            std::span<const BufferRef> outputs, std::vector<std::string>* inline_outputs,
                            CallLog& call, uint64_t* run_micros, std::chrono::system_clock::time_point until);
  // Who is calling: the client certificate's identity under mutual TLS,
  // "uid:N" on the Unix socket, else "".
  std::string identityOf(const grpc::ServerContextBase* ctx) const;
  // What the sessions of `owner` hold together (under mu_).
  int64_t programsOf(const std::string& owner) const;
  int64_t regionBytesOf(const std::string& owner) const;
  // The session `id` when the caller is its owner; null otherwise.
  std::shared_ptr<ClientSession> find(const grpc::ServerContextBase* ctx, const std::string& id);
  // The device that runs `target` (null when none does), and its name ("").
  const backends::Backend* deviceServing(const std::string& target) const;
  std::string deviceFor(const std::string& target) const;
  void reapLoop();
  // Marks a session that left the table (closed, its lease lapsed) so that
  // everything it runs stops and every call waiting on it leaves: its
  // launch in progress stops at its next check, its channel serves no more.
  void markClosed(ClientSession& s);
  // Unregistering the channel's region closes the channel at once: its
  // launch in progress stops at its next check instead of being waited for.
  void stopChannelIn(ClientSession& s, uint64_t region);
  // Takes the session's lock for a call, waiting on this thread (counted
  // against the identity's waiting calls) while another call holds it,
  // until `ended` says stop or the session is closed. A wait sleeps until
  // the lock is free, `until` (the call's deadline) or 100 ms have passed,
  // then asks `ended` (cancellation) and the session again. A call admitted
  // through grpcService() holds the lock already: it adopts it.
  absl::Status lockSession(ClientSession& s, const StopCheck& ended, std::chrono::system_clock::time_point until,
                           std::unique_lock<Gate>* lock);
  // The load record of `owner`, shared by its sessions.
  std::shared_ptr<IdentityLoad> identityLoad(const std::string& owner);
  // Counts a waiting call of the identity, or refuses it over the limit
  // (countWaiting: under load_mu_).
  absl::Status startWaiting(IdentityLoad& load);
  absl::Status countWaiting(IdentityLoad& load);
  void stopWaiting(IdentityLoad& load);
  // Takes one of the identity's launch or compile slots, waiting for one of
  // its own to end until `ended` says stop (an admitted call holds it
  // already).
  absl::Status takeSlot(IdentityLoad& load, SlotKind kind, const StopCheck& ended,
                        std::chrono::system_clock::time_point until);
  void giveSlot(IdentityLoad& load, SlotKind kind);
  int64_t slotLimit(SlotKind kind) const;
  static Gate& slots(IdentityLoad& load, SlotKind kind) {
    return kind == SlotKind::kLaunch ? load.launch_slots : load.compile_slots;
  }
  absl::Status compileQueueTimedOut(const IdentityLoad& load) const;
  // The calls waiting through grpcService(): one thread wakes at the
  // earliest of their deadlines, at least every 100 ms, and whenever poked
  // (a call cancelled, a session closed), and sends away those whose wait
  // has ended.
  void watch(const std::shared_ptr<Pending>& call);
  void pokeWatcher();
  void watchLoop();

  CompileCache& cache_;
  RegionSocket& regions_;
  Limits limits_;
  std::vector<std::unique_ptr<backends::Backend>> devices_;
  std::FILE* access_log_ = nullptr;
  CallObserver call_observer_;
  std::atomic<int64_t> lease_expiries_{0};
  std::atomic<int64_t> calls_in_flight_{0};
  std::atomic<bool> trim_wanted_{false};  // a large request ended: give memory back (reapLoop)
  // What invokes in flight hold of the budgets above.
  std::mutex budget_mu_;
  int64_t launch_bytes_in_flight_ = 0;
  int64_t invokes_in_flight_ = 0;
  std::mutex access_log_mu_;
  // Device health as last reported (by index in devices_), and who hears of it.
  std::mutex health_mu_;
  std::vector<bool> serving_;
  std::function<void(const std::string& device, bool serving, const std::string& why)> health_listener_;
  std::mutex load_mu_;
  std::map<std::string, std::weak_ptr<IdentityLoad>> loads_;  // an identity's, while a session holds it
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<ClientSession>> sessions_;
  mutable std::mutex peers_mu_;
  std::map<int, uid_t> unix_peers_;  // Unix socket connection -> its peer's uid
  std::function<void(bool)> session_freed_hook_;
  std::atomic<bool> stopping_{false};
  std::mutex reap_mu_;
  std::condition_variable reap_cv_;
  std::thread reaper_;
  std::atomic<int64_t> calls_waiting_{0};  // through grpcService(), not yet running
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  uint64_t watch_pokes_ = 0;
  std::vector<std::weak_ptr<Pending>> watched_;
  std::thread watcher_;
  std::unique_ptr<WorkerPool> workers_;  // before callbacks_: outlived by nothing it runs
  std::unique_ptr<Callbacks> callbacks_;
};

// The gRPC code that corresponds one to one to a session status number.
grpc::StatusCode grpcCodeOf(session::Status status);

}  // namespace accy::server

#endif  // ACCY_SERVER_SERVICE_H_
