// A self-describing file format for compiled executables ("ACCYEXE").
//
// Every integer is little endian; a str is a u32 byte length then the bytes.
//
//   magic          8 bytes  "ACCYEXE\0"
//   version        u32      1
//   target         str      "x86_64"
//   isa            str      "avx512", "avx2+fma", "sse4.1"
//   inputs         u32 n, then n specs
//   outputs        u32 n, then n specs
//     spec           u8 dtype (0 f32, 1 f64, 2 i32, 3 i64, 4 bool),
//                    u32 axis count, then per axis: str name, i64 extent
//   code           u64 n, then n bytes of machine code
//   scratch_bytes  i64      per-launch scratch for temporaries
//   buffers        u32 n, then n buffer plans, in the module's buffer order
//     buffer         u8 role (0 input, 1 output, 2 temp), i32 io_index,
//                    u8 dtype, i64 bytes, i64 alignment, i64 scratch_offset
//   kernels        u32 n, then n launch steps, in launch order
//     step           str kernel name, u64 entry_offset (into code),
//                    i64 parallel_extent (0: one call), i64 work
//
// Nothing may follow the last step. The reader bounds every count by the
// bytes left, checks enum values and axes, and runs
// executable::validateExecutable, so a file that loads is consistent.
#ifndef ACCY_TOOLS_ARTIFACT_H_
#define ACCY_TOOLS_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/executable/executable.h"

namespace accy::artifact {

inline constexpr char kMagic[8] = {'A', 'C', 'C', 'Y', 'E', 'X', 'E', '\0'};
inline constexpr uint32_t kVersion = 1;

std::string serialize(const executable::Executable& exe);

// Fails with InvalidArgument naming what is wrong (and where).
absl::StatusOr<executable::Executable> deserialize(std::string_view bytes);

}  // namespace accy::artifact

#endif  // ACCY_TOOLS_ARTIFACT_H_
