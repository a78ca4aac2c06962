// End to end over a real accyd process: the original's three tone tests
// through RemoteSession, every failure status through the daemon,
// isolation, lease expiry, shared memory, reflection, many concurrent
// clients, and a clean SIGTERM drain. Over 900 lines: every case starts
// and stops the same real daemon (tests/accyd_daemon.h) and shares its
// client helpers; one binary keeps make test to one build of it.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <fcntl.h>
#include <future>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "accy/accy.h"
#include "accy/version.h"
#include "accy/v1/accyd.grpc.pb.h"
#include "client/remote_session.h"
#include "compiler/codegen/arithmetic_mode.h"
#include "examples/digits/digits.h"
#include "examples/nbody/nbody.h"
#include "examples/sampler/sampler.h"
#include "runtime/channel.h"
#include "tests/accyd_daemon.h"
#include "tests/loop_programs.h"
#include "tests/grpc_health.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy {
namespace {

using ::testing::HasSubstr;
namespace tensor = accy::tensor;
using client::RemoteOptions;
using client::RemoteSession;

std::unique_ptr<RemoteSession> connect(const Daemon& d, RemoteOptions o = {}) {
  o.cpu_in_process = false;
  auto s = RemoteSession::connect(d.target(), o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

std::vector<tensor::Spec> toneSpecs(int guesses) {
  return guesses ? tone::specs({{"guess", guesses}}) : tone::specs();
}

uint32_t number(const absl::Status& st) { return static_cast<uint32_t>(session::statusOf(st)); }

TEST(Accyd, TheThreeToneTestsThroughRemoteSession) {
  Daemon d({});
  auto s = connect(d);
  ASSERT_TRUE(s);
  const tone::Samples data = tone::samples();
  // measure one frequency guess
  auto one = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(one.ok()) << one.status();
  float f1[1] = {2.5f}, v1[1];
  ASSERT_TRUE(s->invoke(*one, {bytes(f1), bytes(data.time), bytes(data.sample)}, {writableBytes(v1)}).ok());
  EXPECT_NEAR(tone::referenceMismatch(2.5), v1[0], 1e-4);
  // compare eight frequency guesses
  auto eight = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch)));
  ASSERT_TRUE(eight.ok());
  float f8[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, v8[8];
  ASSERT_TRUE(s->invoke(*eight, {bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(tone::referenceMismatch(f8[g]), v8[g], 1e-4);
  // refine eight frequency guesses: compiled once, launched 100 times
  auto f = tensor::Function::define("mismatch", toneSpecs(0), tone::mismatch);
  auto each = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  ASSERT_TRUE(each.ok());
  auto refine = s->compile(wire::encode(each->program()));
  ASSERT_TRUE(refine.ok()) << refine.status();
  float value[8], slope[8];
  for (int step = 0; step < 100; ++step) {
    ASSERT_TRUE(s->invoke(*refine, {bytes(f8), bytes(data.time), bytes(data.sample)},
                          {writableBytes(value), writableBytes(slope)})
                    .ok());
    for (int g = 0; g < 8; ++g) f8[g] -= 0.005f * slope[g];
  }
  EXPECT_NEAR(3.0f, f8[2], 1e-6);
  EXPECT_NEAR(3.0f, f8[3], 1e-6);
  EXPECT_EQ(d.stop(), 0);
}

// A matrix product runs the blocked kernel on the daemon's threads, whose
// frame holds a 64 KiB packed panel on the stack (k beyond one panel, two
// threads), and matches a double-precision product.
TEST(Accyd, MatrixProductsRunOnTheDaemonsThreads) {
  Daemon d({"--threads=2"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  constexpr int64_t m = 37, k = 600, n = 700;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", m}, {"k", k}}),
                                tensor::spec(tensor::DType::f32, {{"k", k}, {"j", n}})};
  auto h = s->compile(wire::encode(*tensor::define("product", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].dot(v[1], "k");
  })));
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (size_t e = 0; e < a.size(); ++e) a[e] = static_cast<float>((e * 37) % 101) / 101.0f - 0.5f;
  for (size_t e = 0; e < b.size(); ++e) b[e] = static_cast<float>((e * 53) % 97) / 97.0f - 0.5f;
  ASSERT_TRUE(s->invoke(*h, {bytes(a), bytes(b)}, {writableBytes(c)}).ok());
  for (int64_t i = 0; i < m; i += 5) {
    for (int64_t j = 0; j < n; j += 7) {
      double want = 0, magnitude = 0;
      for (int64_t q = 0; q < k; ++q) {
        want += double(a[i * k + q]) * b[q * n + j];
        magnitude += std::fabs(double(a[i * k + q]) * b[q * n + j]);
      }
      ASSERT_NEAR(c[i * n + j], want, magnitude * 1e-5 + 1e-6) << i << ", " << j;
    }
  }
  EXPECT_EQ(d.stop(), 0);
}

TEST(Accyd, EveryFailureStatusThroughTheDaemon) {
  Daemon d({"--max-scratch-bytes=1024", "--check-numerics=1"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  const std::string tone_bytes = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  EXPECT_EQ(number(s->compile("ACCY\x01\x00\x00\x00nonsense").status()), 1u);
  std::string v9 = tone_bytes;
  v9[4] = 9;
  EXPECT_EQ(number(s->compile(v9).status()), 2u);
  auto h = s->compile(tone_bytes);
  ASSERT_TRUE(h.ok());
  float f[1] = {1}, out[1];
  const tone::Samples data = tone::samples();
  EXPECT_EQ(number(s->invoke(*h, {bytes(f)}, {writableBytes(out)})), 4u);
  ASSERT_TRUE(s->release(*h).ok());
  EXPECT_EQ(number(s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(out)})), 3u);
  std::vector<session::Handle> held;
  for (uint32_t i = 0; i < session::kMaxPrograms; ++i) held.push_back(*s->compile(tone_bytes));
  EXPECT_EQ(number(s->compile(tone_bytes).status()), 5u);
  for (auto& x : held) ASSERT_TRUE(s->release(x).ok());
  const tensor::Spec big[] = {tensor::spec(tensor::DType::f32, {{"a", 64}}), tensor::spec(tensor::DType::f32, {{"b", 64}})};
  auto p = tensor::define("big", big, [](tensor::Builder&, std::span<const tensor::Value> v) {
    tensor::Value t = (v[0] * v[1]).exp();
    return t.sum("a").sum("b") + t.slice("a", 1, 64).sum({"a", "b"});
  });
  EXPECT_EQ(number(s->compile(wire::encode(*p)).status()), 6u);
  EXPECT_EQ(number(s->compile(tone_bytes, "ptx").status()), 7u);
  const tensor::Spec one[] = {tensor::spec(tensor::DType::f32, {{"a", 2}})};
  auto lg = s->compile(wire::encode(*tensor::define("log", one, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return v[0].log();
  })));
  ASSERT_TRUE(lg.ok());
  float x[2] = {1, -1}, y[2];
  auto st = s->invoke(*lg, {bytes(x)}, {writableBytes(y)});
  EXPECT_EQ(number(st), 8u);
  EXPECT_THAT(st.message(), HasSubstr("check_numerics"));
  ASSERT_TRUE(s->lastCause().has_value());
}

TEST(Accyd, SessionsAreIsolated) {
  Daemon d({});
  auto a = connect(d);
  RemoteOptions no_channel;  // (a channel is a region of the session; B should hold none)
  no_channel.invoke_channel = false;
  auto b = connect(d, no_channel);
  auto h = a->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok());
  // B has no program in that slot: the same handle means nothing there.
  float f[1] = {1}, out[1];
  const tone::Samples data = tone::samples();
  EXPECT_EQ(number(b->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(out)})), 3u);
  // Regions are per session too: raw stub call naming A's region from B.
  auto buf = a->allocateShared(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto channel = grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials());
  auto stub = accy::v1::Accyd::NewStub(channel);
  grpc::ClientContext ctx;
  accy::v1::ListRegionsRequest req;
  accy::v1::ListRegionsReply reply;
  req.set_session_id(b->sessionId());
  ASSERT_TRUE(stub->ListRegions(&ctx, req, &reply).ok());
  EXPECT_EQ(reply.regions_size(), 0);
  grpc::ClientContext ctx2;
  req.set_session_id(a->sessionId());
  ASSERT_TRUE(stub->ListRegions(&ctx2, req, &reply).ok());
  EXPECT_EQ(reply.regions_size(), 1);
}

