// accyd: the Accy compile-and-run daemon.
//
//   accyd [--listen=unix:/run/accyd/accyd.sock | --listen=tcp:HOST:PORT --tls-cert=F --tls-key=F
//          [--tls-client-ca=F]] (--listen may repeat) [--socket-mode=0600|0660] [--cache-dir=DIR] [--cache-max-bytes=N] [--threads=N]
//         [--lease-seconds=N] [--max-sessions=N] [--max-programs-per-session=N] [--max-regions-per-session=N]
//         [--max-region-bytes=N] [--max-region-bytes-per-session=N] [--max-message-bytes=N] [--max-scratch-bytes=N]
//         [--check-numerics=0|1] [--devices=cpu[,vulkan][,cuda]] [--channel-spin-us=N]
//
// Numbers are whole decimal numbers within each flag's range (a bad one is
// refused at start, naming the flag). Unix socket by default (mode 0600);
// TCP only with TLS. SIGTERM or SIGINT
// stops accepting calls, drains the ones in flight (up to 10 s) and exits 0.
#include <grpc/grpc.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "backends/registry.h"
#include "runtime/session.h"
#include "compiler/executable/build_record.h"
#include "compiler/tensor/program.h"
#include "server/compile_cache.h"
#include "server/regions.h"
#include "accy/version.h"
#include "server/metrics.h"
#include "server/service.h"
#include "server/unix_listener.h"

namespace {

std::string readFile(const std::string& path, bool* ok) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  *ok = static_cast<bool>(in);
  return s.str();
}

int usage(const char* why) {
  std::fprintf(stderr, "accyd: %s\nrun accyd --help for usage\n", why);
  return 2;
}

