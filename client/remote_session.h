// accy::client::RemoteSession: the Session API over accyd.
//
// Connects to `unix:/path/accyd.sock` (shared-memory buffers available) or
// a TCP target, always with TLS, buffers inline: `dns:NAME:PORT` (a
// headless Service's name places each session on one of its daemons),
// `ipv4:A:PORT,B:PORT` or `ipv6:[A]:PORT,...`. Programs for the x86_64
// target compile and run in this process by default, like Session, without
// a round trip; set `cpu_in_process = false` to use the daemon's cpu
// device. A background thread keeps the daemon-side session's lease alive;
// destroying the RemoteSession closes it.
#ifndef ACCY_CLIENT_REMOTE_SESSION_H_
#define ACCY_CLIENT_REMOTE_SESSION_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "runtime/session.h"

namespace accy::v1 {
class ServerInfoReply;
}

namespace accy::client {

struct RemoteOptions {
  bool cpu_in_process = true;
  // PEM root certificates for TCP targets (TLS); empty uses the defaults.
  std::string tls_root_certs;
  // The name the daemons' certificates must carry; by default the dns:
  // target's name (needed for ipv4:/ipv6: address lists).
  std::string tls_server_name;
  // TCP targets: place the session on one of the target's hosts (every
  // address a dns: name resolves to, e.g. a headless Service's pods; or each
  // address of an ipv4:/ipv6: list), in turn across the sessions of this
  // process, passing over hosts that do not answer. The session stays on
  // its host. false: hand the target to gRPC as it is.
  bool spread_over_hosts = true;
  // A client certificate chain and its private key (PEM), presented to a
  // daemon that asks for one (mutual TLS, accyd --tls-client-ca): sessions
  // are then tied to the certificate's identity.
  std::string tls_client_cert, tls_client_key;
  // Keep the lease alive from a background thread.
  bool keep_alive = true;
  // On a unix: target, invoke through the daemon's invoke channel (shared
  // memory and futex doorbells, runtime/channel.h) rather than gRPC where
  // the invoke allows it (outputs given, at most 64 buffers, inline bytes
  // that fit `channel_bytes`); a daemon that refuses the channel leaves
  // every invoke on gRPC (invokeChannel() says why).
  bool invoke_channel = true;
  size_t channel_bytes = size_t{1} << 20;
  // How long an invoke spins on the reply before it sleeps on the futex.
  int64_t channel_spin_us = 50;
  // When the daemon's session is gone (the daemon restarted, or the lease
  // lapsed while this process was stopped), a call re-opens it: it retries
  // for up to this long, re-registers the shared buffers (the same memory),
  // recompiles the programs (the daemon's cache makes that cheap) under the
  // same handles, and runs the call again. 0: no reconnecting; such calls
  // fail saying the session is gone.
  int reconnect_seconds = 10;
};

class RemoteSession;

// Passes the memfd `fd` to the daemon's region socket (`<socket>.fd`) with
// SCM_RIGHTS and returns its answer: "ok <token>\n", "error <why>\n", or ""
// when the socket could not be reached. (allocateShared does this and
// registers the token; it is public for clients that share memory of their
// own making.)
std::string sendMemfd(const std::string& region_socket, int fd);

// A buffer in a sealed memfd shared with the daemon: invoking with spans
// inside it sends a (region, offset, size) reference instead of the bytes.
class SharedBuffer {
 public:
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  std::span<std::byte> bytes() const { return {data_, size_}; }
  uint64_t region() const;
  // What pages back it: "hugetlb (2 MiB pages)", "transparent huge pages
  // (advised)", or "4 KiB pages: " and why no larger ones (none reserved,
  // the kernel's shmem setting); small buffers take 4 KiB pages.
  const std::string& pages() const { return pages_; }

 private:
  friend class RemoteSession;
  friend struct RemoteCore;
  SharedBuffer(std::byte* data, size_t size, size_t mapped, int fd, uint64_t region, std::string pages,
               std::shared_ptr<struct RemoteCore> core)
      : data_(data), size_(size), mapped_(mapped), fd_(fd), region_(region), pages_(std::move(pages)),
        core_(std::move(core)) {}
  std::byte* data_;
  size_t size_;
  size_t mapped_;  // whole huge pages when hugetlb
  int fd_;         // the memfd, kept to share it again with a restarted daemon
  uint64_t region_;  // changes when the session is re-opened (under the core's shared_mu)
  std::string pages_;
  std::shared_ptr<struct RemoteCore> core_;
};

class RemoteSession {
 public:
  static absl::StatusOr<std::unique_ptr<RemoteSession>> connect(const std::string& target,
                                                                const RemoteOptions& options = {});
  ~RemoteSession();

