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
// FILE is a wire-encoded program (compiler/wire/wire.h). Every target takes
// the same path, read from its entry in the target registry
// (compiler/codegen/targets.h): what it emits and how each form is written,
// its modes, the flags that describe its device, the device that runs it.
// Exit status: 0 on success, 1 when a valid program fails to compile or
// run, 2 for a bad invocation or a bad input file (the message says which
// and why). docs/CLI.md has examples.
#include <algorithm>
#include <any>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "accy/cpu.h"
#include "accy/version.h"
#include "backends/backend.h"
#include "backends/compile_program.h"
#include "base/status_macros.h"
#include "backends/plan_artifact.h"
#include "backends/staged_program.h"
#include "backends/registry.h"
#include "base/errors.h"
#include "base/strings.h"
#include "compiler/choir/pipeline.h"
#include "compiler/choir/printer.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/codegen/targets.h"
#include "compiler/executable/build_record.h"
#include "compiler/executable/saved_program.h"
#include "compiler/tensor/program.h"
#include "compiler/wire/wire.h"
#include "base/files.h"
#include "tools/msl/shim.h"
#include "tools/npy.h"
#include "tools/webgpu/page_backend.h"
#include "web/page_runner.h"

namespace accy::cli {
namespace {

namespace tensor = accy::tensor;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// --target when none is given: this CPU.
constexpr char kDefaultTarget[] = "x86_64";

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
      of --emit: for x86_64 lower, fuse, narrow, loop-order, epilogues, partition, tile,
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

// The flags that describe a target's device (TargetEntry::flags) and the
// commands that take them.
constexpr std::string_view kCompileTargetFlags[] = {"--threads", "--arch"};
constexpr std::string_view kRunTargetFlags[] = {"--threads"};

// "x86_64 or wasm": the targets whose entry takes `flag`.
std::string targetsTaking(std::string_view flag) {
  std::vector<std::string_view> names;
  for (const codegen::TargetEntry& t : codegen::targets()) {
    if (contains(t.flags, flag)) names.push_back(t.name);
  }
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    strAppend(&text, i == 0 ? "" : i + 1 == names.size() ? " or " : ", ", names[i]);
  }
  return text;
}

// Refuses each of `flags` given on the command line that `target` does not take.
std::optional<Failure> refuseFlags(std::string_view command, const Args& args, const codegen::TargetEntry& target,
                                   std::span<const std::string_view> flags) {
  for (std::string_view flag : flags) {
    if (single(args, std::string(flag)) && !contains(target.flags, flag)) {
      return usageError(strCat(command, ": ", flag, " is for --target=", targetsTaking(flag)));
    }
  }
  return std::nullopt;
}

// The device description `target` gets from the flags given (empty when
// none was given, or it takes none).
absl::StatusOr<std::any> describeDevice(const codegen::TargetEntry& target, const codegen::TargetFlags& given) {
  if (target.describe == nullptr) return std::any();
  return target.describe(given);
}

// The description of this machine's device for `target` (for spirv, the
// Vulkan device's limits and features), or empty (the target's defaults)
// where there is none.
std::any localDevice(const codegen::TargetEntry& target) {
  absl::StatusOr<std::vector<std::unique_ptr<backends::Backend>>> device =
      backends::selectBackends({std::string(target.device)}, backends::BackendOptions{});
  if (!device.ok()) return std::any();
  return device->front()->deviceDescription();
}

// Why a form cannot do without -o (the end of its refusal), or null for
// text, which goes to stdout.
const char* withoutOutput(codegen::EmitForm form) {
  switch (form) {
    case codegen::EmitForm::kModule:
      return "writes a binary module: give -o OUT";
    case codegen::EmitForm::kKernelFiles:
    case codegen::EmitForm::kArtifact:
      return "needs -o OUT";
    case codegen::EmitForm::kChoir:
    case codegen::EmitForm::kAssembly:
    case codegen::EmitForm::kCode:
    case codegen::EmitForm::kWat:
      return nullptr;
  }
  return nullptr;
}

// `path` with ".stage<k>" before its extension (OUT.wasm: OUT.stage2.wasm).
std::string stagePath(const std::string& path, size_t k) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0 ||
      (slash != std::string::npos && dot == slash + 1)) {
    return strCat(path, ".stage", k);
  }
  return strCat(path.substr(0, dot), ".stage", k, path.substr(dot));
}

