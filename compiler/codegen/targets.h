// Targets as data: one entry per compile target (x86_64, spirv, ptx, wgsl,
// msl, wasm, reference). What `Function::compile`, `accy compile`,
// accyd's Compile, RemoteSession and every backend know about a target
// (its name, what `accy compile --emit` writes for it and how, the
// arithmetic modes it compiles, the command-line flags that describe its
// device, the device that runs it, how to compile for it) is read from
// its entry; a refused mode or --emit has one message, written here.
//
// Adding a target: its folder (compiler/codegen/<name>/), one entry in
// targets.cc and its dependency in compiler/codegen/BUILD.bazel, and docs
// (docs/GPU.md, "One kernel emitter", lists the rest).
#ifndef ACCY_COMPILER_CODEGEN_TARGETS_H_
#define ACCY_COMPILER_CODEGEN_TARGETS_H_

#include <any>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/choir/pipeline.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "compiler/executable/executable.h"
#include "compiler/tensor/program.h"

namespace accy::codegen {

// One compile request, the same for every target.
struct CompileRequest {
  ArithmeticMode mode = ArithmeticMode::kExact;
  // The device compiled for, as the target describes one: an
  // x64::CompileOptions, spirv::TargetInfo or ptx::TargetInfo (its mode is
  // replaced by `mode`); empty for the target's defaults.
  std::any device;
  // Sees the Choir module after each pass (choir/pipeline.h).
  choir::PassHook dump;
  // When set, receives the target's assembly listing, for the targets
  // that write one (an Emit of form kAssembly); others leave it as it is.
  std::string* assembly = nullptr;
};

// How `accy compile` writes one --emit form of a target (tools/accy.cc,
// docs/CLI.md): every form has one writer there, the same for every target.
enum class EmitForm : uint8_t {
  kChoir,        // the Choir module as the target's pipeline leaves it (text)
  kAssembly,     // the target's assembly listing (CompileRequest::assembly; text)
  kCode,         // the executable's code as it is (text)
  kModule,       // the executable's code as it is: one binary module (needs -o)
  kKernelFiles,  // each kernel's code as a binary file, OUT.<k>.<suffix> (needs -o)
  kWat,          // the code, a WebAssembly module, as text (wabt's wasm2wat)
  kArtifact,     // what `artifact` writes, or else a saved program (needs -o)
};

struct Emit {
  std::string_view name;  // the --emit value
  EmitForm form = EmitForm::kArtifact;
  std::string_view suffix;  // kKernelFiles: the files' extension ("spv")
};

// The values of the target flags given on a command line (TargetEntry::flags).
struct TargetFlags {
  std::optional<int> threads;       // --threads: threads a launch may use, 0 for every hardware thread
  std::optional<std::string> arch;  // --arch: the device's architecture, e.g. "sm_90"
};

struct TargetEntry {
  std::string_view name;     // --target, Executable::target, the wire's target
  std::string_view summary;  // one line, for help and docs
  // What `accy compile --emit` writes for it ("artifact": the serialized
  // executable; "choir": the Choir module it translates), and how.
  std::vector<Emit> emits;
  // The --emit form that is the executable's code as it is, if any.
  std::string_view code_emit;
  std::vector<ArithmeticMode> modes;  // the modes it compiles
  // The backend that runs its artifacts, or "browser": a web page, through
  // web/accy.js (wgsl); "node": node, through web/accy_wasm.js (wasm);
  // "msl-shim": the CPU check of tools/msl (msl).
  std::string_view device;
  bool gpu = false;                   // mapped onto workgroups (choir::pipelinePasses(true))
  // How a program with loops compiles for it (backends::compileProgram):
  // `loops_whole`: the target takes such a program as it is (the reference
  // evaluator runs loops itself); otherwise it runs as stages of loop-free
  // programs, and with `scans_in_kernel` a scan whose body is loop-free is
  // offered to the target whole, to run as one kernel with its step loop
  // inside (the CPU targets, compiler/choir/passes/scan_kernel.h).
  bool loops_whole = false;
  bool scans_in_kernel = false;
  bool available = true;              // compiled into this build for this host
  absl::StatusOr<executable::Executable> (*compile)(const tensor::Program& program,
                                                    const CompileRequest& request) = nullptr;
  // What --emit=artifact writes; null: the executable as a saved program
  // (compiler/executable/saved_program.h), which accy run loads.
  absl::StatusOr<std::string> (*artifact)(const executable::Executable& exe) = nullptr;
  // The command-line flags, beyond those every target takes, that describe
  // its device ("--threads", "--arch"; `accy` refuses them for the other
  // targets), and the description (CompileRequest::device) made of the
  // values given: empty when none was given (the target's defaults stand),
  // InvalidArgument whose message names the flag for a value it cannot
  // take. Empty and null for a target without such flags.
  std::vector<std::string_view> flags;
  absl::StatusOr<std::any> (*describe)(const TargetFlags& given) = nullptr;
};

// Every target of this build, available or not, in a fixed order.
std::span<const TargetEntry> targets();
// "x86_64, spirv, ptx": the available targets' names.
std::string targetNames();
// The entry named `name`; InvalidArgument naming the targets otherwise.
absl::StatusOr<const TargetEntry*> findTarget(std::string_view name);
// OK when `target` compiles `mode`; else InvalidArgument saying which
// target does (tf32: NVIDIA tensor cores, target ptx).
absl::Status checkMode(std::string_view target, ArithmeticMode mode);
// OK when `target` writes `emit`; else InvalidArgument listing what it writes.
absl::Status checkEmit(const TargetEntry& target, std::string_view emit);
// The entry of `emit` in `target.emits`; InvalidArgument as checkEmit's
// otherwise.
absl::StatusOr<const Emit*> findEmit(const TargetEntry& target, std::string_view emit);
// Compiles `program` for `target` (checking the mode first).
absl::StatusOr<executable::Executable> compileFor(std::string_view target, const tensor::Program& program,
                                                  const CompileRequest& request);

}  // namespace accy::codegen

#endif  // ACCY_COMPILER_CODEGEN_TARGETS_H_
