// accy: the command-line face of the compiler.
//
//   accy inspect FILE [--dot]
//   accy compile FILE --emit=choir|asm|artifact [--target=x86_64] [--threads=K] [-o OUT]
//   accy compile FILE --target=spirv --emit=spirv|artifact -o OUT
//   accy compile FILE --target=ptx --emit=ptx|choir [--arch=sm_90] [--mode=exact|fast|tf32] [-o OUT]
//   accy compile FILE --target=wgsl|msl --emit=wgsl|msl|artifact [--mode=exact|fast] [-o OUT]
//   accy compile FILE --dump-after=PASS [--target=...] [target options] [-o OUT]
//   accy run FILE [--input N=IN.npy ...] [--output N=OUT.npy ...] [--threads=K] [--target=T] [--mode=M]
//
// FILE is a wire-encoded program (compiler/wire/wire.h). Exit status: 0 on
// success, 1 when a valid program fails to compile or run, 2 for a bad
// invocation or a bad input file (the message says which and why).
// docs/CLI.md has examples.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "accy/cpu.h"
#include "backends/vulkan/vulkan_backend.h"
#include "compiler/choir/pipeline.h"
#include "compiler/choir/printer.h"
#include "compiler/codegen/ptx/compile.h"
#include "compiler/codegen/ptx/pipeline.h"
#include "compiler/codegen/spirv/compile.h"
#include "compiler/codegen/wasm/compile.h"
#include "backends/registry.h"
#include "compiler/codegen/targets.h"
#include "accy/version.h"
#include "compiler/executable/build_record.h"
#include "compiler/executable/saved_program.h"
#include "tools/msl/shim.h"
#include "tools/webgpu/page_backend.h"
#include "tools/webgpu/page_runner.h"
#include "compiler/codegen/x86_64/compile.h"
#include "compiler/tensor/program.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/wire/wire.h"
#include "tools/files.h"
#include "tools/npy.h"

namespace accy::cli {
namespace {

namespace tensor = accy::tensor;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    R"(usage: accy <command> FILE [options]

commands:
  inspect FILE [--dot]
      Decode a wire-encoded program and print it as text, or as a Graphviz
      digraph with --dot.
  compile FILE --emit=choir|asm|artifact [--target=x86_64] [--threads=K] [-o OUT]
  compile FILE --target=spirv --emit=spirv|artifact [--mode=exact|fast] -o OUT
  compile FILE --target=ptx --emit=ptx|choir [--arch=sm_90]
               [--mode=exact|fast|tf32] [-o OUT]
      Compile for a target and print the scheduled Choir module (choir), the
      assembly listing (asm), or write the executable as a saved program
      (artifact; needs -o and a stamped build; accy run runs it). Text goes to stdout unless -o is given. For ptx:
      the PTX module for a device of compute capability --arch (default
      sm_90), or the GPU-mapped Choir module; --mode chooses exact (default)
      or fast transcendentals, or tf32 tensor cores for dot. tf32 exists only
      for ptx: asking for it with another target fails to compile.
  compile FILE --target=wgsl|msl --emit=wgsl|msl|artifact [--mode=exact|fast]
               [-o OUT]
      The WGSL or MSL source of the kernels (text), or the JSON artifact a
      web page (web/accy.js) or a Metal host loads (artifact; needs -o).
  compile FILE --dump-after=PASS [--target=...] [target options] [-o OUT]
      Print the Choir module as the pipeline leaves it after PASS, in place
      of --emit: for x86_64 lower, fuse, loop-order, epilogues, tile,
      vectorize, parallelize; for spirv and ptx lower, fuse, tf32 (ptx with
      --mode=tf32 only), gpu-map.
  run FILE [--input N=IN.npy ...] [--output N=OUT.npy ...] [--threads=K]
           [--target=x86_64|spirv|ptx|wgsl|msl|reference] [--mode=exact|fast|tf32]
      Compile for the target (this CPU by default) and run once on this
      machine's device for it: Vulkan for spirv, CUDA for ptx, headless
      Chromium for wgsl, the MSL shim for msl (clang++ and CPU threads: a
      check of the MSL emitter, not a Metal device), the reference
      evaluator for reference. Input N
      (counting from 0) is read from a .npy file whose dtype and shape equal
      the input's (a 0-d array for a scalar); output N is written to
      OUT.npy, by default outN.npy in the current directory.
  help, --help, -h
      Print this text.
  --version, version
      Print the version (the file VERSION) and whether the build is stamped.

Options take their value after '=' or as the next argument. --threads=0
(the default) uses every hardware thread.

exit status: 0 success; 1 the program failed to compile or run;
             2 bad invocation or bad input file.
)";

// An error that ends the command with an exit status.
struct Failure {
  int exit_code;
  std::string message;
};

Failure usageError(std::string message) {
  return Failure{kExitUsage, strCat(message, "\n(run 'accy --help' for usage)")};
}
Failure inputError(std::string message) { return Failure{kExitUsage, std::move(message)}; }
Failure runError(std::string message) { return Failure{kExitFailure, std::move(message)}; }

std::string messageOf(const absl::Status& status) { return std::string(status.message()); }

// The parsed command line of one command.
struct Args {
  std::string file;
  std::map<std::string, std::vector<std::string>> values;  // option -> values in order
  std::vector<std::string> switches;                       // value-less options given
  bool help = false;
};

struct OptionTable {
  std::vector<std::string_view> with_value;  // e.g. "--emit"; repeatable ones listed in `repeatable`
  std::vector<std::string_view> repeatable;
  std::vector<std::string_view> switches;  // e.g. "--dot"
};

bool contains(const std::vector<std::string_view>& list, std::string_view s) {
  for (std::string_view x : list) {
    if (x == s) return true;
  }
  return false;
}

std::optional<Failure> parseArgs(std::string_view command, std::span<const std::string> argv,
                                 const OptionTable& table, Args* args) {
  bool options_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      if (!args->file.empty()) {
        return usageError(strCat(command, ": one FILE expected, got '", args->file, "' and '", a, "'"));
      }
      if (a.empty()) return usageError(strCat(command, ": empty FILE name"));
      args->file = a;
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      args->help = true;
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (contains(table.switches, name)) {
      if (eq != std::string::npos) return usageError(strCat(command, ": ", name, " takes no value"));
      args->switches.push_back(name);
      continue;
    }
    if (!contains(table.with_value, name)) {
      return usageError(strCat(command, ": unknown option '", name, "'"));
    }
    std::string value;
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else if (i + 1 < argv.size()) {
      value = argv[++i];
    } else {
      return usageError(strCat(command, ": ", name, " needs a value"));
    }
    if (value.empty()) return usageError(strCat(command, ": ", name, " has an empty value"));
    std::vector<std::string>& slot = args->values[name];
    if (!slot.empty() && !contains(table.repeatable, name)) {
      return usageError(strCat(command, ": ", name, " given more than once"));
    }
    slot.push_back(std::move(value));
  }
  if (!args->help && args->file.empty()) return usageError(strCat(command, ": no FILE given"));
  return std::nullopt;
}