// How a line of `form`'s text is made a comment: the stage headers of a
// program with loops written to stdout.
std::string_view commentOf(codegen::EmitForm form) {
  switch (form) {
    case codegen::EmitForm::kWat:
      return ";;";
    case codegen::EmitForm::kCode:
      return "//";  // WGSL, MSL, PTX
    case codegen::EmitForm::kChoir:
    case codegen::EmitForm::kAssembly:
    case codegen::EmitForm::kModule:
    case codegen::EmitForm::kKernelFiles:
    case codegen::EmitForm::kArtifact:
      return "#";
  }
  return "#";
}

std::optional<Failure> writeEmitOne(const Args& args, const codegen::TargetEntry& target, const codegen::Emit& emit,
                                    const tensor::Program& program, codegen::CompileRequest request,
                                    const std::optional<std::string>& out);

// Compiles `program` for `target` and writes `emit` in its form (to `out`,
// or stdout for text without it).
std::optional<Failure> writeEmit(const Args& args, const codegen::TargetEntry& target, const codegen::Emit& emit,
                                 const tensor::Program& program, codegen::CompileRequest request,
                                 const std::optional<std::string>& out) {
  using F = codegen::EmitForm;
  if (!backends::hasLoops(program) || target.loops_whole) return writeEmitOne(args, target, emit, program, request, out);
  auto compile = [&](const tensor::Program& stage) {
    codegen::CompileRequest plain = request;
    plain.dump = nullptr;
    plain.assembly = nullptr;
    return codegen::compileFor(std::string(target.name), stage, plain);
  };
  // A program with loops for a target whose host reads an artifact (wgsl,
  // wasm, msl): the plan artifact (accy-plan-1, docs/WEB.md), each loop-free
  // stage compiled as a program is.
  if (emit.form == F::kArtifact && target.artifact != nullptr) {
    absl::StatusOr<std::string> plan = backends::planArtifactJson(program, target.name, compile, target.artifact);
    if (!plan.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(plan.status())));
    if (absl::Status st = files::writeFile(*out, *plan); !st.ok()) return inputError(messageOf(st));
    std::printf("wrote %s: %zu bytes (a plan of %s stages: the program has loops)\n", out->c_str(), plan->size(),
                std::string(target.name).c_str());
    return std::nullopt;
  }
  if (emit.form == F::kArtifact) {
    return runError(strCat(args.file, ": --emit=artifact: ", program.name, " has loops, and a saved ", target.name,
                           " program holds one module; `accy run ", args.file,
                           "` runs it from its wire file (each loop-free stage compiled once)"));
  }
  // Every other form: each stage the one compile path makes (loop-free
  // stretches, loop bodies, scans run as one kernel), in order, written as
  // that form of a program without loops: to stdout one after another under
  // a comment naming the stage, or to OUT.stage<k>.
  absl::StatusOr<std::vector<backends::CompiledStage>> stages =
      backends::compiledStages(program, target.name, compile);
  if (!stages.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(stages.status())));
  for (size_t k = 0; k < stages->size(); ++k) {
    const tensor::Program& stage = (*stages)[k].program;
    std::optional<std::string> stage_out;
    if (out) stage_out = stagePath(*out, k);
    if (!out) {
      std::printf("%s stage %zu of %zu: %s (%zu nodes)\n", std::string(commentOf(emit.form)).c_str(), k + 1,
                  stages->size(), stage.name.c_str(), stage.nodes.size());
      std::fflush(stdout);
    }
    if (auto f = writeEmitOne(args, target, emit, stage, request, stage_out)) return f;
    if (out && (emit.form == F::kChoir || emit.form == F::kAssembly || emit.form == F::kCode ||
                emit.form == F::kModule || emit.form == F::kWat)) {
      std::printf("wrote %s: stage %zu of %zu (%s)\n", stage_out->c_str(), k + 1, stages->size(), stage.name.c_str());
    }
  }
  return std::nullopt;
}

