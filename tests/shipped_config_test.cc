// accyd starts with exactly the arguments the project ships: the systemd
// unit's ExecStart expanded from accyd.env, the Kubernetes DaemonSet's
// container args and the container image's CMD, each read from its file.
// Only what names this machine's paths is swapped: listen addresses (a
// temporary Unix socket, a free loopback port), the TLS files (a fresh
// self-signed set) and the cache directory. A configuration that offers
// cuda runs on the fake CUDA driver (backends/cuda/testdata), found as
// libcuda.so.1 through LD_LIBRARY_PATH as the NVIDIA container toolkit
// provides the real one. Each must answer the gRPC health check with
// SERVING, and stop cleanly on SIGTERM.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <sstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/grpc_health.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy {
namespace {

using ::testing::HasSubstr;

std::string runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return std::string(srcdir ? srcdir : ".") + "/accy/" + path;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> splitWhitespace(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The systemd unit's ExecStart arguments: each unquoted $VAR of the
// environment file split at whitespace (systemd's rule for unquoted
// variables), other words as they are.
std::vector<std::string> systemdArguments() {
  std::map<std::string, std::string> env;
  std::istringstream env_file(readFile(runfile("deploy/systemd/accyd.env")));
  for (std::string line; std::getline(env_file, line);) {
    // NAME="value" (comments and blank lines skipped)
    const size_t eq = line.find("=\"");
    if (line.empty() || line[0] == '#' || eq == std::string::npos || line.back() != '"') continue;
    env[line.substr(0, eq)] = line.substr(eq + 2, line.size() - eq - 3);
  }
  std::istringstream unit(readFile(runfile("deploy/systemd/accyd.service")));
  std::vector<std::string> args;
  for (std::string line; std::getline(unit, line);) {
    if (line.rfind("ExecStart=", 0) != 0) continue;
    const std::vector<std::string> words = splitWhitespace(line.substr(10));
    EXPECT_EQ(words.at(0), "/usr/local/bin/accyd");
    for (size_t i = 1; i < words.size(); ++i) {
      if (words[i][0] == '$') {
        EXPECT_TRUE(env.count(words[i].substr(1))) << words[i] << " is not set in accyd.env";
        for (const std::string& w : splitWhitespace(env[words[i].substr(1)])) args.push_back(w);
      } else {
        args.push_back(words[i]);
      }
    }
  }
  return args;
}

// The DaemonSet's accyd container args: the "- --flag" items after "args:"
// up to the next key, comments skipped.
std::vector<std::string> daemonSetArguments() {
  std::istringstream yaml(readFile(runfile("deploy/kubernetes/accyd-daemonset.yaml")));
  std::vector<std::string> args;
  bool in_args = false;
  for (std::string line; std::getline(yaml, line);) {
    const size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] == '#') continue;
    const std::string item = line.substr(first);
    if (item == "args:") {
      in_args = true;
      continue;
    }
    if (!in_args) continue;
    if (item.rfind("- --", 0) != 0) break;  // the next key ends the list
    args.push_back(item.substr(2));
  }
  return args;
}

// The image's CMD (a JSON array of strings, possibly over several lines
// joined with backslashes).
std::vector<std::string> containerArguments() {
  const std::string text = readFile(runfile("deploy/container/Containerfile"));
  const size_t cmd = text.find("\nCMD [");
  EXPECT_NE(cmd, std::string::npos) << "no CMD in the Containerfile";
  if (cmd == std::string::npos) return {};
  const std::string array = text.substr(cmd + 6, text.find(']', cmd) - cmd - 6);
  std::vector<std::string> args;
  for (size_t open = array.find('"'); open != std::string::npos; open = array.find('"', open)) {
    const size_t close = array.find('"', open + 1);
    if (close == std::string::npos) break;
    args.push_back(array.substr(open + 1, close - open - 1));
    open = close + 1;
  }
  return args;
}

// A scratch directory under /tmp (Unix socket paths are limited to 107
// bytes; Bazel's TEST_TMPDIR is too deep), with a TLS set and a driver
// directory.
class Scratch {
 public:
  Scratch() {
    char dir[] = "/tmp/accyd-shipped-XXXXXX";
    dir_ = mkdtemp(dir);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }

  // A CA, and a server certificate it signed, made with the openssl tool.
  bool makeTls() {
    const std::string d = dir_;
    const std::string cmd =
        "(cd " + d + " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout ca.key -out "
        "ca.crt && openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout tls.key -out tls.csr && "
        "printf 'subjectAltName=DNS:localhost\\n' > ext && openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key "
        "-CAcreateserial -days 1 -extfile ext -out tls.crt) >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }

  // A directory holding libcuda.so.1: the fake driver.
  std::string fakeDriverDir() {
    const std::string d = dir_ + "/driver";
    std::filesystem::create_directories(d);
    std::filesystem::create_symlink(runfile("backends/cuda/testdata/libfake_cuda.so"), d + "/libcuda.so.1");
    return d;
  }

 private:
  std::string dir_;
};

int freePort() {
  return 20000 + (getpid() * 7) % 20000;
}

// The shipped arguments with this machine's paths swapped in; `swapped`
// lists what changed, for the failure message.
std::vector<std::string> localize(const std::vector<std::string>& shipped, Scratch& scratch, std::string* socket,
                                  std::string* swapped) {
  std::vector<std::string> args;
  // A port for each address: freePort() can hand out the same one twice.
  std::set<int> ports;
  auto port = [&ports] {
    int p = freePort();
    while (!ports.insert(p).second) p = freePort() + static_cast<int>(ports.size());
    return std::to_string(p);
  };
  for (const std::string& a : shipped) {
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    std::string now = a;
    if (key == "--listen" && value.rfind("unix:", 0) == 0) {
      *socket = scratch.dir() + "/accyd.sock";
      now = "--listen=unix:" + *socket;
    } else if (key == "--listen" && value.rfind("tcp:", 0) == 0) {
      now = "--listen=tcp:127.0.0.1:" + port();
    } else if (key == "--tls-cert" || key == "--tls-key" || key == "--tls-client-ca") {
      now = key + "=" + scratch.dir() + "/" + std::filesystem::path(value).filename().string();
    } else if (key == "--metrics") {
      now = "--metrics=127.0.0.1:" + port();
    } else if (key == "--cache-dir") {
      now = key + "=" + scratch.dir() + "/cache";
      std::filesystem::create_directories(scratch.dir() + "/cache");
    }
    if (now != a) *swapped += "  " + a + " -> " + now + "\n";
    args.push_back(now);
  }
  return args;
}

struct DaemonRun {
  int exit_status = -1;  // after SIGTERM, or of its own
  int health = -1;
  std::string log;
};

// Starts accyd with `args` (and `env` added), waits for its socket, asks
// for health, stops it with SIGTERM.
DaemonRun startAndCheck(const std::vector<std::string>& args, const std::string& socket,
                  const std::vector<std::string>& env, const std::string& log_path) {
  DaemonRun run;
  std::vector<std::string> argv = {runfile("server/accyd")};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    if (FILE* f = freopen(log_path.c_str(), "w", stderr); f == nullptr) _exit(126);
    std::vector<char*> c;
    for (auto& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    execv(c[0], c.data());
    _exit(127);
  }
  bool exited = false;
  int status = 0;
  for (int i = 0; i < 400; ++i) {
    struct stat st;
    if (stat(socket.c_str(), &st) == 0 && stat((socket + ".fd").c_str(), &st) == 0) break;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  if (!exited) {
    run.health = testing::healthStatus("unix:" + socket);
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
  }
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.log = readFile(log_path);
  return run;
}

void expectServing(const std::string& what, const std::vector<std::string>& shipped) {
  ASSERT_FALSE(shipped.empty()) << "no arguments found in " << what;
  Scratch scratch;
  std::string socket, swapped;
  const std::vector<std::string> args = localize(shipped, scratch, &socket, &swapped);
  ASSERT_FALSE(socket.empty()) << what << " listens on no Unix socket";
  bool wants_tls = false, wants_cuda = false;
  for (const std::string& a : shipped) {
    wants_tls |= a.rfind("--tls-cert=", 0) == 0;
    wants_cuda |= a.rfind("--devices=", 0) == 0 && a.find("cuda") != std::string::npos;
  }
  if (wants_tls) {
    ASSERT_TRUE(scratch.makeTls()) << "openssl could not make the test certificates";
  }
  std::vector<std::string> env;
  if (wants_cuda) env.push_back("LD_LIBRARY_PATH=" + scratch.fakeDriverDir());
  std::string all;
  for (const std::string& a : args) all += " " + a;
  const DaemonRun run = startAndCheck(args, socket, env, scratch.dir() + "/accyd.log");
  EXPECT_EQ(run.health, 1) << what << ": health is not SERVING\naccyd" << all << "\nswapped:\n"
                           << swapped << "log:\n"
                           << run.log;
  EXPECT_EQ(run.exit_status, 0) << what << ": exit status after SIGTERM\nlog:\n" << run.log;
  std::printf("%s: SERVING with%s\n", what.c_str(), all.c_str());
}

TEST(ShippedConfigurations, SystemdUnitWithItsEnvironmentFileServes) {
  const std::vector<std::string> args = systemdArguments();
  EXPECT_THAT(args, ::testing::Contains(::testing::StartsWith("--max-programs-per-session=")));
  expectServing("deploy/systemd (accyd.service + accyd.env)", args);
}

TEST(ShippedConfigurations, KubernetesDaemonSetServes) {
  const std::vector<std::string> args = daemonSetArguments();
  EXPECT_THAT(args, ::testing::Contains(::testing::StartsWith("--tls-client-ca=")));
  expectServing("deploy/kubernetes/accyd-daemonset.yaml", args);
}

TEST(ShippedConfigurations, ContainerImageCommandServes) {
  expectServing("deploy/container/Containerfile CMD", containerArguments());
}

// What the shipped files once passed, and other bad numbers: refused at
// start with exit status 2 and the flag named, never half started.
TEST(ShippedConfigurations, BadNumbersAreRefusedByName) {
  struct Case {
    std::string arg, message;
  };
  for (const Case& c : {Case{"--max-programs-per-session=256", "expected a whole number from 1 to 64"},
                        Case{"--max-programs-per-session=0", "from 1 to 64"},
                        Case{"--max-sessions=lots", "--max-sessions=lots: expected a whole number"},
                        Case{"--lease-seconds=-5", "--lease-seconds=-5"},
                        Case{"--max-region-bytes=12abc", "--max-region-bytes=12abc"},
                        Case{"--max-message-bytes=99999999999", "--max-message-bytes"},
                        Case{"--check-numerics=yes", "expected 0 or 1"}}) {
    Scratch scratch;
    const std::string socket = scratch.dir() + "/accyd.sock";
    const DaemonRun run = startAndCheck({"--listen=unix:" + socket, c.arg}, socket, {}, scratch.dir() + "/log");
    EXPECT_EQ(run.exit_status, 2) << c.arg << "\n" << run.log;
    EXPECT_EQ(run.health, -1) << c.arg << " started a server";
    EXPECT_THAT(run.log, HasSubstr(c.message)) << c.arg;
  }
}

}  // namespace
}  // namespace accy
