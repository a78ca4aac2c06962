// Fuzzes accyd's service in process: each input is read as a sequence of
// up to 48 requests (structure-aware: the bytes choose the method and fill
// the request's fields: session ids real or forged, handles real, stale or
// made up, programs valid, truncated or flipped, buffers inline or region
// references with any offset and size, tokens of real uploads or made up,
// channels on real regions with or without their mailbox), sent straight to
// AccydService's handlers with the cpu device and a live region socket.
//
// Checked on every reply: the status number is one of the nine, a failed
// call's gRPC code is the one that corresponds to it, and successful calls
// are consistent (an open session has an id, a compiled program has
// descriptors). Checked after every input: once the input's sessions are
// closed, the service holds no session, no program, no region. Any
// violation aborts (a finding); so do crashes, ASan and UBSan reports.
//
// Built with libFuzzer by tools/fuzz/build_fuzzer.sh (service_fuzz), and
// with gcc under Bazel as //tools:service_fuzz_test, which runs inputs of
// random bytes from fixed and fresh seeds (tools/fuzz/service_fuzz_main.cc).
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/tensor/builder.h"
#include "compiler/tensor/program.h"
#include "compiler/tensor/random.h"
#include "compiler/wire/wire.h"
#include "backends/cpu/cpu_backend.h"
#include "client/remote_session.h"
#include "runtime/channel.h"
#include "runtime/statuses.h"
#include "server/service.h"

namespace {

namespace pb = accy::v1;
namespace tensor = accy::tensor;
using accy::server::AccydService;

// Reads the input front to back; past its end every read gives zeros.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | byte();
    return v;
  }
  // A number below `n` (n > 0).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((uint32_t{byte()} << 8 | byte()) % n); }
  // A size: mostly small, sometimes at the edges.
  uint64_t size() {
    switch (byte() % 8) {
      case 0: return 0;
      case 1: return u64();
      case 2: return ~uint64_t{0} - below(16);
      default: return below(4097);
    }
  }
  std::string text(size_t max) {
    std::string s(below(static_cast<uint32_t>(max + 1)), '\0');
    for (char& c : s) c = static_cast<char>(byte());
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "service_fuzz: %s\n", what.c_str());
  std::abort();
}

// Requests sent and those that succeeded, by method (for the summary).
std::map<std::string, std::pair<long, long>> g_counts;

// Every reply: a status number of the table (runtime/statuses.inc), the gRPC
// code that goes with it.
template <typename Reply>
void check(const grpc::Status& st, const Reply& reply, const char* method) {
  auto& [sent, ok] = g_counts[method];
  ++sent;
  ok += st.ok() ? 1 : 0;
  if (!accy::session::statusNumbered(reply.status())) {
    finding(std::string(method) + ": status number " + std::to_string(reply.status()));
  }
  const auto expected = accy::server::grpcCodeOf(static_cast<accy::session::Status>(reply.status()));
  if (st.error_code() != expected) {
    finding(std::string(method) + ": gRPC code " + std::to_string(st.error_code()) + " for status " +
            std::to_string(reply.status()) + " (" + st.error_message() + ")");
  }
}

// Sends one request to the handler `method` and checks its reply.
template <typename Request, typename Reply>
grpc::Status send(AccydService& service,
                  grpc::Status (AccydService::*method)(grpc::ServerContextBase*, const Request*, Reply*),
                  const Request& request, Reply* reply, const char* name) {
  grpc::ServerContext ctx;
  const grpc::Status st = (service.*method)(&ctx, &request, reply);
  check(st, *reply, name);
  return st;
}

struct Fixture {
  std::string dir, region_socket;
  std::unique_ptr<accy::server::CompileCache> cache;
  std::unique_ptr<accy::server::RegionSocket> regions;
  std::unique_ptr<AccydService> service;
  std::vector<std::string> programs;  // valid wire programs to start from

