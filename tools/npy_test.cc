#include "tools/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace accy::npy {
namespace {

using tensor::DType;

// A .npy file with format `major`.0, header dict `dict` (padded as numpy
// pads) and `data` after it.
std::string makeNpy(int major, std::string dict, std::string_view data) {
  const size_t preamble = major == 1 ? 10 : 12;
  const size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  out += dict;
  out += data;
  return out;
}

std::string floats(std::initializer_list<float> values) {
  std::string s;
  for (float v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

std::string f32Dict(std::string_view shape) {
  return std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + std::string(shape) + ", }";
}

// Expects parsing `bytes` to fail with a message containing `needle`.
void expectBad(std::string_view bytes, std::string_view needle) {
  absl::StatusOr<Array> a = parse(bytes);
  ASSERT_FALSE(a.ok()) << "parsed, expected an error containing: " << needle;
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(a.status().message()).find(needle), std::string::npos)
      << "message: " << a.status().message() << "\nexpected to contain: " << needle;
}

std::span<const std::byte> asBytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

TEST(NpyTest, RoundTripEveryDType) {
  struct Case {
    DType dtype;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {
      {DType::f32, {}},     {DType::f32, {16}},   {DType::f64, {2, 3}},
      {DType::i32, {4, 1}}, {DType::i64, {3}},    {DType::bool_, {2, 2, 2}},
  };
  for (const Case& c : cases) {
    int64_t count = 1;
    for (int64_t d : c.shape) count *= d;
    std::vector<std::byte> data(static_cast<size_t>(count * tensor::dtypeSize(c.dtype)));
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<std::byte>(c.dtype == DType::bool_ ? (i % 3 == 0) : (i * 37 + 11) & 0xff);
    }
    absl::StatusOr<std::string> bytes = serialize(c.dtype, c.shape, data);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    // numpy's layout: data starts on a 64-byte boundary after a newline.
    const size_t header_len = static_cast<uint8_t>((*bytes)[8]) | static_cast<uint8_t>((*bytes)[9]) << 8;
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ((*bytes)[10 + header_len - 1], '\n');
    absl::StatusOr<Array> back = parse(*bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->dtype, c.dtype);
    EXPECT_EQ(back->shape, c.shape);
    EXPECT_EQ(back->data, data);
    EXPECT_EQ(back->elementCount(), count);
  }
}

TEST(NpyTest, ReadsWhatNumpyWrites) {
  // numpy.save(f, numpy.array([1, 2], dtype=numpy.float32)), byte for byte.
  const std::string bytes = makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", floats({1, 2}));
  ASSERT_EQ(bytes.size(), 128u + 8u);
  absl::StatusOr<Array> a = parse(bytes);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, std::vector<int64_t>{2});
  float v[2];
  std::memcpy(v, a->data.data(), sizeof v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  // Our writer produces the same bytes.
  absl::StatusOr<std::string> ours = serialize(DType::f32, {2}, asBytes(floats({1, 2})));
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(*ours, bytes);
}

TEST(NpyTest, ReadsVersionsTwoAndThreeAndScalars) {
  for (int major : {2, 3}) {
    absl::StatusOr<Array> a = parse(makeNpy(major, f32Dict("(3,)"), floats({1, 2, 3})));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->shape, std::vector<int64_t>{3});
  }
  absl::StatusOr<Array> s = parse(makeNpy(1, f32Dict("()"), floats({2.5f})));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->elementCount(), 1);
  // Key order, double quotes, no trailing comma and old-style longs.
  absl::StatusOr<Array> t =
      parse(makeNpy(1, "{\"shape\": (2L, 1L), \"fortran_order\": False, \"descr\": \"<f4\"}", floats({1, 2})));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape, (std::vector<int64_t>{2, 1}));
}

