#include "client/remote_session.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "accy/v1/accyd.grpc.pb.h"
#include "base/errors.h"
#include "base/strings.h"

namespace accy::client {

namespace pb = accy::v1;

// Handles of programs held by the daemon carry this bit in their index, so
// they never collide with in-process ones.
constexpr uint32_t kRemoteBit = 0x80000000u;

struct RemoteCore {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Accyd::Stub> stub;
  std::string session_id;
  std::string region_socket;  // empty for TCP targets
  int lease_seconds = 30;

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
    static constexpr ErrorKind kinds[] = {ErrorKind::kNone,           ErrorKind::kInvalidProgram,
                                          ErrorKind::kUnsupportedVersion, ErrorKind::kInvalidHandle,
                                          ErrorKind::kInvalidBuffer,  ErrorKind::kTooManyPrograms,
                                          ErrorKind::kOutOfMemory,    ErrorKind::kCompileFailed,
                                          ErrorKind::kLaunchFailed};
    const ErrorKind kind = number > 0 && number <= 8 ? kinds[number] : ErrorKind::kLaunchFailed;
    // The daemon's message already starts with the kind's name.
    std::string message = st.error_message();
    const std::string prefix = strCat(errorKindName(kind), ": ");
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    return makeError(kind, message);
  }

  // Live shared buffers: start -> (size, region).
  std::mutex shared_mu;
  std::map<const std::byte*, std::pair<size_t, uint64_t>> shared;

  void unregister(const std::byte* data, uint64_t region) {
    {
      std::lock_guard<std::mutex> lock(shared_mu);
      shared.erase(data);
    }
    grpc::ClientContext ctx;
    pb::UnregisterRegionRequest req;
    pb::UnregisterRegionReply reply;
    req.set_session_id(session_id);
    req.set_region(region);
    stub->UnregisterRegion(&ctx, req, &reply);
  }
};

SharedBuffer::~SharedBuffer() {
  core_->unregister(data_, region_);
  munmap(data_, mapped_);
}

RemoteSession::RemoteSession(std::shared_ptr<RemoteCore> core, const RemoteOptions& options)
    : core_(std::move(core)), options_(options) {
  if (options_.keep_alive) {
    keep_alive_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!cv_.wait_for(lock, std::chrono::milliseconds(core_->lease_seconds * 1000 / 3), [&] { return stopping_; })) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        pb::KeepAliveRequest req;
        pb::KeepAliveReply reply;
        req.set_session_id(core_->session_id);
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
  req.set_session_id(core_->session_id);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  core_->stub->CloseSession(&ctx, req, &reply);
}

absl::StatusOr<std::unique_ptr<RemoteSession>> RemoteSession::connect(const std::string& target,
                                                                      const RemoteOptions& options) {
  auto core = std::make_shared<RemoteCore>();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (target.rfind("unix:", 0) == 0) {
    core->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    core->region_socket = target.substr(5) + ".fd";
  } else if (target.rfind("dns:", 0) == 0) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = options.tls_root_certs;
    tls.pem_cert_chain = options.tls_client_cert;
    tls.pem_private_key = options.tls_client_key;
    core->channel = grpc::CreateCustomChannel(target, grpc::SslCredentials(tls), args);
  } else {
    return makeError(ErrorKind::kInvalidArgument,
                     strCat("accyd target '", target, "' must start with unix: or dns:"));
  }
  core->stub = pb::Accyd::NewStub(core->channel);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::NegotiateRequest req;
    req.add_versions(1);
    pb::NegotiateReply reply;
    grpc::Status st = core->stub->Negotiate(&ctx, req, &reply);
    if (!st.ok()) return RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed);
  }
  grpc::ClientContext ctx;
  pb::OpenSessionRequest req;
  pb::OpenSessionReply reply;
  grpc::Status st = core->stub->OpenSession(&ctx, req, &reply);
  if (!st.ok()) return RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed);
  core->session_id = reply.session_id();
  core->lease_seconds = std::max<int>(1, static_cast<int>(reply.lease_seconds()));
  return std::unique_ptr<RemoteSession>(new RemoteSession(std::move(core), options));
}

