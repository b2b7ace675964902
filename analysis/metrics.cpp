#include "analysis/metrics.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace wafersim::analysis {

std::string_view category_key(Resource c) {
  switch (c) {
    case Resource::compute:
      return "compute";
    case Resource::sram:
      return "sram";
    case Resource::hops:
      return "hops";
    case Resource::serialization:
      return "serialization";
    case Resource::contention:
      return "contention";
    case Resource::io:
      return "io";
    case Resource::queueing:
      return "queueing";
  }
  throw std::logic_error("unknown critical-path category");
}

std::string_view resource_name(Resource c) {
  switch (c) {
    case Resource::compute:
      return "core compute";
    case Resource::sram:
      return "SRAM bandwidth";
    case Resource::hops:
      return "mesh hop latency";
    case Resource::serialization:
      return "mesh link bandwidth";
    case Resource::contention:
      return "mesh link contention";
    case Resource::io:
      return "wafer I/O";
    case Resource::queueing:
      return "core queueing";
  }
  throw std::logic_error("unknown critical-path category");
}

Cycles cycles_in(const CycleBreakdown& b, Resource c) {
  return b[c];
}

std::string_view direction_name(int dir) {
  static constexpr std::array<std::string_view, kLinkDirections> kNames = {"E", "W", "S", "N"};
  if (dir < 0 || dir >= kLinkDirections) throw std::logic_error("link direction out of range");
  return kNames[static_cast<std::size_t>(dir)];
}

