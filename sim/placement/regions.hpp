// Regions of one wafer as the strategies cut them: a plan (a block per
// layer, a strip for the head) and the shapes they are cut from (a snake of
// blocks, a grid of slots, the head's share of the width).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/mesh.hpp"
#include "fabric/units.hpp"

namespace wafersim::sim {

// A region plan for one wafer: a block per layer (in layer order) and the head strip.
struct RegionPlan {
  std::vector<fabric::Rect> blocks;
  fabric::Rect head;
  fabric::Rect rest;   // the area left to the layers
  std::string note;    // how the strategy chose it, for reports
  int kv_segment = 0;  // StagePlanner::layer's KV segment floor (0: the matrices first)
  // Per-core byte budget the stages are planned at (0: the core's capacity).
  Bytes budget;
  // Each layer stacked top-down or bottom-up, whichever brings its input
  // nearer the previous layer's output (all strategies but anneal, whose
  // search prices its slots top-down).
  bool turn_layers = true;
  // The whole-region dataflow: blocks[i] is the region layer i shares with
  // the other layers of its group (StagePlanner::region_layer).
  bool whole_region = false;
};

// Head strip width (a full-height strip on the west of the area) as wide as
// its share of the bytes: at least 1, at most extent - 1.
int head_share(int extent, Bytes head_bytes, Bytes layer_bytes, int k);

// A boustrophedon of k blocks: `rows` rows of ceil(k/rows) blocks inside
// `area`, snaking left to right then right to left; with `by_columns` the
// same transposed (down the first column, up the second, ...). Empty when
// the blocks would be less than one core.
std::vector<fabric::Rect> snake_blocks(const fabric::Rect& area, int k, int rows, bool by_columns);

// All slots of a rows x cols grid (row-major), for annealing.
std::vector<fabric::Rect> grid_slots(const fabric::Rect& area, int rows, int cols, bool by_columns);

}  // namespace wafersim::sim
