// A fake CUDA driver for tests on machines without a GPU: a shared library
// exporting every entry point of cuda_functions.inc under its real
// (versioned) symbol name, with the real signatures from cuda.h. "Device
// memory" is host memory; a module is its PTX text's `.entry` names,
// parameter counts and `.reqntid`; launching a kernel runs a host stand-in
// chosen by the kernel's name:
//
//   axpb(a, b, y):              y[i] = a[i] * 2 + b[i]
//   add_one(x, t, y):           t[i] = x[i] + 1
//   reverse_triple(x, t, y):    y[i] = t[n - 1 - i] * 3
//   accy_fake_fault(...):       the stream's next synchronize fails with
//                               CUDA_ERROR_ILLEGAL_ADDRESS
//   anything else:              nothing, or, when ACCY_FAKE_CUDA_PTXSIM is
//                               set, the kernel itself on the PTX
//                               interpreter (below)
//
// over f32 elements i < min(n, blocks * threads), where n is the element
// count of the allocation the output parameter points into. It checks what
// the real driver checks and a little more, so the backend's mistakes fail
// loudly: calls that need a context fail without a current one, copies and
// kernel parameters must lie inside allocations, a launch's block must match
// the entry's .reqntid and its y and z dimensions must be 1.
//
// Environment (read at each call): ACCY_FAKE_CUDA_INIT = the CUresult cuInit
// returns (default 0); ACCY_FAKE_CUDA_DEVICES = the device count (default 2:
// device 0 with 66 SMs, device 1 with 132); ACCY_FAKE_CUDA_FAULT_AT_LAUNCH=N
// makes the Nth launch of the process (counting from 1) fault like
// accy_fake_fault; ACCY_FAKE_CUDA_STICKY=1 makes a fault sticky, as a real
// GPU's illegal address is: once a synchronize has reported it, every
// allocation, copy, launch and synchronize fails with it. Built with
// ACCY_FAKE_CUDA_PARTIAL it lacks cuLaunchKernel and cuEventElapsedTime.
//
// Running real kernels: with ACCY_FAKE_CUDA_PTXSIM=/path/to/ptxsim.py
// (compiler/codegen/ptx/ptxsim.py) set, a launch of any kernel other than
// the four above runs it on that PTX interpreter, synchronously, inside
// cuLaunchKernel: the module's text and, per parameter, the bytes from the
// parameter's address to the end of its allocation go to files in a fresh
// directory under $TEST_TMPDIR (else $TMPDIR, else /tmp), then
// ptxsim.py runs `launch module.ptx ENTRY GRID_X BLOCK_X param0 param1 ...`
// in one long-lived `$ACCY_FAKE_CUDA_PYTHON ptxsim.py serve` process
// (ACCY_FAKE_CUDA_PYTHON, a path or a name on PATH, defaults to
// /usr/bin/python3; started at the first launch, again when it dies) and
// the files are copied back into the allocations.
// Every parameter must point into an allocation, no two into the same one.
// When the interpreter fails (a load or store outside a buffer, an
// instruction it does not know, a deadlock at a barrier),
// cuLaunchKernel returns CUDA_ERROR_LAUNCH_FAILED and the allocations are
// left as they were; cuGetErrorString(CUDA_ERROR_LAUNCH_FAILED) on the same
// thread then gives the interpreter's message. ACCY_FAKE_CUDA_PTXSIM_KEEP=1
// keeps the directories, each with its command line in `command` (to run
// a launch again by hand; the parameter files then hold its results).
//
// Tests reach its state through two extra exports, accy_fake_cuda_live and
// accy_fake_cuda_last_launch (below).
#include <cuda.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct CUctx_st {
  int device = 0;
};
struct CUfunc_st {
  std::string name;
  int params = 0;
  unsigned reqntid = 0;               // 0: no .reqntid
  const std::string* text = nullptr;  // the module's PTX
};
struct CUmod_st {
  std::string text;
  std::map<std::string, std::unique_ptr<CUfunc_st>> entries;
};
struct CUstream_st {
  CUresult pending = CUDA_SUCCESS;
};
struct CUevent_st {
  bool recorded = false;
};

