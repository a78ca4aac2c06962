#include "client/remote_session.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <fstream>

#include "accy/v1/accyd.grpc.pb.h"
#include "base/errors.h"
#include "absl/strings/match.h"
#include "base/strings.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "runtime/channel.h"
#include "runtime/statuses.h"

namespace accy::client {

namespace pb = accy::v1;

// Handles of programs held by the daemon carry this bit in their index, so
// they never collide with in-process ones.
constexpr uint32_t kRemoteBit = 0x80000000u;

struct RemoteCore {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Accyd::Stub> stub;
  // The daemon-side session: replaced when the session is re-opened
  // (RemoteSession::reconnect), so read under id_mu.
  mutable std::mutex id_mu;
  std::string session_id;
  std::string id() const {
    std::lock_guard<std::mutex> lock(id_mu);
    return session_id;
  }
  std::string region_socket;  // empty for TCP targets
  std::string host;           // the daemon the session lives on (a gRPC target)
  // Written when a session is (re)opened, read by the keep-alive thread.
  std::atomic<int> lease_seconds{30};

  // Maps a failed call to an accy status: the number from the daemon's
  // `accy-status` trailer, or launch_failed when the daemon was not reached.
  static absl::Status toStatus(const grpc::Status& st, const grpc::ClientContext& ctx, ErrorKind unreachable) {
    if (st.ok()) return absl::OkStatus();
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto it = trailers.find("accy-status");
    if (it == trailers.end()) {
      return makeError(unreachable, strCat("accyd unreachable: ", st.error_message()));
    }
    const int number = std::atoi(std::string(it->second.data(), it->second.size()).c_str());
    return statusError(number, st.error_message());
  }

  // The accy status of a session status number and the daemon's message:
  // the number's kind (runtime/statuses.inc), or launch_failed for ok or a
  // number no status has.
  static absl::Status statusError(int number, std::string message) {
    const std::optional<session::Status> status = session::statusNumbered(number);
    const ErrorKind kind =
        status.has_value() && *status != session::Status::ok ? session::kindOf(*status) : ErrorKind::kLaunchFailed;
    // The daemon's message already starts with the kind's name.
    return makeError(kind, withoutKindPrefix(kind, message));
  }

  // Negotiates the protocol and opens a new session (each call within
  // `timeout`); the session's id and lease replace the old ones.
  absl::Status openSession(std::chrono::milliseconds timeout) {
    grpc::ClientContext negotiate;
    negotiate.set_deadline(std::chrono::system_clock::now() + timeout);
    pb::NegotiateRequest nreq;
    nreq.add_versions(1);
    pb::NegotiateReply nreply;
    if (grpc::Status st = stub->Negotiate(&negotiate, nreq, &nreply); !st.ok()) {
      return toStatus(st, negotiate, ErrorKind::kLaunchFailed);
    }
    grpc::ClientContext open;
    open.set_deadline(std::chrono::system_clock::now() + timeout);
    pb::OpenSessionReply reply;
    if (grpc::Status st = stub->OpenSession(&open, pb::OpenSessionRequest(), &reply); !st.ok()) {
      return toStatus(st, open, ErrorKind::kLaunchFailed);
    }
    std::lock_guard<std::mutex> lock(id_mu);
    session_id = reply.session_id();
    lease_seconds = std::max<int>(1, static_cast<int>(reply.lease_seconds()));
    return absl::OkStatus();
  }

  // Live shared buffers: start -> (size, the buffer).
  std::mutex shared_mu;
  std::map<const std::byte*, std::pair<size_t, SharedBuffer*>> shared;

  // The region and offset of `n` bytes at `p` when they lie inside one
  // shared buffer (under shared_mu).
  std::optional<std::pair<uint64_t, uint64_t>> placeInShared(const std::byte* p, size_t n) const;

