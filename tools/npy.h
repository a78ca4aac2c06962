// A small reader and writer for NumPy's .npy files, for the accy tool.
//
// Reads format versions 1.0, 2.0 and 3.0 with dtypes '<f4', '<f8', '<i4',
// '<i8' and '|b1' in C order; anything else (wrong magic, truncated data,
// a header that is not the expected dict, Fortran order, another dtype,
// bool bytes other than 0 and 1, bytes after the data) fails with
// InvalidArgument saying what is wrong. Writes version 1.0 (2.0 when the
// header would not fit), the form numpy.save writes.
#ifndef ACCY_TOOLS_NPY_H_
#define ACCY_TOOLS_NPY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/tensor/dtype.h"

namespace accy::npy {

// Largest header this reader accepts (numpy's own default limit is 10000).
inline constexpr size_t kMaxHeaderBytes = size_t{1} << 16;

struct Array {
  tensor::DType dtype = tensor::DType::f32;
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::vector<std::byte> data;  // row-major, little endian

  int64_t elementCount() const;
};

// "(16,)", "()", "(2, 3)": the shape as Python writes a tuple.
std::string shapeText(const std::vector<int64_t>& shape);
// "<f4" for f32 and so on.
std::string_view descrOf(tensor::DType dtype);

// Parses the bytes of a whole .npy file. Errors do not name a file.
absl::StatusOr<Array> parse(std::string_view bytes);
// The bytes of a .npy file holding `data` (exactly the shape's byte size).
absl::StatusOr<std::string> serialize(tensor::DType dtype, const std::vector<int64_t>& shape,
                                      std::span<const std::byte> data);

// Reads and parses `path`; every error names the file.
absl::StatusOr<Array> readFile(const std::string& path);
// Serializes and writes `path`; every error names the file.
absl::Status writeFile(const std::string& path, tensor::DType dtype, const std::vector<int64_t>& shape,
                       std::span<const std::byte> data);

}  // namespace accy::npy

#endif  // ACCY_TOOLS_NPY_H_
