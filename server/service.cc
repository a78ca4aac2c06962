// The accyd gRPC service's handlers (service.h). One file of about 950
// lines on purpose: every handler works under the same session table,
// lease, identity check and status mapping, which are private to it; the
// invoke channel (Channel, below) is the one piece with a life of its own,
// and it is the invoke path's second form.
#include "server/service.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>

#include <openssl/sha.h>

#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backends/compile_program.h"
#include "backends/registry.h"
#include "accy/version.h"
#include "base/cpus.h"
#include "base/errors.h"
#include "base/status_macros.h"
#include "base/stop.h"
#include "base/strings.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/codegen/targets.h"
#include "compiler/wire/wire.h"
#include "runtime/channel.h"
#include "runtime/statuses.h"

namespace accy::server {

namespace pb = accy::v1;
using Clock = std::chrono::steady_clock;

struct AccydService::ClientSession {
  Gate mu;  // one call at a time per session (lockSession)
  // Set once the session has left the table (closed, or its lease lapsed):
  // its launch in progress stops, calls waiting for it leave.
  std::atomic<bool> closed{false};
  // Guards `channel` and `channel_region` besides `mu` (they change under
  // both), so that closing the session or unregistering the channel's
  // region can stop the channel without waiting for the call that holds mu.
  std::mutex channel_mu;
  std::unique_ptr<session::Session> table;
  std::map<uint64_t, std::shared_ptr<Mapping>> regions;
  uint64_t next_region = 1;
  std::atomic<int64_t> deadline;  // Clock ticks
  std::map<uint32_t, std::string> device_of;  // program slot -> the device it was compiled for
  std::string owner;  // the identity that opened it (identityOf)
  std::shared_ptr<IdentityLoad> load;  // the owner's (identityLoad)
  std::string id;
  // The invoke channel, if one is open, and its region (under mu or
  // channel_mu to read, both to change).
  std::unique_ptr<Channel> channel;
  uint64_t channel_region = 0;
  // What it holds, for the per-identity quotas: programs compiled and not
  // released (and compiles in progress), bytes of its regions. Written
  // under the service's mu_.
  int64_t programs = 0;
  int64_t region_bytes = 0;
  int64_t region_count = 0;
  // The test hook (setSessionFreedHook): asked from another thread whether
  // the global lock is free while this session's resources go.
  AccydService* service = nullptr;
  ~ClientSession();
};

// The stop check of a gRPC call (base/stop.h): its deadline every time it
// is asked (a clock read), its cancellation at most once a millisecond.
// ServerContext::IsCancelled takes a lock gRPC's own threads hold while
// they poll, and a launch asks between every piece and every loop step:
// asked each time, the N-body example (20 steps in one Invoke) took
// 16.9 ms through Invoke against 7.7 ms through the invoke channel.
class CallEnded {
 public:
  CallEnded(grpc::ServerContextBase* ctx, ErrorKind kind, std::string_view what) : ctx_(ctx), kind_(kind), what_(what) {}
  // Also stops when `closed` turns true (the call's session was closed or
  // its lease lapsed).
  CallEnded& whenClosed(const std::atomic<bool>* closed) {
    closed_ = closed;
    return *this;
  }
  // Also stops `limit_ms` after now (0: no limit), saying `why`.
  CallEnded& within(int64_t limit_ms, std::string why) {
    if (limit_ms > 0) limit_ = std::chrono::system_clock::now() + std::chrono::milliseconds(limit_ms);
    why_ = std::move(why);
    return *this;
  }
  // When the call must end: its deadline or its limit, whichever is first.
  std::chrono::system_clock::time_point until() const { return std::min(ctx_->deadline(), limit_); }
  absl::Status operator()() const {
    const auto now = std::chrono::system_clock::now();
    if (now > ctx_->deadline()) return makeError(kind_, strCat("accyd: the call's deadline passed; the ", what_, " stopped"));
    if (closed_ != nullptr && closed_->load(std::memory_order_relaxed)) {
      return makeError(kind_, strCat("accyd: the session was closed (or its lease lapsed); the ", what_, " stopped"));
    }
    if (now > limit_) return makeError(kind_, strCat("accyd: ", why_, "; the ", what_, " stopped"));
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    int64_t due = next_ns_.load(std::memory_order_relaxed);
    if (ns < due || !next_ns_.compare_exchange_strong(due, ns + 1000000)) return absl::OkStatus();
    if (ctx_->IsCancelled()) return makeError(kind_, strCat("accyd: the call was cancelled; the ", what_, " stopped"));
    return absl::OkStatus();
  }

 private:
  grpc::ServerContextBase* ctx_;
  ErrorKind kind_;
  std::string_view what_;
  const std::atomic<bool>* closed_ = nullptr;
  std::chrono::system_clock::time_point limit_ = std::chrono::system_clock::time_point::max();
  std::string why_;
  mutable std::atomic<int64_t> next_ns_{0};
};

grpc::StatusCode grpcCodeOf(session::Status s) {
  // Each status's code is its row's in runtime/statuses.inc; out_of_memory
  // is RESOURCE_EXHAUSTED, not UNAVAILABLE: retry policies take that for a
  // passing fault and would send the same request again.
  switch (s) {
#define ACCY_STATUS(name, number, kind, grpc_code) \
  case session::Status::name:                      \
    return grpc::StatusCode::grpc_code;
#include "runtime/statuses.inc"
#undef ACCY_STATUS
  }
  return grpc::StatusCode::UNKNOWN;
}

namespace {

// Fills the reply's status and message and returns the matching gRPC
// status, with the number in the `accy-status` trailer.
// The status the current call ends with, for its access-log line.
thread_local session::Status* call_status = nullptr;

// What a call admitted through grpcService() holds as its handler runs on
// a worker: its session's lock and perhaps one of its identity's slots,
// taken while it waited without a thread. lockSession and takeSlot adopt
// them; what the handler did not take is given back after it.
struct Admission {
  const void* session = nullptr;  // ClientSession
  bool lock_held = false;
  const void* slots = nullptr;  // the Gate of the slot held
  bool slot_held = false;
  std::chrono::steady_clock::time_point start;  // when the call came
};
thread_local Admission* admission = nullptr;

// Requests of this size or more have the daemon give freed memory back to
// the system soon after (reapLoop).
constexpr size_t kTrimAfterBytes = size_t{4} << 20;

// The longest message a reply carries (a failure's status message too).
constexpr size_t kMaxReplyMessageBytes = 1024;

template <typename Reply>
grpc::Status finish(grpc::ServerContextBase* ctx, Reply* reply, const absl::Status& st) {
  const session::Status s = session::statusOf(st);
  if (call_status != nullptr) *call_status = s;
  reply->set_status(static_cast<uint32_t>(s));
  // The message also travels as gRPC's status message, in the trailers,
  // whose size the client bounds (8 KiB by default): a longer one would
  // never reach it, and its connection's other calls would wait behind
  // it. Messages quote clients' strings by a short prefix (quoted()); this
  // bounds the rest.
  std::string message(st.message().substr(0, std::min<size_t>(st.message().size(), kMaxReplyMessageBytes)));
  if (message.size() < st.message().size()) strAppend(&message, "...(", st.message().size(), " bytes)");
  reply->set_message(message);
  if (s == session::Status::ok) return grpc::Status::OK;
  ctx->AddTrailingMetadata("accy-status", std::to_string(static_cast<uint32_t>(s)));
  // A call that fails after its deadline (a launch stopped by it) ends
  // DEADLINE_EXCEEDED, whichever of the daemon's reply and the client's
  // own timer comes first; the trailer keeps the status number.
  if (std::chrono::system_clock::now() > ctx->deadline()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, std::move(message));
  }
  return grpc::Status(grpcCodeOf(s), std::move(message));
}

absl::Status noSession(const std::string& id) {
  return makeError(ErrorKind::kInvalidHandle,
                   strCat("accyd: no open session '", quoted(id), "' (closed, or its lease lapsed)"));
}

void describe(std::span<const session::Descriptor> ds, google::protobuf::RepeatedPtrField<pb::Descriptor>* out) {
  for (const session::Descriptor& d : ds) {
    pb::Descriptor* p = out->Add();
    p->set_dtype(static_cast<uint32_t>(d.dtype));
    for (const tensor::Axis& a : d.axes) {
      pb::Axis* ax = p->add_axes();
      ax->set_name(a.name);
      ax->set_extent(a.extent);
    }
    p->set_byte_size(d.byte_size);
    p->set_alignment(d.alignment);
  }
}

}  // namespace

