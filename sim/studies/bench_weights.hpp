// wafersim bench weights: how fast, and in how much host memory, a functional
// run's weights are made: a checkpoint read from its safetensors (memory-mapped,
// hashed, widened and stored compact row by row on the host threads) or
// synthetic weights drawn from a seed, exactly as `run` makes them.
#pragma once

#include <filesystem>
#include <string>

namespace wafersim::sim {

struct BenchWeightsOptions {
  std::string model;  // a model preset (synthetic weights) or a checkpoint folder
  std::string precision = "bf16";
  int threads = 0;  // 0: all the host has
  bool json = false;
  std::filesystem::path preset_dir;
};

int bench_weights(const BenchWeightsOptions& options);

}  // namespace wafersim::sim
