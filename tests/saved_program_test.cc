// Saving and restoring compiled programs (tensor::CpuExecutable::save,
// restore, and tensor::saveExecutable, restoreExecutable for any target's
// executable). In a build without a build record (every `bazel test` build)
// both directions are refused with UnrecordedCompilerBuild; in a stamped
// build (tools/run_tests.sh builds one and runs this binary) a program
// round-trips and runs the same, and damaged, truncated, foreign-build and
// foreign-CPU bytes are refused by name before anything runs.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "accy/accy.h"
#include "backends/registry.h"
#include "compiler/codegen/targets.h"
#include "compiler/executable/build_record.h"
#include "compiler/executable/codec.h"
#include "compiler/executable/saved_program.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy {
namespace {

using ::testing::HasSubstr;

tensor::CpuExecutable toneExecutable() {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"guess", 8}}),
                                tensor::spec(tensor::DType::f32, {{"point", 16}}),
                                tensor::spec(tensor::DType::f32, {{"point", 16}})};
  auto p = tensor::define("mismatch", specs, tone::mismatch);
  EXPECT_TRUE(p.ok());
  return *tensor::CpuExecutable::compile(*p);
}

std::vector<float> runTone(const tensor::CpuExecutable& exe) {
  const tone::Samples data = tone::samples();
  std::vector<float> guesses = {2.5f, 2.75f, 3.0f, 3.25f, 3.5f, 1.0f, 4.0f, 5.0f}, out(8, -1.0f);
  const std::span<const std::byte> in[] = {std::as_bytes(std::span(guesses)), std::as_bytes(std::span(data.time)),
                                           std::as_bytes(std::span(data.sample))};
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(out))};
  EXPECT_TRUE(exe.launch(in, outs).ok());
  return out;
}

// Bytes as saveProgram lays them out, for an executable and record text
// chosen by the test (to show what restore refuses).
std::string forged(const std::string& record_text, const executable::Executable& exe) {
  const std::string body = executable::serializeExecutable(exe);
  std::string out(executable::kSavedMagic);
  const uint32_t n = static_cast<uint32_t>(record_text.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += record_text;
  const uint64_t m = body.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((m >> (8 * i)) & 0xff));
  out += body;
  return out + executable::sha256(out);
}

// The tone program compiled for a GPU target (SPIR-V for Vulkan, wasm).
executable::Executable gpuExecutable(std::string_view target) {
  auto p = tensor::define("mismatch", tone::specs({{"guess", 8}}), tone::mismatch);
  EXPECT_TRUE(p.ok());
  absl::StatusOr<executable::Executable> exe = codegen::compileFor(target, *p, {});
  EXPECT_TRUE(exe.ok()) << exe.status();
  return *exe;
}

TEST(SavedPrograms, AnUnstampedBuildRefusesBothDirections) {
  if (executable::buildRecord().stamped) GTEST_SKIP() << "this binary is stamped: the stamped cases run instead";
  const tensor::CpuExecutable exe = toneExecutable();
  absl::StatusOr<std::string> saved = exe.save();
  ASSERT_FALSE(saved.ok());
  EXPECT_EQ(errorKind(saved.status()), ErrorKind::kUnrecordedCompilerBuild);
  EXPECT_THAT(std::string(saved.status().message()), HasSubstr("saving a compiled program"));
  absl::StatusOr<tensor::CpuExecutable> restored = tensor::CpuExecutable::restore("ACCYSAVED1\nanything");
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(errorKind(restored.status()), ErrorKind::kUnrecordedCompilerBuild);
  EXPECT_FALSE(exe.saveToFile(::testing::TempDir() + "/never.accy").ok());
  // A GPU target's executable: the same rule.
  absl::StatusOr<std::string> gpu = tensor::saveExecutable(gpuExecutable("spirv"));
  EXPECT_EQ(errorKind(gpu.status()), ErrorKind::kUnrecordedCompilerBuild);
  EXPECT_EQ(errorKind(tensor::restoreExecutable("ACCYSAVED1\nanything").status()), ErrorKind::kUnrecordedCompilerBuild);
}

class StampedSavedPrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!executable::buildRecord().stamped) {
      GTEST_SKIP() << "needs a stamped build (make test builds one and runs this binary from it)";
    }
  }
};

TEST_F(StampedSavedPrograms, AProgramRoundTripsAndRunsTheSame) {
  const tensor::CpuExecutable exe = toneExecutable();
  absl::StatusOr<std::string> saved = exe.save();
  ASSERT_TRUE(saved.ok()) << saved.status();
  absl::StatusOr<tensor::CpuExecutable> restored = tensor::CpuExecutable::restore(*saved);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(runTone(*restored), runTone(exe));
  EXPECT_NEAR(runTone(*restored)[2], 0.0f, 1e-4);  // guess 3 is the frequency
  // Through a file.
  const std::string path = ::testing::TempDir() + "/tone.accy";
  ASSERT_TRUE(exe.saveToFile(path).ok());
  absl::StatusOr<tensor::CpuExecutable> from_file = tensor::CpuExecutable::restoreFromFile(path);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(runTone(*from_file), runTone(exe));
  std::remove(path.c_str());
}