// One access-log line per call, written when the handler returns.
class AccydService::CallLog {
 public:
  CallLog(AccydService* service, const char* method, const std::string& session_id)
      : service_(service), method_(method), start_(admission != nullptr ? admission->start : Clock::now()) {
    service_->calls_in_flight_.fetch_add(1);
    if (service_->access_log_ == nullptr && !service_->call_observer_) return;
    if (service_->access_log_ != nullptr) session_ = shortId(session_id);
    call_status = &status_;
  }
  ~CallLog() {
    service_->calls_in_flight_.fetch_sub(1);
    if (service_->access_log_ == nullptr && !service_->call_observer_) return;
    call_status = nullptr;
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    if (service_->call_observer_) service_->call_observer_(method_, device_, status_, static_cast<double>(micros) * 1e-6);
    if (service_->access_log_ == nullptr) return;
    const std::string line =
        strCat("{\"time\":\"", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone()),
               "\",\"method\":\"", method_, "\",\"session\":\"", session_, "\",\"device\":\"", device_,
               "\",\"status\":\"", session::statusName(status_), "\",\"micros\":", micros, "}\n");
    std::lock_guard<std::mutex> lock(service_->access_log_mu_);
    std::fputs(line.c_str(), service_->access_log_);
    std::fflush(service_->access_log_);
  }
  void setSession(const std::string& id) {
    if (service_->access_log_ != nullptr) session_ = shortId(id);
  }
  void setDevice(std::string device) { device_ = std::move(device); }
  void setStatus(session::Status status) { status_ = status; }

 private:
  // Session ids are bearer secrets: the log keeps 12 hex digits of their
  // SHA-256, enough to follow one session, useless to take it over.
  static std::string shortId(const std::string& id) {
    if (id.empty()) return "";
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(id.data()), id.size(), digest);
    std::string out;
    for (int i = 0; i < 6; ++i) out += strCat(absl::Hex(digest[i], absl::kZeroPad2));
    return out;
  }

  AccydService* service_;
  const char* method_;
  Clock::time_point start_;
  std::string session_, device_;
  session::Status status_ = session::Status::ok;
};

// A session's invoke channel: its worker polls the mailbox, serves each
// request as Invoke would, and writes the reply back.
class AccydService::Channel {
 public:
  Channel(AccydService* service, ClientSession* session, uint64_t region, std::shared_ptr<Mapping> mapping)
      : service_(service), session_(session), region_(region), mapping_(std::move(mapping)) {
    // Read before OpenChannel answers: the client's first request may come
    // before the worker runs.
    const uint32_t seen = channel::load(box().request_seq);
    thread_ = std::thread([this, seen] { run(seen); });
  }
  ~Channel() { drain(Clock::now()); }
  // Serves no new request and stops the launch in progress at its next
  // check, without waiting for it (the session closed, its region went).
  void stop() {
    draining_ = true;
    stopping_ = true;
    channel::futexWake(box().request_seq);
  }
  // Serves no new request; lets the one in flight finish until `deadline`,
  // then stops its launch (between pieces) and the worker.
  void drain(Clock::time_point deadline) {
    if (!thread_.joinable()) return;
    draining_ = true;
    // The worker may be about to sleep: wake it until it has gone.
    for (bool stopped = false; !exited_.load();) {
      if (!stopped && Clock::now() >= deadline) stopping_ = stopped = true;
      channel::futexWake(box().request_seq);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    thread_.join();
  }
  uint64_t region() const { return region_; }

 private:
  channel::Mailbox& box() { return *reinterpret_cast<channel::Mailbox*>(mapping_->data()); }

  void run(uint32_t seen) {
    channel::Mailbox& m = box();
    const auto spin = std::chrono::microseconds(service_->limits_.channel_spin_us);
    while (!draining_.load()) {
      if (!channel::waitForChange(m.request_seq, seen, m.daemon_waiting, spin, std::chrono::milliseconds(100))) {
        continue;
      }
      if (draining_.load()) break;
      seen = channel::load(m.request_seq);
      // A private copy: the client cannot change the request under the checks.
      channel::Request request;
      std::memcpy(&request, &m.request, sizeof request);
      channel::Reply reply{};
      serve(request, &reply);
      std::memcpy(&m.reply, &reply, offsetof(channel::Reply, message) + reply.message_bytes);
      channel::publish(m.reply_seq, seen, m.client_waiting);
    }
    exited_ = true;
  }

  void serve(const channel::Request& request, channel::Reply* reply) {
    ClientSession& s = *session_;
    CallLog call(service_, "ChannelInvoke", s.id);
    absl::Status st;
    if (request.inputs > channel::kMaxBuffers || request.outputs > channel::kMaxBuffers - request.inputs) {
      st = makeError(ErrorKind::kInvalidBuffer, strCat("accyd: a channel request names ", request.inputs, " inputs and ",
                                                       request.outputs, " outputs; at most ", channel::kMaxBuffers,
                                                       " in all"));
    } else {
      s.deadline = (Clock::now() + std::chrono::seconds(service_->limits_.lease_seconds)).time_since_epoch().count();
      // A channel invoke has no deadline of its own: it stops when the
      // channel closes (the session closed, its lease lapsed, the region
      // was unregistered, the daemon drains) or past --max-call-ms.
      const int64_t max_ms = service_->limits_.max_call_ms;
      const auto until = max_ms > 0 ? std::chrono::system_clock::now() + std::chrono::milliseconds(max_ms)
                                    : std::chrono::system_clock::time_point::max();
      const StopCheck closing = [this, until, max_ms]() -> absl::Status {
        if (stopping_.load()) {
          return makeError(ErrorKind::kLaunchFailed, "accyd: the session or its channel closed; the launch stopped");
        }
        if (std::chrono::system_clock::now() > until) {
          return makeError(ErrorKind::kLaunchFailed, strCat("accyd: the call ran past the daemon's limit of ", max_ms,
                                                            " ms for one call (--max-call-ms); the launch stopped"));
        }
        return absl::OkStatus();
      };
      std::unique_lock<Gate> lock;
      st = service_->lockSession(s, closing, until, &lock);
      if (st.ok()) {
        std::vector<BufferRef> refs(request.inputs + request.outputs);
        for (size_t i = 0; i < refs.size(); ++i) {
          refs[i] = BufferRef{true, request.refs[i].region, request.refs[i].offset, request.refs[i].size, {}};
        }
        ScopedStopCheck scoped_stop(&closing);
        uint64_t run_micros = 0;
        const std::span<const BufferRef> all(refs);
        st = service_->invokeLocked(s, session::Handle{request.index, request.generation}, all.first(request.inputs),
                                    all.subspan(request.inputs), nullptr, call, &run_micros, until);
        reply->run_micros = run_micros;
      }
    }
    const session::Status status = session::statusOf(st);
    call.setStatus(status);
    reply->status = static_cast<uint32_t>(status);
    const absl::string_view message = st.message();
    reply->message_bytes = static_cast<uint32_t>(std::min<size_t>(message.size(), channel::kMaxMessage));
    std::memcpy(reply->message, message.data(), reply->message_bytes);
  }

  AccydService* service_;
  ClientSession* session_;  // owns this channel, so outlives it
  uint64_t region_;
  std::shared_ptr<Mapping> mapping_;
  std::atomic<bool> draining_{false}, stopping_{false}, exited_{false};
  std::thread thread_;
};

const backends::Backend* AccydService::deviceServing(const std::string& target) const {
  for (const auto& d : devices_) {
    for (const std::string& t : d->info().targets) {
      if (t == target) return d.get();
    }
  }
  return nullptr;
}

std::string AccydService::deviceFor(const std::string& target) const {
  const backends::Backend* d = deviceServing(target);
  return d != nullptr ? d->info().name : "";
}

AccydService::AccydService(CompileCache& cache, RegionSocket& regions, const Limits& limits,
                           std::vector<std::unique_ptr<backends::Backend>> devices)
    : cache_(cache), regions_(regions), limits_(limits), devices_(std::move(devices)) {
  workers_ = std::make_unique<WorkerPool>();
  callbacks_ = std::make_unique<Callbacks>(this);
  reaper_ = std::thread([this] { reapLoop(); });
  watcher_ = std::thread([this] { watchLoop(); });
}

AccydService::~AccydService() {
  stopping_ = true;
  reap_cv_.notify_all();
  reaper_.join();
  pokeWatcher();
  watcher_.join();
}

void AccydService::reapLoop() {
  std::unique_lock<std::mutex> lock(reap_mu_);
  while (!stopping_) {
    reap_cv_.wait_for(lock, std::chrono::milliseconds(200));
    const int64_t now = Clock::now().time_since_epoch().count();
    // Expired sessions leave the table under the lock and are freed
    // (their regions unmapped, their programs unloaded) after it.
    std::vector<std::shared_ptr<ClientSession>> expired;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        if (it->second->deadline.load() < now) {
          expired.push_back(std::move(it->second));
          it = sessions_.erase(it);
          lease_expiries_.fetch_add(1);
        } else {
          ++it;
        }
      }
    }
    for (const auto& s : expired) markClosed(*s);
    lock.unlock();
    const bool freed = !expired.empty();
    expired.clear();
    // Memory of large requests (a refused 40 MB program, inline buffers)
    // and of freed sessions goes back to the system: glibc keeps freed
    // heap otherwise, and raises its mmap threshold after a large free.
    if (trim_wanted_.exchange(false) || freed) malloc_trim(0);
    lock.lock();
  }
}

