// Round trips over the conformance corpus (transformed programs included),
// determinism, versions, and refusal of truncated, bit-flipped and
// oversized inputs.
#include "compiler/wire/wire.h"

#include <sys/resource.h>

#include <functional>
#include <random>

#include "accy/accy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/conformance.h"
#include "tests/random_programs.h"

namespace accy::wire {
namespace {

using ::testing::HasSubstr;
namespace tensor = accy::tensor;

std::vector<tensor::Program> corpus() {
  std::vector<tensor::Program> out;
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    testing::RandomOptions o;
    o.dtype = seed % 2 ? tensor::DType::f32 : tensor::DType::f64;
    out.push_back(testing::randomProgram(seed, o).program);
  }
  // Transformed programs: the tone value-and-gradient, batched.
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {}),
                                tensor::spec(tensor::DType::f32, {{"point", 16}}),
                                tensor::spec(tensor::DType::f32, {{"point", 16}})};
  auto f = tensor::Function::define("mismatch", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    tensor::Value d = a[0].mul(a[1]).sin().sub(a[2]);
    return d.mul(d).sum("point");
  });
  auto g = f->valueAndGrad({.wrt = {0, 1}});
  out.push_back(g->program());
  out.push_back(g->vmap({.axis_size = 8, .in_axes = {tensor::mappedAxis(0), tensor::unmapped, tensor::unmapped},
                         .axis_name = "guess"})
                    ->program());
  return out;
}

TEST(Wire, RoundTripDecodesToTheSameProgramAndRunsTheSame) {
  int n = 0;
  for (const tensor::Program& p : corpus()) {
    const std::string bytes = encode(p);
    auto back = decode(bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, p);
    EXPECT_EQ(encode(*back), bytes);  // deterministic
    // Same results on the CPU.
    std::mt19937 rng(n++);
    std::vector<std::vector<std::byte>> inputs;
    for (const tensor::Spec& s : p.inputSpecs()) {
      std::vector<std::byte> b(s.byteSize());
      for (int64_t e = 0; e < s.elementCount(); ++e) {
        tensor::storeElement(s.dtype, std::uniform_real_distribution<double>(-2, 2)(rng),
                             &b[e * tensor::dtypeSize(s.dtype)]);
      }
      inputs.push_back(std::move(b));
    }
    auto a = tensor::CpuExecutable::compile(p, {.threads = 1});
    auto c = tensor::CpuExecutable::compile(*back, {.threads = 1});
    ASSERT_TRUE(a.ok() && c.ok());
    EXPECT_EQ(a->executable().code, c->executable().code);
    std::vector<std::vector<std::byte>> oa, oc;
    std::vector<std::span<std::byte>> va, vc;
    for (const tensor::Spec& s : p.outputSpecs()) {
      oa.emplace_back(s.byteSize());
      oc.emplace_back(s.byteSize());
    }
    for (size_t k = 0; k < oa.size(); ++k) {
      va.emplace_back(oa[k]);
      vc.emplace_back(oc[k]);
    }
    auto in = testing::views(inputs);
    ASSERT_TRUE(a->launch(in, va).ok());
    ASSERT_TRUE(c->launch(in, vc).ok());
    EXPECT_EQ(oa, oc);
  }
}

TEST(Wire, HeaderAndVersions) {
  const std::string bytes = encode(corpus()[0]);
  EXPECT_EQ(bytes.substr(0, 4), "ACCY");
  EXPECT_EQ(bytes[4], 1);
  EXPECT_EQ(bytes[5], 0);
  EXPECT_EQ(bytes[6], 0);  // the program uses nothing of 1.1: written as 1.0
  std::string newer_minor = bytes;
  newer_minor[6] = 7;  // a minor version newer than this reader's is refused
  EXPECT_EQ(errorKind(decode(newer_minor).status()), ErrorKind::kUnsupportedVersion);
  EXPECT_THAT(decode(newer_minor).status().message(), HasSubstr("version 1.7"));
  std::string major2 = bytes;
  major2[4] = 2;
  auto st = decode(major2).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kUnsupportedVersion);
  EXPECT_THAT(st.message(), HasSubstr("version 2.0"));
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  EXPECT_EQ(errorKind(decode(bad_magic).status()), ErrorKind::kInvalidProgram);
}

