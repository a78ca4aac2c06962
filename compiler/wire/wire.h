// The versioned byte encoding of tensor programs.
//
//   bytes = "ACCY" | u16 major | u16 minor (little endian) | protobuf Program
//
// Encoding is deterministic: the same program always gives the same bytes.
// Decoding copies and validates everything (op and dtype numbers, names,
// extents, every node's type against its operands, inputs and outputs) and
// never trusts a size it has not bounded. Bad bytes fail with
// InvalidProgram, a major version this build does not know with
// UnsupportedVersion, each with a message saying what was wrong.
#ifndef ACCY_COMPILER_WIRE_WIRE_H_
#define ACCY_COMPILER_WIRE_WIRE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/tensor/program.h"

namespace accy::wire {

inline constexpr uint16_t kMajorVersion = 1;
// 1.1: take, scatter_add, pad, window, and dot over several axes. A writer
// writes the lowest minor that holds the program (1.0 when it uses none of
// these), so readers of 1.0 keep reading what they could; a reader refuses
// a higher minor than its own with UnsupportedVersion.
// 1.2: the dtype u32 and the bit operations (bitAnd, bitOr, bitXor, bitNot,
// shiftLeft, shiftRight, bitcast).
// 1.3: compensated sum and mean (ints = [1] on the reduction).
// 1.4: scan, while_loop and loop_result, and Program.bodies (nested at
// most tensor::kMaxLoopDepth deep; the node limit counts every body's).
inline constexpr uint16_t kMinorVersion = 4;
inline constexpr size_t kHeaderBytes = 8;

struct DecodeLimits {
  int64_t max_bytes = int64_t{256} << 20;        // whole encoding
  int64_t max_nodes = int64_t{1} << 20;
  int64_t max_value_bytes = int64_t{16} << 30;  // any one value, once decoded
  // The newest minor version read; lower it to read as an older build
  // does (tests of the refusal).
  uint16_t reader_minor = kMinorVersion;
};

// The minor version `node` needs: 4 for the loop ops, 3 for a compensated sum or mean, 2 for
// u32 values and the ops of 1.2, 1 for the ops of 1.1, else 0.
uint16_t minorVersionOf(const tensor::Node& node);

std::string encode(const tensor::Program& program);

absl::StatusOr<tensor::Program> decode(std::string_view bytes, const DecodeLimits& limits = {});

// The number of nodes in an encoding, read from the message without
// parsing it or allocating; counting stops once it passes `stop_after`
// (the result is then stop_after + 1). InvalidProgram when the header or
// the message's top level is malformed.
absl::StatusOr<int64_t> countNodes(std::string_view bytes, int64_t stop_after = tensor::kMaxProgramNodes);

}  // namespace accy::wire

#endif  // ACCY_COMPILER_WIRE_WIRE_H_