ServiceStats AccydService::stats() const {
  ServiceStats st;
  {
    std::lock_guard<std::mutex> g(mu_);
    st.sessions = static_cast<int64_t>(sessions_.size());
    for (const auto& [id, s] : sessions_) {
      st.programs += s->programs;
      st.regions += s->region_count;
      st.region_bytes += s->region_bytes;
    }
  }
  st.lease_expiries = lease_expiries_.load();
  return st;
}

size_t AccydService::sessionCount() const {
  std::lock_guard<std::mutex> g(mu_);
  return sessions_.size();
}

void AccydService::notePeer(int fd, uid_t uid) {
  std::lock_guard<std::mutex> lock(peers_mu_);
  unix_peers_[fd] = uid;  // a number reused by a later connection is overwritten before it serves
}

// The client certificate's identity under mutual TLS (its subject
// alternative names or common name, as gRPC reports them); on the Unix
// socket the connecting process's uid, as the kernel gave it at accept.
std::string AccydService::identityOf(const grpc::ServerContextBase* ctx) const {
  const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    std::string identity;
    for (const grpc::string_ref& part : auth->GetPeerIdentity()) {
      if (!identity.empty()) identity += ",";
      identity.append(part.data(), part.size());
    }
    return identity;
  }
  const std::string peer = ctx->peer();
  if (peer.rfind("fd:", 0) == 0) {
    std::lock_guard<std::mutex> lock(peers_mu_);
    if (auto it = unix_peers_.find(std::atoi(peer.c_str() + 3)); it != unix_peers_.end()) {
      return strCat("uid:", it->second);
    }
  }
  return "";
}

int64_t AccydService::programsOf(const std::string& owner) const {
  int64_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->owner == owner ? s->programs : 0;
  return n;
}

int64_t AccydService::regionBytesOf(const std::string& owner) const {
  int64_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->owner == owner ? s->region_bytes : 0;
  return n;
}

std::shared_ptr<AccydService::ClientSession> AccydService::find(const grpc::ServerContextBase* ctx, const std::string& id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  // A session id presented by another identity is as unknown as a wrong one.
  if (it->second->owner != identityOf(ctx)) return nullptr;
  it->second->deadline = (Clock::now() + std::chrono::seconds(limits_.lease_seconds)).time_since_epoch().count();
  return it->second;
}

namespace {

// When a wait next wakes to ask whether its call still wants to wait: in
// 100 ms (a cancelled call leaves within that), or at `until` (its
// deadline) if sooner. Asking more often costs every waiting call a lock
// that gRPC's own threads hold while they poll: 62 calls asking every 2 ms
// made another identity's calls four times slower.
Clock::time_point nextWake(std::chrono::system_clock::time_point until) {
  const auto now = std::chrono::system_clock::now();
  const auto step = std::chrono::milliseconds(100);
  if (until - now >= step) return Clock::now() + step;
  return Clock::now() + std::max<std::chrono::system_clock::duration>(until - now, std::chrono::system_clock::duration(0));
}

absl::Status closedWhileWaiting() {
  return makeError(ErrorKind::kInvalidHandle, "accyd: the session was closed (or its lease lapsed) while the call "
                                              "waited for it");
}

}  // namespace

int64_t defaultLaunchesPerIdentity() { return std::max<int64_t>(1, usableCpus() / 2); }

void AccydService::stopChannelIn(ClientSession& s, uint64_t region) {
  std::lock_guard<std::mutex> g(s.channel_mu);
  if (s.channel != nullptr && s.channel_region == region) s.channel->stop();
}

void AccydService::markClosed(ClientSession& s) {
  s.closed.store(true);
  s.mu.poke();    // calls waiting for it on their threads leave
  pokeWatcher();  // and those queued through grpcService()
  std::lock_guard<std::mutex> g(s.channel_mu);
  if (s.channel != nullptr) s.channel->stop();
}

std::shared_ptr<AccydService::IdentityLoad> AccydService::identityLoad(const std::string& owner) {
  std::lock_guard<std::mutex> g(load_mu_);
  for (auto it = loads_.begin(); it != loads_.end();) {  // identities with no session left
    it = it->second.expired() ? loads_.erase(it) : std::next(it);
  }
  std::weak_ptr<IdentityLoad>& entry = loads_[owner];
  std::shared_ptr<IdentityLoad> load = entry.lock();
  if (load == nullptr) {
    load = std::make_shared<IdentityLoad>(owner, slotLimit(SlotKind::kLaunch), slotLimit(SlotKind::kCompile));
    entry = load;
  }
  return load;
}

absl::Status AccydService::countWaiting(IdentityLoad& load) {
  if (load.waiting >= limits_.max_waiting_calls_per_identity) {
    return makeError(ErrorKind::kTooManyPrograms,
                     strCat("accyd: ", load.owner.empty() ? "this caller" : load.owner, " has ", load.waiting,
                            " calls waiting (for a busy session or a launch or compile slot), the limit per identity "
                            "is ",
                            limits_.max_waiting_calls_per_identity, " (--max-waiting-calls-per-identity)"));
  }
  ++load.waiting;
  return absl::OkStatus();
}

absl::Status AccydService::startWaiting(IdentityLoad& load) {
  std::lock_guard<std::mutex> g(load_mu_);
  return countWaiting(load);
}

void AccydService::stopWaiting(IdentityLoad& load) {
  std::lock_guard<std::mutex> g(load_mu_);
  --load.waiting;
}

absl::Status AccydService::lockSession(ClientSession& s, const StopCheck& ended,
                                       std::chrono::system_clock::time_point until, std::unique_lock<Gate>* lock) {
  if (admission != nullptr && admission->session == &s && admission->lock_held) {
    admission->lock_held = false;
    *lock = std::unique_lock<Gate>(s.mu, std::adopt_lock);
  } else if (s.mu.tryTake()) {
    *lock = std::unique_lock<Gate>(s.mu, std::adopt_lock);
  } else {
    // Another call of the session runs (a launch may run for long): wait,
    // counted, in the lock's queue (first come, first served).
    ACCY_RETURN_IF_ERROR(startWaiting(*s.load));
    const absl::Status st = s.mu.take(
        [&]() -> absl::Status {
          if (s.closed.load()) return closedWhileWaiting();
          return ended();
        },
        [&] { return s.closed.load() ? Clock::now() : nextWake(until); });
    stopWaiting(*s.load);
    ACCY_RETURN_IF_ERROR(st);
    *lock = std::unique_lock<Gate>(s.mu, std::adopt_lock);
  }
  if (s.closed.load()) {
    lock->unlock();
    return closedWhileWaiting();
  }
  return absl::OkStatus();
}

int64_t AccydService::slotLimit(SlotKind kind) const {
  const int64_t asked = kind == SlotKind::kLaunch ? limits_.max_launches_per_identity : limits_.max_compiles_per_identity;
  return asked > 0 ? asked : defaultLaunchesPerIdentity();
}

absl::Status AccydService::compileQueueTimedOut(const IdentityLoad& load) const {
  const int64_t limit = slotLimit(SlotKind::kCompile);
  return makeError(ErrorKind::kTooManyPrograms,
                   strCat("accyd: ", load.owner.empty() ? "this caller" : load.owner, " runs ", limit,
                          " compiles (--max-compiles-per-identity=", limit, "); this one waited ",
                          limits_.compile_queue_ms, " ms for one of them to end (--compile-queue-ms); try again later"));
}

absl::Status AccydService::takeSlot(IdentityLoad& load, SlotKind kind, const StopCheck& ended,
                                    std::chrono::system_clock::time_point until) {
  Gate& gate = slots(load, kind);
  if (admission != nullptr && admission->slots == &gate && admission->slot_held) {
    admission->slot_held = false;
    return absl::OkStatus();
  }
  if (gate.tryTake()) return absl::OkStatus();
  // A compile waits at most --compile-queue-ms for one of its identity's
  // slots, as for one of the cache's; a launch as long as its call may.
  // Woken when one of the identity's own slots is given back.
  const auto give_up = kind == SlotKind::kCompile
                           ? std::chrono::system_clock::now() + std::chrono::milliseconds(limits_.compile_queue_ms)
                           : std::chrono::system_clock::time_point::max();
  ACCY_RETURN_IF_ERROR(startWaiting(load));
  const absl::Status st = gate.take(
      [&]() -> absl::Status {
        ACCY_RETURN_IF_ERROR(ended());
        if (std::chrono::system_clock::now() >= give_up) return compileQueueTimedOut(load);
        return absl::OkStatus();
      },
      [&] { return nextWake(std::min(until, give_up)); });
  stopWaiting(load);
  return st;
}

