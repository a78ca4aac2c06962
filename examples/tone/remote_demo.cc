// The tone gradient descent through accyd: connects to the daemon at
// argv[1] (unix:PATH), compiles vmap(valueAndGrad(mismatch)) there, takes
// 100 steps on eight guesses and prints where they end.
#include <cstdio>

#include "accy/accy.h"
#include "client/remote_session.h"
#include "examples/tone/tone.h"

namespace tensor = accy::tensor;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: remote_demo unix:/path/to/accyd.sock\n");
    return 2;
  }
  accy::client::RemoteOptions options;
  options.cpu_in_process = false;  // run on the daemon's cpu device
  auto remote = accy::client::RemoteSession::connect(argv[1], options);
  if (!remote.ok()) {
    std::fprintf(stderr, "connect: %s\n", remote.status().ToString().c_str());
    return 1;
  }
  const tensor::Spec one_guess[] = {tensor::spec(tensor::DType::f32, {}),
                                    tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}}),
                                    tensor::spec(tensor::DType::f32, {{"point", tone::kPoints}})};
  auto f = tensor::Function::define("mismatch", one_guess, tone::mismatch);
  auto each = f->valueAndGrad({.wrt = {0}})->vmap(
      {.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped}, .axis_name = "guess"});
  if (!each.ok()) {
    std::fprintf(stderr, "transform: %s\n", each.status().ToString().c_str());
    return 1;
  }
  accy::session::CompileInfo info;
  auto handle = (*remote)->compile(accy::wire::encode(each->program()), "x86_64", &info);
  if (!handle.ok()) {
    std::fprintf(stderr, "compile: %s\n", handle.status().ToString().c_str());
    return 1;
  }
  std::printf("accyd compiled vmap(valueAndGrad(mismatch)) (cache %s)\n",
              info.cache_hit ? info.cache_level.c_str() : "miss");
  const tone::Samples data = tone::samples();
  float frequency[8] = {0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5};
  float value[8], slope[8];
  for (int step = 0; step < 100; ++step) {
    auto st = (*remote)->invoke(*handle, {accy::bytes(frequency), accy::bytes(data.time), accy::bytes(data.sample)},
                                {accy::writableBytes(value), accy::writableBytes(slope)});
    if (!st.ok()) {
      std::fprintf(stderr, "invoke: %s\n", st.ToString().c_str());
      return 1;
    }
    for (int g = 0; g < 8; ++g) frequency[g] -= 0.005f * slope[g];
  }
  std::printf("after 100 gradient steps through accyd:\n");
  for (int g = 0; g < 8; ++g) {
    std::printf("  guess started at %.1f -> frequency %.6f, mismatch %.6f\n", 0.5 + g, frequency[g], value[g]);
  }
  return 0;
}