  void unregister(const std::byte* data) {
    uint64_t region = 0;
    {
      std::lock_guard<std::mutex> lock(shared_mu);
      auto it = shared.find(data);
      if (it == shared.end()) return;
      region = it->second.second->region_;
      shared.erase(it);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    pb::UnregisterRegionRequest req;
    pb::UnregisterRegionReply reply;
    req.set_session_id(id());
    req.set_region(region);
    stub->UnregisterRegion(&ctx, req, &reply);
  }
};

SharedBuffer::~SharedBuffer() {
  core_->unregister(data_);
  munmap(data_, mapped_);
  if (fd_ >= 0) close(fd_);
}

RemoteSession::RemoteSession(std::shared_ptr<RemoteCore> core, const RemoteOptions& options)
    : core_(std::move(core)), options_(options) {
  if (options_.keep_alive) {
    keep_alive_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(core_->lease_seconds.load() * 1000 / 3), [&] { return stopping_; })) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        pb::KeepAliveRequest req;
        pb::KeepAliveReply reply;
        req.set_session_id(core_->id());
        core_->stub->KeepAlive(&ctx, req, &reply);
      }
    });
  }
}

RemoteSession::~RemoteSession() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (keep_alive_.joinable()) keep_alive_.join();
  grpc::ClientContext ctx;
  pb::CloseSessionRequest req;
  pb::CloseSessionReply reply;
  req.set_session_id(core_->id());
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  core_->stub->CloseSession(&ctx, req, &reply);
}

namespace {

// The hosts a TCP target names, each as a gRPC target of one address:
// every address a dns: name resolves to (a headless Service's name gives
// one per daemon), or each address of an ipv4:/ipv6: list. Also the name
// the daemons' certificates carry (the dns: name).
absl::Status hostsOf(const std::string& target, std::vector<std::string>* hosts, std::string* name) {
  if (target.rfind("dns:", 0) == 0) {
    std::string rest = target.substr(4);
    if (rest.rfind("///", 0) == 0) rest = rest.substr(3);
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) {
      return makeError(ErrorKind::kInvalidArgument, strCat("accyd target '", target, "' must be dns:NAME:PORT"));
    }
    *name = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int err = getaddrinfo(name->c_str(), port.c_str(), &hints, &found); err != 0) {
      return makeError(ErrorKind::kLaunchFailed, strCat("accyd target '", target, "': ", gai_strerror(err)));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      std::string host;
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof text);
        host = strCat("ipv4:", text, ":", port);
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof text);
        host = strCat("ipv6:[", text, "]:", port);
      } else {
        continue;
      }
      if (std::find(hosts->begin(), hosts->end(), host) == hosts->end()) hosts->push_back(host);
    }
    freeaddrinfo(found);
    return absl::OkStatus();
  }
  const std::string scheme = target.substr(0, 5);  // "ipv4:" or "ipv6:"
  for (size_t start = 5; start <= target.size();) {
    const size_t comma = std::min(target.find(',', start), target.size());
    if (comma > start) hosts->push_back(scheme + target.substr(start, comma - start));
    start = comma + 1;
  }
  return absl::OkStatus();
}

