#include "sim/studies/bench_kernels.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <iostream>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "models/dtype.hpp"
#include "models/kernels.hpp"
#include "models/rng.hpp"
#include "models/weights.hpp"

namespace wafersim::sim {

namespace {

// A tile shape: `rows` x `cols` tiles cut from 2048-column bf16 matrices
// (the widths tile the rows; the last tile of a row takes the remainder).
struct TileShape {
  const char* what;
  int rows, cols;
};

}  // namespace

int bench_kernels(bool json) {
  // Llama-3.2-1B on one WSE-3, layer-rectangles (wafersim place): qkv, o and
  // gate_up tiles ~25 x 55, down ~6 x 221 (of 8192 columns), lm_head ~109 x 11;
  // and a whole matrix, as the reference forward pass reads it.
  const std::vector<TileShape> shapes = {{"qkv/o/gate_up tiles", 25, 55},
                                         {"down tiles", 6, 227},
                                         {"lm_head tiles", 109, 11},
                                         {"whole matrix", 2048, 2048}};
  constexpr int kRows = 2048, kCols = 2048, kMatrices = 24;  // 192 MiB of bf16: past the caches
  std::vector<models::Matrix> ms;
  models::Xoshiro256StarStar rng(1);
  for (int k = 0; k < kMatrices; ++k) {
    models::Matrix m = models::Matrix::compact(kRows, kCols, models::DType::bf16);
    std::vector<float> row(kCols);
    for (int i = 0; i < kRows; ++i) {
      for (float& v : row) v = models::round_to_dtype(rng.uniform_pm1(), models::DType::bf16);
      m.set_row(i, row);
    }
    ms.push_back(std::move(m));
  }
  std::vector<float> x(kCols), y(kRows);
  for (float& v : x) v = rng.uniform_pm1();
  std::vector<models::GemvKernel> kernels = {models::GemvKernel::scalar};
  if (models::gemv_kernel_available(models::GemvKernel::avx2))
    kernels.push_back(models::GemvKernel::avx2);

  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  if (!json)
    fmt::print(
        "GEMV tile kernel, bf16, {} MiB of weights streamed per pass, GMAC/s (best of 3):\n"
        "tile by tile with each kernel, and `bands` (models::gemv_tiles, the best kernel):\n"
        "a row of tiles per call, as the functional executor computes a row band of cores\n\n"
        "{:<22} {:>10}",
        kMatrices * kRows * kCols * 2 / (1 << 20), "tiles", "shape");
  if (!json)
    for (models::GemvKernel k : kernels) fmt::print(" {:>8}", models::gemv_kernel_name(k));
  if (!json) fmt::print(" {:>8}\n", "bands");
  // Best GMAC/s of three passes of `pass` over every matrix.
  auto best_of_3 = [&](const std::function<void(const models::Matrix&)>& pass) {
    double best = 0.0;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (const models::Matrix& m : ms) pass(m);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(kMatrices) * kRows * kCols / s / 1e9);
    }
    return best;
  };
  for (const TileShape& t : shapes) {
    nlohmann::ordered_json row;
    row["tiles"] = t.what;
    row["rows"] = t.rows;
    row["cols"] = t.cols;
    if (!json) fmt::print("{:<22} {:>10}", t.what, fmt::format("{}x{}", t.rows, t.cols));
    for (models::GemvKernel k : kernels) {
      const double best = best_of_3([&](const models::Matrix& m) {
        for (int r0 = 0; r0 < kRows; r0 += t.rows)
          for (int c0 = 0; c0 < kCols; c0 += t.cols) {
            const int nr = std::min(t.rows, kRows - r0), nc = std::min(t.cols, kCols - c0);
            models::gemv_tile_with(k, m.view(r0, nr, c0, nc),
                                   std::span<const float>(x).subspan(static_cast<std::size_t>(c0),
                                                                     static_cast<std::size_t>(nc)),
                                   std::span<float>(y).first(static_cast<std::size_t>(nr)));
          }
      });
      row[models::gemv_kernel_name(k)] = best;
      if (!json) fmt::print(" {:>8.2f}", best);
    }
    std::vector<int> cuts;
    for (int c0 = 0; c0 < kCols; c0 += t.cols) cuts.push_back(c0);
    cuts.push_back(kCols);
    const std::size_t tiles = cuts.size() - 1;
    std::vector<float> band_y(tiles * static_cast<std::size_t>(t.rows));
    const double bands = best_of_3([&](const models::Matrix& m) {
      for (int r0 = 0; r0 < kRows; r0 += t.rows) {
        const int nr = std::min(t.rows, kRows - r0);
        models::gemv_tiles(m.view(r0, nr, 0, kCols), cuts, x, band_y,
                           static_cast<std::size_t>(t.rows));
      }
    });
    row["bands"] = bands;
    if (!json) fmt::print(" {:>8.2f}", bands);
    if (!json) fmt::print("\n");
    out.push_back(row);
  }
  if (json) std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace wafersim::sim