// On the Unix socket a session belongs to the user that opened it (the
// peer's uid, from the kernel at accept): another user presenting its id
// gets NOT_FOUND, as for an unknown id, and its own session works.
TEST(Accyd, UnixSessionsBelongToTheirUser) {
  if (geteuid() != 0) GTEST_SKIP() << "becoming another user needs root; this test runs as uid " << geteuid();
  Daemon d({"--socket-mode=0660"});
  const std::string dir = d.socket().substr(0, d.socket().rfind('/'));
  ASSERT_EQ(chmod(dir.c_str(), 0710), 0);  // group 0 may reach the socket
  auto mine = connect(d);
  ASSERT_TRUE(mine);
  auto h = mine->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok()) << h.status();
  const std::string out = "/tmp/accyd-other-" + std::to_string(getpid()) + ".txt";
  const std::string cmd = runfile("tests/accyd_other_user") + " " + d.socket() + " 65534 " + mine->sessionId() + " >" +
                          out + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream said(out);
  const std::string text((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
  std::remove(out.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_THAT(text, HasSubstr("stolen compile: 5 InvalidHandle: accyd: no open session"));  // 5: NOT_FOUND
  EXPECT_THAT(text, HasSubstr("own compile: 0"));
  // The owner's session is untouched.
  float f[1] = {2.5f}, v[1];
  const tone::Samples data = tone::samples();
  EXPECT_TRUE(mine->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
}

// Programs and region bytes have quotas per identity (here the Unix user),
// across all of its sessions, besides the per-session ones.
TEST(Accyd, ProgramsAndRegionBytesHaveQuotasPerIdentity) {
  Daemon d({"--max-programs-per-identity=3", "--max-region-bytes-per-identity=12288"});
  auto a = connect(d);
  auto b = connect(d);
  ASSERT_TRUE(a && b);
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  auto a1 = a->compile(program);
  auto a2 = a->compile(program);
  auto b1 = b->compile(program);
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  auto b2 = b->compile(program);
  ASSERT_FALSE(b2.ok());
  EXPECT_EQ(number(b2.status()), 5u);  // too_many_programs
  EXPECT_THAT(b2.status().message(), HasSubstr("holds 3 programs in its sessions, the limit per identity is 3"));
  EXPECT_THAT(b2.status().message(), HasSubstr("(--max-programs-per-identity)"));
  ASSERT_TRUE(a->release(*a1).ok());  // released programs leave the quota
  EXPECT_TRUE(b->compile(program).ok());
  // Region bytes: 8 KiB in one session and 4 KiB in the other fill 12 KiB.
  auto r1 = a->allocateShared(8192);
  auto r2 = b->allocateShared(4096);
  ASSERT_TRUE(r1.ok() && r2.ok()) << r1.status() << r2.status();
  auto r3 = b->allocateShared(4096);
  ASSERT_FALSE(r3.ok());
  EXPECT_EQ(number(r3.status()), 5u);
  EXPECT_THAT(r3.status().message(), HasSubstr("would pass the limit of 12288 bytes per identity"));
  r1->reset();  // unregistered: its bytes leave the quota
  EXPECT_TRUE(b->allocateShared(4096).ok());
}

TEST(Accyd, SharedMemoryBuffersAndBoundsChecks) {
  Daemon d({});
  auto s = connect(d);
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch)));
  ASSERT_TRUE(h.ok());
  auto buf = s->allocateShared(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::byte* base = (*buf)->bytes().data();
  float* freq = reinterpret_cast<float*>(base);
  float* time = freq + 8;
  float* sample = time + 16;
  float* out = sample + 16;
  const tone::Samples data = tone::samples();
  for (int g = 0; g < 8; ++g) freq[g] = 0.5f + g;
  std::memcpy(time, data.time.data(), 64);
  std::memcpy(sample, data.sample.data(), 64);
  auto st = s->invoke(*h, {std::as_bytes(std::span(freq, 8)), std::as_bytes(std::span(time, 16)),
                           std::as_bytes(std::span(sample, 16))},
                      {std::as_writable_bytes(std::span(out, 8))});
  ASSERT_TRUE(st.ok()) << st;
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(out[g], tone::referenceMismatch(0.5 + g), 1e-4);
  // A reference past the region's end is refused.
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  accy::v1::InvokeRequest req;
  accy::v1::InvokeReply reply;
  req.set_session_id(s->sessionId());
  req.mutable_handle()->set_index(h->index & 0x7fffffff);
  req.mutable_handle()->set_generation(h->generation);
  for (uint64_t offset : {uint64_t{4090}, uint64_t{0}, uint64_t{64}}) {
    auto* r = req.add_inputs()->mutable_region();
    r->set_region((*buf)->region());
    r->set_offset(offset);
    r->set_size(offset == 0 ? 32 : 64);
  }
  grpc::Status gst = stub->Invoke(&ctx, req, &reply);
  EXPECT_EQ(gst.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(gst.error_message(), HasSubstr("outside region"));
}

// The invoke channel (runtime/channel.h) serves RemoteSession's invokes:
// bytes copied into its data area and references into shared buffers, the
// three tone tests' results, and failures with the same status numbers as
// gRPC.
TEST(Accyd, InvokesTravelThroughTheInvokeChannel) {
  Daemon d({});
  auto s = connect(d);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->invokeChannel(), "not opened yet");
  const tone::Samples data = tone::samples();
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch)));
  ASSERT_TRUE(h.ok()) << h.status();
  float f8[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, v8[8];
  for (int round = 0; round < 100; ++round) {
    f8[round % 8] += 0.001f;
    ASSERT_TRUE(s->invoke(*h, {bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
    for (int g = 0; g < 8; ++g) ASSERT_NEAR(tone::referenceMismatch(f8[g]), v8[g], 1e-4);
  }
  EXPECT_EQ(s->invokeChannel(), "open");
  EXPECT_EQ(s->channelInvokes(), 100);
  // Inputs and output in a shared buffer: references, no copies.
  auto buf = s->allocateShared(4096);
  ASSERT_TRUE(buf.ok());
  float* in = reinterpret_cast<float*>((*buf)->bytes().data());
  std::memcpy(in, f8, sizeof f8);
  std::memcpy(in + 8, data.time.data(), sizeof data.time);
  std::memcpy(in + 24, data.sample.data(), sizeof data.sample);
  ASSERT_TRUE(s->invoke(*h, {bytes(std::span(in, 8)), bytes(std::span(in + 8, 16)), bytes(std::span(in + 24, 16))},
                        {writableBytes(std::span(in + 40, 8))})
                  .ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(tone::referenceMismatch(f8[g]), in[40 + g], 1e-4);
  EXPECT_EQ(s->channelInvokes(), 101);
  // Failures come back with their numbers: a wrong size, a released handle.
  float short_time[3] = {};
  absl::Status st = s->invoke(*h, {bytes(f8), bytes(short_time), bytes(data.sample)}, {writableBytes(v8)});
  EXPECT_EQ(number(st), 4u) << st;
  auto again = *h;
  ASSERT_TRUE(s->release(*h).ok());
  st = s->invoke(again, {bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)});
  EXPECT_EQ(number(st), 3u) << st;
  EXPECT_EQ(s->channelInvokes(), 103);
  // Inline bytes larger than the channel's data area go through gRPC.
  RemoteOptions small;
  small.channel_bytes = 8192;
  auto t = connect(d, small);
  auto big = t->compile(wire::encode(*tensor::define(
      "twice", std::vector<tensor::Spec>{tensor::spec(tensor::DType::f32, {{"i", 4096}})},
      [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 2; })));
  ASSERT_TRUE(big.ok());
  std::vector<float> x(4096, 1.5f), y(4096);
  ASSERT_TRUE(t->invoke(*big, {bytes(x)}, {writableBytes(y)}).ok());
  EXPECT_EQ(y[4095], 3.0f);
  EXPECT_EQ(t->channelInvokes(), 0);
  EXPECT_EQ(t->invokeChannel(), "open");
  EXPECT_EQ(d.stop(), 0);
}

// A client that writes the mailbox itself: every check of Invoke holds on
// the channel (the daemon copies the request before checking it), refused
// with the same status numbers; OpenChannel refuses what is not a channel.
// Unregistering the channel's region while the channel runs an endless
// loop closes the channel at once: the loop stops at its next check and
// UnregisterRegion answers (it waited for the loop before, forever).
TEST(Accyd, TheChannelsRegionUnregisteredStopsItsLaunch) {
  Daemon d({});
  RemoteOptions o;
  o.reconnect_seconds = 0;
  auto s = connect(d, o);
  ASSERT_TRUE(s);
  using Args = std::span<const tensor::Value>;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {})};
  auto endless = testing::endlessLoop();
  auto twice = tensor::define("twice", specs, [](tensor::Builder&, Args a) { return a[0] * 2.0f; });
  ASSERT_TRUE(endless.ok() && twice.ok());
  auto stuck = s->compile(wire::encode(*endless));
  auto quick = s->compile(wire::encode(*twice));
  ASSERT_TRUE(stuck.ok() && quick.ok());
  // Buffers in shared memory, so that both invokes go through the channel.
  auto x = s->allocateShared(4);
  auto y = s->allocateShared(4);
  ASSERT_TRUE(x.ok() && y.ok());
  reinterpret_cast<float*>((*x)->bytes().data())[0] = 1.0f;
  ASSERT_TRUE(s->invoke(*quick, {(*x)->bytes()}, {(*y)->bytes()}).ok());
  ASSERT_EQ(s->channelInvokes(), 1) << s->invokeChannel();
  // The channel's region: the session's largest (the mailbox and its data).
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  uint64_t channel_region = 0, largest = 0;
  {
    grpc::ClientContext ctx;
    accy::v1::ListRegionsRequest req;
    req.set_session_id(s->sessionId());
    accy::v1::ListRegionsReply reply;
    ASSERT_TRUE(stub->ListRegions(&ctx, req, &reply).ok());
    for (const auto& r : reply.regions()) {
      if (r.size() > largest) largest = r.size(), channel_region = r.region();
    }
  }
  absl::Status looped;
  std::thread loop([&] { looped = s->invoke(*stuck, {(*x)->bytes()}, {(*y)->bytes()}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  accy::v1::UnregisterRegionRequest req;
  req.set_session_id(s->sessionId());
  req.set_region(channel_region);
  accy::v1::UnregisterRegionReply reply;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status st = stub->UnregisterRegion(&ctx, req, &reply);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_LT(seconds, 1.0) << "UnregisterRegion waited for the launch";
  loop.join();
  EXPECT_EQ(number(looped), 8u) << looped;  // launch_failed
  EXPECT_THAT(looped.message(), HasSubstr("channel closed; the launch stopped"));
  std::printf("channel: UnregisterRegion of the channel's region beside an endless loop answered in %.1f ms\n",
              seconds * 1e3);
}

TEST(Accyd, TheInvokeChannelChecksEveryRequest) {
  Daemon d({});
  RemoteOptions raw;
  raw.invoke_channel = false;
  auto s = connect(d, raw);
  ASSERT_TRUE(s);
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch)));
  ASSERT_TRUE(h.ok());
  auto box_buffer = s->allocateShared(1 << 20);
  auto data_buffer = s->allocateShared(4096);
  auto small = s->allocateShared(1024);
  ASSERT_TRUE(box_buffer.ok() && data_buffer.ok() && small.ok());
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  auto open = [&](uint64_t region) {
    grpc::ClientContext ctx;
    accy::v1::OpenChannelRequest req;
    accy::v1::OpenChannelReply reply;
    req.set_session_id(s->sessionId());
    req.set_region(region);
    const grpc::Status st = stub->OpenChannel(&ctx, req, &reply);
    if (st.ok()) return std::make_pair(0u, std::string());
    // A failed call carries its number in the accy-status trailer.
    const auto& trailers = ctx.GetServerTrailingMetadata();
    auto it = trailers.find("accy-status");
    const uint32_t status = it == trailers.end() ? 99u : static_cast<uint32_t>(std::stoul(std::string(it->second.data(), it->second.size())));
    return std::make_pair(status, st.error_message());
  };
  // Not a mailbox (no magic), too small, unknown: refused.
  EXPECT_EQ(open((*box_buffer)->region()).first, 4u);
  EXPECT_THAT(open((*box_buffer)->region()).second, HasSubstr("not an invoke channel"));
  EXPECT_THAT(open((*small)->region()).second, HasSubstr("a channel needs at least"));
  EXPECT_THAT(open(999).second, HasSubstr("no region 999"));
  auto* box = reinterpret_cast<channel::Mailbox*>((*box_buffer)->bytes().data());
  box->magic = channel::kMagic;
  box->version = channel::kVersion;
  ASSERT_EQ(open((*box_buffer)->region()).first, 0u);
  EXPECT_EQ(open((*box_buffer)->region()).first, 5u);  // one channel per session
  const tone::Samples data = tone::samples();
  float* place = reinterpret_cast<float*>((*data_buffer)->bytes().data());
  for (int g = 0; g < 8; ++g) place[g] = 0.5f + g;
  std::memcpy(place + 8, data.time.data(), sizeof data.time);
  std::memcpy(place + 24, data.sample.data(), sizeof data.sample);
  const uint64_t region = (*data_buffer)->region();
  uint32_t seq = 0;
  // Writes a request, rings, and waits for the reply (status, message).
  auto ask = [&](auto&& fill) {
    channel::Request& r = box->request;
    r.index = h->index & 0x7fffffff;
    r.generation = h->generation;
    r.inputs = 3;
    r.outputs = 1;
    r.refs[0] = {region, 0, 32};
    r.refs[1] = {region, 32, 64};
    r.refs[2] = {region, 96, 64};
    r.refs[3] = {region, 160, 32};
    fill(r);
    channel::publish(box->request_seq, ++seq, box->daemon_waiting);
    while (!channel::waitForChange(box->reply_seq, seq - 1, box->client_waiting, std::chrono::microseconds(50),
                                   std::chrono::milliseconds(100))) {
    }
    EXPECT_EQ(channel::load(box->reply_seq), seq);
    return std::make_pair(box->reply.status, std::string(box->reply.message, box->reply.message_bytes));
  };
  auto fine = ask([](channel::Request&) {});
  EXPECT_EQ(fine.first, 0u) << fine.second;
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(place[40 + g], tone::referenceMismatch(0.5 + g), 1e-4);
  auto too_many = ask([](channel::Request& r) { r.inputs = 60, r.outputs = 5; });
  EXPECT_EQ(too_many.first, 4u);
  EXPECT_THAT(too_many.second, HasSubstr("at most 64"));
  auto wrapped = ask([](channel::Request& r) { r.inputs = 0xffffffffu, r.outputs = 2; });
  EXPECT_EQ(wrapped.first, 4u);
  auto outside = ask([](channel::Request& r) { r.refs[1].offset = 4090; });
  EXPECT_EQ(outside.first, 4u);
  EXPECT_THAT(outside.second, HasSubstr("outside region"));
  auto huge = ask([](channel::Request& r) { r.refs[2] = {r.refs[2].region, 8, ~uint64_t{0}}; });
  EXPECT_THAT(huge.second, HasSubstr("outside region"));
  const uint64_t box_region = (*box_buffer)->region();
  auto into_box = ask([&](channel::Request& r) { r.refs[3] = {box_region, 64, 32}; });
  EXPECT_EQ(into_box.first, 4u);
  EXPECT_THAT(into_box.second, HasSubstr("mailbox"));
  auto unknown = ask([](channel::Request& r) { r.refs[0].region = 77; });
  EXPECT_THAT(unknown.second, HasSubstr("no region 77"));
  auto no_place = ask([](channel::Request& r) { r.outputs = 0; });
  EXPECT_EQ(no_place.first, 4u);
  EXPECT_THAT(no_place.second, HasSubstr("has no place"));
  auto wrong_size = ask([](channel::Request& r) { r.refs[1].size = 60; });
  EXPECT_EQ(wrong_size.first, 4u);
  auto stale = ask([](channel::Request& r) { r.generation += 1; });
  EXPECT_EQ(stale.first, 3u);
  // Still serving after all of that.
  for (int g = 0; g < 8; ++g) place[40 + g] = -1;
  EXPECT_EQ(ask([](channel::Request&) {}).first, 0u);
  EXPECT_NEAR(place[40], tone::referenceMismatch(0.5), 1e-4);
  EXPECT_EQ(d.stop(), 0);
}

// A client process (tests/accyd_chaos_client) started on the daemon;
// returns its pid once it says it is ready (-1 if it never does).
pid_t startChaosClient(const Daemon& d, const std::string& mode) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return -1;
  const std::string binary = runfile("tests/accyd_chaos_client"), target = d.target();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    execl(binary.c_str(), binary.c_str(), target.c_str(), mode.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::FILE* from = fdopen(out[0], "r");
  char line[64] = {};
  const bool ready = from != nullptr && std::fgets(line, sizeof line, from) != nullptr &&
                     std::string(line) == "ready\n";
  if (from != nullptr) std::fclose(from);
  if (!ready) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

// Clients killed with SIGKILL in the middle of invokes (through the
// channel and through gRPC) and of uploads (regions registered, and
// uploaded but never claimed): once their leases lapse, the daemon holds
// as many descriptors, region mappings and sessions as before they came,
// and still serves.
TEST(Accyd, ClientsKilledMidCallLeaveNothingBehind) {
  Daemon d({"--lease-seconds=1", "--region-token-seconds=1"});
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  auto sessions = [&] {
    grpc::ClientContext ctx;
    accy::v1::ServerInfoReply reply;
    EXPECT_TRUE(stub->ServerInfo(&ctx, accy::v1::ServerInfoRequest(), &reply).ok());
    return reply.sessions();
  };
  ASSERT_EQ(sessions(), 0u);
  const int descriptors = d.descriptors(), mappings = d.regionMappings();
  constexpr int kRounds = 4;
  const char* const modes[] = {"channel", "grpc", "upload"};
  int killed = 0;
  std::mt19937 random(20261201);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<pid_t> clients;
    for (int c = 0; c < 6; ++c) {
      const pid_t pid = startChaosClient(d, modes[c % 3]);
      ASSERT_GT(pid, 0) << "chaos client " << modes[c % 3] << " did not start";
      clients.push_back(pid);
    }
    EXPECT_GT(sessions(), 0u);
    for (pid_t pid : clients) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 + random() % 80));  // in the middle of its work
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      ++killed;
    }
  }
  // Leases of one second, tokens of one second: everything is back well
  // within ten.
  int now_descriptors = 0, now_mappings = 0;
  uint32_t now_sessions = 0;
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now_sessions = sessions();
    now_descriptors = d.descriptors();
    now_mappings = d.regionMappings();
    if (now_sessions == 0 && now_descriptors == descriptors && now_mappings == mappings) break;
  }
  EXPECT_EQ(now_sessions, 0u);
  EXPECT_EQ(now_descriptors, descriptors);
  EXPECT_EQ(now_mappings, mappings);
  std::printf("chaos: %d clients killed mid-call (%d rounds); daemon before: %d descriptors, %d region mappings, 0 "
              "sessions; after: %d, %d, %u\n",
              killed, kRounds, descriptors, mappings, now_descriptors, now_mappings, now_sessions);
  // And it still serves.
  auto s = connect(d);
  ASSERT_TRUE(s);
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok());
  const tone::Samples data = tone::samples();
  float f[1] = {2.5f}, v[1];
  ASSERT_TRUE(s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  EXPECT_NEAR(tone::referenceMismatch(2.5), v[0], 1e-4);
  EXPECT_EQ(s->invokeChannel(), "open");
  EXPECT_EQ(d.stop(), 0);
}

