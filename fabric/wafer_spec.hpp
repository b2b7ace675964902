// What the user asked for: the wafer's hardware parameters. Immutable after
// validation; the live state is fabric::Fabric.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "fabric/units.hpp"

namespace wafersim::fabric {

// Thrown for hardware that cannot exist (zero-size mesh, no SRAM, ...). The
// scenario loader catches it and adds file/line context.
class SpecError : public std::runtime_error {
 public:
  SpecError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;  // e.g. "core.sram" — the key path below `hardware:`
};

// Spare cores for local repair (fabric/redundancy.hpp). The physical array is
// the logical mesh plus `spare_columns` spare columns after every group of
// `columns_per_group` logical columns; each row of a group (a row segment)
// repairs up to `spare_columns` dead cores by shifting its logical cores onto
// the next healthy physical ones. A logical link whose ends moved apart costs
// `detour_latency` per extra physical hop. columns_per_group 0: no spares
// (defects then fall on the logical mesh itself, as before).
struct Redundancy {
  int columns_per_group = 0;
  int spare_columns = 1;
  Cycles detour_latency{1};
  bool enabled() const { return columns_per_group > 0; }
  bool operator==(const Redundancy&) const = default;
};

struct WaferSpec {
  std::string name;

  // Programmable mesh of processing elements (cores).
  int mesh_width = 0;   // columns (x)
  int mesh_height = 0;  // rows (y)
  // Die tiling of the wafer (dies_x * dies_y dies); used for reporting and,
  // later, die-boundary effects and defect clustering.
  int dies_x = 1;
  int dies_y = 1;

  // Core.
  double clock_hz = 0.0;
  Bytes sram_per_core{0};
  int simd_lanes_16bit = 0;            // 16-bit multiply-accumulates per cycle
  int simd_lanes_32bit = 0;            // 32-bit multiply-accumulates per cycle
  Bytes sram_read_bytes_per_cycle{0};  // weight bytes the datapath can read per cycle
  Cycles task_overhead{0};             // fixed cycles to start a kernel tile on a core
  // Cycles each vector instruction costs beyond its elements' SIMD cycles:
  // its issue and the step of the scalar loop that feeds it (operand load,
  // loop counter, branch). A GEMV tile issues one instruction per input
  // element (fabric/core_cost.hpp). 0 = not modelled.
  Cycles instruction_overhead{0};
  // Silicon area of one core, mm^2 (0 = unknown): what turns a defect density
  // per mm^2 into the probability that a core is dead.
  double core_area_mm2 = 0.0;

  // Router and links.
  Cycles hop_latency{0};          // cycles for a wavelet to cross one router + link
  Bytes link_bytes_per_cycle{0};  // per link per direction (one 32-bit wavelet = 4 B)
  int virtual_channels = 0;       // colors
  Cycles reduce_hop_overhead{0};  // extra cycles per hop when a core adds and forwards

  // Wafer edge I/O (host and other wafers).
  double io_bandwidth_bytes_per_s = 0.0;
  double io_latency_s = 0.0;

  // Defective cores (fabric/defects.hpp): each core dead with probability
  // defect_probability() (drawn from defect_seed), plus the cores listed
  // explicitly and those of a defect map file. With redundancy enabled they
  // are drawn on the physical array (its coordinates) and repaired;
  // otherwise they fall on the logical mesh.
  Redundancy redundancy;
  // The probability is given either per core (defect_rate) or as a defect
  // density per mm^2 of silicon (defect_density_per_mm2, times
  // core_area_mm2); at most one of the two is nonzero.
  double defect_rate = 0.0;
  double defect_density_per_mm2 = 0.0;
  std::uint64_t defect_seed = 0;
  std::vector<Coord> defect_cores;
  // A defect map file (defects.file): its path as resolved (absolute; "" =
  // none), the SHA-256 of its bytes and the cores it lists, in file order.
  std::string defect_file;
  std::string defect_file_sha256;
  std::vector<Coord> defect_file_cores;
  // Clustered defects (the negative-binomial yield model, Stapper 1983): the
  // defect density of each square area of defect_cluster_size cores a side
  // is the mean scaled by a gamma draw of shape defect_clustering (mean 1,
  // variance 1/clustering). 0 = independent defects.
  double defect_clustering = 0.0;
  int defect_cluster_size = 64;

  // Power of the whole system around one wafer (a CS-3) at full load, watts;
  // optional (0 = unknown). Used only for tokens/s per kW in reports.
  double system_power_w = 0.0;

  int core_count() const { return mesh_width * mesh_height; }
  // The probability that a core is dead: defect_rate, or the density per
  // mm^2 times the core's area when the density is given.
  double defect_probability() const {
    return defect_density_per_mm2 > 0.0 ? defect_density_per_mm2 * core_area_mm2 : defect_rate;
  }
  // Every core named dead: defect_cores, then defect_file_cores.
  std::vector<Coord> listed_defects() const {
    std::vector<Coord> all = defect_cores;
    all.insert(all.end(), defect_file_cores.begin(), defect_file_cores.end());
    return all;
  }
  // Groups of columns sharing spares, and the physical array's width
  // (mesh_width without redundancy).
  int spare_groups() const {
    return redundancy.enabled()
               ? (mesh_width + redundancy.columns_per_group - 1) / redundancy.columns_per_group
               : 0;
  }
  int physical_width() const { return mesh_width + spare_groups() * redundancy.spare_columns; }
  bool operator==(const WaferSpec&) const = default;
  Bytes sram_capacity() const { return sram_per_core * static_cast<std::uint64_t>(core_count()); }
  // Multiply-accumulates per cycle for elements of the given width in bits.
  int simd_lanes(int element_bits) const {
    return element_bits <= 16 ? simd_lanes_16bit : simd_lanes_32bit;
  }

  // Throws SpecError naming the offending field when the hardware is impossible.
  void validate() const;
};

}  // namespace wafersim::fabric