// Whether something accepts connections on the Unix socket at `path`.
bool socketAnswers(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::strcpy(addr.sun_path, path.c_str());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool answers = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return answers;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags = {
      {"listen", "unix:/run/accyd/accyd.sock"}, {"cache-dir", ""}, {"cache-max-bytes", "1073741824"},
      {"threads", "0"}, {"lease-seconds", "30"}, {"max-sessions", "256"}, {"max-programs-per-session", "64"},
      {"max-regions-per-session", "64"}, {"max-region-bytes-per-session", "17179869184"}, {"drain-seconds", "10"},
      {"access-log", ""}, {"metrics", ""}, {"max-sessions-per-identity", "64"}, {"max-launch-bytes", "17179869184"}, {"max-concurrent-invokes", "256"},
      {"max-region-bytes", "4294967296"}, {"max-message-bytes", "268435456"}, {"devices", "cpu"},
      {"tls-cert", ""}, {"tls-key", ""}, {"tls-client-ca", ""}, {"max-scratch-bytes", "17179869184"},
      {"check-numerics", "0"}, {"socket-mode", "0600"}, {"max-programs-per-identity", "1024"},
      {"max-region-bytes-per-identity", "68719476736"}, {"max-compile-ms", "60000"},
      {"gpu-launch-timeout-ms", "600000"}, {"channel-spin-us", "50"},
      {"region-token-seconds", "60"}, {"max-concurrent-compiles", std::to_string(accy::server::defaultConcurrentCompiles())},
      {"compile-queue-ms", "10000"}, {"max-compile-nodes", "65536"},
      {"max-launches-per-identity", std::to_string(accy::server::defaultLaunchesPerIdentity())},
      {"max-compiles-per-identity", std::to_string(accy::server::defaultLaunchesPerIdentity())},
      {"max-waiting-calls-per-identity", "64"}, {"max-call-ms", "600000"}};
  std::vector<std::string> listens;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--version") {
      std::printf("accyd %s (build %s)\n", accy::kVersion, accy::executable::buildRecord().stamped ? "stamped" : "unstamped");
      return 0;
    }
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: accyd [--version] [--listen=unix:PATH|tcp:HOST:PORT] [--tls-cert=F --tls-key=F [--tls-client-ca=F]]\n"
                  "             [--cache-dir=DIR] [--cache-max-bytes=N] [--threads=N] [--lease-seconds=N]\n"
                  "             [--max-sessions=N] [--max-programs-per-session=1..64] [--max-regions-per-session=N]\n"
                  "             [--max-region-bytes=N] [--max-region-bytes-per-session=N] [--drain-seconds=N]\n"
                  "             [--access-log=PATH|-] [--metrics=HOST:PORT] [--max-launch-bytes=N] [--max-concurrent-invokes=N]\n"
                  "             [--max-sessions-per-identity=N] [--max-programs-per-identity=N]\n"
                  "             [--max-region-bytes-per-identity=N] [--max-compile-ms=N] [--gpu-launch-timeout-ms=N]"
                  " [--max-message-bytes=N] [--max-scratch-bytes=N] [--check-numerics=0|1]\n"
                  "             [--socket-mode=0600|0660] [--devices=cpu[,vulkan][,cuda]] [--channel-spin-us=N]\n"
                  "             [--region-token-seconds=N] [--max-concurrent-compiles=N] [--compile-queue-ms=N]\n"
                  "             [--max-compile-nodes=N] [--max-launches-per-identity=N] [--max-compiles-per-identity=N]\n"
                  "             [--max-waiting-calls-per-identity=N] [--max-call-ms=N]   (--listen may repeat)\n"
                  "devices: cpu (target x86_64), vulkan (spirv), cuda (ptx; needs the NVIDIA driver's libcuda.so.1\n"
                  "and a GPU); a device that is not available here is refused at start with the reason\n");
      return 0;
    }
    const size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return usage(("bad argument: " + arg).c_str());
    const std::string key = arg.substr(2, eq - 2);
    if (!flags.count(key)) return usage(("unknown flag --" + key).c_str());
    if (key == "listen") listens.push_back(arg.substr(eq + 1));
    flags[key] = arg.substr(eq + 1);
  }
  if (listens.empty()) listens.push_back(flags["listen"]);
  std::vector<std::string> device_names;
  for (size_t start = 0; start <= flags["devices"].size();) {
    const size_t comma = flags["devices"].find(',', start);
    const size_t end = comma == std::string::npos ? flags["devices"].size() : comma;
    if (end > start) device_names.push_back(flags["devices"].substr(start, end - start));
    start = end + 1;
  }
  // Every number flag, checked before anything starts.
  struct NumberFlag {
    const char* key;
    int64_t min, max;
  };
  const NumberFlag number_flags[] = {
      {"cache-max-bytes", 0, INT64_MAX},
      {"threads", 0, 4096},
      {"lease-seconds", 1, 86400},
      {"max-sessions", 1, 1 << 20},
      {"max-programs-per-session", 1, accy::session::kMaxPrograms},
      {"max-regions-per-session", 1, 1 << 20},
      {"max-region-bytes", 1, INT64_MAX},
      {"drain-seconds", 0, 3600},
      {"max-launch-bytes", 0, INT64_MAX},
      {"max-concurrent-invokes", 1, 1 << 20},
      {"max-sessions-per-identity", 1, 1 << 20},
      {"max-programs-per-identity", 1, 1 << 30},
      {"max-region-bytes-per-identity", 1, INT64_MAX},
      {"max-compile-ms", 1, 86400000},
      {"max-concurrent-compiles", 1, 4096},
      {"compile-queue-ms", 0, 86400000},
      {"max-compile-nodes", 1, accy::tensor::kMaxProgramNodes},
      {"gpu-launch-timeout-ms", 0, 86400000},
      {"channel-spin-us", 0, 1000000},
      {"region-token-seconds", 1, 86400},
      {"max-region-bytes-per-session", 1, INT64_MAX},
      {"max-message-bytes", 1024, INT32_MAX},  // gRPC's message size is an int
      {"max-scratch-bytes", 0, INT64_MAX},
      {"max-launches-per-identity", 1, 1 << 20},
      {"max-compiles-per-identity", 1, 4096},
      {"max-waiting-calls-per-identity", 0, 1 << 20},
      {"max-call-ms", 0, 86400000},
  };
  std::map<std::string, int64_t> numbers;
  for (const NumberFlag& f : number_flags) {
    const std::string& text = flags[f.key];
    int64_t value = 0;
    if (!absl::SimpleAtoi(text, &value) || text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
        value < f.min || value > f.max) {
      return usage(("--" + std::string(f.key) + "=" + text + ": expected a whole number from " + std::to_string(f.min) +
                    " to " + std::to_string(f.max))
                       .c_str());
    }
    numbers[f.key] = value;
  }
  if (flags["check-numerics"] != "0" && flags["check-numerics"] != "1") {
    return usage(("--check-numerics=" + flags["check-numerics"] + ": expected 0 or 1").c_str());
  }
  auto number = [&](const char* key) { return numbers.at(key); };
  auto devices = accy::backends::selectBackends(
      device_names, accy::backends::BackendOptions{.threads = static_cast<int>(number("threads")),
                                                   .launch_timeout_ms = number("gpu-launch-timeout-ms")});
  if (!devices.ok()) return usage(std::string(devices.status().message()).c_str());

  // Signals go to one waiting thread, never to gRPC's threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Every --listen: unix:PATH (plain, local) or tcp:HOST:PORT (TLS only).
  std::vector<std::pair<std::string, std::shared_ptr<grpc::ServerCredentials>>> ports;
  std::vector<std::string> unix_paths;
  for (const std::string& listen : listens) {
    if (listen.rfind("unix:", 0) == 0) {
      const std::string path = listen.substr(5);
      // A socket left by a killed daemon is removed; a live daemon's is not.
      if (socketAnswers(path)) {
        std::fprintf(stderr, "accyd: another daemon is listening on %s; stop it or choose another --listen\n",
                     path.c_str());
        return 1;
      }
      unlink(path.c_str());
      unix_paths.push_back(path);
    } else if (listen.rfind("tcp:", 0) == 0) {
      if (flags["tls-cert"].empty() || flags["tls-key"].empty()) {
        return usage("TCP listening needs TLS: pass --tls-cert and --tls-key");
      }
      bool ok1, ok2, ok3 = true;
      grpc::SslServerCredentialsOptions tls;
      tls.pem_key_cert_pairs.push_back({readFile(flags["tls-key"], &ok1), readFile(flags["tls-cert"], &ok2)});
      if (!flags["tls-client-ca"].empty()) {
        tls.pem_root_certs = readFile(flags["tls-client-ca"], &ok3);
        tls.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      }
      if (!ok1 || !ok2 || !ok3) return usage("cannot read the TLS files");
      ports.emplace_back(listen.substr(4), grpc::SslServerCredentials(tls));
    } else {
      return usage("--listen takes unix:PATH or tcp:HOST:PORT");
    }
  }
  // Shared-memory regions are passed next to the first Unix socket.
  const std::string socket_path =
      unix_paths.empty() ? "/tmp/accyd-" + std::to_string(getpid()) + ".sock" : unix_paths.front();
  const mode_t socket_mode = static_cast<mode_t>(std::strtol(flags["socket-mode"].c_str(), nullptr, 8));
  if (socket_mode != 0600 && socket_mode != 0660) return usage("--socket-mode takes 0600 or 0660");
  accy::server::CacheOptions cache_options;
  cache_options.disk_dir = flags["cache-dir"];
  cache_options.disk_max_bytes = number("cache-max-bytes");
  cache_options.max_compile_ms = number("max-compile-ms");
  cache_options.max_concurrent_compiles = number("max-concurrent-compiles");
  cache_options.compile_queue_ms = number("compile-queue-ms");
  accy::server::CompileCache cache(cache_options, accy::executable::buildRecord());
  accy::server::RegionSocketLimits region_limits;
  region_limits.token_lifetime = std::chrono::seconds(number("region-token-seconds"));
  accy::server::RegionSocket regions(socket_path + ".fd", static_cast<size_t>(number("max-region-bytes")),
                                     region_limits);
  if (absl::Status st = regions.start(); !st.ok()) {
    std::fprintf(stderr, "accyd: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  accy::server::Limits limits;
  limits.max_sessions = number("max-sessions");
  limits.max_programs_per_session = number("max-programs-per-session");
  limits.max_regions_per_session = number("max-regions-per-session");
  limits.max_region_bytes = number("max-region-bytes");
  limits.max_region_bytes_per_session = number("max-region-bytes-per-session");
  limits.max_launch_bytes = number("max-launch-bytes");
  limits.max_sessions_per_identity = number("max-sessions-per-identity");
  limits.max_programs_per_identity = number("max-programs-per-identity");
  limits.max_region_bytes_per_identity = number("max-region-bytes-per-identity");
  limits.max_compile_nodes = number("max-compile-nodes");
  limits.max_concurrent_invokes = number("max-concurrent-invokes");
  limits.max_message_bytes = number("max-message-bytes");
  limits.lease_seconds = static_cast<int>(number("lease-seconds"));
  limits.max_scratch_bytes = number("max-scratch-bytes");
  limits.check_numerics = flags["check-numerics"] == "1";
  limits.channel_spin_us = number("channel-spin-us");
  limits.max_launches_per_identity = number("max-launches-per-identity");
  limits.max_compiles_per_identity = number("max-compiles-per-identity");
  limits.max_waiting_calls_per_identity = number("max-waiting-calls-per-identity");
  limits.max_call_ms = number("max-call-ms");
  limits.max_compile_ms = number("max-compile-ms");
  limits.compile_queue_ms = number("compile-queue-ms");
  accy::server::AccydService service(cache, regions, limits, std::move(*devices));
  // --access-log=PATH (appended to) or - (standard error): one JSON line per call.
  std::FILE* access_log = nullptr;
  if (const std::string& path = flags["access-log"]; !path.empty()) {
    access_log = path == "-" ? stderr : std::fopen(path.c_str(), "ae");
    if (access_log == nullptr) {
      std::fprintf(stderr, "accyd: --access-log=%s: %s\n", path.c_str(), std::strerror(errno));
      return 2;
    }
    service.setAccessLog(access_log);
  }
  // --metrics=HOST:PORT: Prometheus's /metrics (server/metrics.h); off by default.
  std::unique_ptr<accy::server::Metrics> metrics;
  if (const std::string& address = flags["metrics"]; !address.empty()) {
    absl::StatusOr<std::unique_ptr<accy::server::Metrics>> m = accy::server::Metrics::serve(address, service, cache);
    if (!m.ok()) {
      std::fprintf(stderr, "accyd: %s\n", std::string(m.status().message()).c_str());
      return 2;
    }
    metrics = *std::move(m);
    service.setCallObserver(metrics->observer());
    std::fprintf(stderr, "accyd: metrics on http://%s/metrics\n", address.c_str());
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  for (const auto& [address, credentials] : ports) builder.AddListeningPort(address, credentials);
  builder.RegisterService(service.grpcService());
  builder.SetMaxReceiveMessageSize(static_cast<int>(limits.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(limits.max_message_bytes));
  // Unix sockets are accepted here, not by gRPC: each connection's peer
  // uid (SO_PEERCRED) becomes the identity its sessions belong to.
  std::vector<std::unique_ptr<accy::server::UnixListener>> unix_listeners;
  for (const std::string& path : unix_paths) {
    absl::StatusOr<std::unique_ptr<accy::server::UnixListener>> l = accy::server::UnixListener::open(path);
    if (!l.ok()) {
      std::fprintf(stderr, "accyd: %s\n", std::string(l.status().message()).c_str());
      return 1;
    }
    unix_listeners.push_back(*std::move(l));
  }
  const mode_t old_mask = umask(0077);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  umask(old_mask);
  if (!server) {
    std::fprintf(stderr, "accyd: cannot listen on %s\n", flags["listen"].c_str());
    return 1;
  }
  for (auto& l : unix_listeners) {
    l->start([&service, &server](int fd, uid_t uid) {
      service.notePeer(fd, uid);
      grpc::AddInsecureChannelFromFd(server.get(), fd);
    });
  }
  // Per device: "accyd.device.<name>" SERVING until the device cannot run
  // work any more (the whole server, service "", stays SERVING).
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  service.setHealthListener([health](const std::string& device, bool serving, const std::string& why) {
    if (health != nullptr) health->SetServingStatus("accyd.device." + device, serving);
    if (!serving) std::fprintf(stderr, "accyd: device %s stopped serving: %s\n", device.c_str(), why.c_str());
  });
  for (const std::string& path : unix_paths) chmod(path.c_str(), socket_mode);
  chmod((socket_path + ".fd").c_str(), socket_mode);
  std::fprintf(stderr, "accyd: listening on %s (regions on %s.fd), build %s, disk cache %s\n", flags["listen"].c_str(),
               socket_path.c_str(), accy::executable::buildRecord().stamped ? "stamped" : "unstamped",
               cache.stats().disk_enabled ? "on" : ("off: " + cache.stats().disk_disabled_reason).c_str());
  // SIGTERM or SIGINT: stop accepting calls, let those in flight finish for
  // up to --drain-seconds, then cancel them. A handler still running after
  // that (a long kernel does not look at cancellation) would hold the
  // process: past the drain time and a second of grace it exits anyway.
  std::atomic<bool> drained{false};
  const int64_t drain_seconds = number("drain-seconds");
  std::atomic<std::chrono::steady_clock::time_point> drain_deadline{std::chrono::steady_clock::time_point::max()};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(drain_seconds);
    std::fprintf(stderr, "accyd: signal %d: draining\n", sig);
    for (auto& l : unix_listeners) l->stop();  // no new connections
    std::thread([&drained, drain_seconds] {
      std::this_thread::sleep_for(std::chrono::seconds(drain_seconds + 1));
      if (drained.load()) return;
      std::fprintf(stderr, "accyd: calls still running %lld s after the signal; exiting without them\n",
                   static_cast<long long>(drain_seconds + 1));
      std::_Exit(0);
    }).detach();
    // Shutdown returns once the calls in flight have finished and every
    // connection has closed; an idle client closes its side only when it
    // next reads from it (up to 5 s later, gRPC's backup poller). So once
    // no call has been running for two looks 20 ms apart (a call the
    // server has matched starts its handler at once), the connections are
    // dropped: cancelling all calls with none left disconnects them.
    std::atomic<bool> shut{false};
    std::thread closer([&] {
      for (int idle = 0; !shut.load() && idle < 2;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        idle = service.callsInFlight() == 0 ? idle + 1 : 0;
        if (idle == 2) grpc_server_cancel_all_calls(server->c_server());
      }
    });
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(drain_seconds));
    shut.store(true);
    closer.join();
  });
  server->Wait();
  // Invokes on channels are not gRPC calls: they drain here, within the
  // same time (the guard above exits past it).
  waiter.join();
  service.drain(drain_deadline.load());
  drained.store(true);
  regions.stop();
  std::fprintf(stderr, "accyd: stopped\n");
  return 0;
}
