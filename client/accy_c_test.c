/* The C ABI (accy/accy_c.h) from a C11 program: the tone example compiled
 * from checked-in wire bytes, descriptors, runs, and each failure a C caller
 * can provoke cheaply, asserted by number. Prints every check; exits 1 if
 * any failed. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accy/accy_c.h"

enum { kPoints = 16, kGuesses = 8 };

static int checks = 0;
static int failures = 0;

static void check(int ok, const char* what, int line) {
  ++checks;
  if (!ok) ++failures;
  printf("%s line %d: %s\n", ok ? "ok  " : "FAIL", line, what);
}

#define CHECK(cond) check((cond) ? 1 : 0, #cond, __LINE__)
#define CHECK_STATUS(expected, call) check((uint32_t)(call) == (uint32_t)(expected), #call " == " #expected, __LINE__)

/* Reads a whole file from the test's runfiles; NULL on failure. */
static unsigned char* readRunfile(const char* relative, size_t* size) {
  const char* srcdir = getenv("TEST_SRCDIR");
  char path[4096];
  if (srcdir != NULL) {
    snprintf(path, sizeof path, "%s/accy/%s", srcdir, relative);
  } else {
    snprintf(path, sizeof path, "%s", relative);
  }
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    return NULL;
  }
  unsigned char* data = NULL;
  size_t n = 0;
  if (fseek(f, 0, SEEK_END) == 0) {
    const long end = ftell(f);
    if (end > 0 && fseek(f, 0, SEEK_SET) == 0) {
      data = malloc((size_t)end);
      if (data != NULL) n = fread(data, 1, (size_t)end, f);
      if (n != (size_t)end) {
        free(data);
        data = NULL;
      }
    }
  }
  fclose(f);
  *size = n;
  return data;
}

struct Samples {
  float time[kPoints];
  float sample[kPoints];
};

static struct Samples samples(void) {
  struct Samples s;
  for (int i = 0; i < kPoints; ++i) {
    s.time[i] = 0.25f * (float)i;
    s.sample[i] = sinf(3.0f * s.time[i]);
  }
  return s;
}

/* The mismatch for one guess, in double precision. */
static double expectedMismatch(double frequency) {
  double sum = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double t = 0.25 * i;
    const double gap = sin(frequency * t) - sin(3.0 * t);
    sum += gap * gap;
  }
  return sum;
}

static void testVersion(void) {
  CHECK(ACCY_C_API_VERSION_MAJOR == 1);
  CHECK(ACCY_C_API_VERSION_MINOR == 1);
  CHECK(accy_c_api_version() == ((uint32_t)ACCY_C_API_VERSION_MAJOR << 16 | ACCY_C_API_VERSION_MINOR));
  CHECK(accy_c_api_version() == 0x10001u);
  /* Every field of the sized structs is 8 bytes: no padding, sizeof is the
   * struct size, and the offsets are the ones 1.1 fixes. */
  CHECK(ACCY_SESSION_OPTIONS_STRUCT_SIZE == 48 && offsetof(accy_session_options, check_numerics) == 40);
  CHECK(ACCY_INVOKE_ARGS_STRUCT_SIZE == 56 && offsetof(accy_invoke_args, output_count) == 48);
  CHECK(ACCY_VALUE_INFO_STRUCT_SIZE == 56 && offsetof(accy_value_info, alignment) == 48);
  CHECK(ACCY_STATUS_OK == 0 && ACCY_STATUS_INVALID_PROGRAM == 1 && ACCY_STATUS_UNSUPPORTED_VERSION == 2 &&
        ACCY_STATUS_INVALID_HANDLE == 3 && ACCY_STATUS_INVALID_BUFFER == 4 && ACCY_STATUS_TOO_MANY_PROGRAMS == 5 &&
        ACCY_STATUS_OUT_OF_MEMORY == 6 && ACCY_STATUS_COMPILE_FAILED == 7 && ACCY_STATUS_LAUNCH_FAILED == 8);
  CHECK(ACCY_DTYPE_F32 == 0 && ACCY_DTYPE_F64 == 1 && ACCY_DTYPE_I32 == 2 && ACCY_DTYPE_I64 == 3 &&
        ACCY_DTYPE_BOOL == 4);
  CHECK(sizeof(accy_handle) == 8);
}