// Where the next session of this process starts looking: sessions are
// spread over the hosts in turn, from a random first one.
std::atomic<uint32_t> next_host{static_cast<uint32_t>(std::random_device()())};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteSession>> RemoteSession::connect(const std::string& target,
                                                                      const RemoteOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (target.rfind("unix:", 0) == 0) {
    auto core = std::make_shared<RemoteCore>();
    core->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    core->region_socket = target.substr(5) + ".fd";
    core->host = target;
    core->stub = pb::Accyd::NewStub(core->channel);
    if (absl::Status st = core->openSession(std::chrono::seconds(10)); !st.ok()) return st;
    return std::unique_ptr<RemoteSession>(new RemoteSession(std::move(core), options));
  }
  if (target.rfind("dns:", 0) != 0 && target.rfind("ipv4:", 0) != 0 && target.rfind("ipv6:", 0) != 0) {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("accyd target '", target, "' must start with unix:, dns:, ipv4: or ipv6:"));
  }
  // TCP, always TLS. The session is placed on one host of the target
  // (options.spread_over_hosts) and stays there: its programs and regions
  // live in that daemon.
  std::vector<std::string> hosts;
  std::string name;
  if (options.spread_over_hosts) {
    if (absl::Status st = hostsOf(target, &hosts, &name); !st.ok()) return st;
  }
  if (hosts.empty()) hosts.push_back(target);  // gRPC resolves and picks
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = options.tls_root_certs;
  tls.pem_cert_chain = options.tls_client_cert;
  tls.pem_private_key = options.tls_client_key;
  const std::string server_name = !options.tls_server_name.empty() ? options.tls_server_name : name;
  if (!server_name.empty() && hosts.front() != target) args.SetSslTargetNameOverride(server_name);
  // The next host in turn; one that does not answer is passed over.
  std::string refused;
  const size_t first = next_host.fetch_add(1) % hosts.size();
  for (size_t k = 0; k < hosts.size(); ++k) {
    const std::string& host = hosts[(first + k) % hosts.size()];
    auto core = std::make_shared<RemoteCore>();
    core->channel = grpc::CreateCustomChannel(host, grpc::SslCredentials(tls), args);
    core->host = host;
    core->stub = pb::Accyd::NewStub(core->channel);
    const absl::Status st = core->openSession(std::chrono::seconds(hosts.size() > 1 ? 3 : 10));
    if (st.ok()) return std::unique_ptr<RemoteSession>(new RemoteSession(std::move(core), options));
    if (hosts.size() == 1) return st;
    refused += strCat(refused.empty() ? "" : "; ", host, ": ", st.message());
  }
  return makeError(ErrorKind::kLaunchFailed, strCat("no host of '", target, "' took a session (", refused, ")"));
}

const std::string& RemoteSession::host() const { return core_->host; }

std::string RemoteSession::sessionId() const { return core_->id(); }

absl::Status RemoteSession::fail(const absl::Status& st) {
  last_cause_ = st;
  return st;
}

absl::StatusOr<session::Handle> RemoteSession::compile(std::string_view wire, std::string_view target,
                                                       session::CompileInfo* info, const backends::CompileOptions& options) {
  if (target == "x86_64" && options_.cpu_in_process) {
    // In process, like accyd's cpu device (fast is the same code as exact;
    // tf32 is refused the same way, by the one compile path).
    return local_.compile(wire, session::CompileSpec{std::string(target), options}, info);
  }
  return withReconnect([&] { return compileRemote(wire, target, info, options, std::nullopt); });
}

absl::StatusOr<session::Handle> RemoteSession::compileRemote(std::string_view wire, std::string_view target,
                                                             session::CompileInfo* info,
                                                             const backends::CompileOptions& options,
                                                             std::optional<session::Handle> keep) {
  grpc::ClientContext ctx;
  pb::CompileRequest req;
  pb::CompileReply reply;
  req.set_session_id(core_->id());
  req.set_program(std::string(wire));
  req.set_target(std::string(target));
  if (options.mode != codegen::ArithmeticMode::kExact) {
    (*req.mutable_options())["mode"] = codegen::arithmeticModeName(options.mode);
  }
  grpc::Status st = core_->stub->Compile(&ctx, req, &reply);
  if (!st.ok()) return fail(RemoteCore::toStatus(st, ctx, ErrorKind::kCompileFailed));
  Remote r;
  for (int out = 0; out < 2; ++out) {
    const auto& ds = out ? reply.outputs() : reply.inputs();
    for (const pb::Descriptor& d : ds) {
      session::Descriptor sd;
      sd.dtype = static_cast<tensor::DType>(d.dtype());
      for (const pb::Axis& a : d.axes()) sd.axes.push_back(tensor::Axis{a.name(), a.extent()});
      sd.byte_size = d.byte_size();
      sd.alignment = d.alignment();
      (out ? r.outputs : r.inputs).push_back(std::move(sd));
    }
  }
  if (info) {
    info->cache_hit = reply.cache_hit();
    info->cache_level = reply.cache_level();
  }
  r.daemon = session::Handle{reply.handle().index(), reply.handle().generation()};
  r.wire = std::string(wire);
  r.target = std::string(target);
  r.options = options;
  // The caller's handle is the daemon's (with the remote bit) unless that
  // is taken by a program recompiled after a reconnect, or `keep`.
  session::Handle h{r.daemon.index | kRemoteBit, r.daemon.generation};
  if (keep) {
    h = *keep;
  } else if (remote_.count({h.index, h.generation}) != 0) {
    h = session::Handle{kRemoteBit | 0x40000000u | ++next_handle_, 1};
  }
  remote_[{h.index, h.generation}] = std::move(r);
  return h;
}