void AccydService::giveSlot(IdentityLoad& load, SlotKind kind) { slots(load, kind).give(); }

grpc::Status AccydService::Negotiate(grpc::ServerContextBase* ctx, const pb::NegotiateRequest* req,
                                     pb::NegotiateReply* reply) {
  CallLog call(this, "Negotiate", std::string());
  for (uint32_t v : req->versions()) {
    if (v == kProtocolVersion) {
      reply->set_version(v);
      return finish(ctx, reply, absl::OkStatus());
    }
  }
  return finish(ctx, reply,
                makeError(ErrorKind::kUnsupportedVersion,
                          strCat("accyd: speaks protocol version ", kProtocolVersion, "; the client offered none of it")));
}

grpc::Status AccydService::ServerInfo(grpc::ServerContextBase* ctx, const pb::ServerInfoRequest*,
                                      pb::ServerInfoReply* reply) {
  CallLog call(this, "ServerInfo", std::string());
  const executable::BuildRecord& record = executable::buildRecord();
  reply->mutable_build_record()->set_stamped(record.stamped);
  for (const auto& [k, v] : record.entries) (*reply->mutable_build_record()->mutable_entries())[k] = v;
  for (const auto& d : devices_) {
    reply->add_devices(d->info().name);
    for (const std::string& t : d->info().targets) reply->add_targets(t);
  }
  const CacheStats s = cache_.stats();
  pb::CacheStats* c = reply->mutable_cache();
  c->set_memory_entries(s.memory_entries);
  c->set_memory_hits(s.memory_hits);
  c->set_disk_entries(s.disk_entries);
  c->set_disk_hits(s.disk_hits);
  c->set_disk_bytes(s.disk_bytes);
  c->set_misses(s.misses);
  c->set_corrupt_entries(s.corrupt_entries);
  c->set_disk_enabled(s.disk_enabled);
  c->set_disk_disabled_reason(s.disk_disabled_reason);
  reply->set_protocol_version(kProtocolVersion);
  reply->set_version(kVersion);
  reply->set_sessions(sessionCount());
  reply->set_calls_in_flight(static_cast<uint64_t>(std::max<int64_t>(0, callsInFlight() - 1)));
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::OpenSession(grpc::ServerContextBase* ctx, const pb::OpenSessionRequest*,
                                       pb::OpenSessionReply* reply) {
  CallLog call(this, "OpenSession", std::string());
  auto s = std::make_shared<ClientSession>();
  session::SessionOptions options;
  options.max_programs = static_cast<uint32_t>(limits_.max_programs_per_session);
  options.max_scratch_bytes = limits_.max_scratch_bytes;
  options.check_numerics = limits_.check_numerics;
  options.max_compile_nodes = limits_.max_compile_nodes;
  // Programs compile on the device serving the requested target, through
  // the one compile path (backends::compileProgram) with the shared cache
  // in front of each module: a program with loops compiles a module per
  // loop-free stage and per body, each cached on its own, and one Invoke
  // runs the whole loop, the call's deadline and cancellation asked between
  // steps.
  options.compiler = [this](const tensor::Program& program, std::string_view bytes, const session::CompileSpec& spec,
                            session::CompileInfo* info)
      -> absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> {
    const backends::Backend* device = deviceServing(spec.target);
    if (device == nullptr) {
      std::string targets;
      for (const auto& d : devices_) {
        for (const std::string& t : d->info().targets) targets += (targets.empty() ? "" : ", ") + t;
      }
      return makeError(ErrorKind::kCompileFailed,
                       strCat("accyd: target '", spec.target, "' is not served here; targets: ", targets));
    }
    bool all_hit = true;
    std::string level;
    auto loaded = backends::compileProgram(
        program, spec.target,
        [&](const tensor::Program& stage) {
          // The program itself comes with its bytes; a stage is encoded.
          auto one = &stage == &program ? cache_.get(stage, bytes, *device, spec.target, spec.options, &level)
                                        : cache_.get(stage, wire::encode(stage), *device, spec.target, spec.options,
                                                     &level);
          all_hit = all_hit && !level.empty();
          return one;
        },
        // A scan's kernel runs at most about 2^22 units of work (a few
        // milliseconds) between two asks of the call's stop check, so a
        // deadline stops any scan in time.
        backends::ProgramOptions{.scan_kernel_work = int64_t{1} << 22});
    if (!loaded.ok()) return loaded.status();
    const bool staged = dynamic_cast<const backends::StagedProgram*>(loaded->get()) != nullptr;
    info->cache_hit = all_hit;
    info->cache_level = !all_hit ? "" : staged ? "stages" : level;
    return loaded;
  };
  s->table = std::make_unique<session::Session>(options);
  s->deadline = (Clock::now() + std::chrono::seconds(limits_.lease_seconds)).time_since_epoch().count();
  s->owner = identityOf(ctx);
  s->load = identityLoad(s->owner);
  s->service = this;
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += absl::StrCat(absl::Hex(rd(), absl::kZeroPad8));
  {
    std::lock_guard<std::mutex> g(mu_);
    if (static_cast<int64_t>(sessions_.size()) >= limits_.max_sessions) {
      return finish(ctx, reply,
                    makeError(ErrorKind::kTooManyPrograms,
                              strCat("accyd: ", sessions_.size(), " sessions are open, the limit is ",
                                     limits_.max_sessions)));
    }
    // Each identity (a client certificate, a Unix user) has its own quota,
    // so one client cannot take every session.
    if (!s->owner.empty()) {
      int64_t owned = 0;
      for (const auto& [other_id, other] : sessions_) owned += other->owner == s->owner ? 1 : 0;
      if (owned >= limits_.max_sessions_per_identity) {
        return finish(ctx, reply,
                      makeError(ErrorKind::kTooManyPrograms,
                                strCat("accyd: ", s->owner, " has ", owned, " sessions open, the limit per identity is ",
                                       limits_.max_sessions_per_identity, " (--max-sessions-per-identity)")));
      }
    }
    sessions_[id] = s;
  }
  s->id = id;
  reply->set_session_id(id);
  call.setSession(id);
  reply->set_lease_seconds(limits_.lease_seconds);
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::KeepAlive(grpc::ServerContextBase* ctx, const pb::KeepAliveRequest* req,
                                     pb::KeepAliveReply* reply) {
  CallLog call(this, "KeepAlive", req->session_id());
  if (!find(ctx, req->session_id())) return finish(ctx, reply, noSession(req->session_id()));
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::CloseSession(grpc::ServerContextBase* ctx, const pb::CloseSessionRequest* req,
                                        pb::CloseSessionReply* reply) {
  CallLog call(this, "CloseSession", req->session_id());
  std::shared_ptr<ClientSession> closed;  // freed after the lock
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = sessions_.find(req->session_id());
    if (it == sessions_.end() || it->second->owner != identityOf(ctx)) {
      return finish(ctx, reply, noSession(req->session_id()));
    }
    closed = std::move(it->second);
    sessions_.erase(it);
  }
  markClosed(*closed);  // what it runs stops; calls waiting on it leave
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::Compile(grpc::ServerContextBase* ctx, const pb::CompileRequest* req, pb::CompileReply* reply) {
  CallLog call(this, "Compile", req->session_id());
  if (req->program().size() >= kTrimAfterBytes) trim_wanted_.store(true);
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  const CallEnded waited(ctx, ErrorKind::kCompileFailed, "wait for the session");
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, [&waited] { return waited(); }, waited.until(), &lock); !st.ok()) {
    return finish(ctx, reply, st);
  }
  // The target's registry entry (compiler/codegen/targets.h) decides what
  // is a target and which modes it compiles; the session changes only once
  // the request is valid.
  const std::string target = req->target().empty() ? "x86_64" : req->target();
  if (absl::StatusOr<const codegen::TargetEntry*> entry = codegen::findTarget(target); !entry.ok()) {
    return finish(ctx, reply, entry.status());
  }
  // Options: "mode" = exact | fast | tf32 (codegen::ArithmeticMode).
  backends::CompileOptions options;
  for (const auto& [key, value] : req->options()) {
    if (key != "mode") {
      return finish(ctx, reply, makeError(ErrorKind::kInvalidArgument,
                                          strCat("accyd: unknown compile option '", quoted(key), "' (known: mode)")));
    }
    auto mode = codegen::parseArithmeticMode(value);
    if (!mode.ok()) return finish(ctx, reply, mode.status());
    options.mode = *mode;
  }
  if (absl::Status st = codegen::checkMode(target, options.mode); !st.ok()) return finish(ctx, reply, st);
  // The identity's program quota, reserved before compiling.
  {
    std::lock_guard<std::mutex> g(mu_);
    const int64_t held = s->owner.empty() ? 0 : programsOf(s->owner);
    if (!s->owner.empty() && held >= limits_.max_programs_per_identity) {
      return finish(ctx, reply,
                    makeError(ErrorKind::kTooManyPrograms,
                              strCat("accyd: ", s->owner, " holds ", held, " programs in its sessions, the limit per "
                                     "identity is ", limits_.max_programs_per_identity,
                                     " (--max-programs-per-identity)")));
    }
    ++s->programs;
  }
  call.setDevice(deviceFor(target));
  const auto start = Clock::now();
  // The compile stops, within milliseconds, once its call is cancelled or
  // its deadline passes; the cache adds its time limit and the limit of
  // compiles at once, and lets other sessions waiting for the same
  // program compile it themselves.
  // --max-compile-ms bounds the whole program here (a program with loops
  // compiles a module per stage; the cache bounds each module too).
  // The time limit counts from when the compile has its identity's slot.
  CallEnded ended(ctx, ErrorKind::kCompileFailed, "compile");
  ended.whenClosed(&s->closed);
  const StopCheck call_ended = [&ended]() { return ended(); };
  ScopedStopCheck scoped_stop(&call_ended);
  session::CompileInfo info;
  absl::StatusOr<session::Handle> handle;
  if (absl::Status slot = takeSlot(*s->load, SlotKind::kCompile, call_ended, ended.until()); !slot.ok()) {
    handle = slot;
  } else {
    ended.within(limits_.max_compile_ms, strCat("the program's compile, all its stages together, took longer than ",
                                                limits_.max_compile_ms, " ms (--max-compile-ms)"));
    handle = s->table->compile(req->program(), session::CompileSpec{target, options}, &info);
    giveSlot(*s->load, SlotKind::kCompile);
  }
  reply->set_compile_micros(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
  if (!handle.ok()) {
    std::lock_guard<std::mutex> g(mu_);
    --s->programs;
    return finish(ctx, reply, handle.status());
  }
  s->device_of[handle->index] = deviceFor(target);
  reply->mutable_handle()->set_index(handle->index);
  reply->mutable_handle()->set_generation(handle->generation);
  describe(*s->table->inputDescriptors(*handle), reply->mutable_inputs());
  describe(*s->table->outputDescriptors(*handle), reply->mutable_outputs());
  reply->set_cache_hit(info.cache_hit);
  reply->set_cache_level(info.cache_level);
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::Release(grpc::ServerContextBase* ctx, const pb::ReleaseRequest* req, pb::ReleaseReply* reply) {
  CallLog call(this, "Release", req->session_id());
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  const CallEnded waited(ctx, ErrorKind::kTooManyPrograms, "wait for the session");
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, [&waited] { return waited(); }, waited.until(), &lock); !st.ok()) {
    return finish(ctx, reply, st);
  }
  const absl::Status st = s->table->release(session::Handle{req->handle().index(), req->handle().generation()});
  if (st.ok()) {
    std::lock_guard<std::mutex> g(mu_);
    --s->programs;
  }
  return finish(ctx, reply, st);
}

grpc::Status AccydService::RegisterRegion(grpc::ServerContextBase* ctx, const pb::RegisterRegionRequest* req,
                                          pb::RegisterRegionReply* reply) {
  CallLog call(this, "RegisterRegion", req->session_id());
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  const CallEnded waited(ctx, ErrorKind::kTooManyPrograms, "wait for the session");
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, [&waited] { return waited(); }, waited.until(), &lock); !st.ok()) {
    return finish(ctx, reply, st);
  }
  if (static_cast<int64_t>(s->regions.size()) >= limits_.max_regions_per_session) {
    return finish(ctx, reply,
                  makeError(ErrorKind::kTooManyPrograms,
                            strCat("accyd: the session holds ", s->regions.size(), " regions, the limit is ",
                                   limits_.max_regions_per_session)));
  }
  auto mapping = regions_.claim(req->token());
  if (!mapping.ok()) return finish(ctx, reply, mapping.status());
  int64_t held = 0;
  for (const auto& [id, region] : s->regions) held += static_cast<int64_t>(region->size());
  if (held + static_cast<int64_t>((*mapping)->size()) > limits_.max_region_bytes_per_session) {
    // The claimed mapping is dropped (unmapped) here: the token is spent.
    return finish(ctx, reply,
                  makeError(ErrorKind::kTooManyPrograms,
                            strCat("accyd: the session's regions hold ", held, " bytes; this one of ",
                                   (*mapping)->size(), " would pass the limit of ",
                                   limits_.max_region_bytes_per_session, " bytes per session")));
  }
  // And all of the identity's sessions together.
  {
    std::lock_guard<std::mutex> g(mu_);
    const int64_t owned = s->owner.empty() ? 0 : regionBytesOf(s->owner);
    if (!s->owner.empty() &&
        owned + static_cast<int64_t>((*mapping)->size()) > limits_.max_region_bytes_per_identity) {
      return finish(ctx, reply,
                    makeError(ErrorKind::kTooManyPrograms,
                              strCat("accyd: ", s->owner, "'s regions hold ", owned, " bytes; this one of ",
                                     (*mapping)->size(), " would pass the limit of ",
                                     limits_.max_region_bytes_per_identity,
                                     " bytes per identity (--max-region-bytes-per-identity)")));
    }
    s->region_bytes += static_cast<int64_t>((*mapping)->size());
    ++s->region_count;
  }
  // Devices that move host memory by DMA (cuda: cuMemHostRegister) pin the
  // region once here rather than staging it on every invoke. A device that
  // refuses leaves invokes working through its staging copies.
  for (const auto& device : devices_) {
    auto registration = device->registerHostMemory((*mapping)->data(), (*mapping)->size());
    if (registration.ok() && *registration != nullptr) (*mapping)->keepRegistration(std::move(*registration));
  }
  const uint64_t id = s->next_region++;
  reply->set_region(id);
  reply->set_size((*mapping)->size());
  s->regions[id] = std::move(*mapping);
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::UnregisterRegion(grpc::ServerContextBase* ctx, const pb::UnregisterRegionRequest* req,
                                            pb::UnregisterRegionReply* reply) {
  CallLog call(this, "UnregisterRegion", req->session_id());
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  stopChannelIn(*s, req->region());
  const CallEnded waited(ctx, ErrorKind::kTooManyPrograms, "wait for the session");
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, [&waited] { return waited(); }, waited.until(), &lock); !st.ok()) {
    return finish(ctx, reply, st);
  }
  auto it = s->regions.find(req->region());
  if (it == s->regions.end()) {
    return finish(ctx, reply, makeError(ErrorKind::kInvalidBuffer, strCat("accyd: no region ", req->region())));
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    s->region_bytes -= static_cast<int64_t>(it->second->size());
    --s->region_count;
  }
  s->regions.erase(it);
  // Unregistering the channel's region closes the channel; its worker
  // stops after the session's lock is let go (it may be waiting for it).
  std::unique_ptr<Channel> closed;
  if (s->channel != nullptr && s->channel_region == req->region()) {
    std::lock_guard<std::mutex> g(s->channel_mu);
    closed = std::move(s->channel);
    s->channel_region = 0;
  }
  lock.unlock();
  closed.reset();
  return finish(ctx, reply, absl::OkStatus());
}

