/* Accy's C ABI: compile wire-encoded programs and run them on the caller's
 * memory, from C or any language with a C foreign-function interface.
 * Link `//:accy_c` (static) or load `//client:libaccy_c.so` (shared).
 *
 * This header compiles as C11 and as C++. It is a thin layer over the
 * in-process C++ session (runtime/session.h) and uses the same status numbers.
 *
 * Contract
 * --------
 * Status: every function that can fail returns an accy_status. Its numbers
 *   are fixed forever; new kinds may only be added with new numbers. The
 *   values fit in a uint32_t, so a foreign caller may read them as one.
 *
 * NULL arguments: a NULL session pointer, a NULL out-pointer, or a NULL
 *   array or buffer pointer where a nonzero count or size says there is
 *   data, fails with ACCY_STATUS_INVALID_BUFFER and changes nothing. No
 *   function crashes on NULL. These checks come before any other.
 *
 * Out-parameters are written only on ACCY_STATUS_OK; on failure they keep
 *   what the caller put there.
 *
 * Ownership and lifetimes:
 *   - accy_session_create allocates a session; the caller owns it and frees
 *     it with accy_session_destroy, which also releases every program.
 *   - accy_compile copies what it needs: the caller may free `bytes` as soon
 *     as it returns.
 *   - A handle stays valid until accy_release on it (or the session is
 *     destroyed). After that the handle and every copy of it are refused
 *     with ACCY_STATUS_INVALID_HANDLE, even once the slot is reused.
 *   - The pointers inside an accy_descriptor belong to the session and stay
 *     valid until the program is released or the session destroyed.
 *   - Buffers passed to accy_invoke stay the caller's; they are used in
 *     place for the duration of the call only. Inputs are never written.
 *   - The string from accy_last_cause belongs to the session and stays valid
 *     until the next call on that session.
 *
 * Thread-safety: a session is not thread-safe. Use one session per thread,
 *   or serialize every call on a session (including accy_last_cause) with a
 *   lock. Different sessions may be used from different threads at once.
 *   accy_c_api_version may be called from any thread at any time.
 *
 * Exceptions: no C++ exception crosses this interface. Allocation failure
 *   inside any call is reported as ACCY_STATUS_OUT_OF_MEMORY.
 *
 * Versioning: see accy/CHANGELOG_C_ABI.md. Within one major version the
 *   interface only grows (new functions, new status numbers, new dtypes,
 *   new trailing fields of the sized structs below); existing declarations,
 *   numbers and the layout of existing fields never change.
 *
 * Sized structs (since 1.1): accy_session_options, accy_invoke_args and
 *   accy_value_info begin with `struct_size`, which the caller sets to the
 *   size of the struct as its header declares it (the *_STRUCT_SIZE macro,
 *   equal to sizeof: every field is 8 bytes wide, so there is no padding).
 *   A later minor version appends fields; the library then reads and writes
 *   only the first struct_size bytes:
 *   - an older caller's smaller struct is accepted, and every field past its
 *     end takes its default (a zero field means the default too);
 *   - a newer caller's larger input struct (options, arguments) is accepted
 *     when every byte past the fields this library knows is zero (the caller left the newer fields at
 *     their defaults); a nonzero byte there asks for something this library
 *     cannot do, and the call fails with ACCY_STATUS_INVALID_BUFFER;
 *   - a struct_size that does not cover the struct's required fields, or is
 *     not a multiple of 8, fails with ACCY_STATUS_INVALID_BUFFER.
 *   Output structs (accy_value_info) get the fields that lie wholly inside
 *   struct_size written; the caller's bytes past them are not touched.
 */
#ifndef ACCY_ACCY_ACCY_C_H_
#define ACCY_ACCY_ACCY_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ACCY_C_API_VERSION_MAJOR 1
#define ACCY_C_API_VERSION_MINOR 1

/* (ACCY_C_API_VERSION_MAJOR << 16) | ACCY_C_API_VERSION_MINOR of the library
 * actually linked or loaded, which may be newer than this header. A caller
 * built against major M needs a library with the same major M and a minor at
 * least its own. */
uint32_t accy_c_api_version(void);