absl::StatusOr<std::span<const session::Descriptor>> RemoteSession::inputDescriptors(session::Handle h) const {
  if ((h.index & kRemoteBit) == 0) return local_.inputDescriptors(h);
  auto it = remote_.find({h.index, h.generation});
  if (it == remote_.end()) return makeError(ErrorKind::kInvalidHandle, "remote session: unknown handle");
  return std::span<const session::Descriptor>(it->second.inputs);
}

absl::StatusOr<std::span<const session::Descriptor>> RemoteSession::outputDescriptors(session::Handle h) const {
  if ((h.index & kRemoteBit) == 0) return local_.outputDescriptors(h);
  auto it = remote_.find({h.index, h.generation});
  if (it == remote_.end()) return makeError(ErrorKind::kInvalidHandle, "remote session: unknown handle");
  return std::span<const session::Descriptor>(it->second.outputs);
}

std::string RemoteSession::invokeChannel() const {
  std::lock_guard<std::mutex> lock(channel_mu_);
  return channel_state_;
}

bool RemoteSession::channelReady() {
  if (channel_ != nullptr) return true;
  if (channel_state_ != "not opened yet") return false;
  if (!options_.invoke_channel) {
    channel_state_ = "off (RemoteOptions::invoke_channel)";
    return false;
  }
  if (core_->region_socket.empty()) {
    channel_state_ = "none: the target is not a unix: socket on this host";
    return false;
  }
  auto buffer = allocateShared(std::max(options_.channel_bytes, channel::kDataOffset + 4096));
  if (!buffer.ok()) {
    channel_state_ = strCat("none: ", buffer.status().message());
    return false;
  }
  auto* box = reinterpret_cast<channel::Mailbox*>((*buffer)->bytes().data());
  box->magic = channel::kMagic;
  box->version = channel::kVersion;
  grpc::ClientContext ctx;
  pb::OpenChannelRequest req;
  pb::OpenChannelReply reply;
  req.set_session_id(core_->id());
  req.set_region((*buffer)->region());
  if (grpc::Status st = core_->stub->OpenChannel(&ctx, req, &reply); !st.ok()) {
    channel_state_ = strCat("none: the daemon refused it: ", RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed).message());
    return false;
  }
  channel_data_offset_ = reply.data_offset();
  channel_ = std::move(*buffer);
  channel_state_ = "open";
  return true;
}

