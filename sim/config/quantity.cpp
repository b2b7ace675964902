#include "sim/config/quantity.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace wafersim::sim {

namespace {

// ---------------------------------------------------------------------------
// Unit tables. Each kind of quantity has a fixed list of spellings; the error
// messages list exactly these.

struct IntegerUnit {
  std::string_view name;
  std::uint64_t multiplier;  // base units (bytes, cycles) per unit
};

struct RealUnit {
  std::string_view name;
  int exp10;  // the unit is 10^exp10 base units (hertz, seconds, bits/s ...)
};

constexpr std::uint64_t kKi = 1024;
constexpr std::uint64_t kK = 1000;

// Ordered from largest to smallest: format_size() picks the first that divides.
constexpr std::array<IntegerUnit, 10> kSizeUnits{{
    {"TiB", kKi* kKi* kKi* kKi},
    {"TB", kK* kK* kK* kK},
    {"GiB", kKi* kKi* kKi},
    {"GB", kK* kK* kK},
    {"MiB", kKi* kKi},
    {"MB", kK* kK},
    {"KiB", kKi},
    {"KB", kK},
    {"kB", kK},  // SI spelling of the same unit; KB is the canonical one
    {"B", 1},
}};

constexpr std::array<IntegerUnit, 2> kCycleUnits{{{"cycle", 1}, {"cycles", 1}}};

// Bandwidth per cycle, counted in bits so that "32 bit/cycle" and "4 B/cycle"
// share one path; the result must be a whole number of bytes.
constexpr std::array<IntegerUnit, 2> kPerCycleUnits{{{"bit/cycle", 1}, {"B/cycle", 8}}};

constexpr std::array<RealUnit, 4> kFrequencyUnits{{{"GHz", 9}, {"MHz", 6}, {"kHz", 3}, {"Hz", 0}}};

// Data rates are counted in bits per second; bytes are 8 bits.
constexpr std::array<RealUnit, 5> kBitRateUnits{
    {{"Tbit/s", 12}, {"Gbit/s", 9}, {"Mbit/s", 6}, {"kbit/s", 3}, {"bit/s", 0}}};
constexpr std::array<RealUnit, 6> kByteRateUnits{
    {{"TB/s", 12}, {"GB/s", 9}, {"MB/s", 6}, {"KB/s", 3}, {"kB/s", 3}, {"B/s", 0}}};

// Event rates: per second, minute or hour (the unit's length in seconds).
struct RateUnit {
  std::string_view name;
  double seconds;
};
constexpr std::array<RateUnit, 3> kRateUnits{{{"/s", 1.0}, {"/min", 60.0}, {"/h", 3600.0}}};

constexpr std::array<RealUnit, 6> kDurationUnits{
    {{"s", 0}, {"ms", -3}, {"us", -6}, {"\xC2\xB5s", -6}, {"ns", -9}, {"ps", -12}}};

// What a kind of quantity looks like, for error messages.
struct Kind {
  std::string_view example;  // e.g. "48 KiB"
  std::vector<std::string_view> units;
};

template <class Table>
std::vector<std::string_view> names_of(const Table& table) {
  std::vector<std::string_view> out;
  for (const auto& u : table) out.push_back(u.name);
  return out;
}

std::string accepted(const Kind& kind) {
  std::string out = "accepted units: ";
  for (std::size_t i = 0; i < kind.units.size(); ++i) {
    if (i > 0) out += ", ";
    out += kind.units[i];
  }
  return out;
}

// ---------------------------------------------------------------------------
// Numbers are read as exact decimals (digits × 10^exp10) so that unit
// multipliers are applied without rounding: "1.1 GHz" becomes the double
// nearest to 1.1e9, "1.5 KiB" exactly 1536 bytes.

struct Decimal {
  bool negative = false;
  std::string digits;  // at least one digit
  long exp10 = 0;      // value = digits × 10^exp10
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Reads "[+-]digits[.digits][(e|E)[+-]digits]" from the start of `s`.
// Returns the number of characters consumed, 0 when `s` does not start with a number.
std::size_t read_decimal(std::string_view s, Decimal& out) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    out.negative = s[i] == '-';
    ++i;
  }
  const std::size_t int_start = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  std::string digits(s.substr(int_start, i - int_start));
  if (i < s.size() && s[i] == '.') {
    std::size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j;
    const std::string_view fraction = s.substr(i + 1, j - i - 1);
    digits += fraction;
    out.exp10 = -static_cast<long>(fraction.size());
    i = j;
  }
  if (digits.empty()) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    bool negative_exponent = false;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) {
      negative_exponent = s[j] == '-';
      ++j;
    }
    const std::size_t exp_start = j;
    while (j < s.size() && is_digit(s[j])) ++j;
    if (j > exp_start) {  // otherwise the 'e' belongs to the unit
      long exponent = 0;
      for (std::size_t k = exp_start; k < j; ++k) {
        exponent = std::min(exponent * 10 + (s[k] - '0'), 100000L);  // far beyond any range
      }
      out.exp10 += negative_exponent ? -exponent : exponent;
      i = j;
    }
  }
  out.digits = std::move(digits);
  return i;
}

