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
  // Tiles, their combine (in f64, an f32 sum's), and the rounding to f32.
  ASSERT_EQ(tiled->kernels.size(), 3u);
  EXPECT_TRUE(verifyModule(*tiled).ok());
  EXPECT_EQ(tiled->kernels[0].body[0].loop.extent, 256);  // tiles
  const Stmt& combine = tiled->kernels[1].body[0];
  EXPECT_EQ(combine.kind, StmtKind::kReduce);
  EXPECT_EQ(combine.mean_count, 1 << 20);  // the mean divides once, at the end
  EXPECT_EQ(tiled->buffers[combine.buffer].dtype, DType::f64);
  const Stmt& round = tiled->kernels[2].body[0];
  EXPECT_EQ(round.kind, StmtKind::kStore);
  EXPECT_EQ(tiled->buffers[round.buffer].dtype, DType::f32);
}

// Other combiners and dtypes combine their tiles in their own dtype.
TEST(Tile, MaxAndF64SumsCombineInTheirDtype) {
  for (DType d : {DType::f32, DType::f64}) {
    Module m = lowered({tensor::spec(d, {{"n", 1 << 20}})}, [&](tensor::Builder&, Args a) {
      return d == DType::f32 ? a[0].max("n") : a[0].sum("n");
    });
    auto tiled = tileReductions(m, TileOptions{});
    ASSERT_TRUE(tiled.ok());
    ASSERT_EQ(tiled->kernels.size(), 2u);
    EXPECT_EQ(tiled->buffers[tiled->kernels[1].body[0].buffer].dtype, d);
  }
}

TEST(Tile, SmallOrPrimeReductionsStayWhole) {
  Module small = lowered({tensor::spec(DType::f32, {{"n", 1000}})}, [](tensor::Builder&, Args a) { return a[0].sum("n"); });
  EXPECT_EQ(tileReductions(small, TileOptions{})->kernels.size(), 1u);
  Module prime = lowered({tensor::spec(DType::f32, {{"n", 1000003}})}, [](tensor::Builder&, Args a) { return a[0].sum("n"); });
  EXPECT_EQ(tileReductions(prime, TileOptions{})->kernels.size(), 1u);
}

}  // namespace
}  // namespace accy::choir
