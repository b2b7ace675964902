// wafersim bench serving: how fast, and in how much host memory, a serving
// study runs once its step grid is calibrated (the calibration timed apart).
// wafersim bench steps: the step grid's interpolation against direct engine
// runs at points off the grid (held out), decode and prefill.
#pragma once

#include <filesystem>
#include <string>

namespace wafersim::sim {

struct BenchServingOptions {
  std::string scenario;  // a scenario with traffic:
  std::filesystem::path preset_dir;
  std::filesystem::path cache_dir;
  int jobs = 0;  // calibration runs at once (0: the host's cores)
  bool json = false;
};

int bench_serving(const BenchServingOptions& options);
int bench_steps(const BenchServingOptions& options);

}  // namespace wafersim::sim
