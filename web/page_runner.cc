#include "web/page_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "base/errors.h"
#include "base/strings.h"

namespace accy::webgpu {
namespace {

bool exists(const std::string& path) { return std::ifstream(path).good(); }

absl::Status copyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  if (!in.good() || !out.good()) return makeError(ErrorKind::kInvalidArgument, strCat("could not copy ", from, " to ", to));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> sourceFile(std::string_view path) {
  std::vector<std::string> tried;
  if (const char* dir = std::getenv("ACCY_SOURCE_DIR")) tried.push_back(strCat(dir, "/", path));
  if (const char* srcdir = std::getenv("TEST_SRCDIR")) {
    const char* workspace = std::getenv("TEST_WORKSPACE");
    tried.push_back(strCat(srcdir, "/", workspace != nullptr ? workspace : "accy", "/", path));
  }
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    tried.push_back(strCat(exe, ".runfiles/accy/", path));
  }
  for (const std::string& p : tried) {
    if (exists(p)) return p;
  }
  std::string places;
  for (const std::string& p : tried) strAppend(&places, places.empty() ? "" : ", ", p);
  return makeError(ErrorKind::kInvalidArgument,
                   strCat("cannot find ", path, " (tried ", places.empty() ? "nothing" : places,
                          "; set ACCY_SOURCE_DIR to the source tree)"));
}

std::string chromiumPath() {
  if (const char* c = std::getenv("ACCY_CHROMIUM")) return exists(c) ? c : "";
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}) {
    if (exists(p)) return p;
  }
  return "";
}

