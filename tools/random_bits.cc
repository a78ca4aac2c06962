// Writes Accy's random bits to stdout, raw, for statistical batteries
// (`make random-quality` pipes them into dieharder -g 200): the u32 words of
// randomBits(randomFoldIn(randomKey(seed), chunk), n = 2^22) for chunk = 0,
// 1, 2, ..., compiled for x86-64 on two threads, little-endian, until the
// reader closes the pipe or --words are written.
//
//   random_bits [--seed=S] [--words=N]
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "accy/accy.h"

namespace {

constexpr int64_t kChunk = int64_t{1} << 22;

bool writeAll(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe ends the loop through write()
  uint64_t seed = 2026;
  int64_t words = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.rfind("--seed=", 0) == 0) {
      seed = std::strtoull(argv[i] + 7, nullptr, 10);
    } else if (a.rfind("--words=", 0) == 0) {
      words = std::strtoll(argv[i] + 8, nullptr, 10);
    } else {
      std::fprintf(stderr, "random_bits: unknown argument '%s' (--seed=S, --words=N)\n", argv[i]);
      return 2;
    }
  }
  namespace tensor = accy::tensor;
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::u32, {})};
  auto program = tensor::define("bits", specs, [&](tensor::Builder& b, std::span<const tensor::Value> a) {
    return tensor::randomBits(tensor::randomFoldIn(tensor::randomKey(b, seed), a[0]), {{"n", kChunk}});
  });
  if (!program.ok()) {
    std::fprintf(stderr, "random_bits: %s\n", std::string(program.status().message()).c_str());
    return 1;
  }
  auto exe = tensor::CpuExecutable::compile(*program, {.threads = 2});
  if (!exe.ok()) {
    std::fprintf(stderr, "random_bits: %s\n", std::string(exe.status().message()).c_str());
    return 1;
  }
  std::vector<uint32_t> out(kChunk);
  for (uint32_t chunk = 0; words != 0; ++chunk) {
    const uint32_t in[] = {chunk};
    if (auto st = exe->launch({accy::bytes(in)}, {accy::writableBytes(out)}); !st.ok()) {
      std::fprintf(stderr, "random_bits: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    const int64_t n = words < 0 ? kChunk : std::min(words, kChunk);
    if (!writeAll(out.data(), static_cast<size_t>(n) * 4)) return 0;
    if (words > 0) words -= n;
  }
  return 0;
}