namespace {

constexpr int kMaxDevices = 4;

struct State {
  std::mutex mu;
  bool initialized = false;
  CUctx_st contexts[kMaxDevices];
  int retained[kMaxDevices] = {};
  std::map<uintptr_t, size_t> allocations;  // address -> bytes
  std::map<uintptr_t, size_t> registered;   // host address -> bytes
  int modules = 0, streams = 0, events = 0, launches = 0;
  std::string last_kernel;
  unsigned last_dims[6] = {};
};

State& state() {
  static State* s = new State;
  return *s;
}

// The sticky fault, once reported (ACCY_FAKE_CUDA_STICKY=1).
std::atomic<CUresult> sticky_fault{CUDA_SUCCESS};

thread_local std::vector<CUcontext> current;
// What the PTX interpreter said when this thread's last launch on it failed.
thread_local std::string launch_failure;

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? std::atoi(v) : fallback;
}

int deviceCount() { return std::min(envInt("ACCY_FAKE_CUDA_DEVICES", 2), kMaxDevices); }

bool hasContext() { return !current.empty() && current.back() != nullptr; }

// The allocation holding [p, p + n); its end, or 0 when there is none.
uintptr_t allocationEnd(const std::map<uintptr_t, size_t>& table, uintptr_t p, size_t n) {
  auto it = table.upper_bound(p);
  if (it == table.begin()) return 0;
  --it;
  const uintptr_t end = it->first + it->second;
  return p >= it->first && p + n <= end ? end : 0;
}

