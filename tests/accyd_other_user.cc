// Another user of accyd's Unix socket, for tests/accyd_e2e_test.cc:
//   accyd_other_user SOCKET UID SESSION_ID
// becomes user UID (keeping group 0, so a socket of mode 0660 owned by root
// lets it in), presents SESSION_ID (someone else's session) to Compile and
// to KeepAlive, then opens a session of its own and compiles into it.
// Prints one line per call ("stolen compile: NOT_FOUND ...") and exits 0
// when the stolen id was refused as unknown and its own session works.
//   accyd_other_user SOCKET UID --tone N
// becomes user UID the same way and makes N rounds of the tone call as a
// new client would (open a session, compile, invoke, close), for
// tests/accyd_hostile_test.cc (fair shares between identities); prints
// "tone: median M us a round ..., invoke median I us; value V" and exits 0
// when every call succeeded.
#include <grpcpp/grpcpp.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "accy/v1/accyd.grpc.pb.h"
#include "compiler/tensor/builder.h"
#include "compiler/wire/wire.h"
#include "examples/tone/tone.h"

namespace {

// One round of the tone call as a new client makes it: a session opened,
// the program compiled (a cache hit after the first round), run once, the
// session closed. Returns the round's time and the invoke's in `invoke_us`,
// or a negative time on a failure.
double toneRound(accy::v1::Accyd::Stub& stub, const std::string& program, double* invoke_us, float* value) {
  const auto round_start = std::chrono::steady_clock::now();
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(20); };
  std::string session;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    accy::v1::OpenSessionRequest req;
    accy::v1::OpenSessionReply reply;
    if (!stub.OpenSession(&ctx, req, &reply).ok()) return -1;
    session = reply.session_id();
  }
  accy::v1::CompileReply compiled;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    accy::v1::CompileRequest req;
    req.set_session_id(session);
    req.set_program(program);
    const grpc::Status st = stub.Compile(&ctx, req, &compiled);
    if (!st.ok()) {
      std::printf("tone compile: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
      return -1;
    }
  }
  const float f = 2.5f;
  const tone::Samples data = tone::samples();
  accy::v1::InvokeRequest req;
  req.set_session_id(session);
  *req.mutable_handle() = compiled.handle();
  req.add_inputs()->set_inline_bytes(std::string(reinterpret_cast<const char*>(&f), sizeof f));
  req.add_inputs()->set_inline_bytes(std::string(reinterpret_cast<const char*>(data.time.data()), sizeof data.time));
  req.add_inputs()->set_inline_bytes(std::string(reinterpret_cast<const char*>(data.sample.data()), sizeof data.sample));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    accy::v1::InvokeReply reply;
    const auto start = std::chrono::steady_clock::now();
    const grpc::Status st = stub.Invoke(&ctx, req, &reply);
    *invoke_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (!st.ok() || reply.inline_outputs_size() != 1) {
      std::printf("tone invoke: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
      return -1;
    }
    std::memcpy(value, reply.inline_outputs(0).data(), sizeof *value);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline());
    accy::v1::CloseSessionRequest close;
    close.set_session_id(session);
    accy::v1::CloseSessionReply closed;
    stub.CloseSession(&ctx, close, &closed);
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - round_start).count();
}

int toneCalls(accy::v1::Accyd::Stub& stub, int calls) {
  const std::string program = accy::wire::encode(*accy::tensor::define("mismatch", tone::specs(), tone::mismatch));
  std::vector<double> rounds, invokes;
  float value = 0;
  for (int k = 0; k < calls; ++k) {
    double invoke_us = 0;
    const double round_us = toneRound(stub, program, &invoke_us, &value);
    if (round_us < 0) return 1;
    rounds.push_back(round_us);
    invokes.push_back(invoke_us);
  }
  std::sort(rounds.begin(), rounds.end());
  std::sort(invokes.begin(), invokes.end());
  std::printf("tone: median %.0f us a round (open, compile, invoke, close), max %.0f us; invoke median %.0f us; value "
              "%.4f\n",
              rounds[rounds.size() / 2], rounds.back(), invokes[invokes.size() / 2], value);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::string(argv[3]) == "--tone")) {
    std::fprintf(stderr, "usage: accyd_other_user SOCKET UID SESSION_ID | accyd_other_user SOCKET UID --tone N\n");
    return 2;
  }
  const uid_t uid = static_cast<uid_t>(std::strtoul(argv[2], nullptr, 10));
  if (setgroups(0, nullptr) != 0 || setgid(0) != 0 || setuid(uid) != 0 || getuid() != uid) {
    std::perror("cannot become the other user");
    return 2;
  }
  auto stub = accy::v1::Accyd::NewStub(
      grpc::CreateChannel(std::string("unix:") + argv[1], grpc::InsecureChannelCredentials()));
  if (argc == 5) return toneCalls(*stub, std::atoi(argv[4]));
  const accy::tensor::Spec specs[] = {accy::tensor::spec(accy::tensor::DType::f32, {{"i", 8}})};
  const std::string program = accy::wire::encode(*accy::tensor::define(
      "double", specs, [](accy::tensor::Builder&, std::span<const accy::tensor::Value> a) { return a[0] * 2.0; }));
  bool ok = true;
  {
    grpc::ClientContext ctx;
    accy::v1::CompileRequest req;
    req.set_session_id(argv[3]);
    req.set_program(program);
    accy::v1::CompileReply reply;
    const grpc::Status st = stub->Compile(&ctx, req, &reply);
    std::printf("stolen compile: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
    ok = ok && st.error_code() == grpc::StatusCode::NOT_FOUND;
  }
  {
    grpc::ClientContext ctx;
    accy::v1::KeepAliveRequest req;
    req.set_session_id(argv[3]);
    accy::v1::KeepAliveReply reply;
    const grpc::Status st = stub->KeepAlive(&ctx, req, &reply);
    std::printf("stolen keepalive: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
    ok = ok && st.error_code() == grpc::StatusCode::NOT_FOUND;
  }
  std::string own;
  {
    grpc::ClientContext ctx;
    accy::v1::OpenSessionRequest req;
    accy::v1::OpenSessionReply reply;
    const grpc::Status st = stub->OpenSession(&ctx, req, &reply);
    std::printf("own session: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
    ok = ok && st.ok();
    own = reply.session_id();
  }
  {
    grpc::ClientContext ctx;
    accy::v1::CompileRequest req;
    req.set_session_id(own);
    req.set_program(program);
    accy::v1::CompileReply reply;
    const grpc::Status st = stub->Compile(&ctx, req, &reply);
    std::printf("own compile: %d %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
    ok = ok && st.ok();
  }
  return ok ? 0 : 1;
}
