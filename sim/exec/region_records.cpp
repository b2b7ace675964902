#include "sim/exec/region_records.hpp"

namespace wafersim::sim {

void RegionRecords::fingerprint(fabric::Fabric& f, std::uint64_t origin, std::uint64_t cutoff,
                                const fabric::Rect& region, bool keep, fabric::StateHash& state) {
  fabric::FlowModel& flow = f.flow();
  fabric::CoreTimeline& cores = f.cores();
  flow.add_state_header(origin, region, state);
  team_.start(kParts + 1, [&](int k, int) {
    Part& p = scan_[static_cast<std::size_t>(k)];
    p.hash = fabric::StateHash{};
    p.live.clear();
    std::vector<std::uint32_t>* live = keep ? &p.live : nullptr;
    if (k < kParts)
      flow.add_state_part(origin, cutoff, region, k, kParts, p.hash, live);
    else
      cores.add_state_after(origin, cutoff, p.hash, live, &region);
  });
  team_.finish();
  for (const Part& p : scan_) state.add(p.hash);
}

void RegionRecords::shift_held(fabric::Fabric& f, std::uint64_t by) {
  fabric::FlowModel& flow = f.flow();
  fabric::CoreTimeline& cores = f.cores();
  team_.start(kParts + 1, [&](int k, int) {
    const std::vector<std::uint32_t>& live = held_[static_cast<std::size_t>(k)].live;
    if (k < kParts)
      flow.shift_some_records(live, by);
    else
      cores.shift_cores(live, by);
  });
  team_.finish();
}

void RegionRecords::Counts::clear() {
  for (auto& part : link_bytes) part.clear();
  core_busy.clear();
}

void RegionRecords::count_from(fabric::Fabric& f, const fabric::Rect& region) {
  f.flow().byte_counts(bytes_before_, &region);
  f.cores().copy_busy(region, busy_before_);
}

void RegionRecords::counts_since(fabric::Fabric& f, const fabric::Rect& region, Counts& out) {
  fabric::FlowModel& flow = f.flow();
  flow.settle_lines();
  out.link_bytes.resize(kParts);
  team_.start(kParts + 1, [&](int k, int) {
    if (k == kParts) {
      out.core_busy.clear();
      f.cores().add_busy_since(busy_before_, region, out.core_busy);
      return;
    }
    auto& part = out.link_bytes[static_cast<std::size_t>(k)];
    part.clear();
    flow.add_bytes_since(bytes_before_, region, k, kParts, part);
  });
  team_.finish();
}

void RegionRecords::add(fabric::Fabric& f, const Counts& c, std::uint64_t times) {
  for (const auto& part : c.link_bytes) f.flow().add_bytes(part, times);
  f.cores().add_busy(c.core_busy, times);
}

}  // namespace wafersim::sim
