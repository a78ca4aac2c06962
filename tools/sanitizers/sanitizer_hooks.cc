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
// that lock's report is suppressed too. Debian's gRPC, protobuf, Abseil and
// OpenSSL libraries are not instrumented either: memory gRPC allocates on one of
// its threads and hands to another (a request message, say) through its own
// uninstrumented queues reads as a race; the interceptors they call are
// suppressed the same way, while every access in Accy's code is still
// checked.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libvulkan_lvp.so\n"
         "called_from_lib:libLLVM-15.so.1\n"
         "called_from_lib:libLLVM-15.so\n"
         "mutex:__register_frame_info_bases\n"
         "called_from_lib:libgpr.so.29\n"
         "called_from_lib:libgrpc.so.29\n"
         "called_from_lib:libgrpc++.so.1.51\n"
         "called_from_lib:libprotobuf.so.32\n"
         "called_from_lib:libupb.so.29\n"
         "called_from_lib:libabsl_graphcycles_internal.so.20220623\n"
         "called_from_lib:libabsl_status.so.20220623\n"
         "called_from_lib:libabsl_strings.so.20220623\n"
         "called_from_lib:libabsl_cord.so.20220623\n"
         "called_from_lib:libabsl_cord_internal.so.20220623\n"
         "called_from_lib:libcrypto.so.3\n"
         "called_from_lib:libssl.so.3\n"
         // gRPC core's own threads (its DNS resolver) reading what the
         // caller's thread built through gRPC's uninstrumented queues; the
         // service handlers run under libgrpc++ frames, not these.
         "race:libgrpc.so.29\n"
         // gRPC's callback API, compiled from its headers into the binary
         // that uses it: gRPC's default health service in accyd and the
         // health client of the shipped-configuration test. Its call
         // objects are filled on one thread and finished on a gRPC thread
         // that the uninstrumented completion queue hands them to. Accy's
         // own services use the synchronous API, which this does not cover.
         "race:grpc::internal::CallbackWithSuccessTag\n"
         "race:grpc::internal::CallbackWithStatusTag\n"
         "race:grpc::internal::CallbackUnaryCallImpl\n"
         "race:grpc::internal::CallbackUnaryHandler\n"
         // The synchronous client's status receipt, compiled from gRPC's
         // headers into each client: it reads the status details into a
         // string whose memory libgrpc freed on another thread (a free TSan
         // does not see, libgrpc's calls being ignored above), so the reuse
         // of that memory reads as a race with its previous owner.
         "race:grpc::internal::CallOpClientRecvStatus::FinishOp\n";
}

// LeakSanitizer's default suppressions (`--config=asan`): c-ares, gRPC's
// DNS resolver, keeps a few bytes per resolver it never frees (a
// `dns:` target in the daemon tests). Nothing of Accy's is suppressed.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcares.so\n"; }
