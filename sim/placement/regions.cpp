#include "sim/placement/regions.hpp"

#include <algorithm>
#include <cmath>

namespace wafersim::sim {

using fabric::Rect;

int head_share(int extent, Bytes head_bytes, Bytes layer_bytes, int k) {
  const double total =
      static_cast<double>(layer_bytes.value) * k + static_cast<double>(head_bytes.value);
  const int w = std::max(
      1, static_cast<int>(std::floor(extent * static_cast<double>(head_bytes.value) / total)));
  return std::min(w, extent - 1);
}

std::vector<Rect> snake_blocks(const Rect& area, int k, int rows, bool by_columns) {
  const int R = std::min(std::max(1, rows), k);
  const int C = static_cast<int>(ceil_div(k, R));
  std::vector<Rect> blocks;
  const int along = by_columns ? area.height : area.width;  // the snake's direction
  const int across = by_columns ? area.width : area.height;
  const int block_a = along / C, block_c = across / R;
  if (block_a < 1 || block_c < 1) return blocks;
  for (int i = 0; i < k; ++i) {
    const int r = i / C, c = i % C;
    const int pos = r % 2 == 0 ? c : C - 1 - c;
    const int ext_c = r == R - 1 ? across - r * block_c : block_c;
    if (by_columns)
      blocks.push_back(Rect{area.x0 + r * block_c, area.y0 + pos * block_a, ext_c, block_a});
    else
      blocks.push_back(Rect{area.x0 + pos * block_a, area.y0 + r * block_c, block_a, ext_c});
  }
  return blocks;
}

std::vector<Rect> grid_slots(const Rect& area, int rows, int cols, bool by_columns) {
  const int R = rows, C = cols;
  std::vector<Rect> slots;
  const int along = by_columns ? area.height : area.width;
  const int across = by_columns ? area.width : area.height;
  const int block_a = along / C, block_c = across / R;
  if (block_a < 1 || block_c < 1) return slots;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const int ext_c = r == R - 1 ? across - r * block_c : block_c;
      if (by_columns)
        slots.push_back(Rect{area.x0 + r * block_c, area.y0 + c * block_a, ext_c, block_a});
      else
        slots.push_back(Rect{area.x0 + c * block_a, area.y0 + r * block_c, block_a, ext_c});
    }
  return slots;
}

}  // namespace wafersim::sim