grpc::Status AccydService::ListRegions(grpc::ServerContextBase* ctx, const pb::ListRegionsRequest* req,
                                       pb::ListRegionsReply* reply) {
  CallLog call(this, "ListRegions", req->session_id());
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  const CallEnded waited(ctx, ErrorKind::kTooManyPrograms, "wait for the session");
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, [&waited] { return waited(); }, waited.until(), &lock); !st.ok()) {
    return finish(ctx, reply, st);
  }
  for (const auto& [id, m] : s->regions) {
    pb::RegionInfo* r = reply->add_regions();
    r->set_region(id);
    r->set_size(m->size());
  }
  return finish(ctx, reply, absl::OkStatus());
}

void AccydService::setHealthListener(
    std::function<void(const std::string& device, bool serving, const std::string& why)> listener) {
  std::lock_guard<std::mutex> lock(health_mu_);
  health_listener_ = std::move(listener);
  serving_.assign(devices_.size(), true);
  for (const auto& d : devices_) health_listener_(d->info().name, true, "");
}

void AccydService::checkDeviceHealth() {
  std::lock_guard<std::mutex> lock(health_mu_);
  if (!health_listener_) return;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const absl::Status h = devices_[i]->health();
    if (h.ok() == serving_[i]) continue;
    serving_[i] = h.ok();
    health_listener_(devices_[i]->info().name, h.ok(), std::string(h.message()));
  }
}