TEST(Accyd, LeaseExpiryFreesTheSession) {
  Daemon d({"--lease-seconds=1"});
  RemoteOptions o;
  o.keep_alive = false;  // a client that died
  o.reconnect_seconds = 0;
  auto s = connect(d, o);
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  float f[1] = {1}, out[1];
  const tone::Samples data = tone::samples();
  auto st = s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(out)});
  EXPECT_EQ(number(st), 3u);
  EXPECT_THAT(st.message(), HasSubstr("lease"));
  EXPECT_THAT(st.message(), HasSubstr("reconnecting is off"));
  // One that reconnects (the default) gets a new session, its program
  // compiled again under the same handle, and the call runs.
  o.reconnect_seconds = 10;
  auto back = connect(d, o);
  auto hb = back->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(hb.ok());
  const std::string first_id = back->sessionId();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  st = back->invoke(*hb, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(out)});
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_NEAR(out[0], tone::referenceMismatch(1.0), 1e-4);
  EXPECT_EQ(back->reconnects(), 1);
  EXPECT_NE(back->sessionId(), first_id);
  // A client that keeps its lease stays.
  auto kept = connect(d);
  auto h2 = kept->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_TRUE(kept->invoke(*h2, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(out)}).ok());
}

// Lists services through the server reflection protocol, with a raw stream
// (ServerReflectionRequest{list_services: "*"}).
std::vector<std::string> listServices(const std::string& target) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  const std::string request = std::string("\x3a\x01*", 3);  // field 7, "*"
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  std::vector<grpc::Slice> slices;
  in.Dump(&slices);
  std::string bytes;
  for (auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  // Walk: response field 6 (list_services_response) > field 1 (service) > field 1 (name).
  std::vector<std::string> names;
  auto varint = [](const std::string& b, size_t& i) {
    uint64_t v = 0;
    for (int shift = 0; i < b.size(); shift += 7) {
      const uint8_t c = static_cast<uint8_t>(b[i++]);
      v |= uint64_t{c & 0x7fu} << shift;
      if (!(c & 0x80)) break;
    }
    return v;
  };
  std::function<void(const std::string&, int)> walk = [&](const std::string& b, int depth) {
    size_t i = 0;
    while (i < b.size()) {
      const uint64_t key = varint(b, i);
      if ((key & 7) != 2) {
        if ((key & 7) == 0) varint(b, i);
        else break;
        continue;
      }
      const uint64_t len = varint(b, i);
      const std::string sub = b.substr(i, len);
      i += len;
      const uint64_t field = key >> 3;
      if (depth == 0 && field == 6) walk(sub, 1);
      else if (depth == 1 && field == 1) walk(sub, 2);
      else if (depth == 2 && field == 1) names.push_back(sub);
    }
  };
  walk(bytes, 0);
  return names;
}

TEST(Accyd, ReflectionListsTheServices) {
  Daemon d({});
  const std::vector<std::string> names = listServices(d.target());
  EXPECT_THAT(names, ::testing::Contains("accy.v1.Accyd"));
  EXPECT_THAT(names, ::testing::Contains("grpc.health.v1.Health"));
  EXPECT_THAT(names, ::testing::Contains("grpc.reflection.v1alpha.ServerReflection"));
}

// A thousand invokes per client; a hundred under ThreadSanitizer, which
// slows every call many times over (the interleavings are what it checks).
#if defined(__SANITIZE_THREAD__)
constexpr int kInvokesPerClient = 100;
#else
constexpr int kInvokesPerClient = 1000;
#endif

TEST(Accyd, SixteenClientsThousandInvokesEach) {
  Daemon d({});
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  const tone::Samples data = tone::samples();
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      auto s = connect(d);
      if (!s) {
        ++wrong;
        return;
      }
      auto h = s->compile(program);
      if (!h.ok()) {
        ++wrong;
        return;
      }
      for (int n = 0; n < kInvokesPerClient; ++n) {
        const float f[1] = {0.5f + 0.01f * ((c * 1000 + n) % 700)};
        float out[1];
        if (!s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(out)}).ok() ||
            std::fabs(out[0] - tone::referenceMismatch(f[0])) > 1e-3) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(d.stop(), 0);
}

// Load: 64 clients, each 2,000 calls (10,000 in `make accyd-load`, with
// ACCY_LOAD_LONG=1; 1,000 under a sanitizer) mixing compiles (two
// programs, cache hits after the first), releases, region churn (shared
// buffers registered and dropped) and invokes inline and through shared
// memory, every result checked against the double-precision mismatch. No
// call may fail. Prints the figures (docs/ACCYD.md).
int mixedCallsPerClient() {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  return 1000;
#else
  const char* v = std::getenv("ACCY_LOAD_LONG");
  return v != nullptr && std::string_view(v) == "1" ? 10000 : 2000;
#endif
}

