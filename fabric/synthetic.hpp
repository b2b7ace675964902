// Synthetic network traffic (uniform random, transpose, bit-complement,
// hotspot, nearest neighbour) with Bernoulli injection, and the measurement
// of one point of a latency-throughput curve at either fabric level, as NoC
// simulators report them (warm-up, then a measurement window; latency of the
// packets created in the window, accepted rate of the wavelets delivered in
// it). Deterministic for a seed on any platform (own RNG, integer draws).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/traffic.hpp"
#include "fabric/wavelet.hpp"

namespace wafersim::fabric {

enum class Pattern : std::uint8_t { uniform, transpose, bit_complement, hotspot, neighbor };
const char* pattern_name(
    Pattern p);  // "uniform", "transpose", "bit-complement", "hotspot", "neighbor"
std::optional<Pattern> parse_pattern(std::string_view name);
std::vector<std::string> pattern_names();

struct SyntheticLoad {
  Pattern pattern = Pattern::uniform;
  double rate = 0.1;        // offered wavelets per source node per cycle
  int packet_wavelets = 1;  // wavelets per packet (a message of packet_wavelets * 4 B)
  int colors = 1;           // packets pick a color uniformly from [0, colors)
  std::uint64_t warmup = 1000;
  std::uint64_t measure = 2000;
  // Cycles after the window during which sources keep injecting and measured
  // packets may still arrive; a measured packet not delivered by then marks
  // the point saturated.
  std::uint64_t drain = 4000;
  std::uint64_t seed = 1;
  double hotspot_fraction = 0.2;  // hotspot: share of packets sent to the centre core
};

// Packets as messages ready in [0, warmup + measure + drain). Nodes whose
// pattern destination is themselves (transpose diagonal, bit-complement
// centre) do not inject. Throws std::invalid_argument for transpose on a
// non-square mesh or a rate outside (0, 1].
Traffic synthetic_traffic(const Mesh& mesh, const WaferSpec& spec, const SyntheticLoad& load);
// Nodes that inject under `pattern` on this mesh.
int source_count(const Mesh& mesh, Pattern pattern);

enum class Level : std::uint8_t { flow, wavelet };
const char* level_name(Level l);

struct LoadPoint {
  double offered = 0.0;         // wavelets per source node per cycle
  double latency_cycles = 0.0;  // mean creation-to-tail-arrival of measured packets
  double accepted_rate = 0.0;   // wavelets delivered in the window per source node per cycle
  std::uint64_t measured_packets = 0;
  std::uint64_t delivered_packets = 0;  // of the measured ones
  bool saturated = false;               // some measured packet was not delivered
};

// One point of the latency-throughput curve. `stats` (wavelet level only)
// receives the run's counters.
LoadPoint measure_load(const Mesh& mesh, const WaferSpec& spec, const SyntheticLoad& load,
                       Level level, const WaveletConfig& config = {},
                       WaveletStats* stats = nullptr);

// Uniform random traffic (destinations uniform over the other cores) under XY
// routing on a W x H mesh: the highest rate (wavelets/node/cycle) no link
// exceeds one wavelet per cycle. The busiest links are the ones crossing the
// middle, so this is the bisection bound: for a k x k mesh, 4(k^2-1)/k^3
// (about 4/k). Capped at 1 (the core ramp).
double uniform_random_bound(int width, int height);

}  // namespace wafersim::fabric