TEST(NpyTest, RejectsBadMagicAndTruncatedPreamble) {
  expectBad("", "empty file");
  expectBad("\x93NUM", "truncated");
  expectBad("PK\x03\x04 this is a zip file", "not a .npy file");
  expectBad(std::string("\x93NUMPX\x01\x00", 8), "not a .npy file");
  expectBad(std::string("\x93NUMPY", 6), "truncated");
  expectBad(std::string("\x93NUMPY\x01\x00\x10", 9), "truncated");
  expectBad(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated");
}

TEST(NpyTest, RejectsUnknownVersions) {
  std::string b = makeNpy(1, f32Dict("(1,)"), floats({1}));
  b[6] = 4;
  expectBad(b, "unsupported .npy format version 4.0");
  b[6] = 1;
  b[7] = 1;
  expectBad(b, "unsupported .npy format version 1.1");
  b[6] = 0;
  b[7] = 0;
  expectBad(b, "unsupported .npy format version 0.0");
}

TEST(NpyTest, RejectsTruncatedHeaderAndData) {
  const std::string b = makeNpy(1, f32Dict("(4,)"), floats({1, 2, 3, 4}));
  expectBad(b.substr(0, 40), "truncated: the header needs");
  expectBad(b.substr(0, b.size() - 1), "truncated");
  expectBad(b.substr(0, b.size() - 16), "needs 16 bytes of data, the file has 0");
  expectBad(b + "x", "1 more");
  // A header length far past the end of the file.
  std::string big = b;
  big[8] = '\xff';
  big[9] = '\x7f';
  expectBad(big, "truncated: the header needs");
  std::string v2 = makeNpy(2, f32Dict("(4,)"), floats({1, 2, 3, 4}));
  v2[11] = '\x7f';
  expectBad(v2, "above the limit");
}

TEST(NpyTest, RejectsBadHeaderDicts) {
  const std::string one = floats({1});
  expectBad(makeNpy(1, "", one), "expected '{'");
  expectBad(makeNpy(1, "[1, 2]", one), "expected '{'");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False}", one), "no 'shape' key");
  expectBad(makeNpy(1, "{'descr': '<f4', 'shape': (1,)}", one), "no 'fortran_order' key");
  expectBad(makeNpy(1, "{'fortran_order': False, 'shape': (1,)}", one), "no 'descr' key");
  expectBad(makeNpy(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", one),
            "'descr' appears twice");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", one),
            "unexpected key 'x'");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", one), "not True or False");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", one), "not a tuple");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", one), "trailing comma");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", one), "non-negative");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2 3)}", one), "expected ','");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", one),
            "too large");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", one), "after the closing");
  expectBad(makeNpy(1, "{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", one), "expected ':'");
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", one), "expected ',' or '}'");
  expectBad(makeNpy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", one),
            "structured dtypes");
}

TEST(NpyTest, RejectsUnsupportedDTypesAndFortranOrder) {
  for (const char* descr : {">f4", "<f2", "<u2", "|u1", "<c8", "=f4", "<U3", "|O"}) {
    expectBad(makeNpy(1, std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,)}",
                      floats({1})),
              "unsupported dtype");
  }
  expectBad(makeNpy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2)}", floats({1, 2, 3, 4})),
            "Fortran-order");
}

TEST(NpyTest, RejectsHugeShapesWithoutOverflow) {
  expectBad(makeNpy(1, f32Dict("(4611686018427387904, 4611686018427387904)"), floats({1})), "too large");
  expectBad(makeNpy(1, f32Dict("(1000000, 1000000, 1000000)"), floats({1})), "too large");
  expectBad(makeNpy(1, f32Dict("(1000000, 0, 1000000)"), floats({1})), "the file has 4 more");
}

TEST(NpyTest, RejectsBoolBytesOtherThanZeroAndOne) {
  expectBad(makeNpy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,)}", std::string("\x01\x00\x02", 3)),
            "bool element 2");
}

TEST(NpyTest, SerializeChecksTheDataSize) {
  EXPECT_FALSE(serialize(DType::f32, {3}, asBytes(floats({1, 2}))).ok());
  EXPECT_FALSE(serialize(DType::f32, {-1}, {}).ok());
  EXPECT_TRUE(serialize(DType::f32, {0}, {}).ok());
}

class NpyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = tmp != nullptr ? tmp : "/tmp";
  }
  std::string dir_;
};

TEST_F(NpyFileTest, ErrorsNameTheFile) {
  const std::string missing = dir_ + "/no_such.npy";
  absl::StatusOr<Array> a = readFile(missing);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(a.status().message()).find(missing), std::string::npos);

  absl::StatusOr<Array> d = readFile(dir_);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(std::string(d.status().message()).find("not a regular file"), std::string::npos);

  const std::string bad = dir_ + "/bad.npy";
  {
    std::ofstream f(bad, std::ios::binary);
    f << "hello";
  }
  absl::StatusOr<Array> b = readFile(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(std::string(b.status().message()).find(bad + ": not a .npy file"), std::string::npos)
      << b.status().message();
}

TEST_F(NpyFileTest, WritesAndReadsBack) {
  const std::string path = dir_ + "/x.npy";
  const std::string data = floats({1.5f, -2.0f, 3.25f});
  ASSERT_TRUE(writeFile(path, DType::f32, {3}, asBytes(data)).ok());
  absl::StatusOr<Array> a = readFile(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a->data.data()), a->data.size()), data);
  absl::Status st = writeFile(dir_ + "/no/such/dir/x.npy", DType::f32, {3}, asBytes(data));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("no/such/dir/x.npy"), std::string::npos);
}

TEST(NpyTest, ShapeText) {
  EXPECT_EQ(shapeText({}), "()");
  EXPECT_EQ(shapeText({16}), "(16,)");
  EXPECT_EQ(shapeText({2, 3}), "(2, 3)");
}

}  // namespace
}  // namespace accy::npy