void writeLog(char* buffer, size_t size, const std::string& text) {
  if (buffer == nullptr || size == 0) return;
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

const char* skipSpace(const char* p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
  return p;
}

// The `.entry`s of PTX text: name, parameter count, .reqntid.
std::unique_ptr<CUmod_st> parse(const char* text) {
  auto module = std::make_unique<CUmod_st>();
  for (const char* p = std::strstr(text, ".entry"); p != nullptr; p = std::strstr(p + 1, ".entry")) {
    const char* q = skipSpace(p + 6);
    const char* name_end = q;
    while (*name_end != '\0' && *name_end != '(' && *name_end != ' ' && *name_end != '\t' && *name_end != '\n') {
      ++name_end;
    }
    auto f = std::make_unique<CUfunc_st>();
    f->name.assign(q, name_end);
    const char* open = std::strchr(name_end, '(');
    const char* close = open != nullptr ? std::strchr(open, ')') : nullptr;
    const char* body = close != nullptr ? std::strchr(close, '{') : nullptr;
    if (close == nullptr || body == nullptr) return nullptr;
    for (const char* r = std::strstr(open, ".param"); r != nullptr && r < close; r = std::strstr(r + 1, ".param")) {
      ++f->params;
    }
    const char* req = std::strstr(close, ".reqntid");
    if (req != nullptr && req < body) f->reqntid = static_cast<unsigned>(std::atoi(skipSpace(req + 8)));
    module->entries[f->name] = std::move(f);
  }
  return module;
}

[[maybe_unused]] float* floats(uint64_t address) { return reinterpret_cast<float*>(static_cast<uintptr_t>(address)); }

#ifndef ACCY_FAKE_CUDA_PARTIAL
bool writeFile(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  return out.good();
}

bool readFile(const std::string& path, std::string* data) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return false;
  data->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

std::string tempRoot() {
  for (const char* name : {"TEST_TMPDIR", "TMPDIR"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && v[0] != '\0') return v;
  }
  return "/tmp";
}

// The interpreter as one process for every launch (ptxsim.py's serve
// mode): a request line with the launch's arguments separated by tabs, a
// reply line "ok" or "failed WHY". Started at the first launch and again
// after it exits or when the interpreter's path changes; its standard error
// goes to a log under the temporary root, read when it dies.
class SimServer {
 public:
  // Runs one launch (the launch mode's arguments after "launch"); the empty
  // string on success, else what failed.
  std::string launch(const std::string& python, const std::string& sim, const std::vector<std::string>& args) {
    std::lock_guard<std::mutex> lock(mu_);
    std::string line;
    for (const std::string& a : args) {
      if (a.find_first_of("\t\n") != std::string::npos) return "a path with a tab or newline: " + a;
      line += (line.empty() ? "" : "\t") + a;
    }
    line += "\n";
    if (fd_ >= 0 && (python != python_ || sim != sim_)) stop();
    if (fd_ < 0) {
      if (std::string why = start(python, sim); !why.empty()) return why;
    }
    for (size_t sent = 0; sent < line.size();) {
      const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return died();
      sent += static_cast<size_t>(n);
    }
    std::string reply;
    char c = 0;
    while (true) {
      const ssize_t n = recv(fd_, &c, 1, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return died();
      if (c == '\n') break;
      reply += c;
    }
    if (reply == "ok") return "";
    if (reply.rfind("failed ", 0) == 0) return reply.substr(7);
    return "the interpreter replied \"" + reply + "\"";
  }

 private:
  std::string start(const std::string& python, const std::string& sim) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      return std::string("socketpair: ") + std::strerror(errno);
    }
    log_ = tempRoot() + "/accy_fake_cuda_ptxsim." + std::to_string(getpid()) + ".log";
    std::vector<std::string> args = {python, sim, "serve"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 0);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int spawned = posix_spawnp(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(sv[1]);
    if (spawned != 0) {
      close(sv[0]);
      pid_ = -1;
      return "cannot run " + python + ": " + std::strerror(spawned);
    }
    fd_ = sv[0];
    python_ = python;
    sim_ = sim;
    return "";
  }

  // The interpreter is gone: how it ended and the end of its log.
  std::string died() {
    int status = 0;
    const pid_t pid = pid_;
    close(fd_);
    fd_ = -1;
    pid_ = -1;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::string text;
    readFile(log_, &text);
    if (text.size() > 2000) text = text.substr(text.size() - 2000);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return std::string("the interpreter ended (") +
           (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                              : "signal " + std::to_string(WTERMSIG(status))) +
           "): " + text;
  }

  void stop() {
    if (fd_ < 0) return;
    close(fd_);  // its stdin ends: it exits
    fd_ = -1;
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

  std::mutex mu_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string python_, sim_, log_;
};

SimServer& simServer() {
  static SimServer* server = new SimServer;  // never destroyed: launches may come from exit handlers
  return *server;
}

// Runs kernel f on the PTX interpreter `sim` (see the top of the file):
// parameter i is the memory [begin[i], end[i]). Returns why it failed, or
// the empty string; on failure the memory is as it was.
std::string simulate(const char* sim, const CUfunc_st& f, unsigned grid, unsigned block,
                     const std::vector<uintptr_t>& begin, const std::vector<uintptr_t>& end) {
  const std::string what = "ptxsim could not run kernel " + f.name + ": ";
  for (size_t i = 0; i < begin.size(); ++i) {
    for (size_t j = i + 1; j < begin.size(); ++j) {
      if (begin[i] < end[j] && begin[j] < end[i]) {
        return what + "parameters " + std::to_string(i) + " and " + std::to_string(j) + " point into one allocation";
      }
    }
  }
  std::string pattern = tempRoot() + "/accy_fake_cuda.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return what + "mkdtemp " + pattern + ": " + std::strerror(errno);
  const std::string dir = pattern;
  const std::string module = dir + "/module.ptx", log = dir + "/log";
  std::vector<std::string> files = {module, log};
  for (size_t i = 0; i < begin.size(); ++i) files.push_back(dir + "/param" + std::to_string(i));
  const char* python = std::getenv("ACCY_FAKE_CUDA_PYTHON");
  if (python == nullptr || python[0] == '\0') python = "/usr/bin/python3";
  std::vector<std::string> args = {python, sim, "launch", module, f.name, std::to_string(grid), std::to_string(block)};
  args.insert(args.end(), files.begin() + 2, files.end());

  std::string failure;
  bool written = writeFile(module, f.text->data(), f.text->size());
  for (size_t i = 0; i < begin.size(); ++i) {
    written = written && writeFile(files[i + 2], reinterpret_cast<const void*>(begin[i]), end[i] - begin[i]);
  }
  if (!written) failure = what + "cannot write the files in " + dir;
  if (failure.empty()) {
    const std::string why = simServer().launch(python, sim, std::vector<std::string>(args.begin() + 3, args.end()));
    if (!why.empty()) {
      failure = "ptxsim failed on kernel " + f.name + " (" + std::to_string(grid) + " blocks of " +
                std::to_string(block) + " threads): " + why;
    }
  }
  if (failure.empty()) {
    // Everything is read before anything is copied back.
    std::vector<std::string> results(begin.size());
    for (size_t i = 0; i < begin.size() && failure.empty(); ++i) {
      if (!readFile(files[i + 2], &results[i]) || results[i].size() != end[i] - begin[i]) {
        failure = what + files[i + 2] + " came back with " + std::to_string(results[i].size()) + " bytes, not " +
                  std::to_string(end[i] - begin[i]);
      }
    }
    for (size_t i = 0; i < begin.size() && failure.empty(); ++i) {
      std::memcpy(reinterpret_cast<void*>(begin[i]), results[i].data(), results[i].size());
    }
  }
  if (envInt("ACCY_FAKE_CUDA_PTXSIM_KEEP", 0) != 0) {
    std::string command;
    for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
    command += "\n";
    writeFile(dir + "/command", command.data(), command.size());
  } else {
    for (const std::string& file : files) unlink(file.c_str());
    rmdir(dir.c_str());
  }
  return failure;
}
#endif

}  // namespace

// The state tests look at: "contexts" (primary-context retains outstanding),
// "allocations", "registrations", "modules", "streams", "events",
// "launches" (ever), "current" (this thread's context stack depth).
extern "C" int accy_fake_cuda_live(const char* what) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string w = what;
  if (w == "contexts") {
    int n = 0;
    for (int r : s.retained) n += r;
    return n;
  }
  if (w == "allocations") return static_cast<int>(s.allocations.size());
  if (w == "registrations") return static_cast<int>(s.registered.size());
  if (w == "modules") return s.modules;
  if (w == "streams") return s.streams;
  if (w == "events") return s.events;
  if (w == "launches") return s.launches;
  if (w == "current") return static_cast<int>(current.size());
  return -1;
}