// `program` is written with minor version `minor`, round trips, is
// refused by a reader of the minor before with UnsupportedVersion, and
// under a header of that minor with InvalidProgram naming the version it
// needs.
void expectMinorVersion(const tensor::Program& program, int minor, const std::string& name) {
  const std::string bytes = encode(program);
  EXPECT_EQ(bytes[6], minor) << name;
  auto back = decode(bytes);
  ASSERT_TRUE(back.ok()) << name << ": " << back.status();
  EXPECT_EQ(*back, program) << name;
  EXPECT_EQ(errorKind(decode(bytes, DecodeLimits{.reader_minor = static_cast<uint16_t>(minor - 1)}).status()),
            ErrorKind::kUnsupportedVersion)
      << name;
  std::string relabelled = bytes;
  relabelled[6] = static_cast<char>(minor - 1);
  auto st = decode(relabelled).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << name;
  EXPECT_THAT(st.message(), HasSubstr("needs wire version 1." + std::to_string(minor))) << name;
}

// Version 1.1's ops: written with minor 1, round trip, refused by a 1.0
// reader with UnsupportedVersion, and refused under a 1.0 header.
TEST(Wire, MinorVersionOneOps) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"v", 6}, {"f", 3}}),
                                tensor::spec(tensor::DType::i64, {{"t", 4}})};
  using Fn = std::function<tensor::Value(std::span<const tensor::Value>)>;
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"take", [](auto a) { return take(a[0], "v", a[1]); }},
      {"scatter_add", [](auto a) { return scatterAdd(a[0], "v", a[1], take(a[0], "v", a[1])); }},
      {"pad", [](auto a) { return a[0].pad("f", 1, 2, 3.5); }},
      {"window", [](auto a) { return a[0].window("v", "k", 2, 2, 2); }},
      {"dot", [](auto a) { return dot(a[0], a[0], {"v", "f"}); }},
  };
  for (const auto& [name, fn] : cases) {
    auto p = tensor::define(name, specs, [&](tensor::Builder&, std::span<const tensor::Value> a) { return fn(a); });
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    expectMinorVersion(*p, 1, name);
  }
}

// Version 1.2: u32 values and the bit operations (random numbers are
// recorded from them). Written with minor 2, round trip, refused by a 1.1
// reader with UnsupportedVersion and under a 1.1 header with
// InvalidProgram; bit operations on floats are refused by the decoder as
// by recording.
TEST(Wire, MinorVersionThreeCompensatedSums) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"v", 6}, {"w", 3}})};
  auto sum = tensor::define("sum", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0].sum("v", tensor::SumOptions{.compensated = true});
  });
  ASSERT_TRUE(sum.ok()) << sum.status();
  expectMinorVersion(*sum, 3, "compensated sum");
  auto mean = tensor::define("mean", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[0].mean(std::vector<std::string>{"v", "w"}, tensor::SumOptions{.compensated = true});
  });
  ASSERT_TRUE(mean.ok()) << mean.status();
  expectMinorVersion(*mean, 3, "compensated mean");
  // Other ints on a reduction, put there by hand, are refused by name.
  for (std::vector<int64_t> ints : {std::vector<int64_t>{2}, std::vector<int64_t>{1, 1}}) {
    tensor::Program bad = *sum;
    for (tensor::Node& n : bad.nodes) {
      if (n.op == tensor::OpCode::kReduceSum) n.ints = ints;
    }
    auto st = decode(encode(bad)).status();
    EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << st;
    EXPECT_THAT(st.message(), HasSubstr("sum: the only attribute a reduction takes is compensated")) << st;
  }
}

