#include "fabric/wafer_spec.hpp"

#include <cmath>

#include <string>

namespace wafersim::fabric {

namespace {
void require(bool ok, const char* field, const std::string& what) {
  if (!ok) throw SpecError(field, what);
}
}  // namespace

void WaferSpec::validate() const {
  require(mesh_width > 0, "mesh.width", "mesh width must be at least 1 core");
  require(mesh_height > 0, "mesh.height", "mesh height must be at least 1 core");
  require(static_cast<long long>(mesh_width) * mesh_height <= 4'000'000, "mesh",
          "mesh larger than 4,000,000 cores is not supported");
  require(dies_x > 0 && dies_x <= mesh_width, "dies.x",
          "die columns must be between 1 and the mesh width");
  require(dies_y > 0 && dies_y <= mesh_height, "dies.y",
          "die rows must be between 1 and the mesh height");
  require(clock_hz > 0.0, "core.clock", "clock must be positive (e.g. 1.1 GHz)");
  require(sram_per_core.value > 0, "core.sram", "SRAM per core must be positive (e.g. 48 KiB)");
  require(simd_lanes_16bit > 0, "core.simd_lanes_16bit", "16-bit SIMD lanes must be at least 1");
  require(simd_lanes_32bit > 0, "core.simd_lanes_32bit", "32-bit SIMD lanes must be at least 1");
  require(sram_read_bytes_per_cycle.value > 0, "core.sram_read_bandwidth",
          "SRAM read bandwidth must be positive (e.g. 16 B/cycle)");
  require(hop_latency.value > 0, "router.hop_latency", "hop latency must be at least 1 cycle");
  require(link_bytes_per_cycle.value > 0, "router.link_bandwidth",
          "link bandwidth must be positive (e.g. 32 bit/cycle)");
  require(virtual_channels > 0, "router.virtual_channels",
          "a router needs at least 1 virtual channel");
  require(io_bandwidth_bytes_per_s > 0.0, "io.bandwidth", "wafer I/O bandwidth must be positive");
  require(io_latency_s >= 0.0, "io.latency", "wafer I/O latency cannot be negative");
  require(defect_rate >= 0.0 && defect_rate < 1.0, "defects.rate",
          "defect rate must be in [0, 1) (e.g. 0.001 for 0.1% of cores dead)");
  require(std::isfinite(core_area_mm2) && core_area_mm2 >= 0.0 && core_area_mm2 <= 1e4, "core.area",
          "core area must be in [0, 10000] mm^2 (e.g. 0.05 mm^2)");
  require(
      std::isfinite(defect_density_per_mm2) && defect_density_per_mm2 >= 0.0,
      "defects.density_per_mm2",
      "defect density must be a number >= 0 per mm^2 (e.g. 0.001, TSMC 5 nm's published order)");
  require(!(defect_density_per_mm2 > 0.0 && defect_rate > 0.0), "defects.density_per_mm2",
          "give defects.rate (per core) or defects.density_per_mm2 (per mm^2, times core.area), "
          "not both");
  require(!(defect_density_per_mm2 > 0.0 && core_area_mm2 == 0.0), "defects.density_per_mm2",
          "a defect density per mm^2 needs the core's area: give core.area (e.g. 0.05 mm^2) in "
          "the hardware, or defects.rate per core instead");
  require(defect_probability() < 1.0, "defects.density_per_mm2",
          "density x core area must be below 1 (the probability that a core is dead): " +
              std::to_string(defect_density_per_mm2) + " per mm^2 x " +
              std::to_string(core_area_mm2) + " mm^2 is not");
  require(std::isfinite(defect_clustering) && defect_clustering >= 0.0 && defect_clustering <= 1e6,
          "defects.clustering",
          "clustering must be in [0, 1e6]: the gamma shape of the local defect density (0.5 to 5 "
          "in published yield fits; 0 = independent defects)");
  require(defect_cluster_size >= 1 && defect_cluster_size <= 1000000, "defects.cluster_size",
          "cluster size must be 1 to 1,000,000 cores a side");
  require(redundancy.columns_per_group >= 0 && redundancy.columns_per_group <= mesh_width,
          "redundancy.columns_per_group",
          "columns per spare group must be between 1 and the mesh width");
  require(redundancy.spare_columns >= 1 && redundancy.spare_columns <= 64,
          "redundancy.spare_columns", "spare columns per group must be between 1 and 64");
  require(redundancy.detour_latency.value <= 1000, "redundancy.detour_latency",
          "detour latency above 1000 cycles per hop is not supported");
  const int width = physical_width();
  const char* array = redundancy.enabled() ? " physical array" : " mesh";
  for (const Coord& c : defect_cores)
    require(c.x >= 0 && c.x < width && c.y >= 0 && c.y < mesh_height, "defects.cores",
            "defective core (" + std::to_string(c.x) + ", " + std::to_string(c.y) +
                ") lies outside the " + std::to_string(width) + " x " +
                std::to_string(mesh_height) + array);
  for (const Coord& c : defect_file_cores)
    require(c.x >= 0 && c.x < width && c.y >= 0 && c.y < mesh_height, "defects.file",
            "defective core (" + std::to_string(c.x) + ", " + std::to_string(c.y) + ") of " +
                defect_file + " lies outside the " + std::to_string(width) + " x " +
                std::to_string(mesh_height) + array + " (x in 0.." + std::to_string(width - 1) +
                ", y in 0.." + std::to_string(mesh_height - 1) + ")");
}

}  // namespace wafersim::fabric