namespace {

// A per-core (or per-link) array is either absent (empty: nothing recorded)
// or shaped exactly like the mesh.
void check_shape(const std::vector<std::uint64_t>& v, std::uint64_t expected, const char* name) {
  if (!v.empty() && v.size() != expected) {
    throw std::logic_error(std::string("RunResult::") + name + " has " + std::to_string(v.size()) +
                           " entries, the mesh needs " + std::to_string(expected));
  }
}

double as_double(Cycles c) {
  return static_cast<double>(c.value);
}

void derive_timing(const RunResult& r, Metrics& m) {
  m.cycles_per_token = r.decode_cycles_per_token;
  if (r.clock_hz <= 0.0) return;  // no clock, no seconds
  const double clock = r.clock_hz;
  if (r.decode_cycles_per_token > Cycles{0}) {
    m.decode_tokens_per_s_per_user = clock / as_double(r.decode_cycles_per_token);
    m.inter_token_latency_s = as_double(r.decode_cycles_per_token) / clock;
  }
  for (Cycles c : r.user_decode_cycles_per_token)
    if (c > Cycles{0}) m.aggregate_tokens_per_s += clock / as_double(c);
  if (r.user_decode_cycles_per_token.empty())
    m.aggregate_tokens_per_s = m.decode_tokens_per_s_per_user;
  m.ttft_s = as_double(r.ttft_cycles) / clock;
  m.prefill_s = as_double(r.prefill_cycles) / clock;
  m.total_time_s = as_double(r.total_cycles) / clock;
}

void derive_cores(const RunResult& r, Metrics& m) {
  check_shape(r.core_busy_cycles, m.cores_total, "core_busy_cycles");
  check_shape(r.core_sram_bytes, m.cores_total, "core_sram_bytes");
  if (r.sram_bytes_capacity > Bytes{0}) {
    m.sram_utilisation = static_cast<double>(r.sram_bytes_used.value) /
                         static_cast<double>(r.sram_bytes_capacity.value);
  }
  if (m.cores_total > 0)
    m.sram_bytes_per_core_capacity = Bytes{r.sram_bytes_capacity.value / m.cores_total};

  // Long double keeps the busy-cycle sum exact well past 2^53 (a full wafer
  // for a long run); the ratio is what we keep.
  long double busy = 0.0L;
  for (std::size_t i = 0; i < r.core_sram_bytes.size(); ++i) {
    if (r.core_sram_bytes[i] == 0) continue;
    ++m.cores_with_sram;
    m.max_core_sram_bytes = std::max(m.max_core_sram_bytes, Bytes{r.core_sram_bytes[i]});
    if (!r.core_busy_cycles.empty()) busy += static_cast<long double>(r.core_busy_cycles[i]);
  }
  for (std::size_t i = 0; i < r.core_busy_cycles.size(); ++i) {
    if (r.core_busy_cycles[i] > r.total_cycles.value) {
      throw std::logic_error("core " + std::to_string(i) + " busy for " +
                             std::to_string(r.core_busy_cycles[i]) + " cycles in a run of " +
                             std::to_string(r.total_cycles.value));
    }
  }
  m.sram_headroom_bytes = static_cast<double>(m.sram_bytes_per_core_capacity.value) -
                          static_cast<double>(m.max_core_sram_bytes.value);
  if (m.cores_with_sram > 0 && r.total_cycles > Cycles{0}) {
    m.core_utilisation = static_cast<double>(
        busy / (static_cast<long double>(m.cores_with_sram) * r.total_cycles.value));
  }
}

void derive_links(const RunResult& r, Metrics& m) {
  check_shape(r.link_bytes, m.cores_total * kLinkDirections, "link_bytes");
  std::size_t busiest = 0;
  for (std::size_t i = 0; i < r.link_bytes.size(); ++i) {
    m.total_link_bytes += Bytes{r.link_bytes[i]};
    if (r.link_bytes[i] > r.link_bytes[busiest]) busiest = i;  // first of equals wins
  }
  const double tokens = r.token_records.empty() ? 1.0 : static_cast<double>(r.token_records.size());
  m.hop_bytes_per_token = static_cast<double>(m.total_link_bytes.value) / tokens;
  if (r.link_bytes.empty() || r.link_bytes[busiest] == 0) return;

  BusiestLink link;
  const auto width = static_cast<std::size_t>(r.mesh_width);
  link.dir = static_cast<int>(busiest % kLinkDirections);
  link.x = static_cast<int>((busiest / kLinkDirections) % width);
  link.y = static_cast<int>((busiest / kLinkDirections) / width);
  if (r.mesh_height > 0) {  // wafers are stacked in y
    link.wafer = link.y / r.mesh_height;
    link.y %= r.mesh_height;
  }
  link.bytes = Bytes{r.link_bytes[busiest]};
  // A link carries at most link_bytes_per_cycle each cycle; more is an engine
  // bug. Compare in integers so a load of exactly 1.0 is not rejected by rounding.
  const unsigned __int128 capacity =
      static_cast<unsigned __int128>(r.total_cycles.value) * r.link_bytes_per_cycle.value;
  if (link.bytes.value > capacity) {
    throw std::logic_error(
        "link (" + std::to_string(link.x) + ", " + std::to_string(link.y) + ") " +
        std::string(direction_name(link.dir)) + " carried " + std::to_string(link.bytes.value) +
        " bytes in " + std::to_string(r.total_cycles.value) + " cycles at " +
        std::to_string(r.link_bytes_per_cycle.value) + " bytes/cycle: above its bandwidth");
  }
  link.load = static_cast<double>(link.bytes.value) / static_cast<double>(capacity);
  m.busiest_link = link;
}

void derive_critical_path(const RunResult& r, Metrics& m) {
  CycleBreakdown decode;
  CycleBreakdown prefill;
  std::uint64_t decode_tokens = 0;
  std::uint64_t prefill_tokens = 0;
  for (const TokenRecord& t : r.token_records) {
    if (t.prefill) {
      prefill += t.critical_path;
      ++prefill_tokens;
    } else {
      decode += t.critical_path;
      ++decode_tokens;
    }
  }
  if (decode_tokens > 0) {
    m.critical_path_basis = "decode";
    m.critical_path_tokens = decode_tokens;
    m.critical_path = decode;
  } else if (prefill_tokens > 0) {
    m.critical_path_basis = "prefill";
    m.critical_path_tokens = prefill_tokens;
    m.critical_path = prefill;
  } else {
    return;
  }

  const Cycles total = m.critical_path.total();
  if (total == Cycles{0}) return;  // tokens with no recorded cycles: nothing dominates
  Resource largest = Resource::compute;
  for (std::size_t i = 0; i < kPathCategoryCount; ++i) {
    const Resource c = kPathCategories[i];
    const Cycles cycles = cycles_in(m.critical_path, c);
    m.critical_path_share[i] = as_double(cycles) / as_double(total);
    if (cycles > cycles_in(m.critical_path, largest)) largest = c;  // first of equals wins
  }
  m.bottleneck = std::string(resource_name(largest));
}

}  // namespace

Metrics compute_metrics(const RunResult& result) {
  if (result.mesh_width < 0 || result.mesh_height < 0) {
    throw std::logic_error("RunResult has a negative mesh size");
  }
  Metrics m;
  m.cores_total = static_cast<std::uint64_t>(result.mesh_width) *
                  static_cast<std::uint64_t>(result.mesh_height) *
                  static_cast<std::uint64_t>(std::max(1, result.wafers));
  derive_timing(result, m);
  derive_cores(result, m);
  derive_links(result, m);
  derive_critical_path(result, m);
  m.tokens_match_reference = result.functional && result.tokens == result.reference_tokens;
  return m;
}

}  // namespace wafersim::analysis
