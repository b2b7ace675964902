#include "models/kernels.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/dtype.hpp"
#include "models/rng.hpp"

namespace wafersim::models {
namespace {

TEST(GemvTile, HandComputed3x4) {
  Matrix w(3, 4);
  const float values[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) w(i, j) = values[i][j];
  const std::vector<float> x = {1, 0, -1, 2};
  std::vector<float> y(3, 99.0f);  // overwritten, not accumulated into
  gemv_tile(w.view(), x, y);
  EXPECT_EQ(y, (std::vector<float>{1 - 3 + 8, 5 - 7 + 16, 9 - 11 + 24}));
}

TEST(GemvTile, ThroughAViewOfARectangle) {
  Matrix w(4, 6);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) w(i, j) = static_cast<float>(10 * i + j);
  // Rows 1..2, cols 3..4: [[13, 14], [23, 24]].
  const std::vector<float> x = {2, -1};
  std::vector<float> y(2);
  gemv_tile(w.view(1, 2, 3, 2), x, y);
  EXPECT_EQ(y[0], 26.0f - 14.0f);
  EXPECT_EQ(y[1], 46.0f - 24.0f);
}

TEST(GemvTile, AddsInSixteenLanesThenATree) {
  // In fp32 2^27 + 1 = 2^27 (the 1 is absorbed), so where the 1s meet the
  // 2^27s pins the order. Each case is hand-computed from the contract, for
  // rows in the blocks of four and in the remainder (five equal rows); all
  // but the one-lane case differ from a plain left-to-right sum.
  struct Case {
    std::vector<std::pair<int, float>> w;  // (column, value), zeros elsewhere
    float want;
  };
  const std::vector<Case> cases = {
      // Lanes 0-3: u0 = 2^27 + 1 = 2^27, u1 = -2^27 + 1 = -2^27, y = 0
      // (left to right: 1).
      {{{0, 0x1p27f}, {1, 1.0f}, {2, -0x1p27f}, {3, 1.0f}}, 0.0f},
      // One lane, increasing column: ((2^27 + 1) - 2^27) + 1 = 1.
      {{{0, 0x1p27f}, {16, 1.0f}, {32, -0x1p27f}, {48, 1.0f}}, 1.0f},
      // u0 = 2^27, u1 = 1, u4 = -2^27, u5 = 1: v0 = u0 + u4 = 0, v1 = 2,
      // y = 2 (left to right: 1).
      {{{0, 0x1p27f}, {2, 1.0f}, {8, -0x1p27f}, {10, 1.0f}}, 2.0f},
      // u0 = 2^27, u1 = 1, u2 = -2^27: v = (2^27, 1, -2^27, 0), t0 = v0 + v2 = 0,
      // t1 = 1, y = 1 (left to right, or (v0 + v1) + (v2 + v3): 0).
      {{{0, 0x1p27f}, {2, 1.0f}, {4, -0x1p27f}}, 1.0f},
  };
  for (std::size_t c = 0; c < cases.size(); ++c) {
    Matrix w(5, 64);
    for (int i = 0; i < 5; ++i)
      for (const auto& [j, v] : cases[c].w) w(i, j) = v;
    const std::vector<float> x(64, 1.0f);
    for (DType t : {DType::fp32, DType::bf16}) {
      Matrix m = w;
      m.store_as(t);
      std::vector<float> y(5), s(5);
      gemv_tile(m.view(), x, y);
      gemv_tile_scalar(m.view(), x, s);
      for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(y[static_cast<std::size_t>(i)], cases[c].want)
            << "case " << c << " " << dtype_name(t) << " row " << i;
        EXPECT_EQ(s[static_cast<std::size_t>(i)], cases[c].want)
            << "case " << c << " " << dtype_name(t) << " row " << i << " (scalar)";
      }
    }
  }
}

