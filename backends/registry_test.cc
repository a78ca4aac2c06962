#include "backends/registry.h"
#include "backends/compile_program.h"

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::backends {
namespace {

TEST(Registry, ListsEveryBackendInOrder) {
  auto all = makeBackends(BackendOptions{});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0]->info().name, "cpu");
  EXPECT_THAT(all[0]->info().targets, ::testing::ElementsAre("x86_64"));
  EXPECT_EQ(all[1]->info().name, "vulkan");
  EXPECT_THAT(all[1]->info().targets, ::testing::ElementsAre("spirv"));
  EXPECT_EQ(all[2]->info().name, "cuda");
  EXPECT_THAT(all[2]->info().targets, ::testing::ElementsAre("ptx"));
  EXPECT_EQ(all[2]->info().available, all[2]->info().unavailable_reason.empty());
  EXPECT_EQ(all[3]->info().name, "null");
  EXPECT_THAT(all[3]->info().targets, ::testing::ElementsAre("reference"));
  EXPECT_TRUE(all[3]->info().available);
}

TEST(Registry, SelectsByNameWithClearErrors) {
  EXPECT_TRUE(selectBackends({"cpu"}, BackendOptions{}).ok());
  auto unknown = selectBackends({"tpu"}, BackendOptions{});
  EXPECT_EQ(errorKind(unknown.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("knows cpu, vulkan, cuda, null"));
  EXPECT_TRUE(selectBackends({"null"}, BackendOptions{}).ok());
  auto twice = selectBackends({"cpu", "cpu"}, BackendOptions{});
  EXPECT_EQ(errorKind(twice.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), ::testing::HasSubstr("device 'cpu' is named twice"));
  auto one = selectBackends({"cpu"}, BackendOptions{});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);  // only what was asked for is made
  // Without a GPU, --devices=cuda is refused with the reason.
  auto cuda = selectBackends({"cuda"}, BackendOptions{});
  if (!cuda.ok()) {
    EXPECT_EQ(errorKind(cuda.status()), ErrorKind::kUnimplemented);
    EXPECT_THAT(cuda.status().message(), ::testing::HasSubstr("device cuda is not available: "));
  }
}

TEST(Registry, HostMemoryRegistrationIsANoOpWhereNothingNeedsIt) {
  float region[256] = {};
  for (const auto& b : makeBackends(BackendOptions{.threads = 1})) {
    if (b->info().name == "cuda" && b->info().available) continue;  // registers for real; tested in backends/cuda
    auto handle = b->registerHostMemory(region, sizeof(region));
    ASSERT_TRUE(handle.ok()) << b->info().name << ": " << handle.status();
    EXPECT_EQ(*handle, nullptr) << b->info().name;
  }
}

TEST(Registry, CpuBackendCompilesLoadsAndLaunches) {
  auto cpu = std::move(makeBackends(BackendOptions{.threads = 1})[0]);
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 4}})};
  auto p = tensor::define("t", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 3; });
  auto exe = compileOn(*cpu, *p, "x86_64");
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(errorKind(compileOn(*cpu, *p, "ptx").status()), ErrorKind::kCompileFailed);
  auto loaded = cpu->load(*exe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  float x[4] = {1, 2, 3, 4}, y[4];
  ASSERT_TRUE((*loaded)->launch({bytes(x)}, {writableBytes(y)}).ok());
  EXPECT_EQ(y[3], 12);
}

}  // namespace
}  // namespace accy::backends
