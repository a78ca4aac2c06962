// accy::session: compile wire-encoded programs for this CPU and run them on
// the caller's memory, with stable status numbers for any host language.
//
// A Session holds up to kMaxPrograms compiled programs in a table. A
// Handle names one by slot index and generation; release() bumps the
// slot's generation, so the released handle and every copy of it are
// refused with InvalidHandle from then on. Runs use the caller's buffers in
// place (compiled programs never write their inputs, so no input is ever
// copied). Every failure is one of eight kinds with a number fixed forever
// (Status, runtime/statuses.h). A Session is not thread-safe: use one per
// thread, or lock.
#ifndef ACCY_RUNTIME_SESSION_H_
#define ACCY_RUNTIME_SESSION_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "accy/cpu.h"
#include "backends/backend.h"
#include "compiler/tensor/program.h"
#include "runtime/statuses.h"

namespace accy::session {

inline constexpr uint32_t kMaxPrograms = 64;

struct Handle {
  uint32_t index = 0;
  uint32_t generation = 0;
  friend bool operator==(const Handle&, const Handle&) = default;
};

// Type, axes, exact byte size and required alignment of one input or output.
struct Descriptor {
  tensor::DType dtype = tensor::DType::f32;
  std::vector<tensor::Axis> axes;
  uint64_t byte_size = 0;
  uint32_t alignment = 1;
};

// What a compile produced, for hosts that care (accyd reports it).
struct CompileInfo {
  bool cache_hit = false;
  std::string cache_level;  // "memory", "disk" or "" for a fresh compile
};

// What a program is compiled for: the target (its registry name,
// compiler/codegen/targets.h) and the compile's options.
struct CompileSpec {
  std::string target = "x86_64";
  backends::CompileOptions options;
};

// Turns a decoded program (and its wire bytes) into a loaded executable for
// `spec`. The default compiles for this CPU (x86_64 only); accyd plugs in
// its compile cache around backends::compileProgram.
using Compiler = std::function<absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>>(
    const tensor::Program& program, std::string_view bytes, const CompileSpec& spec, CompileInfo* info)>;

struct SessionOptions {
  // Threads one run may use; 0 means every hardware thread.
  int threads = 0;
  // Programs held at once, 1 to kMaxPrograms (a value outside is taken as
  // the nearest of those); compiling one more fails with too_many_programs.
  uint32_t max_programs = kMaxPrograms;
  // Programs with more nodes than this fail to compile (compile_failed).
  int64_t max_compile_nodes = int64_t{1} << 16;
  // Programs whose temporaries need more scratch than this fail to compile
  // (out_of_memory).
  int64_t max_scratch_bytes = int64_t{16} << 30;
  // After each run, scan floating outputs and fail with launch_failed on a
  // NaN or infinity (like JAX's debug_nans).
  bool check_numerics = false;
  // When set, compiles programs instead of the built-in CPU compiler. Its
  // failures map to compile_failed, or out_of_memory for OutOfMemory.
  Compiler compiler;
};

class Session {
 public:
  Session() : Session(SessionOptions{}) {}
  explicit Session(const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Decodes, compiles and loads `bytes` into a free slot. The caller may
  // free `bytes` when this returns. Errors: invalid_program,
  // unsupported_version, compile_failed, out_of_memory, too_many_programs.
  absl::StatusOr<Handle> compile(std::string_view bytes, const CompileSpec& spec, CompileInfo* info = nullptr);
  // For this CPU (x86_64, exact).
  absl::StatusOr<Handle> compile(std::string_view bytes, CompileInfo* info = nullptr) {
    return compile(bytes, CompileSpec{}, info);
  }

  // Descriptors stay valid until the program is released. invalid_handle
  // for a stale or unknown handle.
  absl::StatusOr<std::span<const Descriptor>> inputDescriptors(Handle handle) const;
  absl::StatusOr<std::span<const Descriptor>> outputDescriptors(Handle handle) const;
  // The scratch memory one launch of the program allocates for its
  // temporaries, in bytes.
  absl::StatusOr<int64_t> scratchBytes(Handle handle) const;

  // Runs the program. Buffers follow the descriptors in order; a wrong
  // count, size or alignment, or an output sharing bytes with an input or
  // another output, fails with invalid_buffer before anything runs.
  absl::Status invoke(Handle handle, absl::Span<const std::span<const std::byte>> inputs,
                      absl::Span<const std::span<std::byte>> outputs);

  // Frees the program; the handle and its descriptors become invalid.
  absl::Status release(Handle handle);

  // The inner error behind the most recent failure that went through the
  // session's error mapping (decode, compile, load and run failures), for
  // diagnostics. Failures returned directly (full table, stale handle,
  // buffer count mismatch) leave it unchanged. nullopt before any.
  const std::optional<absl::Status>& lastCause() const { return last_cause_; }

 private:
  struct Entry;
  absl::StatusOr<uint32_t> indexOf(Handle handle) const;
  absl::Status fail(Status as, const absl::Status& cause);
  absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> compileForCpu(const tensor::Program& program,
                                                                               const CompileSpec& spec) const;

  SessionOptions options_;
  std::array<std::unique_ptr<Entry>, kMaxPrograms> entries_;
  std::array<uint32_t, kMaxPrograms> generations_{};
  std::optional<absl::Status> last_cause_;
};

}  // namespace accy::session

#endif  // ACCY_RUNTIME_SESSION_H_