TEST(GemvTile, LanesStartAtTheTilesFirstColumn) {
  // Columns 1, 2, 3 hold 2^27, -2^27, 1. Seen from column 1 they are lanes
  // 0, 1, 2: u0 = 2^27 - 2^27 = 0, u1 = 1, y = 1. Seen from column 0 they
  // are lanes 1, 2, 3: u0 = 2^27, u1 = -2^27 + 1 = -2^27 (absorbed), y = 0.
  Matrix w(1, 40);
  w(0, 1) = 0x1p27f;
  w(0, 2) = -0x1p27f;
  w(0, 3) = 1.0f;
  const std::vector<float> x(39, 1.0f);
  std::vector<float> y(1);
  gemv_tile(w.view(0, 1, 1, 39), x, y);
  EXPECT_EQ(y[0], 1.0f);
  gemv_tile(w.view(0, 1, 0, 39), x, y);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(GemvTile, RejectsMismatchedSizes) {
  Matrix w(3, 4);
  std::vector<float> x(3), y(3);
  EXPECT_THROW(gemv_tile(w.view(), x, y), std::invalid_argument);
  std::vector<float> x4(4), y2(2);
  EXPECT_THROW(gemv_tile(w.view(), x4, y2), std::invalid_argument);
}

// A rows x cols matrix of values exactly representable in `t`, drawn to
// exercise the corners of the arithmetic: signed zeros, subnormal fp32
// products, large magnitudes next to small ones (absorption), and for fp16
// its own subnormals.
Matrix awkward_matrix(int rows, int cols, DType t, std::uint64_t seed) {
  Matrix m(rows, cols);
  Xoshiro256StarStar rng(seed);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      const float u = rng.uniform_pm1();
      float v = u;
      switch ((i * 7 + j * 3) % 11) {
        case 0:
          v = -0.0f;
          break;
        case 1:
          v = u * 1e-3f;
          break;
        case 2:
          v = t == DType::fp16 ? u * 6e-5f : u * 1e-30f;  // fp16 subnormals / tiny fp32
          break;
        case 3:
          v = u * 3e4f;
          break;
        default:
          break;
      }
      m(i, j) = round_to_dtype(v, t);
    }
  }
  m.store_as(t);
  return m;
}

void expect_same_bits(std::span<const float> a, std::span<const float> b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i]))
        << what << " row " << i << ": " << a[i] << " vs " << b[i];
  }
}

// The vector kernels this host can run (gemv_tile uses the last).
std::vector<GemvKernel> vector_kernels() {
  std::vector<GemvKernel> k;
  if (gemv_kernel_available(GemvKernel::avx2)) k.push_back(GemvKernel::avx2);
  return k;
}

TEST(GemvTile, ChoosesTheBestKernelTheHostHasAndRefusesOnesItLacks) {
  EXPECT_TRUE(gemv_kernel_available(GemvKernel::scalar));
  const GemvKernel best = best_gemv_kernel();
  EXPECT_TRUE(gemv_kernel_available(best));
  if (gemv_kernel_available(GemvKernel::avx2)) {
    EXPECT_EQ(best, GemvKernel::avx2);
  }
  for (GemvKernel k : {GemvKernel::avx2}) {
    if (gemv_kernel_available(k)) continue;
    const Matrix m(2, 2);
    std::vector<float> x(2), y(2);
    EXPECT_THROW(gemv_tile_with(k, m.view(), x, y), std::invalid_argument);
  }
}

