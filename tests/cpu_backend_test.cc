// The CPU backend's contract: deterministic code, in-place launches from
// many threads, clear errors for bad buffers and unsupported schedules, and
// a way to look at the Choir and the assembly.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "accy/accy.h"
#include "backends/cpu/cpu_program.h"
#include "compiler/choir/lower.h"
#include "compiler/codegen/x86_64/emitter.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy {
namespace {

using ::testing::HasSubstr;
namespace tensor = accy::tensor;

tensor::Program tone8() {
  const tensor::Spec specs[] = {
      tensor::spec(tensor::DType::f32, {{"guess", 8}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
      tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
  };
  return *tensor::define("mismatch", specs, tone::mismatch);
}

TEST(CpuBackend, CompilingTwiceGivesTheSameBytes) {
  auto a = tensor::CpuExecutable::compile(tone8());
  auto b = tensor::CpuExecutable::compile(tone8());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(a->executable().code.empty());
  EXPECT_EQ(a->executable().code, b->executable().code);
}

TEST(CpuBackend, LaunchesFromManyThreadsAtOnce) {
  auto exe = tensor::CpuExecutable::compile(tone8());
  ASSERT_TRUE(exe.ok()) << exe.status();
  const tone::Samples data = tone::samples();
  float reference[8];
  const float freq0[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  ASSERT_TRUE(exe->launch({bytes(freq0), bytes(data.time), bytes(data.sample)}, {writableBytes(reference)}).ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int n = 0; n < 200; ++n) {
        float out[8];
        if (!exe->launch({bytes(freq0), bytes(data.time), bytes(data.sample)}, {writableBytes(out)}).ok() ||
            std::memcmp(out, reference, sizeof out) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(CpuBackend, ParallelKernelsLaunchedFromManyThreads) {
  // Large enough for tiled, thread-pool-split kernels; several callers at once.
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"n", 1 << 18}})};
  auto program = tensor::define("big", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return std::vector<tensor::Value>{v[0].sin().sum("n"), v[0] * 2};
  });
  ASSERT_TRUE(program.ok());
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 2});
  ASSERT_TRUE(exe.ok()) << exe.status();
  std::vector<float> x(1 << 18);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * static_cast<float>(i % 1000);
  float ref_sum = 0;
  std::vector<float> ref_twice(x.size());
  ASSERT_TRUE(exe->launch({bytes(x)}, {writableBytes(std::span(&ref_sum, 1)), writableBytes(ref_twice)}).ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int n = 0; n < 10; ++n) {
        float sum = 0;
        std::vector<float> twice(x.size());
        if (!exe->launch({bytes(x)}, {writableBytes(std::span(&sum, 1)), writableBytes(twice)}).ok() ||
            sum != ref_sum || twice != ref_twice) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Rows at data-dependent positions are prefetched a fixed distance ahead
// (32 rows of 256 bytes here), which reads the index that many steps on:
// the look-ahead stops at the last index. The indices end where a page
// that cannot be read begins, so one read past them would crash the test.
TEST(CpuBackend, RowsPrefetchedAheadReadNoIndexPastTheirBuffer) {
  constexpr int64_t kVocab = 50, kFeatures = 64, kTokens = 40;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"vocab", kVocab}, {"feature", kFeatures}}),
                                tensor::spec(tensor::DType::i32, {{"token", kTokens}})};
  auto gather = tensor::define("gather", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return take(v[0], "vocab", v[1]);
  });
  const tensor::Spec grad_specs[] = {tensor::spec(tensor::DType::f32, {{"token", kTokens}, {"feature", kFeatures}}),
                                     tensor::spec(tensor::DType::i32, {{"token", kTokens}})};
  auto scatter = tensor::define("scatter", grad_specs, [](tensor::Builder& b, std::span<const tensor::Value> v) {
    tensor::Value zeros =
        b.constant(0, tensor::DType::f32).broadcast("vocab", kVocab).broadcast("feature", kFeatures);
    return scatterAdd(zeros, "vocab", v[1], v[0]);
  });
  ASSERT_TRUE(gather.ok() && scatter.ok());
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  int32_t* tokens = reinterpret_cast<int32_t*>(static_cast<char*>(mem) + page) - kTokens;
  for (int64_t t = 0; t < kTokens; ++t) tokens[t] = static_cast<int32_t>((t * 7) % kVocab);
  std::vector<float> table(kVocab * kFeatures), rows(kTokens * kFeatures);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  const std::span<const int32_t> index(tokens, kTokens);
  for (int threads : {1, 2}) {
    auto g = tensor::CpuExecutable::compile(*gather, {.threads = threads});
    auto s = tensor::CpuExecutable::compile(*scatter, {.threads = threads});
    ASSERT_TRUE(g.ok() && s.ok());
    ASSERT_TRUE(g->launch({bytes(table), bytes(index)}, {writableBytes(rows)}).ok());
    for (int64_t t = 0; t < kTokens; ++t) {
      EXPECT_EQ(rows[t * kFeatures + 3], table[tokens[t] * kFeatures + 3]) << t;
    }
    std::vector<float> sums(kVocab * kFeatures);
    ASSERT_TRUE(s->launch({bytes(rows), bytes(index)}, {writableBytes(sums)}).ok());
    const int32_t r = tokens[kTokens - 1];
    float want = 0;
    for (int64_t t = 0; t < kTokens; ++t) {
      if (tokens[t] == r) want += rows[t * kFeatures + 5];
    }
    EXPECT_EQ(sums[r * kFeatures + 5], want);
  }
  munmap(mem, 2 * page);
}