// Version 1.4: scan, while_loop and their bodies (nested, with captures),
// written with minor 4; bodies nested past the language's limit refused
// before anything is parsed, however deep the bytes go.
TEST(Wire, MinorVersionFourLoops) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::f32, {{"n", 3}}),
                                tensor::spec(tensor::DType::f32, {{"step", 4}, {"n", 3}})};
  auto p = tensor::define("loops", specs, [](tensor::Builder& b, std::span<const tensor::Value> a) {
    const tensor::Value w = a[0];
    tensor::ScanResult r = tensor::scan(
        b, {.length = 4}, {a[0]}, {a[1]},
        [&](tensor::Builder& sb, std::span<const tensor::Value> c, std::span<const tensor::Value> x)
            -> absl::StatusOr<tensor::ScanStep> {
          std::vector<tensor::Value> inner = tensor::whileLoop(
              sb, {c[0]},
              [](tensor::Builder&, std::span<const tensor::Value> d) -> absl::StatusOr<tensor::Value> {
                return d[0].sum("n").lt(100.0f);
              },
              [&](tensor::Builder&, std::span<const tensor::Value> d) -> absl::StatusOr<std::vector<tensor::Value>> {
                return std::vector<tensor::Value>{d[0] * 2.0f + w};
              });
          return tensor::ScanStep{{inner[0] + x[0]}, {inner[0].sum("n")}};
        });
    return std::vector<tensor::Value>{r.carry[0], r.ys[0]};
  });
  ASSERT_TRUE(p.ok()) << p.status();
  expectMinorVersion(*p, 4, "scan of a while_loop");
  std::vector<float> x0 = {1, 2, 3}, xs(12, 0.5f);
  auto direct = tensor::evaluate(*p, {accy::bytes(x0), accy::bytes(xs)});
  auto back = decode(encode(*p));
  ASSERT_TRUE(direct.ok() && back.ok());
  EXPECT_EQ(*tensor::evaluate(*back, {accy::bytes(x0), accy::bytes(xs)}), *direct);
  // A body whose carry input disagrees with the loop: refused by name.
  tensor::Program bad = *p;
  bad.bodies[0].nodes[0].axes[0].extent = 4;
  auto st = decode(encode(bad)).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << st;
  // Bodies nested 100,000 deep (each a Program holding the next as field
  // 5): refused at depth 16, without recursing further.
  std::string nested;
  for (int i = 0; i < 100000; ++i) {
    std::string level(1, static_cast<char>((5 << 3) | 2));
    uint64_t n = nested.size();
    do {
      level.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
      n >>= 7;
    } while (n != 0);
    nested = level + nested;
  }
  std::string deep = encode(*p).substr(0, kHeaderBytes) + nested;
  st = decode(deep).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << st;
  EXPECT_THAT(st.message(), HasSubstr("nest more than 16 deep")) << st;
}

TEST(Wire, MinorVersionTwoBitsAndRandomNumbers) {
  const tensor::Spec specs[] = {tensor::spec(tensor::DType::u32, {{"v", 6}}),
                                tensor::spec(tensor::DType::i32, {{"v", 6}})};
  using Fn = std::function<tensor::Value(tensor::Builder&, std::span<const tensor::Value>)>;
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"u32_input", [](auto&, auto a) { return a[0] + 1.0; }},
      {"cast_to_u32", [](auto&, auto a) { return a[1].cast(tensor::DType::u32); }},
      {"bits", [](auto&, auto a) { return a[1].bitAnd(a[1]).bitOr(a[1]).bitXor(a[1]).bitNot(); }},
      {"shifts", [](auto&, auto a) { return a[1].shiftLeft(a[1]).shiftRight(a[1]); }},
      {"bitcast", [](auto&, auto a) { return a[1].bitcast(tensor::DType::f32); }},
      {"uniform", [](auto& b, auto) { return tensor::uniform(tensor::randomKey(b, 1), {{"n", 4}}); }},
  };
  for (const auto& [name, fn] : cases) {
    auto p = tensor::define(name, specs, fn);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    expectMinorVersion(*p, 2, name);
  }
  // A float operand for bitAnd, put there by hand in a valid program.
  auto p = tensor::define("f", specs, [](tensor::Builder&, std::span<const tensor::Value> a) {
    return a[1].bitAnd(a[1]);
  });
  ASSERT_TRUE(p.ok());
  tensor::Program bad = *p;
  for (tensor::Node& n : bad.nodes) {
    n.dtype = tensor::DType::f32;
  }
  auto st = decode(encode(bad)).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram) << st;
  EXPECT_THAT(st.message(), HasSubstr("bitAnd"));
}

