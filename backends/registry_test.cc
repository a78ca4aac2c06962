#include "backends/registry.h"

#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::backends {
namespace {

TEST(Registry, ListsEveryBackendInOrder) {
  auto all = makeBackends(BackendOptions{});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->info().name, "cpu");
  EXPECT_THAT(all[0]->info().targets, ::testing::ElementsAre("x86_64"));
  EXPECT_EQ(all[1]->info().name, "vulkan");
  EXPECT_THAT(all[1]->info().targets, ::testing::ElementsAre("spirv"));
  EXPECT_EQ(all[2]->info().name, "null");
  EXPECT_FALSE(all[2]->info().available);
}

TEST(Registry, SelectsByNameWithClearErrors) {
  EXPECT_TRUE(selectBackends({"cpu"}, BackendOptions{}).ok());
  auto unknown = selectBackends({"tpu"}, BackendOptions{});
  EXPECT_EQ(errorKind(unknown.status()), ErrorKind::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("knows cpu, vulkan, null"));
  EXPECT_EQ(errorKind(selectBackends({"null"}, BackendOptions{}).status()), ErrorKind::kUnimplemented);
}

TEST(Registry, CpuBackendCompilesLoadsAndLaunches) {
  auto cpu = std::move(makeBackends(BackendOptions{.threads = 1})[0]);
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"i", 4}})};
  auto p = tensor::define("t", specs, [](tensor::Builder&, std::span<const tensor::Value> a) { return a[0] * 3; });
  auto exe = cpu->compile(*p, "x86_64");
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(errorKind(cpu->compile(*p, "ptx").status()), ErrorKind::kCompileFailed);
  auto loaded = cpu->load(*exe);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  float x[4] = {1, 2, 3, 4}, y[4];
  ASSERT_TRUE((*loaded)->launch({bytes(x)}, {writableBytes(y)}).ok());
  EXPECT_EQ(y[3], 12);
}

}  // namespace
}  // namespace accy::backends
