// Figures derived once from a RunResult and shared by every output (terminal
// report, JSON, HDF5), so that all of them say the same thing about a run.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "analysis/run_result.hpp"
#include "fabric/critical_path.hpp"

namespace wafersim::analysis {

// The categories of a token's critical path: fabric's Resource, in the order
// of CycleBreakdown's fields.
inline constexpr std::size_t kPathCategoryCount = 7;
inline constexpr std::array<Resource, kPathCategoryCount> kPathCategories = {
    Resource::compute,    Resource::sram, Resource::hops,    Resource::serialization,
    Resource::contention, Resource::io,   Resource::queueing};
// A new CycleBreakdown field needs a category here (and a name below).
static_assert(sizeof(CycleBreakdown) == kPathCategoryCount * sizeof(Cycles));

// Machine name of a category, the CycleBreakdown field name: "compute", "sram", ..., "queueing"
std::string_view category_key(Resource c);
// The resource a category stands for, as users read it: "core compute", ...
std::string_view resource_name(Resource c);
// Cycles of one category in a breakdown.
Cycles cycles_in(const CycleBreakdown& b, Resource c);

// Outgoing link directions, the last index of RunResult::link_bytes.
inline constexpr int kLinkDirections = 4;
// "E", "W", "S" or "N" for dir 0..3.
std::string_view direction_name(int dir);

struct BusiestLink {
  int wafer = 0;
  int x = 0;  // core the link leaves from (on its wafer)
  int y = 0;
  int dir = 0;  // 0=E, 1=W, 2=S, 3=N
  Bytes bytes;
  double load = 0.0;  // bytes / (total_cycles * link_bytes_per_cycle), in [0, 1]
};

struct Metrics {
  // Performance (per user: one sequence).
  double decode_tokens_per_s_per_user = 0.0;  // clock_hz / decode_cycles_per_token; 0 if none
  // Steady-state tokens/s over all users: the sum of every user's own rate
  // (clock_hz / that user's mean decode step).
  double aggregate_tokens_per_s = 0.0;
  double inter_token_latency_s = 0.0;  // decode_cycles_per_token / clock_hz
  double ttft_s = 0.0;                 // ttft_cycles / clock_hz
  double prefill_s = 0.0;              // prefill_cycles / clock_hz
  double total_time_s = 0.0;           // total_cycles / clock_hz
  Cycles cycles_per_token;             // = decode_cycles_per_token

  // Fit and utilisation.
  std::uint64_t cores_total = 0;       // mesh_width * mesh_height
  std::uint64_t cores_with_sram = 0;   // cores holding at least one byte: the used cores
  double core_utilisation = 0.0;       // sum(busy of used cores) / (used cores * total_cycles)
  double sram_utilisation = 0.0;       // sram_bytes_used / sram_bytes_capacity
  Bytes max_core_sram_bytes;           // the fullest core
  Bytes sram_bytes_per_core_capacity;  // sram_bytes_capacity / cores_total
  double sram_headroom_bytes = 0.0;    // sram_bytes_per_core_capacity - max_core_sram_bytes

  // Links.
  std::optional<BusiestLink> busiest_link;  // empty when no link carried a byte
  Bytes total_link_bytes;
  double hop_bytes_per_token = 0.0;  // total_link_bytes per token record (per 1 if none)

  // Critical path of the tokens the bottleneck is judged on: the decode
  // (generated) tokens, or the prompt tokens when nothing was generated.
  std::string critical_path_basis = "none";  // "decode", "prefill" or "none"
  std::uint64_t critical_path_tokens = 0;    // how many token records were summed
  CycleBreakdown critical_path;              // summed over those tokens
  std::array<double, kPathCategoryCount> critical_path_share{};  // each / total; 0 if total 0
  std::string bottleneck = "none";  // resource_name() of the largest category

  // Functional mode: generated tokens equal the reference forward pass's.
  bool tokens_match_reference = false;
};

// Derives the metrics. Throws std::logic_error when the result is physically
// impossible (a link above its bandwidth, a core busier than the run is long,
// per-core arrays not shaped like the mesh): those are engine bugs, not user errors.
Metrics compute_metrics(const RunResult& result);

}  // namespace wafersim::analysis