/* Fixed forever. */
typedef enum accy_status {
  ACCY_STATUS_OK = 0,
  /* The bytes are not a valid wire-encoded program. */
  ACCY_STATUS_INVALID_PROGRAM = 1,
  /* The program's wire major version is unknown to this library. */
  ACCY_STATUS_UNSUPPORTED_VERSION = 2,
  /* The handle was released, or never named a program of this session. */
  ACCY_STATUS_INVALID_HANDLE = 3,
  /* A NULL argument, an index out of range, or buffers that do not match the
   * program's descriptors (count, byte size, alignment, overlap). */
  ACCY_STATUS_INVALID_BUFFER = 4,
  /* Every program slot of the session is in use; release one. */
  ACCY_STATUS_TOO_MANY_PROGRAMS = 5,
  ACCY_STATUS_OUT_OF_MEMORY = 6,
  ACCY_STATUS_COMPILE_FAILED = 7,
  ACCY_STATUS_LAUNCH_FAILED = 8
} accy_status;

/* Element types (the wire format's numbers). Append only. */
#define ACCY_DTYPE_F32 0u
#define ACCY_DTYPE_F64 1u
#define ACCY_DTYPE_I32 2u
#define ACCY_DTYPE_I64 3u
#define ACCY_DTYPE_BOOL 4u /* one byte, 0 or 1 */

/* Opaque. */
typedef struct accy_session accy_session;

/* Names one compiled program of one session: a slot index and the slot's
 * generation. Copy it freely; compare both fields. */
typedef struct accy_handle {
  uint32_t index;
  uint32_t generation;
} accy_handle;

/* Type, shape, exact byte size and required alignment of one input or
 * output. Memory is row-major over the axes in order. For rank 0 (a scalar)
 * axis_names and extents may be NULL. The pointers stay valid until the
 * program is released or the session destroyed. */
typedef struct accy_descriptor {
  uint32_t dtype; /* an ACCY_DTYPE_* number */
  uint32_t rank;  /* number of axes */
  const char* const* axis_names; /* rank NUL-terminated names */
  const int64_t* extents;        /* rank extents */
  uint64_t byte_size;            /* the buffer must have exactly this size */
  uint32_t alignment;            /* the buffer address must be a multiple */
} accy_descriptor;

/* Creates a session with default options (every hardware thread).
 * NULL out: ACCY_STATUS_INVALID_BUFFER. Allocation failure:
 * ACCY_STATUS_OUT_OF_MEMORY (and *out is left unchanged). */
accy_status accy_session_create(accy_session** out);

/* Releases every program and frees the session. NULL is a no-op. */
void accy_session_destroy(accy_session* session);

/* Decodes, compiles and loads `size` bytes of a wire-encoded program and
 * writes its handle to *out. `bytes` may be NULL only when size is 0.
 * Errors: INVALID_BUFFER (NULL arguments), INVALID_PROGRAM,
 * UNSUPPORTED_VERSION, COMPILE_FAILED, OUT_OF_MEMORY, TOO_MANY_PROGRAMS. */
accy_status accy_compile(accy_session* session, const void* bytes, size_t size, accy_handle* out);

/* The number of inputs / outputs of a program.
 * Errors: INVALID_BUFFER (NULL arguments), INVALID_HANDLE. */
accy_status accy_input_count(accy_session* session, accy_handle handle, size_t* out);
accy_status accy_output_count(accy_session* session, accy_handle handle, size_t* out);

/* The descriptor of input / output i (0-based).
 * Errors: INVALID_BUFFER (NULL arguments, or i not below the count),
 * INVALID_HANDLE. */
accy_status accy_input_descriptor(accy_session* session, accy_handle handle, size_t i,
                                  accy_descriptor* out);
accy_status accy_output_descriptor(accy_session* session, accy_handle handle, size_t i,
                                   accy_descriptor* out);

/* Runs the program on the caller's buffers, in descriptor order:
 * inputs[k] points to input_sizes[k] bytes, outputs[k] to output_sizes[k]
 * writable bytes. The counts, sizes and alignments must match the
 * descriptors, and no output may share bytes with an input or another
 * output; otherwise INVALID_BUFFER before anything runs. The arrays may be
 * NULL only when their count is 0; a buffer pointer may be NULL only when
 * its size is 0. Other errors: INVALID_HANDLE, OUT_OF_MEMORY,
 * LAUNCH_FAILED. */
accy_status accy_invoke(accy_session* session, accy_handle handle, const void* const* inputs,
                        const size_t* input_sizes, size_t input_count, void* const* outputs,
                        const size_t* output_sizes, size_t output_count);