  Fixture() {
    char tmpl[] = "/tmp/accy-service-fuzz-XXXXXX";
    dir = mkdtemp(tmpl);
    region_socket = dir + "/accyd.sock.fd";
    cache = std::make_unique<accy::server::CompileCache>(accy::server::CacheOptions{.max_compile_ms = 5000},
                                                         accy::executable::BuildRecord{});
    accy::server::RegionSocketLimits rl;
    rl.token_lifetime = std::chrono::milliseconds(2000);
    regions = std::make_unique<accy::server::RegionSocket>(region_socket, size_t{1} << 22, rl);
    if (!regions->start().ok()) finding("the region socket did not start");
    accy::server::Limits limits;
    limits.max_sessions = 8;
    limits.max_sessions_per_identity = 8;
    limits.max_programs_per_session = 4;
    limits.max_regions_per_session = 4;
    limits.max_region_bytes_per_session = int64_t{1} << 23;
    limits.max_message_bytes = int64_t{1} << 20;
    limits.max_scratch_bytes = int64_t{1} << 24;
    limits.max_launch_bytes = int64_t{1} << 26;
    limits.channel_spin_us = 0;
    std::vector<std::unique_ptr<accy::backends::Backend>> devices;
    devices.push_back(accy::backends::makeCpuBackend(accy::backends::BackendOptions{1}));
    service = std::make_unique<AccydService>(*cache, *regions, limits, std::move(devices));
    const tensor::Spec v16[] = {tensor::spec(tensor::DType::f32, {{"i", 16}}),
                                tensor::spec(tensor::DType::f32, {{"i", 16}})};
    programs.push_back(accy::wire::encode(*tensor::define("add", v16, [](tensor::Builder&, std::span<const tensor::Value> a) {
      return a[0] + a[1];
    })));
    const tensor::Spec one[] = {tensor::spec(tensor::DType::f32, {{"i", 64}})};
    programs.push_back(accy::wire::encode(*tensor::define("sum", one, [](tensor::Builder&, std::span<const tensor::Value> a) {
      return a[0].sin().sum({"i"});
    })));
    const tensor::Spec gather[] = {tensor::spec(tensor::DType::f32, {{"v", 16}}),
                                   tensor::spec(tensor::DType::i32, {{"i", 16}})};
    programs.push_back(accy::wire::encode(*tensor::define("take", gather, [](tensor::Builder&, std::span<const tensor::Value> a) {
      return scatterAdd(a[0], "v", a[1], take(a[0], "v", a[1]));
    })));
    const tensor::Spec words[] = {tensor::spec(tensor::DType::u32, {{"i", 8}})};
    programs.push_back(accy::wire::encode(*tensor::define("bits", words, [](tensor::Builder&, std::span<const tensor::Value> a) {
      return tensor::uniform(tensor::randomFoldIn(tensor::randomKey(*a[0].builder(), 5), a[0].shiftRight(a[0])), {{"n", 3}});
    })));
    const tensor::Spec ints[] = {tensor::spec(tensor::DType::i32, {{"i", 8}})};
    programs.push_back(accy::wire::encode(*tensor::define("div", ints, [](tensor::Builder&, std::span<const tensor::Value> a) {
      return a[0] / a[0];
    })));
  }
};

Fixture& fixture() {
  static Fixture* f = new Fixture();  // lives for the process (libFuzzer never returns)
  return *f;
}

// A sealed memfd of `bytes` bytes passed to the region socket: its token
// (or "" when refused), and the memory mapped here so the input can write
// a mailbox into it.
struct Upload {
  std::string token;
  void* memory = nullptr;
  size_t bytes = 0;
};
Upload upload(size_t bytes) {
  Upload u;
  const int fd = memfd_create("accy-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return u;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      u.memory = m;
      u.bytes = bytes;
    }
    const std::string line = accy::client::sendMemfd(fixture().region_socket, fd);
    if (line.rfind("ok ", 0) == 0) u.token = line.substr(3, line.find('\n') - 3);
  }
  close(fd);
  return u;
}

}  // namespace

