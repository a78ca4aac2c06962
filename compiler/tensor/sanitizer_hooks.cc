// Sanitizers' default suppressions, read by the sanitizer runtimes of the
// `--config=tsan` and `--config=asan` builds (and unused otherwise).
//
// ThreadSanitizer: Mesa's lavapipe and its
// LLVM are not instrumented: TSan does not see the synchronization inside
// them (their own futexes and thread queues), so memory they allocate on
// one thread and free on a driver thread reads as a race. Only allocations
// and frees called from those libraries are suppressed; a race in Accy's
// own code still reports. Lavapipe's LLVM also registers the unwind frames
// of its JIT code with libgcc, after libgcc's own lock is gone at exit:
// that lock's report is suppressed too.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libvulkan_lvp.so\n"
         "called_from_lib:libLLVM-15.so.1\n"
         "called_from_lib:libLLVM-15.so\n"
         "mutex:__register_frame_info_bases\n";
}

// LeakSanitizer's default suppressions (`--config=asan`): c-ares, gRPC's
// DNS resolver, keeps a few bytes per resolver it never frees (a
// `dns:` target in the daemon tests). Nothing of Accy's is suppressed.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcares.so\n"; }
