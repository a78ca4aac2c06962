#include "base/cpus.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace accy {
namespace {

std::optional<std::string> readFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<int64_t> parseInt(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int> quotaCpus() {
  if (const auto v2 = readFile("/sys/fs/cgroup/cpu.max")) return cpusFromCpuMax(*v2);
  const auto quota = readFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
  const auto period = readFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  const auto q = parseInt(*quota), p = parseInt(*period);
  if (!q || !p) return std::nullopt;
  return cpusFromCfs(*q, *p);
}

}  // namespace

std::optional<int> cpusFromCfs(int64_t quota_us, int64_t period_us) {
  if (quota_us <= 0 || period_us <= 0) return std::nullopt;
  return static_cast<int>(std::max<int64_t>(1, (quota_us + period_us - 1) / period_us));
}

std::optional<int> cpusFromCpuMax(std::string_view cpu_max) {
  const size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (cpu_max.substr(0, space) == "max") return std::nullopt;
  const auto quota = parseInt(cpu_max.substr(0, space));
  const auto period = parseInt(cpu_max.substr(space + 1));
  if (!quota || !period) return std::nullopt;
  return cpusFromCfs(*quota, *period);
}

int usableCpus() {
  static const std::optional<int> quota = quotaCpus();
  int cpus = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = CPU_COUNT(&set);
  if (quota) cpus = std::min(cpus, *quota);
  return std::max(1, cpus);
}

}  // namespace accy
