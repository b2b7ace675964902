#include "fabric/synthetic.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace wafersim::fabric {

namespace {

constexpr std::array<const char*, 5> kPatternNames{"uniform", "transpose", "bit-complement",
                                                   "hotspot", "neighbor"};

// splitmix64: small, fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n).
  std::uint32_t below(std::uint32_t n) {
    return static_cast<std::uint32_t>(((next() >> 32) * static_cast<std::uint64_t>(n)) >> 32);
  }

 private:
  std::uint64_t state_;
};

// Probability as a 64-bit threshold: an event happens when next() < threshold.
std::uint64_t threshold(double p) {
  if (p >= 1.0) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(p * 18446744073709551616.0);
}

// The pattern's destination for `src`; src itself when the node does not
// inject.
Coord destination(const Mesh& mesh, Pattern pattern, Coord src, Rng& rng, std::uint64_t hot) {
  const int w = mesh.width(), h = mesh.height();
  const auto n = static_cast<std::uint32_t>(mesh.core_count());
  auto uniform = [&]() {
    if (n == 1) return src;
    std::uint32_t r = rng.below(n - 1);
    if (r >= mesh.id(src).value) ++r;
    return mesh.coord(CoreId{r});
  };
  switch (pattern) {
    case Pattern::uniform:
      return uniform();
    case Pattern::transpose:
      return Coord{src.y, src.x};
    case Pattern::bit_complement:
      return Coord{w - 1 - src.x, h - 1 - src.y};
    case Pattern::hotspot: {
      const Coord centre{w / 2, h / 2};
      if (!(src == centre) && rng.next() < hot) return centre;
      return uniform();
    }
    case Pattern::neighbor: {
      std::array<Coord, 4> options;
      int count = 0;
      for (int d = 0; d < kDirections; ++d) {
        const Coord c = Mesh::step(src, static_cast<Direction>(d));
        if (mesh.contains(c)) options[static_cast<std::size_t>(count++)] = c;
      }
      return count == 0 ? src : options[rng.below(static_cast<std::uint32_t>(count))];
    }
  }
  return src;
}

bool injects(const Mesh& mesh, Pattern pattern, Coord c) {
  if (pattern == Pattern::transpose) return c.x != c.y;
  if (pattern == Pattern::bit_complement)
    return !(c == Coord{mesh.width() - 1 - c.x, mesh.height() - 1 - c.y});
  return mesh.core_count() > 1;
}

}  // namespace

const char* pattern_name(Pattern p) {
  return kPatternNames[static_cast<std::size_t>(p)];
}

std::optional<Pattern> parse_pattern(std::string_view name) {
  for (std::size_t i = 0; i < kPatternNames.size(); ++i)
    if (name == kPatternNames[i]) return static_cast<Pattern>(i);
  return std::nullopt;
}

std::vector<std::string> pattern_names() {
  return {kPatternNames.begin(), kPatternNames.end()};
}

const char* level_name(Level l) {
  return l == Level::flow ? "flow" : "wavelet";
}

int source_count(const Mesh& mesh, Pattern pattern) {
  int count = 0;
  for (int y = 0; y < mesh.height(); ++y)
    for (int x = 0; x < mesh.width(); ++x) count += injects(mesh, pattern, Coord{x, y}) ? 1 : 0;
  return count;
}

Traffic synthetic_traffic(const Mesh& mesh, const WaferSpec& spec, const SyntheticLoad& load) {
  if (!(load.rate > 0.0 && load.rate <= 1.0))
    throw std::invalid_argument("injection rate must be in (0, 1] wavelets per node per cycle");
  if (load.pattern == Pattern::transpose && mesh.width() != mesh.height())
    throw std::invalid_argument("transpose needs a square mesh");
  if (load.packet_wavelets < 1) throw std::invalid_argument("a packet has at least 1 wavelet");
  if (load.colors < 1 || load.colors > 255) throw std::invalid_argument("colors must be 1-255");
  Rng rng(load.seed);
  const std::uint64_t packet_p = threshold(load.rate / load.packet_wavelets);
  const std::uint64_t hot = threshold(load.hotspot_fraction);
  const Bytes bytes = spec.link_bytes_per_cycle * static_cast<std::uint64_t>(load.packet_wavelets);
  const std::uint64_t horizon = load.warmup + load.measure + load.drain;
  std::vector<std::uint8_t> source(mesh.core_count());
  for (std::size_t i = 0; i < source.size(); ++i)
    source[i] = injects(mesh, load.pattern, mesh.coord(CoreId{static_cast<std::uint32_t>(i)}));
  Traffic traffic;
  for (std::uint64_t t = 0; t < horizon; ++t)
    for (std::uint32_t i = 0; i < source.size(); ++i) {
      if (!source[i] || rng.next() >= packet_p) continue;
      const Coord src = mesh.coord(CoreId{i});
      const Coord dst = destination(mesh, load.pattern, src, rng, hot);
      if (dst == src) continue;
      const auto color = static_cast<std::uint8_t>(
          load.colors > 1 ? rng.below(static_cast<std::uint32_t>(load.colors)) : 0u);
      traffic.unicast(src, dst, bytes, Cycles{t}, color);
    }
  return traffic;
}

