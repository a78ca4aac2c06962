// accy::client::RemoteSession: the Session API over accyd.
//
// Connects to `unix:/path/accyd.sock` (shared-memory buffers available) or
// `dns:host:port` (TLS; buffers travel inline). Programs for the x86_64
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
#include "client/session.h"

namespace accy::v1 {
class ServerInfoReply;
}

namespace accy::client {

struct RemoteOptions {
  bool cpu_in_process = true;
  // PEM root certificates for dns: targets (TLS); empty uses the defaults.
  std::string tls_root_certs;
  // A client certificate chain and its private key (PEM), presented to a
  // daemon that asks for one (mutual TLS, accyd --tls-client-ca): sessions
  // are then tied to the certificate's identity.
  std::string tls_client_cert, tls_client_key;
  // Keep the lease alive from a background thread.
  bool keep_alive = true;
};

class RemoteSession;

// A buffer in a sealed memfd shared with the daemon: invoking with spans
// inside it sends a (region, offset, size) reference instead of the bytes.
class SharedBuffer {
 public:
  ~SharedBuffer();
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;
  std::span<std::byte> bytes() const { return {data_, size_}; }
  uint64_t region() const { return region_; }
  // What pages back it: "hugetlb (2 MiB pages)", "transparent huge pages
  // (advised)", or "4 KiB pages: " and why no larger ones (none reserved,
  // the kernel's shmem setting); small buffers take 4 KiB pages.
  const std::string& pages() const { return pages_; }

 private:
  friend class RemoteSession;
  SharedBuffer(std::byte* data, size_t size, size_t mapped, uint64_t region, std::string pages,
               std::shared_ptr<struct RemoteCore> core)
      : data_(data), size_(size), mapped_(mapped), region_(region), pages_(std::move(pages)), core_(std::move(core)) {}
  std::byte* data_;
  size_t size_;
  size_t mapped_;  // whole huge pages when hugetlb
  uint64_t region_;
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
  const std::string& sessionId() const;
  const std::optional<absl::Status>& lastCause() const { return last_cause_; }

 private:
  RemoteSession(std::shared_ptr<RemoteCore> core, const RemoteOptions& options);
  absl::Status fail(const absl::Status& st);

  std::shared_ptr<RemoteCore> core_;
  RemoteOptions options_;
  session::Session local_;
  struct Remote {
    std::vector<session::Descriptor> inputs, outputs;
  };
  std::map<std::pair<uint32_t, uint32_t>, Remote> remote_;
  std::optional<absl::Status> last_cause_;
  std::thread keep_alive_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace accy::client

#endif  // ACCY_CLIENT_REMOTE_SESSION_H_