std::optional<std::string> single(const Args& args, const std::string& name) {
  auto it = args.values.find(name);
  if (it == args.values.end() || it->second.empty()) return std::nullopt;
  return it->second.front();
}

bool hasSwitch(const Args& args, std::string_view name) {
  for (const std::string& s : args.switches) {
    if (s == name) return true;
  }
  return false;
}

std::optional<int64_t> parseCount(std::string_view s, int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

absl::StatusOr<int> threadsOption(const Args& args) {
  const std::optional<std::string> t = single(args, "--threads");
  if (!t) return 0;
  const std::optional<int64_t> v = parseCount(*t, 4096);
  if (!v) return absl::InvalidArgumentError(strCat("--threads: '", *t, "' is not a count from 0 to 4096"));
  return static_cast<int>(*v);
}

absl::StatusOr<tensor::Program> loadProgram(const std::string& path) {
  const wire::DecodeLimits limits;
  absl::StatusOr<std::string> bytes = files::readFile(path, limits.max_bytes);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<tensor::Program> program = wire::decode(*bytes, limits);
  if (!program.ok()) return absl::InvalidArgumentError(strCat(path, ": ", messageOf(program.status())));
  return program;
}

std::optional<Failure> writeText(const std::optional<std::string>& out, const std::string& text) {
  if (out) {
    if (absl::Status st = files::writeFile(*out, text); !st.ok()) return inputError(messageOf(st));
    return std::nullopt;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return std::nullopt;
}

// accy inspect FILE [--dot]
std::optional<Failure> inspect(std::span<const std::string> argv) {
  Args args;
  if (auto f = parseArgs("inspect", argv, OptionTable{{}, {}, {"--dot"}}, &args)) return f;
  if (args.help) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  absl::StatusOr<tensor::Program> program = loadProgram(args.file);
  if (!program.ok()) return inputError(messageOf(program.status()));
  const std::string text = hasSwitch(args, "--dot") ? tensor::toDot(*program) : tensor::toText(*program);
  return writeText(std::nullopt, text);
}

// --dump-after=PASS: the hook that keeps the module's text after PASS, and
// what to do with it once the compile returned.
struct PassDump {
  std::string pass;
  std::string text;
  bool seen = false;
  choir::PassHook hook() {
    return [this](std::string_view name, const choir::Module& m) {
      if (name == pass) {
        text = choir::toText(m);
        seen = true;
      }
    };
  }
  // Writes the module (also when a later step failed, which is then
  // reported), or says that the pass never ran.
  std::optional<Failure> finish(const Args& args, const std::optional<std::string>& out, const absl::Status& status) {
    if (seen) {
      if (auto f = writeText(out, text)) return f;
    }
    if (!status.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(status)));
    if (!seen) {
      return runError(strCat(args.file, ": pass ", pass, " did not run",
                             pass == "tf32" ? " (it runs for --target=ptx --mode=tf32)" : ""));
    }
    return std::nullopt;
  }
};

// --emit=artifact for the targets whose executables accy runs itself: the
// executable as a saved program (compiler/executable/saved_program.h: the
// code and plans, this compiler's build record, a SHA-256), which `accy run`
// loads. Only a stamped build has a record (UnrecordedCompilerBuild, status
// 1, otherwise).
std::optional<Failure> writeSaved(const Args& args, const executable::Executable& exe, const std::string& out) {
  absl::StatusOr<std::string> bytes = tensor::saveExecutable(exe);
  if (!bytes.ok()) {
    return runError(strCat(args.file, ": --emit=artifact: ", errorKindName(errorKind(bytes.status())), ": ",
                           messageOf(bytes.status())));
  }
  if (absl::Status st = files::writeFile(out, *bytes); !st.ok()) return inputError(messageOf(st));
  std::printf("wrote %s: %zu bytes (%s, %s, %zu bytes of code, %zu kernels; a saved program)\n", out.c_str(),
              bytes->size(), exe.target.c_str(), exe.isa.c_str(), exe.code.size(), exe.launch_plan.steps.size());
  return std::nullopt;
}

// accy compile FILE --target=spirv --emit=spirv|artifact -o OUT: SPIR-V for
// the Vulkan device here (its limits and features), or Vulkan 1.1 defaults
// when there is none. --emit=spirv writes one module per kernel, OUT.<k>.spv.
std::optional<Failure> compileSpirv(const Args& args, bool fast, PassDump* dump) {
  const std::optional<std::string> emit = single(args, "--emit");
  if (dump == nullptr && (!emit || (*emit != "spirv" && *emit != "artifact"))) {
    return usageError("compile: --target=spirv takes --emit=spirv or --emit=artifact");
  }
  std::optional<std::string> out = single(args, "-o");
  if (!out) out = single(args, "--out");
  if (dump == nullptr && !out) return usageError(strCat("compile: --emit=", *emit, " needs -o OUT"));
  absl::StatusOr<tensor::Program> program = loadProgram(args.file);
  if (!program.ok()) return inputError(messageOf(program.status()));
  std::unique_ptr<backends::Backend> vulkan = backends::makeVulkanBackend(backends::BackendOptions{});
  spirv::TargetInfo info = backends::vulkanTargetInfo(*vulkan);
  info.mode = fast ? backends::ArithmeticMode::kFast : backends::ArithmeticMode::kExact;
  absl::StatusOr<executable::Executable> exe =
      spirv::compileProgram(*program, info, dump != nullptr ? dump->hook() : choir::PassHook());
  if (dump != nullptr) return dump->finish(args, out, exe.status());
  if (!exe.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(exe.status())));
  if (*emit == "artifact") return writeSaved(args, *exe, *out);
  const auto& steps = exe->launch_plan.steps;
  for (size_t k = 0; k < steps.size(); ++k) {
    const uint64_t end = k + 1 < steps.size() ? steps[k + 1].entry_offset : exe->code.size();
    const std::string path = strCat(*out, ".", k, ".spv");
    const std::string bytes(reinterpret_cast<const char*>(exe->code.data() + steps[k].entry_offset),
                            end - steps[k].entry_offset);
    if (absl::Status st = files::writeFile(path, bytes); !st.ok()) return inputError(messageOf(st));
    std::printf("wrote %s: kernel %s, %zu bytes, %lld workgroups\n", path.c_str(), steps[k].kernel.c_str(),
                bytes.size(), static_cast<long long>(steps[k].parallel_extent));
  }
  return std::nullopt;
}