TEST(GemvTile, VectorKernelIsBitIdenticalToScalarOnOddShapes) {
  // Every row count 1..37 (blocks of four rows and every remainder),
  // column counts around the sixteen-column blocks (odd tails included),
  // through views
  // whose rows are not contiguous, for each storage type and each vector
  // kernel the host has.
  for (GemvKernel k : vector_kernels())
    for (DType t : {DType::fp32, DType::bf16, DType::fp16}) {
      const Matrix m = awkward_matrix(41, 75, t, 5);
      ASSERT_EQ(m.storage(), t);
      Xoshiro256StarStar rng(17);
      std::vector<float> x(75);
      for (std::size_t j = 0; j < x.size(); ++j) {
        x[j] = rng.uniform_pm1();
        if (j % 13 == 5) x[j] *= 1e-20f;  // products near the subnormal range
        if (j % 13 == 9) x[j] *= 1e6f;
      }
      for (int rows = 1; rows <= 37; ++rows) {
        for (int cols :
             {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 18, 31, 32, 33, 47, 55, 56, 71}) {
          for (int row0 : {0, 3}) {
            const MatrixView v = m.view(row0, rows, 2, cols);
            const std::span<const float> xs(x.data(), static_cast<std::size_t>(cols));
            std::vector<float> simd(static_cast<std::size_t>(rows), 99.0f);
            std::vector<float> scalar(static_cast<std::size_t>(rows), -99.0f);
            gemv_tile_with(k, v, xs, simd);
            gemv_tile_scalar(v, xs, scalar);
            expect_same_bits(simd, scalar,
                             std::string(gemv_kernel_name(k)) + " " + dtype_name(t) + " " +
                                 std::to_string(rows) + "x" + std::to_string(cols) + " at row " +
                                 std::to_string(row0));
          }
        }
      }
    }
}

TEST(GemvTile, SixteenBitStorageGivesTheSameBitsAsFp32Storage) {
  // The kernels widen exactly: storing the same values in 16 bits changes
  // nothing in the result.
  for (DType t : {DType::bf16, DType::fp16}) {
    const Matrix compact = awkward_matrix(29, 61, t, 8);
    Matrix wide(29, 61);
    for (int i = 0; i < 29; ++i)
      for (int j = 0; j < 61; ++j) wide(i, j) = compact(i, j);
    std::vector<float> x(61);
    Xoshiro256StarStar rng(3);
    for (float& v : x) v = rng.uniform_pm1();
    std::vector<float> a(29), b(29), c(29);
    for (GemvKernel k : vector_kernels()) {
      gemv_tile_with(k, compact.view(), x, a);
      gemv_tile_with(k, wide.view(), x, b);
      gemv_tile_scalar(compact.view(), x, c);
      expect_same_bits(a, b, std::string(gemv_kernel_name(k)) + " " + dtype_name(t));
      expect_same_bits(a, c, std::string(gemv_kernel_name(k)) + " " + dtype_name(t));
    }
  }
}

TEST(GemvTile, EightBitCodesGiveTheSameBitsAsTheirFp32Values) {
  // Matrix::store_quantized: every kernel (the vector ones widen the tile
  // first) and views that start inside the matrix.
  for (DType t : {DType::int8, DType::fp8_e4m3}) {
    Matrix wide(23, 70);
    std::vector<float> scales(23);
    Xoshiro256StarStar rng(21);
    for (int i = 0; i < 23; ++i) {
      for (int j = 0; j < 70; ++j) wide(i, j) = rng.uniform_pm1() * (1.0f + static_cast<float>(i));
      scales[static_cast<std::size_t>(i)] = quantize_row(wide.mutable_row(i), t);
    }
    Matrix codes = wide;
    codes.store_quantized(t, scales);
    std::vector<float> x(70);
    for (float& v : x) v = rng.uniform_pm1();
    for (int cols : {7, 12, 24, 67}) {
      const MatrixView a = wide.view(3, 19, 2, cols), b = codes.view(3, 19, 2, cols);
      const std::span<const float> xs(x.data(), static_cast<std::size_t>(cols));
      std::vector<float> want(19), got(19);
      gemv_tile_scalar(a, xs, want);
      gemv_tile_scalar(b, xs, got);
      expect_same_bits(got, want, std::string(dtype_name(t)) + " scalar");
      gemv_tile(b, xs, got);
      expect_same_bits(got, want, std::string(dtype_name(t)) + " gemv_tile");
      for (GemvKernel k : vector_kernels()) {
        gemv_tile_with(k, b, xs, got);
        expect_same_bits(got, want, std::string(gemv_kernel_name(k)) + " " + dtype_name(t));
      }
    }
  }
}

