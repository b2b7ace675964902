// Pictures of a placement on its wafers: the regions (matrices and layers,
// labelled, with the token's path drawn between them), a heatmap of SRAM use
// per core and one of link bytes per core. Read by `wafersim place --svg` and
// the HTML run report. Plain data in, SVG text out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/mesh.hpp"

namespace wafersim::analysis {

// One placed rectangle: a matrix, a layer's attention, the head.
struct PlacedRegion {
  std::string name;  // "layer 3 qkv", "layer 3 attention", "lm_head", ...
  int layer = -1;    // -1 for the head (lm_head, embeddings)
  int wafer = 0;
  fabric::Rect rect;
  bool upward = false;  // a matrix turned upside down (its input enters at the bottom row)
};

struct PlacementPicture {
  int mesh_width = 0, mesh_height = 0;  // per wafer
  int wafers = 1;
  int layers = 0;
  // Regions, layers in order, then the head's. A token enters at the
  // embedding (the lm_head when tied), crosses layers 0..L-1, ends at lm_head.
  std::vector<PlacedRegion> regions;
  std::vector<std::uint64_t> core_sram;   // [wafer * H + y][x], bytes
  std::vector<std::uint64_t> link_bytes;  // [wafer * H + y][x][E, W, S, N], bytes
  std::uint64_t sram_capacity_per_core = 0;
  std::string link_basis = "one decode token";  // what link_bytes counted, for the colour bar
};

// The panels' pixel grid: `cores_per_pixel` x `cores_per_pixel` cores
// aggregate into one pixel (at most ~240 pixels a side), each pixel drawn as
// a `scale` x `scale` square (panels at most ~340 x 480 screen pixels).
struct PictureGrid {
  int cores_per_pixel = 1;
  int columns = 0, rows = 0;  // pixels per wafer
  int scale = 1;              // screen pixels per pixel
};
PictureGrid picture_grid(int mesh_width, int mesh_height);

// Three panels per wafer, one row each: regions, SRAM per core (colour scale
// over the data's range, min to max of used cores, shared by every wafer),
// link bytes leaving each core (square-root scale from 0, shared by every
// wafer). Heatmaps are embedded PNG images, one pixel per aggregated cell
// (the max over its cores). Throws std::invalid_argument when the arrays are
// not shaped like the mesh.
std::string placement_svg(const PlacementPicture& picture);

}  // namespace wafersim::analysis
