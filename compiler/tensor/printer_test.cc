// The text form and the Graphviz export of a recorded program.
#include "accy/accy.h"
#include "examples/tone/tone.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::tensor {
namespace {

using ::testing::HasSubstr;

Program toneProgram() {
  const Spec specs[] = {spec(DType::f32, {}), spec(DType::f32, {{"point", 16}}),
                        spec(DType::f32, {{"point", 16}})};
  auto p = define("mismatch", specs, tone::mismatch);
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(Printer, TextListsEveryNodeWithItsType) {
  const std::string text = toText(toneProgram());
  EXPECT_EQ(text,
            "program mismatch(%0: f32[], %1: f32[point=16], %2: f32[point=16]) {\n"
            "  %3 = mul %0, %1 : f32[point=16]\n"
            "  %4 = sin %3 : f32[point=16]\n"
            "  %5 = sub %4, %2 : f32[point=16]\n"
            "  %6 = mul %5, %5 : f32[point=16]\n"
            "  %7 = sum %6 {axes=[point]} : f32[]\n"
            "  return %7\n"
            "}\n");
}

TEST(Printer, DotHasNodesEdgesAndOutputs) {
  const std::string dot = toDot(toneProgram());
  EXPECT_THAT(dot, HasSubstr("digraph \"mismatch\""));
  EXPECT_THAT(dot, HasSubstr("n0 [shape=ellipse, label=\"input 0\\nf32[]\"]"));
  EXPECT_THAT(dot, HasSubstr("n7 [shape=box, peripheries=2, label=\"sum {axes=[point]}\\nf32[]\"]"));
  EXPECT_THAT(dot, HasSubstr("n0 -> n3 [label=\"0\"]"));
  EXPECT_THAT(dot, HasSubstr("n1 -> n3 [label=\"1\"]"));
  EXPECT_THAT(dot, HasSubstr("n7 -> out0"));
}

TEST(Printer, ValidateAcceptsRecordedAndRejectsTamperedPrograms) {
  Program p = toneProgram();
  EXPECT_TRUE(validateProgram(p).ok());
  Program wrong_type = p;
  wrong_type.nodes[4].axes = {{"point", 15}};
  auto st = validateProgram(wrong_type);
  EXPECT_EQ(errorKind(st), ErrorKind::kInvalidProgram);
  EXPECT_THAT(st.message(), HasSubstr("node %4 (sin) records f32[point=15]"));
  Program cycle = p;
  cycle.nodes[3].operands = {3, 1};
  EXPECT_EQ(errorKind(validateProgram(cycle)), ErrorKind::kInvalidProgram);
  Program no_outputs = p;
  no_outputs.outputs.clear();
  EXPECT_EQ(errorKind(validateProgram(no_outputs)), ErrorKind::kInvalidProgram);
}

}  // namespace
}  // namespace accy::tensor