static void testNullArguments(const unsigned char* wire, size_t wire_size) {
  accy_session* s = NULL;
  accy_handle h = {0, 0};
  size_t n = 0;
  accy_descriptor d;
  float x[1] = {0};
  const void* inputs[1] = {x};
  const size_t sizes[1] = {sizeof x};
  void* outputs[1] = {x};

  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create(NULL));
  accy_session_destroy(NULL);
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_compile(NULL, wire, wire_size, &h));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_input_count(NULL, h, &n));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_output_count(NULL, h, &n));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_input_descriptor(NULL, h, 0, &d));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_output_descriptor(NULL, h, 0, &d));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(NULL, h, inputs, sizes, 1, outputs, sizes, 1));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_release(NULL, h));
  CHECK(accy_last_cause(NULL) != NULL && accy_last_cause(NULL)[0] == '\0');

  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create(&s));
  if (s == NULL) return;
  CHECK(strcmp(accy_last_cause(s), "") == 0);
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_compile(s, wire, wire_size, NULL));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_compile(s, NULL, wire_size, &h));
  CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_input_count(s, h, NULL));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_output_count(s, h, NULL));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_input_descriptor(s, h, 0, NULL));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_output_descriptor(s, h, 0, NULL));
  /* NULL arrays with nonzero counts, a NULL buffer with a nonzero size. */
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, NULL, sizes, 3, outputs, sizes, 1));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, NULL, 3, outputs, sizes, 1));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, sizes, 1, NULL, sizes, 1));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, sizes, 1, outputs, NULL, 1));
  {
    const void* null_input[1] = {NULL};
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, null_input, sizes, 1, outputs, sizes, 1));
  }
  /* Empty arrays are fine as NULL; the counts are then wrong for this
   * program, which the session reports. */
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, NULL, NULL, 0, NULL, NULL, 0));
  /* None of these went through the session's error mapping. */
  CHECK(strcmp(accy_last_cause(s), "") == 0);
  CHECK_STATUS(ACCY_STATUS_OK, accy_release(s, h));
  accy_session_destroy(s);
}