bool is_zero(const Decimal& d) {
  return d.digits.find_first_not_of('0') == std::string::npos;
}

struct Split {
  Decimal number;
  std::string_view unit;
};

// Splits "<number> <unit>" and rejects the cases every kind shares: empty,
// no number, no unit, negative.
Split split(std::string_view text, const Kind& kind) {
  const std::string_view t = trim(text);
  if (t.empty()) {
    throw QuantityError(fmt::format("needs a value, e.g. {}; {}", kind.example, accepted(kind)));
  }
  Split out;
  const std::size_t n = read_decimal(t, out.number);
  if (n == 0) {
    throw QuantityError(fmt::format("must start with a number, e.g. {}, not '{}'; {}", kind.example,
                                    t, accepted(kind)));
  }
  out.unit = trim(t.substr(n));
  if (out.unit.empty()) {
    throw QuantityError(fmt::format("needs a unit, e.g. {}; {}", kind.example, accepted(kind)));
  }
  if (out.number.negative && !is_zero(out.number)) {
    throw QuantityError(fmt::format("cannot be negative ('{}'); e.g. {}", t, kind.example));
  }
  return out;
}

[[noreturn]] void unknown_unit(std::string_view text, std::string_view unit, const Kind& kind) {
  throw QuantityError(
      fmt::format("has an unknown unit '{}' in '{}'; {}", unit, trim(text), accepted(kind)));
}

using u128 = unsigned __int128;
constexpr u128 kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr u128 kWorkLimit = static_cast<u128>(1) << 120;  // headroom below 2^128

enum class Exactness { whole, fraction, overflow };

// digits × multiplier × 10^exp10 as an exact unsigned integer.
Exactness to_integer(const Decimal& d, std::uint64_t multiplier, std::uint64_t& out) {
  u128 n = 0;
  for (char c : d.digits) {
    if (n > (kWorkLimit - 9) / 10) return Exactness::overflow;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  if (n != 0 && n > kWorkLimit / multiplier) return Exactness::overflow;
  n *= multiplier;
  for (long e = d.exp10; e > 0 && n != 0; --e) {
    if (n > kWorkLimit / 10) return Exactness::overflow;
    n *= 10;
  }
  for (long e = d.exp10; e < 0 && n != 0; ++e) {
    if (n % 10 != 0) return Exactness::fraction;
    n /= 10;
  }
  if (n > kU64Max) return Exactness::overflow;
  out = static_cast<std::uint64_t>(n);
  return Exactness::whole;
}

// digits × 10^(exp10 + unit_exp10), correctly rounded to a double.
double to_real(const Decimal& d, int unit_exp10, std::string_view text) {
  const std::string s = d.digits + "e" + std::to_string(d.exp10 + unit_exp10);
  double v = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (is_zero(d)) return 0.0;
  if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v) || v == 0.0) {
    throw QuantityError(fmt::format("is out of range ('{}')", trim(text)));
  }
  return v;
}