std::optional<absl::Status> RemoteSession::invokeThroughChannel(session::Handle h,
                                                                absl::Span<const std::span<const std::byte>> inputs,
                                                                absl::Span<const std::span<std::byte>> outputs) {
  if (outputs.empty() || inputs.size() + outputs.size() > channel::kMaxBuffers) return std::nullopt;
  std::unique_lock<std::mutex> lock(channel_mu_, std::try_to_lock);
  if (!lock.owns_lock() || !channelReady()) return std::nullopt;
  std::byte* const base = channel_->bytes().data();
  const size_t capacity = channel_->bytes().size();
  auto* box = reinterpret_cast<channel::Mailbox*>(base);
  channel::Request& request = box->request;
  // Each buffer: a reference into a shared buffer, or a place in the
  // channel's data area (inputs copied there first).
  size_t next = channel_data_offset_;
  std::vector<std::pair<size_t, size_t>> copy_out;  // output k <- data offset
  enum class Where { kSharedBuffer, kDataArea, kTooLarge };
  auto place = [&](const std::byte* p, size_t n, channel::Ref* ref) {
    if (auto shared = core_->placeInShared(p, n)) {
      *ref = {shared->first, shared->second, n};
      return Where::kSharedBuffer;
    }
    next = (next + 63) / 64 * 64;
    if (n > capacity || next > capacity - n) return Where::kTooLarge;
    *ref = {channel_->region_, next, n};
    next += n;
    return Where::kDataArea;
  };
  std::unique_ptr<SharedBuffer> dropped;  // a channel closed below goes after the lock
  std::lock_guard<std::mutex> shared_lock(core_->shared_mu);
  request.index = h.index;
  request.generation = h.generation;
  request.inputs = static_cast<uint32_t>(inputs.size());
  request.outputs = static_cast<uint32_t>(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    channel::Ref& ref = request.refs[i];
    const Where where = place(inputs[i].data(), inputs[i].size(), &ref);
    if (where == Where::kTooLarge) return std::nullopt;
    if (where == Where::kDataArea && !inputs[i].empty()) std::memcpy(base + ref.offset, inputs[i].data(), inputs[i].size());
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    channel::Ref& ref = request.refs[inputs.size() + k];
    const Where where = place(outputs[k].data(), outputs[k].size(), &ref);
    if (where == Where::kTooLarge) return std::nullopt;
    if (where == Where::kDataArea) copy_out.emplace_back(k, ref.offset);
  }
  const uint32_t seq = ++channel_seq_;
  channel::publish(box->request_seq, seq, box->daemon_waiting);
  // The reply: spin, then sleep; every second of waiting, ask the daemon
  // (KeepAlive) whether it and the session are still there.
  const auto spin = std::chrono::microseconds(options_.channel_spin_us);
  auto next_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!channel::waitForChange(box->reply_seq, seq - 1, box->client_waiting, spin, std::chrono::milliseconds(100))) {
    if (std::chrono::steady_clock::now() < next_check) continue;
    next_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    pb::KeepAliveRequest req;
    pb::KeepAliveReply reply;
    req.set_session_id(core_->id());
    if (grpc::Status st = core_->stub->KeepAlive(&ctx, req, &reply); !st.ok()) {
      const absl::Status why = RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed);
      channel_state_ = strCat("closed: the daemon stopped answering during an invoke (", why.message(), ")");
      dropped = std::move(channel_);
      return fail(makeError(ErrorKind::kLaunchFailed,
                            strCat("remote session: no reply through the invoke channel and ", why.message())));
    }
  }
  if (channel::load(box->reply_seq) != seq) {
    channel_state_ = "closed: the daemon's reply was out of sequence";
    dropped = std::move(channel_);
    return fail(makeError(ErrorKind::kLaunchFailed, "remote session: the invoke channel's reply was out of sequence"));
  }
  channel_invokes_.fetch_add(1);
  const channel::Reply& reply = box->reply;
  if (reply.status != 0) {
    const size_t n = std::min<size_t>(reply.message_bytes, channel::kMaxMessage);
    return fail(RemoteCore::statusError(static_cast<int>(reply.status), std::string(reply.message, n)));
  }
  for (const auto& [k, offset] : copy_out) {
    if (!outputs[k].empty()) std::memcpy(outputs[k].data(), base + offset, outputs[k].size());
  }
  return absl::OkStatus();
}

