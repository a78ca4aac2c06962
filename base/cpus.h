// How many CPUs this process may use: the CPUs its affinity mask allows
// (taskset, a container's cpuset), fewer where a CPU quota (a container's
// --cpus: cgroup v2 cpu.max, or v1's cfs quota) allows less time than that.
// std::thread::hardware_concurrency() counts every CPU online, so a process
// confined to 2 CPUs of a 64-CPU host would run 64 threads on 2.
#ifndef ACCY_BASE_CPUS_H_
#define ACCY_BASE_CPUS_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace accy {

// At least 1. The affinity mask is read on every call (it may change); the
// quota once per process.
int usableCpus();

// The CPUs a quota allows, rounded up: cgroup v2's cpu.max ("max 100000":
// none; "150000 100000": 2), or v1's quota and period in microseconds (a
// quota of -1: none). nullopt when there is no quota or the text is not one.
std::optional<int> cpusFromCpuMax(std::string_view cpu_max);
std::optional<int> cpusFromCfs(int64_t quota_us, int64_t period_us);

}  // namespace accy

#endif  // ACCY_BASE_CPUS_H_