TEST(Accyd, SixtyFourClientsMixedCalls) {
  constexpr int kClients = 64;
  const int calls_per_client = mixedCallsPerClient();
  Daemon d({"--max-sessions=128"});
  const std::string programs[2] = {wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)),
                                   wire::encode(*tensor::define("mismatch8", toneSpecs(8), tone::mismatch))};
  const tone::Samples data = tone::samples();
  std::atomic<int64_t> calls{0}, invokes{0}, shared_invokes{0}, channel_invokes{0}, compiles{0}, regions{0};
  std::atomic<int> errors{0};
  std::mutex first_mu;
  std::string first_error;
  auto error = [&](const std::string& what) {
    if (errors.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(first_mu);
      first_error = what;
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      RemoteOptions options;  // half the clients invoke through the channel, half through gRPC
      options.invoke_channel = c % 2 == 0;
      auto s = connect(d, options);
      if (!s) return error("connect");
      struct Count {
        RemoteSession* s;
        std::atomic<int64_t>* to;
        ~Count() { *to += s->channelInvokes(); }
      } count{s.get(), &channel_invokes};
      auto buffer = s->allocateShared(4096);
      if (!buffer.ok()) return error("allocateShared: " + std::string(buffer.status().message()));
      ++regions;
      int which = 0;  // the scalar program or the eight-guess one
      auto h = s->compile(programs[which]);
      if (!h.ok()) return error("compile: " + std::string(h.status().message()));
      ++compiles;
      for (int n = 0; n < calls_per_client; ++n) {
        ++calls;
        if (n % 100 == 99) {  // swap programs: a compile (a cache hit) and a release
          which = 1 - which;
          auto next = s->compile(programs[which]);
          if (!next.ok()) return error("compile: " + std::string(next.status().message()));
          if (absl::Status st = s->release(*h); !st.ok()) return error("release: " + std::string(st.message()));
          ++calls;
          ++compiles;
          h = next;
          continue;
        }
        if (n % 100 == 49) {  // region churn: register one and drop it
          auto extra = s->allocateShared(8192);
          if (!extra.ok()) return error("allocateShared: " + std::string(extra.status().message()));
          ++regions;
          continue;
        }
        const int guesses = which == 0 ? 1 : 8;
        float f[8];
        for (int g = 0; g < guesses; ++g) f[g] = 0.5f + 0.01f * static_cast<float>((c * 977 + n * 7 + g) % 700);
        float out[8];
        absl::Status st;
        if (n % 2 == 0) {
          st = s->invoke(*h, {bytes(std::span(f, guesses)), bytes(data.time), bytes(data.sample)},
                         {writableBytes(std::span(out, guesses))});
        } else {  // through shared memory: inputs and output inside the buffer
          std::byte* b = (*buffer)->bytes().data();
          std::memcpy(b, f, sizeof(float) * guesses);
          std::memcpy(b + 64, data.time.data(), sizeof data.time);
          std::memcpy(b + 192, data.sample.data(), sizeof data.sample);
          st = s->invoke(*h,
                         {std::span<const std::byte>(b, sizeof(float) * guesses),
                          std::span<const std::byte>(b + 64, sizeof data.time),
                          std::span<const std::byte>(b + 192, sizeof data.sample)},
                         {std::span<std::byte>(b + 320, sizeof(float) * guesses)});
          if (st.ok()) std::memcpy(out, b + 320, sizeof(float) * guesses);
          ++shared_invokes;
        }
        ++invokes;
        if (!st.ok()) return error("invoke: " + std::string(st.message()));
        for (int g = 0; g < guesses; ++g) {
          if (std::fabs(out[g] - tone::referenceMismatch(f[g])) > 1e-3) {
            return error("wrong result " + std::to_string(out[g]) + " for " + std::to_string(f[g]));
          }
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(errors.load(), 0) << "first: " << first_error;
  EXPECT_EQ(calls.load(), int64_t{kClients} * (calls_per_client + calls_per_client / 100));
  EXPECT_GT(channel_invokes.load(), invokes.load() / 3);
  std::printf("load: %d clients, %lld calls (%lld invokes, %lld of them with buffers in shared memory, %lld through the "
              "invoke channel; %lld compiles; %lld regions registered) in %.1f s, %.0f calls/s, %d errors\n",
              kClients, static_cast<long long>(calls.load()), static_cast<long long>(invokes.load()),
              static_cast<long long>(shared_invokes.load()), static_cast<long long>(channel_invokes.load()),
              static_cast<long long>(compiles.load()),
              static_cast<long long>(regions.load()), seconds, static_cast<double>(calls.load()) / seconds,
              errors.load());
  EXPECT_EQ(d.stop(), 0);
}

TEST(Accyd, ServerInfoReportsTheBuildAndTheCache) {
  Daemon d({});
  auto s = connect(d);
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  session::CompileInfo first, second;
  ASSERT_TRUE(s->compile(program, "x86_64", &first).ok());
  ASSERT_TRUE(s->compile(program, "x86_64", &second).ok());
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.cache_level, "memory");
  auto info = s->serverInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_THAT(info->devices(), ::testing::Contains("cpu"));
  EXPECT_EQ(info->cache().memory_hits(), 1u);
  // The version, from the file VERSION, in ServerInfo and `accyd --version`.
  EXPECT_EQ(info->version(), kVersion);
  if (FILE* p = popen((runfile("server/accyd") + " --version").c_str(), "r")) {
    char line[256] = {};
    const bool read = std::fgets(line, sizeof line, p) != nullptr;
    EXPECT_EQ(pclose(p), 0);
    EXPECT_TRUE(read);
    EXPECT_THAT(std::string(line), HasSubstr(std::string("accyd ") + kVersion + " (build "));
  }
  // An unstamped test build keeps no disk cache, and says why.
  if (!info->build_record().stamped()) {
    EXPECT_FALSE(info->cache().disk_enabled());
  }
}

TEST(Accyd, LimitsAreEnforcedWithClearErrors) {
  Daemon d({"--max-sessions=1", "--max-region-bytes=8192", "--max-regions-per-session=1",
            "--max-message-bytes=4096"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  auto second = RemoteSession::connect(d.target(), RemoteOptions{.cpu_in_process = false});
  EXPECT_EQ(number(second.status()), 5u);
  EXPECT_THAT(second.status().message(), HasSubstr("the limit is 1"));
  auto too_big = s->allocateShared(16384);
  EXPECT_EQ(number(too_big.status()), 4u);
  EXPECT_THAT(too_big.status().message(), HasSubstr("above the limit"));
  auto one = s->allocateShared(4096);
  ASSERT_TRUE(one.ok()) << one.status();
  auto two = s->allocateShared(4096);
  EXPECT_EQ(number(two.status()), 5u);
  // A message over the size limit is refused by gRPC before the service.
  auto h = s->compile(std::string(8192, 'x'));
  EXPECT_FALSE(h.ok());
}

TEST(Accyd, ASecondDaemonLeavesTheLiveOnesSocketAlone) {
  Daemon first({});
  auto s = connect(first);
  ASSERT_TRUE(s);
  // The same socket path: the second daemon refuses to start.
  const std::string out = "/tmp/accyd-second-" + std::to_string(getpid()) + ".txt";
  const std::string cmd = runfile("server/accyd") + " --listen=unix:" + first.socket() + " >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream said(out);
  const std::string text((std::istreambuf_iterator<char>(said)), std::istreambuf_iterator<char>());
  std::remove(out.c_str());
  EXPECT_THAT(text, HasSubstr("another daemon is listening on " + first.socket()));
  // The first still serves on its socket.
  auto again = RemoteSession::connect(first.target(), RemoteOptions{.cpu_in_process = false});
  EXPECT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(s->serverInfo().ok());
}

// Inline outputs that cannot fit a reply are refused before they are
// allocated: a 1 GiB output asked for inline leaves the daemon's peak
// memory where it was.
TEST(Accyd, InlineOutputsTooLargeForAReplyAreRefusedBeforeAllocating) {
  Daemon d({});
  auto s = connect(d);
  ASSERT_TRUE(s);
  const tensor::Spec one[] = {tensor::spec(tensor::DType::f32, {})};
  auto big = tensor::define("big", one, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return tensor::broadcast(v[0], "i", int64_t{1} << 28);  // 1 GiB of f32
  });
  ASSERT_TRUE(big.ok()) << big.status();
  auto h = s->compile(wire::encode(*big));
  ASSERT_TRUE(h.ok()) << h.status();
  const long before = d.peakKib();
  ASSERT_GT(before, 0);
  // The raw call, as any client may make it (the client library would
  // need a 1 GiB output buffer to ask).
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  accy::v1::InvokeRequest req;
  accy::v1::InvokeReply reply;
  req.set_session_id(s->sessionId());
  req.mutable_handle()->set_index(h->index & 0x7fffffff);
  req.mutable_handle()->set_generation(h->generation);
  const float x = 1.0f;
  req.add_inputs()->set_inline_bytes(&x, sizeof x);
  grpc::Status gst = stub->Invoke(&ctx, req, &reply);
  EXPECT_EQ(gst.error_code(), grpc::StatusCode::OUT_OF_RANGE);  // invalid_buffer
  EXPECT_THAT(gst.error_message(), HasSubstr("more than a reply may carry (--max-message-bytes=268435456)"));
  const long after = d.peakKib();
  EXPECT_LT(after - before, 256 * 1024) << "the daemon's peak memory grew by " << (after - before) << " KiB";
}

// A GPU left in a sticky error state (the fake CUDA driver's second launch
// faults, and the fault sticks as an illegal address does on a real GPU)
// turns that device's health to NOT_SERVING and the daemon says which;
// the CPU device and the server stay SERVING, and invokes on the lost
// device fail at once saying why.
TEST(Accyd, ADeviceInAStickyErrorStopsServing) {
  char dir[] = "/tmp/accyd-fakecuda-XXXXXX";
  const std::string driver_dir = mkdtemp(dir);
  std::filesystem::create_symlink(runfile("backends/cuda/testdata/libfake_cuda.so"), driver_dir + "/libcuda.so.1");
  Daemon d({"--devices=cpu,cuda"}, "",
           {"LD_LIBRARY_PATH=" + driver_dir, "ACCY_FAKE_CUDA_STICKY=1", "ACCY_FAKE_CUDA_FAULT_AT_LAUNCH=2"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  EXPECT_EQ(testing::healthStatus(d.target(), "accyd.device.cuda"), 1);
  EXPECT_EQ(testing::healthStatus(d.target(), "accyd.device.cpu"), 1);
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  auto gpu = s->compile(program, "ptx");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = s->compile(program, "x86_64");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const tone::Samples data = tone::samples();
  float f[1] = {2.5f}, v[1];
  const std::vector<std::span<const std::byte>> inputs = {bytes(f), bytes(data.time), bytes(data.sample)};
  EXPECT_TRUE(s->invoke(*gpu, inputs, {writableBytes(v)}).ok());  // launch 1
  const absl::Status fault = s->invoke(*gpu, inputs, {writableBytes(v)});  // launch 2 faults
  EXPECT_EQ(number(fault), 8u) << fault;  // launch_failed
  EXPECT_EQ(testing::healthStatus(d.target(), "accyd.device.cuda"), 2);  // NOT_SERVING
  EXPECT_EQ(testing::healthStatus(d.target(), "accyd.device.cpu"), 1);
  EXPECT_EQ(testing::healthStatus(d.target(), ""), 1);
  const absl::Status after = s->invoke(*gpu, inputs, {writableBytes(v)});
  EXPECT_EQ(number(after), 8u);
  EXPECT_THAT(after.message(), HasSubstr("is lost"));
  ASSERT_TRUE(s->invoke(*cpu, inputs, {writableBytes(v)}).ok());
  EXPECT_NEAR(v[0], tone::referenceMismatch(2.5), 1e-4);
  std::filesystem::remove_all(driver_dir);
}

// --access-log: one JSON line per call with the method, a short hash of
// the session (never the id itself, a bearer secret), the device, the
// status and the duration, and nothing of the data.
// GET http://127.0.0.1:port/metrics: the body, or "" when it fails.
std::string scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) response.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// A free loopback port (bound, then let go).
int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// --metrics=HOST:PORT: Prometheus's /metrics counts calls by method, device
// and status, refusals by reason, Invoke latencies, the cache and what the
// sessions hold; a bad address is refused at start.
TEST(Accyd, MetricsAreScrapedAfterCalls) {
  const int port = freePort();
  Daemon d({"--metrics=127.0.0.1:" + std::to_string(port)});
  auto s = connect(d);
  ASSERT_TRUE(s);
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok()) << h.status();
  const tone::Samples data = tone::samples();
  float f[1] = {2.5f}, v[1];
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  float wrong[2] = {1, 2};
  EXPECT_FALSE(s->invoke(*h, {bytes(wrong), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  // Those went through the invoke channel; a second session invokes
  // through gRPC (the same program: a cache hit).
  RemoteOptions grpc_only;
  grpc_only.invoke_channel = false;
  auto g = connect(d, grpc_only);
  auto gh = g->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(gh.ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(g->invoke(*gh, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  const std::string text = scrape(port);
  ASSERT_FALSE(text.empty()) << "no answer from /metrics on port " << port;
  for (const char* line : {"accyd_calls_total{device=\"cpu\",method=\"ChannelInvoke\",status=\"ok\"} 3",
                           "accyd_calls_total{device=\"cpu\",method=\"ChannelInvoke\",status=\"invalid_buffer\"} 1",
                           "accyd_calls_total{device=\"cpu\",method=\"Invoke\",status=\"ok\"} 2",
                           "accyd_calls_total{device=\"cpu\",method=\"Compile\",status=\"ok\"} 2",
                           "accyd_calls_total{device=\"\",method=\"OpenChannel\",status=\"ok\"} 1",
                           "accyd_refused_total{method=\"ChannelInvoke\",reason=\"invalid_buffer\"} 1",
                           "accyd_call_seconds_count{device=\"cpu\",method=\"ChannelInvoke\"} 4",
                           "accyd_call_seconds_bucket{device=\"cpu\",method=\"ChannelInvoke\",le=\"+Inf\"} 4",
                           "accyd_call_seconds_count{device=\"cpu\",method=\"Invoke\"} 2",
                           "accyd_sessions 2", "accyd_programs 2", "accyd_cache_misses_total 1",
                           "accyd_cache_hits_total{level=\"memory\"} 1", "accyd_lease_expiries_total 0"}) {
    EXPECT_THAT(text, ::testing::HasSubstr(line));
  }
  // Refused at start: a port in use, an address that is not HOST:PORT.
  char dir[] = "/tmp/accyd-metrics-XXXXXX";
  const std::string tmp = mkdtemp(dir);
  for (const std::string& address : {"127.0.0.1:" + std::to_string(port), std::string("999.1.1.1:9"),
                                     std::string("127.0.0.1:99999"), std::string("localhost")}) {
    const std::string command = runfile("server/accyd") + " --listen=unix:" + tmp + "/x.sock --metrics=" + address +
                                " 2>" + tmp + "/err";
    const int status = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << address;
    std::ifstream err(tmp + "/err");
    const std::string message((std::istreambuf_iterator<char>(err)), std::istreambuf_iterator<char>());
    EXPECT_THAT(message, ::testing::HasSubstr("--metrics=" + address)) << message;
  }
  std::filesystem::remove_all(tmp);
}

TEST(Accyd, TheAccessLogHasALinePerCallAndNoSecrets) {
  char dir[] = "/tmp/accyd-log-XXXXXX";
  const std::string log_dir = mkdtemp(dir);
  const std::string log = log_dir + "/access.log";
  std::string session_id;
  {
    Daemon d({"--access-log=" + log});
    auto s = connect(d);
    ASSERT_TRUE(s);
    session_id = s->sessionId();
    auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
    ASSERT_TRUE(h.ok());
    const tone::Samples data = tone::samples();
    float f[1] = {2.5f}, v[1];
    ASSERT_TRUE(s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
    float wrong[2] = {1, 2};
    EXPECT_FALSE(s->invoke(*h, {bytes(wrong), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  }
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::filesystem::remove_all(log_dir);
  ASSERT_GE(lines.size(), 4u);
  auto find = [&](const std::string& needle) {
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != std::string::npos; });
  };
  EXPECT_EQ(find("\"method\":\"OpenSession\""), 1);
  EXPECT_EQ(find("\"method\":\"Compile\",\"session\":\""), 1);
  // The invokes went through the invoke channel, logged like any call.
  EXPECT_EQ(find("\"method\":\"ChannelInvoke\",\"session\":\""), 2);
  EXPECT_EQ(find("\"method\":\"ChannelInvoke\",\"session\":\"\""), 0);  // the session's short hash is there
  EXPECT_EQ(find("\"device\":\"cpu\",\"status\":\"ok\""), 2);  // the compile and the first invoke
  EXPECT_EQ(find("\"status\":\"invalid_buffer\""), 1);
  for (const std::string& l : lines) {
    EXPECT_EQ(l.find(session_id), std::string::npos) << "the log holds the session id: " << l;
    EXPECT_EQ(l.front(), '{');
    EXPECT_EQ(l.back(), '}');
    EXPECT_NE(l.find("\"micros\":"), std::string::npos) << l;
  }
}

// Shared buffers of 2 MiB and more take huge pages where the system gives
// them, and say which pages they got and why not better.
TEST(Accyd, SharedBuffersSayWhichPagesTheyGot) {
  Daemon d({});
  auto s = connect(d);
  ASSERT_TRUE(s);
  auto small = s->allocateShared(1024);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ((*small)->pages(), "4 KiB pages (smaller than a huge page)");
  auto big = s->allocateShared(size_t{4} << 20);
  ASSERT_TRUE(big.ok()) << big.status();
  long huge_free = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("HugePages_Free:", 0) == 0) huge_free = std::atol(line.c_str() + 15);
  }
  if (huge_free >= 2) {
    EXPECT_EQ((*big)->pages(), "hugetlb (2 MiB pages)");
  } else {
    EXPECT_THAT((*big)->pages(), ::testing::AnyOf(HasSubstr("transparent huge pages"),
                                                  HasSubstr("4 KiB pages: no 2 MiB hugetlb pages")));
  }
  // Mapped and writable whatever its pages, and the daemon serves on.
  const std::span<std::byte> all = (*big)->bytes();
  ASSERT_EQ(all.size(), size_t{4} << 20);
  std::memset(all.data(), 0, all.size());
  EXPECT_TRUE(s->serverInfo().ok());
}

// The daemon-wide budgets: memory held by invokes in flight (scratch and
// inline outputs) and how many run at once, refused with the figures.
TEST(Accyd, LaunchMemoryAndConcurrencyHaveADaemonWideBudget) {
  Daemon d({"--max-launch-bytes=4096", "--max-concurrent-invokes=1", "--max-launches-per-identity=2", "--threads=1", "--drain-seconds=0"});
  // Through gRPC: outputs come back inline there (through the invoke
  // channel they are placed in its region and hold no launch memory).
  RemoteOptions grpc_only;
  grpc_only.invoke_channel = false;
  grpc_only.reconnect_seconds = 0;
  auto s = connect(d, grpc_only);
  ASSERT_TRUE(s);
  const tensor::Spec vec[] = {tensor::spec(tensor::DType::f32, {{"i", 2048}})};
  auto h = s->compile(wire::encode(*tensor::define("twice", vec, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0] * 2;
  })));
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<float> x(2048, 1.0f), y(2048);
  // 8 KiB of output inline: over the 4 KiB budget.
  const absl::Status inline_out = s->invoke(*h, {bytes(x)}, {writableBytes(y)});
  EXPECT_EQ(number(inline_out), 6u) << inline_out;  // out_of_memory: RESOURCE_EXHAUSTED
  EXPECT_THAT(inline_out.message(), HasSubstr("needs 8192 bytes of scratch and inline outputs; 0 of the daemon's 4096"));
  // The same output in a shared region holds no launch memory.
  auto region = s->allocateShared(2048 * 4);
  ASSERT_TRUE(region.ok()) << region.status();
  const std::span<std::byte> out = (*region)->bytes();
  ASSERT_TRUE(s->invoke(*h, {bytes(x)}, {out}).ok());
  EXPECT_EQ(reinterpret_cast<const float*>(out.data())[2047], 2.0f);
  // A second invoke while one runs: over the concurrency budget of one.
  auto other = connect(d, grpc_only);
  ASSERT_TRUE(other);
  // Seconds of work on the daemon's one thread (2^32 transcendental
  // elements), so that it still runs when the second invoke comes.
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 65536}}),
                                tensor::spec(tensor::DType::f32, {{"j", 65536}})};
  auto slow = other->compile(wire::encode(*tensor::define("slow", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0] * a[1]).sin().cos().exp().sum({"i", "j"});
  })));
  ASSERT_TRUE(slow.ok()) << slow.status();
  std::vector<float> p(65536, 0.5f), q(65536, 1.0f);
  float total[1];
  std::thread running([&] { (void)other->invoke(*slow, {bytes(p), bytes(q)}, {writableBytes(total)}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const absl::Status busy = s->invoke(*h, {bytes(x)}, {out});
  EXPECT_EQ(number(busy), 6u) << busy;
  EXPECT_THAT(busy.message(), HasSubstr("1 invokes are running, the limit is 1"));
  EXPECT_EQ(d.stop(), 0);  // without waiting for the long kernel (a second past the drain time)
  running.join();
}

TEST(Accyd, RegionBytesPerSessionAreLimited) {
  Daemon d({"--max-region-bytes=8192", "--max-region-bytes-per-session=12288"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  auto one = s->allocateShared(8192);
  ASSERT_TRUE(one.ok()) << one.status();
  auto two = s->allocateShared(8192);
  EXPECT_EQ(number(two.status()), 5u);  // too_many_programs: RESOURCE_EXHAUSTED
  EXPECT_THAT(two.status().message(), HasSubstr("would pass the limit of 12288 bytes per session"));
  auto small = s->allocateShared(1024);
  EXPECT_TRUE(small.ok()) << small.status();
}

TEST(Accyd, ProgramsPerSessionAreLimited) {
  Daemon d({"--max-programs-per-session=2"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  auto first = s->compile(program);
  auto second = s->compile(program);
  ASSERT_TRUE(first.ok() && second.ok());
  auto third = s->compile(program);
  EXPECT_EQ(number(third.status()), 5u);  // too_many_programs
  EXPECT_THAT(third.status().message(), HasSubstr("all 2 program slots are in use"));
  // Releasing one frees its slot; the other program still runs.
  ASSERT_TRUE(s->release(*first).ok());
  EXPECT_TRUE(s->compile(program).ok());
  const tone::Samples data = tone::samples();
  float f[1] = {2.5f}, v[1];
  ASSERT_TRUE(s->invoke(*second, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  EXPECT_NEAR(v[0], tone::referenceMismatch(2.5), 1e-4);
}

// A directory with a self-signed certificate for localhost (cert.pem,
// key.pem), made with the openssl tool; "" when it could not be made.
std::string localhostCertificate() {
  char dir[] = "/tmp/accyd-tls-XXXXXX";
  const std::string tls = mkdtemp(dir);
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                          "-addext subjectAltName=DNS:localhost -keyout " + tls + "/key.pem -out " + tls +
                          "/cert.pem >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? tls : "";
}

// Scale-out: a target naming several hosts (what a headless Service's name
// resolves to; here an ipv4: list of two daemons on two loopback
// addresses) places each new session on one of them in turn; each session
// stays on its host (its program runs there), a host that does not answer
// is passed over, and a dns: name is resolved to its addresses.
TEST(Accyd, SessionsArePlacedOnTheHostsOfAService) {
  const std::string tls = localhostCertificate();
  if (tls.empty()) GTEST_SKIP() << "openssl could not make a test certificate";
  const int port = 20000 + (getpid() + 7919) % 20000;
  const std::vector<std::string> tls_flags = {"--tls-cert=" + tls + "/cert.pem", "--tls-key=" + tls + "/key.pem"};
  std::vector<std::string> a_flags = tls_flags, b_flags = tls_flags;
  a_flags.push_back("--listen=tcp:127.0.0.1:" + std::to_string(port));
  b_flags.push_back("--listen=tcp:127.0.0.2:" + std::to_string(port));
  Daemon a(a_flags), b(b_flags);
  std::ifstream cert_file(tls + "/cert.pem");
  RemoteOptions o;
  o.cpu_in_process = false;
  o.tls_root_certs = std::string((std::istreambuf_iterator<char>(cert_file)), std::istreambuf_iterator<char>());
  o.tls_server_name = "localhost";
  const std::string p = std::to_string(port);
  const std::string service = "ipv4:127.0.0.1:" + p + ",127.0.0.2:" + p;
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  const tone::Samples data = tone::samples();
  std::map<std::string, int> placed;
  std::vector<std::unique_ptr<RemoteSession>> sessions;
  for (int i = 0; i < 8; ++i) {
    auto s = RemoteSession::connect(service, o);
    ASSERT_TRUE(s.ok()) << s.status();
    ++placed[(*s)->host()];
    auto h = (*s)->compile(program);
    ASSERT_TRUE(h.ok()) << h.status();
    float f[1] = {2.0f + 0.1f * i}, v[1];
    ASSERT_TRUE((*s)->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
    EXPECT_NEAR(v[0], tone::referenceMismatch(f[0]), 1e-4);
    sessions.push_back(std::move(*s));
  }
  EXPECT_EQ(placed["ipv4:127.0.0.1:" + p], 4);
  EXPECT_EQ(placed["ipv4:127.0.0.2:" + p], 4);
  // Each daemon holds the sessions placed on it.
  auto sessionsOn = [&](const Daemon& d) {
    RemoteOptions local;
    local.cpu_in_process = false;
    auto probe = RemoteSession::connect(d.target(), local);
    return probe.ok() ? static_cast<int>((*probe)->serverInfo()->sessions()) - 1 : -1;
  };
  EXPECT_EQ(sessionsOn(a), 4);
  EXPECT_EQ(sessionsOn(b), 4);
  // One host stops: new sessions all go to the other.
  EXPECT_EQ(b.stop(), 0);
  for (int i = 0; i < 3; ++i) {
    auto s = RemoteSession::connect(service, o);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->host(), "ipv4:127.0.0.1:" + p);
  }
  // A dns: name: resolved, and the session placed on its address.
  RemoteOptions by_name = o;
  by_name.tls_server_name.clear();  // the name itself
  auto named = RemoteSession::connect("dns:localhost:" + p, by_name);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ((*named)->host(), "ipv4:127.0.0.1:" + p);
  sessions.clear();
  std::filesystem::remove_all(tls);
}

TEST(Accyd, TcpWithTlsServesAndLeasesFreeDeadClients) {
  const std::string tls = localhostCertificate();
  if (tls.empty()) GTEST_SKIP() << "openssl could not make a test certificate";
  const int port = 20000 + getpid() % 20000;
  Daemon d({"--listen=tcp:127.0.0.1:" + std::to_string(port), "--tls-cert=" + tls + "/cert.pem",
            "--tls-key=" + tls + "/key.pem", "--lease-seconds=1"});
  std::ifstream cert_file(tls + "/cert.pem");
  const std::string cert((std::istreambuf_iterator<char>(cert_file)), std::istreambuf_iterator<char>());
  RemoteOptions o;
  o.cpu_in_process = false;
  o.tls_root_certs = cert;
  std::unique_ptr<RemoteSession> s;
  for (int i = 0; i < 40 && !s; ++i) {  // the TCP listener may come up a moment after the Unix one
    auto c = RemoteSession::connect("dns:localhost:" + std::to_string(port), o);
    if (c.ok()) s = std::move(*c);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(s) << "no TLS connection";
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok()) << h.status();
  const tone::Samples data = tone::samples();
  float f[1] = {2.5f}, v[1];
  ASSERT_TRUE(s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  EXPECT_NEAR(v[0], tone::referenceMismatch(2.5), 1e-4);
  EXPECT_EQ(number(s->allocateShared(64).status()), 4u);  // shared memory needs the Unix socket
  // A client that stops renewing its lease is freed: the daemon's session
  // count drops back.
  {
    RemoteOptions dead = o;
    dead.keep_alive = false;
    auto gone = RemoteSession::connect("dns:localhost:" + std::to_string(port), dead);
    ASSERT_TRUE(gone.ok());
    EXPECT_EQ(s->serverInfo()->sessions(), 2u);
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_EQ(s->serverInfo()->sessions(), 1u);  // `s` keeps its own lease alive
  }
  std::filesystem::remove_all(tls);
}

// The claims of docs/ACCYD.md that had no test of their own.
TEST(Accyd, AnUnknownProtocolVersionIsRefused) {
  Daemon d({});
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  for (const std::vector<uint32_t>& offered : {std::vector<uint32_t>{99}, std::vector<uint32_t>{}}) {
    grpc::ClientContext ctx;
    accy::v1::NegotiateRequest req;
    for (uint32_t v : offered) req.add_versions(v);
    accy::v1::NegotiateReply reply;
    const grpc::Status st = stub->Negotiate(&ctx, req, &reply);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);  // unsupported_version
    EXPECT_THAT(st.error_message(), HasSubstr("the client offered none of it"));
  }
  grpc::ClientContext ctx;
  accy::v1::NegotiateRequest req;
  req.add_versions(99);
  req.add_versions(1);
  accy::v1::NegotiateReply reply;
  ASSERT_TRUE(stub->Negotiate(&ctx, req, &reply).ok());
  EXPECT_EQ(reply.version(), 1u);
}

TEST(Accyd, SocketsAreTheOwnersOnlyUnlessAGroupIsAsked) {
  for (const char* mode_flag : {"", "0660"}) {
    const std::string mode = mode_flag;
    Daemon d(mode.empty() ? std::vector<std::string>{} : std::vector<std::string>{"--socket-mode=" + mode});
    ASSERT_TRUE(connect(d));
    for (const std::string& path : {d.socket(), d.socket() + ".fd"}) {
      struct stat st;
      ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
      EXPECT_TRUE(S_ISSOCK(st.st_mode)) << path;
      EXPECT_EQ(st.st_mode & 0777, mode.empty() ? 0600u : 0660u) << path;
    }
  }
}

TEST(Accyd, TheMessageSizeLimitIsEnforced) {
  Daemon d({"--max-message-bytes=65536"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  // A program just under the limit compiles (the tone program is small);
  // a request over it is refused by gRPC before the service sees it.
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  EXPECT_TRUE(s->compile(program).ok());
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  accy::v1::CompileRequest req;
  req.set_session_id(s->sessionId());
  req.set_program(std::string(70000, 'x'));
  accy::v1::CompileReply reply;
  const grpc::Status st = stub->Compile(&ctx, req, &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_TRUE(s->serverInfo().ok());  // the daemon serves on
}

TEST(Accyd, SigintDrainsLikeSigterm) {
  Daemon d({"--threads=1"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok());
  // The connected client is idle: the daemon drops its connection once no
  // call runs instead of waiting for the client to read the goodbye
  // (gRPC's backup poller, 5 s).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(d.stop(SIGINT), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

// A kernel that runs far longer than the drain time does not hold the
// daemon: SIGTERM stops it within --drain-seconds and a second of grace.
TEST(Accyd, SigtermStopsWithinTheDrainTimeWhileAKernelRuns) {
  Daemon d({"--threads=1", "--drain-seconds=1"});
  RemoteOptions o;
  o.reconnect_seconds = 1;  // the daemon does not come back
  auto s = connect(d, o);
  ASSERT_TRUE(s);
  // About a minute of transcendental work on one thread.
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 65536}}),
                                tensor::spec(tensor::DType::f32, {{"j", 65536}})};
  auto h = s->compile(wire::encode(*tensor::define("slower", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0] * a[1]).sin().cos().exp().sum({"i", "j"});
  })));
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<float> x(65536, 0.5f), y(65536, 1.0f);
  float out[1] = {0};
  std::thread caller([&] { (void)s->invoke(*h, {bytes(x), bytes(y)}, {writableBytes(out)}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(d.stop(), 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "the daemon took " << seconds << " s to stop";
  caller.join();  // the call fails (the daemon went away) but returns
}

// A launch stops between its pieces once its call's deadline passes: the
// session (whose lock the launch holds) is free again at once, not after
// the minutes the kernel would have run.
TEST(Accyd, ALaunchStopsWhenItsCallsDeadlinePasses) {
  Daemon d({"--threads=1", "--drain-seconds=1"});
  auto s = connect(d);
  ASSERT_TRUE(s);
  // 65536 rows of 65536 points of four transcendentals: about ten seconds
  // on one thread of this machine.
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 65536}}),
                                tensor::spec(tensor::DType::f32, {{"j", 65536}})};
  auto h = s->compile(wire::encode(*tensor::define("rows", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0] * a[1]).sin().cos().exp().sin().sum("j");
  })));
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<float> x(65536, 0.5f), y(65536, 1.0f);
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  accy::v1::InvokeRequest req;
  req.set_session_id(s->sessionId());
  req.mutable_handle()->set_index(h->index & 0x7fffffffu);  // RemoteSession marks remote handles with the top bit
  req.mutable_handle()->set_generation(h->generation);
  req.add_inputs()->set_inline_bytes(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
  req.add_inputs()->set_inline_bytes(std::string(reinterpret_cast<const char*>(y.data()), y.size() * 4));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(400));
  accy::v1::InvokeReply reply;
  EXPECT_EQ(stub->Invoke(&ctx, req, &reply).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The same session answers within seconds: the launch let go of it.
  const auto start = std::chrono::steady_clock::now();
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  accy::v1::ReleaseRequest release;
  release.set_session_id(s->sessionId());
  *release.mutable_handle() = req.handle();
  accy::v1::ReleaseReply released;
  const grpc::Status st = stub->Release(&ctx2, release, &released);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_LT(seconds, 3.0) << "the session stayed busy " << seconds << " s after the deadline";
}

// A whole loop runs in one Invoke, on the cpu and vulkan devices; a while
// loop whose condition is always true stops at its call's 200 ms deadline
// (DEADLINE_EXCEEDED), and the session and the daemon serve the next
// invoke.
TEST(Accyd, LoopsRunInOneInvokeAndAnEndlessOneStopsAtItsDeadline) {
  Daemon d({"--threads=1", "--devices=cpu,vulkan", "--drain-seconds=1"});
  auto s = connect(d);
  if (s == nullptr) GTEST_SKIP() << "accyd could not start with a vulkan device (no Vulkan here)";
  auto info = s->serverInfo();
  ASSERT_TRUE(info.ok());
  std::vector<std::string> targets = {"x86_64"};
  if (std::find(info->targets().begin(), info->targets().end(), "spirv") != info->targets().end()) {
    targets.push_back("spirv");
  }
  EXPECT_EQ(targets.size(), 2u) << "a daemon started with a vulkan device serves spirv";
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {})};
  using Args = std::span<const tensor::Value>;
  auto endless = testing::endlessLoop();
  auto finite = tensor::define("finite", specs, [](tensor::Builder& b, Args a) {
    return tensor::scan(b, {.length = 1000}, {a[0]}, {},
                        [](tensor::Builder&, Args c, Args) -> absl::StatusOr<tensor::ScanStep> {
                          return tensor::ScanStep{{c[0] * 0.5f + 1.0f}, {}};
                        })
        .carry[0];
  });
  ASSERT_TRUE(endless.ok() && finite.ok());
  const float x0[1] = {3.0f};
  auto want = tensor::evaluate(*finite, {bytes(x0)});
  ASSERT_TRUE(want.ok());
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(d.target(), grpc::InsecureChannelCredentials()));
  for (const std::string& target : targets) {
    auto stuck = s->compile(wire::encode(*endless), target);
    ASSERT_TRUE(stuck.ok()) << target << ": " << stuck.status();
    auto h = s->compile(wire::encode(*finite), target);
    ASSERT_TRUE(h.ok()) << target << ": " << h.status();
    accy::v1::InvokeRequest req;
    req.set_session_id(s->sessionId());
    req.mutable_handle()->set_index(stuck->index & 0x7fffffffu);  // RemoteSession marks remote handles with the top bit
    req.mutable_handle()->set_generation(stuck->generation);
    req.add_inputs()->set_inline_bytes(std::string(reinterpret_cast<const char*>(x0), 4));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    accy::v1::InvokeReply reply;
    EXPECT_EQ(stub->Invoke(&ctx, req, &reply).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << target;
    // The next invoke in the same session: the whole scan, in one call.
    const auto start = std::chrono::steady_clock::now();
    float out[1] = {0};
    const absl::Status st = s->invoke(*h, {bytes(x0)}, {writableBytes(out)});
    ASSERT_TRUE(st.ok()) << target << ": " << st;
    EXPECT_NEAR(out[0], tensor::loadElement(tensor::DType::f32, (*want)[0].data()), 1e-5) << target;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 10.0) << target << ": the session stayed busy after the deadline";
    // The N-body example (f32, 32 bodies, 20 steps: a scan whose body
    // reads a captured input) in one invoke, against the evaluator.
    nbody::Options o;
    o.bodies = 32;
    o.steps = 20;
    o.dtype = tensor::DType::f32;
    auto sim = nbody::program(o);
    ASSERT_TRUE(sim.ok()) << sim.status();
    nbody::Buffers<float> b(nbody::start(o.bodies));
    auto sim_want = tensor::evaluate(*sim, b.inputs());
    ASSERT_TRUE(sim_want.ok()) << sim_want.status();
    auto hs = s->compile(wire::encode(*sim), target);
    ASSERT_TRUE(hs.ok()) << target << ": " << hs.status();
    const absl::Status sim_st = s->invoke(*hs, b.inputs(), b.outputs());
    ASSERT_TRUE(sim_st.ok()) << target << ": " << sim_st;
    for (size_t i = 0; i < b.pos_out.size(); ++i) {
      const float w = tensor::loadElement(tensor::DType::f32, (*sim_want)[0].data() + 4 * i);
      ASSERT_NEAR(b.pos_out[i], w, 1e-4f * (1 + std::abs(w))) << target << " position " << i;
    }
    const float e_want = tensor::loadElement(tensor::DType::f32, (*sim_want)[3].data());
    EXPECT_NEAR(b.e1[0], e_want, 1e-4f * std::abs(e_want)) << target << ": energy after";
    // The HMC example (f64; chains by vmap, a leapfrog scan inside the scan
    // of draws, gradients, random numbers) at a small size in one invoke,
    // against the evaluator draw for draw.
    absl::StatusOr<sampler::Data> data = sampler::breastCancer(40);
    ASSERT_TRUE(data.ok()) << data.status();
    sampler::Options so;
    so.chains = 2;
    so.warmup = 2;
    so.draws = 4;
    so.leapfrog = 3;
    auto hmc = sampler::program(so, data->obs, data->coefs);
    ASSERT_TRUE(hmc.ok()) << hmc.status();
    const std::span<const std::byte> hmc_in[] = {bytes(data->x), bytes(data->y)};
    auto hmc_want = tensor::evaluate(*hmc, hmc_in);
    ASSERT_TRUE(hmc_want.ok()) << hmc_want.status();
    auto hh = s->compile(wire::encode(*hmc), target);
    ASSERT_TRUE(hh.ok()) << target << ": " << hh.status();
    std::vector<double> draws(so.chains * so.draws * data->coefs), accepted(so.chains * so.draws);
    const absl::Status hmc_st =
        s->invoke(*hh, {bytes(data->x), bytes(data->y)}, {writableBytes(draws), writableBytes(accepted)});
    ASSERT_TRUE(hmc_st.ok()) << target << ": " << hmc_st;
    for (size_t i = 0; i < draws.size(); ++i) {
      const double w = tensor::loadElement(tensor::DType::f64, (*hmc_want)[0].data() + 8 * i);
      ASSERT_NEAR(draws[i], w, 1e-9 * (1 + std::abs(w))) << target << " draw element " << i;
    }
    for (size_t i = 0; i < accepted.size(); ++i) {
      EXPECT_EQ(accepted[i], tensor::loadElement(tensor::DType::f64, (*hmc_want)[1].data() + 8 * i)) << target << " " << i;
    }
    // The digits example's epoch (convolution from windows, pooling, take,
    // minibatches from random numbers, the gradient in a scan's body) at
    // three steps of eight images, against the evaluator.
    absl::StatusOr<digits::Split> images = digits::load();
    ASSERT_TRUE(images.ok()) << images.status();
    digits::Options dopt;
    dopt.steps = 3;
    dopt.batch = 8;
    auto ep = digits::epoch(dopt, images->train);
    ASSERT_TRUE(ep.ok()) << ep.status();
    digits::Weights w0 = digits::initial(dopt), w1 = w0;
    std::vector<float> losses(dopt.steps);
    const uint32_t key[] = {2026, 0};
    const digits::EpochBuffers ep_buffers = digits::epochBuffers(*images, w0, key, w1, losses);
    auto ep_want = tensor::evaluate(*ep, ep_buffers.inputs);
    ASSERT_TRUE(ep_want.ok()) << ep_want.status();
    // On Vulkan the epoch's body stage holds 33 buffers, past lavapipe's
    // 32 a stage: each kernel binds only its own (a handful), so it runs.
    auto he = s->compile(wire::encode(*ep), target);
    ASSERT_TRUE(he.ok()) << target << ": " << he.status();
    const absl::Status ep_st = s->invoke(*he, ep_buffers.inputs, ep_buffers.outputs);
    ASSERT_TRUE(ep_st.ok()) << target << ": " << ep_st;
    const std::vector<float>* got[] = {&w1.w1, &w1.b1, &w1.w2, &w1.b2, &losses};
    for (size_t k = 0; k < 5; ++k) {
      for (size_t i = 0; i < got[k]->size(); ++i) {
        const double v = tensor::loadElement(tensor::DType::f32, (*ep_want)[k].data() + 4 * i);
        ASSERT_NEAR((*got[k])[i], v, 1e-4 * (1 + std::abs(v))) << target << " digits output " << k << " element " << i;
      }
    }
  }
  EXPECT_TRUE(s->serverInfo().ok()) << "the daemon serves on";
}

// A compile past --max-compile-ms stops between passes and fails naming
// the flag; the daemon serves on, and without the limit the same program
// compiles.
TEST(Accyd, CompilesHaveATimeLimit) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 64}})};
  const std::string big = wire::encode(*tensor::define("long", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    tensor::Value v = a[0];
    for (int k = 0; k < 4000; ++k) v = (v * 1.0001 + 0.5).sin();
    return v;
  }));
  {
    Daemon d({"--max-compile-ms=5"});
    auto s = connect(d);
    ASSERT_TRUE(s);
    auto h = s->compile(big);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(number(h.status()), 7u);  // compile_failed
    EXPECT_THAT(h.status().message(), HasSubstr("took longer than 5 ms (--max-compile-ms)"));
    EXPECT_TRUE(s->serverInfo().ok());
  }
  Daemon d({});
  auto s = connect(d);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->compile(big).ok());
}