const std::string& RemoteSession::sessionId() const { return core_->session_id; }

absl::Status RemoteSession::fail(const absl::Status& st) {
  last_cause_ = st;
  return st;
}

absl::StatusOr<session::Handle> RemoteSession::compile(std::string_view wire, std::string_view target,
                                                       session::CompileInfo* info, const backends::CompileOptions& options) {
  if (target == "x86_64" && options_.cpu_in_process) {
    // In process, like accyd's cpu device: exact (fast is the same code);
    // tf32 is refused the same way.
    if (absl::Status st = codegen::checkMode(target, options.mode); !st.ok()) return fail(st);
    return local_.compile(wire, info);
  }
  grpc::ClientContext ctx;
  pb::CompileRequest req;
  pb::CompileReply reply;
  req.set_session_id(core_->session_id);
  req.set_program(std::string(wire));
  req.set_target(std::string(target));
  if (options.mode != backends::ArithmeticMode::kExact) {
    (*req.mutable_options())["mode"] = backends::arithmeticModeName(options.mode);
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
  const session::Handle h{reply.handle().index() | kRemoteBit, reply.handle().generation()};
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

absl::Status RemoteSession::invoke(session::Handle h, absl::Span<const std::span<const std::byte>> inputs,
                                   absl::Span<const std::span<std::byte>> outputs) {
  if ((h.index & kRemoteBit) == 0) return local_.invoke(h, inputs, outputs);
  // A span inside a shared buffer travels as a region reference.
  std::lock_guard<std::mutex> shared_lock(core_->shared_mu);
  auto place = [&](const std::byte* p, size_t n, pb::Buffer* b) {
    auto it = core_->shared.upper_bound(p);
    if (it == core_->shared.begin()) return false;
    --it;
    const std::byte* start = it->first;
    const auto [size, region] = it->second;
    if (p < start || p + n > start + size) return false;
    pb::RegionRef* r = b->mutable_region();
    r->set_region(region);
    r->set_offset(static_cast<uint64_t>(p - start));
    r->set_size(n);
    return true;
  };
  grpc::ClientContext ctx;
  pb::InvokeRequest req;
  pb::InvokeReply reply;
  req.set_session_id(core_->session_id);
  req.mutable_handle()->set_index(h.index & ~kRemoteBit);
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
  grpc::ClientContext ctx;
  pb::ReleaseRequest req;
  pb::ReleaseReply reply;
  req.set_session_id(core_->session_id);
  req.mutable_handle()->set_index(h.index & ~kRemoteBit);
  req.mutable_handle()->set_generation(h.generation);
  grpc::Status st = core_->stub->Release(&ctx, req, &reply);
  if (!st.ok()) return RemoteCore::toStatus(st, ctx, ErrorKind::kLaunchFailed);
  remote_.erase({h.index, h.generation});
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
  // Pass the fd to the daemon and get a token.
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, core_->region_socket.c_str(), sizeof addr.sun_path - 1);
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
  close(fd);  // the daemon holds its own reference now
  if (line.rfind("ok ", 0) != 0) {
    munmap(mem, mapped);
    return makeError(ErrorKind::kInvalidBuffer,
                     strCat("the daemon refused the shared buffer: ", line.empty() ? "no answer" : line));
  }
  const std::string token = line.substr(3, line.find('\n') - 3);
  grpc::ClientContext ctx;
  pb::RegisterRegionRequest req;
  pb::RegisterRegionReply reply;
  req.set_session_id(core_->session_id);
  req.set_token(token);
  grpc::Status st = core_->stub->RegisterRegion(&ctx, req, &reply);
  if (!st.ok()) {
    munmap(mem, mapped);
    return RemoteCore::toStatus(st, ctx, ErrorKind::kInvalidBuffer);
  }
  auto buffer = std::unique_ptr<SharedBuffer>(
      new SharedBuffer(static_cast<std::byte*>(mem), bytes, mapped, reply.region(), std::move(pages), core_));
  {
    std::lock_guard<std::mutex> lock(core_->shared_mu);
    core_->shared[buffer->data_] = {bytes, reply.region()};
  }
  return buffer;
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
