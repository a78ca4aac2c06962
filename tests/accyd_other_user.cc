// Another user of accyd's Unix socket, for tests/accyd_e2e_test.cc:
//   accyd_other_user SOCKET UID SESSION_ID
// becomes user UID (keeping group 0, so a socket of mode 0660 owned by root
// lets it in), presents SESSION_ID (someone else's session) to Compile and
// to KeepAlive, then opens a session of its own and compiles into it.
// Prints one line per call ("stolen compile: NOT_FOUND ...") and exits 0
// when the stolen id was refused as unknown and its own session works.
#include <grpcpp/grpcpp.h>
#include <grp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "accy/v1/accyd.grpc.pb.h"
#include "compiler/tensor/builder.h"
#include "compiler/wire/wire.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: accyd_other_user SOCKET UID SESSION_ID\n");
    return 2;
  }
  const uid_t uid = static_cast<uid_t>(std::strtoul(argv[2], nullptr, 10));
  if (setgroups(0, nullptr) != 0 || setgid(0) != 0 || setuid(uid) != 0 || getuid() != uid) {
    std::perror("cannot become the other user");
    return 2;
  }
  auto stub = accy::v1::Accyd::NewStub(
      grpc::CreateChannel(std::string("unix:") + argv[1], grpc::InsecureChannelCredentials()));
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