absl::Status AccydService::invokeLocked(ClientSession& s, session::Handle handle, std::span<const BufferRef> inputs,
                                       std::span<const BufferRef> outputs, std::vector<std::string>* inline_outputs,
                                       CallLog& call, uint64_t* run_micros,
                                       std::chrono::system_clock::time_point until) {
  if (auto it = s.device_of.find(handle.index); it != s.device_of.end()) call.setDevice(it->second);
  auto outs = s.table->outputDescriptors(handle);
  if (!outs.ok()) return outs.status();
  // Resolve a region reference, bounds-checked against the mapping.
  auto resolve = [&](const BufferRef& r, std::span<std::byte>* out) -> absl::Status {
    auto it = s.regions.find(r.region);
    if (it == s.regions.end()) {
      return makeError(ErrorKind::kInvalidBuffer, strCat("accyd: the session has no region ", r.region));
    }
    const uint64_t size = it->second->size();
    if (r.offset > size || r.size > size - r.offset) {
      return makeError(ErrorKind::kInvalidBuffer, strCat("accyd: bytes [", r.offset, ", +", r.size,
                                                        ") lie outside region ", r.region, " of ", size, " bytes"));
    }
    // The channel's mailbox is the daemon's to write: no buffer may lie in it.
    if (s.channel != nullptr && r.region == s.channel_region && r.offset < channel::kDataOffset && r.size > 0) {
      return makeError(ErrorKind::kInvalidBuffer,
                       strCat("accyd: bytes [", r.offset, ", +", r.size, ") of region ", r.region,
                              " lie in the invoke channel's mailbox (data begins at ", channel::kDataOffset, ")"));
    }
    *out = std::span<std::byte>(it->second->data() + r.offset, r.size);
    return absl::OkStatus();
  };
  std::vector<std::span<const std::byte>> input_views;
  std::vector<std::vector<std::byte>> aligned_copies;
  aligned_copies.reserve(inputs.size());
  for (const BufferRef& b : inputs) {
    if (b.placed) {
      std::span<std::byte> view;
      if (absl::Status st = resolve(b, &view); !st.ok()) return st;
      input_views.emplace_back(view);
    } else if (reinterpret_cast<uintptr_t>(b.bytes.data()) % 8 != 0) {
      aligned_copies.emplace_back(b.bytes.begin(), b.bytes.end());
      input_views.emplace_back(aligned_copies.back());
    } else {
      input_views.emplace_back(b.bytes);
    }
  }
  if (!outputs.empty() && outputs.size() != outs->size()) {
    return makeError(ErrorKind::kInvalidBuffer,
                     strCat("accyd: ", outputs.size(), " output places for ", outs->size(), " outputs"));
  }
  auto placed = [&](size_t k) { return k < outputs.size() && outputs[k].placed; };
  // An output left inline comes back in the reply; bytes given in its
  // place say how large the caller expects it, and must be right.
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!outputs[k].placed && !outputs[k].bytes.empty() && outputs[k].bytes.size() != (*outs)[k].byte_size) {
      return makeError(ErrorKind::kInvalidBuffer,
                       strCat("accyd: output ", k, " is given inline with ", outputs[k].bytes.size(),
                              " bytes; it holds ", (*outs)[k].byte_size, " (leave it empty to have it returned)"));
    }
  }
  // Outputs that come back inline must fit one reply: refuse before
  // allocating them (a program's output may be gigabytes).
  uint64_t inline_bytes = 0;
  for (size_t k = 0; k < outs->size(); ++k) {
    if (placed(k)) continue;
    if (inline_outputs == nullptr) {
      return makeError(ErrorKind::kInvalidBuffer,
                       strCat("accyd: output ", k, " has no place; through the invoke channel every output is "
                              "placed in a region"));
    }
    inline_bytes += (*outs)[k].byte_size;
  }
  if (inline_bytes > static_cast<uint64_t>(limits_.max_message_bytes)) {
    return makeError(ErrorKind::kInvalidBuffer,
                     strCat("accyd: the outputs to return inline hold ", inline_bytes,
                            " bytes, more than a reply may carry (--max-message-bytes=", limits_.max_message_bytes,
                            "); place them in shared-memory regions"));
  }
  // One of the identity's launch slots (fair shares), waited for while
  // the call may (the stop check its caller installed).
  ACCY_RETURN_IF_ERROR(takeSlot(*s.load, SlotKind::kLaunch, [] { return checkStop(); }, until));
  struct GiveSlot {
    AccydService* service;
    IdentityLoad& load;
    ~GiveSlot() { service->giveSlot(load, SlotKind::kLaunch); }
  } give_slot{this, *s.load};
  // The daemon-wide budgets: refused with the figures, before allocating.
  auto scratch = s.table->scratchBytes(handle);
  if (!scratch.ok()) return scratch.status();
  const int64_t launch_bytes = *scratch + static_cast<int64_t>(inline_bytes);
  {
    std::lock_guard<std::mutex> budget(budget_mu_);
    if (invokes_in_flight_ >= limits_.max_concurrent_invokes) {
      return makeError(ErrorKind::kOutOfMemory, strCat("accyd: ", invokes_in_flight_, " invokes are running, the limit is ",
                                                       limits_.max_concurrent_invokes, " (--max-concurrent-invokes)"));
    }
    if (launch_bytes_in_flight_ + launch_bytes > limits_.max_launch_bytes) {
      return makeError(ErrorKind::kOutOfMemory,
                       strCat("accyd: this invoke needs ", launch_bytes, " bytes of scratch and inline outputs; ",
                              launch_bytes_in_flight_, " of the daemon's ", limits_.max_launch_bytes,
                              " (--max-launch-bytes) are held by invokes in flight"));
    }
    ++invokes_in_flight_;
    launch_bytes_in_flight_ += launch_bytes;
  }
  struct Release {
    AccydService* service;
    int64_t bytes;
    ~Release() {
      std::lock_guard<std::mutex> budget(service->budget_mu_);
      --service->invokes_in_flight_;
      service->launch_bytes_in_flight_ -= bytes;
    }
  } release_budget{this, launch_bytes};
  std::vector<std::span<std::byte>> output_views;
  if (inline_outputs != nullptr) inline_outputs->assign(outs->size(), std::string());
  for (size_t k = 0; k < outs->size(); ++k) {
    if (placed(k)) {
      std::span<std::byte> view;
      if (absl::Status st = resolve(outputs[k], &view); !st.ok()) return st;
      output_views.push_back(view);
    } else {
      std::string& bytes = (*inline_outputs)[k];
      bytes.resize((*outs)[k].byte_size);
      output_views.emplace_back(reinterpret_cast<std::byte*>(bytes.data()), bytes.size());
    }
  }
  const auto start = Clock::now();
  absl::Status st = s.table->invoke(handle, input_views, output_views);
  *run_micros = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
  if (!st.ok()) checkDeviceHealth();  // a failed launch may have left its device unable to run work
  return st;
}

grpc::Status AccydService::Invoke(grpc::ServerContextBase* ctx, const pb::InvokeRequest* req, pb::InvokeReply* reply) {
  CallLog call(this, "Invoke", req->session_id());
  if (req->inputs_size() + req->outputs_size() > 0 && req->ByteSizeLong() >= kTrimAfterBytes) trim_wanted_.store(true);
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  // A launch stops between its pieces once the call is cancelled (the
  // client went away, the daemon drains), its deadline has passed, its
  // session was closed, or it ran past --max-call-ms; waiting for the
  // session ends the same way.
  CallEnded ended(ctx, ErrorKind::kLaunchFailed, "launch");
  ended.whenClosed(&s->closed).within(limits_.max_call_ms,
                                      strCat("the call ran past the daemon's limit of ", limits_.max_call_ms,
                                             " ms for one call (--max-call-ms)"));
  const StopCheck call_ended = [&ended]() { return ended(); };  // one pointer: no allocation per invoke
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, call_ended, ended.until(), &lock); !st.ok()) return finish(ctx, reply, st);
  auto refOf = [](const pb::Buffer& b) {
    BufferRef r;
    if (b.has_region()) {
      r.placed = true;
      r.region = b.region().region();
      r.offset = b.region().offset();
      r.size = b.region().size();
    } else {
      r.bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(b.inline_bytes().data()),
                                           b.inline_bytes().size());
    }
    return r;
  };
  std::vector<BufferRef> inputs, outputs;
  for (const pb::Buffer& b : req->inputs()) inputs.push_back(refOf(b));
  for (const pb::Buffer& b : req->outputs()) outputs.push_back(refOf(b));
  ScopedStopCheck scoped_stop(&call_ended);
  std::vector<std::string> inline_outputs;
  uint64_t run_micros = 0;
  const absl::Status st = invokeLocked(*s, session::Handle{req->handle().index(), req->handle().generation()}, inputs,
                                       outputs, &inline_outputs, call, &run_micros, ended.until());
  reply->set_run_micros(run_micros);
  if (!st.ok()) return finish(ctx, reply, st);
  for (size_t k = 0; k < inline_outputs.size(); ++k) {
    if (!(k < outputs.size() && outputs[k].placed)) reply->add_inline_outputs(std::move(inline_outputs[k]));
  }
  return finish(ctx, reply, absl::OkStatus());
}