// What the requests so far did, one line per method ("Compile 120/37": sent/ok).
std::string serviceFuzzSummary() {
  std::string out;
  long total = 0;
  for (const auto& [method, counts] : g_counts) {
    out += method + " " + std::to_string(counts.first) + "/" + std::to_string(counts.second) + "  ";
    total += counts.first;
  }
  return std::to_string(total) + " requests: " + out;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fixture();
#ifdef ACCY_FUZZ_LIBFUZZER
  // libFuzzer ends with exit(): the requests' summary then.
  std::atexit([] { std::fprintf(stderr, "service_fuzz: %s\n", serviceFuzzSummary().c_str()); });
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = fixture();
  AccydService& service = *f.service;
  Bytes in(data, size);
  std::vector<std::string> sessions;                         // opened by this input
  struct Compiled {
    uint32_t index, generation;
    std::vector<uint64_t> inputs, outputs;  // byte sizes from the reply's descriptors
  };
  std::vector<Compiled> handles;
  std::vector<uint64_t> regions;                             // registered region ids
  std::vector<Upload> uploads;
  auto session = [&]() -> std::string {
    const uint32_t pick = in.below(8);
    if (pick < 6 && !sessions.empty()) return sessions[pick % sessions.size()];
    return pick == 6 ? in.text(40) : std::string();
  };
  // A handle: one compiled here (sometimes a generation off), or made up;
  // returns the compiled program it names, if any.
  auto handle = [&](pb::Handle* h) -> const Compiled* {
    if (!handles.empty() && in.byte() % 4 != 0) {
      const Compiled& c = handles[in.below(static_cast<uint32_t>(handles.size()))];
      const bool stale = in.byte() % 8 == 0;
      h->set_index(c.index);
      h->set_generation(c.generation + (stale ? 1 : 0));
      return stale ? nullptr : &c;
    }
    h->set_index(static_cast<uint32_t>(in.u64()));
    h->set_generation(static_cast<uint32_t>(in.u64()));
    return nullptr;
  };
  auto buffer = [&](pb::Buffer* b) {
    if (!regions.empty() && in.byte() % 2 == 0) {
      pb::RegionRef* r = b->mutable_region();
      r->set_region(in.byte() % 8 == 0 ? in.u64() : regions[in.below(static_cast<uint32_t>(regions.size()))]);
      r->set_offset(in.size());
      r->set_size(in.size());
    } else if (in.byte() % 8 != 0) {
      b->set_inline_bytes(std::string(in.below(300) * 4 / (1 + in.byte() % 3), '\x01'));
    }
  };
  // A region: one registered here, or a made-up id.
  auto region = [&]() -> uint64_t {
    return !regions.empty() && in.byte() % 4 != 0 ? regions[in.below(static_cast<uint32_t>(regions.size()))] : in.u64();
  };
  for (int call = 0; call < 48 && !in.empty(); ++call) {
    switch (in.below(13)) {
      case 0: {
        pb::OpenSessionReply reply;
        const grpc::Status st = send(service, &AccydService::OpenSession, pb::OpenSessionRequest(), &reply, "OpenSession");
        if (st.ok()) {
          if (reply.session_id().empty()) finding("OpenSession: ok without a session id");
          sessions.push_back(reply.session_id());
        }
        break;
      }
      case 1: {
        pb::KeepAliveRequest req;
        pb::KeepAliveReply reply;
        req.set_session_id(session());
        send(service, &AccydService::KeepAlive, req, &reply, "KeepAlive");
        break;
      }
      case 2: {
        pb::CloseSessionRequest req;
        pb::CloseSessionReply reply;
        req.set_session_id(session());
        send(service, &AccydService::CloseSession, req, &reply, "CloseSession");
        break;
      }
      case 3:
      case 4: {
        pb::CompileRequest req;
        pb::CompileReply reply;
        req.set_session_id(session());
        std::string program = f.programs[in.below(static_cast<uint32_t>(f.programs.size()))];
        switch (in.byte() % 6) {
          case 0: program.resize(in.below(static_cast<uint32_t>(program.size() + 1))); break;
          case 1:
            for (int k = in.byte() % 4; k >= 0; --k) program[in.below(static_cast<uint32_t>(program.size()))] ^= static_cast<char>(in.byte());
            break;
          case 2: program = in.text(200); break;
          default: break;
        }
        req.set_program(program);
        const char* targets[] = {"x86_64", "", "spirv", "ptx", "wasm", "no-such-target"};
        req.set_target(targets[in.below(6)]);
        if (in.byte() % 4 == 0) {
          const char* modes[] = {"exact", "fast", "tf32", "bogus"};
          (*req.mutable_options())[in.byte() % 8 == 0 ? "speed" : "mode"] = modes[in.below(4)];
        }
        const grpc::Status st = send(service, &AccydService::Compile, req, &reply, "Compile");
        if (st.ok()) {
          if (reply.outputs_size() == 0) finding("Compile: ok without output descriptors");
          Compiled c{reply.handle().index(), reply.handle().generation(), {}, {}};
          for (const pb::Descriptor& d : reply.inputs()) c.inputs.push_back(d.byte_size());
          for (const pb::Descriptor& d : reply.outputs()) c.outputs.push_back(d.byte_size());
          handles.push_back(std::move(c));
        }
        break;
      }
      case 5: {
        pb::ReleaseRequest req;
        pb::ReleaseReply reply;
        req.set_session_id(session());
        handle(req.mutable_handle());
        send(service, &AccydService::Release, req, &reply, "Release");
        break;
      }
      case 6:
      case 7: {
        pb::InvokeRequest req;
        pb::InvokeReply reply;
        req.set_session_id(session());
        const Compiled* c = handle(req.mutable_handle());
        if (c != nullptr && in.byte() % 2 == 0) {
          // Buffers of the right sizes, inline or in a region, outputs
          // placed or returned inline.
          for (uint64_t bytes : c->inputs) {
            pb::Buffer* b = req.add_inputs();
            if (!regions.empty() && in.byte() % 2 == 0) {
              pb::RegionRef* r = b->mutable_region();
              r->set_region(regions[in.below(static_cast<uint32_t>(regions.size()))]);
              r->set_offset(in.below(4) * 64);
              r->set_size(bytes);
            } else {
              b->set_inline_bytes(std::string(bytes, static_cast<char>(in.byte() % 2)));
            }
          }
          if (in.byte() % 2 == 0) {
            for (uint64_t bytes : c->outputs) {
              pb::Buffer* b = req.add_outputs();
              if (!regions.empty() && in.byte() % 2 == 0) {
                pb::RegionRef* r = b->mutable_region();
                r->set_region(regions[in.below(static_cast<uint32_t>(regions.size()))]);
                r->set_offset(in.below(4) * 64);
                r->set_size(bytes);
              }
            }
          }
        } else {
          for (int k = in.byte() % 4; k > 0; --k) buffer(req.add_inputs());
          for (int k = in.byte() % 3; k > 0; --k) buffer(req.add_outputs());
        }
        send(service, &AccydService::Invoke, req, &reply, "Invoke");
        break;
      }
      case 8: {
        // A real upload (its token), a forged token, or a spent one.
        pb::RegisterRegionRequest req;
        pb::RegisterRegionReply reply;
        req.set_session_id(session());
        if (in.byte() % 4 != 0 && uploads.size() < 6) {
          const size_t sizes[] = {64, 4096, accy::channel::kDataOffset, accy::channel::kDataOffset + 4096, 65536};
          uploads.push_back(upload(sizes[in.below(5)]));
          req.set_token(uploads.back().token);
        } else {
          req.set_token(in.text(40));
        }
        const grpc::Status st = send(service, &AccydService::RegisterRegion, req, &reply, "RegisterRegion");
        if (st.ok()) regions.push_back(reply.region());
        break;
      }
      case 9: {
        pb::UnregisterRegionRequest req;
        pb::UnregisterRegionReply reply;
        req.set_session_id(session());
        req.set_region(region());
        send(service, &AccydService::UnregisterRegion, req, &reply, "UnregisterRegion");
        break;
      }
      case 10: {
        pb::ListRegionsRequest req;
        pb::ListRegionsReply reply;
        req.set_session_id(session());
        send(service, &AccydService::ListRegions, req, &reply, "ListRegions");
        break;
      }
      case 11: {
        // A channel on a region, its mailbox written or not. (Invokes
        // through it are the e2e tests'; here: opening, refusing, closing.)
        for (Upload& u : uploads) {
          if (u.memory != nullptr && u.bytes >= sizeof(accy::channel::Mailbox) && in.byte() % 2 == 0) {
            auto* box = static_cast<accy::channel::Mailbox*>(u.memory);
            box->magic = accy::channel::kMagic;
            box->version = in.byte() % 8 == 0 ? 7 : accy::channel::kVersion;
          }
        }
        pb::OpenChannelRequest req;
        pb::OpenChannelReply reply;
        req.set_session_id(session());
        req.set_region(region());
        send(service, &AccydService::OpenChannel, req, &reply, "OpenChannel");
        break;
      }
      default: {
        pb::NegotiateRequest req;
        pb::NegotiateReply reply;
        for (int k = in.byte() % 3; k > 0; --k) req.add_versions(in.byte() % 3);
        send(service, &AccydService::Negotiate, req, &reply, "Negotiate");
        pb::ServerInfoReply info;
        send(service, &AccydService::ServerInfo, pb::ServerInfoRequest(), &info, "ServerInfo");
        break;
      }
    }
  }
  // Close what the input opened: the service must hold nothing after.
  for (const std::string& id : sessions) {
    pb::CloseSessionRequest req;
    pb::CloseSessionReply reply;
    req.set_session_id(id);
    send(service, &AccydService::CloseSession, req, &reply, "CloseSession");
  }
  const accy::server::ServiceStats st = service.stats();
  if (st.sessions != 0 || st.programs != 0 || st.regions != 0 || st.region_bytes != 0) {
    finding("after closing every session: " + std::to_string(st.sessions) + " sessions, " +
            std::to_string(st.programs) + " programs, " + std::to_string(st.regions) + " regions held");
  }
  for (Upload& u : uploads) {
    if (u.memory != nullptr) munmap(u.memory, u.bytes);
  }
  return 0;
}
