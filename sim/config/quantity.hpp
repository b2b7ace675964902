// Quantities with explicit units, as written in scenario and preset files:
// `48 KiB`, `1.1 GHz`, `20 cycles`, `32 bit/cycle`, `1200 Gbit/s`, `1 us`.
// Each string is parsed once, when the scenario is loaded; the rest of the
// simulator sees only strong types (Bytes, Cycles) or SI base units.
//
// The format_* functions write the canonical spelling used in resolved
// scenarios; parse(format(x)) == x exactly for every value they accept.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "fabric/units.hpp"

namespace wafersim::sim {

// A quantity string that cannot be read. what() is a phrase meant to follow
// the name of the key it belongs to, and lists the accepted units:
//   "needs a unit, e.g. 48 KiB; accepted units: B, kB, KB, ..."
// so that the scenario loader can write "sram needs a unit, e.g. 48 KiB; ...".
class QuantityError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Sizes: B, kB/KB, MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB (powers
// of 1024). Must come to a whole number of bytes: "1.5 KiB" is fine, "0.5 B" is not.
Bytes parse_size(std::string_view text);
// Frequencies: Hz, kHz, MHz, GHz. Returns hertz.
double parse_frequency(std::string_view text);
// Whole cycles: "1 cycle", "20 cycles".
Cycles parse_cycles(std::string_view text);
// Per-cycle bandwidth: "32 bit/cycle" or "4 B/cycle". Must be a whole number of
// bytes per cycle (the fabric moves whole 32-bit wavelets). Returns bytes per cycle.
Bytes parse_bytes_per_cycle(std::string_view text);
// Data rates: bit/s, kbit/s, Mbit/s, Gbit/s, Tbit/s and B/s, kB/s (KB/s), MB/s,
// GB/s, TB/s (powers of 1000). Returns bytes per second.
double parse_data_rate(std::string_view text);
// Durations: s, ms, us (or µs), ns, ps. Returns seconds.
double parse_duration(std::string_view text);
// Rates of events (requests arriving): "2.5/s", "150/min", "9000/h". Returns
// events per second.
double parse_rate(std::string_view text);

// Canonical spellings. Sizes use the largest unit that divides them exactly
// ("48 KiB", "1 KB", "1536 B"); real-valued quantities use the largest unit in
// which they are at least 1, with the shortest digits that read back exactly
// ("1.1 GHz", "1.2 Tbit/s", "1 us").
std::string format_size(Bytes size);
std::string format_frequency(double hz);
std::string format_cycles(Cycles cycles);
std::string format_bits_per_cycle(Bytes per_cycle);   // "32 bit/cycle"
std::string format_bytes_per_cycle(Bytes per_cycle);  // "16 B/cycle"
std::string format_data_rate(double bytes_per_s);     // in bit/s units
std::string format_duration(double seconds);
// Per minute or per hour below one per second when that reads back exactly
// ("30/min"), else per second ("2.5/s").
std::string format_rate(double per_s);

// Power ("23 kW": W, kW, MW) and FLOP rates ("989.4 TFLOPS": FLOPS, GFLOPS,
// TFLOPS, PFLOPS), for the wafer's system power and the GPU presets: an
// explicit unit, no sign; written in the largest unit in which they are at
// least 1, with the shortest digits that read back exactly.
// Silicon area ("0.05 mm^2"; mm^2 or mm2, um^2 or um2): an explicit unit, no
// sign. Returns mm^2; written in mm^2 with the shortest digits that read back.
double parse_area(std::string_view text);
std::string format_area(double mm2);

double parse_power(std::string_view text);      // watts
double parse_flop_rate(std::string_view text);  // FLOP/s
std::string format_power(double watts);
std::string format_flop_rate(double flops);

}  // namespace wafersim::sim