static void testCompileDescribeInvoke(const unsigned char* wire, size_t wire_size) {
  accy_session* s = NULL;
  accy_handle h = {0, 0};
  size_t n = 0;
  accy_descriptor d;
  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create(&s));
  if (s == NULL) return;
  CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));

  CHECK_STATUS(ACCY_STATUS_OK, accy_input_count(s, h, &n));
  CHECK(n == 3);
  CHECK_STATUS(ACCY_STATUS_OK, accy_output_count(s, h, &n));
  CHECK(n == 1);

  CHECK_STATUS(ACCY_STATUS_OK, accy_input_descriptor(s, h, 0, &d));
  CHECK(d.dtype == ACCY_DTYPE_F32 && d.rank == 0 && d.byte_size == 4 && d.alignment == 4);
  for (size_t i = 1; i <= 2; ++i) {
    memset(&d, 0, sizeof d);
    CHECK_STATUS(ACCY_STATUS_OK, accy_input_descriptor(s, h, i, &d));
    CHECK(d.dtype == ACCY_DTYPE_F32 && d.rank == 1 && d.byte_size == 64 && d.alignment == 4);
    CHECK(d.axis_names != NULL && d.extents != NULL);
    if (d.axis_names != NULL && d.extents != NULL) {
      CHECK(strcmp(d.axis_names[0], "point") == 0);
      CHECK(d.extents[0] == kPoints);
    }
  }
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_input_descriptor(s, h, 3, &d));
  CHECK_STATUS(ACCY_STATUS_OK, accy_output_descriptor(s, h, 0, &d));
  CHECK(d.dtype == ACCY_DTYPE_F32 && d.rank == 0 && d.byte_size == 4 && d.alignment == 4);
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_output_descriptor(s, h, 1, &d));

  /* The descriptor pointers stay valid while other programs come and go. */
  accy_descriptor kept;
  CHECK_STATUS(ACCY_STATUS_OK, accy_input_descriptor(s, h, 1, &kept));
  {
    accy_handle other = {0, 0};
    CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &other));
    CHECK(other.index != h.index);
    CHECK_STATUS(ACCY_STATUS_OK, accy_release(s, other));
  }
  CHECK(kept.axis_names != NULL && strcmp(kept.axis_names[0], "point") == 0 && kept.extents[0] == kPoints);

  struct Samples data = samples();
  const struct Samples before = data;
  float frequency[1] = {2.5f};
  float value[1] = {-1.0f};
  const void* inputs[3] = {frequency, data.time, data.sample};
  const size_t input_sizes[3] = {sizeof frequency, sizeof data.time, sizeof data.sample};
  void* outputs[1] = {value};
  const size_t output_sizes[1] = {sizeof value};
  CHECK_STATUS(ACCY_STATUS_OK, accy_invoke(s, h, inputs, input_sizes, 3, outputs, output_sizes, 1));
  const double expected = expectedMismatch(2.5);
  printf("     mismatch(2.5) = %.6f (double loops: %.6f)\n", value[0], expected);
  CHECK(fabs(value[0] - 8.656) < 1e-3);
  CHECK(fabs(value[0] - expected) < 1e-3);
  CHECK(memcmp(&before, &data, sizeof data) == 0); /* inputs unchanged */
  CHECK(strcmp(accy_last_cause(s), "") == 0);

  frequency[0] = 3.0f;
  CHECK_STATUS(ACCY_STATUS_OK, accy_invoke(s, h, inputs, input_sizes, 3, outputs, output_sizes, 1));
  CHECK(fabs(value[0]) < 1e-3);

  /* A wrong count is returned directly and leaves last_cause alone. */
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, input_sizes, 2, outputs, output_sizes, 1));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, input_sizes, 3, outputs, output_sizes, 0));
  CHECK(strcmp(accy_last_cause(s), "") == 0);
  /* A wrong size goes through the mapping and leaves a cause. */
  {
    const size_t short_sizes[3] = {sizeof frequency, sizeof data.time - sizeof(float), sizeof data.sample};
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, short_sizes, 3, outputs, output_sizes, 1));
    printf("     last cause: %s\n", accy_last_cause(s));
    CHECK(strlen(accy_last_cause(s)) > 0);
  }
  /* An output sharing bytes with an input. */
  {
    void* aliased[1] = {frequency};
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke(s, h, inputs, input_sizes, 3, aliased, output_sizes, 1));
  }

  /* Released: the handle and every copy are refused, also once the slot is
   * reused. */
  const accy_handle copy = h;
  CHECK_STATUS(ACCY_STATUS_OK, accy_release(s, h));
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_release(s, copy));
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_input_count(s, copy, &n));
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_output_count(s, copy, &n));
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_input_descriptor(s, copy, 0, &d));
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_output_descriptor(s, copy, 0, &d));
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE,
               accy_invoke(s, copy, inputs, input_sizes, 3, outputs, output_sizes, 1));
  accy_handle again = {0, 0};
  CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &again));
  CHECK(again.index == copy.index && again.generation != copy.generation);
  CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_input_count(s, copy, &n));
  CHECK_STATUS(ACCY_STATUS_OK, accy_input_count(s, again, &n));
  {
    const accy_handle unknown = {999, 0};
    CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_release(s, unknown));
    CHECK_STATUS(ACCY_STATUS_INVALID_HANDLE, accy_input_descriptor(s, unknown, 0, &d));
  }
  accy_session_destroy(s); /* releases `again` */
}