template <class Table>
std::uint64_t parse_integer(std::string_view text, const Table& table, const Kind& kind,
                            std::string_view whole_what) {
  const Split s = split(text, kind);
  for (const auto& u : table) {
    if (u.name != s.unit) continue;
    std::uint64_t value = 0;
    switch (to_integer(s.number, u.multiplier, value)) {
      case Exactness::whole:
        return value;
      case Exactness::fraction:
        throw QuantityError(fmt::format("must be a whole number of {}, not '{}'; e.g. {}",
                                        whole_what, trim(text), kind.example));
      case Exactness::overflow:
        throw QuantityError(fmt::format("is too large ('{}')", trim(text)));
    }
  }
  unknown_unit(text, s.unit, kind);
}

template <class Table>
double parse_real(std::string_view text, const Table& table, const Kind& kind) {
  const Split s = split(text, kind);
  for (const auto& u : table) {
    if (u.name == s.unit) return to_real(s.number, u.exp10, text);
  }
  unknown_unit(text, s.unit, kind);
}

// ---------------------------------------------------------------------------
// Formatting.

// The shortest decimal that reads back as `v`: v = d0.d1d2... × 10^exp10.
struct Shortest {
  bool negative = false;
  std::string digits;
  int exp10 = 0;
};

Shortest shortest(double v) {
  std::array<char, 64> buf{};
  const auto r =
      std::to_chars(buf.data(), buf.data() + buf.size(), v, std::chars_format::scientific);
  const std::string_view s(buf.data(), static_cast<std::size_t>(r.ptr - buf.data()));
  Shortest out;
  std::size_t i = 0;
  if (i < s.size() && s[i] == '-') {
    out.negative = true;
    ++i;
  }
  for (; i < s.size() && s[i] != 'e'; ++i) {
    if (s[i] != '.') out.digits += s[i];
  }
  if (i < s.size()) {
    const std::string_view e = s.substr(i + 1);
    int exponent = 0;
    std::from_chars(e.data() + (e.front() == '+' ? 1 : 0), e.data() + e.size(), exponent);
    out.exp10 = exponent;
  }
  return out;
}

// The decimal digits of `s` divided by 10^unit_exp10, e.g. (11, 9) in GHz -> "1.1".
std::string in_unit(const Shortest& s, int unit_exp10) {
  const int n = static_cast<int>(s.digits.size());
  const int q = s.exp10 - (n - 1) - unit_exp10;
  std::string out;
  if (q >= 0) {
    out = s.digits + std::string(static_cast<std::size_t>(q), '0');
  } else if (n + q > 0) {
    out = s.digits.substr(0, static_cast<std::size_t>(n + q)) + "." +
          s.digits.substr(static_cast<std::size_t>(n + q));
  } else {
    out = "0." + std::string(static_cast<std::size_t>(-(n + q)), '0') + s.digits;
  }
  return (s.negative ? "-" : "") + out;
}

// Largest unit in which |v| is at least 1 (the smallest unit for tiny values,
// the base unit for zero). `table` is ordered from largest to smallest.
template <class Table>
std::string format_real(double v, const Table& table) {
  const Shortest s = shortest(v);
  const bool zero = s.digits.find_first_not_of('0') == std::string::npos;
  const RealUnit* chosen = &table.back();
  for (const auto& u : table) {
    if (zero ? u.exp10 == 0 : s.exp10 >= u.exp10) {
      chosen = &u;
      break;
    }
  }
  if (zero) return fmt::format("0 {}", chosen->name);
  return fmt::format("{} {}", in_unit(s, chosen->exp10), chosen->name);
}

