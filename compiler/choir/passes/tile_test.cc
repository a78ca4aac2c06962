#include "compiler/choir/passes/tile.h"

#include "compiler/choir/passes/pass_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace accy::choir {
namespace {

using testing::Args;
using testing::lowered;
using tensor::DType;

TEST(Tile, LargeFullReductionSplitsIntoTilesAndACombine) {
  Module m = lowered({tensor::spec(DType::f32, {{"n", 1 << 20}})},
                     [](tensor::Builder&, Args a) { return a[0].mean("n"); });
  auto tiled = tileReductions(m, TileOptions{});
  ASSERT_TRUE(tiled.ok());
  ASSERT_EQ(tiled->kernels.size(), 2u);
  EXPECT_TRUE(verifyModule(*tiled).ok());
  EXPECT_EQ(tiled->kernels[0].body[0].loop.extent, 256);  // tiles
  const Stmt& combine = tiled->kernels[1].body[0];
  EXPECT_EQ(combine.kind, StmtKind::kReduce);
  EXPECT_EQ(combine.mean_count, 1 << 20);  // the mean divides once, at the end
}

TEST(Tile, SmallOrPrimeReductionsStayWhole) {
  Module small = lowered({tensor::spec(DType::f32, {{"n", 1000}})}, [](tensor::Builder&, Args a) { return a[0].sum("n"); });
  EXPECT_EQ(tileReductions(small, TileOptions{})->kernels.size(), 1u);
  Module prime = lowered({tensor::spec(DType::f32, {{"n", 1000003}})}, [](tensor::Builder&, Args a) { return a[0].sum("n"); });
  EXPECT_EQ(tileReductions(prime, TileOptions{})->kernels.size(), 1u);
}

}  // namespace
}  // namespace accy::choir
