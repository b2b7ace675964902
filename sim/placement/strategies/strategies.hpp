// The placement strategies, one file each; strategy_registry.cpp names them.
#pragma once

#include <memory>

#include "sim/placement/strategy.hpp"

namespace wafersim::sim::strategies {

// Full-height strips, layers left to right, the head on the right.
std::unique_ptr<PlacementStrategy> layer_rectangles();
// The head on the west; layers snake through placement.block_rows rows of blocks.
std::unique_ptr<PlacementStrategy> serpentine();
// Every boustrophedon whose path returns next to the head; the fewest hop-bytes wins.
std::unique_ptr<PlacementStrategy> short_path();
// The smallest per-core byte budget at which a serpentine layout fits.
std::unique_ptr<PlacementStrategy> sram_balanced();
// Simulated annealing of layers over the slots of every grid.
std::unique_ptr<PlacementStrategy> anneal();
// Layer groups, each sharing one region: every GEMV spans the whole region
// (WaferLLM's dataflow); placement.layer_groups sets how many.
std::unique_ptr<PlacementStrategy> whole_region();

}  // namespace wafersim::sim::strategies