TEST(GemvTile, WidensEveryFp16BitPatternExactly) {
  // Each row holds one of the 65,536 fp16 patterns in a column that cycles
  // through the sixteen lanes and the partial last block, zeros elsewhere,
  // and x = 1: the result is the widened value (a zero's sign aside:
  // 0 + -0 = +0), NaNs included, and the vector kernel must agree with the
  // scalar one bit for bit.
  constexpr int kCols = 19;
  Matrix m(65536, kCols);
  for (int p = 0; p < 65536; ++p) {
    const float v = fp16_bits_to_float(static_cast<std::uint16_t>(p));
    m(p, p % kCols) = v;
  }
  m.store_as(DType::fp16);
  const std::vector<float> x(kCols, 1.0f);
  std::vector<float> simd(65536), scalar(65536);
  gemv_tile_scalar(m.view(), x, scalar);
  for (GemvKernel k : vector_kernels()) {
    gemv_tile_with(k, m.view(), x, simd);
    expect_same_bits(simd, scalar, std::string(gemv_kernel_name(k)) + " fp16 patterns");
    for (int p = 0; p < 65536; ++p) {
      const float want = fp16_bits_to_float(static_cast<std::uint16_t>(p));
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(simd[static_cast<std::size_t>(p)])) << p;
      } else {
        ASSERT_EQ(simd[static_cast<std::size_t>(p)], want) << p;
      }
    }
  }
}

// Rows (three values, repeated along the columns) whose sums are -0
// products only, an infinity, opposite infinities (NaN), overflow, a NaN.
std::vector<std::vector<float>> special_rows() {
  const float inf = std::numeric_limits<float>::infinity();
  return {
      {-0.0f, -0.0f, -0.0f},  {-1.0f, 0.0f, 0.0f},         {inf, 1.0f, 2.0f},
      {inf, -inf, 1.0f},      {3e38f, 3e38f, -3e38f},      {0.0f, 0.0f, -1e-45f},
      {-3e38f, -3e38f, 1.0f}, {std::nanf(""), 1.0f, 1.0f}, {1.0f, 2.0f, 3.0f},
  };
}

TEST(GemvTile, EveryColumnStepKeepsSignedZerosInfinitiesAndNaNs) {
  // Column counts that use the eight-, four- and one-column steps: rows whose
  // sums are -0 products only, an infinity, opposite infinities (NaN), or
  // overflow must come out as the scalar order gives them.
  const std::vector<std::vector<float>> rows = special_rows();
  for (int cols : {3, 11, 12, 15, 19}) {
    Matrix m(static_cast<int>(rows.size()), cols);
    for (int i = 0; i < m.rows(); ++i)
      for (int j = 0; j < cols; ++j)
        m(i, j) = rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j % 3)];
    std::vector<float> x(static_cast<std::size_t>(cols));
    for (int j = 0; j < cols; ++j) x[static_cast<std::size_t>(j)] = j % 2 == 0 ? 1.0f : 0.5f;
    x[0] = 0.0f;  // -0 products in the first column of the -0 row
    std::vector<float> scalar(rows.size()), simd(rows.size());
    gemv_tile_scalar(m.view(), x, scalar);
    for (GemvKernel k : vector_kernels()) {
      gemv_tile_with(k, m.view(), x, simd);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (std::isnan(scalar[i])) {
          EXPECT_TRUE(std::isnan(simd[i])) << gemv_kernel_name(k) << " row " << i;
        } else {
          EXPECT_EQ(std::bit_cast<std::uint32_t>(simd[i]), std::bit_cast<std::uint32_t>(scalar[i]))
              << gemv_kernel_name(k) << " " << cols << " columns, row " << i;
        }
      }
    }
  }
}