// accy compile FILE --target=ptx --emit=ptx|choir [--arch=sm_NN]
// [--mode=exact|fast|tf32] [-o OUT]: the PTX module (compiler/codegen/ptx)
// for a device of that compute capability, assuming a driver that accepts
// the PTX ISA the architecture needs (the module's .version is the lowest
// its instructions need), or the GPU-mapped Choir module it translates.
std::optional<Failure> compilePtx(const Args& args, PassDump* dump) {
  const std::optional<std::string> emit = single(args, "--emit");
  if (dump == nullptr && (!emit || (*emit != "ptx" && *emit != "choir"))) {
    return usageError("compile: --target=ptx takes --emit=ptx or --emit=choir");
  }
  if (single(args, "--threads")) return usageError("compile: --threads is for --target=x86_64");
  if (single(args, "-o") && single(args, "--out")) return usageError("compile: give -o or --out, not both");
  std::optional<std::string> out = single(args, "-o");
  if (!out) out = single(args, "--out");
  ptx::TargetInfo target;
  if (const std::optional<std::string> arch = single(args, "--arch")) {
    const std::optional<int64_t> sm =
        arch->rfind("sm_", 0) == 0 ? parseCount(std::string_view(*arch).substr(3), 999) : std::nullopt;
    if (!sm || arch->size() < 5) return usageError(strCat("compile: --arch '", *arch, "' is not sm_NN (e.g. sm_90)"));
    target.sm = static_cast<int>(*sm);
  }
  absl::StatusOr<ptx::PtxTarget> arch = ptx::ptxTargetFor(target.sm);
  if (!arch.ok()) return usageError(strCat("compile: --arch: ", messageOf(arch.status())));
  target.ptx_version = std::max(target.ptx_version, arch->min_ptx_version);
  const absl::StatusOr<ptx::ArithmeticMode> mode =
      codegen::parseArithmeticMode(single(args, "--mode").value_or("exact"));
  if (!mode.ok()) return usageError(strCat("compile: ", messageOf(mode.status())));
  target.mode = *mode;
  absl::StatusOr<tensor::Program> program = loadProgram(args.file);
  if (!program.ok()) return inputError(messageOf(program.status()));
  if (dump != nullptr) return dump->finish(args, out, ptx::gpuModule(*program, target, dump->hook()).status());
  if (*emit == "choir") {
    absl::StatusOr<choir::Module> m = ptx::gpuModule(*program, target);
    if (!m.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(m.status())));
    return writeText(out, choir::toText(*m));
  }
  absl::StatusOr<executable::Executable> exe = ptx::compileProgram(*program, target);
  if (!exe.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(exe.status())));
  return writeText(out, std::string(exe->code.begin(), exe->code.end()));
}

