// hardware: a wafer (fabric::WaferSpec), in a preset file, inline or as
// overrides of a preset. docs/scenario-schema.md, "Hardware".
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <system_error>

#include "sim/config/defect_map_file.hpp"
#include "sim/config/quantity.hpp"
#include "sim/config/sections.hpp"

namespace wafersim::sim::schema {

namespace {

using fabric::WaferSpec;
using namespace yaml;

constexpr Need R = Need::required;
constexpr Need O = Need::optional;

// Valid ranges (docs/scenario-schema.md, "Valid ranges"): far beyond any
// real wafer (WSE-3: 48 KiB, ~1 GHz, 1 cycle per hop, 24 colors), so that
// what-ifs fit, yet small enough that cycle and byte totals stay in 64 bits.
// The upper bounds are checked here, where the value was written; a zero
// that validate() refuses is left to it, after presets and overrides merge
// (an override may fix a preset's value).
constexpr bool kZeroLater = true;
constexpr double kMinClock = 1e6;      // 1 MHz
constexpr double kMaxClock = 1e11;     // 100 GHz
constexpr Bytes kMaxSram{1ull << 30};  // 1 GiB per core
constexpr int kMaxLanes = 65'536;
constexpr Bytes kMaxPerCycle{65'536};  // 64 KiB per cycle
constexpr Cycles kMaxOverhead{1'000'000};
constexpr Cycles kMaxHop{100'000};
constexpr int kMaxVirtualChannels = 1024;
constexpr double kMinIo = 1e3;   // 8 kbit/s, in bytes per second
constexpr double kMaxIo = 1e15;  // 8 Pbit/s

// defects: written (seed, cores and the rate or the density) whenever any
// of them is set, so a run with defects reproduces.
bool has_defects(const WaferSpec& h) {
  return h.defect_rate > 0.0 || h.defect_density_per_mm2 > 0.0 || h.defect_seed != 0 ||
         !h.defect_cores.empty() || !h.defect_file.empty();
}
bool has_rate(const WaferSpec& h) {
  return has_defects(h) && h.defect_density_per_mm2 == 0.0;
}

// defects.file: relative to the folder of the file the key is in (the
// scenario, or a preset); every line checked (sim/config/defect_map_file.hpp).
void read_defect_file(const Value& v, WaferSpec& h) {
  namespace fs = std::filesystem;
  const std::string given = read_string(v, "a defect map file such as wafer17-defects.csv");
  fs::path p = given;
  if (p.is_relative()) p = fs::path(v.file).parent_path() / p;
  std::error_code ec;
  p = fs::absolute(p, ec).lexically_normal();
  if (!fs::exists(p, ec))
    fail(v.loc(), v.path,
         fmt::format("'{}' is not a file (looked for {}; a relative path is relative to the "
                     "folder of the file it is written in)",
                     given, p.string()));
  if (!fs::is_regular_file(p, ec))
    fail(v.loc(), v.path,
         fmt::format("{} is a folder or a device; expected a defect map file (x,y lines)",
                     p.string()));
  const bool spares = h.redundancy.enabled();
  DefectMapFile f = read_defect_map_file(
      p, h.mesh_width > 0 ? h.physical_width() : 0, h.mesh_height,
      spares ? "physical array (redundancy: coordinates are physical)" : "mesh", v.path);
  h.defect_file = p.string();
  h.defect_file_sha256 = std::move(f.sha256);
  h.defect_file_cores = std::move(f.cores);
}

void read_defect_file_sha256(const Value& v, WaferSpec& h) {
  std::string want = read_string(v, "64 hex digits (sha256sum of the defect map file)");
  for (char& c : want) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (h.defect_file.empty())
    fail(v.loc(), v.path,
         "pins the content of defects.file: give defects.file too, or remove file_sha256");
  if (want != h.defect_file_sha256)
    fail(v.loc(), v.path,
         fmt::format("{} has SHA-256 {}, not {}: the map changed since this hash was written "
                     "(give the map it was, or its new hash)",
                     h.defect_file, h.defect_file_sha256, want));
}

std::string write_cores(const WaferSpec& h) {
  std::string o = "[";
  for (std::size_t i = 0; i < h.defect_cores.size(); ++i)
    o += fmt::format("{}[{}, {}]", i ? ", " : "", h.defect_cores[i].x, h.defect_cores[i].y);
  return o + "]";
}

constexpr Key<WaferSpec> kHardware[] = {
    {"name", R, "string", "for reports; in a preset file it must equal the file name",
     [](auto& v, auto& h, auto&) { h.name = read_string(v); },
     [](auto& h) { return yaml_string(h.name); }},
    {"description", O, "string", "optional, free text",
     [](auto& v, auto&, auto&) { read_string(v); }},
    {"mesh.width", R, "count", "programmable mesh of cores, columns",
     [](auto& v, auto& h, auto&) {
       h.mesh_width = read_count_in(v, 1, 4'000'000, "762", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.mesh_width); }},
    {"mesh.height", R, "count", "programmable mesh of cores, rows",
     [](auto& v, auto& h, auto&) {
       h.mesh_height = read_count_in(v, 1, 4'000'000, "1176", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.mesh_height); }},
    {"dies.x", R, "count", "die tiling of the wafer, columns",
     [](auto& v, auto& h, auto&) { h.dies_x = read_count_in(v, 1, 4'000'000, "7", kZeroLater); },
     [](auto& h) { return fmt::format("{}", h.dies_x); }},
    {"dies.y", R, "count", "die tiling of the wafer, rows",
     [](auto& v, auto& h, auto&) { h.dies_y = read_count_in(v, 1, 4'000'000, "12", kZeroLater); },
     [](auto& h) { return fmt::format("{}", h.dies_y); }},
    {"core.clock", R, "frequency", "core clock",
     [](auto& v, auto& h, auto&) {
       h.clock_hz =
           read_quantity_in(v, parse_frequency, "1.1 GHz", kMinClock, kMaxClock, format_frequency);
     },
     [](auto& h) { return format_frequency(h.clock_hz); }},
    {"core.sram", R, "size", "SRAM per core",
     [](auto& v, auto& h, auto&) {
       h.sram_per_core =
           read_quantity_in(v, parse_size, "48 KiB", Bytes{1}, kMaxSram, format_size, kZeroLater);
     },
     [](auto& h) { return format_size(h.sram_per_core); }},
    {"core.simd_lanes_16bit", R, "count", "16-bit multiply-accumulates per cycle",
     [](auto& v, auto& h, auto&) {
       h.simd_lanes_16bit = read_count_in(v, 1, kMaxLanes, "8", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.simd_lanes_16bit); }},
    {"core.simd_lanes_32bit", R, "count", "32-bit multiply-accumulates per cycle",
     [](auto& v, auto& h, auto&) {
       h.simd_lanes_32bit = read_count_in(v, 1, kMaxLanes, "4", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.simd_lanes_32bit); }},
    {"core.sram_read_bandwidth", R, "per cycle", "weight bytes the datapath reads per cycle",
     [](auto& v, auto& h, auto&) {
       h.sram_read_bytes_per_cycle =
           read_quantity_in(v, parse_bytes_per_cycle, "16 B/cycle", Bytes{1}, kMaxPerCycle,
                            format_bytes_per_cycle, kZeroLater);
     },
     [](auto& h) { return format_bytes_per_cycle(h.sram_read_bytes_per_cycle); }},
    {"core.task_overhead", R, "cycles", "fixed cost to start a kernel tile",
     [](auto& v, auto& h, auto&) {
       h.task_overhead =
           read_quantity_in(v, parse_cycles, "20 cycles", Cycles{0}, kMaxOverhead, format_cycles);
     },
     [](auto& h) { return format_cycles(h.task_overhead); }},
    {"core.instruction_overhead", O, "cycles",
     "per vector instruction beyond its SIMD cycles: issue and the loop step feeding it",
     [](auto& v, auto& h, auto&) {
       h.instruction_overhead =
           read_quantity_in(v, parse_cycles, "27 cycles", Cycles{0}, kMaxOverhead, format_cycles);
     },
     [](auto& h) { return format_cycles(h.instruction_overhead); },
     [](auto& h) { return h.instruction_overhead.value > 0; }},
    {"core.area", O, "area (mm^2, um^2)",
     "silicon area of one core; turns defects.density_per_mm2 into a per-core rate",
     [](auto& v, auto& h, auto&) {
       h.core_area_mm2 = read_quantity_in(v, parse_area, "0.05 mm^2", 1e-9, 1e4, format_area);
     },
     [](auto& h) { return format_area(h.core_area_mm2); },
     [](auto& h) { return h.core_area_mm2 > 0.0; }},
    {"router.hop_latency", R, "cycles", "one router plus one link",
     [](auto& v, auto& h, auto&) {
       h.hop_latency = read_quantity_in(v, parse_cycles, "1 cycle", Cycles{1}, kMaxHop,
                                        format_cycles, kZeroLater);
     },
     [](auto& h) { return format_cycles(h.hop_latency); }},
    {"router.link_bandwidth", R, "per cycle", "per link per direction; whole bytes",
     [](auto& v, auto& h, auto&) {
       h.link_bytes_per_cycle = read_quantity_in(v, parse_bytes_per_cycle, "32 bit/cycle", Bytes{1},
                                                 kMaxPerCycle, format_bytes_per_cycle, kZeroLater);
     },
     [](auto& h) { return format_bits_per_cycle(h.link_bytes_per_cycle); }},
    {"router.virtual_channels", R, "count", "colors",
     [](auto& v, auto& h, auto&) {
       h.virtual_channels = read_count_in(v, 1, kMaxVirtualChannels, "24", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.virtual_channels); }},
    {"router.reduce_hop_overhead", R, "cycles", "extra cost per hop when a core adds and forwards",
     [](auto& v, auto& h, auto&) {
       h.reduce_hop_overhead =
           read_quantity_in(v, parse_cycles, "2 cycles", Cycles{0}, kMaxHop, format_cycles);
     },
     [](auto& h) { return format_cycles(h.reduce_hop_overhead); }},
    {"io.bandwidth", R, "data rate", "wafer edge I/O",
     [](auto& v, auto& h, auto&) {
       h.io_bandwidth_bytes_per_s =
           read_quantity_in(v, parse_data_rate, "1200 Gbit/s", kMinIo, kMaxIo, format_data_rate);
     },
     [](auto& h) { return format_data_rate(h.io_bandwidth_bytes_per_s); }},
    {"io.latency", R, "time", "wafer edge I/O",
     [](auto& v, auto& h, auto&) {
       h.io_latency_s = read_quantity_in(v, parse_duration, "1 us", 0.0, 1.0, format_duration);
     },
     [](auto& h) { return format_duration(h.io_latency_s); }},
    {"system_power", O, "power (W, kW, MW)",
     "power of the whole system around one wafer; used only for tokens/s per kW",
     [](auto& v, auto& h, auto&) {
       h.system_power_w = read_quantity_in(v, parse_power, "23 kW", 1.0, 1e9, format_power);
     },
     [](auto& h) { return format_power(h.system_power_w); },
     [](auto& h) { return h.system_power_w > 0.0; }},
    // Spare cores (fabric/redundancy.hpp): optional; written whenever the
    // wafer has spares, so a run reproduces its physical array.
    {"redundancy.columns_per_group", O, "count",
     "logical columns that share one group of spare columns (0: no spares)",
     [](auto& v, auto& h, auto&) {
       h.redundancy.columns_per_group = read_count_in(v, 1, 4'000'000, "12", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.redundancy.columns_per_group); },
     [](auto& h) { return h.redundancy.enabled(); }},
    {"redundancy.spare_columns", O, "count", "spare columns after each group",
     [](auto& v, auto& h, auto&) {
       h.redundancy.spare_columns = read_count_in(v, 1, 64, "1", kZeroLater);
     },
     [](auto& h) { return fmt::format("{}", h.redundancy.spare_columns); },
     [](auto& h) { return h.redundancy.enabled(); }},
    {"redundancy.detour_latency", O, "cycles",
     "extra cycles per extra physical hop of a repaired link",
     [](auto& v, auto& h, auto&) {
       h.redundancy.detour_latency =
           read_quantity_in(v, parse_cycles, "1 cycle", Cycles{0}, Cycles{1000}, format_cycles);
     },
     [](auto& h) { return format_cycles(h.redundancy.detour_latency); },
     [](auto& h) { return h.redundancy.enabled(); }},
    // Optional everywhere (a preset without it has no dead cores); each key
    // inside is optional too, and over a preset replaces only itself.
    {"defects.rate", O, "number in [0, 1)",
     "each core (of the physical array, with spares) dead independently with this probability",
     [](auto& v, auto& h, auto&) { h.defect_rate = read_real(v, "0.001"); },
     [](auto& h) { return fmt::format("{}", h.defect_rate); }, has_rate},
    {"defects.density_per_mm2", O, "number >= 0",
     "instead of rate: defects per mm^2 of silicon; each core dead with probability density x "
     "core.area",
     [](auto& v, auto& h, auto&) { h.defect_density_per_mm2 = read_real(v, "0.001"); },
     [](auto& h) { return fmt::format("{}", h.defect_density_per_mm2); },
     [](auto& h) { return h.defect_density_per_mm2 > 0.0; }},
    {"defects.seed", O, "count", "seed of the defect draw (SplitMix64, one draw per core)",
     [](auto& v, auto& h, auto&) {
       h.defect_seed = read_unsigned(v, std::numeric_limits<std::uint64_t>::max(), "7");
     },
     [](auto& h) { return fmt::format("{}", h.defect_seed); }, has_defects},
    {"defects.cores", O, "list of [x, y]",
     "cores dead in addition to the drawn ones (physical coordinates with spares)",
     [](auto& v, auto& h, auto&) { h.defect_cores = read_coords(v); }, write_cores, has_defects},
    {"defects.file", O, "path",
     "a defect map file, one dead core a line as x,y ('#' comments; relative to the file it is "
     "written in); its cores are dead too",
     [](auto& v, auto& h, auto&) { read_defect_file(v, h); },
     [](auto& h) { return yaml_string(h.defect_file); },
     [](auto& h) { return !h.defect_file.empty(); }},
    {"defects.file_sha256", O, "64 hex digits",
     "the defect map file's SHA-256, checked when it is read (the resolved scenario writes it)",
     [](auto& v, auto& h, auto&) { read_defect_file_sha256(v, h); },
     [](auto& h) { return yaml_string(h.defect_file_sha256); },
     [](auto& h) { return !h.defect_file.empty(); }},
    {"defects.clustering", O, "number >= 0",
     "clustered defects: the gamma shape of each area's defect density (negative-binomial "
     "yield model; smaller = more clustered; 0 = independent)",
     [](auto& v, auto& h, auto&) { h.defect_clustering = read_real(v, "2.0"); },
     [](auto& h) { return fmt::format("{}", h.defect_clustering); },
     [](auto& h) { return h.defect_clustering > 0.0; }},
    {"defects.cluster_size", O, "count",
     "side, in cores, of the square areas that share one defect density (default 64)",
     [](auto& v, auto& h, auto&) { h.defect_cluster_size = read_count(v, "64"); },
     [](auto& h) { return fmt::format("{}", h.defect_cluster_size); },
     [](auto& h) { return h.defect_clustering > 0.0; }},
};

}  // namespace

std::span<const Key<WaferSpec>> hardware_keys() {
  return kHardware;
}

}  // namespace wafersim::sim::schema