// A launch's temporaries come from blocks kept from earlier launches:
// callers on several threads at once each get a block of their own (a
// scatter into a non-zero tensor sums in a temporary first).
TEST(CpuBackend, ScratchBlocksAreNotSharedByLaunchesAtOnce) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"row", 64}, {"feature", 32}}),
                                tensor::spec(tensor::DType::f32, {{"token", 512}, {"feature", 32}}),
                                tensor::spec(tensor::DType::i32, {{"token", 512}})};
  auto program = tensor::define("scatter", specs, [](tensor::Builder&, std::span<const tensor::Value> v) {
    return scatterAdd(v[0], "row", v[2], v[1]);
  });
  ASSERT_TRUE(program.ok());
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 2});
  ASSERT_TRUE(exe.ok()) << exe.status();
  ASSERT_GT(exe->executable().artifact_plan.scratch_bytes, 0);
  std::vector<float> x(64 * 32, 1.5f), updates(512 * 32);
  std::vector<int32_t> rows(512);
  for (size_t i = 0; i < updates.size(); ++i) updates[i] = 0.25f * static_cast<float>(i % 13);
  for (size_t t = 0; t < rows.size(); ++t) rows[t] = static_cast<int32_t>((t * 11) % 70) - 3;  // some dropped
  std::vector<float> reference(x.size());
  ASSERT_TRUE(exe->launch({bytes(x), bytes(updates), bytes(rows)}, {writableBytes(reference)}).ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int n = 0; n < 20; ++n) {
        std::vector<float> out(x.size());
        if (!exe->launch({bytes(x), bytes(updates), bytes(rows)}, {writableBytes(out)}).ok() || out != reference) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(CpuBackend, BadBuffersAreRefusedAndOutputsUntouched) {
  auto exe = tensor::CpuExecutable::compile(tone8());
  ASSERT_TRUE(exe.ok());
  const tone::Samples data = tone::samples();
  float freq[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float out[8];
  for (float& o : out) o = -1;
  auto expectInvalid = [&](absl::Status st, const char* text) {
    EXPECT_EQ(errorKind(st), ErrorKind::kInvalidBuffer) << st;
    EXPECT_THAT(st.message(), HasSubstr(text));
    for (float o : out) EXPECT_EQ(o, -1);
  };
  expectInvalid(exe->launch({bytes(freq), bytes(data.time)}, {writableBytes(out)}), "expected 3 input");
  expectInvalid(exe->launch({bytes(freq), bytes(data.time), bytes(data.sample)}, {}), "expected 1 output");
  std::span<const std::byte> short_freq = std::as_bytes(std::span(freq, 7));
  expectInvalid(exe->launch({short_freq, bytes(data.time), bytes(data.sample)}, {writableBytes(out)}),
                "needs 32 bytes, got 28");
  alignas(8) std::byte raw[40];
  std::span<const std::byte> misaligned(raw + 1, 32);
  expectInvalid(exe->launch({misaligned, bytes(data.time), bytes(data.sample)}, {writableBytes(out)}),
                "not aligned");
  std::span<std::byte> aliasing = writableBytes(freq);
  EXPECT_EQ(errorKind(exe->launch({bytes(freq), bytes(data.time), bytes(data.sample)}, {aliasing})),
            ErrorKind::kInvalidBuffer);
}

TEST(CpuBackend, GpuScheduleIsUnimplementedNotWrong) {
  auto module = choir::lowerProgram(tone8());
  ASSERT_TRUE(module.ok());
  module->kernels.back().body[0].loop.tag = choir::LoopTag::kGpuBlock;
  x64::EmitOptions o;
  o.isa = x64::Isa::kSse41;
  auto artifact = x64::emitModule(*module, o);
  EXPECT_EQ(errorKind(artifact.status()), ErrorKind::kUnimplemented);
  EXPECT_THAT(artifact.status().message(), HasSubstr("GPU"));
}

TEST(CpuBackend, ChoirAndAssemblyCanBeInspected) {
  auto choir = tensor::choirText(tone8());
  ASSERT_TRUE(choir.ok()) << choir.status();
  EXPECT_THAT(*choir, HasSubstr("reduce add out0["));
  EXPECT_THAT(*choir, HasSubstr("vectorized"));
  auto assembly = tensor::cpuAssembly(tone8());
  ASSERT_TRUE(assembly.ok()) << assembly.status();
  EXPECT_THAT(*assembly, HasSubstr("kernel k7_sum"));
  EXPECT_THAT(*assembly, HasSubstr("ret"));
}

TEST(CpuBackend, LoadRejectsInconsistentExecutables) {
  auto exe = tensor::CpuExecutable::compile(tone8());
  ASSERT_TRUE(exe.ok());
  executable::Executable broken = exe->executable();
  broken.launch_plan.steps[0].entry_offset = broken.code.size() + 10;
  EXPECT_EQ(errorKind(cpu::LoadedExecutable::load(broken, 1).status()), ErrorKind::kInvalidProgram);
  broken = exe->executable();
  broken.outputs[0].axes[0].extent = 9;
  EXPECT_EQ(errorKind(cpu::LoadedExecutable::load(broken, 1).status()), ErrorKind::kInvalidProgram);
}

}  // namespace
}  // namespace accy