// The text form of a wasm module, by wabt's wasm2wat.
absl::StatusOr<std::string> watOf(const std::vector<uint8_t>& module) {
  if (std::system("wasm2wat --version > /dev/null 2>&1") != 0) {
    return makeError(ErrorKind::kUnimplemented, "wasm2wat (wabt) is not installed; --emit=wasm writes the module");
  }
  char dir[32] = "/tmp/accy-wat-XXXXXX";
  if (mkdtemp(dir) == nullptr) return makeError(ErrorKind::kInvalidArgument, "cannot make a temporary directory");
  const std::string path = strCat(dir, "/module.wasm"), text = strCat(dir, "/module.wat");
  absl::Status st = files::writeFile(path, std::string(module.begin(), module.end()));
  if (st.ok() && std::system(strCat("wasm2wat --enable-threads ", path, " -o ", text, " 2>", dir, "/err").c_str()) != 0) {
    absl::StatusOr<std::string> err = files::readFile(strCat(dir, "/err"), 1 << 16);
    st = makeError(ErrorKind::kCompileFailed, strCat("wasm2wat failed: ", err.ok() ? *err : "no message"));
  }
  absl::StatusOr<std::string> wat = st.ok() ? files::readFile(text, int64_t{1} << 30) : absl::StatusOr<std::string>(st);
  std::filesystem::remove_all(dir);
  return wat;
}

