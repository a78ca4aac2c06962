#include "tools/artifact.h"

#include <cstring>

#include "base/strings.h"

namespace accy::artifact {
namespace {

class Writer {
 public:
  void u8(uint8_t v) { out_ += static_cast<char>(v); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { le(static_cast<uint32_t>(v), 4); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void spec(const tensor::Spec& s) {
    u8(static_cast<uint8_t>(s.dtype));
    u32(static_cast<uint32_t>(s.axes.size()));
    for (const tensor::Axis& a : s.axes) {
      str(a.name);
      i64(a.extent);
    }
  }
  std::string take() { return std::move(out_); }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  size_t left() const { return bytes_.size() - pos_; }
  size_t pos() const { return pos_; }

  absl::Status need(size_t n, std::string_view what) const {
    if (left() < n) {
      return absl::InvalidArgumentError(
          strCat("artifact: truncated at byte ", pos_, ": ", what, " needs ", n, " bytes, ", left(), " left"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> le(int n, std::string_view what) {
    if (absl::Status st = need(n, what); !st.ok()) return st;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  absl::StatusOr<std::string> str(std::string_view what) {
    absl::StatusOr<uint64_t> n = le(4, what);
    if (!n.ok()) return n.status();
    if (absl::Status st = need(*n, what); !st.ok()) return st;
    std::string s(bytes_.substr(pos_, *n));
    pos_ += *n;
    return s;
  }
  // A count of items each at least `min_item_bytes` long, bounded by what
  // is left.
  absl::StatusOr<uint32_t> count(std::string_view what, size_t min_item_bytes) {
    absl::StatusOr<uint64_t> n = le(4, what);
    if (!n.ok()) return n.status();
    if (*n > left() / min_item_bytes) {
      return absl::InvalidArgumentError(
          strCat("artifact: ", what, " count ", *n, " at byte ", pos_ - 4, " exceeds what the file holds"));
    }
    return static_cast<uint32_t>(*n);
  }
  std::string_view take(size_t n) {
    std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

#define ACCY_READ(lhs, expr)                \
  do {                                      \
    auto accy_read_ = (expr);               \
    if (!accy_read_.ok()) return accy_read_.status(); \
    lhs = *accy_read_;                      \
  } while (0)

absl::Status invalid(std::string what) { return absl::InvalidArgumentError(strCat("artifact: ", what)); }

absl::StatusOr<tensor::DType> readDType(Reader& r, std::string_view what) {
  uint64_t v;
  ACCY_READ(v, r.le(1, what));
  if (v > static_cast<uint64_t>(tensor::DType::bool_)) return invalid(strCat(what, ": unknown dtype number ", v));
  return static_cast<tensor::DType>(v);
}

absl::StatusOr<tensor::Spec> readSpec(Reader& r, std::string_view what) {
  tensor::Spec s;
  ACCY_READ(s.dtype, readDType(r, what));
  uint32_t n;
  ACCY_READ(n, r.count(strCat(what, " axis"), 12));
  for (uint32_t i = 0; i < n; ++i) {
    tensor::Axis a;
    ACCY_READ(a.name, r.str(strCat(what, " axis name")));
    uint64_t extent;
    ACCY_READ(extent, r.le(8, strCat(what, " axis extent")));
    a.extent = static_cast<int64_t>(extent);
    s.axes.push_back(std::move(a));
  }
  if (absl::Status st = tensor::checkAxes(what, s.dtype, s.axes); !st.ok()) {
    return invalid(std::string(st.message()));
  }
  return s;
}

}  // namespace

std::string serialize(const executable::Executable& exe) {
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.u32(kVersion);
  w.str(exe.target);
  w.str(exe.isa);
  w.u32(static_cast<uint32_t>(exe.inputs.size()));
  for (const tensor::Spec& s : exe.inputs) w.spec(s);
  w.u32(static_cast<uint32_t>(exe.outputs.size()));
  for (const tensor::Spec& s : exe.outputs) w.spec(s);
  w.u64(exe.code.size());
  w.raw(exe.code.data(), exe.code.size());
  w.i64(exe.artifact_plan.scratch_bytes);
  w.u32(static_cast<uint32_t>(exe.artifact_plan.buffers.size()));
  for (const executable::BufferPlan& b : exe.artifact_plan.buffers) {
    w.u8(static_cast<uint8_t>(b.role));
    w.i32(b.io_index);
    w.u8(static_cast<uint8_t>(b.dtype));
    w.i64(b.bytes);
    w.i64(b.alignment);
    w.i64(b.scratch_offset);
  }
  w.u32(static_cast<uint32_t>(exe.launch_plan.steps.size()));
  for (const executable::LaunchStep& s : exe.launch_plan.steps) {
    w.str(s.kernel);
    w.u64(s.entry_offset);
    w.i64(s.parallel_extent);
    w.i64(s.work);
  }
  return w.take();
}

absl::StatusOr<executable::Executable> deserialize(std::string_view bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return invalid("missing the magic \"ACCYEXE\\0\"");
  }
  Reader r(bytes);
  r.take(sizeof kMagic);
  uint64_t version;
  ACCY_READ(version, r.le(4, "version"));
  if (version != kVersion) return invalid(strCat("version ", version, "; this build reads version ", kVersion));
  executable::Executable exe;
  ACCY_READ(exe.target, r.str("target"));
  ACCY_READ(exe.isa, r.str("isa"));
  uint32_t n;
  ACCY_READ(n, r.count("input", 5));
  for (uint32_t i = 0; i < n; ++i) {
    tensor::Spec s;
    ACCY_READ(s, readSpec(r, strCat("input ", i)));
    exe.inputs.push_back(std::move(s));
  }
  ACCY_READ(n, r.count("output", 5));
  for (uint32_t i = 0; i < n; ++i) {
    tensor::Spec s;
    ACCY_READ(s, readSpec(r, strCat("output ", i)));
    exe.outputs.push_back(std::move(s));
  }
  uint64_t code_bytes;
  ACCY_READ(code_bytes, r.le(8, "code size"));
  if (absl::Status st = r.need(code_bytes, "code"); !st.ok()) return st;
  const std::string_view code = r.take(code_bytes);
  exe.code.assign(code.begin(), code.end());
  uint64_t scratch;
  ACCY_READ(scratch, r.le(8, "scratch size"));
  exe.artifact_plan.scratch_bytes = static_cast<int64_t>(scratch);
  if (exe.artifact_plan.scratch_bytes < 0) return invalid("negative scratch size");
  ACCY_READ(n, r.count("buffer", 30));
  for (uint32_t i = 0; i < n; ++i) {
    executable::BufferPlan b;
    uint64_t v;
    ACCY_READ(v, r.le(1, "buffer role"));
    if (v > static_cast<uint64_t>(choir::BufferRole::kTemp)) return invalid(strCat("buffer ", i, ": unknown role ", v));
    b.role = static_cast<choir::BufferRole>(v);
    ACCY_READ(v, r.le(4, "buffer io index"));
    b.io_index = static_cast<int32_t>(static_cast<uint32_t>(v));
    ACCY_READ(b.dtype, readDType(r, strCat("buffer ", i)));
    ACCY_READ(v, r.le(8, "buffer bytes"));
    b.bytes = static_cast<int64_t>(v);
    ACCY_READ(v, r.le(8, "buffer alignment"));
    b.alignment = static_cast<int64_t>(v);
    ACCY_READ(v, r.le(8, "buffer scratch offset"));
    b.scratch_offset = static_cast<int64_t>(v);
    if (b.bytes < 0 || b.bytes > tensor::kMaxValueBytes) return invalid(strCat("buffer ", i, ": bad size ", b.bytes));
    if (b.alignment < 1 || b.alignment > 4096) return invalid(strCat("buffer ", i, ": bad alignment ", b.alignment));
    if (b.role == choir::BufferRole::kTemp && (b.scratch_offset < 0 || b.scratch_offset > tensor::kMaxValueBytes)) {
      return invalid(strCat("buffer ", i, ": bad scratch offset ", b.scratch_offset));
    }
    exe.artifact_plan.buffers.push_back(b);
  }
  ACCY_READ(n, r.count("kernel", 28));
  for (uint32_t i = 0; i < n; ++i) {
    executable::LaunchStep s;
    ACCY_READ(s.kernel, r.str("kernel name"));
    ACCY_READ(s.entry_offset, r.le(8, "kernel entry offset"));
    uint64_t v;
    ACCY_READ(v, r.le(8, "kernel parallel extent"));
    s.parallel_extent = static_cast<int64_t>(v);
    ACCY_READ(v, r.le(8, "kernel work"));
    s.work = static_cast<int64_t>(v);
    exe.launch_plan.steps.push_back(std::move(s));
  }
  if (r.left() != 0) return invalid(strCat(r.left(), " bytes after the last kernel"));
  if (absl::Status st = executable::validateExecutable(exe); !st.ok()) {
    return invalid(std::string(st.message()));
  }
  return exe;
}

}  // namespace accy::artifact
