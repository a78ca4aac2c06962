// libFuzzer target for the wire decoder and everything a decoded program
// reaches (tools/fuzz/build_fuzzer.sh builds it with clang, ASan and UBSan;
// //tools:wire_fuzz_replay_test replays the seed corpus through it with gcc).
//
// Each input is handed to accy::wire::decode with tight limits (64 KiB of
// bytes, fewer than 64 nodes, no value over 1 MiB). When it decodes:
//   1. encode(program) must decode back to the same program (aborts if not);
//   2. unless built with -DACCY_FUZZ_DECODE_ONLY, the program is compiled
//      with x64::compileProgram (one thread; SSE4.1, AVX2+FMA or AVX-512 as
//      the input's last byte picks, capped at what the host has), loaded with
//      cpu::LoadedExecutable and, when its estimated work is small (at most
//      2^22 element operations), launched once on zero-filled inputs. Every
//      input and output buffer ends right before an inaccessible page, so a
//      kernel that writes or reads past a buffer's end faults here instead of
//      corrupting memory silently. A compiled executable that fails to load
//      as InvalidProgram, or a launch refused with InvalidBuffer, is a
//      compiler bug and aborts.
// Compile errors are fine (the fuzzer wants no crash, leak or runaway
// allocation, not success).
//
// Built with -DACCY_FUZZ_LIBFUZZER (build_fuzzer.sh does), it also has a
// structure-aware mutator: half of the mutations decode the input, edit the
// program (an extent, dtype, op, operand, attribute, constant or output;
// or a new node), re-infer every node's type so the edit mostly stays a
// valid program, and encode it again. Byte-level mutations alone rarely get
// past the decoder's type checks into the compiler.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "base/errors.h"
#include "compiler/tensor/program.h"
#include "compiler/wire/wire.h"

#ifndef ACCY_FUZZ_DECODE_ONLY
#include "backends/cpu/cpu_program.h"
#include "compiler/codegen/x86_64/compile.h"
#endif

namespace {

namespace tensor = accy::tensor;

constexpr accy::wire::DecodeLimits kLimits{
    .max_bytes = int64_t{1} << 16,
    .max_nodes = 63,
    .max_value_bytes = int64_t{1} << 20,
};

[[noreturn]] void die(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "wire_fuzz: %s: %s\n", what, std::string(status.message()).c_str());
  std::abort();
}

// --- the structure-aware mutator ----------------------------------------

using Rng = std::minstd_rand;

size_t pick(Rng& rng, size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }

