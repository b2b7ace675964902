// A palette image encoded as PNG, for heatmaps embedded in SVG and HTML as a
// data: URI. One pixel per aggregated cell, drawn scaled with nearest-neighbour
// sampling, so a full wafer's heatmap is a small image instead of thousands
// of vector rectangles (whose anti-aliased edges made moire patterns).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wafersim::analysis {

struct PaletteImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> pixels;                  // row-major palette indices
  std::vector<std::array<std::uint8_t, 3>> palette;  // RGB, at most 256 entries
};

// The PNG file (colour type 3, 8 bits per pixel; stored deflate blocks, so
// no compression library is needed). Throws std::invalid_argument when the
// pixels do not match the size or an index is outside the palette.
std::string png_bytes(const PaletteImage& image);

// RFC 4648 base64 with padding.
std::string base64(std::string_view bytes);

// "data:image/png;base64,..."
std::string png_data_uri(const PaletteImage& image);

}  // namespace wafersim::analysis
