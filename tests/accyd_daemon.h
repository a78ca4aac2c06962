// A real accyd process for the daemon tests (tests/accyd_e2e_test.cc,
// tests/accyd_hostile_test.cc): started on a Unix socket in a fresh
// directory under /tmp, waited for until it accepts, and read through /proc
// (peak memory, descriptors, region mappings).
#ifndef ACCY_TESTS_ACCYD_DAEMON_H_
#define ACCY_TESTS_ACCYD_DAEMON_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace accy {

inline std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/accy/" + path;
}

// Whether a stream socket of `family` connects to `addr`.
template <typename Addr>
inline bool connects(int family, const Addr& addr) {
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// Whether something accepts connections on the Unix socket at `path`.
inline bool accepts(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::strcpy(addr.sun_path, path.c_str());
  return connects(AF_UNIX, addr);
}

// Whether a TCP connection to HOST:PORT (IPv4) is accepted.
inline bool tcpAccepts(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
  if (inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1) return false;
  return connects(AF_INET, addr);
}

// A daemon process on a socket in the test's temporary directory.
class Daemon {
 public:
  // `env`: NAME=VALUE settings for the daemon's environment.
  explicit Daemon(std::vector<std::string> args, const std::string& binary = "", std::vector<std::string> env = {}) {
    // Unix socket paths are limited to 107 bytes: Bazel's TEST_TMPDIR is
    // too deep, so use a fresh directory under /tmp.
    char dir[] = "/tmp/accyd-test-XXXXXX";
    dir_ = mkdtemp(dir);
    socket_ = dir_ + "/accyd.sock";
    argv_ = {binary.empty() ? runfile("server/accyd") : binary, "--listen=unix:" + socket_};
    argv_.insert(argv_.end(), args.begin(), args.end());
    env_ = std::move(env);
    start();
  }
  // Starts the daemon (again, after kill9: same socket, same flags).
  void start() {
    pid_ = fork();
    if (pid_ == 0) {
      for (std::string& e : env_) putenv(e.data());
      std::vector<char*> c;
      for (auto& a : argv_) c.push_back(a.data());
      c.push_back(nullptr);
      execv(c[0], c.data());
      _exit(127);
    }
    // Ready when the region socket exists and the main one accepts a
    // connection (its file appears at bind, a moment before it listens;
    // on a loaded machine that moment can be long), and so does every TCP
    // port asked for: the Unix socket listens before gRPC binds those, so
    // it alone says nothing of them (a session placed on a host whose port
    // was not bound yet went to the other host).
    std::vector<std::string> tcp;
    for (const std::string& a : argv_) {
      if (a.rfind("--listen=tcp:", 0) == 0) tcp.push_back(a.substr(13));
    }
    for (int i = 0; i < 800; ++i) {
      struct stat st;
      if (stat((socket_ + ".fd").c_str(), &st) == 0 && accepts(socket_) &&
          std::all_of(tcp.begin(), tcp.end(), tcpAccepts)) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  // SIGKILL: no drain, no clean up; the sockets' files stay behind.
  void kill9() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  ~Daemon() {
    if (pid_ > 0) stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // SIGTERM (or `signal`); returns the exit status.
  int stop(int signal = SIGTERM) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string target() const { return "unix:" + socket_; }
  // The daemon's peak resident memory so far (VmHWM), and what it holds
  // now (VmRSS), in KiB.
  long peakKib() const { return statusKib("VmHWM:"); }
  long residentKib() const { return statusKib("VmRSS:"); }
  long statusKib(const std::string& field) const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + field.size());
    }
    return -1;
  }
  const std::string& socket() const { return socket_; }
  pid_t pid() const { return pid_; }
  // Open descriptors, and mappings of shared-memory regions, as /proc says.
  int descriptors() const {
    int n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd")) ++n;
    return n;
  }
  // What each open descriptor points at, for a failure message.
  std::string descriptorTargets() const {
    std::string out;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd")) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(e.path(), ec);
      out += e.path().filename().string() + "->" + (ec ? std::string("?") : target.string()) + " ";
    }
    return out;
  }
  int regionMappings() const {
    std::ifstream maps("/proc/" + std::to_string(pid_) + "/maps");
    std::string line;
    int n = 0;
    while (std::getline(maps, line)) n += line.find("memfd:accy-region") != std::string::npos ? 1 : 0;
    return n;
  }

 private:
  std::string dir_;
  std::string socket_;
  std::vector<std::string> argv_, env_;
  pid_t pid_ = -1;
};

}  // namespace accy

#endif  // ACCY_TESTS_ACCYD_DAEMON_H_
