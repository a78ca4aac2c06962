// The C ABI (accy/accy_c.h) over accy::session::Session.
//
// Every entry point catches every exception: allocation failure becomes
// ACCY_STATUS_OUT_OF_MEMORY, anything else the status the call would give
// for a failure of its own kind. Descriptor pointers point into per-program
// tables kept here (axis-name C strings and extents arrays), built when the
// program is compiled and dropped when it is released.
#include "accy/accy_c.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "runtime/session.h"
#include "compiler/tensor/program.h"

namespace {

namespace session = accy::session;
namespace tensor = accy::tensor;

static_assert(ACCY_STATUS_OK == static_cast<uint32_t>(session::Status::ok));
static_assert(ACCY_STATUS_INVALID_PROGRAM == static_cast<uint32_t>(session::Status::invalid_program));
static_assert(ACCY_STATUS_UNSUPPORTED_VERSION == static_cast<uint32_t>(session::Status::unsupported_version));
static_assert(ACCY_STATUS_INVALID_HANDLE == static_cast<uint32_t>(session::Status::invalid_handle));
static_assert(ACCY_STATUS_INVALID_BUFFER == static_cast<uint32_t>(session::Status::invalid_buffer));
static_assert(ACCY_STATUS_TOO_MANY_PROGRAMS == static_cast<uint32_t>(session::Status::too_many_programs));
static_assert(ACCY_STATUS_OUT_OF_MEMORY == static_cast<uint32_t>(session::Status::out_of_memory));
static_assert(ACCY_STATUS_COMPILE_FAILED == static_cast<uint32_t>(session::Status::compile_failed));
static_assert(ACCY_STATUS_LAUNCH_FAILED == static_cast<uint32_t>(session::Status::launch_failed));

static_assert(ACCY_DTYPE_F32 == static_cast<uint32_t>(tensor::DType::f32));
static_assert(ACCY_DTYPE_F64 == static_cast<uint32_t>(tensor::DType::f64));
static_assert(ACCY_DTYPE_I32 == static_cast<uint32_t>(tensor::DType::i32));
static_assert(ACCY_DTYPE_I64 == static_cast<uint32_t>(tensor::DType::i64));
static_assert(ACCY_DTYPE_BOOL == static_cast<uint32_t>(tensor::DType::bool_));

static_assert(sizeof(accy_handle) == 8);
static_assert(sizeof(accy_status) == sizeof(uint32_t));

// The C-side arrays behind one descriptor. Once filled, neither the object
// nor its vectors are moved or resized, so the pointers in `name_ptrs` (into
// `names`) stay valid.
struct Shape {
  std::vector<std::string> names;
  std::vector<const char*> name_ptrs;
  std::vector<int64_t> extents;
};

// The C-side tables of one live program.
struct Program {
  uint32_t generation = 0;
  std::vector<Shape> inputs;
  std::vector<Shape> outputs;
};

// Fills `shapes` in place (sized first, so no Shape moves afterwards).
void fill(std::span<const session::Descriptor> descriptors, std::vector<Shape>& shapes) {
  shapes.resize(descriptors.size());
  for (size_t k = 0; k < descriptors.size(); ++k) {
    Shape& s = shapes[k];
    s.names.reserve(descriptors[k].axes.size());
    s.extents.reserve(descriptors[k].axes.size());
    for (const tensor::Axis& axis : descriptors[k].axes) {
      s.names.push_back(axis.name);
      s.extents.push_back(axis.extent);
    }
    s.name_ptrs.reserve(s.names.size());
    for (const std::string& name : s.names) s.name_ptrs.push_back(name.c_str());
  }
}

accy_status statusOf(const absl::Status& status) {
  return static_cast<accy_status>(session::statusOf(status));
}

session::Handle toHandle(accy_handle h) { return session::Handle{h.index, h.generation}; }

static_assert(sizeof(accy_session_options) == 48 && sizeof(accy_invoke_args) == 56 &&
              sizeof(accy_value_info) == 56);
static_assert(ACCY_INVOKE_ARGS_MIN_SIZE == ACCY_INVOKE_ARGS_STRUCT_SIZE);

// The rules of the header's "Sized structs" for a struct the caller gives:
// at least `min_size`, a multiple of 8, and zero past what this library
// knows. Gives the caller's size, or 0 when the struct is refused.
uint64_t acceptedSize(const void* s, uint64_t min_size, uint64_t known_size) {
  uint64_t size = 0;
  std::memcpy(&size, s, sizeof size);
  if (size < min_size || size % 8 != 0) return 0;
  const unsigned char* bytes = static_cast<const unsigned char*>(s);
  for (uint64_t k = known_size; k < size; ++k) {
    if (bytes[k] != 0) return 0;
  }
  return size;
}

// The caller's struct, of `size` accepted bytes, as this library's struct:
// fields past the caller's end are zero, which means their default.
template <typename Struct>
Struct readSized(const Struct* s, uint64_t size) {
  Struct local{};
  std::memcpy(&local, s, std::min<uint64_t>(size, sizeof local));
  return local;
}

}  // namespace

