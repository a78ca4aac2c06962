#include "tools/npy.h"

#include <cstring>
#include <limits>
#include <optional>

#include "compiler/tensor/program.h"
#include "base/strings.h"
#include "base/files.h"

namespace accy::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

absl::Status bad(std::string what) { return absl::InvalidArgumentError(what); }

// Reads the header dict: a Python literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (16,), }
// Only the three keys numpy writes are allowed, each once.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
  };

  absl::StatusOr<Header> parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    skipSpace();
    if (!eat('{')) return fail("expected '{'");
    while (true) {
      skipSpace();
      if (eat('}')) break;
      std::string key;
      if (!parseString(&key)) return fail("expected a quoted key");
      skipSpace();
      if (!eat(':')) return fail(strCat("expected ':' after '", key, "'"));
      skipSpace();
      if (key == "descr") {
        if (have_descr) return fail("'descr' appears twice");
        have_descr = true;
        if (!parseString(&h.descr)) return fail("'descr' is not a string (structured dtypes are not supported)");
      } else if (key == "fortran_order") {
        if (have_order) return fail("'fortran_order' appears twice");
        have_order = true;
        if (matchWord("True")) {
          h.fortran_order = true;
        } else if (matchWord("False")) {
          h.fortran_order = false;
        } else {
          return fail("'fortran_order' is not True or False");
        }
      } else if (key == "shape") {
        if (have_shape) return fail("'shape' appears twice");
        have_shape = true;
        absl::Status st = parseShape(&h.shape);
        if (!st.ok()) return st;
      } else {
        return fail(strCat("unexpected key '", key, "'"));
      }
      skipSpace();
      if (eat(',')) continue;
      skipSpace();
      if (eat('}')) break;
      return fail("expected ',' or '}'");
    }
    skipSpace();
    if (pos_ != text_.size()) return fail("unexpected text after the closing '}'");
    if (!have_descr) return fail("no 'descr' key");
    if (!have_order) return fail("no 'fortran_order' key");
    if (!have_shape) return fail("no 'shape' key");
    return h;
  }

 private:
  absl::Status fail(std::string what) const {
    return bad(strCat("bad header dict at offset ", pos_, ": ", what));
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool matchWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  // A quoted string without escapes ('...' or "...").
  bool parseString(std::string* out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_];
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return false;
    const std::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) return false;
    *out = std::string(body);
    pos_ = end + 1;
    return true;
  }
  absl::Status parseShape(std::vector<int64_t>* shape) {
    if (!eat('(')) return fail("'shape' is not a tuple");
    while (true) {
      skipSpace();
      if (eat(')')) return absl::OkStatus();
      if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
        return fail("'shape' holds something other than non-negative integers");
      }
      int64_t v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) return fail("a shape entry is too large");
        v = v * 10 + (text_[pos_] - '0');
        ++pos_;
      }
      eat('L');  // Python 2 longs, as old numpy versions wrote them
      if (shape->size() >= 64) return fail("'shape' has more than 64 entries");
      shape->push_back(v);
      skipSpace();
      if (eat(',')) continue;
      skipSpace();
      if (eat(')')) {
        // "(16)" is an int in Python, not a tuple.
        if (shape->size() == 1) return fail("a one-entry shape needs a trailing comma: (n,)");
        return absl::OkStatus();
      }
      return fail("expected ',' or ')' in 'shape'");
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::optional<tensor::DType> dtypeOfDescr(std::string_view descr) {
  if (descr == "<f4") return tensor::DType::f32;
  if (descr == "<f8") return tensor::DType::f64;
  if (descr == "<i4") return tensor::DType::i32;
  if (descr == "<i8") return tensor::DType::i64;
  if (descr == "|b1") return tensor::DType::bool_;
  if (descr == "<u4") return tensor::DType::u32;
  return std::nullopt;
}

uint32_t readLe(std::string_view bytes, size_t offset, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  return v;
}

// The element count of `shape`, or nullopt when it exceeds `limit`.
std::optional<int64_t> countWithin(const std::vector<int64_t>& shape, int64_t limit) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (d > limit / count) return std::nullopt;
    count *= d;
  }
  return count;
}

}  // namespace

int64_t Array::elementCount() const {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    strAppend(&s, shape[i]);
  }
  if (shape.size() == 1) s += ",";
  s += ")";
  return s;
}

std::string_view descrOf(tensor::DType dtype) {
  switch (dtype) {
    case tensor::DType::f32:
      return "<f4";
    case tensor::DType::f64:
      return "<f8";
    case tensor::DType::i32:
      return "<i4";
    case tensor::DType::i64:
      return "<i8";
    case tensor::DType::bool_:
      return "|b1";
    case tensor::DType::u32:
      return "<u4";
  }
  return "?";
}