// writeEmit for a program the target compiles as one module.
std::optional<Failure> writeEmitOne(const Args& args, const codegen::TargetEntry& target, const codegen::Emit& emit,
                                    const tensor::Program& program, codegen::CompileRequest request,
                                    const std::optional<std::string>& out) {
  using F = codegen::EmitForm;
  // The Choir module as the pipeline's last pass leaves it: what
  // --dump-after of that pass prints.
  PassDump last_pass;
  if (emit.form == F::kChoir) {
    last_pass.pass = choir::pipelinePasses(target.gpu).back();
    request.dump = last_pass.hook();
  }
  std::string assembly;
  if (emit.form == F::kAssembly) request.assembly = &assembly;
  const absl::StatusOr<executable::Executable> exe = codegen::compileFor(target.name, program, request);
  if (emit.form != F::kChoir && !exe.ok()) {
    return runError(strCat(args.file, ": compile failed: ", messageOf(exe.status())));
  }
  switch (emit.form) {
    case F::kChoir:
      return last_pass.finish(args, out, exe.status());
    case F::kAssembly:
      return writeText(out, assembly);
    case F::kCode:
      return writeText(out, std::string(exe->code.begin(), exe->code.end()));
    case F::kModule:
      if (absl::Status st = files::writeFile(*out, std::string(exe->code.begin(), exe->code.end())); !st.ok()) {
        return inputError(messageOf(st));
      }
      return std::nullopt;
    case F::kKernelFiles: {
      const auto& steps = exe->launch_plan.steps;
      for (size_t k = 0; k < steps.size(); ++k) {
        const uint64_t end = k + 1 < steps.size() ? steps[k + 1].entry_offset : exe->code.size();
        const std::string path = strCat(*out, ".", k, ".", emit.suffix);
        const std::string bytes(reinterpret_cast<const char*>(exe->code.data() + steps[k].entry_offset),
                                end - steps[k].entry_offset);
        if (absl::Status st = files::writeFile(path, bytes); !st.ok()) return inputError(messageOf(st));
        std::printf("wrote %s: kernel %s, %zu bytes, %lld workgroups\n", path.c_str(), steps[k].kernel.c_str(),
                    bytes.size(), static_cast<long long>(steps[k].parallel_extent));
      }
      return std::nullopt;
    }
    case F::kWat: {
      absl::StatusOr<std::string> wat = watOf(exe->code);
      if (!wat.ok()) return runError(strCat("compile: --emit=", emit.name, ": ", messageOf(wat.status())));
      return writeText(out, *wat);
    }
    case F::kArtifact: {
      if (target.artifact == nullptr) return writeSaved(args, *exe, *out);
      absl::StatusOr<std::string> written = target.artifact(*exe);
      if (!written.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(written.status())));
      const std::string bytes = *std::move(written);
      if (absl::Status st = files::writeFile(*out, bytes); !st.ok()) return inputError(messageOf(st));
      std::printf("wrote %s: %zu bytes (%s, %s, %zu kernels)\n", out->c_str(), bytes.size(), exe->target.c_str(),
                  exe->isa.c_str(), exe->launch_plan.steps.size());
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// accy compile FILE --target=T --emit=E | --dump-after=PASS [target flags]
// [--mode=M] [-o OUT], for every target alike from its registry entry
// (compiler/codegen/targets.h): its passes, what it writes and how, its
// modes, the flags that describe its device.
std::optional<Failure> compile(std::span<const std::string> argv) {
  Args args;
  const OptionTable table{
      {"--emit", "--target", "--threads", "-o", "--out", "--arch", "--mode", "--dump-after"}, {}, {}};
  if (auto f = parseArgs("compile", argv, table, &args)) return f;
  if (args.help) {
    std::fputs(kUsage, stdout);
    return std::nullopt;
  }
  const std::string target = single(args, "--target").value_or(kDefaultTarget);
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
  if (auto f = refuseFlags("compile", args, **entry, kCompileTargetFlags)) return f;
  // --mode: exact (default), fast, or tf32 where the target has it.
  const absl::StatusOr<codegen::ArithmeticMode> mode =
      codegen::parseArithmeticMode(single(args, "--mode").value_or("exact"));
  if (!mode.ok()) return usageError(strCat("compile: ", messageOf(mode.status())));
  if (absl::Status st = codegen::checkMode(target, *mode); !st.ok()) {
    return runError(strCat(args.file, ": compile failed: ", messageOf(st)));
  }
  const codegen::Emit* emit = nullptr;
  if (!dump) {
    const std::optional<std::string> name = single(args, "--emit");
    if (!name) {
      std::string names;
      for (const codegen::Emit& e : (*entry)->emits) strAppend(&names, names.empty() ? "" : "|", e.name);
      return usageError(strCat("compile: --emit=", names, " is required (or --dump-after=PASS)"));
    }
    absl::StatusOr<const codegen::Emit*> found = codegen::findEmit(**entry, *name);
    if (!found.ok()) return usageError(strCat("compile: ", messageOf(found.status())));
    emit = *found;
  }
  if (single(args, "-o") && single(args, "--out")) return usageError("compile: give -o or --out, not both");
  std::optional<std::string> out = single(args, "-o");
  if (!out) out = single(args, "--out");
  if (const char* need = emit != nullptr && !out ? withoutOutput(emit->form) : nullptr) {
    return usageError(strCat("compile: --emit=", emit->name, " ", need));
  }
  codegen::TargetFlags given;
  if (single(args, "--threads")) {
    absl::StatusOr<int> threads = threadsOption(args);
    if (!threads.ok()) return usageError(strCat("compile: ", messageOf(threads.status())));
    given.threads = *threads;
  }
  given.arch = single(args, "--arch");
  absl::StatusOr<std::any> device = describeDevice(**entry, given);
  if (!device.ok()) return usageError(strCat("compile: ", messageOf(device.status())));
  absl::StatusOr<tensor::Program> program = loadProgram(args.file);
  if (!program.ok()) return inputError(messageOf(program.status()));
  // The device the flags describe, with the target's defaults for the
  // rest; a target without flags compiles for this machine's device for
  // it where there is one.
  codegen::CompileRequest request{.mode = *mode, .device = *std::move(device)};
  if ((*entry)->flags.empty()) request.device = localDevice(**entry);
  if (dump && backends::hasLoops(*program) && !(*entry)->loops_whole) {
    // Each stage's module after the pass, as --emit=choir writes them.
    absl::StatusOr<std::vector<backends::CompiledStage>> stages = backends::compiledStages(
        *program, target, [&](const tensor::Program& stage) { return codegen::compileFor(target, stage, request); });
    if (!stages.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(stages.status())));
    for (size_t k = 0; k < stages->size(); ++k) {
      PassDump one{.pass = dump->pass};
      codegen::CompileRequest hooked = request;
      hooked.dump = one.hook();
      const absl::Status st = codegen::compileFor(target, (*stages)[k].program, hooked).status();
      if (!out) {
        std::printf("# stage %zu of %zu: %s\n", k + 1, stages->size(), (*stages)[k].program.name.c_str());
        std::fflush(stdout);
      }
      if (auto f = one.finish(args, out ? std::optional<std::string>(stagePath(*out, k)) : std::nullopt, st)) return f;
    }
    return std::nullopt;
  }
  if (dump) {
    request.dump = dump->hook();
    return dump->finish(args, out, codegen::compileFor(target, *program, request).status());
  }
  return writeEmit(args, **entry, *emit, *program, std::move(request), out);
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

// The devices of this tool that are not library backends
// (backends/registry.h), by the name a target's entry gives its device:
// WGSL in a headless Chromium page (docs/WEB.md), WebAssembly in node
// through the runtime web pages use (web/accy_wasm.js), and the MSL shim (a
// check of the MSL emitter on this CPU, tools/msl/shim.h, not a Metal
// device). Each works in a temporary directory.
struct ToolDevice {
  std::string_view name;
  std::unique_ptr<backends::Backend> (*make)(const codegen::TargetEntry& target, const std::string& dir);
};
const ToolDevice kToolDevices[] = {
    {"browser",
     [](const codegen::TargetEntry& target, const std::string& dir) -> std::unique_ptr<backends::Backend> {
       return std::make_unique<webgpu::PageBackend>(std::string(target.name), std::string(target.device),
                                                    [dir] { return webgpu::PageRunner::open(dir); });
     }},
    {"node",
     [](const codegen::TargetEntry&, const std::string& dir) -> std::unique_ptr<backends::Backend> {
       return webgpu::nodeBackend(dir);
     }},
    {"msl-shim",
     [](const codegen::TargetEntry&, const std::string& dir) -> std::unique_ptr<backends::Backend> {
       return std::make_unique<mslshim::ShimBackend>(dir);
     }},
};

// Compiles `program` for `target` (or takes the restored executable) and
// runs it on this machine's device for it: a backend of the registry (cpu
// in process, vulkan, cuda, null) or one of the tool's devices above. The
// compile is for the device the flags given describe, or else for the
// device's own description.
std::optional<Failure> runOn(const Args& args, const codegen::TargetEntry& target, codegen::ArithmeticMode mode,
                             const codegen::TargetFlags& given, const tensor::Program* program,
                             const executable::Executable* restored, std::span<const std::span<const std::byte>> in,
                             std::span<const std::span<std::byte>> out) {
  auto failed = [&](const absl::Status& st) { return runError(strCat(args.file, ": run failed: ", messageOf(st))); };
  struct TempDir {
    char path[32] = "/tmp/accy-run-XXXXXX";
    bool made = false;
    ~TempDir() {
      if (made) std::filesystem::remove_all(path);
    }
  } dir;
  std::unique_ptr<backends::Backend> device;
  for (const ToolDevice& d : kToolDevices) {
    if (d.name != target.device) continue;
    dir.made = mkdtemp(dir.path) != nullptr;
    if (!dir.made) return runError("run: cannot make a temporary directory");
    device = d.make(target, dir.path);
  }
  if (device == nullptr) {
    absl::StatusOr<std::vector<std::unique_ptr<backends::Backend>>> chosen = backends::selectBackends(
        {std::string(target.device)}, backends::BackendOptions{.threads = given.threads.value_or(0)});
    if (!chosen.ok()) return failed(chosen.status());
    device = std::move(chosen->front());
  }
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> loaded;
  if (restored != nullptr) {
    loaded = device->load(*restored);
    if (!loaded.ok()) return failed(loaded.status());
  } else {
    absl::StatusOr<std::any> described = describeDevice(target, given);
    if (!described.ok()) return usageError(strCat("run: ", messageOf(described.status())));
    codegen::CompileRequest request{.mode = mode, .device = *std::move(described)};
    if (!request.device.has_value()) request.device = device->deviceDescription();
    // Compile failures (the program's) and load failures (the device's)
    // are told apart: the stage compiler marks which one it met.
    bool compiled = true;
    auto compile = [&](const tensor::Program& stage) -> absl::StatusOr<executable::Executable> {
      absl::StatusOr<executable::Executable> exe = codegen::compileFor(target.name, stage, request);
      compiled = exe.ok();
      return exe;
    };
    const bool loops = backends::hasLoops(*program);
    auto* page = dynamic_cast<webgpu::PageBackend*>(device.get());
    if (loops && page != nullptr) {
      // A web page (or node) runs the whole plan itself (web/accy_plan.js):
      // one launch a run, the loops inside the page.
      loaded = page->loadWithLoops(*program, compile);
    } else {
      if (auto* shim = dynamic_cast<mslshim::ShimBackend*>(device.get()); loops && shim != nullptr) {
        // Every stage's kernels in one clang++ run, before they load.
        absl::StatusOr<std::vector<executable::Executable>> exes =
            backends::stageExecutables(*program, target.name, compile);
        if (!exes.ok()) return runError(strCat(args.file, ": compile failed: ", messageOf(exes.status())));
        if (absl::Status st = shim->preload(*exes); !st.ok()) return failed(st);
      }
      // The one compile path (backends/compile_program.h): a program with
      // loops runs as stages on the device, each compiled once.
      loaded = backends::compileProgram(
          *program, target,
          [&](const tensor::Program& stage) -> absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> {
            ACCY_ASSIGN_OR_RETURN(executable::Executable exe, compile(stage));
            return device->load(std::move(exe));
          });
    }
    if (!loaded.ok()) {
      if (!compiled) return runError(strCat(args.file, ": compile failed: ", messageOf(loaded.status())));
      return failed(loaded.status());
    }
  }
  if (absl::Status st = (*loaded)->launch(in, out); !st.ok()) return failed(st);
  return std::nullopt;
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
  const std::string target = single(args, "--target").value_or(kDefaultTarget);
  const absl::StatusOr<const codegen::TargetEntry*> entry = codegen::findTarget(target);
  if (!entry.ok()) return inputError(strCat("run: ", messageOf(entry.status())));
  if (auto f = refuseFlags("run", args, **entry, kRunTargetFlags)) return f;
  codegen::TargetFlags given;
  if (single(args, "--threads")) given.threads = *threads;
  const absl::StatusOr<codegen::ArithmeticMode> mode =
      codegen::parseArithmeticMode(single(args, "--mode").value_or("exact"));
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
  if (std::optional<Failure> f = runOn(args, *run_target, *mode, given, program ? &*program : nullptr,
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
