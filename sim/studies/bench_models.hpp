// wafersim bench models: placement time, host time per simulated token and
// peak memory of full-size runs of real model presets (issue 4's targets),
// and functional decode beside the host's memory-bandwidth floor.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace wafersim::sim {

struct BenchModelsOptions {
  bool json = false;
  std::filesystem::path preset_dir;  // resolved folder of presets
  std::vector<std::string> only;     // case names to run (empty: all)
  std::filesystem::path point;       // internal: run this one scenario here and print JSON
  int threads = 0;                   // host threads for functional arithmetic (0: all)
  // Runs of each case (>= 1). With more than one, the cases are run in turn
  // (every case once, then again), and each case reports its run with the
  // median host time per token, and the range over its runs.
  int repeat = 1;
};

int bench_models(const BenchModelsOptions& options);
// The cases' names, in the order they run.
std::vector<std::string> bench_model_cases();

}  // namespace wafersim::sim