// SPIR-V and wasm executables round-trip whole; the restored SPIR-V runs on
// the Vulkan device (lavapipe here) and matches the evaluator.
TEST_F(StampedSavedPrograms, GpuExecutablesRoundTrip) {
  for (std::string_view target : {"spirv", "wasm"}) {
    const executable::Executable exe = gpuExecutable(target);
    absl::StatusOr<std::string> saved = tensor::saveExecutable(exe);
    ASSERT_TRUE(saved.ok()) << saved.status();
    const std::string path = ::testing::TempDir() + "/gpu.accy";
    ASSERT_TRUE(tensor::saveExecutableToFile(exe, path).ok());
    for (absl::StatusOr<executable::Executable> r : {tensor::restoreExecutable(*saved), tensor::restoreExecutableFromFile(path)}) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->target, exe.target);
      EXPECT_EQ(r->isa, exe.isa);
      EXPECT_EQ(r->code, exe.code) << target;
      ASSERT_EQ(r->launch_plan.steps.size(), exe.launch_plan.steps.size());
      EXPECT_EQ(r->artifact_plan.buffers.size(), exe.artifact_plan.buffers.size());
    }
    std::remove(path.c_str());
    std::string flipped = *saved;
    flipped[flipped.size() / 3] ^= 0x01;
    EXPECT_THAT(std::string(tensor::restoreExecutable(flipped).status().message()), HasSubstr("damaged"));
  }
  absl::StatusOr<std::vector<std::unique_ptr<backends::Backend>>> vulkan =
      backends::selectBackends({"vulkan"}, backends::BackendOptions{});
  if (!vulkan.ok() || !vulkan->front()->info().available) {
    std::printf("no Vulkan device: the restored SPIR-V was compared, not run\n");
    return;
  }
  absl::StatusOr<executable::Executable> restored = tensor::restoreExecutable(*tensor::saveExecutable(gpuExecutable("spirv")));
  ASSERT_TRUE(restored.ok());
  auto loaded = vulkan->front()->load(*std::move(restored));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const tone::Samples data = tone::samples();
  std::vector<float> guesses = {2.5f, 2.75f, 3.0f, 3.25f, 3.5f, 1.0f, 4.0f, 5.0f}, out(8, -1.0f);
  const std::span<const std::byte> in[] = {std::as_bytes(std::span(guesses)), std::as_bytes(std::span(data.time)),
                                           std::as_bytes(std::span(data.sample))};
  const std::span<std::byte> outs[] = {std::as_writable_bytes(std::span(out))};
  ASSERT_TRUE((*loaded)->launch(in, outs).ok());
  for (int g = 0; g < 8; ++g) EXPECT_NEAR(out[g], tone::referenceMismatch(guesses[g]), 1e-4) << "guess " << guesses[g];
}

TEST_F(StampedSavedPrograms, DamagedAndTruncatedBytesAreRefusedByName) {
  const std::string saved = *toneExecutable().save();
  std::string flipped = saved;
  flipped[saved.size() / 2] ^= 0x10;
  auto r = tensor::CpuExecutable::restore(flipped);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("damaged: its SHA-256 does not match"));
  r = tensor::CpuExecutable::restore(saved.substr(0, 20));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("truncated"));
  r = tensor::CpuExecutable::restore("ACCYEXE and so on, not a saved program");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not a saved Accy program"));
  r = tensor::CpuExecutable::restoreFromFile("/nonexistent/tone.accy");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("cannot open /nonexistent/tone.accy"));
}

TEST_F(StampedSavedPrograms, AnotherCompilerBuildIsNamed) {
  const tensor::CpuExecutable exe = toneExecutable();
  std::string record = executable::buildRecordText(executable::buildRecord());
  const size_t at = record.find("SOURCE_HASH=");
  ASSERT_NE(at, std::string::npos) << record;
  record.replace(at + 12, 4, "ffff");
  auto r = tensor::CpuExecutable::restore(forged(record, exe.executable()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(errorKind(r.status()), ErrorKind::kUnsupportedVersion);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("saved by a different compiler build (SOURCE_HASH ffff"));
}

TEST_F(StampedSavedPrograms, CodeForAnotherCpuIsNamed) {
  executable::Executable exe = toneExecutable().executable();
  exe.isa = "avx10.2";  // no CPU of this build's ISAs
  auto r = tensor::CpuExecutable::restore(forged(executable::buildRecordText(executable::buildRecord()), exe));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(errorKind(r.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("cannot run code built for avx10.2 (it runs "));
}

}  // namespace
}  // namespace accy
