// `wafersim place`: a placement evaluated without running the SystemC
// engine. One decode token is pushed through the lowered program on the
// fabric model, which gives the mesh traffic a token causes (hop-bytes: bytes
// x hops summed over every link) and the worst link, next to the SRAM map.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/placement_picture.hpp"
#include "analysis/run_result.hpp"
#include "fabric/mesh.hpp"
#include "sim/config/scenario.hpp"
#include "sim/engine/engine.hpp"
#include "sim/placement/placement.hpp"

namespace wafersim::sim {

// A placed rectangle (a matrix, a layer's attention, the head).
using RegionInfo = analysis::PlacedRegion;

struct PlacementReport {
  std::string scenario;
  std::string strategy;
  std::string planner_note;          // how the strategy chose its regions
  double estimated_hop_bytes = 0.0;  // closed form (placement_cost.hpp), for comparison
  // Closed-form critical-path cycles of one token at the full context
  // (estimate_latency_cycles), next to the engine's decode step alone.
  double estimated_latency_cycles = 0.0;
  int wafers = 1;
  int mesh_width = 0, mesh_height = 0;
  int layers = 0;
  std::vector<RegionInfo> regions;
  std::vector<std::uint64_t> core_sram;   // [wafer * H + y][x]
  std::vector<std::uint64_t> link_bytes;  // one decode token: [wafer * H + y][x][E, W, S, N]
  std::uint64_t sram_capacity_per_core = 0;
  std::uint64_t cores_used = 0;
  std::uint64_t sram_min = 0, sram_max = 0;  // over used cores
  double sram_mean = 0.0;
  std::uint64_t hop_bytes_per_token = 0;
  std::uint64_t worst_link_bytes_per_token = 0;
  std::uint64_t token_cycles = 0;  // one decode step alone on the fabric
  double clock_hz = 0.0;
  int max_context_tokens = 0;
  // The placement as a placement file (sim/config/placement_file.hpp).
  std::string placement_file;
  // placement.layer_groups: auto: the candidates and the count chosen.
  std::optional<analysis::LayerGroupChoice> layer_group_choice;
  // placement.reduction: auto (and matrices.<m>.reduction: auto): the
  // schemes tried and chosen.
  std::vector<analysis::ReductionChoice> reduction_choices;
  // Layers of the decode step replayed instead of simulated (host time only).
  std::uint64_t replayed_layer_passes = 0;
};

// `replay`: how the decode step alone replays layers equal to the one before
// (RunOptions::layer_replay; the same figures in every mode).
PlacementReport evaluate_placement(const Scenario& scenario,
                                   const std::function<void(int, int)>& progress = {},
                                   const std::function<void(int, int)>& search_progress = {},
                                   LayerReplayMode replay = LayerReplayMode::when_it_pays);

void write_placement_summary(std::ostream& out, const PlacementReport& r);
nlohmann::ordered_json placement_json(const PlacementReport& r);
// The placement's rectangles, layers in order, then the head's.
std::vector<RegionInfo> placement_regions(const Placement& placement);

// The picture of the report (analysis/placement_picture.hpp): regions, SRAM
// per core and the bytes one decode token puts on each core's links.
analysis::PlacementPicture placement_picture(const PlacementReport& r);
std::string placement_svg(const PlacementReport& r);

// The picture of a finished run: the scenario's placement planned again (the
// same plan the run used: planning is deterministic) and the run's own SRAM
// and link counters (link bytes over the whole run).
analysis::PlacementPicture run_placement_picture(const Scenario& scenario,
                                                 const analysis::RunResult& result);

}  // namespace wafersim::sim