const Kind& size_kind() {
  static const Kind k{"48 KiB", names_of(kSizeUnits)};
  return k;
}
const Kind& frequency_kind() {
  static const Kind k{"1.1 GHz", names_of(kFrequencyUnits)};
  return k;
}
const Kind& cycles_kind() {
  static const Kind k{"20 cycles", names_of(kCycleUnits)};
  return k;
}
const Kind& per_cycle_kind() {
  static const Kind k{"32 bit/cycle", names_of(kPerCycleUnits)};
  return k;
}
const Kind& data_rate_kind() {
  static const Kind k = [] {
    Kind kind{"1200 Gbit/s", names_of(kBitRateUnits)};
    for (auto name : names_of(kByteRateUnits)) kind.units.push_back(name);
    return kind;
  }();
  return k;
}
const Kind& rate_kind() {
  static const Kind k{"2.5/s", names_of(kRateUnits)};
  return k;
}
const Kind& duration_kind() {
  static const Kind k{"1 us", names_of(kDurationUnits)};
  return k;
}

}  // namespace

Bytes parse_size(std::string_view text) {
  return Bytes{parse_integer(text, kSizeUnits, size_kind(), "bytes")};
}

double parse_frequency(std::string_view text) {
  return parse_real(text, kFrequencyUnits, frequency_kind());
}

Cycles parse_cycles(std::string_view text) {
  return Cycles{parse_integer(text, kCycleUnits, cycles_kind(), "cycles")};
}

Bytes parse_bytes_per_cycle(std::string_view text) {
  const std::uint64_t bits =
      parse_integer(text, kPerCycleUnits, per_cycle_kind(), "bits per cycle");
  if (bits % 8 != 0) {
    throw QuantityError(fmt::format(
        "must be a whole number of bytes per cycle, but '{}' is {} bits; e.g. 32 bit/cycle",
        trim(text), bits));
  }
  return Bytes{bits / 8};
}

double parse_data_rate(std::string_view text) {
  const Split s = split(text, data_rate_kind());
  for (const auto& u : kBitRateUnits) {
    // Dividing by 8 is exact in binary floating point.
    if (u.name == s.unit) return to_real(s.number, u.exp10, text) / 8.0;
  }
  for (const auto& u : kByteRateUnits) {
    if (u.name == s.unit) return to_real(s.number, u.exp10, text);
  }
  unknown_unit(text, s.unit, data_rate_kind());
}

double parse_duration(std::string_view text) {
  return parse_real(text, kDurationUnits, duration_kind());
}

double parse_rate(std::string_view text) {
  const Split s = split(text, rate_kind());
  for (const auto& u : kRateUnits) {
    if (u.name == s.unit) return to_real(s.number, 0, text) / u.seconds;
  }
  unknown_unit(text, s.unit, rate_kind());
}

std::string format_size(Bytes size) {
  if (size.value == 0) return "0 B";
  for (const auto& u : kSizeUnits) {
    if (u.name == "kB") continue;  // KB is the canonical spelling
    if (size.value % u.multiplier == 0)
      return fmt::format("{} {}", size.value / u.multiplier, u.name);
  }
  return fmt::format("{} B", size.value);  // unreachable: B divides everything
}

std::string format_frequency(double hz) {
  return format_real(hz, kFrequencyUnits);
}

std::string format_cycles(Cycles cycles) {
  return fmt::format("{} {}", cycles.value, cycles.value == 1 ? "cycle" : "cycles");
}

std::string format_bits_per_cycle(Bytes per_cycle) {
  return fmt::format("{} bit/cycle", per_cycle.value * 8);
}

std::string format_bytes_per_cycle(Bytes per_cycle) {
  return fmt::format("{} B/cycle", per_cycle.value);
}

std::string format_data_rate(double bytes_per_s) {
  return format_real(bytes_per_s * 8.0, kBitRateUnits);
}