LoadPoint measure_load(const Mesh& mesh, const WaferSpec& spec, const SyntheticLoad& load,
                       Level level, const WaveletConfig& config, WaveletStats* stats) {
  const Traffic traffic = synthetic_traffic(mesh, spec, load);
  const std::uint64_t begin = load.warmup, end = load.warmup + load.measure;
  const std::uint64_t horizon = end + load.drain;
  TrafficResult result;
  std::uint64_t delivered_in_window = 0;
  if (level == Level::wavelet) {
    WaveletConfig c = config;
    c.max_cycles = std::min(c.max_cycles, horizon);
    WaveletStats local;
    WaveletStats& s = stats ? *stats : local;
    result = run_wavelet(mesh, spec, traffic, c, &s);
    for (std::uint64_t t = begin; t < end && t < s.ejected_per_cycle.size(); ++t)
      delivered_in_window += s.ejected_per_cycle[t];
  } else {
    result = run_flow(mesh, spec, traffic);
    // Wavelet i of a message is delivered in cycle tail - ser + i (it has
    // arrived one cycle later), as the wavelet level counts ejections.
    const auto& ms = traffic.messages();
    for (std::uint32_t m = 0; m < ms.size(); ++m) {
      const std::uint64_t tail = result.arrival[result.first_receiver[m]];
      const std::uint64_t ser = ceil_div(ms[m].bytes.value, spec.link_bytes_per_cycle.value);
      const std::uint64_t lo = std::max(tail - ser, begin), hi = std::min(tail, end);
      if (hi > lo) delivered_in_window += hi - lo;
    }
  }
  LoadPoint p;
  p.offered = load.rate;
  double latency_sum = 0.0;
  const auto& ms = traffic.messages();
  for (std::uint32_t m = 0; m < ms.size(); ++m) {
    const std::uint64_t ready = ms[m].ready.value;
    if (ready < begin || ready >= end) continue;
    ++p.measured_packets;
    const std::uint64_t arrival = result.arrival[result.first_receiver[m]];
    if (arrival == kNever || arrival > horizon) continue;
    ++p.delivered_packets;
    latency_sum += static_cast<double>(arrival - ready);
  }
  p.saturated = p.delivered_packets < p.measured_packets;
  p.latency_cycles =
      p.delivered_packets ? latency_sum / static_cast<double>(p.delivered_packets) : 0.0;
  const int sources = source_count(mesh, load.pattern);
  p.accepted_rate = sources ? static_cast<double>(delivered_in_window) /
                                  (static_cast<double>(sources) * static_cast<double>(load.measure))
                            : 0.0;
  return p;
}

double uniform_random_bound(int width, int height) {
  const double n = static_cast<double>(width) * height;
  if (n <= 1) return 1.0;
  double worst = 0.0;  // highest load per unit rate on any link
  // X links: a link between columns x and x+1 of row y carries the row's
  // sources at columns <= x sending to any core in columns > x.
  for (int x = 0; x + 1 < width; ++x)
    worst = std::max(worst, (x + 1.0) * (width - x - 1.0) * height / (n - 1));
  // Y links (after the turn): sources anywhere in rows <= y of any column
  // sending to the link's column below row y.
  for (int y = 0; y + 1 < height; ++y)
    worst = std::max(worst, (y + 1.0) * (height - y - 1.0) * width / (n - 1));
  return std::min(1.0, 1.0 / worst);
}

}  // namespace wafersim::fabric