  // `options.mode` chooses the arithmetic mode (backends/backend.h); tf32
  // is for target "ptx" only, and refused by name elsewhere.
  absl::StatusOr<session::Handle> compile(std::string_view wire, std::string_view target = "x86_64",
                                          session::CompileInfo* info = nullptr,
                                          const backends::CompileOptions& options = {});
  absl::StatusOr<std::span<const session::Descriptor>> inputDescriptors(session::Handle handle) const;
  absl::StatusOr<std::span<const session::Descriptor>> outputDescriptors(session::Handle handle) const;
  absl::Status invoke(session::Handle handle, absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs);
  absl::Status release(session::Handle handle);

  // A shared buffer of `bytes` bytes (unix: targets only).
  absl::StatusOr<std::unique_ptr<SharedBuffer>> allocateShared(size_t bytes);

  // The daemon's build record, devices, targets and cache statistics.
  absl::StatusOr<accy::v1::ServerInfoReply> serverInfo();
  std::string sessionId() const;
  // The daemon the session lives on: the unix: target, or one host of a TCP
  // target ("ipv4:10.0.3.7:7443").
  const std::string& host() const;
  // Sessions re-opened after the daemon's was lost (RemoteOptions::reconnect_seconds).
  int reconnects() const { return reconnects_; }
  // "open", "not opened yet", or why invokes go through gRPC.
  std::string invokeChannel() const;
  // Invokes served through the channel so far.
  int64_t channelInvokes() const { return channel_invokes_.load(); }
  const std::optional<absl::Status>& lastCause() const { return last_cause_; }

 private:
  RemoteSession(std::shared_ptr<RemoteCore> core, const RemoteOptions& options);
  absl::Status fail(const absl::Status& st);
  // Runs `call`; when it fails because the daemon's session is gone,
  // re-opens the session and runs it once more.
  template <typename Call>
  auto withReconnect(Call&& call) -> decltype(call());
  // Re-opens the session after `cause`: a new session, the shared buffers
  // registered again, the programs recompiled under the same handles.
  absl::Status reconnect(const absl::Status& cause);
  absl::StatusOr<session::Handle> compileRemote(std::string_view wire, std::string_view target,
                                                session::CompileInfo* info, const backends::CompileOptions& options,
                                                std::optional<session::Handle> keep);
  absl::Status invokeRemote(session::Handle handle, absl::Span<const std::span<const std::byte>> inputs,
                            absl::Span<const std::span<std::byte>> outputs);
  absl::Status releaseRemote(session::Handle handle);
  // The daemon's handle for the caller's handle `user` (they differ after a
  // reconnect).
  session::Handle daemonHandle(session::Handle user) const;
  // Passes `fd` to the daemon's region socket and registers it in the
  // session; returns the region.
  absl::StatusOr<uint64_t> shareFd(int fd);
  // Opens the channel on first use (under channel_mu_); false when there is
  // none (the reason in channel_state_).
  bool channelReady();
  // Runs the invoke through the channel; nullopt when it cannot go there
  // (then it goes through gRPC).
  std::optional<absl::Status> invokeThroughChannel(session::Handle handle,
                                                   absl::Span<const std::span<const std::byte>> inputs,
                                                   absl::Span<const std::span<std::byte>> outputs);

  std::shared_ptr<RemoteCore> core_;
  RemoteOptions options_;
  session::Session local_;
  struct Remote {
    std::vector<session::Descriptor> inputs, outputs;
    session::Handle daemon;  // the daemon's handle in the current session
    std::string wire, target;  // to compile it again in a re-opened session
    backends::CompileOptions options;
  };
  std::map<std::pair<uint32_t, uint32_t>, Remote> remote_;
  std::optional<absl::Status> last_cause_;
  mutable std::mutex channel_mu_;
  std::unique_ptr<SharedBuffer> channel_;
  size_t channel_data_offset_ = 0;
  uint32_t channel_seq_ = 0;
  std::string channel_state_ = "not opened yet";
  std::atomic<int64_t> channel_invokes_{0};
  int reconnects_ = 0;
  uint32_t next_handle_ = 0;  // handles given out for remote programs
  std::thread keep_alive_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace accy::client

#endif  // ACCY_CLIENT_REMOTE_SESSION_H_