TEST(Accyd, SigtermDrainsACallInFlight) {
  Daemon d({"--threads=1"});
  auto s = connect(d);
  // A call that computes for a while on small inputs (8192 x 8192
  // transcendental elements), so it is running, not uploading, at SIGTERM.
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 8192}}),
                                tensor::spec(tensor::DType::f32, {{"j", 8192}})};
  auto h = s->compile(wire::encode(*tensor::define("slow", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return (a[0] * a[1]).sin().cos().exp().sum({"i", "j"});
  })));
  ASSERT_TRUE(h.ok());
  std::vector<float> x(8192, 0.5f), y(8192, 1.0f);
  float out[1] = {0};
  // A first call sets up the invoke channel and its shared memory, so that
  // the second one is a single call in the daemon.
  ASSERT_TRUE(s->invoke(*h, {bytes(x), bytes(y)}, {writableBytes(out)}).ok());
  out[0] = 0;
  absl::Status call_status;
  std::thread caller([&] { call_status = s->invoke(*h, {bytes(x), bytes(y)}, {writableBytes(out)}); });
  // SIGTERM once the daemon reports the call in flight (asked over a
  // second connection without keep-alives, so that only the invoke, or a
  // keep-alive it sends while it waits, can be counted), however long the
  // call takes to get there on a busy machine.
  RemoteOptions quiet;
  quiet.keep_alive = false;
  auto probe = connect(d, quiet);
  uint64_t in_flight = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (probe && in_flight == 0 && std::chrono::steady_clock::now() < deadline) {
    auto info = probe->serverInfo();
    if (!info.ok()) break;
    in_flight = info->calls_in_flight();
    if (in_flight == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(in_flight, 1u) << "the invoke was not seen in flight before SIGTERM";
  EXPECT_EQ(d.stop(), 0);  // SIGTERM while the call runs
  caller.join();
  EXPECT_TRUE(call_status.ok()) << call_status;  // it was allowed to finish
  EXPECT_NEAR(out[0], double(1 << 26) * std::exp(std::cos(std::sin(0.5))), 1e-3 * double(1 << 26));
}

TEST(Accyd, TheVulkanDeviceRunsSpirvPrograms) {
  Daemon probe({"--devices=cpu,vulkan"});
  auto s = connect(probe);
  if (!s) GTEST_SKIP() << "accyd could not start with a vulkan device (no Vulkan here)";
  auto info = s->serverInfo();
  ASSERT_TRUE(info.ok());
  ASSERT_THAT(info->targets(), ::testing::Contains("spirv"));
  auto h = s->compile(wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch)), "spirv");
  ASSERT_TRUE(h.ok()) << h.status();
  const tone::Samples data = tone::samples();
  float f8[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, v8[8];
  ASSERT_TRUE(s->invoke(*h, {bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(tone::referenceMismatch(f8[g]), v8[g], 1e-4);
}

// Indices read from data, at the i32 extremes, negative, past the end and
// duplicated, through the daemon's cpu and vulkan devices on buffers in
// shared memory: take, scatter_add and a take of a pad change no byte
// outside their outputs (canaries around every buffer, inputs unchanged)
// and give the evaluator's results.
TEST(Accyd, AdversarialIndicesStayInsideSharedBuffers) {
  Daemon d({"--devices=cpu,vulkan"});
  auto s = connect(d);
  std::vector<std::string> targets = {"x86_64"};
  if (s == nullptr) GTEST_SKIP() << "accyd could not start with a vulkan device (no Vulkan here)";
  auto info = s->serverInfo();
  ASSERT_TRUE(info.ok());
  if (std::find(info->targets().begin(), info->targets().end(), "spirv") != info->targets().end()) {
    targets.push_back("spirv");
  }
  EXPECT_EQ(targets.size(), 2u) << "a daemon started with a vulkan device serves spirv";
  const std::vector<int32_t> wild = {INT32_MIN, -1, 0, 1, 6, 7, 8, INT32_MAX, 3, 3, 3, -7, 1000000, 2};
  const int64_t n = static_cast<int64_t>(wild.size());
  const std::vector<tensor::Spec> specs = {tensor::spec(tensor::DType::f32, {{"v", 7}, {"f", 3}}),
                                           tensor::spec(tensor::DType::i32, {{"t", n}}),
                                           tensor::spec(tensor::DType::f32, {{"t", n}, {"f", 3}})};
  auto program = tensor::define("wild", specs, [](tensor::Builder&, std::span<const tensor::Value> a) -> std::vector<tensor::Value> {
    // The fourth output's rows are 3 x 1024 elements: the GPU scatters it
    // by ranges of rows (6 ranges wanted of 7 rows: 4 of 2 rows; a guarded
    // store at each index's position, choir/lower.h), the second by a
    // reduction per element.
    return {take(a[0], "v", a[1]), scatterAdd(a[0], "v", a[1], a[2]), take(a[0].pad("v", 2, 3, -1), "v", a[1]).sum("f"),
            scatterAdd(a[0].broadcast("w", 1024), "v", a[1], a[2].broadcast("w", 1024))};
  });
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<float> table(21), updates(n * 3);
  for (size_t i = 0; i < table.size(); ++i) table[i] = 0.25f * static_cast<float>(i) - 2;
  for (size_t i = 0; i < updates.size(); ++i) updates[i] = 0.5f * static_cast<float>(i % 5) - 1;
  auto want = tensor::evaluate(*program, {bytes(table), bytes(wild), bytes(updates)});
  ASSERT_TRUE(want.ok()) << want.status();
  for (const std::string& target : targets) {
    auto h = s->compile(wire::encode(*program), target);
    ASSERT_TRUE(h.ok()) << target << ": " << h.status();
    // Buffers at least 256 bytes apart, each at a 1 KiB boundary: inputs,
    // then outputs.
    constexpr size_t kGap = 256;
    std::vector<size_t> sizes = {table.size() * 4, wild.size() * 4, updates.size() * 4};
    for (const tensor::Spec& o : program->outputSpecs()) sizes.push_back(static_cast<size_t>(o.byteSize()));
    std::vector<size_t> offsets;
    size_t end = kGap;
    for (size_t size : sizes) {
      offsets.push_back(end);
      end = (end + size + kGap + 1023) / 1024 * 1024;
    }
    auto buf = s->allocateShared(end);
    ASSERT_TRUE(buf.ok()) << buf.status();
    std::span<std::byte> mem = (*buf)->bytes();
    std::fill(mem.begin(), mem.end(), std::byte{0xA5});
    std::vector<std::span<std::byte>> at;
    for (size_t k = 0; k < sizes.size(); ++k) at.push_back(mem.subspan(offsets[k], sizes[k]));
    std::memcpy(at[0].data(), table.data(), sizes[0]);
    std::memcpy(at[1].data(), wild.data(), sizes[1]);
    std::memcpy(at[2].data(), updates.data(), sizes[2]);
    const std::vector<std::byte> before(mem.begin(), mem.end());
    auto st = s->invoke(*h, {at[0], at[1], at[2]}, {at[3], at[4], at[5], at[6]});
    ASSERT_TRUE(st.ok()) << target << ": " << st;
    // Every byte outside the outputs is as it was.
    for (size_t i = 0; i < mem.size(); ++i) {
      bool in_output = false;
      for (size_t k = 3; k < sizes.size(); ++k) in_output = in_output || (i >= offsets[k] && i < offsets[k] + sizes[k]);
      if (!in_output && mem[i] != before[i]) {
        ADD_FAILURE() << target << ": byte " << i << " outside the outputs changed";
        break;
      }
    }
    for (size_t k = 0; k < 4; ++k) {
      const auto* got = reinterpret_cast<const float*>(at[3 + k].data());
      const auto* ref = reinterpret_cast<const float*>((*want)[k].data());
      for (size_t e = 0; e < sizes[3 + k] / 4; ++e) {
        EXPECT_NEAR(got[e], ref[e], 1e-5 * (1 + std::fabs(ref[e]))) << target << " output " << k << " element " << e;
      }
    }
  }
}

// Arithmetic modes through the daemon: fast on the vulkan device runs (the
// fast and exact programs are cached apart); tf32 for a target without it
// fails to compile with the reason, and so do an unknown option or mode.
TEST(Accyd, ArithmeticModesAreCompileOptions) {
  Daemon probe({"--devices=cpu,vulkan"});
  auto s = connect(probe);
  if (!s) GTEST_SKIP() << "accyd could not start with a vulkan device (no Vulkan here)";
  RemoteOptions no_local;
  no_local.cpu_in_process = false;
  const std::string wire8 = wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch));
  session::CompileInfo exact_info, fast_info;
  auto exact = s->compile(wire8, "spirv", &exact_info);
  auto fast = s->compile(wire8, "spirv", &fast_info, {.mode = codegen::ArithmeticMode::kFast});
  ASSERT_TRUE(exact.ok() && fast.ok()) << exact.status() << fast.status();
  EXPECT_EQ(fast_info.cache_level, "");  // not the exact program's entry
  const tone::Samples data = tone::samples();
  float f8[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5}, v8[8];
  ASSERT_TRUE(s->invoke(*fast, {bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(tone::referenceMismatch(f8[g]), v8[g], 1e-3);  // GLSL.std.450 sin
  // A mode the target cannot honour is a failed compile (status
  // compile_failed), as the original has it, with the reason.
  auto tf32 = s->compile(wire8, "spirv", nullptr, {.mode = codegen::ArithmeticMode::kTf32});
  EXPECT_EQ(session::statusOf(tf32.status()), session::Status::compile_failed);
  EXPECT_THAT(tf32.status().message(), ::testing::HasSubstr("target spirv has no tf32 mode"));
  // The daemon's cpu device, and the in-process CPU path, say the same.
  auto remote_cpu = RemoteSession::connect(probe.target(), no_local);
  ASSERT_TRUE(remote_cpu.ok()) << remote_cpu.status();
  auto cpu_tf32 = (*remote_cpu)->compile(wire8, "x86_64", nullptr, {.mode = codegen::ArithmeticMode::kTf32});
  EXPECT_THAT(cpu_tf32.status().message(), ::testing::HasSubstr("target x86_64 has no tf32 mode"));
  auto local_tf32 = s->compile(wire8, "x86_64", nullptr, {.mode = codegen::ArithmeticMode::kTf32});
  EXPECT_THAT(local_tf32.status().message(), ::testing::HasSubstr("target x86_64 has no tf32 mode"));
  // A target the registry does not know is refused naming the build's
  // targets, and leaves the session as it was: it still compiles for spirv.
  auto unknown = s->compile(wire8, "vhdl", nullptr);
  EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("target vhdl is not available in this build (available: "));
  // A target of the build that no device of the daemon serves (msl: its
  // shim is a check, not a device) is refused naming the served ones.
  auto unserved = s->compile(wire8, "msl", nullptr);
  EXPECT_THAT(unserved.status().message(), ::testing::HasSubstr("target 'msl' is not served here"));
  auto again = s->compile(wire8, "spirv", nullptr, {.mode = codegen::ArithmeticMode::kFast});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(s->invoke(*again, {bytes(f8), bytes(data.time), bytes(data.sample)}, {writableBytes(v8)}).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(tone::referenceMismatch(f8[g]), v8[g], 1e-3);
  // Raw requests: an unknown option and an unknown mode are named.
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(probe.target(), grpc::InsecureChannelCredentials()));
  for (auto [key, value, says] : {std::tuple<std::string, std::string, std::string>{"precision", "high",
                                                                                   "unknown compile option 'precision'"},
                                  {"mode", "turbo", "unknown arithmetic mode 'turbo'"}}) {
    grpc::ClientContext ctx;
    accy::v1::CompileRequest req;
    accy::v1::CompileReply reply;
    req.set_session_id(s->sessionId());
    req.set_program(wire8);
    req.set_target("spirv");
    (*req.mutable_options())[key] = value;
    grpc::Status gst = stub->Compile(&ctx, req, &reply);
    EXPECT_EQ(gst.error_code(), grpc::StatusCode::INTERNAL) << key;  // compile_failed
    EXPECT_THAT(gst.error_message(), HasSubstr(says));
    auto trailer = ctx.GetServerTrailingMetadata().find("accy-status");
    ASSERT_NE(trailer, ctx.GetServerTrailingMetadata().end());
    EXPECT_EQ(std::string(trailer->second.data(), trailer->second.size()), "7");  // compile_failed
  }
}

// Mutual TLS: RemoteSession presents a client certificate, the daemon
// requires one signed by its client CA, and a session belongs to the
// identity that opened it: its id presented by another certificate is
// NOT_FOUND, as an unknown id is.
TEST(Accyd, MutualTlsTiesSessionsToTheirOwner) {
  char dir[] = "/tmp/accyd-mtls-XXXXXX";
  const std::string tls = mkdtemp(dir);
  const std::string ssl = "openssl";
  const std::string q = " >/dev/null 2>&1";
  const std::string cmd =
      ssl + " req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout " + tls + "/ca.key -out " + tls +
      "/ca.pem" + q + " && " + ssl + " req -newkey rsa:2048 -nodes -subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout " +
      tls + "/server.key -out " + tls + "/server.csr" + q + " && " + ssl + " x509 -req -in " + tls + "/server.csr -CA " +
      tls + "/ca.pem -CAkey " + tls + "/ca.key -CAcreateserial -days 1 -copy_extensions copy -out " + tls + "/server.pem" + q +
      " && for who in alice bob; do " + ssl + " req -newkey rsa:2048 -nodes -subj /CN=$who -keyout " + tls +
      "/$who.key -out " + tls + "/$who.csr" + q + " && " + ssl + " x509 -req -in " + tls + "/$who.csr -CA " + tls +
      "/ca.pem -CAkey " + tls + "/ca.key -CAcreateserial -days 1 -out " + tls + "/$who.pem" + q + " || exit 1; done";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl could not make the test certificates";
  auto read = [&](const std::string& name) {
    std::ifstream f(tls + "/" + name);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const int port = 20000 + (getpid() + 7919) % 20000;
  Daemon d({"--listen=tcp:127.0.0.1:" + std::to_string(port), "--tls-cert=" + tls + "/server.pem",
            "--tls-key=" + tls + "/server.key", "--tls-client-ca=" + tls + "/ca.pem", "--max-sessions-per-identity=1"});
  const std::string target = "dns:localhost:" + std::to_string(port);
  auto as = [&](const std::string& who) {
    RemoteOptions o;
    o.cpu_in_process = false;
    o.tls_root_certs = read("ca.pem");
    if (!who.empty()) {
      o.tls_client_cert = read(who + ".pem");
      o.tls_client_key = read(who + ".key");
    }
    std::unique_ptr<RemoteSession> s;
    for (int i = 0; i < 40 && !s; ++i) {  // the TCP listener may come up a moment after the Unix one
      auto c = RemoteSession::connect(target, o);
      if (c.ok()) s = std::move(*c);
      else if (who.empty()) return s;  // no certificate: refused, no retry needed
      else std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return s;
  };
  auto alice = as("alice");
  ASSERT_TRUE(alice) << "alice could not connect";
  auto h = alice->compile(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  ASSERT_TRUE(h.ok()) << h.status();
  auto bob = as("bob");
  ASSERT_TRUE(bob) << "bob could not connect";
  // Bob presents Alice's session id.
  grpc::SslCredentialsOptions bob_tls;
  bob_tls.pem_root_certs = read("ca.pem");
  bob_tls.pem_cert_chain = read("bob.pem");
  bob_tls.pem_private_key = read("bob.key");
  auto stub = accy::v1::Accyd::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(bob_tls)));
  grpc::ClientContext ctx;
  accy::v1::CompileRequest req;
  req.set_session_id(alice->sessionId());
  req.set_program(wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch)));
  accy::v1::CompileReply reply;
  const grpc::Status stolen = stub->Compile(&ctx, req, &reply);
  EXPECT_EQ(stolen.error_code(), grpc::StatusCode::NOT_FOUND) << stolen.error_message();
  // Alice still uses hers; a client without a certificate is refused.
  const tone::Samples data = tone::samples();
  float f[1] = {2.5f}, v[1];
  ASSERT_TRUE(alice->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
  EXPECT_NEAR(v[0], tone::referenceMismatch(2.5), 1e-4);
  EXPECT_FALSE(as(""));
  // Each identity has its own session quota (one here): Alice's second
  // session is refused while Bob holds his.
  RemoteOptions again;
  again.cpu_in_process = false;
  again.tls_root_certs = read("ca.pem");
  again.tls_client_cert = read("alice.pem");
  again.tls_client_key = read("alice.key");
  auto second = RemoteSession::connect(target, again);
  EXPECT_EQ(number(second.status()), 5u) << second.status();  // too_many_programs: RESOURCE_EXHAUSTED
  EXPECT_THAT(second.status().message(), HasSubstr("the limit per identity is 1"));
  std::filesystem::remove_all(tls);
}

TEST(Accyd, TcpWithoutTlsIsRefused) {
  const std::string binary = runfile("server/accyd");
  const std::string command = binary + " --listen=tcp:127.0.0.1:0 2>/dev/null";
  const int status = std::system(command.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

// Needs a stamped accyd (tools/run_tests.sh builds one and sets
// ACCYD_STAMPED_BINARY): an unstamped daemon keeps no disk cache.
// The daemon killed with SIGKILL in the middle of an invoke and started
// again on the same socket (with its disk cache when it is a stamped build,
// as make test runs it): clients re-open their sessions by themselves (the
// same handles, the same shared buffers, the channel opened again) and
// their next calls give the right results; the disk cache holds no corrupt
// entry and serves the recompiles.
TEST(Accyd, TheDaemonKilledAndRestartedClientsReconnect) {
  const char* stamped = std::getenv("ACCYD_STAMPED_BINARY");
  char dir[] = "/tmp/accyd-cache-XXXXXX";
  const std::string cache = mkdtemp(dir);
  Daemon d({"--cache-dir=" + cache}, stamped != nullptr ? stamped : "");
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<RemoteSession>> clients;
  std::vector<session::Handle> handles;
  std::vector<std::unique_ptr<client::SharedBuffer>> buffers;
  const tone::Samples data = tone::samples();
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(8), tone::mismatch));
  for (int c = 0; c < kClients; ++c) {
    RemoteOptions o;
    o.invoke_channel = c % 2 == 0;
    clients.push_back(connect(d, o));
    ASSERT_TRUE(clients.back());
    auto h = clients.back()->compile(program);
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
    auto buffer = clients.back()->allocateShared(4096);
    ASSERT_TRUE(buffer.ok());
    float* in = reinterpret_cast<float*>((*buffer)->bytes().data());
    std::memcpy(in + 8, data.time.data(), sizeof data.time);
    std::memcpy(in + 24, data.sample.data(), sizeof data.sample);
    buffers.push_back(std::move(*buffer));
  }
  // Each client: an inline invoke and one in its shared buffer, checked.
  auto work = [&](int c, float shift) -> absl::Status {
    float f[8], v[8];
    for (int g = 0; g < 8; ++g) f[g] = 0.5f + g + shift;
    if (absl::Status st = clients[c]->invoke(handles[c], {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)});
        !st.ok()) {
      return st;
    }
    float* in = reinterpret_cast<float*>(buffers[c]->bytes().data());
    std::memcpy(in, f, sizeof f);
    if (absl::Status st = clients[c]->invoke(handles[c], {bytes(std::span(in, 8)), bytes(std::span(in + 8, 16)), bytes(std::span(in + 24, 16))},
                                              {writableBytes(std::span(in + 40, 8))});
        !st.ok()) {
      return st;
    }
    for (int g = 0; g < 8; ++g) {
      if (std::fabs(v[g] - tone::referenceMismatch(f[g])) > 1e-4 || std::fabs(in[40 + g] - v[g]) > 1e-6) {
        return absl::InternalError("wrong result for guess " + std::to_string(g));
      }
    }
    return absl::OkStatus();
  };
  for (int c = 0; c < kClients; ++c) ASSERT_TRUE(work(c, 0).ok());
  constexpr int kKills = 3;
  for (int round = 1; round <= kKills; ++round) {
    // Killed while the clients keep calling: some calls are in flight.
    std::vector<std::thread> callers;
    std::atomic<int> failures{0};
    for (int c = 0; c < kClients; ++c) {
      callers.emplace_back([&, c] {
        for (int n = 0; n < 20; ++n) {
          if (!work(c, 0.01f * n).ok()) ++failures;
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    d.kill9();
    d.start();
    for (auto& t : callers) t.join();
    EXPECT_EQ(failures.load(), 0) << "round " << round;
    for (int c = 0; c < kClients; ++c) {
      const absl::Status st = work(c, 0.5f);
      EXPECT_TRUE(st.ok()) << "client " << c << " after restart " << round << ": " << st;
    }
  }
  int reconnects = 0;
  for (const auto& c : clients) reconnects += c->reconnects();
  EXPECT_GE(reconnects, kClients * kKills);
  EXPECT_EQ(clients[0]->invokeChannel(), "open");
  auto info = clients[0]->serverInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->cache().corrupt_entries(), 0u);
  if (info->build_record().stamped()) {
    EXPECT_TRUE(info->cache().disk_enabled()) << info->cache().disk_disabled_reason();
    EXPECT_GE(info->cache().disk_hits(), 1u);  // the recompiles after the last restart
  }
  std::printf("restart: %d daemon kills (SIGKILL mid-call), %d clients, %d reconnects, 0 failed calls, disk cache %s "
              "(%llu hits after the last restart, %llu corrupt entries)\n",
              kKills, kClients, reconnects, info->cache().disk_enabled() ? "on" : "off (unstamped build)",
              static_cast<unsigned long long>(info->cache().disk_hits()),
              static_cast<unsigned long long>(info->cache().corrupt_entries()));
  clients.clear();
  buffers.clear();
  EXPECT_EQ(d.stop(), 0);
  std::filesystem::remove_all(cache);
}

TEST(Accyd, RestartWithAWarmDiskCacheAndACorruptedEntry) {
  const char* binary = std::getenv("ACCYD_STAMPED_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "set ACCYD_STAMPED_BINARY to a stamped accyd (make test does)";
  char dir[] = "/tmp/accyd-cache-XXXXXX";
  const std::string cache = mkdtemp(dir);
  const std::string program = wire::encode(*tensor::define("mismatch", toneSpecs(0), tone::mismatch));
  auto compileOnce = [&](const char* expect_level) {
    Daemon d({"--cache-dir=" + cache}, binary);
    auto s = connect(d);
    ASSERT_TRUE(s);
    auto info = s->serverInfo();
    ASSERT_TRUE(info->build_record().stamped());
    ASSERT_TRUE(info->cache().disk_enabled()) << info->cache().disk_disabled_reason();
    session::CompileInfo ci;
    auto h = s->compile(program, "x86_64", &ci);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(ci.cache_level, expect_level);
    const tone::Samples data = tone::samples();
    float f[1] = {2.5f}, v[1];
    ASSERT_TRUE(s->invoke(*h, {bytes(f), bytes(data.time), bytes(data.sample)}, {writableBytes(v)}).ok());
    EXPECT_NEAR(v[0], tone::referenceMismatch(2.5), 1e-4);
    EXPECT_EQ(d.stop(), 0);
  };
  compileOnce("");      // fresh compile, written to disk
  compileOnce("disk");  // a restarted daemon hits its disk cache
  for (const auto& e : std::filesystem::directory_iterator(cache)) {
    if (e.path().extension() != ".exe") continue;  // the entries, not the key
    std::fstream file(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x33');
  }
  compileOnce("");      // the corrupted entry is detected and recompiled
  compileOnce("disk");
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace accy
