// The session module's behaviour, after the original: handles with
// generations, descriptors, in-place runs, and each of the eight failure
// statuses produced by a real case and asserted by number.
#include "runtime/session.h"

#include <cstring>

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::session {
namespace {

using ::testing::HasSubstr;
namespace tensor = accy::tensor;

std::string toneBytes() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  return wire::encode(*tensor::define("mismatch", specs, tone::mismatch));
}

uint32_t number(const absl::Status& st) { return static_cast<uint32_t>(statusOf(st)); }

TEST(Session, CompileDescribeInvokeRelease) {
  Session s;
  auto h = s.compile(toneBytes());
  ASSERT_TRUE(h.ok()) << h.status();
  auto in = s.inputDescriptors(*h);
  ASSERT_TRUE(in.ok());
  ASSERT_EQ(in->size(), 3u);
  EXPECT_EQ((*in)[1].axes, (std::vector<tensor::Axis>{{"point", 16}}));
  EXPECT_EQ((*in)[1].byte_size, 64u);
  EXPECT_EQ((*in)[1].alignment, 4u);
  auto out = s.outputDescriptors(*h);
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].byte_size, 4u);
  tone::Samples data = tone::samples();
  const tone::Samples before = data;
  float freq[1] = {2.5f}, value[1] = {0};
  ASSERT_TRUE(s.invoke(*h, {bytes(freq), bytes(data.time), bytes(data.sample)}, {writableBytes(value)}).ok());
  EXPECT_NEAR(value[0], 8.656, 5e-4);
  EXPECT_EQ(std::memcmp(&before, &data, sizeof data), 0);  // inputs unchanged
  EXPECT_FALSE(s.lastCause().has_value());
  ASSERT_TRUE(s.release(*h).ok());
}

TEST(Session, ReleasedHandleAndEveryCopyAreRefused) {
  Session s;
  auto h = s.compile(toneBytes());
  ASSERT_TRUE(h.ok());
  const Handle copy = *h;
  ASSERT_TRUE(s.release(*h).ok());
  EXPECT_EQ(number(s.release(copy)), 3u);
  EXPECT_EQ(number(s.inputDescriptors(copy).status()), 3u);
  // The slot is reused with a new generation; the old handle stays dead.
  auto again = s.compile(toneBytes());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->index, copy.index);
  EXPECT_NE(again->generation, copy.generation);
  EXPECT_EQ(number(s.outputDescriptors(copy).status()), 3u);
  EXPECT_TRUE(s.outputDescriptors(*again).ok());
  EXPECT_EQ(number(s.release(Handle{999, 0})), 3u);
}

TEST(Session, EveryFailureStatusByNumber) {
  tone::Samples data = tone::samples();
  float freq[1] = {2.5f}, value[1];
  // 1 invalid_program: bytes that are not a program.
  {
    Session s;
    auto st = s.compile("ACCY\x01\x00\x00\x00garbage!!").status();
    EXPECT_EQ(number(st), 1u) << st;
    ASSERT_TRUE(s.lastCause().has_value());
  }
  // 2 unsupported_version: major version 9.
  {
    Session s;
    std::string b = toneBytes();
    b[4] = 9;
    auto st = s.compile(b).status();
    EXPECT_EQ(number(st), 2u) << st;
    EXPECT_THAT(st.message(), HasSubstr("version 9.0"));
  }
  // 3 invalid_handle: covered above; 4 invalid_buffer: a wrong size.
  {
    Session s;
    auto h = s.compile(toneBytes());
    ASSERT_TRUE(h.ok());
    auto st = s.invoke(*h, {bytes(freq), std::as_bytes(std::span(data.time).first(15)), bytes(data.sample)},
                       {writableBytes(value)});
    EXPECT_EQ(number(st), 4u) << st;
    ASSERT_TRUE(s.lastCause().has_value());  // went through the mapping
    // A count mismatch is returned directly and leaves lastCause alone.
    const absl::Status cause = *s.lastCause();
    EXPECT_EQ(number(s.invoke(*h, {bytes(freq)}, {writableBytes(value)})), 4u);
    EXPECT_EQ(*s.lastCause(), cause);
    EXPECT_EQ(number(s.invoke(Handle{h->index, h->generation + 1}, {}, {})), 3u);
  }
  // 5 too_many_programs: the 65th program.
  {
    Session s;
    const std::string b = toneBytes();
    for (uint32_t i = 0; i < kMaxPrograms; ++i) ASSERT_TRUE(s.compile(b).ok()) << i;
    EXPECT_EQ(number(s.compile(b).status()), 5u);
    EXPECT_FALSE(s.lastCause().has_value());
  }
  // 6 out_of_memory: temporaries beyond the session's scratch limit.
  {
    SessionOptions o;
    o.max_scratch_bytes = 1024;
    Session s(o);
    const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"a", 64}}),
                                  tensor::spec(tensor::DType::f32, {{"b", 64}})};
    // exp(x*y) over (a, b) is read at two different places, so it is kept
    // in a 16 KiB temporary rather than recomputed.
    auto p = tensor::define("big", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
      tensor::Value t = (v[0] * v[1]).exp();
      return t.sum("a").sum("b") + t.slice("a", 1, 64).sum({"a", "b"});
    });
    ASSERT_TRUE(p.ok());
    auto st = s.compile(wire::encode(*p)).status();
    EXPECT_EQ(number(st), 6u) << st;
  }
  // 7 compile_failed: more nodes than the session compiles.
  {
    SessionOptions o;
    o.max_compile_nodes = 4;
    Session s(o);
    auto st = s.compile(toneBytes()).status();
    EXPECT_EQ(number(st), 7u) << st;
    EXPECT_THAT(st.message(), HasSubstr("at most 4"));
  }
  // 8 launch_failed: check_numerics finds a NaN in an output.
  {
    SessionOptions o;
    o.check_numerics = true;
    Session s(o);
    const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"a", 3}})};
    auto p = tensor::define("log", specs, [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0].log(); });
    auto h = s.compile(wire::encode(*p));
    ASSERT_TRUE(h.ok());
    float x[3] = {1, -1, 2}, y[3];
    auto st = s.invoke(*h, {bytes(x)}, {writableBytes(y)});
    EXPECT_EQ(number(st), 8u) << st;
    EXPECT_THAT(st.message(), HasSubstr("output 0 element 1"));
  }
}

}  // namespace
}  // namespace accy::session