absl::Status RemoteSession::invoke(session::Handle h, absl::Span<const std::span<const std::byte>> inputs,
                                   absl::Span<const std::span<std::byte>> outputs) {
  if ((h.index & kRemoteBit) == 0) return local_.invoke(h, inputs, outputs);
  return withReconnect([&] { return invokeRemote(h, inputs, outputs); });
}

absl::Status RemoteSession::invokeRemote(session::Handle user, absl::Span<const std::span<const std::byte>> inputs,
                                         absl::Span<const std::span<std::byte>> outputs) {
  const session::Handle h = daemonHandle(user);
  if (std::optional<absl::Status> st = invokeThroughChannel(h, inputs, outputs)) return *st;
  // A span inside a shared buffer travels as a region reference.
  std::lock_guard<std::mutex> shared_lock(core_->shared_mu);
  auto place = [&](const std::byte* p, size_t n, pb::Buffer* b) {
    const auto shared = core_->placeInShared(p, n);
    if (!shared) return false;
    pb::RegionRef* r = b->mutable_region();
    r->set_region(shared->first);
    r->set_offset(shared->second);
    r->set_size(n);
    return true;
  };
  grpc::ClientContext ctx;
  pb::InvokeRequest req;
  pb::InvokeReply reply;
  req.set_session_id(core_->id());
  req.mutable_handle()->set_index(h.index);
  req.mutable_handle()->set_generation(h.generation);
  for (const auto& in : inputs) {
    pb::Buffer* b = req.add_inputs();
    if (!place(in.data(), in.size(), b)) b->set_inline_bytes(in.data(), in.size());
  }
  std::vector<bool> in_region;
  for (const auto& out : outputs) {
    pb::Buffer* b = req.add_outputs();
    in_region.push_back(place(out.data(), out.size(), b));
  }
  grpc::Status st = core_->stub->Invoke(&ctx, req, &reply);
  if (!st.ok()) return fail(RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed));
  int next = 0;
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (in_region[k]) continue;
    if (next >= reply.inline_outputs_size() || reply.inline_outputs(next).size() != outputs[k].size()) {
      return fail(makeError(ErrorKind::kLaunchFailed, "remote session: the daemon's reply lacks an output"));
    }
    std::memcpy(outputs[k].data(), reply.inline_outputs(next).data(), outputs[k].size());
    ++next;
  }
  return absl::OkStatus();
}

absl::Status RemoteSession::release(session::Handle h) {
  if ((h.index & kRemoteBit) == 0) return local_.release(h);
  return withReconnect([&] { return releaseRemote(h); });
}

session::Handle RemoteSession::daemonHandle(session::Handle user) const {
  // One the session does not know goes as it is, and the daemon answers
  // invalid_handle.
  auto it = remote_.find({user.index, user.generation});
  return it != remote_.end() ? it->second.daemon : session::Handle{user.index & ~kRemoteBit, user.generation};
}

absl::Status RemoteSession::releaseRemote(session::Handle user) {
  const session::Handle h = daemonHandle(user);
  grpc::ClientContext ctx;
  pb::ReleaseRequest req;
  pb::ReleaseReply reply;
  req.set_session_id(core_->id());
  req.mutable_handle()->set_index(h.index);
  req.mutable_handle()->set_generation(h.generation);
  grpc::Status st = core_->stub->Release(&ctx, req, &reply);
  if (!st.ok()) return RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed);
  remote_.erase({user.index, user.generation});
  return absl::OkStatus();
}

namespace {

// Whether a call failed because the daemon's session is gone: the daemon
// cannot be reached (it stopped, or restarted), or it no longer knows the
// session (a restarted daemon; a lease that lapsed).
bool sessionLost(const absl::Status& st) {
  const absl::string_view m = st.message();
  return !st.ok() && (absl::StrContains(m, "accyd unreachable") || absl::StrContains(m, "no open session") ||
                      absl::StrContains(m, "no reply through the invoke channel"));
}
const absl::Status& statusOf(const absl::Status& st) { return st; }
template <typename T>
const absl::Status& statusOf(const absl::StatusOr<T>& st) {
  return st.status();
}

}  // namespace