/* Frees the program; the handle, its copies and its descriptors' pointers
 * become invalid. Errors: INVALID_BUFFER (NULL session), INVALID_HANDLE. */
accy_status accy_release(accy_session* session, accy_handle handle);

/* --- Sized structs (since 1.1) ------------------------------------------ */

/* Options of a new session. Zero in any field means its default, so
 * `accy_session_options o = {ACCY_SESSION_OPTIONS_STRUCT_SIZE};` is a
 * session with default options. */
typedef struct accy_session_options {
  uint64_t struct_size;
  /* Threads one run may use; 0: every hardware thread. At most 4096. */
  uint64_t threads;
  /* Programs held at once, 1 to 64; 0: 64. */
  uint64_t max_programs;
  /* Programs with more nodes than this fail to compile; 0: 65536. At most
   * 2^20 (the language's limit). */
  uint64_t max_compile_nodes;
  /* Scratch memory one program may need for its temporaries, in bytes;
   * 0: 16 GiB. */
  uint64_t max_scratch_bytes;
  /* Nonzero: after each run, fail with LAUNCH_FAILED when a floating
   * output holds a NaN or an infinity. */
  uint64_t check_numerics;
} accy_session_options;
#define ACCY_SESSION_OPTIONS_STRUCT_SIZE ((uint64_t)sizeof(accy_session_options))
/* The smallest struct_size accepted: struct_size alone (all defaults). */
#define ACCY_SESSION_OPTIONS_MIN_SIZE ((uint64_t)8)

/* Creates a session with `options`. Errors: INVALID_BUFFER (NULL arguments,
 * a struct_size outside the rules above, a field out of its range),
 * OUT_OF_MEMORY. *out is written only on success. */
accy_status accy_session_create_with_options(const accy_session_options* options, accy_session** out);

/* The buffers of one run (as accy_invoke's parameters). */
typedef struct accy_invoke_args {
  uint64_t struct_size;
  const void* const* inputs;
  const size_t* input_sizes;
  uint64_t input_count;
  void* const* outputs;
  const size_t* output_sizes;
  uint64_t output_count;
} accy_invoke_args;
#define ACCY_INVOKE_ARGS_STRUCT_SIZE ((uint64_t)sizeof(accy_invoke_args))
/* Every field of 1.1 is required. */
#define ACCY_INVOKE_ARGS_MIN_SIZE ((uint64_t)56)

/* accy_invoke with its buffers in `args`; the same checks and errors, and
 * INVALID_BUFFER for a NULL `args` or a struct_size outside the rules. */
accy_status accy_invoke_with_args(accy_session* session, accy_handle handle, const accy_invoke_args* args);

/* Which list accy_describe reads. */
#define ACCY_INPUT 0u
#define ACCY_OUTPUT 1u

/* accy_descriptor, sized. The caller sets struct_size; the library writes
 * the other fields that fit. */
typedef struct accy_value_info {
  uint64_t struct_size;
  uint64_t dtype; /* an ACCY_DTYPE_* number */
  uint64_t rank;
  const char* const* axis_names; /* rank NUL-terminated names; NULL for rank 0 */
  const int64_t* extents;        /* rank extents; NULL for rank 0 */
  uint64_t byte_size;
  uint64_t alignment;
} accy_value_info;
#define ACCY_VALUE_INFO_STRUCT_SIZE ((uint64_t)sizeof(accy_value_info))
/* The smallest struct_size accepted: struct_size and dtype. */
#define ACCY_VALUE_INFO_MIN_SIZE ((uint64_t)16)

/* Describes input or output `i` (`which` is ACCY_INPUT or ACCY_OUTPUT).
 * Errors: INVALID_BUFFER (NULL arguments, an unknown `which`, i not below
 * the count, a struct_size outside the rules), INVALID_HANDLE. On failure
 * nothing of *out is written. */
accy_status accy_describe(accy_session* session, accy_handle handle, uint32_t which, size_t i,
                          accy_value_info* out);

/* For diagnostics: the message of the inner error behind the session's most
 * recent failure that went through its error mapping (decode, compile, load
 * and run failures). Failures the session returns directly (a full table, a
 * stale handle, a buffer count mismatch, NULL arguments) leave it unchanged.
 * "" before any such failure, and for a NULL session. Never NULL; valid until
 * the next call on that session. */
const char* accy_last_cause(const accy_session* session);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ACCY_ACCY_ACCY_C_H_ */
