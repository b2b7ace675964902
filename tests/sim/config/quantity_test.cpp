// Unit strings: parsing, rejection with useful messages, canonical formatting
// and exact round trips.
#include "sim/config/quantity.hpp"

#include <gtest/gtest.h>

#include <string>

namespace wafersim::sim {
namespace {

// The message of the QuantityError that `parse(text)` throws, or "" when it parses.
template <class Parse>
std::string error_of(Parse parse, const std::string& text) {
  try {
    parse(text);
  } catch (const QuantityError& e) {
    return e.what();
  }
  return "";
}

TEST(QuantitySize, BinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size("48 KiB").value, 49152u);
  EXPECT_EQ(parse_size("48KiB").value, 49152u);
  EXPECT_EQ(parse_size("  48   KiB ").value, 49152u);
  EXPECT_EQ(parse_size("1 MiB").value, 1048576u);
  EXPECT_EQ(parse_size("2 GiB").value, 2147483648u);
  EXPECT_EQ(parse_size("1 TiB").value, 1099511627776u);
  EXPECT_EQ(parse_size("4 B").value, 4u);
  EXPECT_EQ(parse_size("1 KB").value, 1000u);
  EXPECT_EQ(parse_size("1 kB").value, 1000u);
  EXPECT_EQ(parse_size("44 GB").value, 44000000000u);
  EXPECT_EQ(parse_size("1.5 KiB").value, 1536u);
  EXPECT_EQ(parse_size("0.5 KB").value, 500u);
  EXPECT_EQ(parse_size("4.8e1 KiB").value, 49152u);
  EXPECT_EQ(parse_size("0 B").value, 0u);
}

TEST(QuantitySize, BareNumberNeedsAUnit) {
  const std::string msg = error_of(parse_size, "48");
  EXPECT_NE(msg.find("needs a unit, e.g. 48 KiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("accepted units: TiB, TB, GiB, GB, MiB, MB, KiB, KB, kB, B"),
            std::string::npos)
      << msg;
}

TEST(QuantitySize, RejectsBadStrings) {
  EXPECT_NE(error_of(parse_size, "48 kib").find("unknown unit 'kib'"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "48 KiB/cycle").find("unknown unit"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "-4 KiB").find("cannot be negative"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "0.5 B").find("whole number of bytes"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "1.0001 KiB").find("whole number of bytes"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "KiB").find("must start with a number"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "").find("needs a value"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "lots").find("must start with a number"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "20000000 TiB").find("too large"), std::string::npos);
  EXPECT_NE(error_of(parse_size, "1e30 B").find("too large"), std::string::npos);
}

TEST(QuantityFrequency, Units) {
  EXPECT_DOUBLE_EQ(parse_frequency("1.1 GHz"), 1.1e9);
  EXPECT_DOUBLE_EQ(parse_frequency("850 MHz"), 850e6);
  EXPECT_DOUBLE_EQ(parse_frequency("850MHz"), 850e6);
  EXPECT_DOUBLE_EQ(parse_frequency("10 kHz"), 1e4);
  EXPECT_DOUBLE_EQ(parse_frequency("5 Hz"), 5.0);
  // Exact decimal scaling: the same double as the literal.
  EXPECT_EQ(parse_frequency("0.9 GHz"), 0.9e9);
  EXPECT_EQ(parse_frequency("1.1 GHz"), 1.1e9);
}

TEST(QuantityFrequency, Rejects) {
  EXPECT_NE(error_of(parse_frequency, "1.1").find("needs a unit, e.g. 1.1 GHz"), std::string::npos);
  EXPECT_NE(error_of(parse_frequency, "1.1 ghz").find("accepted units: GHz, MHz, kHz, Hz"),
            std::string::npos);
  EXPECT_NE(error_of(parse_frequency, "-1 GHz").find("cannot be negative"), std::string::npos);
  EXPECT_NE(error_of(parse_frequency, "1e400 GHz").find("out of range"), std::string::npos);
}

TEST(QuantityCycles, Units) {
  EXPECT_EQ(parse_cycles("1 cycle").value, 1u);
  EXPECT_EQ(parse_cycles("20 cycles").value, 20u);
  EXPECT_EQ(parse_cycles("0 cycles").value, 0u);
  EXPECT_NE(error_of(parse_cycles, "20").find("needs a unit, e.g. 20 cycles"), std::string::npos);
  EXPECT_NE(error_of(parse_cycles, "1.5 cycles").find("whole number of cycles"), std::string::npos);
  EXPECT_NE(error_of(parse_cycles, "20 cyc").find("accepted units: cycle, cycles"),
            std::string::npos);
}

TEST(QuantityPerCycle, BitsAndBytes) {
  EXPECT_EQ(parse_bytes_per_cycle("32 bit/cycle").value, 4u);
  EXPECT_EQ(parse_bytes_per_cycle("4 B/cycle").value, 4u);
  EXPECT_EQ(parse_bytes_per_cycle("16 B/cycle").value, 16u);
  EXPECT_EQ(parse_bytes_per_cycle("128bit/cycle").value, 16u);
  const std::string odd = error_of(parse_bytes_per_cycle, "12 bit/cycle");
  EXPECT_NE(odd.find("whole number of bytes per cycle"), std::string::npos) << odd;
  EXPECT_NE(odd.find("12 bits"), std::string::npos) << odd;
  EXPECT_NE(error_of(parse_bytes_per_cycle, "32").find("needs a unit, e.g. 32 bit/cycle"),
            std::string::npos);
  EXPECT_NE(error_of(parse_bytes_per_cycle, "32 bit/s").find("unknown unit 'bit/s'"),
            std::string::npos);
}

TEST(QuantityDataRate, BitsAndBytesPerSecond) {
  EXPECT_DOUBLE_EQ(parse_data_rate("1200 Gbit/s"), 150e9);
  EXPECT_DOUBLE_EQ(parse_data_rate("1.2 Tbit/s"), 150e9);
  EXPECT_DOUBLE_EQ(parse_data_rate("150 GB/s"), 150e9);
  EXPECT_DOUBLE_EQ(parse_data_rate("100 Mbit/s"), 12.5e6);
  EXPECT_DOUBLE_EQ(parse_data_rate("8 bit/s"), 1.0);
  EXPECT_DOUBLE_EQ(parse_data_rate("3 kB/s"), 3000.0);
  EXPECT_NE(error_of(parse_data_rate, "1200 Gbps").find("unknown unit 'Gbps'"), std::string::npos);
  EXPECT_NE(error_of(parse_data_rate, "1200").find("needs a unit, e.g. 1200 Gbit/s"),
            std::string::npos);
}

TEST(QuantityDuration, Units) {
  EXPECT_DOUBLE_EQ(parse_duration("1 us"), 1e-6);
  EXPECT_DOUBLE_EQ(parse_duration("1 \xC2\xB5s"), 1e-6);
  EXPECT_DOUBLE_EQ(parse_duration("500 ns"), 500e-9);
  EXPECT_DOUBLE_EQ(parse_duration("2 ms"), 2e-3);
  EXPECT_DOUBLE_EQ(parse_duration("1 s"), 1.0);
  EXPECT_NE(error_of(parse_duration, "1").find("needs a unit, e.g. 1 us"), std::string::npos);
  EXPECT_NE(error_of(parse_duration, "1 sec").find("accepted units: s, ms, us"), std::string::npos);
}

TEST(QuantityFormat, CanonicalSpellings) {
  EXPECT_EQ(format_size(Bytes{49152}), "48 KiB");
  EXPECT_EQ(format_size(Bytes{1000}), "1 KB");
  EXPECT_EQ(format_size(Bytes{1536}), "1536 B");
  EXPECT_EQ(format_size(Bytes{1048576}), "1 MiB");
  EXPECT_EQ(format_size(Bytes{0}), "0 B");
  EXPECT_EQ(format_frequency(1.1e9), "1.1 GHz");
  EXPECT_EQ(format_frequency(850e6), "850 MHz");
  EXPECT_EQ(format_frequency(0.0), "0 Hz");
  EXPECT_EQ(format_cycles(Cycles{1}), "1 cycle");
  EXPECT_EQ(format_cycles(Cycles{20}), "20 cycles");
  EXPECT_EQ(format_bits_per_cycle(Bytes{4}), "32 bit/cycle");
  EXPECT_EQ(format_bytes_per_cycle(Bytes{16}), "16 B/cycle");
  EXPECT_EQ(format_data_rate(150e9), "1.2 Tbit/s");
  EXPECT_EQ(format_data_rate(12.5e6), "100 Mbit/s");
  EXPECT_EQ(format_duration(1e-6), "1 us");
  EXPECT_EQ(format_duration(500e-9), "500 ns");
  EXPECT_EQ(format_duration(2.5e-3), "2.5 ms");
  EXPECT_EQ(format_duration(0.0), "0 s");
}

TEST(QuantityFormat, RoundTripsExactly) {
  for (std::uint64_t b : {1ull, 7ull, 1000ull, 1536ull, 49152ull, 44000000000ull, 1ull << 40}) {
    EXPECT_EQ(parse_size(format_size(Bytes{b})).value, b) << format_size(Bytes{b});
  }
  for (double hz : {1.1e9, 0.9e9, 850e6, 1.0, 123456789.123, 3.3333333333e9}) {
    EXPECT_EQ(parse_frequency(format_frequency(hz)), hz) << format_frequency(hz);
  }
  for (double rate : {150e9, 12.5e6, 1.0, 0.125, 1.0 / 3.0 * 1e11}) {
    EXPECT_EQ(parse_data_rate(format_data_rate(rate)), rate) << format_data_rate(rate);
  }
  for (double s : {1e-6, 500e-9, 2.5e-3, 1.0, 7.0 / 3.0 * 1e-7, 1e-15}) {
    EXPECT_EQ(parse_duration(format_duration(s)), s) << format_duration(s);
  }
  for (std::uint64_t c : {0ull, 1ull, 20ull}) {
    EXPECT_EQ(parse_cycles(format_cycles(Cycles{c})).value, c);
  }
  for (std::uint64_t b : {1ull, 4ull, 16ull}) {
    EXPECT_EQ(parse_bytes_per_cycle(format_bits_per_cycle(Bytes{b})).value, b);
    EXPECT_EQ(parse_bytes_per_cycle(format_bytes_per_cycle(Bytes{b})).value, b);
  }
}

}  // namespace
}  // namespace wafersim::sim