std::string format_rate(double per_s) {
  const std::string per_second = in_unit(shortest(per_s), 0) + "/s";
  if (per_s >= 1.0 || per_s <= 0.0 || !std::isfinite(per_s)) return per_second;
  const RateUnit& u = per_s * 60.0 >= 1.0 ? kRateUnits[1] : kRateUnits[2];
  const std::string slower = in_unit(shortest(per_s * u.seconds), 0) + std::string(u.name);
  return parse_rate(slower) == per_s ? slower : per_second;
}

std::string format_duration(double seconds) {
  // "µs" reads the same as "us"; the canonical spelling is plain ASCII.
  static constexpr std::array<RealUnit, 5> kCanonical{
      {{"s", 0}, {"ms", -3}, {"us", -6}, {"ns", -9}, {"ps", -12}}};
  return format_real(seconds, kCanonical);
}

// ---------------------------------------------------------------------------
// Power and FLOP rates: scaled units with a real-valued number.

namespace {

struct ScaledUnit {
  std::string_view name;
  double scale;
};

double parse_scaled(std::string_view text, std::span<const ScaledUnit> units,
                    std::string_view example) {
  std::string accepted;
  for (const ScaledUnit& u : units)
    accepted += (accepted.empty() ? "" : ", ") + std::string(u.name);
  std::size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  double value = 0.0;
  const auto r = std::from_chars(text.data() + i, text.data() + text.size(), value);
  if (r.ec != std::errc{} || !std::isfinite(value)) {
    throw QuantityError(
        fmt::format("expects a number and a unit, e.g. {}; accepted units: {}", example, accepted));
  }
  if (value < 0.0) throw QuantityError(fmt::format("cannot be negative, e.g. {}", example));
  std::string_view unit(r.ptr, static_cast<std::size_t>(text.data() + text.size() - r.ptr));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  while (!unit.empty() && unit.back() == ' ') unit.remove_suffix(1);
  if (unit.empty()) {
    throw QuantityError(
        fmt::format("needs a unit, e.g. {}; accepted units: {}", example, accepted));
  }
  for (const ScaledUnit& u : units) {
    if (u.name == unit) return value * u.scale;
  }
  throw QuantityError(fmt::format("has an unknown unit '{}'; accepted units: {}", unit, accepted));
}

// The largest unit in which the value is at least 1, with the shortest digits
// that read back exactly; the base unit when no scaled spelling does.
std::string format_scaled(double v, std::span<const ScaledUnit> units) {
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    if (v < it->scale && it + 1 != units.rend()) continue;
    std::array<char, 64> buf{};
    const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v / it->scale);
    const std::string text = std::string(buf.data(), r.ptr) + " " + std::string(it->name);
    if (parse_scaled(text, units, "") == v) return text;
  }
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr) + " " + std::string(units.front().name);
}

// Units in increasing scale: the first is the base unit.
constexpr std::array<ScaledUnit, 3> kPowerUnits{{{"W", 1.0}, {"kW", 1e3}, {"MW", 1e6}}};
constexpr std::array<ScaledUnit, 4> kFlopUnits{
    {{"FLOPS", 1.0}, {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15}}};

}  // namespace

double parse_area(std::string_view text) {
  static constexpr std::array<ScaledUnit, 4> kAreaUnits{
      {{"mm^2", 1.0}, {"mm2", 1.0}, {"um^2", 1e-6}, {"um2", 1e-6}}};
  return parse_scaled(text, kAreaUnits, "0.05 mm^2");
}
std::string format_area(double mm2) {
  std::array<char, 64> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), mm2);
  return std::string(buf.data(), r.ptr) + " mm^2";
}

double parse_power(std::string_view text) {
  return parse_scaled(text, kPowerUnits, "23 kW");
}
double parse_flop_rate(std::string_view text) {
  return parse_scaled(text, kFlopUnits, "989.4 TFLOPS");
}
std::string format_power(double w) {
  return format_scaled(w, kPowerUnits);
}
std::string format_flop_rate(double f) {
  return format_scaled(f, kFlopUnits);
}

}  // namespace wafersim::sim