AccydService::ClientSession::~ClientSession() {
  channel.reset();  // its worker stops before anything it uses goes
  if (service == nullptr || !service->session_freed_hook_) return;
  bool held = false;
  std::thread([&] {
    if (service->mu_.try_lock()) {
      service->mu_.unlock();
    } else {
      held = true;
    }
  }).join();
  service->session_freed_hook_(held);
}

void AccydService::drain(std::chrono::steady_clock::time_point deadline) {
  std::map<std::string, std::shared_ptr<ClientSession>> closing;
  {
    std::lock_guard<std::mutex> g(mu_);
    closing.swap(sessions_);
  }
  for (auto& [id, s] : closing) {
    if (s->channel != nullptr) s->channel->drain(deadline);
  }
}

grpc::Status AccydService::OpenChannel(grpc::ServerContextBase* ctx, const pb::OpenChannelRequest* req,
                                       pb::OpenChannelReply* reply) {
  CallLog call(this, "OpenChannel", req->session_id());
  auto s = find(ctx, req->session_id());
  if (!s) return finish(ctx, reply, noSession(req->session_id()));
  const CallEnded waited(ctx, ErrorKind::kTooManyPrograms, "wait for the session");
  std::unique_lock<Gate> lock;
  if (absl::Status st = lockSession(*s, [&waited] { return waited(); }, waited.until(), &lock); !st.ok()) {
    return finish(ctx, reply, st);
  }
  if (s->channel != nullptr) {
    return finish(ctx, reply,
                  makeError(ErrorKind::kTooManyPrograms,
                            strCat("accyd: the session has an invoke channel already (region ", s->channel_region,
                                   "); one per session")));
  }
  auto it = s->regions.find(req->region());
  if (it == s->regions.end()) {
    return finish(ctx, reply, makeError(ErrorKind::kInvalidBuffer, strCat("accyd: the session has no region ", req->region())));
  }
  const std::shared_ptr<Mapping>& mapping = it->second;
  if (mapping->size() < channel::kDataOffset) {
    return finish(ctx, reply,
                  makeError(ErrorKind::kInvalidBuffer, strCat("accyd: region ", req->region(), " holds ", mapping->size(),
                                                              " bytes; a channel needs at least ", channel::kDataOffset)));
  }
  const auto* box = reinterpret_cast<const channel::Mailbox*>(mapping->data());
  if (box->magic != channel::kMagic || box->version != channel::kVersion) {
    return finish(ctx, reply,
                  makeError(ErrorKind::kInvalidBuffer,
                            strCat("accyd: region ", req->region(), " is not an invoke channel of version ",
                                   channel::kVersion, " (magic ", absl::Hex(box->magic), ", version ", box->version, ")")));
  }
  std::lock_guard<std::mutex> g(s->channel_mu);
  s->channel_region = req->region();
  s->channel = std::make_unique<Channel>(this, s.get(), req->region(), mapping);
  reply->set_data_offset(channel::kDataOffset);
  return finish(ctx, reply, absl::OkStatus());
}

// One call through grpcService() that needs its session: it waits for the
// session's lock and then (Compile, Invoke) for one of its identity's
// slots as a ticket in each one's queue, holding no thread; once it holds
// them, its handler runs on one of the service's workers, which adopts
// them (Admission). The watcher sends it away when its wait ends first.
class AccydService::Pending final : public grpc::ServerUnaryReactor {
 public:
  using Handler = std::function<grpc::Status()>;
  using Refusal = std::function<grpc::Status(const absl::Status&)>;
  Pending(AccydService* service, grpc::CallbackServerContext* ctx, const char* method, std::string session_id,
          std::shared_ptr<ClientSession> session, std::optional<SlotKind> slot, ErrorKind kind, bool launch,
          Handler handler, Refusal refusal)
      : service_(service),
        ctx_(ctx),
        method_(method),
        session_id_(std::move(session_id)),
        s_(std::move(session)),
        slot_(slot),
        handler_(std::move(handler)),
        refusal_(std::move(refusal)),
        start_(Clock::now()),
        waited_(ctx, kind, launch ? "launch" : "wait for the session") {
    if (launch) {
      waited_.within(service->limits_.max_call_ms, strCat("the call ran past the daemon's limit of ",
                                                          service->limits_.max_call_ms,
                                                          " ms for one call (--max-call-ms)"));
    }
  }

  static void start(const std::shared_ptr<Pending>& p) {
    p->self_ = p;
    p->service_->calls_waiting_.fetch_add(1);
    std::unique_lock<std::mutex> g(p->mu_);
    p->queue(&p->s_->mu, &g);
  }

  void OnCancel() override { service_->pokeWatcher(); }
  void OnDone() override {
    std::shared_ptr<Pending> self = std::move(self_);  // this may go with it
  }

  // Asked by the watcher: false once the call no longer waits (it runs, or
  // it left now because its wait ended). `wake` comes no later than when
  // it must next be asked.
  bool check(Clock::time_point* wake) {
    absl::Status why;
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stage_ != Stage::kLock && stage_ != Stage::kSlot) return false;
      if (s_->closed.load()) {
        why = closedWhileWaiting();
      } else {
        why = waited_();
      }
      const auto now = std::chrono::system_clock::now();
      if (why.ok() && stage_ == Stage::kSlot && now >= give_up_) why = service_->compileQueueTimedOut(*s_->load);
      if (why.ok()) {
        const auto until = std::min(waited_.until(), stage_ == Stage::kSlot ? give_up_ : waited_.until());
        if (until - now < *wake - Clock::now()) *wake = Clock::now() + std::max(until - now, decltype(until - now)(0));
        return true;
      }
      if (!gate_->withdraw(ticket_)) return false;  // granted as it was asked: it goes on
      stage_ = Stage::kDone;
    }
    leave(why);
    return false;
  }

 private:
  enum class Stage { kLock, kSlot, kRunning, kDone };

  // Takes a place in `gate` now, or queues for one (counted among the
  // identity's waiting calls, or refused over their limit). Under mu_,
  // which it releases.
  void queue(Gate* gate, std::unique_lock<std::mutex>* g) {
    stage_ = gate == &s_->mu ? Stage::kLock : Stage::kSlot;
    if (gate->tryTake()) {
      g->unlock();
      granted();
      return;
    }
    if (!counted_) {
      if (absl::Status st = service_->startWaiting(*s_->load); !st.ok()) {
        stage_ = Stage::kDone;
        g->unlock();
        leave(st);
        return;
      }
      counted_ = true;
    }
    if (stage_ == Stage::kSlot && slot_ == SlotKind::kCompile) {
      give_up_ = std::chrono::system_clock::now() + std::chrono::milliseconds(service_->limits_.compile_queue_ms);
    }
    gate_ = gate;
    ticket_ = std::make_shared<Gate::Ticket>();
    ticket_->granted = [this] { granted(); };
    const bool taken = gate->takeOrQueue(ticket_);
    g->unlock();
    if (taken) {
      granted();
    } else {
      service_->watch(self_);
    }
  }

  // It holds the place it waited for: on to the slot, or to a worker.
  void granted() {
    std::unique_lock<std::mutex> g(mu_);
    (stage_ == Stage::kLock ? holds_lock_ : holds_slot_) = true;
    if (s_->closed.load()) {  // closed as it waited: it says so, as one woken by the watcher would
      stage_ = Stage::kDone;
      g.unlock();
      leave(closedWhileWaiting());
      return;
    }
    if (stage_ == Stage::kLock && slot_.has_value()) {
      queue(&slots(*s_->load, *slot_), &g);
      return;
    }
    stage_ = Stage::kRunning;
    g.unlock();
    if (counted_) service_->stopWaiting(*s_->load);
    service_->calls_waiting_.fetch_sub(1);
    service_->workers_->run([self = self_] { self->run(); });
  }

  void run() {
    Admission held{s_.get(), true, slot_.has_value() ? &slots(*s_->load, *slot_) : nullptr, slot_.has_value(), start_};
    admission = &held;
    const grpc::Status status = handler_();
    admission = nullptr;
    if (held.slot_held) service_->giveSlot(*s_->load, *slot_);
    if (held.lock_held) s_->mu.give();
    Finish(status);
  }

  // Answers `why` without running the handler; gives back the session's
  // lock if it held it (it waited for a slot).
  void leave(const absl::Status& why) {
    if (counted_) service_->stopWaiting(*s_->load);
    if (holds_slot_) service_->giveSlot(*s_->load, *slot_);
    if (holds_lock_) s_->mu.give();
    service_->calls_waiting_.fetch_sub(1);
    Admission timing{.start = start_};
    admission = &timing;
    grpc::Status status;
    {
      CallLog call(service_, method_, session_id_);
      status = refusal_(why);
    }
    admission = nullptr;
    Finish(status);
  }

  AccydService* service_;
  grpc::CallbackServerContext* ctx_;
  const char* method_;
  std::string session_id_;
  std::shared_ptr<ClientSession> s_;
  std::optional<SlotKind> slot_;
  Handler handler_;
  Refusal refusal_;
  Clock::time_point start_;
  std::shared_ptr<Pending> self_;  // until gRPC is done with the call
  std::mutex mu_;
  Stage stage_ = Stage::kLock;
  bool counted_ = false;  // among the identity's waiting calls
  bool holds_lock_ = false, holds_slot_ = false;  // the session's lock, the identity's slot
  Gate* gate_ = nullptr;  // the one it queues in now
  std::shared_ptr<Gate::Ticket> ticket_;
  CallEnded waited_;
  std::chrono::system_clock::time_point give_up_ = std::chrono::system_clock::time_point::max();
};