absl::StatusOr<Array> parse(std::string_view bytes) {
  if (bytes.empty()) return bad("empty file, not a .npy file");
  if (bytes.size() < kMagicBytes || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0) {
    if (bytes.size() < kMagicBytes && std::memcmp(bytes.data(), kMagic, bytes.size()) == 0) {
      return bad(strCat("truncated: ", bytes.size(), " bytes, shorter than the .npy magic"));
    }
    return bad("not a .npy file (the magic \"\\x93NUMPY\" is missing)");
  }
  if (bytes.size() < kMagicBytes + 2) {
    return bad(strCat("truncated: ", bytes.size(), " bytes, the format version is missing"));
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return bad(strCat("unsupported .npy format version ", major, ".", minor, " (this reader takes 1.0, 2.0, 3.0)"));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t header_start = kMagicBytes + 2 + length_bytes;
  if (bytes.size() < header_start) {
    return bad(strCat("truncated: ", bytes.size(), " bytes, the header length is missing"));
  }
  const uint32_t header_len = readLe(bytes, kMagicBytes + 2, length_bytes);
  if (header_len > kMaxHeaderBytes) {
    return bad(strCat("the header is ", header_len, " bytes, above the limit of ", kMaxHeaderBytes));
  }
  if (bytes.size() - header_start < header_len) {
    return bad(strCat("truncated: the header needs ", header_len, " bytes, the file has ",
                      bytes.size() - header_start, " after the preamble"));
  }
  const std::string_view header_text = bytes.substr(header_start, header_len);
  HeaderParser parser(header_text);
  absl::StatusOr<HeaderParser::Header> header = parser.parse();
  if (!header.ok()) return header.status();
  const std::optional<tensor::DType> dtype = dtypeOfDescr(header->descr);
  if (!dtype) {
    return bad(strCat("unsupported dtype '", header->descr, "' (supported: '<f4', '<f8', '<i4', '<i8', '<u4', '|b1')"));
  }
  if (header->fortran_order) {
    return bad("Fortran-order arrays are not supported; save a C-order array (numpy.ascontiguousarray)");
  }
  const size_t data_start = header_start + header_len;
  const int64_t available = static_cast<int64_t>(bytes.size() - data_start);
  const int64_t item = tensor::dtypeSize(*dtype);
  const std::optional<int64_t> count = countWithin(header->shape, tensor::kMaxValueBytes / item);
  const std::string what = strCat("shape ", shapeText(header->shape), " of '", header->descr, "'");
  if (!count) return bad(strCat(what, " is too large (over ", tensor::kMaxValueBytes, " bytes)"));
  const int64_t needed = *count * item;
  if (needed > available) {
    return bad(strCat("truncated: ", what, " needs ", needed, " bytes of data, the file has ", available));
  }
  if (needed < available) {
    return bad(strCat(what, " needs ", needed, " bytes of data, the file has ", available - needed, " more"));
  }
  Array array;
  array.dtype = *dtype;
  array.shape = std::move(header->shape);
  array.data.resize(static_cast<size_t>(available));
  if (available > 0) std::memcpy(array.data.data(), bytes.data() + data_start, static_cast<size_t>(available));
  if (array.dtype == tensor::DType::bool_) {
    for (size_t i = 0; i < array.data.size(); ++i) {
      const auto b = static_cast<uint8_t>(array.data[i]);
      if (b > 1) return bad(strCat("bool element ", i, " is the byte ", b, ", not 0 or 1"));
    }
  }
  return array;
}

absl::StatusOr<std::string> serialize(tensor::DType dtype, const std::vector<int64_t>& shape,
                                      std::span<const std::byte> data) {
  const int64_t item = tensor::dtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return bad(strCat("negative extent in shape ", shapeText(shape)));
  }
  const std::optional<int64_t> count = countWithin(shape, tensor::kMaxValueBytes / item);
  if (!count || *count * item != static_cast<int64_t>(data.size())) {
    return bad(strCat("shape ", shapeText(shape), " of '", descrOf(dtype), "' does not match ", data.size(),
                      " bytes of data"));
  }
  std::string dict = strCat("{'descr': '", descrOf(dtype), "', 'fortran_order': False, 'shape': ",
                            shapeText(shape), ", }");
  // Pad with spaces and a final newline so the data starts on a 64-byte
  // boundary, as numpy does.
  int major = 1;
  size_t preamble = kMagicBytes + 2 + 2;
  if ((dict.size() + 1 + preamble + 63) / 64 * 64 - preamble > 0xffff) {
    major = 2;
    preamble = kMagicBytes + 2 + 4;
  }
  const size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicBytes);
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(dict.size());
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  out += dict;
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  return out;
}

absl::StatusOr<Array> readFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = files::readFile(path, tensor::kMaxValueBytes + (int64_t{1} << 20));
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<Array> array = parse(*bytes);
  if (!array.ok()) return absl::InvalidArgumentError(strCat(path, ": ", std::string(array.status().message())));
  return array;
}

absl::Status writeFile(const std::string& path, tensor::DType dtype, const std::vector<int64_t>& shape,
                       std::span<const std::byte> data) {
  absl::StatusOr<std::string> bytes = serialize(dtype, shape, data);
  if (!bytes.ok()) return absl::InvalidArgumentError(strCat(path, ": ", std::string(bytes.status().message())));
  return files::writeFile(path, *bytes);
}

}  // namespace accy::npy
