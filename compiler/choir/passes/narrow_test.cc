#include "compiler/choir/passes/narrow.h"

#include "compiler/choir/passes/fuse.h"
#include "compiler/choir/passes/pass_testing.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

// The kernel that writes `buffer`, and its loop headers outermost first
// along the first statements.
std::vector<LoopHeader> writerLoops(const Module& m, const std::string& buffer) {
  for (const Kernel& k : m.kernels) {
    std::vector<LoopHeader> loops;
    const Stmt* s = &k.body[0];
    while (s->kind == StmtKind::kLoop) {
      loops.push_back(s->loop);
      s = &s->body[0];
    }
    if (m.buffers[s->buffer].name == buffer) return loops;
  }
  return {};
}

std::string tempOf(const Module& m) {
  for (const Buffer& b : m.buffers) {
    if (b.role == BufferRole::kTemp) return b.name;
  }
  return "";
}

// A product read only in rows 2..5 and columns 1..6 of its 8 x 8: its
// loops run over those and write there.
TEST(Narrow, AProducerRunsOverTheBoxItsReadersRead) {
  Module m = *fuseKernels(lowered({tensor::spec(DType::f32, {{"i", 8}, {"k", 4}}),
                                   tensor::spec(DType::f32, {{"k", 4}, {"j", 8}})},
                                  [](tensor::Builder&, Args a) {
                                    return (dot(a[0], a[1], {"k"}).slice("i", 2, 6).slice("j", 1, 7) + 1.0f);
                                  }));
  const std::string t = tempOf(m);
  ASSERT_FALSE(t.empty()) << toText(m);
  auto n = narrowProducers(m);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_TRUE(verifyModule(*n).ok()) << toText(*n);
  const std::vector<LoopHeader> loops = writerLoops(*n, t);
  ASSERT_GE(loops.size(), 2u) << toText(*n);
  EXPECT_EQ(loops[0].extent, 4) << toText(*n);
  EXPECT_EQ(loops[1].extent, 6) << toText(*n);
  EXPECT_NE(toText(*n).find("i" + std::to_string(loops[0].var) + " + 2"), std::string::npos) << toText(*n);
}

// Read whole, or at positions from data: nothing changes.
TEST(Narrow, AProducerReadWholeOrByDataKeepsItsLoops) {
  Module whole = *fuseKernels(lowered({tensor::spec(DType::f32, {{"i", 8}, {"k", 4}}),
                                       tensor::spec(DType::f32, {{"k", 4}, {"j", 8}})},
                                      [](tensor::Builder&, Args a) { return dot(a[0], a[1], {"k"}) + 1.0f; }));
  EXPECT_EQ(toText(*narrowProducers(whole)), toText(whole));
  Module by_data = *fuseKernels(lowered({tensor::spec(DType::f32, {{"i", 8}, {"k", 4}}),
                                         tensor::spec(DType::f32, {{"k", 4}, {"j", 8}}),
                                         tensor::spec(DType::i32, {{"t", 3}})},
                                        [](tensor::Builder&, Args a) {
                                          return take(dot(a[0], a[1], {"k"}).slice("i", 2, 6), "i", a[2]) + 1.0f;
                                        }));
  const std::string t = tempOf(by_data);
  auto n = narrowProducers(by_data);
  ASSERT_TRUE(n.ok());
  const std::vector<LoopHeader> loops = writerLoops(*n, t);
  ASSERT_GE(loops.size(), 1u) << toText(*n);
  EXPECT_EQ(loops[0].extent, 8) << toText(*n);
}

}  // namespace
}  // namespace accy::choir