void AccydService::watch(const std::shared_ptr<Pending>& call) {
  {
    std::lock_guard<std::mutex> g(watch_mu_);
    watched_.push_back(call);
    ++watch_pokes_;  // its deadline may come before the watcher's next wake
  }
  watch_cv_.notify_one();
}

void AccydService::pokeWatcher() {
  {
    std::lock_guard<std::mutex> g(watch_mu_);
    ++watch_pokes_;
  }
  watch_cv_.notify_one();
}

void AccydService::watchLoop() {
  std::unique_lock<std::mutex> g(watch_mu_);
  while (!stopping_.load()) {
    const uint64_t pokes = watch_pokes_;
    Clock::time_point wake = Clock::now() + std::chrono::milliseconds(100);
    std::vector<std::shared_ptr<Pending>> calls;
    calls.reserve(watched_.size());
    for (const std::weak_ptr<Pending>& w : watched_) {
      if (std::shared_ptr<Pending> p = w.lock()) calls.push_back(std::move(p));
    }
    g.unlock();
    std::vector<const Pending*> still;
    for (const std::shared_ptr<Pending>& p : calls) {
      if (p->check(&wake)) still.push_back(p.get());
    }
    g.lock();
    // Calls watched since the scan began stay; those that no longer wait go.
    std::erase_if(watched_, [&](const std::weak_ptr<Pending>& w) {
      std::shared_ptr<Pending> p = w.lock();
      if (p == nullptr) return true;
      const bool scanned = std::find_if(calls.begin(), calls.end(), [&](const auto& c) { return c == p; }) != calls.end();
      return scanned && std::find(still.begin(), still.end(), p.get()) == still.end();
    });
    g.unlock();
    calls.clear();  // a call answered meanwhile may go here, outside the lock
    g.lock();
    watch_cv_.wait_until(g, wake, [&] { return stopping_.load() || watch_pokes_ != pokes; });
  }
}

// accyd's gRPC service: calls that need no session answer at once; the
// others queue for their session (Pending).
class AccydService::Callbacks final : public pb::Accyd::CallbackService {
 public:
  explicit Callbacks(AccydService* service) : s_(service) {}

  grpc::ServerUnaryReactor* Negotiate(grpc::CallbackServerContext* ctx, const pb::NegotiateRequest* req,
                                      pb::NegotiateReply* reply) override {
    return now(ctx, s_->Negotiate(ctx, req, reply));
  }
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* ctx, const pb::ServerInfoRequest* req,
                                       pb::ServerInfoReply* reply) override {
    return now(ctx, s_->ServerInfo(ctx, req, reply));
  }
  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* ctx, const pb::OpenSessionRequest* req,
                                        pb::OpenSessionReply* reply) override {
    return now(ctx, s_->OpenSession(ctx, req, reply));
  }
  grpc::ServerUnaryReactor* KeepAlive(grpc::CallbackServerContext* ctx, const pb::KeepAliveRequest* req,
                                      pb::KeepAliveReply* reply) override {
    return now(ctx, s_->KeepAlive(ctx, req, reply));
  }
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx, const pb::CloseSessionRequest* req,
                                         pb::CloseSessionReply* reply) override {
    return now(ctx, s_->CloseSession(ctx, req, reply));
  }
  grpc::ServerUnaryReactor* Compile(grpc::CallbackServerContext* ctx, const pb::CompileRequest* req,
                                    pb::CompileReply* reply) override {
    return admit(ctx, req, reply, &AccydService::Compile, "Compile", SlotKind::kCompile, ErrorKind::kCompileFailed);
  }
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx, const pb::ReleaseRequest* req,
                                    pb::ReleaseReply* reply) override {
    return admit(ctx, req, reply, &AccydService::Release, "Release", std::nullopt, ErrorKind::kTooManyPrograms);
  }
  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* ctx, const pb::RegisterRegionRequest* req,
                                           pb::RegisterRegionReply* reply) override {
    return admit(ctx, req, reply, &AccydService::RegisterRegion, "RegisterRegion", std::nullopt,
                 ErrorKind::kTooManyPrograms);
  }
  grpc::ServerUnaryReactor* UnregisterRegion(grpc::CallbackServerContext* ctx, const pb::UnregisterRegionRequest* req,
                                             pb::UnregisterRegionReply* reply) override {
    // The channel's region closes the channel before the call waits for
    // the session, which its launch holds.
    if (std::shared_ptr<ClientSession> session = s_->find(ctx, req->session_id())) {
      s_->stopChannelIn(*session, req->region());
    }
    return admit(ctx, req, reply, &AccydService::UnregisterRegion, "UnregisterRegion", std::nullopt,
                 ErrorKind::kTooManyPrograms);
  }
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* ctx, const pb::ListRegionsRequest* req,
                                        pb::ListRegionsReply* reply) override {
    return admit(ctx, req, reply, &AccydService::ListRegions, "ListRegions", std::nullopt, ErrorKind::kTooManyPrograms);
  }
  grpc::ServerUnaryReactor* Invoke(grpc::CallbackServerContext* ctx, const pb::InvokeRequest* req,
                                   pb::InvokeReply* reply) override {
    return admit(ctx, req, reply, &AccydService::Invoke, "Invoke", SlotKind::kLaunch, ErrorKind::kLaunchFailed);
  }
  grpc::ServerUnaryReactor* OpenChannel(grpc::CallbackServerContext* ctx, const pb::OpenChannelRequest* req,
                                        pb::OpenChannelReply* reply) override {
    return admit(ctx, req, reply, &AccydService::OpenChannel, "OpenChannel", std::nullopt, ErrorKind::kTooManyPrograms);
  }

 private:
  static grpc::ServerUnaryReactor* now(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  template <typename Request, typename Reply>
  grpc::ServerUnaryReactor* admit(grpc::CallbackServerContext* ctx, const Request* req, Reply* reply,
                                  grpc::Status (AccydService::*handler)(grpc::ServerContextBase*, const Request*,
                                                                        Reply*),
                                  const char* method, std::optional<SlotKind> slot, ErrorKind kind) {
    std::shared_ptr<ClientSession> session = s_->find(ctx, req->session_id());
    // No such session of this caller: the handler says so at once.
    if (session == nullptr) return now(ctx, (s_->*handler)(ctx, req, reply));
    AccydService* s = s_;
    auto call = std::make_shared<Pending>(
        s, ctx, method, req->session_id(), std::move(session), slot, kind, slot == SlotKind::kLaunch,
        [s, handler, ctx, req, reply] { return (s->*handler)(ctx, req, reply); },
        [ctx, reply](const absl::Status& why) { return finish(ctx, reply, why); });
    Pending::start(call);
    return call.get();
  }

  AccydService* s_;
};

grpc::Service* AccydService::grpcService() { return callbacks_.get(); }

}  // namespace accy::server