// accy compile FILE --target=T --emit=E [-o OUT] for a target without a
// case of its own here (reference, and targets to come): the registry's
// compile function; E is `artifact` (a saved program, or the target's own
// artifact when it has one) or the entry's
// code_emit (the code as it is, text).
std::optional<Failure> compileArtifact(const Args& args, const codegen::TargetEntry& target,
                                       backends::ArithmeticMode mode, const std::optional<std::string>& emit,
                                       PassDump* dump) {
  const bool wasm = target.name == "wasm";
  if (single(args, "--threads") && !wasm) return usageError("compile: --threads is for --target=x86_64 or wasm");
  if (dump == nullptr) {
    if (!emit) return usageError(strCat("compile: --target=", target.name, " needs --emit"));
    if (absl::Status st = codegen::checkEmit(target, *emit); !st.ok()) {
      return usageError(strCat("compile: ", messageOf(st)));
    }
    if (*emit != "artifact" && *emit != target.code_emit && !(wasm && *emit == "wat")) {
      return usageError(strCat("compile: --emit=", *emit, " for target ", target.name, " has no writer here"));
    }
  }
  if (single(args, "-o") && single(args, "--out")) return usageError("compile: give -o or --out, not both");
  std::optional<std::string> out = single(args, "-o");
  if (!out) out = single(args, "--out");
  const bool artifact_out = emit && *emit == "artifact";
  if (dump == nullptr && artifact_out && !out) return usageError("compile: --emit=artifact needs -o OUT");
  absl::StatusOr<tensor::Program> program = loadProgram(args.file);
  if (!program.ok()) return inputError(messageOf(program.status()));
  codegen::CompileRequest request{.mode = mode};
  if (dump != nullptr) request.dump = dump->hook();
  if (wasm && single(args, "--threads")) {
    absl::StatusOr<int> threads = threadsOption(args);
    if (!threads.ok()) return usageError(strCat("compile: ", messageOf(threads.status())));
    request.device = wasm::TargetInfo{.mode = mode, .threads = x64::resolveThreads(*threads)};
  }
  if (wasm && emit && *emit == "wasm" && !out && dump == nullptr) {
    return usageError("compile: --emit=wasm writes a binary module: give -o OUT");
  }
  absl::StatusOr<executable::Executable> exe = target.compile(*program, request);
  if (dump != nullptr) return dump->finish(args, out, exe.status());
  if (!exe.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(exe.status())));
  if (wasm && *emit == "wasm") {
    if (absl::Status st = files::writeFile(*out, std::string(exe->code.begin(), exe->code.end())); !st.ok()) {
      return inputError(messageOf(st));
    }
    return std::nullopt;
  }
  if (wasm && *emit == "wat") {
    // For reading: wabt's wasm2wat, when installed.
    absl::StatusOr<std::string> wat = watOf(exe->code);
    if (!wat.ok()) return runError(strCat("compile: --emit=wat: ", messageOf(wat.status())));
    return writeText(out, *wat);
  }
  if (!artifact_out) return writeText(out, std::string(exe->code.begin(), exe->code.end()));  // code_emit
  if (target.artifact == nullptr) return writeSaved(args, *exe, *out);
  absl::StatusOr<std::string> written = target.artifact(*exe);
  if (!written.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(written.status())));
  const std::string bytes = *std::move(written);
  if (absl::Status st = files::writeFile(*out, bytes); !st.ok()) return inputError(messageOf(st));
  std::printf("wrote %s: %zu bytes (%s, %s, %zu kernels)\n", out->c_str(), bytes.size(), exe->target.c_str(),
              exe->isa.c_str(), exe->launch_plan.steps.size());
  return std::nullopt;
}

