#include "tools/artifact.h"

#include <gtest/gtest.h>

#include <cstring>

#include "accy/accy.h"
#include "examples/tone/tone.h"

namespace accy::artifact {
namespace {

namespace tensor = accy::tensor;

executable::Executable toneExecutable() {
  const tensor::Spec specs[] = {
      tensor::spec(tensor::DType::f32, {}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  absl::StatusOr<tensor::Program> program = tensor::define("mismatch", specs, tone::mismatch);
  EXPECT_TRUE(program.ok()) << program.status();
  x64::CompileOptions options;
  options.threads = 1;
  absl::StatusOr<executable::Executable> exe = x64::compileProgram(*program, options);
  EXPECT_TRUE(exe.ok()) << exe.status();
  return *exe;
}

void expectSame(const executable::Executable& a, const executable::Executable& b) {
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.isa, b.isa);
  EXPECT_EQ(a.code, b.code);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.artifact_plan.scratch_bytes, b.artifact_plan.scratch_bytes);
  ASSERT_EQ(a.artifact_plan.buffers.size(), b.artifact_plan.buffers.size());
  for (size_t i = 0; i < a.artifact_plan.buffers.size(); ++i) {
    const executable::BufferPlan& x = a.artifact_plan.buffers[i];
    const executable::BufferPlan& y = b.artifact_plan.buffers[i];
    EXPECT_EQ(x.role, y.role);
    EXPECT_EQ(x.io_index, y.io_index);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.alignment, y.alignment);
    EXPECT_EQ(x.scratch_offset, y.scratch_offset);
  }
  ASSERT_EQ(a.launch_plan.steps.size(), b.launch_plan.steps.size());
  for (size_t i = 0; i < a.launch_plan.steps.size(); ++i) {
    EXPECT_EQ(a.launch_plan.steps[i].kernel, b.launch_plan.steps[i].kernel);
    EXPECT_EQ(a.launch_plan.steps[i].entry_offset, b.launch_plan.steps[i].entry_offset);
    EXPECT_EQ(a.launch_plan.steps[i].parallel_extent, b.launch_plan.steps[i].parallel_extent);
    EXPECT_EQ(a.launch_plan.steps[i].work, b.launch_plan.steps[i].work);
  }
}

TEST(ArtifactTest, RoundTripLoadsAndRuns) {
  const executable::Executable exe = toneExecutable();
  const std::string bytes = serialize(exe);
  ASSERT_GE(bytes.size(), 12u);
  EXPECT_EQ(std::memcmp(bytes.data(), "ACCYEXE\0", 8), 0);
  EXPECT_EQ(bytes[8], 1);
  absl::StatusOr<executable::Executable> back = deserialize(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  expectSame(exe, *back);
  EXPECT_EQ(serialize(*back), bytes);

  absl::StatusOr<cpu::LoadedExecutable> loaded = cpu::LoadedExecutable::load(*back, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const tone::Samples data = tone::samples();
  const float frequency[1] = {2.5f};
  float out[1] = {0};
  const std::span<const std::byte> ins[] = {accy::bytes(frequency), accy::bytes(data.time),
                                            accy::bytes(data.sample)};
  const std::span<std::byte> outs[] = {accy::writableBytes(out)};
  ASSERT_TRUE(loaded->launch(ins, outs).ok());
  EXPECT_NEAR(out[0], 8.656, 1e-3);
}

TEST(ArtifactTest, EveryTruncationFails) {
  const std::string bytes = serialize(toneExecutable());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<executable::Executable> e = deserialize(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(e.ok()) << "prefix of " << n << " bytes";
  }
}

TEST(ArtifactTest, RejectsBadMagicVersionAndTrailingBytes) {
  std::string bytes = serialize(toneExecutable());
  std::string m = bytes;
  m[0] = 'X';
  EXPECT_NE(std::string(deserialize(m).status().message()).find("magic"), std::string::npos);
  std::string v = bytes;
  v[8] = 2;
  EXPECT_NE(std::string(deserialize(v).status().message()).find("version 2"), std::string::npos);
  EXPECT_NE(std::string(deserialize(bytes + "x").status().message()).find("after the last kernel"),
            std::string::npos);
}

TEST(ArtifactTest, RejectsInconsistentPlans) {
  executable::Executable exe = toneExecutable();
  exe.launch_plan.steps[0].entry_offset = exe.code.size() + 10;
  absl::StatusOr<executable::Executable> e = deserialize(serialize(exe));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("outside the code"), std::string::npos) << e.status();

  executable::Executable f = toneExecutable();
  f.outputs.clear();
  EXPECT_FALSE(deserialize(serialize(f)).ok());
}

TEST(ArtifactTest, FlippedBytesNeverCrash) {
  const std::string bytes = serialize(toneExecutable());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string b = bytes;
      b[i] = static_cast<char>(static_cast<uint8_t>(b[i]) ^ flip);
      (void)deserialize(b);  // must fail cleanly or decode; never crash
    }
  }
}

}  // namespace
}  // namespace accy::artifact