TEST(Wire, TruncatedBitFlippedAndOversizedInputsAreRefused) {
  const std::vector<tensor::Program> programs = corpus();
  std::mt19937 rng(1);
  int refused = 0, accepted = 0;
  for (size_t i = 0; i < programs.size(); i += 7) {
    const std::string bytes = encode(programs[i]);
    for (size_t cut = 0; cut < bytes.size(); cut += 1 + bytes.size() / 40) {
      auto r = decode(bytes.substr(0, cut));
      if (!r.ok()) {
        EXPECT_EQ(errorKind(r.status()), ErrorKind::kInvalidProgram) << r.status();
        ++refused;
      }
    }
    for (int flip = 0; flip < 200; ++flip) {
      std::string b = bytes;
      const size_t at = std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng);
      b[at] = static_cast<char>(b[at] ^ (1 << std::uniform_int_distribution<int>(0, 7)(rng)));
      auto r = decode(b);
      if (r.ok()) {
        // A flip that still decodes gives a well-typed program.
        EXPECT_TRUE(tensor::validateProgram(*r).ok());
        ++accepted;
      } else {
        const ErrorKind k = errorKind(r.status());
        EXPECT_TRUE(k == ErrorKind::kInvalidProgram || k == ErrorKind::kUnsupportedVersion) << r.status();
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 100);
  // Oversized: more bytes than the limit, and a value beyond the value cap.
  DecodeLimits small;
  small.max_bytes = 32;
  EXPECT_THAT(decode(encode(programs[0]), small).status().message(), HasSubstr("exceed the limit"));
  tensor::Program huge;
  huge.name = "huge";
  tensor::Node input;
  input.op = tensor::OpCode::kInput;
  input.ints = {0};
  input.axes = {{"a", int64_t{1} << 36}};
  huge.nodes = {input};
  huge.inputs = {0};
  huge.outputs = {0};
  auto st = decode(encode(huge)).status();
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram);
  EXPECT_THAT(st.message(), HasSubstr("exceed the 17179869184-byte limit of one value"));  // the decoder's limit
  EXPECT_EQ(errorKind(decode("").status()), ErrorKind::kInvalidProgram);
}

}  // namespace
// A request of 64 MiB of empty nodes (two bytes each, 33 million of them)
// is refused by counting before parsing: the decoder's peak memory stays
// near the request's size (parsed, the nodes would take gigabytes).
TEST(Wire, EmptyNodesAreCountedBeforeParsing) {
  std::string bytes = encode(*tensor::define("one", {tensor::spec(tensor::DType::f32, {})},
                                             [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0]; }));
  const size_t empty_nodes = (size_t{64} << 20) / 2;
  bytes.reserve(bytes.size() + 2 * empty_nodes);
  for (size_t i = 0; i < empty_nodes; ++i) bytes.append("\x12\x00", 2);  // field 2, length 0
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  DecodeLimits limits;
  limits.max_bytes = int64_t{128} << 20;
  const absl::StatusOr<tensor::Program> p = decode(bytes, limits);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_EQ(errorKind(p.status()), ErrorKind::kInvalidProgram);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("more than 1048576 nodes (the limit)"));
  const long grew_kib = after.ru_maxrss - before.ru_maxrss;
  EXPECT_LT(grew_kib, 64 * 1024) << "peak memory grew by " << grew_kib << " KiB while decoding";
  // Input and output numbers likewise, packed or not.
  std::string numbers = encode(*tensor::define("one", {tensor::spec(tensor::DType::f32, {})},
                                               [](tensor::Builder&, std::span<const tensor::Value> v) { return v[0]; }));
  numbers.append("\x1a\xff\xff\x07", 4);  // field 3, packed, 131071 bytes
  numbers.append(std::string(131071, '\x01'));
  limits.max_nodes = 1000;
  EXPECT_THAT(std::string(decode(numbers, limits).status().message()), HasSubstr("input and output numbers"));
}

}  // namespace accy::wire
