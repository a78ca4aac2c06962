// usableCpus follows the process's affinity mask; CPU quotas in both cgroup
// versions' forms read as whole CPUs, rounded up, and "no quota" as none.
#include "base/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace accy {
namespace {

TEST(Cpus, FollowsTheAffinityMask) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const int before = usableCpus();
  EXPECT_GE(before, 1);
  EXPECT_LE(before, CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(usableCpus(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  EXPECT_EQ(usableCpus(), before);
}

TEST(Cpus, QuotasReadAsWholeCpus) {
  EXPECT_EQ(cpusFromCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(cpusFromCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(cpusFromCpuMax("150000 100000"), 2);
  EXPECT_EQ(cpusFromCpuMax("50000 100000"), 1);
  EXPECT_EQ(cpusFromCpuMax(""), std::nullopt);
  EXPECT_EQ(cpusFromCpuMax("lots 100000"), std::nullopt);
  EXPECT_EQ(cpusFromCfs(-1, 100000), std::nullopt);
  EXPECT_EQ(cpusFromCfs(400000, 100000), 4);
  EXPECT_EQ(cpusFromCfs(100000, 0), std::nullopt);
}

}  // namespace
}  // namespace accy