template <typename Call>
auto RemoteSession::withReconnect(Call&& call) -> decltype(call()) {
  auto result = call();
  if (!sessionLost(statusOf(result))) return result;
  if (absl::Status st = reconnect(statusOf(result)); !st.ok()) return fail(st);
  return call();
}

absl::Status RemoteSession::reconnect(const absl::Status& cause) {
  if (options_.reconnect_seconds <= 0) {
    return makeError(errorKind(cause),
                     strCat(cause.message(), "; the daemon's session is gone and reconnecting is off "
                                             "(RemoteOptions::reconnect_seconds): open a new RemoteSession"));
  }
  {
    // The channel's mailbox belonged to the old session: a new one is
    // opened on the next invoke.
    std::lock_guard<std::mutex> lock(channel_mu_);
    channel_.reset();
    channel_state_ = "not opened yet";
    channel_seq_ = 0;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options_.reconnect_seconds);
  std::string last;
  for (;;) {
    const absl::Status st = core_->openSession(std::chrono::seconds(1));
    if (st.ok()) break;
    last = std::string(st.message());
    if (std::chrono::steady_clock::now() >= deadline) {
      return makeError(ErrorKind::kLaunchFailed, strCat("accyd did not take a new session within ", options_.reconnect_seconds,
                                                        " s (", last, ") after: ", cause.message()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  {
    std::lock_guard<std::mutex> lock(core_->shared_mu);
    for (auto& [start, entry] : core_->shared) {
      auto region = shareFd(entry.second->fd_);
      if (!region.ok()) {
        return makeError(ErrorKind::kInvalidBuffer,
                         strCat("re-registering a shared buffer with the new session: ", region.status().message()));
      }
      entry.second->region_ = *region;
    }
  }
  for (auto& [user, r] : remote_) {
    const Remote kept = r;  // compileRemote replaces the entry
    auto h = compileRemote(kept.wire, kept.target, nullptr, kept.options, session::Handle{user.first, user.second});
    if (!h.ok()) return makeError(ErrorKind::kCompileFailed, strCat("recompiling a program in the new session: ", h.status().message()));
  }
  ++reconnects_;
  return absl::OkStatus();
}

namespace {

// The kernel's setting for transparent huge pages on shmem (the bracketed
// word of shmem_enabled), or "unknown".
std::string shmemHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string all;
  std::getline(in, all);
  const size_t open = all.find('['), close = all.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "unknown";
  return all.substr(open + 1, close - open - 1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SharedBuffer>> RemoteSession::allocateShared(size_t bytes) {
  if (core_->region_socket.empty()) {
    return makeError(ErrorKind::kInvalidBuffer, "shared buffers need a unix: target on the same host");
  }
  if (bytes == 0) return makeError(ErrorKind::kInvalidBuffer, "a shared buffer needs at least one byte");
  // Huge pages where the system gives them (fewer TLB misses for large
  // buffers): a hugetlb memfd when 2 MiB pages are reserved, else
  // transparent huge pages advised on shmem, else 4 KiB pages; which one,
  // and why not better, is reported by SharedBuffer::pages().
  constexpr size_t kHuge = size_t{2} << 20;
  int fd = -1;
  void* mem = MAP_FAILED;
  size_t mapped = bytes;
  std::string pages, no_hugetlb;
  if (bytes >= kHuge) {
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    fd = memfd_create("accy-region", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(rounded)) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
      mem = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    }
    if (mem != MAP_FAILED) {
      mapped = rounded;
      pages = "hugetlb (2 MiB pages)";
    } else {
      no_hugetlb = strCat("no 2 MiB hugetlb pages (", std::strerror(errno), ")");
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    fd = memfd_create("accy-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return makeError(ErrorKind::kOutOfMemory, strCat("memfd_create: ", std::strerror(errno)));
    auto fail_fd = [&](std::string why) {
      close(fd);
      return makeError(ErrorKind::kOutOfMemory, why);
    };
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return fail_fd(strCat("ftruncate: ", std::strerror(errno)));
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
      return fail_fd(strCat("sealing the memfd: ", std::strerror(errno)));
    }
    mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) return fail_fd(strCat("mmap: ", std::strerror(errno)));
    if (bytes < kHuge) {
      pages = "4 KiB pages (smaller than a huge page)";
    } else {
      const std::string shmem = shmemHugePages();
      if (madvise(mem, bytes, MADV_HUGEPAGE) == 0 && (shmem == "always" || shmem == "advise" || shmem == "force")) {
        pages = "transparent huge pages (advised)";
      } else {
        pages = strCat("4 KiB pages: ", no_hugetlb, ", and shmem transparent huge pages are '", shmem,
                       "' (/sys/kernel/mm/transparent_hugepage/shmem_enabled)");
      }
    }
  }
  auto region = shareFd(fd);
  if (!region.ok()) {
    munmap(mem, mapped);
    close(fd);
    return region.status();
  }
  // The buffer keeps the memfd: a restarted daemon is given it again.
  auto buffer = std::unique_ptr<SharedBuffer>(
      new SharedBuffer(static_cast<std::byte*>(mem), bytes, mapped, fd, *region, std::move(pages), core_));
  {
    std::lock_guard<std::mutex> lock(core_->shared_mu);
    core_->shared[buffer->data_] = {bytes, buffer.get()};
  }
  return buffer;
}

absl::StatusOr<uint64_t> RemoteSession::shareFd(int fd) {
  const std::string line = sendMemfd(core_->region_socket, fd);
  if (line.rfind("ok ", 0) != 0) {
    return makeError(ErrorKind::kInvalidBuffer,
                     strCat("the daemon refused the shared buffer: ", line.empty() ? "no answer" : line));
  }
  const std::string token = line.substr(3, line.find('\n') - 3);
  grpc::ClientContext ctx;
  pb::RegisterRegionRequest req;
  pb::RegisterRegionReply reply;
  req.set_session_id(core_->id());
  req.set_token(token);
  grpc::Status st = core_->stub->RegisterRegion(&ctx, req, &reply);
  if (!st.ok()) return RemoteCore::toStatus(st, ctx, ErrorKind::kInvalidBuffer);
  return reply.region();
}

std::string sendMemfd(const std::string& region_socket, int fd) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, region_socket.c_str(), sizeof addr.sun_path - 1);
  std::string line;
  if (s >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    char byte = 'r';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    if (sendmsg(s, &msg, 0) == 1) {
      char buf[512];
      ssize_t n;
      while ((n = read(s, buf, sizeof buf)) > 0) line.append(buf, static_cast<size_t>(n));
    }
  }
  if (s >= 0) close(s);
  return line;
}

std::optional<std::pair<uint64_t, uint64_t>> RemoteCore::placeInShared(const std::byte* p, size_t n) const {
  auto it = shared.upper_bound(p);
  if (it == shared.begin()) return std::nullopt;
  --it;
  const auto [size, buffer] = it->second;
  if (p < it->first || p + n > it->first + size) return std::nullopt;
  return std::make_pair(buffer->region_, static_cast<uint64_t>(p - it->first));
}

uint64_t SharedBuffer::region() const {
  std::lock_guard<std::mutex> lock(core_->shared_mu);
  return region_;
}

absl::StatusOr<pb::ServerInfoReply> RemoteSession::serverInfo() {
  grpc::ClientContext ctx;
  pb::ServerInfoRequest req;
  pb::ServerInfoReply reply;
  grpc::Status st = core_->stub->ServerInfo(&ctx, req, &reply);
  if (!st.ok()) return RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed);
  return reply;
}

}  // namespace accy::client