// gemv_tiles against gemv_tile_scalar tile by tile, into a y with gaps
// between the tiles (y_stride > rows) that must stay untouched.
void expect_tiles_match_scalar(const MatrixView& v, const std::vector<int>& cuts,
                               std::span<const float> x, const std::string& what) {
  const auto rows = static_cast<std::size_t>(v.rows());
  const std::size_t stride = rows + 3, tiles = cuts.size() - 1;
  std::vector<float> y(tiles * stride, 77.0f);
  gemv_tiles(v, cuts, x, y, stride);
  for (std::size_t t = 0; t < tiles; ++t) {
    const int c0 = cuts[t], nc = cuts[t + 1] - c0;
    std::vector<float> want(rows);
    gemv_tile_scalar(v.sub(0, v.rows(), c0, nc),
                     x.subspan(static_cast<std::size_t>(c0), static_cast<std::size_t>(nc)), want);
    for (std::size_t i = 0; i < rows; ++i) {
      const float got = y[t * stride + i];
      if (std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(got)) << what << " tile " << t << " row " << i;
      } else {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want[i]))
            << what << " tile " << t << " (" << nc << " columns) row " << i << ": " << got << " vs "
            << want[i];
      }
    }
    for (std::size_t i = rows; i < stride && t * stride + i < y.size(); ++i)
      ASSERT_EQ(y[t * stride + i], 77.0f) << what << ": wrote between tiles";
  }
}

TEST(GemvTiles, SameBitsAsEachTileOnItsOwn) {
  // Rows of tiles as row bands of cores hold them: narrow tiles (the
  // eight-rows-at-a-time kernel of 16-bit storage: every width 1..16 and
  // every row count around the blocks of eight), wide ones, and a mix, in
  // views whose rows are not contiguous, for each storage.
  const std::vector<std::vector<int>> cut_sets = {
      {0, 1, 2, 4, 7, 11, 16, 22, 29, 37, 46, 56, 67, 73},  // widths 1..11, 6
      {0, 12, 25, 39, 54, 70, 73},                          // 12..16, 3
      {0, 11, 22, 33, 44, 55, 66, 73},                      // lm_head-like 11s
      {0, 55, 73},                                          // wide
      {0, 16, 49, 60, 73},                                  // narrow and wide
  };
  for (DType t : {DType::fp32, DType::bf16, DType::fp16}) {
    const Matrix m = awkward_matrix(41, 75, t, 9);
    Xoshiro256StarStar rng(23);
    std::vector<float> x(73);
    for (float& v : x) v = rng.uniform_pm1();
    for (const auto& cuts : cut_sets)
      for (int rows : {1, 7, 8, 9, 15, 16, 17, 24, 31, 37})
        for (int row0 : {0, 3})
          expect_tiles_match_scalar(m.view(row0, rows, 2, 73), cuts, x,
                                    std::string(dtype_name(t)) + " " + std::to_string(rows) +
                                        " rows at row " + std::to_string(row0));
  }
}

TEST(GemvTiles, NarrowTilesKeepSignedZerosInfinitiesAndNaNs) {
  // Sixteen-bit narrow tiles, eight rows per step: rows whose sums are -0
  // products only, an infinity, opposite infinities, overflow, a NaN.
  const std::vector<std::vector<float>> rows = special_rows();
  for (DType t : {DType::bf16, DType::fp16}) {
    for (int cols = 1; cols <= 16; ++cols) {
      Matrix m(static_cast<int>(rows.size()), cols);
      for (int i = 0; i < m.rows(); ++i)
        for (int j = 0; j < cols; ++j)
          m(i, j) =
              round_to_dtype(rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j % 3)], t);
      m.store_as(t);
      std::vector<float> x(static_cast<std::size_t>(cols));
      for (int j = 0; j < cols; ++j) x[static_cast<std::size_t>(j)] = j % 2 == 0 ? 1.0f : 0.5f;
      x[0] = 0.0f;  // -0 products in the first column of the -0 row
      expect_tiles_match_scalar(
          m.view(), {0, cols}, x,
          std::string(dtype_name(t)) + " " + std::to_string(cols) + " columns");
    }
  }
}

