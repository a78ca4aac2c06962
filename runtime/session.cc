#include "runtime/session.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "base/errors.h"
#include "backends/compile_program.h"
#include "compiler/tensor/evaluate.h"
#include "base/status_macros.h"
#include "base/strings.h"
#include "compiler/wire/wire.h"

namespace accy::session {

struct Session::Entry {
  tensor::Program program;
  std::shared_ptr<const backends::LoadedProgram> loaded;
  std::vector<Descriptor> inputs;
  std::vector<Descriptor> outputs;
};

namespace {

std::vector<Descriptor> describe(const std::vector<tensor::Spec>& specs) {
  std::vector<Descriptor> out;
  for (const tensor::Spec& s : specs) {
    out.push_back(Descriptor{s.dtype, s.axes, static_cast<uint64_t>(s.byteSize()),
                             static_cast<uint32_t>(tensor::dtypeSize(s.dtype))});
  }
  return out;
}

}  // namespace

Session::Session(const SessionOptions& options) : options_(options) {}
Session::~Session() = default;

absl::Status Session::fail(Status as, const absl::Status& cause) {
  last_cause_ = cause;
  if (errorKind(cause) == kindOf(as)) return cause;
  return makeError(kindOf(as), std::string(cause.message()));
}

absl::StatusOr<std::shared_ptr<const backends::LoadedProgram>> Session::compileForCpu(
    const tensor::Program& program, const CompileSpec& spec) const {
  if (spec.target != "x86_64") {
    return makeError(ErrorKind::kCompileFailed, strCat("session: target '", spec.target,
                                                       "' is not compiled in process; this session compiles for x86_64"));
  }
  std::shared_ptr<backends::Backend> cpu = backends::makeCpuBackend(backends::BackendOptions{options_.threads});
  return backends::compileProgram(program, spec.target, backends::compileAndLoadOn(*cpu, spec.target, spec.options));
}

absl::StatusOr<uint32_t> Session::indexOf(Handle handle) const {
  if (handle.index >= kMaxPrograms || entries_[handle.index] == nullptr ||
      generations_[handle.index] != handle.generation) {
    return makeError(ErrorKind::kInvalidHandle,
                     strCat("session: no live program for handle {index ", handle.index, ", generation ",
                            handle.generation, "}"));
  }
  return handle.index;
}

absl::StatusOr<Handle> Session::compile(std::string_view bytes, const CompileSpec& spec, CompileInfo* info) {
  const uint32_t slots = std::clamp<uint32_t>(options_.max_programs, 1, kMaxPrograms);
  uint32_t index = slots;
  for (uint32_t i = 0; i < slots; ++i) {
    if (entries_[i] == nullptr) {
      index = i;
      break;
    }
  }
  if (index == slots) {
    return makeError(ErrorKind::kTooManyPrograms,
                     strCat("session: all ", slots, " program slots are in use; release one"));
  }
  // The session's node limit is taken from the encoded message, before
  // anything is parsed or built, and the decoder holds to it as well.
  if (absl::StatusOr<int64_t> nodes = wire::countNodes(bytes, options_.max_compile_nodes);
      nodes.ok() && *nodes > options_.max_compile_nodes) {
    return fail(Status::compile_failed,
                makeError(ErrorKind::kCompileFailed,
                          strCat("session: the program has more than ", options_.max_compile_nodes,
                                 " nodes; this session compiles at most ", options_.max_compile_nodes)));
  }
  wire::DecodeLimits limits;
  limits.max_nodes = std::min(limits.max_nodes, options_.max_compile_nodes);
  auto program = wire::decode(bytes, limits);
  if (!program.ok()) {
    return fail(statusOf(program.status()) == Status::unsupported_version ? Status::unsupported_version
                                                                          : Status::invalid_program,
                program.status());
  }
  CompileInfo ignored;
  auto loaded = options_.compiler ? options_.compiler(*program, bytes, spec, info ? info : &ignored)
                                  : compileForCpu(*program, spec);
  if (!loaded.ok()) {
    // Out of memory, and no compile slot free (too_many_programs), say so;
    // every other failure is the compile's.
    const Status as = statusOf(loaded.status());
    return fail(as == Status::out_of_memory || as == Status::too_many_programs ? as : Status::compile_failed,
                loaded.status());
  }
  if ((*loaded)->executable().artifact_plan.scratch_bytes > options_.max_scratch_bytes) {
    return fail(Status::out_of_memory,
                makeError(ErrorKind::kOutOfMemory,
                          strCat("session: the program needs ", (*loaded)->executable().artifact_plan.scratch_bytes,
                                 " bytes of scratch; this session allows ", options_.max_scratch_bytes)));
  }
  auto entry = std::make_unique<Entry>();
  entry->inputs = describe(program->inputSpecs());
  entry->outputs = describe(program->outputSpecs());
  entry->program = std::move(*program);
  entry->loaded = std::move(*loaded);
  entries_[index] = std::move(entry);
  return Handle{index, generations_[index]};
}

absl::StatusOr<std::span<const Descriptor>> Session::inputDescriptors(Handle handle) const {
  ACCY_ASSIGN_OR_RETURN(uint32_t i, indexOf(handle));
  return std::span<const Descriptor>(entries_[i]->inputs);
}

absl::StatusOr<std::span<const Descriptor>> Session::outputDescriptors(Handle handle) const {
  ACCY_ASSIGN_OR_RETURN(uint32_t i, indexOf(handle));
  return std::span<const Descriptor>(entries_[i]->outputs);
}

absl::StatusOr<int64_t> Session::scratchBytes(Handle handle) const {
  ACCY_ASSIGN_OR_RETURN(uint32_t i, indexOf(handle));
  return entries_[i]->loaded->executable().artifact_plan.scratch_bytes;
}

absl::Status Session::invoke(Handle handle, absl::Span<const std::span<const std::byte>> inputs,
                             absl::Span<const std::span<std::byte>> outputs) {
  ACCY_ASSIGN_OR_RETURN(uint32_t i, indexOf(handle));
  const Entry& e = *entries_[i];
  if (inputs.size() != e.inputs.size() || outputs.size() != e.outputs.size()) {
    return makeError(ErrorKind::kInvalidBuffer,
                     strCat("session: the program takes ", e.inputs.size(), " inputs and ", e.outputs.size(),
                            " outputs; got ", inputs.size(), " and ", outputs.size()));
  }
  if (absl::Status st = e.loaded->launch(inputs, outputs); !st.ok()) {
    const Status as = statusOf(st);
    return fail(as == Status::invalid_buffer || as == Status::out_of_memory ? as : Status::launch_failed, st);
  }
  if (options_.check_numerics) {
    for (size_t k = 0; k < outputs.size(); ++k) {
      const tensor::DType t = e.outputs[k].dtype;
      if (!tensor::isFloating(t)) continue;
      const int64_t size = tensor::dtypeSize(t);
      for (size_t el = 0; el < outputs[k].size() / size; ++el) {
        const double v = tensor::loadElement(t, &outputs[k][el * size]);
        if (!std::isfinite(v)) {
          return fail(Status::launch_failed,
                      makeError(ErrorKind::kLaunchFailed,
                                strCat("session: check_numerics: output ", k, " element ", el, " is ", v)));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Session::release(Handle handle) {
  ACCY_ASSIGN_OR_RETURN(uint32_t i, indexOf(handle));
  entries_[i].reset();
  ++generations_[i];
  return absl::OkStatus();
}

}  // namespace accy::session