// accy compile FILE --emit=... [--target=...] [--threads=K] [-o OUT]
std::optional<Failure> compile(std::span<const std::string> argv) {
  Args args;
  const OptionTable table{
      {"--emit", "--target", "--threads", "-o", "--out", "--arch", "--mode", "--dump-after"}, {}, {}};
  if (auto f = parseArgs("compile", argv, table, &args)) return f;
  if (args.help) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  // The target's registry entry (compiler/codegen/targets.h): its passes,
  // what it writes, its modes.
  const std::string target = single(args, "--target").value_or("x86_64");
  const absl::StatusOr<const codegen::TargetEntry*> entry = codegen::findTarget(target);
  if (!entry.ok()) return inputError(strCat("compile: ", messageOf(entry.status())));
  // --dump-after=PASS: the Choir module after that pass instead of --emit.
  std::optional<PassDump> dump;
  if (const std::optional<std::string> pass = single(args, "--dump-after")) {
    if (single(args, "--emit")) return usageError("compile: give --emit or --dump-after, not both");
    const std::vector<std::string_view> passes = choir::pipelinePasses((*entry)->gpu);
    if (std::find(passes.begin(), passes.end(), *pass) == passes.end()) {
      std::string names;
      for (std::string_view p : passes) strAppend(&names, names.empty() ? "" : ", ", p);
      return usageError(strCat("compile: --dump-after: no pass '", *pass, "' for target ", target, " (", names, ")"));
    }
    dump.emplace();
    dump->pass = *pass;
  }
  PassDump* dump_ptr = dump ? &*dump : nullptr;
  if (target == "ptx") return compilePtx(args, dump_ptr);
  if (single(args, "--arch")) return usageError("compile: --arch is for --target=ptx");
  // --mode: exact (default) or fast; tf32 exists only for ptx.
  const std::string mode_name = single(args, "--mode").value_or("exact");
  const absl::StatusOr<backends::ArithmeticMode> mode = backends::parseArithmeticMode(mode_name);
  if (!mode.ok()) return usageError(strCat("compile: ", messageOf(mode.status())));
  if (absl::Status st = codegen::checkMode(target, *mode); !st.ok()) {
    return runError(strCat(args.file, ": compile failed: ", messageOf(st)));
  }
  if (target == "spirv") return compileSpirv(args, *mode == backends::ArithmeticMode::kFast, dump_ptr);
  const std::optional<std::string> emit = single(args, "--emit");
  if (target != "x86_64") return compileArtifact(args, **entry, *mode, emit, dump_ptr);
  if (dump_ptr != nullptr) {
    absl::StatusOr<int> threads = threadsOption(args);
    if (!threads.ok()) return usageError(strCat("compile: ", messageOf(threads.status())));
    std::optional<std::string> out = single(args, "-o");
    if (!out) out = single(args, "--out");
    absl::StatusOr<tensor::Program> program = loadProgram(args.file);
    if (!program.ok()) return inputError(messageOf(program.status()));
    x64::CompileOptions o;
    o.threads = *threads;
    o.dump = dump_ptr->hook();
    return dump_ptr->finish(args, out, x64::compileProgram(*program, o).status());
  }
  if (!emit) return usageError("compile: --emit=choir|asm|artifact is required (or --dump-after=PASS)");
  if (*emit != "choir" && *emit != "asm" && *emit != "artifact") {
    return usageError(strCat("compile: unknown --emit '", *emit, "' (choir, asm or artifact)"));
  }
  if (single(args, "-o") && single(args, "--out")) return usageError("compile: give -o or --out, not both");
  std::optional<std::string> out = single(args, "-o");
  if (!out) out = single(args, "--out");
  if (*emit == "artifact" && !out) return usageError("compile: --emit=artifact needs -o OUT");
  absl::StatusOr<int> threads = threadsOption(args);
  if (!threads.ok()) return usageError(strCat("compile: ", messageOf(threads.status())));

  absl::StatusOr<tensor::Program> program = loadProgram(args.file);
  if (!program.ok()) return inputError(messageOf(program.status()));
  const tensor::CpuOptions options{.threads = *threads};
  if (*emit == "choir" || *emit == "asm") {
    absl::StatusOr<std::string> text =
        *emit == "choir" ? tensor::choirText(*program, options) : tensor::cpuAssembly(*program, options);
    if (!text.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(text.status())));
    return writeText(out, *text);
  }
  x64::CompileOptions o;
  o.threads = *threads;
  absl::StatusOr<executable::Executable> exe = x64::compileProgram(*program, o);
  if (!exe.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(exe.status())));
  return writeSaved(args, *exe, *out);
}

// Parses "N=PATH" for --input/--output with N below `count`.
std::optional<Failure> parseBinding(std::string_view option, const std::string& value, size_t count,
                                    std::string_view what, std::map<size_t, std::string>* into) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size()) {
    return usageError(strCat("run: ", option, " '", value, "' is not N=FILE.npy"));
  }
  const std::optional<int64_t> n = parseCount(std::string_view(value).substr(0, eq), 1 << 30);
  if (!n) return usageError(strCat("run: ", option, " '", value, "': '", value.substr(0, eq), "' is not a number"));
  if (static_cast<size_t>(*n) >= count) {
    return usageError(strCat("run: ", option, " ", *n, ": the program has ", count, " ", what,
                             count == 1 ? "" : "s", " (numbered from 0)"));
  }
  if (!into->emplace(static_cast<size_t>(*n), value.substr(eq + 1)).second) {
    return usageError(strCat("run: ", option, " ", *n, " given more than once"));
  }
  return std::nullopt;
}

std::vector<int64_t> extentsOf(const tensor::Spec& spec) {
  std::vector<int64_t> shape;
  for (const tensor::Axis& a : spec.axes) shape.push_back(a.extent);
  return shape;
}

