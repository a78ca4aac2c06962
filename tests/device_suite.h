// The one device conformance suite, registered for each device: every check
// of tests/gpu_conformance.h becomes a test named DeviceSuite/<device>.<Check>
// (EveryOp, IntegerPowEdgeCases, BoolBuffersMixedWithNumbers,
// TiledProducts, TreeReductions, ReductionsAsTheDeviceChooses,
// RandomPrograms, TransformedPrograms, TheThreeToneTests, AccurateSums,
// Loops), and each dtype
// the device refuses by design a test DeviceSuite/<device>.Refuses<Dtype> (RefusesF64)
// that checks the compile error names it. A device's test file registers a
// factory and its lists:
//
//   const bool registered = registerDeviceSuite({
//       .name = "vulkan",
//       .unavailable = [] { return vulkanUnavailable(); },
//       .device = [] { return vulkanUnderTest(); },
//       .refuses = {},
//       .leaves_out = {},
//   });
//
// Where the device cannot run here (no Vulkan device, no Chromium) every
// check is skipped with that reason; a check the device leaves out is
// skipped with its reason; nothing else is skipped.
#ifndef ACCY_TESTS_DEVICE_SUITE_H_
#define ACCY_TESTS_DEVICE_SUITE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tests/gpu_conformance.h"

namespace accy::testing {

enum class Check : uint8_t {
  kEveryOp,
  kIntegerPowEdgeCases,
  kBoolBuffersMixedWithNumbers,
  kTiledProducts,
  kTreeReductions,
  kReductionsAsTheDeviceChooses,
  kRandomPrograms,
  kTransformedPrograms,
  kTheThreeToneTests,
  kAccurateSums,
  kLoops,
};

// A dtype a device refuses by design, and why. Its programs are left out of
// the checks (counted and printed), and compiling one must fail with
// Unimplemented naming "<dtype> values need".
struct Refusal {
  tensor::DType dtype;
  std::string why;
};

struct DeviceSuite {
  std::string name;  // "x86_64", "vulkan", "cuda_fake", ...: no "-" (a test filter reads it as "not")
  // Why the device cannot run here, or "" when it can. Asked per test.
  std::function<std::string()> unavailable;
  // The device under test (its backend made on first use).
  std::function<GpuUnderTest()> device;
  std::vector<Refusal> refuses;
  // Checks this device does not run, each with why (reported as skipped).
  std::vector<std::pair<Check, std::string>> leaves_out;
};

// The device suite's AccurateSums where it takes minutes on a device (a
// stand-in running every thread on the CPU): left out, saying `why` and
// that `make gpu-sums` runs it, unless $ACCY_SLOW_SUMS is set.
std::vector<std::pair<Check, std::string>> slowSumsLeftOut(const std::string& why);

// Registers the suite's tests for `suite`; call it from a namespace-scope
// initializer of the device's test (before RUN_ALL_TESTS). Returns true.
bool registerDeviceSuite(DeviceSuite suite);

}  // namespace accy::testing

#endif  // ACCY_TESTS_DEVICE_SUITE_H_