static void testGuessAxis(const unsigned char* wire, size_t wire_size) {
  accy_session* s = NULL;
  accy_handle h = {0, 0};
  accy_descriptor d;
  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create(&s));
  if (s == NULL) return;
  CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));
  CHECK_STATUS(ACCY_STATUS_OK, accy_input_descriptor(s, h, 0, &d));
  CHECK(d.rank == 1 && d.byte_size == 4 * kGuesses && d.axis_names != NULL &&
        strcmp(d.axis_names[0], "guess") == 0 && d.extents[0] == kGuesses);
  CHECK_STATUS(ACCY_STATUS_OK, accy_output_descriptor(s, h, 0, &d));
  CHECK(d.rank == 1 && d.byte_size == 4 * kGuesses && d.axis_names != NULL &&
        strcmp(d.axis_names[0], "guess") == 0 && d.extents[0] == kGuesses);

  struct Samples data = samples();
  float guesses[kGuesses];
  float values[kGuesses];
  for (int g = 0; g < kGuesses; ++g) guesses[g] = 1.0f + 0.5f * (float)g; /* 1 .. 4.5 */
  const void* inputs[3] = {guesses, data.time, data.sample};
  const size_t input_sizes[3] = {sizeof guesses, sizeof data.time, sizeof data.sample};
  void* outputs[1] = {values};
  const size_t output_sizes[1] = {sizeof values};
  CHECK_STATUS(ACCY_STATUS_OK, accy_invoke(s, h, inputs, input_sizes, 3, outputs, output_sizes, 1));
  int close = 1;
  for (int g = 0; g < kGuesses; ++g) {
    const double expected = expectedMismatch(guesses[g]);
    printf("     mismatch(%.1f) = %.6f (double loops: %.6f)\n", guesses[g], values[g], expected);
    if (fabs(values[g] - expected) > 1e-3 * (1.0 + fabs(expected))) close = 0;
  }
  CHECK(close);
  CHECK(fabs(values[3] - 8.656) < 1e-3); /* guess 2.5 */
  CHECK(fabs(values[4]) < 1e-3);         /* guess 3 */
  accy_session_destroy(s);
}

static void testBadPrograms(const unsigned char* wire, size_t wire_size) {
  accy_session* s = NULL;
  accy_handle h = {77, 77};
  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create(&s));
  if (s == NULL) return;
  static const char garbage[] = "ACCY\x01\x00\x00\x00garbage!!";
  CHECK_STATUS(ACCY_STATUS_INVALID_PROGRAM, accy_compile(s, garbage, sizeof garbage - 1, &h));
  CHECK(h.index == 77 && h.generation == 77); /* untouched on failure */
  printf("     last cause: %s\n", accy_last_cause(s));
  CHECK(strlen(accy_last_cause(s)) > 0);
  CHECK_STATUS(ACCY_STATUS_INVALID_PROGRAM, accy_compile(s, NULL, 0, &h));
  CHECK_STATUS(ACCY_STATUS_INVALID_PROGRAM, accy_compile(s, "not a program", 13, &h));

  unsigned char* future = malloc(wire_size);
  if (future != NULL) {
    memcpy(future, wire, wire_size);
    future[4] = 9; /* major version 9 */
    CHECK_STATUS(ACCY_STATUS_UNSUPPORTED_VERSION, accy_compile(s, future, wire_size, &h));
    printf("     last cause: %s\n", accy_last_cause(s));
    CHECK(strstr(accy_last_cause(s), "9.0") != NULL);
    free(future);
  }

  /* The table holds 64 programs. */
  int all = 1;
  for (int i = 0; i < 64; ++i) {
    if (accy_compile(s, wire, wire_size, &h) != ACCY_STATUS_OK) all = 0;
  }
  CHECK(all);
  CHECK_STATUS(ACCY_STATUS_TOO_MANY_PROGRAMS, accy_compile(s, wire, wire_size, &h));
  CHECK_STATUS(ACCY_STATUS_OK, accy_release(s, h)); /* the 64th */
  CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));
  accy_session_destroy(s);
}