const char* const kAxisNames[] = {"i", "j", "k", "n", "point", "guess", "a_1", "z"};
const int64_t kExtents[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 255, 257, 1000};
const double kScalars[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-40, 1e30, -1e30, 2147483647.0, -2147483648.0,
                           9.2233720368547758e18, -9.2233720368547758e18, std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
const int64_t kInts[] = {-1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 17, 64};
// Counts, extents and strides at the edges of the integers: a client's
// numbers that a sum or product could wrap.
const int64_t kExtremes[] = {INT64_MIN, INT64_MIN + 1, -(int64_t{1} << 62), int64_t{1} << 31, (int64_t{1} << 31) - 1,
                             int64_t{1} << 32, int64_t{1} << 62, INT64_MAX - 1, INT64_MAX};

// Every op of `category` but the leaves.
std::vector<tensor::OpCode> opsOf(tensor::OpCategory category) {
  std::vector<tensor::OpCode> ops;
  for (int i = 0; i < tensor::kOpCount; ++i) {
    const auto op = static_cast<tensor::OpCode>(i);
    if (tensor::opCategory(op) == category) ops.push_back(op);
  }
  return ops;
}

// Gives every non-input node the type its operands imply, in order; nodes
// whose inference fails keep their recorded type (the program then fails
// to decode, which is fine too).
[[maybe_unused]] void retype(tensor::Program& program) {
  std::vector<tensor::Node> prior;
  prior.reserve(program.nodes.size());
  for (tensor::Node& n : program.nodes) {
    if (n.op != tensor::OpCode::kInput) {
      absl::StatusOr<tensor::Spec> spec = tensor::inferNode(prior, n);
      if (spec.ok()) {
        n.dtype = spec->dtype;
        n.axes = spec->axes;
      }
    }
    prior.push_back(n);
  }
}

// One random edit of `p`.
[[maybe_unused]] void mutateOnce(tensor::Program& p, Rng& rng) {
  if (p.nodes.empty()) return;
  tensor::Node& n = p.nodes[pick(rng, p.nodes.size())];
  const int32_t id = static_cast<int32_t>(&n - p.nodes.data());
  switch (pick(rng, 10)) {
    case 0:  // an extent of an input, iota or broadcast
      if (n.op == tensor::OpCode::kInput && !n.axes.empty()) {
        n.axes[pick(rng, n.axes.size())].extent = kExtents[pick(rng, std::size(kExtents))];
      } else if (!n.ints.empty()) {
        n.ints[pick(rng, n.ints.size())] = kExtents[pick(rng, std::size(kExtents))];
      }
      break;
    case 1:  // an input's or cast's dtype
      if (n.op == tensor::OpCode::kInput || n.op == tensor::OpCode::kCast || n.op == tensor::OpCode::kConstant ||
          n.op == tensor::OpCode::kIota) {
        n.dtype = static_cast<tensor::DType>(pick(rng, 6));
      }
      break;
    case 2:  // an input gains or loses an axis
      if (n.op == tensor::OpCode::kInput) {
        if (!n.axes.empty() && rng() % 2 == 0) {
          n.axes.erase(n.axes.begin() + static_cast<long>(pick(rng, n.axes.size())));
        } else if (n.axes.size() < 4) {
          n.axes.push_back(tensor::Axis{kAxisNames[pick(rng, std::size(kAxisNames))],
                                        kExtents[pick(rng, std::size(kExtents))]});
        }
      }
      break;
    case 3: {  // another op of the same category
      const tensor::OpCategory c = tensor::opCategory(n.op);
      if (c != tensor::OpCategory::Leaf && c != tensor::OpCategory::Layout) {
        const std::vector<tensor::OpCode> ops = opsOf(c);
        n.op = ops[pick(rng, ops.size())];
      }
      break;
    }
    case 4:  // an operand now names another earlier node
      if (!n.operands.empty() && id > 0) n.operands[pick(rng, n.operands.size())] = static_cast<int32_t>(pick(rng, id));
      break;
    case 5:  // an integer attribute: a small number, an extreme, or (a loop's counts) two of the same extreme
      if (n.op != tensor::OpCode::kInput && !n.ints.empty()) {
        const bool loop = n.op == tensor::OpCode::kScan || n.op == tensor::OpCode::kWhileLoop;
        const int64_t extreme = kExtremes[pick(rng, std::size(kExtremes))];
        switch (pick(rng, loop ? 3 : 2)) {
          case 0: n.ints[pick(rng, n.ints.size())] = kInts[pick(rng, std::size(kInts))]; break;
          case 1: n.ints[pick(rng, n.ints.size())] = extreme; break;
          default:  // carries and xs (or any two) both near 2^62: their sum wraps
            n.ints[pick(rng, n.ints.size())] = extreme;
            n.ints[pick(rng, n.ints.size())] = extreme;
        }
      }
      break;
    case 6:  // an axis-name attribute
      if (!n.names.empty()) {
        std::string& name = n.names[pick(rng, n.names.size())];
        const tensor::Node& any = p.nodes[pick(rng, p.nodes.size())];
        name = any.axes.empty() || rng() % 4 == 0 ? kAxisNames[pick(rng, std::size(kAxisNames))]
                                                  : any.axes[pick(rng, any.axes.size())].name;
      }
      break;
    case 7:  // a constant's value
      if (n.op == tensor::OpCode::kConstant) n.scalar = kScalars[pick(rng, std::size(kScalars))];
      break;
    case 8:  // the outputs
      if (rng() % 2 == 0 || p.outputs.size() <= 1) {
        p.outputs.push_back(id);
      } else {
        p.outputs.erase(p.outputs.begin() + static_cast<long>(pick(rng, p.outputs.size())));
      }
      break;
    default: {  // a new node on earlier ones, made an output
      if (p.nodes.size() >= static_cast<size_t>(kLimits.max_nodes)) break;
      tensor::Node m;
      const int32_t a = static_cast<int32_t>(pick(rng, p.nodes.size()));
      const int32_t b = static_cast<int32_t>(pick(rng, p.nodes.size()));
      const tensor::Node& na = p.nodes[a];
      // An i32 view of `b` for the ops that index by data.
      auto indicesOf = [&](int32_t of) {
        tensor::Node c;
        c.op = tensor::OpCode::kCast;
        c.dtype = tensor::DType::i32;
        c.operands = {of};
        p.nodes.push_back(std::move(c));
        return static_cast<int32_t>(p.nodes.size() - 1);
      };
      switch (pick(rng, 11)) {
        case 0:
          m.op = opsOf(tensor::OpCategory::Unary)[pick(rng, opsOf(tensor::OpCategory::Unary).size())];
          m.operands = {a};
          break;
        case 1:
          m.op = opsOf(tensor::OpCategory::Binary)[pick(rng, opsOf(tensor::OpCategory::Binary).size())];
          m.operands = {a, b};
          break;
        case 2:
          m.op = opsOf(tensor::OpCategory::Reduce)[pick(rng, opsOf(tensor::OpCategory::Reduce).size())];
          m.operands = {a};
          if (na.axes.empty()) return;
          m.names = {na.axes[pick(rng, na.axes.size())].name};
          break;
        case 3:
          m.op = tensor::OpCode::kDot;
          m.operands = {a, b};
          if (na.axes.empty()) return;
          m.names = {na.axes[pick(rng, na.axes.size())].name};
          break;
        case 4:  // cast or bitcast (mostly between widths that differ: refused)
          m.op = pick(rng, 2) == 0 ? tensor::OpCode::kCast : tensor::OpCode::kBitcast;
          m.operands = {a};
          m.dtype = static_cast<tensor::DType>(pick(rng, 6));
          break;
        case 5:  // take: indices from any node, out of range as they come
          if (na.axes.empty()) return;
          m.op = tensor::OpCode::kTake;
          m.names = {na.axes[pick(rng, na.axes.size())].name};
          m.operands = {a, indicesOf(b)};
          break;
        case 6:  // scatter_add: updates from a third node (mostly the wrong axes)
          if (na.axes.empty()) return;
          m.op = tensor::OpCode::kScatterAdd;
          m.names = {na.axes[pick(rng, na.axes.size())].name};
          m.operands = {a, indicesOf(b), static_cast<int32_t>(pick(rng, p.nodes.size()))};
          break;
        case 7:  // pad
          if (na.axes.empty()) return;
          m.op = tensor::OpCode::kPad;
          m.names = {na.axes[pick(rng, na.axes.size())].name};
          m.ints = {kInts[pick(rng, std::size(kInts))], kInts[pick(rng, std::size(kInts))]};
          m.scalar = kScalars[pick(rng, std::size(kScalars))];
          m.operands = {a};
          break;
        case 8:  // window
          if (na.axes.empty()) return;
          m.op = tensor::OpCode::kWindow;
          m.names = {na.axes[pick(rng, na.axes.size())].name, kAxisNames[pick(rng, std::size(kAxisNames))]};
          m.ints = {kInts[pick(rng, std::size(kInts))], kInts[pick(rng, std::size(kInts))],
                    kInts[pick(rng, std::size(kInts))]};
          m.operands = {a};
          break;
        case 9:  // Threefry's words over any four nodes (u32 ones decode)
          m.op = pick(rng, 2) == 0 ? tensor::OpCode::kThreefryWord0 : tensor::OpCode::kThreefryWord1;
          m.operands = {a, b, b, a};
          break;
        default:
          m.op = tensor::OpCode::kBroadcast;
          m.operands = {a};
          m.names = {kAxisNames[pick(rng, std::size(kAxisNames))]};
          m.ints = {kExtents[pick(rng, std::size(kExtents))]};
          break;
      }
      p.nodes.push_back(std::move(m));
      p.outputs.push_back(static_cast<int32_t>(p.nodes.size() - 1));
      break;
    }
  }
}

#ifndef ACCY_FUZZ_DECODE_ONLY

constexpr int64_t kMaxRunWork = int64_t{1} << 22;

// A zero-filled buffer of `bytes` that ends where an inaccessible page
// begins.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    usable_ = (bytes + page - 1) / page * page;
    mapped_ = usable_ + page;
    void* m = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("wire_fuzz: mmap");
      std::abort();
    }
    base_ = static_cast<std::byte*>(m);
    if (mprotect(base_ + usable_, page, PROT_NONE) != 0) {
      std::perror("wire_fuzz: mprotect");
      std::abort();
    }
  }
  ~GuardedBuffer() { munmap(base_, mapped_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  std::span<std::byte> span() const { return {base_ + usable_ - bytes_, bytes_}; }

 private:
  size_t bytes_ = 0, usable_ = 0, mapped_ = 0;
  std::byte* base_ = nullptr;
};

// Element operations one run performs, roughly: every node touches its own
// elements and its operands'; a dot also walks its contracted axis.
int64_t estimatedWork(const tensor::Program& program) {
  int64_t work = 0;
  for (const tensor::Node& n : program.nodes) {
    int64_t w = n.spec().elementCount();
    for (int32_t o : n.operands) w = std::max(w, program.nodes[o].spec().elementCount());
    if (n.op == tensor::OpCode::kDot && !n.operands.empty()) {
      for (const tensor::Axis& a : program.nodes[n.operands[0]].axes) {
        if (!n.names.empty() && a.name == n.names[0]) w = n.spec().elementCount() * a.extent;
      }
    }
    work += w;
    if (work > kMaxRunWork) return work;
  }
  return work;
}

// The widest instruction set the fuzzer compiles for: the host's, or less
// where ACCY_FUZZ_ISA (sse41, avx2) says so, to take the paths a smaller
// host takes (a run's inputs follow what it covers).
accy::x64::Isa widestIsa() {
  static const accy::x64::Isa widest = [] {
    const accy::x64::Isa host = accy::x64::detectIsa();
    const char* cap = std::getenv("ACCY_FUZZ_ISA");
    if (cap == nullptr) return host;
    if (std::strcmp(cap, "sse41") == 0) return std::min(host, accy::x64::Isa::kSse41);
    if (std::strcmp(cap, "avx2") == 0) return std::min(host, accy::x64::Isa::kAvx2);
    return host;
  }();
  return widest;
}

void compileAndRun(const tensor::Program& program, uint8_t isa_choice) {
  accy::x64::CompileOptions options;
  options.threads = 1;
  // Each instruction set the host can run, chosen by the input's last byte.
  const auto isa = static_cast<accy::x64::Isa>(isa_choice % 3);
  options.isa = std::min(isa, widestIsa());
  absl::StatusOr<accy::executable::Executable> exe = accy::x64::compileProgram(program, options);
  if (!exe.ok()) return;
  absl::StatusOr<accy::cpu::LoadedExecutable> loaded = accy::cpu::LoadedExecutable::load(*std::move(exe), 1);
  if (!loaded.ok()) {
    if (accy::errorKind(loaded.status()) == accy::ErrorKind::kInvalidProgram) {
      die("compileProgram made an executable that does not validate", loaded.status());
    }
    return;
  }
  if (estimatedWork(program) > kMaxRunWork) return;
  std::vector<std::unique_ptr<GuardedBuffer>> buffers;
  std::vector<std::span<const std::byte>> inputs;
  std::vector<std::span<std::byte>> outputs;
  for (const tensor::Spec& s : loaded->executable().inputs) {
    buffers.push_back(std::make_unique<GuardedBuffer>(static_cast<size_t>(s.byteSize())));
    inputs.push_back(buffers.back()->span());
  }
  for (const tensor::Spec& s : loaded->executable().outputs) {
    buffers.push_back(std::make_unique<GuardedBuffer>(static_cast<size_t>(s.byteSize())));
    outputs.push_back(buffers.back()->span());
  }
  const absl::Status st = loaded->launch(inputs, outputs);
  if (!st.ok() && accy::errorKind(st) == accy::ErrorKind::kInvalidBuffer) {
    die("launch refused buffers sized from the executable's own specs", st);
  }
}

#endif  // ACCY_FUZZ_DECODE_ONLY

}  // namespace