std::string nodePath() {
  if (const char* c = std::getenv("ACCY_NODE")) return exists(c) ? c : "";
  for (const char* p : {"/usr/bin/node", "/usr/bin/nodejs", "/usr/local/bin/node"}) {
    if (exists(p)) return p;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<PageRunner>> PageRunner::openNode(const std::string& work_dir) {
  const std::string node = nodePath();
  if (node.empty()) {
    return makeError(ErrorKind::kUnimplemented, "no node to run wasm in (install nodejs: tools/setup.sh, or set ACCY_NODE)");
  }
  for (const char* f : {"web/accy_wasm.js", "web/accy_wasm_worker.js", "web/accy_plan.js", "tools/wasm/run_node.mjs"}) {
    absl::StatusOr<std::string> from = sourceFile(f);
    if (!from.ok()) return from.status();
    if (absl::Status st = copyFile(*from, strCat(work_dir, "/", std::strrchr(f, '/') + 1)); !st.ok()) return st;
  }
  absl::StatusOr<std::unique_ptr<PageRunner>> runner = start({node, work_dir + "/run_node.mjs"});
  if (runner.ok()) (*runner)->files_dir_ = work_dir;
  return runner;
}

absl::StatusOr<std::unique_ptr<PageRunner>> PageRunner::open(const std::string& work_dir, bool isolated) {
  if (chromiumPath().empty()) {
    return makeError(ErrorKind::kUnimplemented,
                     "no Chromium to run WGSL in (install chromium: tools/setup.sh, or set ACCY_CHROMIUM)");
  }
  for (const char* f : {"web/accy.js", "web/accy_wasm.js", "web/accy_wasm_worker.js", "web/accy_plan.js", "web/runner.html"}) {
    absl::StatusOr<std::string> from = sourceFile(f);
    if (!from.ok()) return from.status();
    if (absl::Status st = copyFile(*from, strCat(work_dir, "/", std::strrchr(f, '/') + 1)); !st.ok()) return st;
  }
  absl::StatusOr<std::string> script = sourceFile("tools/webgpu/run_page.py");
  if (!script.ok()) return script.status();
  return start({"python3", *script, work_dir + "/runner.html", "--serve=accyRunOne", "--timeout=300",
                isolated ? "--isolated=on" : "--isolated=off"});
}

absl::StatusOr<std::unique_ptr<PageRunner>> PageRunner::start(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int to_page[2], from_page[2];
  if (pipe(to_page) != 0) return makeError(ErrorKind::kLaunchFailed, "pipe failed");
  if (pipe(from_page) != 0) {
    close(to_page[0]);
    close(to_page[1]);
    return makeError(ErrorKind::kLaunchFailed, "pipe failed");
  }
  const pid_t pid = fork();
  if (pid < 0) return makeError(ErrorKind::kLaunchFailed, "fork failed");
  if (pid == 0) {
    dup2(to_page[0], 0);
    dup2(from_page[1], 1);
    close(to_page[1]);
    close(from_page[0]);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(to_page[0]);
  close(from_page[1]);
  auto runner = std::unique_ptr<PageRunner>(new PageRunner);
  runner->pid_ = pid;
  runner->to_ = fdopen(to_page[1], "w");
  runner->from_ = fdopen(from_page[0], "r");
  return runner;
}

PageRunner::~PageRunner() {
  if (to_ != nullptr) std::fclose(to_);  // ends the runner's stdin: it closes the browser
  if (from_ != nullptr) std::fclose(from_);
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
}

absl::Status PageRunner::run(std::string_view artifact, std::span<const std::span<const std::byte>> inputs,
                             std::span<const std::span<std::byte>> outputs, std::string_view options) {
  std::string line = strCat("{\"artifact\": ", artifact, options.empty() ? "" : ", \"options\": ", options,
                            ", \"inputs\": [");
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!files_dir_.empty() && inputs[k].size() >= (size_t{1} << 20)) {
      const std::string path = strCat(files_dir_, "/input", k, ".bin");
      std::ofstream file(path, std::ios::binary | std::ios::trunc);
      file.write(reinterpret_cast<const char*>(inputs[k].data()), static_cast<std::streamsize>(inputs[k].size()));
      if (!file.flush()) return makeError(ErrorKind::kLaunchFailed, strCat("cannot write input ", k, " to ", path));
      strAppend(&line, k ? ", " : "", "{\"file\": \"", path, "\"}");
      continue;
    }
    std::string b64;
    absl::Base64Escape(absl::string_view(reinterpret_cast<const char*>(inputs[k].data()), inputs[k].size()), &b64);
    strAppend(&line, k ? ", \"" : "\"", b64, "\"");
  }
  line += "]}\n";
  // Newlines lie only between JSON tokens (strings escape theirs): one line.
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    if (line[i] == '\n') line[i] = ' ';
  }
  if (std::fputs(line.c_str(), to_) < 0 || std::fflush(to_) != 0) {
    return makeError(ErrorKind::kLaunchFailed, "the page runner is gone (Chromium exited)");
  }
  std::string answer;
  for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) answer += static_cast<char>(c);
  if (std::feof(from_)) return makeError(ErrorKind::kLaunchFailed, "the page runner ended (Chromium exited, or timed out)");
  ++runs_;
  if (answer.rfind("ok", 0) != 0) return makeError(ErrorKind::kLaunchFailed, strCat("in the browser: ", answer));
  // "ok OUT,OUT,... K": the outputs, and how many kernels used subgroups.
  std::string rest = answer.size() > 3 ? answer.substr(3) : "";
  if (const size_t space = rest.rfind(' '); space != std::string::npos) {
    runs_with_subgroups_ += rest.substr(space + 1) != "0";
    rest.resize(space);
  }
  const std::vector<std::string> parts = absl::StrSplit(rest, ',');
  if (parts.size() != outputs.size()) {
    return makeError(ErrorKind::kLaunchFailed, strCat("the browser gave ", parts.size(), " outputs, not ", outputs.size()));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    std::string bytes;
    if (!absl::Base64Unescape(parts[k], &bytes) || bytes.size() != outputs[k].size()) {
      return makeError(ErrorKind::kLaunchFailed,
                       strCat("output ", k, ": ", bytes.size(), " bytes from the browser, not ", outputs[k].size()));
    }
    std::memcpy(outputs[k].data(), bytes.data(), bytes.size());
  }
  return absl::OkStatus();
}

}  // namespace accy::webgpu
