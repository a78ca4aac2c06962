// Linked into libaccy_c.so only (never into an executable).
//
// Debian ships asmjit only as a static library compiled as position-
// independent *executable* code, not as shared-library code: its
// DebugUtils::debugOutput and assertionFailed read libc's `stderr` with a
// PC-relative load, which a shared object cannot contain against a symbol
// of another shared object (the linker refuses: "recompile with -fPIC").
//
// So the shared library carries its own `stderr`, hidden (and local by the
// version script), which that load resolves to inside the library, and which
// holds the process's stderr stream, looked up when the library is loaded.
// Everything else in the library that names `stderr` reads the same stream.
#include <dlfcn.h>

extern "C" {
// Declared without <cstdio>, whose own declaration of `stderr` it replaces
// within this library.
__attribute__((visibility("hidden"))) void* accy_c_stderr __asm__("stderr") = nullptr;
}

namespace {

// Runs before the library's other constructors. RTLD_DEFAULT finds the
// process's `stderr` (libc's, or the executable's copy of it); the hidden
// one above is not in the dynamic symbol table.
__attribute__((constructor(101))) void bindStderr() {
  if (void* const* global = static_cast<void* const*>(dlsym(RTLD_DEFAULT, "stderr")); global != nullptr) {
    accy_c_stderr = *global;
  }
}

}  // namespace
