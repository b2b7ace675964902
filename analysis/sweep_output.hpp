// A sweep's results as HDF5: one row per point (and per GPU cluster of a
// point), each figure a dataset with its units, for h5py and pandas. Takes
// the sweep's JSON object (format "wafersim-sweep", docs/sweeps.md), so
// analysis/ stays independent of how the points were run.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace wafersim::analysis {

// Writes `path` whole or not at all (OutputError naming it on failure):
//   attributes format "wafersim-sweep", format_version, scenario, points_total,
//   complete, interrupted;
//   /points/<column>[P]: index, exit_code, override_<axis> for each name in
//   the sweep's `axes`, the figures (NaN
//   where a point has none), error;
//   /gpu_baselines/<column>[G]: point_index, system, gpus, tp, pp, the figures;
//   /missing[M]: indices of the points without a result.
void write_sweep_hdf5(const std::filesystem::path& path, const nlohmann::ordered_json& sweep);

}  // namespace wafersim::analysis