// Compiles `program` for `target` and runs it on the machine's device for
// it: in process (x86_64), a backend (vulkan, cuda, null), a headless
// Chromium page (wgsl, docs/WEB.md), or the MSL shim (msl, docs/GPU.md).
std::optional<Failure> runOn(const Args& args, const codegen::TargetEntry& target, backends::ArithmeticMode mode,
                             int threads, const tensor::Program* program, const executable::Executable* restored,
                             std::span<const std::span<const std::byte>> in, std::span<const std::span<std::byte>> out) {
  auto failed = [&](const absl::Status& st) { return runError(strCat(args.file, ": run failed: ", messageOf(st))); };
  auto compileFailed = [&](const absl::Status& st) {
    return runError(strCat(args.file, ": compile failed: ", messageOf(st)));
  };
  if (target.name == "x86_64") {
    absl::StatusOr<tensor::CpuExecutable> exe =
        restored != nullptr ? tensor::CpuExecutable::load(*restored, tensor::CpuOptions{.threads = threads})
                            : tensor::CpuExecutable::compile(*program, tensor::CpuOptions{.threads = threads});
    if (!exe.ok()) return restored != nullptr ? failed(exe.status()) : compileFailed(exe.status());
    if (absl::Status st = exe->launch(in, out); !st.ok()) return failed(st);
    return std::nullopt;
  }
  // Compile (or take the restored executable), load and launch on a backend.
  auto runOn = [&](const backends::Backend& backend) -> std::optional<Failure> {
    absl::StatusOr<executable::Executable> exe =
        restored != nullptr ? *restored : backend.compile(*program, std::string(target.name), {mode});
    if (!exe.ok()) return compileFailed(exe.status());
    absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> loaded = backend.load(*std::move(exe));
    if (!loaded.ok()) return failed(loaded.status());
    if (absl::Status st = (*loaded)->launch(in, out); !st.ok()) return failed(st);
    return std::nullopt;
  };
  // The page runner and the MSL shim work in a temporary directory.
  struct TempDir {
    char path[32] = "/tmp/accy-run-XXXXXX";
    bool made = mkdtemp(path) != nullptr;
    ~TempDir() {
      if (made) std::filesystem::remove_all(path);
    }
  };
  if (target.device == "browser") {
    const TempDir dir;
    if (!dir.made) return runError("run: cannot make a temporary directory");
    const std::string path = dir.path;
    return runOn(webgpu::PageBackend("wgsl", "browser", [path] { return webgpu::PageRunner::open(path); }));
  }
  if (target.device == "node") {
    // WebAssembly in node, through the runtime web pages use (web/accy_wasm.js).
    const TempDir dir;
    if (!dir.made) return runError("run: cannot make a temporary directory");
    return runOn(*webgpu::nodeBackend(dir.path));
  }
  if (target.device == "msl-shim") {
    // A check of the MSL emitter on this CPU (tools/msl/shim.h), not a Metal device.
    const TempDir dir;
    if (!dir.made) return runError("run: cannot make a temporary directory");
    return runOn(mslshim::ShimBackend(dir.path));
  }
  absl::StatusOr<std::vector<std::unique_ptr<backends::Backend>>> device =
      backends::selectBackends({std::string(target.device)}, backends::BackendOptions{});
  if (!device.ok()) return failed(device.status());
  return runOn(*device->front());
}

