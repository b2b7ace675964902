// wafersim bench op: one operation of the decode dataflow on its own, timed
// at flow level on an idle fabric, with its cycles split by resource:
//   gemv       an M x N matrix over a P x Q region (plain or transposed)
//   allreduce  B bytes over a line of n cores
//   attention  one decode token's attention over L cached positions, the KV
//              cache spread over a P x Q region (a whole-region layer's)
//   layer      one whole-region decoder layer of a model on a P x Q region
//              at a context length, phase by phase (norms, GEMVs, RoPE,
//              attention over the KV cache spread over the region, ...):
//              the figure WaferLLM publishes per layer (docs/validation.md).
#pragma once

#include <filesystem>
#include <string>

#include <optional>

#include "fabric/collectives.hpp"

namespace wafersim::sim {

struct BenchOpOptions {
  std::string op;                      // gemv | allreduce | attention | layer
  std::string hardware = "wse3";       // a hardware preset
  std::string model = "llama-3.1-8b";  // layer: a model preset
  std::filesystem::path preset_dir;
  int out = 4096, in = 4096;      // gemv: matrix rows x columns
  int width = 420, height = 420;  // gemv, layer: the region (cores); allreduce: n = width
  bool transposed = false;        // gemv
  fabric::ReductionScheme reduction = fabric::ReductionScheme::two_level;
  int reduction_groups = 0;  // k-tree: K (0: round(sqrt n) per line)
  // layer, attention: attention's own scheme (its K: reduction_groups)
  std::optional<fabric::ReductionScheme> attention_reduction;
  std::uint64_t bytes = 4;  // allreduce
  int context = 4096;       // layer: positions cached before the decoded token
  int bits = 16;            // weights and KV cache
  // The kernels' cycles per vector instruction (core.instruction_overhead),
  // over the preset's; unset: the preset's.
  std::optional<std::uint64_t> instruction_overhead;
  int fabric_bits = 32;  // gemv, attention, layer: bits of a value on the fabric (32 or 16)
  bool json = false;
};

// Prints the figures (a table, or one JSON object); returns the exit code.
int bench_op(const BenchOpOptions& options);

}  // namespace wafersim::sim