// Protobuf logs every string field with invalid UTF-8 to stderr; the
// decoder already rejects those inputs, so the log is noise here.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

#ifdef ACCY_FUZZ_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng rng(seed);
  if (rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  absl::StatusOr<tensor::Program> program =
      accy::wire::decode(std::string_view(reinterpret_cast<const char*>(data), size), kLimits);
  if (!program.ok()) return LLVMFuzzerMutate(data, size, max_size);
  const size_t edits = 1 + pick(rng, 3);
  for (size_t i = 0; i < edits; ++i) mutateOnce(*program, rng);
  retype(*program);
  const std::string bytes = accy::wire::encode(*program);
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<tensor::Program> program = accy::wire::decode(bytes, kLimits);
  if (!program.ok()) return 0;
  // What decodes must survive an encode/decode round trip unchanged. The
  // encodings are compared, not the programs: a NaN constant is not equal
  // to itself.
  const std::string encoded = accy::wire::encode(*program);
  absl::StatusOr<tensor::Program> again = accy::wire::decode(encoded, kLimits);
  if (!again.ok()) die("a decoded program does not decode after encode", again.status());
  if (accy::wire::encode(*again) != encoded) {
    std::fprintf(stderr, "wire_fuzz: encode/decode changed the program\n");
    std::abort();
  }
#ifndef ACCY_FUZZ_DECODE_ONLY
  compileAndRun(*program, data[size - 1]);
#endif
  return 0;
}