// Whether `path` starts like a saved program (ACCYSAVED1).
bool isSavedProgram(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(executable::kSavedMagic.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  return in.gcount() == static_cast<std::streamsize>(head.size()) && head == executable::kSavedMagic;
}

// accy run FILE [--input N=IN.npy ...] [--output N=OUT.npy ...] [--threads=K]
std::optional<Failure> run(std::span<const std::string> argv) {
  Args args;
  const OptionTable table{{"--input", "--output", "--threads", "--target", "--mode"}, {"--input", "--output"}, {}};
  if (auto f = parseArgs("run", argv, table, &args)) return f;
  if (args.help) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  absl::StatusOr<int> threads = threadsOption(args);
  if (!threads.ok()) return usageError(strCat("run: ", messageOf(threads.status())));
  // --target: any target this machine can run (its registry entry names
  // the device); --mode: the arithmetic mode.
  const std::string target = single(args, "--target").value_or("x86_64");
  const absl::StatusOr<const codegen::TargetEntry*> entry = codegen::findTarget(target);
  if (!entry.ok()) return inputError(strCat("run: ", messageOf(entry.status())));
  if (target != "x86_64" && single(args, "--threads")) return usageError("run: --threads is for --target=x86_64");
  const absl::StatusOr<backends::ArithmeticMode> mode =
      backends::parseArithmeticMode(single(args, "--mode").value_or("exact"));
  if (!mode.ok()) return usageError(strCat("run: ", messageOf(mode.status())));
  if (absl::Status st = codegen::checkMode(target, *mode); !st.ok()) {
    return runError(strCat(args.file, ": compile failed: ", messageOf(st)));
  }
  // A saved program (accy compile --emit=artifact) runs as it was compiled,
  // on its own target; anything else is a program to compile.
  std::optional<tensor::Program> program;
  std::optional<executable::Executable> restored;
  const codegen::TargetEntry* run_target = *entry;
  if (isSavedProgram(args.file)) {
    absl::StatusOr<executable::Executable> exe = tensor::restoreExecutableFromFile(args.file);
    if (!exe.ok()) {
      return runError(strCat("run: ", errorKindName(errorKind(exe.status())), ": ", messageOf(exe.status())));
    }
    if (single(args, "--target") && exe->target != target) {
      return usageError(strCat("run: ", args.file, " was compiled for target ", exe->target, ", not ", target));
    }
    absl::StatusOr<const codegen::TargetEntry*> own = codegen::findTarget(exe->target);
    if (!own.ok()) return runError(strCat("run: ", args.file, ": ", messageOf(own.status())));
    run_target = *own;
    restored = *std::move(exe);
  } else {
    absl::StatusOr<tensor::Program> loaded = loadProgram(args.file);
    if (!loaded.ok()) return inputError(messageOf(loaded.status()));
    program = *std::move(loaded);
  }
  const std::vector<tensor::Spec> in_specs = restored ? restored->inputs : program->inputSpecs();
  const std::vector<tensor::Spec> out_specs = restored ? restored->outputs : program->outputSpecs();

  std::map<size_t, std::string> in_paths, out_paths;
  for (const std::string& v : args.values["--input"]) {
    if (auto f = parseBinding("--input", v, in_specs.size(), "input", &in_paths)) return f;
  }
  for (const std::string& v : args.values["--output"]) {
    if (auto f = parseBinding("--output", v, out_specs.size(), "output", &out_paths)) return f;
  }
  for (size_t i = 0; i < in_specs.size(); ++i) {
    if (!in_paths.contains(i)) {
      return usageError(strCat("run: input ", i, " (", tensor::specText(in_specs[i]),
                               ") has no file; pass --input ", i, "=FILE.npy"));
    }
  }

  std::vector<npy::Array> inputs;
  for (size_t i = 0; i < in_specs.size(); ++i) {
    const std::string& path = in_paths[i];
    absl::StatusOr<npy::Array> array = npy::readFile(path);
    if (!array.ok()) return inputError(messageOf(array.status()));
    const tensor::Spec& spec = in_specs[i];
    if (array->dtype != spec.dtype) {
      return inputError(strCat(path, ": holds '", npy::descrOf(array->dtype), "' but input ", i, " is ",
                               tensor::specText(spec), " ('", npy::descrOf(spec.dtype), "')"));
    }
    const std::vector<int64_t> want = extentsOf(spec);
    if (array->shape != want) {
      return inputError(strCat(path, ": shape ", npy::shapeText(array->shape), " does not match input ", i, " ",
                               tensor::specText(spec), ", which needs shape ", npy::shapeText(want)));
    }
    inputs.push_back(std::move(*array));
  }

  std::vector<std::vector<std::byte>> outputs;
  for (const tensor::Spec& s : out_specs) outputs.emplace_back(static_cast<size_t>(s.byteSize()));
  std::vector<std::span<const std::byte>> in_views;
  for (const npy::Array& a : inputs) in_views.emplace_back(a.data);
  std::vector<std::span<std::byte>> out_views;
  for (std::vector<std::byte>& o : outputs) out_views.emplace_back(o);
  if (std::optional<Failure> f = runOn(args, *run_target, *mode, *threads, program ? &*program : nullptr,
                                       restored ? &*restored : nullptr, in_views, out_views)) {
    return f;
  }
  for (size_t i = 0; i < out_specs.size(); ++i) {
    const std::string path = out_paths.contains(i) ? out_paths[i] : strCat("out", i, ".npy");
    if (absl::Status st = npy::writeFile(path, out_specs[i].dtype, extentsOf(out_specs[i]), outputs[i]); !st.ok()) {
      return inputError(messageOf(st));
    }
    std::printf("output %zu: %s -> %s\n", i, tensor::specText(out_specs[i]).c_str(), path.c_str());
  }
  return std::nullopt;
}

int mainImpl(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const std::string command = args.front();
  const std::span<const std::string> rest(args.data() + 1, args.size() - 1);
  if (command == "help" || command == "--help" || command == "-h") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "--version" || command == "version") {
    std::printf("accy %s (build %s)\n", kVersion, executable::buildRecord().stamped ? "stamped" : "unstamped");
    return 0;
  }
  std::optional<Failure> failure;
  if (command == "inspect") {
    failure = inspect(rest);
  } else if (command == "compile") {
    failure = compile(rest);
  } else if (command == "run") {
    failure = run(rest);
  } else {
    failure = usageError(strCat("unknown command '", command, "' (inspect, compile, run, help)"));
  }
  if (std::fflush(stdout) != 0 && !failure) failure = runError("writing to stdout failed");
  if (!failure) return 0;
  std::fprintf(stderr, "accy: %s\n", failure->message.c_str());
  return failure->exit_code;
}

}  // namespace
}  // namespace accy::cli

int main(int argc, char** argv) { return accy::cli::mainImpl(argc, argv); }