TEST(GemvTiles, RejectsCutsAndSizesThatDoNotFit) {
  const Matrix m(4, 6);
  const std::vector<float> x(6);
  std::vector<float> y(12);
  const auto call = [&](std::vector<int> cuts, std::size_t x_size, std::size_t stride) {
    gemv_tiles(m.view(), cuts, std::span<const float>(x).first(x_size), y, stride);
  };
  EXPECT_NO_THROW(call({0, 3, 6}, 6, 4));
  EXPECT_THROW(call({0, 3, 5}, 6, 4), std::invalid_argument);     // short of the columns
  EXPECT_THROW(call({1, 3, 6}, 6, 4), std::invalid_argument);     // not from column 0
  EXPECT_THROW(call({0, 3, 3, 6}, 6, 4), std::invalid_argument);  // an empty tile
  EXPECT_THROW(call({0}, 6, 4), std::invalid_argument);           // no tile
  EXPECT_THROW(call({0, 3, 6}, 5, 4), std::invalid_argument);     // x too short
  EXPECT_THROW(call({0, 3, 6}, 6, 3), std::invalid_argument);     // stride below the rows
  EXPECT_THROW(call({0, 2, 4, 6}, 6, 5), std::invalid_argument);  // y too short (2*5+4 > 12)
}

TEST(RmsNorm, HandVector) {
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> gamma = {1, 0.5f, 2, 1};
  EXPECT_EQ(sum_of_squares(x), 30.0f);
  std::vector<float> out(4);
  rmsnorm(x, gamma, 0.0f, out);
  const double inv = 1.0 / std::sqrt(30.0 / 4.0);  // rms = sqrt(7.5)
  EXPECT_NEAR(out[0], 1 * inv * 1, 1e-6);
  EXPECT_NEAR(out[1], 2 * inv * 0.5, 1e-6);
  EXPECT_NEAR(out[2], 3 * inv * 2, 1e-6);
  EXPECT_NEAR(out[3], 4 * inv * 1, 1e-6);
  // eps matters when the vector is small.
  const std::vector<float> small = {1e-3f, 0, 0, 0};
  rmsnorm(small, std::vector<float>(4, 1.0f), 1e-6f, out);
  EXPECT_NEAR(out[0], 1e-3 / std::sqrt(1e-6 / 4 + 1e-6), 1e-6);
}

TEST(RmsNorm, SplitSumOfSquaresMatchesTheWhole) {
  const std::vector<float> x = {0.5f, -1.5f, 2.0f, 3.0f, -0.25f, 1.0f};
  const std::vector<float> gamma = {1, 1, 1, 2, 2, 2};
  std::vector<float> whole(6);
  rmsnorm(x, gamma, 1e-5f, whole);
  const std::span<const float> xs(x);
  const float ss =
      sum_of_squares(xs.subspan(0, 3)) + sum_of_squares(xs.subspan(3, 3));  // exact here
  std::vector<float> part(3);
  rmsnorm_apply(xs.subspan(3, 3), ss, 6, std::span<const float>(gamma).subspan(3, 3), 1e-5f, part);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(part[i], whole[3 + i]);
}

TEST(Rope, HandComputedPosition1) {
  // head_dim 4, theta 10000: pair (0, 2) has inv_freq 1, pair (1, 3) has
  // inv_freq 10000^(-1/2) = 0.01. At position 1 the angles are 1 and 0.01.
  std::vector<float> head = {1, 2, 3, 4};
  rope_apply(head, 1, 10000.0);
  const double c1 = 0.5403023058681398, s1 = 0.8414709848078965;
  const double c2 = 0.9999500004166653, s2 = 0.009999833334166664;
  EXPECT_NEAR(head[0], 1 * c1 - 3 * s1, 1e-6);
  EXPECT_NEAR(head[2], 3 * c1 + 1 * s1, 1e-6);
  EXPECT_NEAR(head[1], 2 * c2 - 4 * s2, 1e-6);
  EXPECT_NEAR(head[3], 4 * c2 + 2 * s2, 1e-6);
}