/* A caller built against an older header: its options struct ended after
 * max_programs. In memory it is followed by bytes the library must not
 * read (here 0xff, which as a newer field would mean "check numerics"). */
struct OldOptions {
  uint64_t struct_size;
  uint64_t threads;
  uint64_t max_programs;
};
struct OldOptionsInMemory {
  struct OldOptions options;
  unsigned char after[24];
};

/* An older caller's value info: struct_size, dtype and rank only. */
struct OldValueInfo {
  uint64_t struct_size;
  uint64_t dtype;
  uint64_t rank;
};
struct OldValueInfoInMemory {
  struct OldValueInfo info;
  unsigned char after[32];
};

/* A newer caller's options: one more field this library does not know. */
struct NewerOptions {
  accy_session_options options;
  uint64_t a_later_field;
};

static int allBytes(const unsigned char* p, size_t n, unsigned char value) {
  for (size_t k = 0; k < n; ++k) {
    if (p[k] != value) return 0;
  }
  return 1;
}

static void testSizedStructs(const unsigned char* wire, size_t wire_size) {
  accy_session* s = NULL;
  accy_handle h = {0, 0};

  /* Defaults from a zeroed struct; NULLs and bad sizes refused. */
  accy_session_options options;
  memset(&options, 0, sizeof options);
  options.struct_size = ACCY_SESSION_OPTIONS_STRUCT_SIZE;
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(NULL, &s));
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(&options, NULL));
  options.struct_size = 4;
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(&options, &s));
  options.struct_size = 20; /* not a multiple of 8 */
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(&options, &s));
  options.struct_size = ACCY_SESSION_OPTIONS_STRUCT_SIZE;
  options.max_programs = 65; /* out of range */
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(&options, &s));
  options.max_programs = 0;
  options.check_numerics = 7;
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(&options, &s));
  options.check_numerics = 0;
  CHECK(s == NULL); /* untouched by every failure */

  /* The options take effect: two programs at most. */
  options.max_programs = 2;
  options.threads = 1;
  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create_with_options(&options, &s));
  if (s != NULL) {
    CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));
    CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));
    CHECK_STATUS(ACCY_STATUS_TOO_MANY_PROGRAMS, accy_compile(s, wire, wire_size, &h));
    accy_session_destroy(s);
    s = NULL;
  }

  /* An older caller's smaller struct: accepted, the bytes after it never
   * read (else check_numerics would be on and the NaN run below fail). */
  struct OldOptionsInMemory old;
  memset(&old, 0xff, sizeof old);
  old.options.struct_size = sizeof old.options;
  old.options.threads = 1;
  old.options.max_programs = 3;
  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create_with_options((const accy_session_options*)(const void*)&old, &s));
  CHECK(allBytes(old.after, sizeof old.after, 0xff));
  if (s != NULL) {
    CHECK_STATUS(ACCY_STATUS_OK, accy_compile(s, wire, wire_size, &h));
    struct Samples data = samples();
    data.sample[0] = NAN; /* a NaN input gives a NaN mismatch */
    float frequency[1] = {2.5f};
    float value[1] = {0};
    const void* inputs[3] = {frequency, data.time, data.sample};
    const size_t input_sizes[3] = {sizeof frequency, sizeof data.time, sizeof data.sample};
    void* outputs[1] = {value};
    const size_t output_sizes[1] = {sizeof value};

    /* Invoke through the sized arguments, and with an older caller's
     * too-small struct (refused: every field of 1.1 is required). */
    accy_invoke_args args;
    memset(&args, 0, sizeof args);
    args.struct_size = ACCY_INVOKE_ARGS_STRUCT_SIZE;
    args.inputs = inputs;
    args.input_sizes = input_sizes;
    args.input_count = 3;
    args.outputs = outputs;
    args.output_sizes = output_sizes;
    args.output_count = 1;
    CHECK_STATUS(ACCY_STATUS_OK, accy_invoke_with_args(s, h, &args));
    CHECK(isnan(value[0])); /* check_numerics stayed at its default, off */
    data.sample[0] = sinf(0.0f);
    value[0] = -1.0f;
    CHECK_STATUS(ACCY_STATUS_OK, accy_invoke_with_args(s, h, &args));
    CHECK(fabs(value[0] - expectedMismatch(2.5)) < 1e-3);
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke_with_args(s, h, NULL));
    args.struct_size = 48;
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke_with_args(s, h, &args));
    args.struct_size = ACCY_INVOKE_ARGS_STRUCT_SIZE;
    args.input_count = 2; /* the same checks as accy_invoke */
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_invoke_with_args(s, h, &args));

    /* Value info: full size, an older caller's smaller one (the bytes after
     * it untouched), a bad `which`, a too-small size. */
    accy_value_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = ACCY_VALUE_INFO_STRUCT_SIZE;
    CHECK_STATUS(ACCY_STATUS_OK, accy_describe(s, h, ACCY_INPUT, 1, &info));
    CHECK(info.struct_size == ACCY_VALUE_INFO_STRUCT_SIZE && info.dtype == ACCY_DTYPE_F32 && info.rank == 1 &&
          info.byte_size == 64 && info.alignment == 4 && info.extents != NULL && info.extents[0] == kPoints &&
          info.axis_names != NULL && strcmp(info.axis_names[0], "point") == 0);
    CHECK_STATUS(ACCY_STATUS_OK, accy_describe(s, h, ACCY_OUTPUT, 0, &info));
    CHECK(info.rank == 0 && info.byte_size == 4 && info.axis_names == NULL && info.extents == NULL);
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_describe(s, h, ACCY_OUTPUT, 1, &info));
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_describe(s, h, 2u, 0, &info));
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_describe(s, h, ACCY_INPUT, 0, NULL));
    struct OldValueInfoInMemory old_info;
    memset(&old_info, 0xee, sizeof old_info);
    old_info.info.struct_size = sizeof old_info.info;
    CHECK_STATUS(ACCY_STATUS_OK, accy_describe(s, h, ACCY_INPUT, 2, (accy_value_info*)(void*)&old_info));
    CHECK(old_info.info.struct_size == sizeof old_info.info && old_info.info.dtype == ACCY_DTYPE_F32 &&
          old_info.info.rank == 1);
    CHECK(allBytes(old_info.after, sizeof old_info.after, 0xee));
    old_info.info.struct_size = 8;
    CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_describe(s, h, ACCY_INPUT, 2, (accy_value_info*)(void*)&old_info));
    accy_session_destroy(s);
    s = NULL;
  }

  /* A newer caller's larger struct: accepted when its newer fields are
   * zero (their defaults), refused when it asks for one. */
  struct NewerOptions newer;
  memset(&newer, 0, sizeof newer);
  newer.options.struct_size = sizeof newer;
  CHECK_STATUS(ACCY_STATUS_OK, accy_session_create_with_options(&newer.options, &s));
  accy_session_destroy(s);
  s = NULL;
  newer.a_later_field = 1;
  CHECK_STATUS(ACCY_STATUS_INVALID_BUFFER, accy_session_create_with_options(&newer.options, &s));
  CHECK(s == NULL);
}

int main(void) {
  size_t one_size = 0;
  size_t eight_size = 0;
  unsigned char* one = readRunfile("examples/tone/mismatch.wire", &one_size);
  unsigned char* eight = readRunfile("examples/tone/mismatch8.wire", &eight_size);
  if (one == NULL || eight == NULL) {
    fprintf(stderr, "FAIL: test data missing\n");
    return 1;
  }
  testVersion();
  testNullArguments(one, one_size);
  testCompileDescribeInvoke(one, one_size);
  testGuessAxis(eight, eight_size);
  testBadPrograms(one, one_size);
  testSizedStructs(one, one_size);
  free(one);
  free(eight);
  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
