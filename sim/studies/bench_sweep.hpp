// wafersim bench sweep: how a sweep scales and whether it loses anything. One
// grid is swept one point at a time, with several points at once (-j), and
// over MPI ranks (mpiexec -n R, when this wafersim has MPI and mpiexec is on
// PATH); each way's wall time, its speed-up over the first, and whether it
// gave back every point, identical to the first.
#pragma once

#include <filesystem>
#include <string>

namespace wafersim::sim {

struct BenchSweepOptions {
  std::filesystem::path preset_dir;
  std::string scenario;  // default: scenarios/quickstart.yaml
  int points = 16;       // users 1..points
  int jobs = 0;          // -j and MPI ranks of the parallel ways (0: the host's cores)
  bool json = false;
};

int bench_sweep(const BenchSweepOptions& options);

}  // namespace wafersim::sim