// Clears a sticky fault (ACCY_FAKE_CUDA_STICKY), as a process restart would.
extern "C" void accy_fake_cuda_clear_fault() { sticky_fault.store(CUDA_SUCCESS); }

// The last launch's kernel name; dims gets grid x, y, z and block x, y, z.
extern "C" const char* accy_fake_cuda_last_launch(unsigned* dims) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::memcpy(dims, s.last_dims, sizeof(s.last_dims));
  return s.last_kernel.c_str();
}

CUresult cuGetErrorName(CUresult error, const char** str) {
  if (static_cast<int>(error) == 9999) {  // a value only this driver knows
    *str = "CUDA_ERROR_FAKE_ONLY";
    return CUDA_SUCCESS;
  }
  switch (error) {
    case CUDA_SUCCESS:
      *str = "CUDA_SUCCESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *str = "CUDA_ERROR_OUT_OF_MEMORY";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE:
      *str = "CUDA_ERROR_NO_DEVICE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_PTX:
      *str = "CUDA_ERROR_INVALID_PTX";
      return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *str = "CUDA_ERROR_ILLEGAL_ADDRESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED:
      *str = "CUDA_ERROR_LAUNCH_FAILED";
      return CUDA_SUCCESS;
    default:
      *str = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char** str) {
  const char* name = nullptr;
  if (cuGetErrorName(error, &name) != CUDA_SUCCESS) {
    *str = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (error == CUDA_ERROR_LAUNCH_FAILED && !launch_failure.empty()) {
    // This thread's last failed launch on the PTX interpreter, in its words.
    thread_local std::string text;
    text = std::string("fake driver says ") + name + ": " + launch_failure;
    *str = text.c_str();
    return CUDA_SUCCESS;
  }
  static std::mutex mu;
  static std::map<int, std::string>* texts = new std::map<int, std::string>;
  std::lock_guard<std::mutex> lock(mu);
  std::string& text = (*texts)[static_cast<int>(error)];
  text = std::string("fake driver says ") + name;
  *str = text.c_str();
  return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = static_cast<CUresult>(envInt("ACCY_FAKE_CUDA_INIT", 0));
  if (r != CUDA_SUCCESS) return r;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.initialized = true;
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  *version = 12080;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  if (!state().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = deviceCount();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!state().initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  if (device < 0 || device >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  const std::string text = "Accy Fake GPU " + std::to_string(device);
  writeLog(name, static_cast<size_t>(len), text);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  if (device < 0 || device >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *value = device == 1 ? 132 : 66;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *value = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *value = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      *value = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      *value = CU_COMPUTEMODE_DEFAULT;
      break;
    default:
      *value = 0;
      break;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  if (device < 0 || device >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (device < 0 || device >= deviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.retained[device];
  s.contexts[device].device = device;
  *context = &s.contexts[device];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  if (device < 0 || device >= kMaxDevices) return CUDA_ERROR_INVALID_DEVICE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.retained[device] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --s.retained[device];
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  if (current.empty()) {
    current.push_back(context);
  } else {
    current.back() = context;
  }
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext context) {
  if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  current.push_back(context);
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext* context) {
  if (current.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (context != nullptr) *context = current.back();
  current.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count, CUjit_option* options,
                            void** values) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  char* error_log = nullptr;
  char* info_log = nullptr;
  size_t error_size = 0, info_size = 0;
  for (unsigned int i = 0; i < count; ++i) {
    switch (options[i]) {
      case CU_JIT_ERROR_LOG_BUFFER:
        error_log = static_cast<char*>(values[i]);
        break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        error_size = reinterpret_cast<uintptr_t>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER:
        info_log = static_cast<char*>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        info_size = reinterpret_cast<uintptr_t>(values[i]);
        break;
      default:
        break;
    }
  }
  const char* text = static_cast<const char*>(image);
  if (std::strncmp(skipSpace(text), ".version", 8) != 0) {
    writeLog(error_log, error_size, "ptxas fatal   : the fake JIT wants .version first");
    return CUDA_ERROR_INVALID_PTX;
  }
  if (const char* bad = std::strstr(text, "accy_fake_jit_error")) {
    int line = 1;
    for (const char* p = text; p < bad; ++p) line += *p == '\n';
    writeLog(
        error_log, error_size,
        "ptxas application ptx input, line " + std::to_string(line) +
            "; error   : Unknown symbol 'accy_fake_jit_error'\nptxas fatal   : Ptx assembly aborted due to errors\n");
    return CUDA_ERROR_INVALID_PTX;
  }
  std::unique_ptr<CUmod_st> parsed = parse(text);
  if (parsed == nullptr) {
    writeLog(error_log, error_size, "ptxas fatal   : the fake JIT could not read an .entry");
    return CUDA_ERROR_INVALID_PTX;
  }
  parsed->text = text;
  for (auto& [name, f] : parsed->entries) f->text = &parsed->text;
  writeLog(info_log, info_size,
           "ptxas info    : fake JIT compiled " + std::to_string(parsed->entries.size()) + " entries\n");
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.modules;
  *module = parsed.release();
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (module == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete module;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.modules;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  auto it = module->entries.find(name);
  if (it == module->entries.end()) return CUDA_ERROR_NOT_FOUND;
  *function = it->second.get();
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
  if (const CUresult f = sticky_fault.load(); f != CUDA_SUCCESS) return f;
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(p, 0xCD, bytes);  // fresh device memory is not zero
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
  *pointer = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr pointer) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.allocations.erase(static_cast<uintptr_t>(pointer)) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(static_cast<uintptr_t>(pointer)));
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr destination, const void* source, size_t bytes, CUstream stream) {
  if (const CUresult f = sticky_fault.load(); f != CUDA_SUCCESS) return f;
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;  // the backend never uses the legacy stream
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (allocationEnd(s.allocations, destination, bytes) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(destination)), source, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync(void* destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  if (const CUresult f = sticky_fault.load(); f != CUDA_SUCCESS) return f;
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (allocationEnd(s.allocations, source, bytes) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  std::memcpy(destination, reinterpret_cast<const void*>(static_cast<uintptr_t>(source)), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes, CUstream stream) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (allocationEnd(s.allocations, source, bytes) == 0 || allocationEnd(s.allocations, destination, bytes) == 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(destination)),
               reinterpret_cast<const void*>(static_cast<uintptr_t>(source)), bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemHostRegister(void* p, size_t bytes, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (p == nullptr || bytes == 0 || (flags & CU_MEMHOSTREGISTER_DEVICEMAP) == 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (const auto& [start, size] : s.registered) {
    if (a < start + size && start < a + bytes) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  s.registered[a] = bytes;
  return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* p) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.registered.erase(reinterpret_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  return CUDA_SUCCESS;
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr* pointer, void* p, unsigned int flags) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (allocationEnd(s.registered, reinterpret_cast<uintptr_t>(p), 1) == 0) return CUDA_ERROR_INVALID_VALUE;
  *pointer = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

#ifndef ACCY_FAKE_CUDA_PARTIAL
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void** params,
                        void** extra) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult fault = sticky_fault.load(); fault != CUDA_SUCCESS) return fault;
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (gx == 0 || gy != 1 || gz != 1 || bx == 0 || by != 1 || bz != 1 || bx > 1024 || shared != 0 || extra != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (f->reqntid != 0 && bx != f->reqntid) return CUDA_ERROR_INVALID_VALUE;
  if (f->params > 0 && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  State& s = state();
  std::vector<uint64_t> p(static_cast<size_t>(f->params));
  std::vector<uint64_t> elements(p.size(), 0);  // f32 elements from p[i] to its allocation's end
  std::vector<uintptr_t> begins(p.size(), 0), ends(p.size(), 0);
  long long this_launch = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    this_launch = ++s.launches;
    s.last_kernel = f->name;
    const unsigned dims[6] = {gx, gy, gz, bx, by, bz};
    std::memcpy(s.last_dims, dims, sizeof(dims));
    for (size_t i = 0; i < p.size(); ++i) {
      std::memcpy(&p[i], params[i], sizeof(uint64_t));
      const uintptr_t end = allocationEnd(s.allocations, p[i], 1);
      if (end == 0) {
        stream->pending = CUDA_ERROR_ILLEGAL_ADDRESS;  // a fault shows at the next synchronize
        return CUDA_SUCCESS;
      }
      elements[i] = (end - p[i]) / 4;
      begins[i] = static_cast<uintptr_t>(p[i]);
      ends[i] = end;
    }
  }
  const uint64_t threads = uint64_t{gx} * bx;
  const char* fault_at = std::getenv("ACCY_FAKE_CUDA_FAULT_AT_LAUNCH");
  const bool fault_now = fault_at != nullptr && std::atoll(fault_at) == this_launch;
  if (f->name == "accy_fake_fault" || fault_now) {
    stream->pending = CUDA_ERROR_ILLEGAL_ADDRESS;
  } else if (f->name == "axpb" && p.size() == 3) {
    const float *a = floats(p[0]), *b = floats(p[1]);
    float* y = floats(p[2]);
    for (uint64_t i = 0; i < std::min(elements[2], threads); ++i) y[i] = a[i] * 2 + b[i];
  } else if (f->name == "add_one" && p.size() == 3) {
    const float* x = floats(p[0]);
    float* t = floats(p[1]);
    for (uint64_t i = 0; i < std::min(elements[1], threads); ++i) t[i] = x[i] + 1;
  } else if (f->name == "reverse_triple" && p.size() == 3) {
    const float* t = floats(p[1]);
    float* y = floats(p[2]);
    const uint64_t n = elements[2];
    for (uint64_t i = 0; i < std::min(n, threads); ++i) y[i] = t[n - 1 - i] * 3;
  } else if (const char* sim = std::getenv("ACCY_FAKE_CUDA_PTXSIM"); sim != nullptr && sim[0] != '\0') {
    launch_failure = simulate(sim, *f, gx, bx, begins, ends);
    if (!launch_failure.empty()) return CUDA_ERROR_LAUNCH_FAILED;
  }
  return CUDA_SUCCESS;
}
#endif

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  *stream = new CUstream_st;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.streams;
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult f = sticky_fault.load(); f != CUDA_SUCCESS) return f;
  const CUresult r = stream->pending;
  stream->pending = CUDA_SUCCESS;
  const char* sticky = std::getenv("ACCY_FAKE_CUDA_STICKY");
  if (r != CUDA_SUCCESS && sticky != nullptr && std::strcmp(sticky, "1") == 0) sticky_fault.store(r);
  return r;
}

// ACCY_FAKE_CUDA_HANG=1: the stream's work never finishes (a hung kernel).
CUresult cuStreamQuery(CUstream stream) {
  if (const char* hang = std::getenv("ACCY_FAKE_CUDA_HANG"); hang != nullptr && std::strcmp(hang, "1") == 0) {
    return CUDA_ERROR_NOT_READY;
  }
  return cuStreamSynchronize(stream);
}

CUresult cuStreamDestroy(CUstream stream) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete stream;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.streams;
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  *event = new CUevent_st;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.events;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  event->recorded = true;
  return CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent event) {
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;
}

#ifndef ACCY_FAKE_CUDA_PARTIAL
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (start == nullptr || end == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded || !end->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = 0.25f;
  return CUDA_SUCCESS;
}
#endif

CUresult cuEventDestroy(CUevent event) {
  if (!hasContext()) return CUDA_ERROR_INVALID_CONTEXT;
  if (event == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  delete event;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  --s.events;
  return CUDA_SUCCESS;
}