TEST(Rope, PositionZeroIsIdentityAndRotationKeepsPairNorms) {
  std::vector<float> head = {0.3f, -1.2f, 2.5f, 0.7f, -0.1f, 4.0f};
  const std::vector<float> before = head;
  rope_apply(head, 0, 10000.0);
  EXPECT_EQ(head, before);
  rope_apply(head, 77, 500000.0);
  for (int i = 0; i < 3; ++i) {
    const double n0 = std::hypot(before[i], before[i + 3]);
    const double n1 = std::hypot(head[i], head[i + 3]);
    EXPECT_NEAR(n1, n0, 1e-5);
  }
  EXPECT_NE(head, before);
  std::vector<float> odd(3);
  EXPECT_THROW(rope_apply(odd, 1, 10000.0), std::invalid_argument);
}

// Llama 3.1 8B's rope_scaling (factor 8, low_freq_factor 1, high_freq_factor
// 4, original context 8192; head_dim 128, theta 500000): wavelengths below
// 8192 / 4 = 2048 keep their frequency, those above 8192 / 1 are slowed 8
// times, those between are interpolated (Hugging Face
// _compute_llama3_parameters).
TEST(Rope, Llama3ScalingKeepsHighSlowsLowAndInterpolatesBetween) {
  const RopeScaling llama31{RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192};
  const double pi = 3.14159265358979323846;
  int high = 0, low = 0, between = 0;
  for (int i = 0; i < 64; ++i) {
    const double f = std::pow(500000.0, -static_cast<double>(2 * i) / 128.0);
    const double got = rope_inverse_frequency(i, 128, 500000.0, llama31);
    EXPECT_EQ(rope_inverse_frequency(i, 128, 500000.0, RopeScaling{}), f);
    const double wavelength = 2 * pi / f;
    if (wavelength < 2048) {
      EXPECT_EQ(got, f) << i;
      ++high;
    } else if (wavelength > 8192) {
      EXPECT_DOUBLE_EQ(got, f / 8) << i;
      ++low;
    } else {
      // smooth runs from 1 at wavelength 2048 to 0 at 8192.
      const double smooth = (8192 / wavelength - 1) / 3;
      EXPECT_GT(smooth, 0.0);
      EXPECT_LT(smooth, 1.0);
      EXPECT_DOUBLE_EQ(got, f / 8 + smooth * (f - f / 8)) << i;
      ++between;
    }
  }
  EXPECT_EQ(high, 29);  // i 0..28: 2 pi 500000^(i/64) < 2048
  EXPECT_EQ(between, 6);
  EXPECT_EQ(low, 29);
  // rope_apply rotates by those frequencies: pair 63 at position 8 turns as
  // far as unscaled at position 1.
  std::vector<float> scaled(128, 0.0f), plain(128, 0.0f);
  scaled[63] = plain[63] = 1.0f;
  rope_apply(scaled, 8, 500000.0, llama31);
  rope_apply(plain, 1, 500000.0);
  EXPECT_NEAR(scaled[127], plain[127], 1e-6);
  EXPECT_NE(plain[127], 0.0f);
}

// Plain softmax attention in double, written independently of the kernels.
std::vector<double> softmax_attention(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, int n, int d, double scale) {
  std::vector<double> s(n);
  double m = -1e300;
  for (int t = 0; t < n; ++t) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * k[t * d + i];
    s[t] = scale * dot;
    m = std::max(m, s[t]);
  }
  double z = 0;
  for (int t = 0; t < n; ++t) z += std::exp(s[t] - m);
  std::vector<double> out(d, 0.0);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i) out[i] += std::exp(s[t] - m) / z * v[t * d + i];
  return out;
}

class AttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Xoshiro256StarStar rng(2024);
    q.resize(d);
    k.resize(n * d);
    v.resize(n * d);
    for (float& x : q) x = 2.0f * rng.uniform_pm1();
    for (float& x : k) x = 2.0f * rng.uniform_pm1();
    for (float& x : v) x = rng.uniform_pm1();
    expected = softmax_attention(q, k, v, n, d, scale);
  }
  AttentionPartial part(int from, int count) const {
    return attention_partial(q, k.data() + from * d, v.data() + from * d, count, d, scale);
  }
  void expect_matches(const AttentionPartial& p) const {
    std::vector<float> out(d);
    attention_finalize(p, out);
    for (int i = 0; i < d; ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << "dim " << i;
  }
  static constexpr int n = 11;
  static constexpr int d = 8;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> q, k, v;
  std::vector<double> expected;
};

TEST_F(AttentionTest, UnsplitMatchesSoftmax) {
  expect_matches(part(0, n));
}

TEST_F(AttentionTest, SplitAndCombinedMatchesSoftmax) {
  expect_matches(combine(part(0, 4), part(4, 7)));
  expect_matches(combine(part(0, 1), part(1, 10)));
  // Three slices, combined as a chain and as a tree.
  expect_matches(combine(combine(part(0, 3), part(3, 5)), part(8, 3)));
  expect_matches(combine(part(0, 3), combine(part(3, 5), part(8, 3))));
}

TEST_F(AttentionTest, EmptyPartialIsTheIdentity) {
  const AttentionPartial empty = part(0, 0);
  EXPECT_EQ(empty.max, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(empty.sum, 0.0f);
  EXPECT_EQ(empty.acc, std::vector<float>(d, 0.0f));
  const AttentionPartial whole = part(0, n);
  const AttentionPartial left = combine(empty, whole);
  const AttentionPartial right = combine(whole, empty);
  EXPECT_EQ(left.max, whole.max);
  EXPECT_EQ(left.sum, whole.sum);
  EXPECT_EQ(left.acc, whole.acc);
  EXPECT_EQ(right.acc, whole.acc);
  expect_matches(combine(combine(empty, part(0, 5)), combine(part(5, 6), empty)));
  std::vector<float> out(d);
  EXPECT_THROW(attention_finalize(combine(empty, empty), out), std::invalid_argument);
}

TEST(Attention, PartialOfOnePositionIsItsValue) {
  const std::vector<float> q = {1, 2};
  const std::vector<float> k = {3, -1};
  const std::vector<float> v = {0.25f, -4.0f};
  const AttentionPartial p = attention_partial(q, k.data(), v.data(), 1, 2, 0.5f);
  EXPECT_EQ(p.max, 0.5f);  // 0.5 * (3 - 2)
  EXPECT_EQ(p.sum, 1.0f);
  EXPECT_EQ(p.acc, v);
}

TEST(Activations, SiluMulHandValues) {
  const std::vector<float> gate = {0, 1, -2};
  const std::vector<float> up = {2, 3, 4};
  std::vector<float> out(3);
  silu_mul(gate, up, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 3.0 / (1.0 + 0.36787944117144233), 1e-6);  // 1 * sigmoid(1) * 3
  EXPECT_NEAR(out[2], -8.0 / (1.0 + 7.38905609893065), 1e-6);    // -2 * sigmoid(-2) * 4
}

TEST(Activations, AddInplace) {
  std::vector<float> acc = {1, 2, 3};
  add_inplace(acc, std::vector<float>{0.5f, -2, 10});
  EXPECT_EQ(acc, (std::vector<float>{1.5f, 0, 13}));
  std::vector<float> shorter(2);
  EXPECT_THROW(add_inplace(acc, shorter), std::invalid_argument);
}

TEST(Argmax, LowestIndexWinsTies) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-1, -1}), 0);
  EXPECT_EQ(argmax(std::vector<float>{5}), 0);
  EXPECT_EQ(argmax(std::vector<float>{0, 1, 2, 7, 7, 7}), 3);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -5}), 1);
  EXPECT_EQ(argmax(std::vector<float>{NAN, 1, 2}), 2);
  EXPECT_EQ(argmax(std::vector<float>{1, NAN, 2}), 2);
  EXPECT_THROW(argmax(std::vector<float>{}), std::invalid_argument);
}

}  // namespace
}  // namespace wafersim::models