struct accy_session {
  accy_session() = default;
  explicit accy_session(const session::SessionOptions& options) : session(options) {}
  session::Session session;
  std::array<std::optional<Program>, session::kMaxPrograms> programs;
  // Backs the string accy_last_cause returns.
  mutable std::string last_cause;
};

namespace {

// Runs `body` (which returns an accy_status) so that no exception escapes:
// std::bad_alloc gives out_of_memory, anything else `otherwise`.
template <typename Body>
accy_status guarded(accy_status otherwise, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return ACCY_STATUS_OUT_OF_MEMORY;
  } catch (...) {
    return otherwise;
  }
}

// The C-side tables of a live handle; nullptr when they are missing (which
// only happens for a handle the session refuses too).
const Program* programOf(const accy_session& s, accy_handle h) {
  if (h.index >= session::kMaxPrograms) return nullptr;
  const std::optional<Program>& p = s.programs[h.index];
  return p.has_value() && p->generation == h.generation ? &*p : nullptr;
}

accy_status count(accy_session* s, accy_handle handle, size_t* out, bool inputs) {
  if (s == nullptr || out == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  return guarded(ACCY_STATUS_OUT_OF_MEMORY, [&] {
    auto descriptors = inputs ? s->session.inputDescriptors(toHandle(handle))
                              : s->session.outputDescriptors(toHandle(handle));
    if (!descriptors.ok()) return statusOf(descriptors.status());
    *out = descriptors->size();
    return ACCY_STATUS_OK;
  });
}

accy_status describe(accy_session* s, accy_handle handle, size_t i, accy_descriptor* out, bool inputs) {
  if (s == nullptr || out == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  return guarded(ACCY_STATUS_OUT_OF_MEMORY, [&] {
    auto descriptors = inputs ? s->session.inputDescriptors(toHandle(handle))
                              : s->session.outputDescriptors(toHandle(handle));
    if (!descriptors.ok()) return statusOf(descriptors.status());
    const Program* program = programOf(*s, handle);
    if (program == nullptr) return ACCY_STATUS_INVALID_HANDLE;
    const std::vector<Shape>& shapes = inputs ? program->inputs : program->outputs;
    if (i >= descriptors->size() || i >= shapes.size()) return ACCY_STATUS_INVALID_BUFFER;
    const session::Descriptor& d = (*descriptors)[i];
    const Shape& shape = shapes[i];
    accy_descriptor result{};
    result.dtype = static_cast<uint32_t>(d.dtype);
    result.rank = static_cast<uint32_t>(shape.extents.size());
    result.axis_names = shape.name_ptrs.empty() ? nullptr : shape.name_ptrs.data();
    result.extents = shape.extents.empty() ? nullptr : shape.extents.data();
    result.byte_size = d.byte_size;
    result.alignment = d.alignment;
    *out = result;
    return ACCY_STATUS_OK;
  });
}


accy_status invoke(accy_session* s, accy_handle handle, const void* const* inputs, const size_t* input_sizes,
                   size_t input_count, void* const* outputs, const size_t* output_sizes, size_t output_count) {
  if (s == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  if (input_count != 0 && (inputs == nullptr || input_sizes == nullptr)) return ACCY_STATUS_INVALID_BUFFER;
  if (output_count != 0 && (outputs == nullptr || output_sizes == nullptr)) return ACCY_STATUS_INVALID_BUFFER;
  for (size_t k = 0; k < input_count; ++k) {
    if (inputs[k] == nullptr && input_sizes[k] != 0) return ACCY_STATUS_INVALID_BUFFER;
  }
  for (size_t k = 0; k < output_count; ++k) {
    if (outputs[k] == nullptr && output_sizes[k] != 0) return ACCY_STATUS_INVALID_BUFFER;
  }
  return guarded(ACCY_STATUS_LAUNCH_FAILED, [&] {
    std::vector<std::span<const std::byte>> in;
    std::vector<std::span<std::byte>> out;
    in.reserve(input_count);
    out.reserve(output_count);
    for (size_t k = 0; k < input_count; ++k) {
      in.emplace_back(static_cast<const std::byte*>(inputs[k]), input_sizes[k]);
    }
    for (size_t k = 0; k < output_count; ++k) {
      out.emplace_back(static_cast<std::byte*>(outputs[k]), output_sizes[k]);
    }
    return statusOf(s->session.invoke(toHandle(handle), in, out));
  });
}

}  // namespace

extern "C" {

uint32_t accy_c_api_version(void) {
  return (uint32_t{ACCY_C_API_VERSION_MAJOR} << 16) | uint32_t{ACCY_C_API_VERSION_MINOR};
}

accy_status accy_session_create(accy_session** out) {
  if (out == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  return guarded(ACCY_STATUS_OUT_OF_MEMORY, [&] {
    accy_session* s = new (std::nothrow) accy_session();
    if (s == nullptr) return ACCY_STATUS_OUT_OF_MEMORY;
    *out = s;
    return ACCY_STATUS_OK;
  });
}

void accy_session_destroy(accy_session* session) {
  // Destructors do not throw; `delete` of nullptr is a no-op.
  delete session;
}

accy_status accy_compile(accy_session* s, const void* bytes, size_t size, accy_handle* out) {
  if (s == nullptr || out == nullptr || (bytes == nullptr && size != 0)) return ACCY_STATUS_INVALID_BUFFER;
  return guarded(ACCY_STATUS_COMPILE_FAILED, [&] {
    const std::string_view view = size == 0 ? std::string_view() : std::string_view(static_cast<const char*>(bytes), size);
    absl::StatusOr<session::Handle> handle = s->session.compile(view);
    if (!handle.ok()) return statusOf(handle.status());
    // Build the C-side tables; on failure give the program back so the
    // session and the tables never disagree.
    accy_status st = guarded(ACCY_STATUS_OUT_OF_MEMORY, [&] {
      auto in = s->session.inputDescriptors(*handle);
      auto outs = s->session.outputDescriptors(*handle);
      if (!in.ok()) return statusOf(in.status());
      if (!outs.ok()) return statusOf(outs.status());
      std::optional<Program>& slot = s->programs[handle->index];
      slot.emplace();
      slot->generation = handle->generation;
      fill(*in, slot->inputs);
      fill(*outs, slot->outputs);
      return ACCY_STATUS_OK;
    });
    if (st != ACCY_STATUS_OK) {
      s->programs[handle->index].reset();
      (void)s->session.release(*handle);
      return st;
    }
    *out = accy_handle{handle->index, handle->generation};
    return ACCY_STATUS_OK;
  });
}

accy_status accy_input_count(accy_session* s, accy_handle handle, size_t* out) {
  return count(s, handle, out, /*inputs=*/true);
}

accy_status accy_output_count(accy_session* s, accy_handle handle, size_t* out) {
  return count(s, handle, out, /*inputs=*/false);
}

accy_status accy_input_descriptor(accy_session* s, accy_handle handle, size_t i, accy_descriptor* out) {
  return describe(s, handle, i, out, /*inputs=*/true);
}

accy_status accy_output_descriptor(accy_session* s, accy_handle handle, size_t i, accy_descriptor* out) {
  return describe(s, handle, i, out, /*inputs=*/false);
}

accy_status accy_invoke(accy_session* s, accy_handle handle, const void* const* inputs, const size_t* input_sizes,
                        size_t input_count, void* const* outputs, const size_t* output_sizes, size_t output_count) {
  return invoke(s, handle, inputs, input_sizes, input_count, outputs, output_sizes, output_count);
}

accy_status accy_invoke_with_args(accy_session* s, accy_handle handle, const accy_invoke_args* args) {
  if (s == nullptr || args == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  const uint64_t size = acceptedSize(args, ACCY_INVOKE_ARGS_MIN_SIZE, sizeof(accy_invoke_args));
  if (size == 0) return ACCY_STATUS_INVALID_BUFFER;
  const accy_invoke_args a = readSized(args, size);
  return invoke(s, handle, a.inputs, a.input_sizes, a.input_count, a.outputs, a.output_sizes, a.output_count);
}

accy_status accy_session_create_with_options(const accy_session_options* options, accy_session** out) {
  if (options == nullptr || out == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  const uint64_t size = acceptedSize(options, ACCY_SESSION_OPTIONS_MIN_SIZE, sizeof(accy_session_options));
  if (size == 0) return ACCY_STATUS_INVALID_BUFFER;
  const accy_session_options o = readSized(options, size);
  session::SessionOptions so;
  if (o.threads > 4096 || o.max_programs > session::kMaxPrograms ||
      o.max_compile_nodes > static_cast<uint64_t>(tensor::kMaxProgramNodes) ||
      o.max_scratch_bytes > static_cast<uint64_t>(tensor::kMaxValueBytes) || o.check_numerics > 1) {
    return ACCY_STATUS_INVALID_BUFFER;
  }
  so.threads = static_cast<int>(o.threads);
  if (o.max_programs != 0) so.max_programs = static_cast<uint32_t>(o.max_programs);
  if (o.max_compile_nodes != 0) so.max_compile_nodes = static_cast<int64_t>(o.max_compile_nodes);
  if (o.max_scratch_bytes != 0) so.max_scratch_bytes = static_cast<int64_t>(o.max_scratch_bytes);
  so.check_numerics = o.check_numerics != 0;
  return guarded(ACCY_STATUS_OUT_OF_MEMORY, [&] {
    accy_session* s = new (std::nothrow) accy_session(so);
    if (s == nullptr) return ACCY_STATUS_OUT_OF_MEMORY;
    *out = s;
    return ACCY_STATUS_OK;
  });
}

accy_status accy_describe(accy_session* s, accy_handle handle, uint32_t which, size_t i, accy_value_info* out) {
  if (s == nullptr || out == nullptr || (which != ACCY_INPUT && which != ACCY_OUTPUT)) {
    return ACCY_STATUS_INVALID_BUFFER;
  }
  uint64_t size = 0;
  std::memcpy(&size, out, sizeof size);
  if (size < ACCY_VALUE_INFO_MIN_SIZE || size % 8 != 0) return ACCY_STATUS_INVALID_BUFFER;
  accy_descriptor d{};
  const accy_status st = describe(s, handle, i, &d, which == ACCY_INPUT);
  if (st != ACCY_STATUS_OK) return st;
  accy_value_info info{};
  info.struct_size = size;
  info.dtype = d.dtype;
  info.rank = d.rank;
  info.axis_names = d.axis_names;
  info.extents = d.extents;
  info.byte_size = d.byte_size;
  info.alignment = d.alignment;
  // Fields past struct_size are the caller's, not written.
  std::memcpy(reinterpret_cast<unsigned char*>(out) + 8, reinterpret_cast<const unsigned char*>(&info) + 8,
              std::min<uint64_t>(size, sizeof info) - 8);
  return ACCY_STATUS_OK;
}

accy_status accy_release(accy_session* s, accy_handle handle) {
  if (s == nullptr) return ACCY_STATUS_INVALID_BUFFER;
  return guarded(ACCY_STATUS_OUT_OF_MEMORY, [&] {
    const absl::Status st = s->session.release(toHandle(handle));
    if (!st.ok()) return statusOf(st);
    s->programs[handle.index].reset();  // release succeeded, so index < kMaxPrograms
    return ACCY_STATUS_OK;
  });
}

const char* accy_last_cause(const accy_session* s) {
  if (s == nullptr) return "";
  try {
    const std::optional<absl::Status>& cause = s->session.lastCause();
    if (!cause.has_value()) return "";
    s->last_cause = std::string(cause->message());
    return s->last_cause.c_str();
  } catch (...) {
    return "";
  }
}

}  // extern "C"
